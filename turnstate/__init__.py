"""turnstate: an LLM agent's runtime state, carried across turns as explicit state machines.

The Python API for your own agent loop (README: "Python API"; docs/python-api.md):

- `Session`: open it from a profile (`load_profile`) as a context manager; `observe` an input, get
  the model's `Turn`, then `accept` or `reject` it: only what you accept commits.
- `FailedClosed`: a turn that cannot go on; the accepted state is intact.
- `RuntimeState`: the accepted state (`Session.accepted_state`), serializable with `to_json`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from turnstate.session.profile import DEFAULT_PROFILE, Profile, load_profile, parse_profile
    from turnstate.session.session import FailedClosed, RunResult, Session, Turn
    from turnstate.session.settings_file import ProfileError
    from turnstate.strategies.state import RuntimeState

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_PROFILE",
    "FailedClosed",
    "Profile",
    "ProfileError",
    "RunResult",
    "RuntimeState",
    "Session",
    "Turn",
    "load_profile",
    "parse_profile",
]

_HOMES = {
    **dict.fromkeys(("DEFAULT_PROFILE", "Profile", "load_profile", "parse_profile"), "session.profile"),
    "ProfileError": "session.settings_file",
    **dict.fromkeys(("FailedClosed", "RunResult", "Session", "Turn"), "session.session"),
    "RuntimeState": "strategies.state",
}


def __getattr__(name: str) -> Any:
    """The API's names load their modules when first used, so `import turnstate` (and the command
    line's start) loads no engine, SDK or local provider."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'turnstate' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"turnstate.{home}"), name)
    globals()[name] = value
    return value
