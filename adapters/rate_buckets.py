"""A provider's rate limit as token buckets: requests a minute and tokens a minute, each a bucket
that holds `burst_seconds` of its rate and refills continuously, as providers enforce a per-minute
limit over shorter spans (OpenAI: "60,000 requests/minute may be enforced as 1,000 requests/second").

A request may go once the request bucket holds one request and the token bucket holds its tokens, or
the whole bucket when the request is larger than it; the tokens are then taken, down into debt if
need be, so a large request is paid for by the time that follows it. A Retry-After holds every
request until it has passed.

Pure arithmetic on a clock's seconds: the local provider enforces a rate with it (the 429s of a real
limiter), and a run's shared limiter keeps under one with it (turnstate/session/rate_limit.py), its
state in a file every process sharing the limit reads and writes under a lock.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

SECONDS_A_MINUTE = 60.0
ROUNDING = 1e-9  # what continuous refills lose to floating point: a level this short of full is full


@dataclass(frozen=True)
class Rate:
    """Requests and tokens a minute (None: not limited), and how many seconds of each a bucket holds."""

    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    burst_seconds: float = 1.0

    def capacity(self, per_minute: float | None) -> float:
        """What a bucket of `per_minute` holds: `burst_seconds` of it, and never less than one."""
        return math.inf if per_minute is None else max(1.0, per_minute / SECONDS_A_MINUTE * self.burst_seconds)


@dataclass
class Buckets:
    """The levels of a rate's two buckets at `at` (clock seconds), and the time no request may go
    before (`held_until`: a Retry-After)."""

    requests: float
    tokens: float
    at: float
    held_until: float = -math.inf

    @classmethod
    def full(cls, rate: Rate, now: float) -> Buckets:
        return cls(rate.capacity(rate.requests_per_minute), rate.capacity(rate.tokens_per_minute), now)

    @classmethod
    def from_dict(cls, data: Any, rate: Rate, now: float) -> Buckets:
        """The buckets a file holds, or full ones when it holds nothing readable (a new or torn file:
        a full bucket lets at most one burst through, which the provider's own limit allows)."""
        try:
            buckets = cls(float(data["requests"]), float(data["tokens"]), float(data["at"]), float(data["held_until"]))
        except (TypeError, KeyError, ValueError):
            return cls.full(rate, now)
        values = (buckets.requests, buckets.tokens, buckets.at, buckets.held_until)
        return cls.full(rate, now) if any(map(math.isnan, values)) else buckets

    def to_dict(self) -> dict[str, float]:
        return asdict(self)

    def refill(self, rate: Rate, now: float) -> None:
        """Bring the levels to `now`: each bucket fills at its rate up to its capacity (a clock that
        went back refills nothing)."""
        elapsed, self.at = max(0.0, now - self.at), max(self.at, now)
        self.requests = _filled(
            self.requests, rate.requests_per_minute, rate.capacity(rate.requests_per_minute), elapsed
        )
        self.tokens = _filled(self.tokens, rate.tokens_per_minute, rate.capacity(rate.tokens_per_minute), elapsed)

    def wait(self, rate: Rate, tokens: int) -> float:
        """Seconds from `at` until a request of `tokens` may go; 0.0: now (refill first)."""
        waits = [
            self.held_until - self.at,
            _time_to(self.requests, 1.0, rate.requests_per_minute),
            _time_to(self.tokens, min(float(tokens), rate.capacity(rate.tokens_per_minute)), rate.tokens_per_minute),
        ]
        return max(0.0, *waits)

    def try_take(self, rate: Rate, tokens: int) -> float:
        """Take a request of `tokens` if it may go now (0.0), else the seconds until it may (refill first)."""
        wait = self.wait(rate, tokens)
        if wait <= 0:
            self.take(rate, tokens)
        return wait

    def take(self, rate: Rate, tokens: int) -> None:
        """Take one request and `tokens` (once `wait` said 0.0)."""
        if rate.requests_per_minute is not None:
            self.requests -= 1.0
        if rate.tokens_per_minute is not None:
            self.tokens -= tokens

    def give_back(self, rate: Rate, tokens: int) -> None:
        """Return tokens taken and not used (negative: take the ones used beyond what was taken)."""
        if rate.tokens_per_minute is not None:
            self.tokens = min(rate.capacity(rate.tokens_per_minute), self.tokens + tokens)

    def hold(self, until: float) -> None:
        """No request before `until` (never shortening a hold already longer)."""
        self.held_until = max(self.held_until, until)


def _filled(level: float, per_minute: float | None, capacity: float, elapsed: float) -> float:
    if per_minute is None:
        return capacity
    return min(capacity, level + per_minute / SECONDS_A_MINUTE * elapsed)


def _time_to(level: float, needed: float, per_minute: float | None) -> float:
    if per_minute is None or level >= needed - ROUNDING:
        return 0.0
    return (needed - level) / (per_minute / SECONDS_A_MINUTE)
