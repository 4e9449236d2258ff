"""previous_response_id driven by events alone (no HTTP): every row of its table, and its rules."""

from __future__ import annotations

import pytest
from hypothesis.stateful import invariant

from turnstate.adapters.contract import ErrorKind, ModelResponse, ProviderError, Usage
from turnstate.strategies import previous_response_id as prid
from turnstate.strategies.events import (
    ActionAccepted,
    ActionRejected,
    BackoffElapsed,
    CallProvider,
    ContextOverflowed,
    FailClosed,
    HandleExpired,
    InputBuffered,
    ObservationArrived,
    ParseAction,
    ProviderFailed,
    ProviderReplied,
    SubmitAction,
    WaitBeforeRetry,
)
from turnstate.strategies.previous_response_id import HANDLE, State
from turnstate.strategies.state import RuntimeState
from turnstate.strategies.strategy import StrategySettings

from .commit_discipline import WALK_SETTINGS, CommitDisciplineWalk
from .native_items import NativeItems, native_reply
from .rows import check_row

SETTINGS = StrategySettings(
    "openai.responses.v1", "Play the game.", max_retries=1, max_context_length=4000, max_output_tokens=100
)
OBSERVE = ObservationArrived("f1")
EXPIRED = HandleExpired(ProviderError(ErrorKind.EXPIRED_HANDLE, diagnostics={"status": 404}))


def start():
    return prid.start(SETTINGS, NativeItems())


def replied(response_id: str | None = "resp_1", text: str = "ACTION: ACTION1") -> ProviderReplied:
    return ProviderReplied(native_reply(text, response_id=response_id))


def failure(kind: ErrorKind) -> ProviderFailed:
    return ProviderFailed(ProviderError(kind, Usage(5, 0, 0)))


def request_of(effects):
    (effect,) = effects
    assert isinstance(effect, CallProvider)
    return effect.request


# fmt: off
CASES = {
    "observed asks the provider": ([], OBSERVE, State.AwaitingReply, [CallProvider]),
    "buffered waits in Accepted": ([], InputBuffered("GAME_OVER"), State.Accepted, []),
    "replied holds the reply and asks for a parse": ([OBSERVE], replied(), State.Provisional, [ParseAction]),
    "transient failure waits first": ([OBSERVE], failure(ErrorKind.TRANSIENT), State.BackingOff, [WaitBeforeRetry]),
    "after the wait it asks again": ([OBSERVE, failure(ErrorKind.TRANSIENT)], BackoffElapsed(), State.AwaitingReply, [CallProvider]),
    "truncation asks again at once": ([OBSERVE], failure(ErrorKind.TRUNCATED), State.AwaitingReply, [CallProvider]),
    "fatal failure fails closed": ([OBSERVE], failure(ErrorKind.FATAL), State.FailedClosed, [FailClosed]),
    "an expired handle fails closed": ([OBSERVE], EXPIRED, State.FailedClosed, [FailClosed]),
    "overflow fails closed": ([OBSERVE], ContextOverflowed(ProviderError(ErrorKind.CONTEXT_OVERFLOW)), State.FailedClosed, [FailClosed]),
    "accepted action commits the handle and submits": ([OBSERVE, replied()], ActionAccepted("ACTION1"), State.Accepted, [SubmitAction]),
    "an accepted reply without a handle fails closed": ([OBSERVE, replied(None)], ActionAccepted("ACTION1"), State.FailedClosed, [FailClosed]),
    "rejected action asks again": ([OBSERVE, replied(text="hmm")], ActionRejected("no action"), State.AwaitingReply, [CallProvider]),
    "rejected action with no retry left fails closed": ([OBSERVE, replied(), ActionRejected("x"), replied()], ActionRejected("x"), State.FailedClosed, [FailClosed]),
}
# fmt: on


@pytest.mark.parametrize(("before", "event", "state", "effect_types"), CASES.values(), ids=CASES.keys())
def test_table(before, event, state, effect_types):
    check_row(start(), before, event, state, effect_types)


def test_each_request_sends_only_the_new_inputs_continuing_from_the_accepted_handle():
    machine = start()
    first = request_of(machine.fire(OBSERVE))
    assert first.previous_response_id is None and list(first.items) == [{"type": "input", "text": "f1"}]
    machine.fire(replied("resp_1"))
    machine.fire(ActionAccepted("ACTION1"))
    assert machine.model.accepted.payload == {HANDLE: "resp_1"} and machine.model.accepted.items == []
    machine.fire(InputBuffered("game over"))
    second = request_of(machine.fire(ObservationArrived("f2")))
    assert second.previous_response_id == "resp_1"
    assert list(second.items) == [{"type": "input", "text": "game over"}, {"type": "input", "text": "f2"}]


def test_a_retry_after_a_rejected_reply_continues_from_the_accepted_handle_not_the_rejected_one():
    machine = start()
    machine.fire(OBSERVE)
    machine.fire(replied("resp_1"))
    machine.fire(ActionAccepted("ACTION1"))
    machine.fire(ObservationArrived("f2"))
    machine.fire(replied("resp_rejected", text="no action"))
    retried = request_of(machine.fire(ActionRejected("no action")))
    assert retried.previous_response_id == "resp_1"
    assert machine.model.accepted.payload == {HANDLE: "resp_1"}


def test_an_expired_handle_names_why_the_turn_failed_closed_and_keeps_the_handle():
    machine = start()
    machine.fire(OBSERVE)
    machine.fire(replied("resp_1"))
    machine.fire(ActionAccepted("ACTION1"))
    machine.fire(ObservationArrived("f2"))
    (closed,) = machine.fire(EXPIRED)
    assert closed == FailClosed("the provider no longer knows the response handle the accepted state continues from")
    assert machine.model.accepted.payload == {HANDLE: "resp_1"}


class PreviousResponseIdWalk(CommitDisciplineWalk):
    record = prid.DEFINITION
    strategy_settings = StrategySettings(
        "openai.responses.v1", "Play.", max_retries=2, max_context_length=4000, max_output_tokens=100
    )
    transcript = NativeItems()

    def reply_response(self, text: str) -> ModelResponse:
        return native_reply(text, response_id=f"resp_{self.counter}")

    def check_committed(self, state: RuntimeState, reply: ModelResponse) -> None:
        assert state.payload == {HANDLE: reply.response_id}, "a commit must keep the accepted reply's handle"
        assert state.items == []

    def fire(self, event):
        if isinstance(event, ObservationArrived):
            self.turn_handle = self.accepted.payload[HANDLE]  # what every request of this turn must continue
        return super().fire(event)

    @invariant()
    def every_request_of_a_turn_continues_from_the_handle_accepted_when_it_opened(self) -> None:
        for request in self.turn_requests:
            assert request.previous_response_id == self.turn_handle


PreviousResponseIdWalk.TestCase.settings = WALK_SETTINGS
test_previous_response_id_random_walks = PreviousResponseIdWalk.TestCase
