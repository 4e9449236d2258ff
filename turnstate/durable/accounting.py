"""Usage accounting: every provider call's usage is counted exactly once.

Usage from attempts that did not yield an accepted action (retries, refusals, overflows) is billed
too: it is attributed to the next accepted action's step, or left as `unattributed` in run_meta when
the run ends without one. No failed step is fabricated to hold it.

A run that writes artifacts also journals each call's usage as it returns (`UsageJournal`,
calls.jsonl): a checkpoint's ledger counts the calls up to its turn, and a run killed after a call
but before its turn committed has paid for that call all the same. A resume counts the calls the
journal holds past its checkpoint once, as the next step's, and plays the turn again.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from turnstate.adapters.contract import Usage
from turnstate.durable.jsonl import AppendedLines, whole_lines

PER_MILLION = 1_000_000


@dataclass(frozen=True)
class Prices:
    """Configured prices in USD per million tokens; only for the cost estimate."""

    input_per_million: float = 0.0
    output_per_million: float = 0.0


@dataclass
class Ledger:
    prices: Prices
    total: Usage = Usage()
    calls: int = 0
    _since_last_step: Usage = field(default_factory=Usage)

    def record_call(self, usage: Usage) -> None:
        self.calls += 1
        self.total += usage
        self._since_last_step += usage

    def take_for_step(self) -> Usage:
        """The usage of every call since the previous accepted step, now attributed to this one."""
        usage, self._since_last_step = self._since_last_step, Usage()
        return usage

    @property
    def unattributed(self) -> Usage:
        return self._since_last_step

    def cost(self, usage: Usage) -> float:
        """A configured-price estimate; it does not reconstruct cache discounts or invoices."""
        prices = self.prices
        return (
            usage.input_tokens * prices.input_per_million + usage.output_tokens * prices.output_per_million
        ) / PER_MILLION


@dataclass(frozen=True)
class CallFacts:
    """What a journal line says of a call besides its usage, for the run's traces
    (turnstate/durable/traces.py): the turn and which of its provider calls it was (from 1, as the
    events' `attempt`), how it came out (Attempt.outcome: replied, compacted, or the failure's error
    kind), and when it ran, in Unix nanoseconds, after waiting `waited_on_limit` seconds on the shared
    rate limit (client.rate_limit). Lines an older turnstate wrote have none of these."""

    turn: int
    attempt: int
    outcome: str
    started: int
    ended: int
    waited_on_limit: float = 0.0


class UsageJournal:
    """Appends one line per provider call (its number in the run, its kind, its usage, its CallFacts)
    to `path`, flushed to the operating system as it is written, so a killed process loses at most
    that line."""

    def __init__(self, path: Path) -> None:
        self._lines = AppendedLines(path)

    def record(self, number: int, kind: str, usage: Usage, facts: CallFacts) -> None:
        self._lines.write({"call": number, "kind": kind, "usage": usage.to_dict(), **asdict(facts)})

    def close(self) -> None:
        self._lines.close()

    @staticmethod
    def calls_after(path: Path, counted: int) -> list[Usage]:
        """The usage of the calls journaled at `path` after the first `counted` (whole lines only: a
        torn last line is a call whose reply the kill took before it was counted anywhere)."""
        lost = []
        for number, line in enumerate(whole_lines(path)[0].splitlines(), 1):
            try:
                entry = json.loads(line)
                if entry["call"] > counted:
                    lost.append(Usage.from_dict(entry["usage"]))
            except (ValueError, KeyError, TypeError):
                raise UsageJournalError(
                    f"{path}: line {number} is not a call's usage; fix: restore the file as the run wrote it"
                ) from None
        return lost


class UsageJournalError(Exception):
    """A usage journal a resume cannot count from; the message names the file and line."""
