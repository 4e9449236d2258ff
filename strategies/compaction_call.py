"""compaction_call: the nested machine of a provider-native compaction that is a call of its own (xAI,
Anthropic), with the guards and actions its rows name (`CompactionCall`, mixed into the strategy that
nests the machine).

Rules
1. Entering the machine asks for the compaction. The request holds only the accepted history: the
   turn's fresh and buffered inputs are not compacted; they follow the compacted history in the
   action request. It carries the compaction's own output cap. An unread last turn (tool results no
   reply has read: strategies/state.py) is compacted with the rest: a provider's compacted window
   stands for everything it replaced, and no item from before it may follow it (the Responses
   service refuses a reasoning item replayed after a compaction it preceded), so it is the
   provider's summary that carries those results.
2. Its failures are retried as an action request's (strategies/retry.py), from the same budget: the
   compaction and the action form one provisional turn.
3. A compaction reply is held as the turn's provisional history (Compacted, final): the parent goes on
   to the action request. What the machine leaves unhandled (a failure without retries left, an
   overflow) is the parent's to say: continuous_conversation fails the turn closed.
"""

from __future__ import annotations

import enum

from turnstate.adapters.contract import ModelRequest
from turnstate.machine.engine import MachineSpec, Transition
from turnstate.strategies.compaction import Compaction, HeldCompaction, NativeByCall
from turnstate.strategies.events import BackoffElapsed, CallCompaction, CompactionReplied, ProviderFailed
from turnstate.strategies.state import TurnSpan
from turnstate.strategies.turn import TurnTaking

NAME = "compaction_call"


class State(enum.Enum):
    Requesting = "the accepted history is with the provider to be compacted"
    BackingOff = "a transient failure; waiting before asking again for the compaction"
    Compacted = "the compacted history is held; it commits only with this turn's accepted action"


T = Transition
S = State

# fmt: off
TRANSITIONS = (
    # event              source        dest
    T(CompactionReplied, S.Requesting, S.Compacted,  actions=("hold_compaction",)),
    T(ProviderFailed,    S.Requesting, S.BackingOff, guards=("is_transient", "has_retries_left", "can_wait"),
                         actions=("spend_retry", "wait_before_retry")),
    T(ProviderFailed,    S.Requesting, S.Requesting, guards=("is_retryable_at_once", "has_retries_left"),
                         actions=("spend_retry", "request_compaction")),

    T(BackoffElapsed,    S.BackingOff, S.Requesting, actions=("request_compaction",)),
)
# fmt: on

SPEC = MachineSpec(
    name=NAME,
    states=State,
    initial=State.Requesting,
    final=frozenset({State.Compacted}),
    transitions=TRANSITIONS,
    entry=("request_compaction",),
)


class CompactionCall(TurnTaking):
    """The guards and actions of the compaction_call table."""

    compaction: Compaction
    compacted: HeldCompaction | None

    def request_compaction(self, event: object) -> None:
        """Rule 1: the accepted items alone, with the compaction's own output cap."""
        if not isinstance(self.compaction, NativeByCall):
            raise RuntimeError(f"{self.strategy}: compaction {self.compaction.kind} makes no compaction call")
        self.compacted = None
        request = ModelRequest(
            self.system_prompt,
            tuple(self.accepted.items),
            max_output_tokens=self.compaction.max_output_tokens,
            tools=self.tools,  # a history with tool calls is sent with the tools it called (Anthropic's rule)
        )
        self.emit(CallCompaction(request))

    def hold_compaction(self, event: CompactionReplied) -> None:
        items = self.transcript.reply_items(event.response)
        self.compacted = HeldCompaction("call", items, [TurnSpan(start=0, end=len(items))] if items else [])
