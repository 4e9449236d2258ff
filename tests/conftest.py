"""Fixtures every layer's tests share."""

from __future__ import annotations

import os

import pytest


class FakeClock:
    """Monotonic seconds that pass only when someone sleeps: the runner's waits and the local
    provider's rate-limit window, driven without a real second going by."""

    def __init__(self) -> None:
        self.seconds = 1000.0
        self.slept: list[float] = []

    def now(self) -> float:
        return self.seconds

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.seconds += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(autouse=True, scope="session")
def local_provider_services(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The embedded provider's services (harness/endpoint.py local_service_dir) in the session's
    temporary folder, never the user's state folder; subprocesses inherit it."""
    os.environ["XDG_STATE_HOME"] = str(tmp_path_factory.mktemp("state_home"))
