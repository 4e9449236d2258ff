"""continuous_conversation: the provider's own items, opaque reasoning included, carried whole from one
accepted turn to the next.

Rules
1. The accepted state is every item of every accepted turn, in order, exactly as the adapter's
   transcript keeps them (encrypted reasoning, signatures and compaction items included); nothing is
   trimmed or rewritten. The model's own state travels in those items, so no carry-forward
   instruction is added to the system prompt.
2. A request is: the system prompt, every accepted item, then the new turn's opening items.
3. A reply is provisional. It commits only when the runner's parser accepts an action from it; a
   retry starts again from the unchanged accepted items, so no orphan item reaches a later request.
4. Retries, backoff and buffered inputs are those of every turn-taking strategy (strategies/turn.py).
5. Native compaction comes in the adapter's own way. Inline (OpenAI): it arrives inside an action
   reply as a compaction item, and committing such a reply keeps only the latest compaction item and
   everything after it, as one turn. By a call (xAI, Anthropic): when the last accepted action's
   completed context (its reported input plus output tokens) reaches the trigger, the turn first
   asks for a compaction of the accepted history alone (the nested compaction_call machine), then
   sends the action request on the compacted history; the compaction and the action form one
   provisional turn, committed together only with an accepted action. A rejected action discards
   both, and the retry compacts the unchanged accepted history again. The first observation never
   compacts: there is no completed history yet.
6. A context overflow fails closed: opaque turns cannot be dropped or rewritten from here, so only
   compaction can shrink the history.
"""

from __future__ import annotations

import enum

from turnstate.adapters.contract import Item, ModelRequest, Transcript
from turnstate.machine.engine import Transition
from turnstate.strategies import compaction_call
from turnstate.strategies.events import (
    ActionAccepted,
    ActionRejected,
    CallCompaction,
    CompactionReplied,
    ContextOverflowed,
    ObservationArrived,
    ProviderFailed,
)
from turnstate.strategies.record import StrategySettings
from turnstate.strategies.state import RuntimeState, TurnSpan
from turnstate.strategies.turn import TurnTaking, shared_rows, turn_record, turn_spec

STRATEGY = "continuous_conversation"


class State(enum.Enum):
    Accepted = "every accepted turn's native items; waiting for the next input"
    AwaitingReply = "a request replaying every accepted item is with the provider"
    BackingOff = "a transient failure; waiting before asking again from the accepted items"
    Compacting = "a separate call compacts the accepted items; it commits only with this turn's action"
    Provisional = "a reply is held with its native items; it commits only if it yields a valid action"
    FailedClosed = "the turn failed for good; the accepted items are kept"


T = Transition
S = State

COMPACTING = "Compacting_Requesting"  # the nested compaction_call machine's requesting state

# continuous_conversation's own rows around the rows every turn-taking strategy shares
# (strategies/turn.py). A rejected action in a turn that compacted by a call compacts again: that row
# comes before the shared ones, which retry or fail closed.
# fmt: off
TRANSITIONS = (
    # event               source           dest
    T(ActionRejected,     S.Provisional,   S.Compacting,    guards=("has_retries_left", "compacted_by_call"),
                          actions=("discard_provisional", "spend_retry", "request_compaction")),
    *shared_rows(S),
    T(ObservationArrived, S.Accepted,      S.Compacting,    guards=("is_over_compaction_trigger",),
                          actions=("open_turn", "request_compaction")),
    T(ObservationArrived, S.Accepted,      S.AwaitingReply, actions=("open_turn", "request_reply")),
    T(CompactionReplied,  COMPACTING,      S.AwaitingReply, actions=("hold_compaction", "request_reply")),
    T(ProviderFailed,     COMPACTING,      S.FailedClosed,  actions=("fail_closed",)),
    T(ContextOverflowed,  COMPACTING,      S.FailedClosed,  actions=("fail_closed",)),
    T(ContextOverflowed,  S.AwaitingReply, S.FailedClosed,  actions=("fail_closed",)),
    T(ActionAccepted,     S.Provisional,   S.Accepted,      actions=("commit_provisional", "keep_from_latest_compaction",
                                                                     "submit_action")),
)
# fmt: on

SPEC = turn_spec(STRATEGY, State, TRANSITIONS, nested={State.Compacting: compaction_call.SPEC})


class ContinuousConversation(TurnTaking):
    """The model object the continuous_conversation table drives."""

    strategy = STRATEGY
    overflow_failure = "context overflow: opaque turns cannot be dropped, and no compaction made room"

    def __init__(self, state: RuntimeState, settings: StrategySettings, transcript: Transcript) -> None:
        super().__init__(state, settings, transcript)
        self.compacts_by_call = settings.compaction == "native_call"
        self.compaction_trigger_tokens = settings.compaction_trigger_tokens
        self.compacted: list[Item] | None = None  # the open turn's provisional compaction of the accepted items

    def is_over_compaction_trigger(self, event: ObservationArrived) -> bool:
        """Rule 5: the last accepted action's completed context (its reported input plus output
        tokens) reached the trigger; the accepted items' estimate stands in when the provider
        reported no usage. Before the first accepted action there is nothing to compact."""
        if not self.compacts_by_call or self.compaction_trigger_tokens is None or not self.accepted.items:
            return False
        completed = self.accepted.completed_context_tokens or self.transcript.estimate_tokens(
            self.accepted.items, self.system_prompt
        )
        return completed >= self.compaction_trigger_tokens

    def compacted_by_call(self, event: ActionRejected) -> bool:
        return self.compacted is not None

    def open_turn(self, event: ObservationArrived) -> None:
        super().open_turn(event)
        self.compacted = None

    def request_compaction(self, event: object) -> None:
        """Rule 5: the accepted items alone, never the turn's fresh or buffered inputs."""
        self.compacted = None
        self.emit(CallCompaction(ModelRequest(system=self.system_prompt, items=tuple(self.accepted.items))))

    def hold_compaction(self, event: CompactionReplied) -> None:
        self.compacted = self.transcript.reply_items(event.response)

    def commit_provisional(self, event: ActionAccepted) -> None:
        """The turn's items after the accepted history, or after its compaction, which commits with it."""
        if self.compacted is None:
            items, spans = self.accepted.items, list(self.accepted.turns)
        else:
            items, spans = list(self.compacted), [TurnSpan(start=0, end=len(self.compacted))] if self.compacted else []
        turn_items = [*self._turn.opening, *self.transcript.reply_items(self._provisional)]
        spans.append(TurnSpan(start=len(items), end=len(items) + len(turn_items)))
        usage = self._provisional.usage
        self.accepted = self.accepted.replace(
            payload={"items": items + turn_items},
            turns=spans,
            pending=(),
            completed_context_tokens=usage.input_tokens + usage.output_tokens,
        )
        self.turn = self.compacted = None

    def keep_from_latest_compaction(self, event: ActionAccepted) -> None:
        """Rule 5: a compaction item replaces everything before it, and what is kept is one turn."""
        items = self.accepted.items
        cut = self.transcript.latest_compaction(items)
        if not cut:  # no compaction item, or nothing before it
            return
        kept = items[cut:]
        self.accepted = self.accepted.replace(payload={"items": kept}, turns=[TurnSpan(start=0, end=len(kept))])

    def build_request(self) -> ModelRequest:
        history: list[Item] = self.accepted.items if self.compacted is None else self.compacted
        return ModelRequest(system=self.system_prompt, items=(*history, *self._turn.opening))


RECORD = turn_record(SPEC, ContinuousConversation, {"items": []}, compaction=("none", "native"))
start = RECORD.start
