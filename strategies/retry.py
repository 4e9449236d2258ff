"""Retries within one turn: how many, and how long to wait before each.

Rules
1. A turn asks again at most max_retries times after its first attempt, whatever went wrong.
2. A refusal, a truncated reply or a rejected action asks again at once: waiting would not change it.
3. A transient failure (rate limit, 5xx, a cut connection, a reply that could not be read) waits
   first: base_seconds, doubling with each wait of the turn, with equal jitter (half the step plus
   up to half again, so that many clients do not retry in step); never less than the provider's
   Retry-After and never more than max_seconds.
4. The waits of one turn never add up to more than max_total_seconds: a transient failure whose
   wait would pass it fails the turn closed instead.

Waiting is the machine's decision: it emits the exact number of seconds as an effect and the runner
sleeps, so tests drive it with a fake clock and never sleep.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from turnstate.adapters.contract import ErrorKind

RETRY_AT_ONCE = frozenset({ErrorKind.REFUSAL, ErrorKind.TRUNCATED})
RETRY_AFTER_WAIT = frozenset({ErrorKind.TRANSIENT})


@dataclass(frozen=True)
class Backoff:
    """The wait before retrying a transient failure (rules 3 and 4)."""

    base_seconds: float = 0.25
    max_seconds: float = 8.0
    max_total_seconds: float = 60.0


@dataclass
class TurnRetries:
    """The retry budget of one open turn."""

    max_retries: int
    backoff: Backoff
    used: int = 0
    waits: int = 0
    waited_seconds: float = 0.0

    @property
    def left(self) -> bool:
        return self.used < self.max_retries

    def spend(self) -> None:
        self.used += 1

    def wait_bound(self, retry_after: float | None) -> float:
        """The longest the next wait may be: the doubling step or the provider's ask, capped."""
        step = self.backoff.base_seconds * 2**self.waits
        return min(self.backoff.max_seconds, max(step, retry_after or 0.0))

    def can_wait(self, retry_after: float | None) -> bool:
        return self.waited_seconds + self.wait_bound(retry_after) <= self.backoff.max_total_seconds

    def next_wait(self, retry_after: float | None, rng: random.Random) -> float:
        """Draw the next wait (rule 3) and count it against the turn's total."""
        bound = self.wait_bound(retry_after)
        seconds = max(min(retry_after or 0.0, bound), bound * (0.5 + rng.random() / 2))
        self.waits += 1
        self.waited_seconds += seconds
        return seconds
