"""The retry rules of one turn (strategies/retry.py): how many, and how long each wait is."""

from __future__ import annotations

import random

import pytest

from turnstate.strategies.retry import Backoff, TurnRetries

BACKOFF = Backoff(base_seconds=0.25, max_seconds=8.0, max_total_seconds=60.0)


class Fixed(random.Random):
    """A random source that always draws the same number, to pin the jitter."""

    def __init__(self, value: float) -> None:
        super().__init__()
        self.value = value

    def random(self) -> float:
        return self.value


@pytest.mark.parametrize(("draw", "factor"), [(0.0, 0.5), (0.5, 0.75), (0.999999, 1.0)])
def test_waits_double_from_the_base_with_equal_jitter(draw, factor):
    retries = TurnRetries(max_retries=5, backoff=BACKOFF)
    waits = [retries.next_wait(None, Fixed(draw)) for _ in range(4)]
    assert waits == pytest.approx([0.25 * factor, 0.5 * factor, 1.0 * factor, 2.0 * factor], abs=1e-5)
    assert retries.waited_seconds == pytest.approx(sum(waits))


def test_a_wait_is_never_shorter_than_the_providers_retry_after():
    retries = TurnRetries(max_retries=5, backoff=BACKOFF)
    assert retries.next_wait(3.0, Fixed(0.0)) == 3.0  # jitter may not cut below what was asked
    assert retries.next_wait(0.1, Fixed(0.0)) == pytest.approx(0.25)  # the second step, jittered to half


def test_no_wait_is_longer_than_max_seconds_whatever_the_provider_asks():
    retries = TurnRetries(max_retries=9, backoff=BACKOFF)
    assert retries.next_wait(120.0, Fixed(0.999999)) == pytest.approx(8.0)
    for _ in range(8):
        assert retries.next_wait(None, Fixed(0.999999)) <= 8.0


def test_the_turns_waits_are_bounded_in_total():
    retries = TurnRetries(max_retries=9, backoff=Backoff(base_seconds=1.0, max_seconds=8.0, max_total_seconds=10.0))
    assert retries.can_wait(None)  # 1 s
    retries.next_wait(None, Fixed(0.999999))
    retries.next_wait(None, Fixed(0.999999))  # 1 + 2 = 3 s waited
    assert retries.can_wait(None)  # + 4 s = 7 s
    retries.next_wait(None, Fixed(0.999999))
    assert not retries.can_wait(None)  # + 8 s would be 15 s
    assert not retries.can_wait(5.0)


def test_retries_are_counted_whatever_their_cause():
    retries = TurnRetries(max_retries=2, backoff=BACKOFF)
    assert retries.left
    retries.spend()
    retries.spend()
    assert not retries.left
