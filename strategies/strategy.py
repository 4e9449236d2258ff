"""What every strategy machine declares about itself, and the plain settings it is started with.

A strategy is one `Strategy`: its machine as each compaction it composes with assembles it, the model
class that implements the tables' guards and actions, and how to start it. The machine list, the
profile's allowed values, the diagrams and the coverage gate all derive from the strategies, so adding
a strategy is writing its module and listing it once (strategies/__init__.py).

Strategies never see the profile: the harness builds a `StrategySettings` from it once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from turnstate.adapters.contract import ToolSpec, Transcript
from turnstate.machine.engine import LiveMachine, MachineModel, MachineSpec
from turnstate.strategies.compaction import Compaction, Kind, NoCompaction
from turnstate.strategies.offload import Offload
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
    tools: tuple[ToolSpec, ...] = ()  # the function tools every request of the run offers
    offload: Offload | None = None  # stale tool-result offload of outgoing requests (None: off)
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
    """A strategy: its machine as each compaction kind it composes with assembles it (`specs`, keyed by
    `compaction.Kind`), the model class, and how to start it."""

    specs: Mapping[Kind, MachineSpec]
    model: type[StrategyModel]
    start: StartFn

    @property
    def name(self) -> str:
        return next(iter(self.specs.values())).name

    @property
    def compaction(self) -> tuple[str, ...]:
        """The profile's runtime.compaction.strategy values it accepts: "native" stands for the
        adapter's own way, inline or by a call."""
        names = {
            "none": "none",
            "native_inline": "native",
            "native_call": "native",
            "harness_summary": "harness_summary",
        }
        return tuple(dict.fromkeys(names[kind] for kind in self.specs))
