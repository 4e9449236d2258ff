"""Usage accounting: every provider call's usage is counted exactly once.

Usage from attempts that did not yield an accepted action (retries, refusals, overflows) is billed
too: it is attributed to the next accepted action's step, or left as `unattributed` in run_meta when
the run ends without one. No failed step is fabricated to hold it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from turnstate.adapters.contract import Usage

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
