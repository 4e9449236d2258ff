"""previous_response_id: the provider keeps the conversation; the harness keeps only its handle.

Rules
1. The accepted state is the handle of the last accepted response (payload previous_response_id,
   none before the first) plus the inputs buffered since and the items the server has not seen
   (payload unsent): the results of its tool calls, and after a resume without the continuation or
   a model switch, the conversation rebuilt from its projection, with no handle (the server's
   history is not ours to rebuild); no other items are carried.
2. A request sends only the new turn's opening items (the unsent items first), continuing from the
   accepted handle.
3. A reply is provisional: its handle is committed only when the runner's parser accepts an action
   from it. A retry, after a failure or a rejected action, continues from the same accepted handle,
   so a rejected response is a branch no later request continues.
4. Retries, backoff and buffered inputs are those of every turn-taking strategy (strategies/turn.py).
5. An expired or unknown handle (the provider answers 404) fails closed: the history lives only on
   the server, so there is nothing to rebuild it from. A reply without a handle fails closed too.
6. A context overflow fails closed: the server's history cannot be trimmed from here.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

from turnstate.adapters.contract import ModelRequest, Transcript
from turnstate.machine.engine import Transition
from turnstate.strategies.events import (
    ActionAccepted,
    CallProvider,
    ContextOverflowed,
    HandleExpired,
    ObservationArrived,
    ToolsAnswered,
)
from turnstate.strategies.projection import laid_out
from turnstate.strategies.retry import TurnRetries
from turnstate.strategies.state import RuntimeState
from turnstate.strategies.strategy import ProjectedTurn, Rebuilt, StrategySettings
from turnstate.strategies.turn import (
    TurnTaking,
    action_rejected,
    answering,
    backoff_elapsed,
    buffering,
    check_answers,
    provider_failures,
    reply_held,
    turn_spec,
    turn_strategy,
)

STRATEGY = "previous_response_id"
HANDLE = "previous_response_id"  # the payload key of the accepted handle
UNSENT = "unsent"  # the payload key of the items the server has not seen, sent first with the next turn


class State(enum.Enum):
    Accepted = "the last accepted response's handle; waiting for the next input"
    AwaitingReply = "the new input, continuing from the accepted handle, is with the provider"
    BackingOff = "a transient failure; waiting before asking again from the accepted handle"
    Provisional = "a reply and its handle are held; they commit only if the reply yields a valid action"
    FailedClosed = "the turn failed for good; the accepted handle is kept"


T = Transition
S = State

# By source state; the rows every turn-taking table holds come from strategies/turn.py, placed where
# they apply.
# fmt: off
TRANSITIONS = (
    # event               source           dest
    buffering(S.Accepted),
    answering(S.Accepted),
    T(ObservationArrived, S.Accepted,      S.AwaitingReply, actions=("open_turn", "request_reply")),

    reply_held(S.AwaitingReply, S.Provisional),
    *provider_failures(S.AwaitingReply, backing_off=S.BackingOff, failed=S.FailedClosed),
    T(HandleExpired,      S.AwaitingReply, S.FailedClosed,  actions=("fail_closed",)),
    T(ContextOverflowed,  S.AwaitingReply, S.FailedClosed,  actions=("fail_closed",)),

    backoff_elapsed(S.BackingOff, S.AwaitingReply),

    T(ActionAccepted,     S.Provisional,   S.Accepted,      guards=("reply_has_handle",),
                          actions=("commit_provisional", "submit_action")),
    T(ActionAccepted,     S.Provisional,   S.FailedClosed,  actions=("fail_closed",)),
    *action_rejected(S.Provisional, S.AwaitingReply, S.FailedClosed),
)
# fmt: on

SPEC = turn_spec(STRATEGY, State, TRANSITIONS)


class PreviousResponseId(TurnTaking):
    """The model object the previous_response_id table drives."""

    strategy = STRATEGY
    overflow_failure = "context overflow: the provider's stored history cannot be trimmed from here"

    def _failure_reason(self, event: object, retries: TurnRetries) -> str:
        if isinstance(event, HandleExpired):
            return "the provider no longer knows the response handle the accepted state continues from"
        if isinstance(event, ActionAccepted):
            return "the accepted reply carries no response handle to continue from"
        return super()._failure_reason(event, retries)

    def reply_has_handle(self, event: ActionAccepted) -> bool:
        return bool(self._provisional.response_id)

    def answer_tool_calls(self, event: ToolsAnswered) -> None:
        check_answers(self.accepted, event.results)
        unsent = [*self.accepted.payload.get(UNSENT, []), *self.transcript.tool_result_items(event.results)]
        self.accepted = self.accepted.replace(payload={**self.accepted.payload, UNSENT: unsent}, unanswered=())

    def open_turn(self, event: ObservationArrived) -> None:
        super().open_turn(event)
        self._turn.opening[:0] = self.accepted.payload.get(UNSENT, [])

    def commit_provisional(self, event: ActionAccepted) -> None:
        self.accepted = self.accepted.replace(
            payload={HANDLE: self._provisional.response_id}, pending=(), unanswered=self._unanswered_calls()
        )
        self.turn = None

    def ask(self) -> CallProvider:
        handle = self.accepted.payload.get(HANDLE)
        opening = tuple(self._turn.opening)
        return CallProvider(ModelRequest(self.system_prompt, opening, previous_response_id=handle, tools=self.tools))


def rebuild(settings: StrategySettings, transcript: Transcript, turns: Sequence[ProjectedTurn]) -> Rebuilt:
    """Rule 1: no handle, and every kept turn's items unsent, so the next request sends them all."""
    laid = laid_out(settings, transcript, turns)
    state = RuntimeState(
        adapter_id=settings.adapter_id,
        strategy=STRATEGY,
        payload={HANDLE: None, UNSENT: laid.items},
        unanswered=laid.unanswered,
    )
    return Rebuilt(state, laid.dropped_turns, compaction_due=False)


DEFINITION = turn_strategy({"none": SPEC}, PreviousResponseId, {HANDLE: None}, rebuild)
start = DEFINITION.start
