"""Real provider traffic recorded by pydantic-ai's test cassettes (MIT; see their NOTICE), read from
../shared/recorded when it is there: the ground truth the local provider's replies are held to. It
is never copied into the project; a test that needs it skips, saying so, when it is absent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

RECORDED = Path(__file__).resolve().parents[2] / "shared" / "recorded" / "cassettes"


def interactions(cassette: str) -> list[dict[str, Any]]:
    """The recorded request-reply pairs of `cassette` (a path under the cassettes folder)."""
    path = RECORDED / cassette
    if not path.exists():
        pytest.skip(f"the recorded traffic is not here ({path}); it lives in ../shared/recorded")
    found: list[dict[str, Any]] = yaml.safe_load(path.read_text())["interactions"]
    return found
