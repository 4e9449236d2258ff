"""What every strategy machine declares about itself, and the plain settings it is started with.

A strategy is one `Strategy`: its machine table, the model class that implements the table's
guards and actions, how to start it, and which compaction machines it composes with. The machine list,
the profile's allowed values, the diagrams and the coverage gate all derive from the records, so adding
a strategy is writing its module and listing its record once (strategies/__init__.py).

Strategies never see the profile: the harness builds a `StrategySettings` from it once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from turnstate.adapters.contract import Transcript
from turnstate.machine.engine import LiveMachine, MachineModel, MachineSpec
from turnstate.strategies.compaction import Compaction, NoCompaction
from turnstate.strategies.retry import Backoff
from turnstate.strategies.state import RuntimeState


@dataclass(frozen=True)
class StrategySettings:
    """The values a strategy machine needs, taken from the profile by the harness."""

    adapter_id: str
    system_prompt: str
    max_retries: int
    max_context_length: int  # the context budget, in estimated tokens
    max_output_tokens: int  # the output allowance of every request
    # manual_rolling: a window over the budget is trimmed down to this fraction of the prompt budget
    # (1: only what must go, so the prefix moves every turn once the window is full).
    trim_low_water: float = 1.0
    compaction: Compaction = NoCompaction()  # how the strategy compacts (strategies/compaction.py)
    backoff: Backoff = Backoff()
    random_seed: int | None = None  # for the backoff's jitter; None draws a fresh seed


class StrategyModel(MachineModel):
    """Base of every strategy machine's model: whatever else it holds, it holds the last accepted state."""

    accepted: RuntimeState


StartFn = Callable[[StrategySettings, Transcript, RuntimeState | None], LiveMachine[StrategyModel]]
"""Start a live machine resting in its initial state, on the given accepted state or a fresh one,
carrying the selected adapter's items through its transcript."""


@dataclass(frozen=True)
class Strategy:
    spec: MachineSpec
    model: type[StrategyModel]
    start: StartFn
    compaction: tuple[str, ...] = ("none",)  # the compaction machines it accepts; "none" means without

    @property
    def name(self) -> str:
        return self.spec.name
