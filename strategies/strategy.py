"""What every strategy machine declares about itself, and the plain settings it is started with.

A strategy is one `Strategy`: its machine as each compaction it composes with assembles it, the model
class that implements the tables' guards and actions, and how to start it. The machine list, the
profile's allowed values, the diagrams and the coverage gate all derive from the strategies, so adding
a strategy is writing its module and listing it once (strategies/__init__.py).

Strategies never see the profile: the harness builds a `StrategySettings` from it once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from turnstate.adapters.contract import Input, ToolCall, ToolResult, ToolSpec, Transcript
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


@dataclass(frozen=True)
class ProjectedTurn:
    """One accepted turn as the projection holds it."""

    inputs: tuple[Input, ...]  # its user inputs, in order (buffered ones first), with the images they showed
    text: str  # the accepted reply's text
    tool_calls: tuple[ToolCall, ...] = ()
    results: tuple[ToolResult, ...] = ()  # the results of its calls, in the calls' order, once answered


@dataclass(frozen=True)
class Rebuilt:
    """A rebuilt state, how many of the oldest turns it left out to fit, and whether its history is
    due for compaction (strategies/projection.py, rule 2)."""

    state: RuntimeState
    dropped_turns: int
    compaction_due: bool


StartFn = Callable[[StrategySettings, Transcript, RuntimeState | None, str | None], LiveMachine[StrategyModel]]
"""Start a live machine on the given accepted state or a fresh one, carrying the selected adapter's
items through its transcript, resting in its initial state or in the given one (a state between
turns: where a resumed run's machine was)."""

RebuildFn = Callable[[StrategySettings, Transcript, Sequence[ProjectedTurn]], Rebuilt]
"""An accepted state rebuilt from the conversation's projection (strategies/projection.py)."""


@dataclass(frozen=True)
class Strategy:
    """A strategy: its machine as each compaction kind it composes with assembles it (`specs`, keyed by
    `compaction.Kind`), the model class, how to start it, and how to rebuild its accepted state from
    the conversation's projection."""

    specs: Mapping[Kind, MachineSpec]
    model: type[StrategyModel]
    start: StartFn
    rebuild: RebuildFn

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
