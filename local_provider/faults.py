"""Fault injection for the embedded local provider.

A harness must survive the failures real providers produce, and a test of that needs the failure on
a known request, every run. So faults are scheduled by request ordinal, never drawn at random: the
provider numbers every model request it admits (1, 2, 3 ... across its lifetime, whatever the wire)
and asks the schedule for the fault of that number.

What each kind does (each wire words it in its own protocol):
- rate_limit, server_error, overloaded: an HTTP error (429, 500, 503/529) before the request is read.
  A rate_limit with `retry_after_seconds` says so in `retry-after`/`retry-after-ms`, and the provider
  then refuses every request with 429 until that time has passed, as a real rate limiter does; without
  it, the 429 says `retry-after: 0` and the next request is served.
- stream_cut: a stream stops after its first event or two without its end; a non-streamed request
  gets its connection closed with no response at all.
- refusal: an empty reply ended by the content filter (Messages shows the text the model had
  written before the filter stopped it; the OpenAI wires show nothing).
- pause_turn: the whole reply, naming its action, ended as paused mid-turn (Messages stop_reason
  pause_turn); a wire that has no pause words it as its truncation.
- truncation: the first half of the reply, ended as if by the token limit.
- empty: an empty reply that ends normally.
- malformed: a fixed reply that is no valid action, ending normally: a whole reply the adapter
  reads, for the action parser to refuse, not one it cannot read whole (as html_page, garbled,
  empty_choices and null_message are: transient failures); on a summary request it is the summary.
- leak_key: the normal reply plus a line repeating the request's API key, as a model tricked into
  echoing a credential would; it lets an end-to-end test prove that artifacts redact the key.
- html_page: a 200 whose body is an HTML page, as a proxy or captive portal answers, before the wire.
- garbled: a 200 the wire starts correctly and then garbles: a JSON body cut in the middle, or an
  event stream with a data line that is not JSON.
- empty_choices: a well-formed 200 with its usage but an empty `choices` list (every chunk, when streamed).
- null_message: a well-formed 200 whose choice has `message: null` (`delta: null`, when streamed).
The last four are replies a client must survive: the SDKs do not validate what a 200 carries.
- context_overflow: the request gets the wire's own context-length error, as if the model's window
  could not hold it (the wire's overflow check runs against a window of 0).
- expire_handle: before serving the request, the provider forgets every response it stored (OpenAI
  Responses with store: true), as a real one does when they expire, in its service folder too
  (service.py), so a later provider on it has forgotten them as well; a `previous_response_id` then
  gets the 404 an expired handle gets. A wire that stores nothing serves the request as usual.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, get_args

FaultKind = Literal[
    "rate_limit",
    "server_error",
    "overloaded",
    "stream_cut",
    "refusal",
    "pause_turn",
    "truncation",
    "empty",
    "malformed",
    "leak_key",
    "html_page",
    "garbled",
    "empty_choices",
    "null_message",
    "expire_handle",
    "context_overflow",
]
FAULT_KINDS: frozenset[str] = frozenset(get_args(FaultKind))

# Answered with an HTTP error status before the wire reads the body, as a real gateway would.
STATUS_FAULTS: frozenset[str] = frozenset({"rate_limit", "server_error", "overloaded"})

HTML_PAGE = b"<!DOCTYPE html><html><body><h1>502 Bad Gateway</h1></body></html>"
"""What an `html_page` fault answers with status 200 in place of the API's JSON."""

Clock = Callable[[], float]
"""Seconds on a clock that never goes back (time.monotonic); tests pass a fake one."""


@dataclass(frozen=True)
class Fault:
    """Inject `kind` into the model request whose 1-based ordinal is `at`."""

    at: int
    kind: FaultKind
    retry_after_seconds: float | None = None  # rate_limit only: refuse every request until it has passed

    def __post_init__(self) -> None:
        if isinstance(self.at, bool) or not isinstance(self.at, int) or self.at < 1:
            raise ValueError(f"Fault.at must be a request ordinal >= 1, got {self.at!r}")
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}; expected one of {sorted(FAULT_KINDS)}")
        wait = self.retry_after_seconds
        if wait is None:
            return
        if self.kind != "rate_limit":
            raise ValueError(f"retry_after_seconds applies to rate_limit only, not {self.kind!r}")
        if isinstance(wait, bool) or not isinstance(wait, (int, float)) or not math.isfinite(wait) or wait <= 0:
            raise ValueError(f"Fault.retry_after_seconds must be a finite number of seconds > 0, got {wait!r}")


def first_repeated_ordinal(ordinals: Iterable[int]) -> int | None:
    """The rule that a request gets at most one fault: the first ordinal given twice, or None."""
    seen: set[int] = set()
    for ordinal in ordinals:
        if ordinal in seen:
            return ordinal
        seen.add(ordinal)
    return None


class FaultSchedule:
    """At most one fault per ordinal; each fault fires once, when its ordinal is taken."""

    def __init__(self, faults: Sequence[Fault] = ()) -> None:
        repeated = first_repeated_ordinal(fault.at for fault in faults)
        if repeated is not None:
            raise ValueError(f"two faults scheduled for request {repeated}")
        self._pending = {fault.at: fault for fault in faults}
        self._lock = threading.Lock()

    def take(self, ordinal: int) -> Fault | None:
        """The fault scheduled for request `ordinal`, removed from the schedule; None if there is none."""
        with self._lock:
            return self._pending.pop(ordinal, None)


class RateLimitWindow:
    """The time a rate_limit fault told clients to wait; every request inside it is refused with 429.

    A real limiter that says `retry-after: 5` means it: a client that comes back sooner is refused
    again. Measured on a monotonic clock, so a wall-clock change cannot shorten or stretch it.
    """

    def __init__(self, clock: Clock = time.monotonic) -> None:
        self._clock = clock
        self._until = -math.inf
        self._lock = threading.Lock()

    def open(self, seconds: float) -> None:
        """Refuse requests for `seconds` from now (never shortening a window already open)."""
        with self._lock:
            self._until = max(self._until, self._clock() + seconds)

    def remaining(self) -> float:
        """Seconds until requests are served again; 0.0 when the window is closed."""
        with self._lock:
            return max(0.0, self._until - self._clock())
