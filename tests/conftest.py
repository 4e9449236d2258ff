"""Fixtures every layer's tests share."""

from __future__ import annotations

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
