"""continuous_conversation driven by events alone (no HTTP): every row of its table, and its rules."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis.stateful import invariant

from turnstate.adapters.contract import ErrorKind, ModelResponse, ProviderError, Usage
from turnstate.machine.engine import path_of
from turnstate.strategies import compaction_call
from turnstate.strategies import continuous_conversation as cc
from turnstate.strategies.compaction import NativeByCall
from turnstate.strategies.continuous_conversation import State
from turnstate.strategies.events import (
    ActionAccepted,
    ActionRejected,
    BackoffElapsed,
    CallCompaction,
    CallProvider,
    CompactionReplied,
    ContextOverflowed,
    FailClosed,
    InputBuffered,
    ObservationArrived,
    ParseAction,
    ProviderFailed,
    ProviderReplied,
    SubmitAction,
    WaitBeforeRetry,
)
from turnstate.strategies.manual_rolling import CARRY_FORWARD_INSTRUCTION
from turnstate.strategies.state import RuntimeState, TurnSpan
from turnstate.strategies.strategy import StrategySettings

from .commit_discipline import WALK_SETTINGS, CommitDisciplineWalk
from .native_items import NativeItems, native_reply
from .rows import check_row

SETTINGS = StrategySettings(
    "openai.responses.v1", "Play the game.", max_retries=1, max_context_length=4000, max_output_tokens=100
)
OBSERVE = ObservationArrived("f1")
COMPACTING = path_of(State.Compacting, compaction_call.State.Requesting)
COMPACTION_BACKING_OFF = path_of(State.Compacting, compaction_call.State.BackingOff)


# Compaction by a separate call once the accepted items pass 10 estimated tokens.
BY_CALL = StrategySettings(
    "xai.responses.v1",
    "Play.",
    max_retries=1,
    max_context_length=4000,
    max_output_tokens=100,
    compaction=NativeByCall(trigger_tokens=10, max_output_tokens=100),
)


def start():
    return cc.start(SETTINGS, NativeItems())


def start_compacting_by_call():
    """A machine whose accepted history is over the trigger, so its next turn compacts first."""
    machine = cc.start(BY_CALL, NativeItems())
    play_turn(machine, "f1")
    return machine


def compacted(text: str = "summary of f1", *, kept: tuple[str, ...] = ()) -> CompactionReplied:
    """A compaction call's answer: the user inputs it kept (as xAI's does), then one opaque compaction item."""
    items = ({"type": "input", "text": t} for t in kept)
    item = {"type": "compaction", "encrypted_content": f"sealed({text})"}
    return CompactionReplied(
        ModelResponse(text="", usage=Usage(30, 0, 5), stop_reason="completed", native_items=(*items, item))
    )


def replied(text: str = "ACTION: ACTION1", *, compacted: bool = False) -> ProviderReplied:
    return ProviderReplied(native_reply(text, compacted=compacted))


def failure(kind: ErrorKind) -> ProviderFailed:
    return ProviderFailed(ProviderError(kind, Usage(5, 0, 0)))


def play_turn(machine, observation: str, *, compacted: bool = False) -> None:
    machine.fire(ObservationArrived(observation))
    machine.fire(replied(f"ACTION: ACTION1 ({observation})", compacted=compacted))
    machine.fire(ActionAccepted("ACTION1"))


def request_of(effects) -> list[dict]:
    (effect,) = effects
    assert isinstance(effect, CallProvider)
    return list(effect.request.items)


# One row per table transition: the events that lead there, the event under test, the state and
# effect types that must follow.
# fmt: off
CASES = {
    "observed asks the provider": ([], OBSERVE, State.AwaitingReply, [CallProvider]),
    "buffered waits in Accepted": ([], InputBuffered("GAME_OVER"), State.Accepted, []),
    "replied holds the reply and asks for a parse": ([OBSERVE], replied(), State.Provisional, [ParseAction]),
    "transient failure waits first": ([OBSERVE], failure(ErrorKind.TRANSIENT), State.BackingOff, [WaitBeforeRetry]),
    "after the wait it asks again": ([OBSERVE, failure(ErrorKind.TRANSIENT)], BackoffElapsed(), State.AwaitingReply, [CallProvider]),
    "refusal asks again at once": ([OBSERVE], failure(ErrorKind.REFUSAL), State.AwaitingReply, [CallProvider]),
    "fatal failure fails closed": ([OBSERVE], failure(ErrorKind.FATAL), State.FailedClosed, [FailClosed]),
    "overflow fails closed": ([OBSERVE], ContextOverflowed(ProviderError(ErrorKind.CONTEXT_OVERFLOW)), State.FailedClosed, [FailClosed]),
    "accepted action commits and submits": ([OBSERVE, replied()], ActionAccepted("ACTION1"), State.Accepted, [SubmitAction]),
    "rejected action asks again": ([OBSERVE, replied("hmm")], ActionRejected("no action"), State.AwaitingReply, [CallProvider]),
    "rejected action with no retry left fails closed": ([OBSERVE, replied("hmm"), ActionRejected("x"), replied("hmm")], ActionRejected("x"), State.FailedClosed, [FailClosed]),
}
# fmt: on


@pytest.mark.parametrize(("before", "event", "state", "effect_types"), CASES.values(), ids=CASES.keys())
def test_table(before, event, state, effect_types):
    check_row(start(), before, event, state, effect_types)


OVERFLOW = ContextOverflowed(ProviderError(ErrorKind.CONTEXT_OVERFLOW))

# The rows of compaction by a separate call (the nested compaction_call machine), from a machine
# whose accepted history is over the trigger: (events before, event, resulting path, effect types).
# fmt: off
CALL_CASES = {
    "an observation over the trigger compacts first": ([], ObservationArrived("f2"), COMPACTING, [CallCompaction]),
    "the compaction reply goes on to the action request": ([ObservationArrived("f2")], compacted(), "AwaitingReply", [CallProvider]),
    "a transient compaction failure waits": ([ObservationArrived("f2")], failure(ErrorKind.TRANSIENT), COMPACTION_BACKING_OFF, [WaitBeforeRetry]),
    "after the wait it asks for the compaction again": ([ObservationArrived("f2"), failure(ErrorKind.TRANSIENT)], BackoffElapsed(), COMPACTING, [CallCompaction]),
    "a refused compaction is asked again at once": ([ObservationArrived("f2")], failure(ErrorKind.REFUSAL), COMPACTING, [CallCompaction]),
    "a fatal compaction failure fails closed": ([ObservationArrived("f2")], failure(ErrorKind.FATAL), "FailedClosed", [FailClosed]),
    "a compaction overflow fails closed": ([ObservationArrived("f2")], OVERFLOW, "FailedClosed", [FailClosed]),
    "a rejected action compacts the accepted history again": ([ObservationArrived("f2"), compacted(), replied("hmm")], ActionRejected("no action"), COMPACTING, [CallCompaction]),
    "a refused action request compacts the accepted history again": ([ObservationArrived("f2"), compacted()], failure(ErrorKind.REFUSAL), COMPACTING, [CallCompaction]),
    "a truncated action request compacts the accepted history again": ([ObservationArrived("f2"), compacted()], failure(ErrorKind.TRUNCATED), COMPACTING, [CallCompaction]),
    "a transient action failure waits, then compacts again": ([ObservationArrived("f2"), compacted(), failure(ErrorKind.TRANSIENT)], BackoffElapsed(), COMPACTING, [CallCompaction]),
}
# fmt: on


@pytest.mark.parametrize(("before", "event", "path", "effect_types"), CALL_CASES.values(), ids=CALL_CASES.keys())
def test_compaction_by_call_table(before, event, path, effect_types):
    check_row(start_compacting_by_call(), before, event, path, effect_types)


def test_the_compaction_call_holds_only_the_accepted_history_and_the_action_request_follows_it():
    machine = start_compacting_by_call()
    accepted = machine.model.accepted.items
    machine.fire(InputBuffered("game over"))
    (call,) = machine.fire(ObservationArrived("f2"))
    assert list(call.request.items) == accepted  # fresh and buffered inputs are not compacted
    sent = request_of(machine.fire(compacted()))
    assert sent == [
        {"type": "compaction", "encrypted_content": "sealed(summary of f1)"},
        *[{"type": "input", "text": t} for t in ("game over", "f2")],
    ]


def test_the_compaction_commits_only_together_with_an_accepted_action():
    machine = start_compacting_by_call()
    before = machine.model.accepted
    machine.fire(ObservationArrived("f2"))
    machine.fire(compacted())
    machine.fire(replied("ACTION: ACTION1 (f2)"))
    assert machine.model.accepted == before  # nothing commits before the action is accepted
    machine.fire(ActionAccepted("ACTION1"))
    state = machine.model.accepted
    assert [item["type"] for item in state.items] == ["compaction", "input", "reasoning", "message"]
    assert state.turns == (TurnSpan(start=0, end=1), TurnSpan(start=1, end=4))


def test_a_native_compaction_call_caps_its_output_separately_from_the_action_request():
    machine = cc.start(
        replace(BY_CALL, compaction=NativeByCall(trigger_tokens=10, max_output_tokens=40)), NativeItems()
    )
    play_turn(machine, "f1")
    (call,) = machine.fire(ObservationArrived("f2"))
    assert isinstance(call, CallCompaction) and call.request.max_output_tokens == 40
    (action,) = machine.fire(compacted())
    assert action.request.max_output_tokens is None  # the action request keeps the run's own cap


def test_the_commit_keeps_exactly_the_compacted_window_the_accepted_request_was_built_on():
    machine = start_compacting_by_call()
    machine.fire(ObservationArrived("f2"))
    sent = request_of(machine.fire(compacted(kept=("f1",))))
    machine.fire(replied("ACTION: ACTION1 (f2)"))
    machine.fire(ActionAccepted("ACTION1"))
    state = machine.model.accepted
    assert state.items[: len(sent)] == sent  # the kept user input before the compaction item stays
    assert [item["type"] for item in state.items] == ["input", "compaction", "input", "reasoning", "message"]
    assert state.turns == (TurnSpan(start=0, end=2), TurnSpan(start=2, end=5))


@pytest.mark.parametrize(
    "failed",
    [failure(ErrorKind.REFUSAL), failure(ErrorKind.TRUNCATED), failure(ErrorKind.TRANSIENT)],
    ids=["refused", "truncated", "transient"],
)
def test_an_action_request_that_fails_after_a_compaction_is_retried_on_a_new_compaction(failed):
    machine = start_compacting_by_call()
    before = machine.model.accepted
    (first_call,) = machine.fire(ObservationArrived("f2"))
    machine.fire(compacted("first summary"))
    effects = machine.fire(failed)
    if machine.path == "BackingOff":
        effects = machine.fire(BackoffElapsed())
    (second_call,) = effects
    assert isinstance(second_call, CallCompaction) and second_call.request == first_call.request
    assert machine.model.accepted == before and machine.model.compacted is None  # the first compaction is gone
    sent = request_of(machine.fire(compacted("second summary")))
    assert sent[0] == {"type": "compaction", "encrypted_content": "sealed(second summary)"}


def test_a_failed_action_after_a_compaction_commits_nothing_and_the_retry_compacts_the_unchanged_history():
    machine = start_compacting_by_call()
    before = machine.model.accepted
    (first_call,) = machine.fire(ObservationArrived("f2"))
    machine.fire(compacted("first summary"))
    machine.fire(replied("no action here"))
    (second_call,) = machine.fire(ActionRejected("no action"))
    assert second_call.request == first_call.request and machine.model.accepted == before
    machine.fire(compacted("second summary"))
    machine.fire(replied("hmm"))
    (closed,) = machine.fire(ActionRejected("no action"))  # max_retries=1: the turn fails closed
    assert isinstance(closed, FailClosed) and machine.model.accepted == before


def accepted_with_usage(usage: Usage, *, settings: StrategySettings = BY_CALL):
    """A machine by call whose one accepted action the provider reported with `usage`."""
    machine = cc.start(settings, NativeItems())
    machine.fire(ObservationArrived("f1"))
    machine.fire(ProviderReplied(replace(native_reply("ACTION: ACTION1 (f1)"), usage=usage)))
    machine.fire(ActionAccepted("ACTION1"))
    return machine


def test_the_trigger_reads_the_last_accepted_actions_reported_input_plus_output():
    below = accepted_with_usage(Usage(input_tokens=6, output_tokens=3))  # 9 < 10, though the items estimate more
    assert NativeItems().estimate_tokens(below.model.accepted.items, "Play.") > BY_CALL.compaction.trigger_tokens
    assert below.model.accepted.completed_context_tokens == 9
    assert below.fire(ObservationArrived("f2")) and below.path == "AwaitingReply"
    at = accepted_with_usage(
        Usage(input_tokens=6, cached_input_tokens=4, output_tokens=4)
    )  # 10: cached is part of input
    at.fire(ObservationArrived("f2"))
    assert at.path == COMPACTING


def test_neither_failed_attempts_nor_the_compaction_call_count_toward_the_trigger():
    machine = accepted_with_usage(Usage(input_tokens=3, output_tokens=2))
    machine.fire(ObservationArrived("f2"))
    machine.fire(ProviderFailed(ProviderError(ErrorKind.REFUSAL, Usage(500, 0, 500))))  # a retry's usage
    machine.fire(ProviderReplied(replace(native_reply("ACTION: ACTION1 (f2)"), usage=Usage(4, 0, 1))))
    machine.fire(ActionAccepted("ACTION1"))
    assert machine.model.accepted.completed_context_tokens == 5
    machine.fire(ObservationArrived("f3"))
    assert machine.path == "AwaitingReply"


def test_an_action_without_reported_usage_falls_back_to_the_accepted_items_estimate():
    machine = accepted_with_usage(Usage())
    assert machine.model.accepted.completed_context_tokens == 0
    machine.fire(ObservationArrived("f2"))
    assert machine.path == COMPACTING  # the items' estimate is over the trigger


def test_the_first_observation_never_compacts_there_is_no_completed_history():
    settings = replace(BY_CALL, compaction=NativeByCall(trigger_tokens=1, max_output_tokens=100))
    machine = cc.start(settings, NativeItems(), RuntimeState(adapter_id=settings.adapter_id, strategy=cc.STRATEGY))
    machine.fire(InputBuffered("game over"))
    assert [type(effect) for effect in machine.fire(ObservationArrived("f1"))] == [CallProvider]


def test_every_accepted_item_is_replayed_verbatim_and_in_order_before_the_new_input():
    machine = start()
    play_turn(machine, "f1")
    machine.fire(InputBuffered("game over"))
    play_turn(machine, "f2")
    accepted = machine.model.accepted.items
    sent = request_of(machine.fire(ObservationArrived("f3")))
    assert sent == [*accepted, {"type": "input", "text": "f3"}]
    assert [item["type"] for item in accepted] == [
        "input",
        "reasoning",
        "message",
        "input",
        "input",
        "reasoning",
        "message",
    ]
    assert accepted[1]["encrypted_content"] == "sealed(ACTION: ACTION1 (f1))"
    assert machine.model.accepted.turns == (TurnSpan(start=0, end=3), TurnSpan(start=3, end=7))


def test_no_carry_forward_instruction_is_added_the_native_items_are_the_state():
    (effect,) = start().fire(OBSERVE)
    assert effect.request.system == "Play the game."
    assert CARRY_FORWARD_INSTRUCTION not in effect.request.system


def test_a_compacted_reply_keeps_the_latest_compaction_item_and_everything_after_as_one_turn():
    machine = start()
    play_turn(machine, "f1")
    play_turn(machine, "f2", compacted=True)
    state = machine.model.accepted
    assert [item["type"] for item in state.items] == ["compaction"]  # it came after the reply's message
    assert state.items[0]["encrypted_content"] == "summary-through(ACTION: ACTION1 (f2))"
    assert state.turns == (TurnSpan(start=0, end=1),)
    sent = request_of(machine.fire(ObservationArrived("f3")))
    assert sent == [*state.items, {"type": "input", "text": "f3"}]


def test_a_rejected_reply_with_a_compaction_commits_nothing():
    machine = start()
    play_turn(machine, "f1")
    before = machine.model.accepted
    first = request_of(machine.fire(ObservationArrived("f2")))
    machine.fire(replied("no action here", compacted=True))
    retried = request_of(machine.fire(ActionRejected("no action")))
    assert machine.model.accepted == before
    assert retried == first  # the same accepted items, no orphan compaction or reasoning


def test_after_failing_closed_a_restart_on_the_kept_state_replays_it():
    machine = start()
    play_turn(machine, "f1")
    machine.fire(ObservationArrived("f2"))
    machine.fire(failure(ErrorKind.FATAL))
    kept = machine.model.accepted
    restarted = cc.start(SETTINGS, NativeItems(), kept)
    assert request_of(restarted.fire(ObservationArrived("f2")))[:-1] == kept.items


def test_a_state_of_another_strategy_is_refused():
    state = RuntimeState(adapter_id=SETTINGS.adapter_id, strategy="manual_rolling", payload={"items": []})
    with pytest.raises(ValueError, match="with strategy 'manual_rolling'"):
        cc.start(SETTINGS, NativeItems(), state)


class ContinuousConversationWalk(CommitDisciplineWalk):
    record = cc.DEFINITION
    strategy_settings = StrategySettings(
        "openai.responses.v1", "Play.", max_retries=2, max_context_length=4000, max_output_tokens=100
    )
    transcript = NativeItems()

    def reply_response(self, text: str) -> ModelResponse:
        return native_reply(text, compacted=self.counter % 3 == 0)  # every third reply carries a compaction

    def check_committed(self, state: RuntimeState, reply: ModelResponse) -> None:
        reply_items = self.transcript.reply_items(reply)
        found = self.transcript.latest_compaction(reply_items)
        if found is None:
            super().check_committed(state, reply)
        else:
            assert state.items == reply_items[found:], "a compacted reply must replace everything before its compaction"

    @invariant()
    def nothing_before_the_latest_compaction_is_kept_and_the_turns_cover_every_item(self) -> None:
        state = self.accepted
        assert self.latest_compaction_is_kept_whole(state)
        ends = [0, *(span.end for span in state.turns)]
        assert [span.start for span in state.turns] == ends[:-1] and ends[-1] == len(state.items)

    def latest_compaction_is_kept_whole(self, state: RuntimeState) -> bool:
        """An inline compaction is the first item kept."""
        return self.transcript.latest_compaction(state.items) in (None, 0)


ContinuousConversationWalk.TestCase.settings = WALK_SETTINGS
test_continuous_conversation_random_walks = ContinuousConversationWalk.TestCase


class CompactionByCallWalk(ContinuousConversationWalk):
    """The same walk where every turn past the trigger compacts by a separate call first."""

    strategy_settings = BY_CALL

    def compaction_response(self) -> ModelResponse:
        """The user inputs the compaction kept (the accepted history's, as xAI's compact does), then its item."""
        kept = [item for item in self.accepted.items if item["type"] == "input"]
        self.compaction = [*kept, {"type": "compaction", "encrypted_content": self.fresh("summary")}]
        return ModelResponse(
            text="", usage=Usage(3, 0, 1), stop_reason="completed", native_items=tuple(self.compaction)
        )

    def reply_response(self, text: str) -> ModelResponse:
        return native_reply(text)

    def fire(self, event):
        if isinstance(event, ObservationArrived):
            self.compaction = None
        accepted_items = self.accepted.items
        effects = super().fire(event)
        for effect in effects:
            if isinstance(effect, CallCompaction):  # only the accepted history, never the turn's inputs
                assert list(effect.request.items) == accepted_items
        return effects

    def check_committed(self, state: RuntimeState, reply: ModelResponse) -> None:
        super().check_committed(state, reply)
        if (
            self.compaction is not None
        ):  # the compacted window committed whole with the action, and replaced the history
            assert state.items[: len(self.compaction)] == self.compaction
            assert len(state.items) == len(self.compaction) + len(self.opening) + len(
                self.transcript.reply_items(reply)
            )

    def latest_compaction_is_kept_whole(self, state: RuntimeState) -> bool:
        """A compacted window is kept whole: only user inputs may come before its compaction item."""
        found = self.transcript.latest_compaction(state.items)
        return found is None or all(item["type"] == "input" for item in state.items[:found])


CompactionByCallWalk.TestCase.settings = WALK_SETTINGS
test_compaction_by_call_random_walks = CompactionByCallWalk.TestCase
