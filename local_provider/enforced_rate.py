"""A rate the local provider enforces as a real limiter does: a request over it is refused with 429
and told how long to wait (Retry-After), before anything of it is served.

Requests and tokens a minute, as token buckets that hold one second of each (adapters/rate_buckets.py).
A request's tokens are what OpenAI's limiter counts before a model has read it: its characters over
four (its body's bytes, here), so a client that reserves its own estimate plus its output cap keeps
under the limit.
"""

from __future__ import annotations

import threading

from turnstate.adapters.rate_buckets import Buckets, Rate
from turnstate.adapters.tokens import BYTES_PER_TOKEN
from turnstate.local_provider.faults import Clock


class EnforcedRate:
    def __init__(self, rate: Rate, clock: Clock) -> None:
        self.rate, self._clock = rate, clock
        self._buckets = Buckets.full(rate, clock())
        self._lock = threading.Lock()
        self.refused = 0  # the requests it refused so far

    def admit(self, body_bytes: int) -> float | None:
        """None: the request may be served (its share is taken); else the seconds it must wait."""
        tokens = body_bytes // BYTES_PER_TOKEN
        with self._lock:
            self._buckets.refill(self.rate, self._clock())
            wait = self._buckets.try_take(self.rate, tokens)
        if wait <= 0:
            return None
        self.refused += 1
        return wait
