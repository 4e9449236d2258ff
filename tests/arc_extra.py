"""Whether this install can play ARC-AGI-3 games (the `arc` extra: the official toolkit, Python 3.12
or later), and which shipped profiles need it. Without it a profile that names arc_agi3 is refused
at validation (turnstate/environments/arc_agi3.py), so a test of every shipped profile leaves such a
profile out, saying so (tests/conftest.py); .ci/arc runs the arc tests in a Python 3.12 virtual
environment with the extra."""

from __future__ import annotations

import functools
from pathlib import Path

import yaml

from turnstate.environments.arc_agi3 import missing_toolkit
from turnstate.session.profile import PROFILES_DIR

TOOLKIT = missing_toolkit() is None
REASON = (
    "names the arc_agi3 environment, which needs the ARC-AGI-3 toolkit (Python 3.12 or later and "
    "pip install -e '.[arc]' in turnstate's checkout); .ci/arc runs it"
)


@functools.lru_cache(maxsize=None)
def needs_toolkit(profile: Path | str) -> bool:
    """Whether `profile` (a profile file, or a shipped profile's name) names arc_agi3 and this
    install lacks the toolkit."""
    if TOOLKIT:
        return False
    path = Path(profile) if str(profile).endswith(".yaml") else PROFILES_DIR / f"{profile}.yaml"
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, yaml.YAMLError):
        return False
    environment = data.get("environment") if isinstance(data, dict) else None
    return isinstance(environment, dict) and environment.get("name") == "arc_agi3"
