"""The user's state folder for turnstate, outside every run folder: `$XDG_STATE_HOME/turnstate`, else
`~/.local/state/turnstate`. It holds what outlives a run's process and must never be in a run
folder, which people copy and share: the embedded local provider's services (turnstate/session/endpoint.py)
and the checkpoint key a run seals its continuation with (turnstate/durable/checkpoints/cipher.py)."""

from __future__ import annotations

import os
from pathlib import Path

STATE_VARIABLE = "XDG_STATE_HOME"


def state_home() -> Path:
    """turnstate's folder in the user's state folder (not made here)."""
    return Path(os.environ.get(STATE_VARIABLE) or Path.home() / ".local" / "state") / "turnstate"
