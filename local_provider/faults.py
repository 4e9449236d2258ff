"""Fault injection for the embedded local provider.

A harness must survive the failures real providers produce, and a test of that needs the failure on
a known request, every run. So faults are scheduled by request ordinal, never drawn at random: the
provider numbers every model request it admits (1, 2, 3 ... across its lifetime, whatever the wire)
and asks the schedule for the fault of that number.

What each kind does (each wire words it in its own protocol):
- rate_limit, server_error, overloaded: an HTTP error (429, 500, 503/529) before the request is read.
- stream_cut: a stream stops after its first event or two without its end; a non-streamed request
  gets its connection closed with no response at all.
- refusal: an empty reply ended by the content filter.
- truncation: the first half of the reply, ended as if by the token limit.
- empty: an empty reply that ends normally.
- malformed: a fixed reply that is no valid action, ending normally.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, get_args

FaultKind = Literal[
    "rate_limit", "server_error", "overloaded", "stream_cut", "refusal", "truncation", "empty", "malformed"
]
FAULT_KINDS: frozenset[str] = frozenset(get_args(FaultKind))

# Answered with an HTTP error status before the wire reads the body, as a real gateway would.
STATUS_FAULTS: frozenset[str] = frozenset({"rate_limit", "server_error", "overloaded"})


@dataclass(frozen=True)
class Fault:
    """Inject `kind` into the model request whose 1-based ordinal is `at`."""

    at: int
    kind: FaultKind

    def __post_init__(self) -> None:
        if isinstance(self.at, bool) or not isinstance(self.at, int) or self.at < 1:
            raise ValueError(f"Fault.at must be a request ordinal >= 1, got {self.at!r}")
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}; expected one of {sorted(FAULT_KINDS)}")


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
