"""What the durable layer's tests share."""

from __future__ import annotations

import pytest

from turnstate.durable.checkpoints import KEY_VARIABLE, OPT_OUT


@pytest.fixture(autouse=True)
def no_key(monkeypatch):
    """Plain stores unless a test gives a key (the key file is tested in tests/harness/test_checkpoints.py)."""
    monkeypatch.setenv(KEY_VARIABLE, OPT_OUT)
