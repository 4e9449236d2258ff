"""Where the shipped profiles are, and their names: standard library only, so that a shell's
completion (cli/common.py) lists them without loading the engine."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

PROFILES_DIR = Path(str(files("turnstate.profiles")))  # the shipped profiles, however installed


def shipped_names() -> list[str]:
    """The shipped profiles' names (their file names without `.yaml`), in order."""
    return sorted(path.stem for path in PROFILES_DIR.glob("*.yaml"))
