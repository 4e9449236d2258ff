"""How a strategy compacts: one typed value, built once from the profile (turnstate/session/profile.py) and used
by the strategies, the runner and run_meta.json alike.

A tagged union, each variant holding only what it needs:
- `NoCompaction`: the history is never compacted;
- `NativeInline`: the provider compacts inside an action reply (OpenAI), triggered by the request's
  own option, so the harness holds no trigger of its own;
- `NativeByCall`: a provider-native compaction that is a call of its own (xAI, Anthropic), scheduled
  when an accepted action's completed context reaches `trigger_tokens`, with its own output cap;
- `HarnessSummary`: the model's summary installed by the harness (strategies/summary.py), scheduled
  the same way, with its output cap, the headroom validation keeps for its request, and whether it
  may fork the latest action request.

`kind` names the variant where a name is needed (a diagram's file, a record); `policy()` is what
run_meta.json records under runtime.compaction. `HeldCompaction` is what a compaction made in the open
turn holds until the turn commits.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, ClassVar, Literal

from turnstate.adapters.contract import Item
from turnstate.strategies.events import ReportSummary
from turnstate.strategies.state import TurnSpan

Kind = Literal["none", "native_inline", "native_call", "harness_summary"]


@dataclass(frozen=True)
class NoCompaction:
    kind: ClassVar[Kind] = "none"

    def policy(self) -> dict[str, Any]:
        return {"kind": self.kind}


@dataclass(frozen=True)
class NativeInline:
    kind: ClassVar[Kind] = "native_inline"

    def policy(self) -> dict[str, Any]:
        return {"kind": self.kind}


@dataclass(frozen=True)
class NativeByCall:
    trigger_tokens: int  # an accepted action's completed context that schedules a compaction
    max_output_tokens: int  # the compaction request's own output cap (where the provider takes one)
    kind: ClassVar[Kind] = "native_call"

    def policy(self) -> dict[str, Any]:
        return {"kind": self.kind, **asdict(self)}


@dataclass(frozen=True)
class HarnessSummary:
    trigger_tokens: int  # an accepted action's completed context that schedules a summary
    max_output_tokens: int  # the summary request's output cap
    input_headroom_tokens: int  # room validation keeps for the summary request beyond trigger and cap
    fork: bool  # whether a summary request may fork the latest action request
    kind: ClassVar[Kind] = "harness_summary"

    def policy(self) -> dict[str, Any]:
        return {"kind": self.kind, **asdict(self)}


Compaction = NoCompaction | NativeInline | NativeByCall | HarnessSummary
ByCall = NativeByCall | HarnessSummary  # the compactions that are calls of their own, scheduled by a trigger

KINDS: tuple[Kind, ...] = ("none", "native_inline", "native_call", "harness_summary")


@dataclass(frozen=True)
class HeldCompaction:
    """The open turn's provisional compaction of the accepted history, as a nested compaction machine
    left it: the items and turn spans that replace the accepted history. It commits only with the
    turn's accepted action (continuous_conversation rule 5)."""

    by: Literal["call", "summary"]
    items: list[Item]
    spans: list[TurnSpan]
    report: ReportSummary | None = None  # a harness summary's, for the runner to write
