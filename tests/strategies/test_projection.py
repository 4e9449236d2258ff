"""An accepted state rebuilt from the conversation's projection (strategies/projection.py): each turn
laid out as a live state lays it out, the oldest turns left out to fit the budget, calls left
unanswered, and each strategy's payload; and a machine started where a resumed run's rested."""

from __future__ import annotations

import pytest

from turnstate.adapters.contract import ToolCall, ToolResult
from turnstate.strategies import STRATEGIES
from turnstate.strategies.compaction import HarnessSummary, NativeByCall
from turnstate.strategies.events import ObservationArrived, ProviderReplied, ToolsAnswered
from turnstate.strategies.previous_response_id import HANDLE, UNSENT
from turnstate.strategies.state import TurnSpan
from turnstate.strategies.strategy import ProjectedTurn, StrategySettings

from .native_items import NativeItems, native_reply

TRANSCRIPT = NativeItems()
CALL = ToolCall("call_1", "MOVE", {"to": "north"})
TURNS = [
    ProjectedTurn(("frame 1",), "ACTION: UP"),
    ProjectedTurn(("game over", "frame 2"), "", (CALL,), (ToolResult("call_1", "MOVE", "frame 3"),)),
    ProjectedTurn((), "ACTION: LEFT", (ToolCall("call_2", "MOVE", {"to": "west"}),)),
]


def settings(max_context_length: int = 4000, compaction=None) -> StrategySettings:
    extra = {} if compaction is None else {"compaction": compaction}
    return StrategySettings("openai.responses.v1", "Play.", 1, max_context_length, 100, **extra)


@pytest.mark.parametrize("strategy", ["manual_rolling", "continuous_conversation"])
def test_each_turn_is_its_inputs_its_reply_and_its_results_and_the_last_turns_calls_wait_unanswered(strategy):
    rebuilt = STRATEGIES[strategy].rebuild(settings(), TRANSCRIPT, TURNS)
    state = rebuilt.state
    assert [item["type"] for item in state.items] == [
        *("input", "message"),
        *("input", "input", "tool_call", "tool_result"),
        *("message", "tool_call"),
    ]
    assert state.turns == (TurnSpan(0, 2), TurnSpan(2, 6), TurnSpan(6, 8))
    assert state.unanswered == ("call_2",) and not state.unread_turn
    assert rebuilt.dropped_turns == 0 and not rebuilt.compaction_due
    assert not any("encrypted_content" in item for item in state.items)


def test_a_last_turn_whose_results_no_reply_read_is_unread():
    answered = [*TURNS[:2]]
    state = STRATEGIES["continuous_conversation"].rebuild(settings(), TRANSCRIPT, answered).state
    assert state.unread_turn and state.unanswered == () and state.settled_turns == 1


def test_the_oldest_turns_are_left_out_until_the_rest_fits_the_prompt_budget_and_are_counted():
    whole = TRANSCRIPT.estimate_tokens(STRATEGIES["manual_rolling"].rebuild(settings(), TRANSCRIPT, TURNS).state.items)
    tight = settings(max_context_length=100 + whole - 1)  # one token short of every turn, behind the system prompt
    rebuilt = STRATEGIES["manual_rolling"].rebuild(tight, TRANSCRIPT, TURNS)
    assert rebuilt.dropped_turns == 1 and len(rebuilt.state.turns) == 2
    assert rebuilt.state.turns[0] == TurnSpan(0, 4)  # the spans start again from the kept turns


def test_the_last_turn_is_kept_even_when_it_alone_is_over_the_budget():
    rebuilt = STRATEGIES["manual_rolling"].rebuild(settings(max_context_length=101), TRANSCRIPT, TURNS)
    assert rebuilt.dropped_turns == 2 and len(rebuilt.state.turns) == 1


@pytest.mark.parametrize(
    ("compaction", "due"),
    [(NativeByCall(trigger_tokens=10, max_output_tokens=50), True), (NativeByCall(10_000, 50), False), (None, False)],
    ids=["past the trigger", "under the trigger", "no compaction by a call"],
)
def test_a_rebuilt_history_at_the_trigger_of_a_compaction_by_a_call_is_due_for_it(compaction, due):
    rebuilt = STRATEGIES["continuous_conversation"].rebuild(settings(compaction=compaction), TRANSCRIPT, TURNS)
    assert rebuilt.compaction_due is due


def test_previous_response_id_rebuilds_no_handle_and_every_item_unsent_before_the_next_input():
    rebuilt = STRATEGIES["previous_response_id"].rebuild(settings(), TRANSCRIPT, TURNS)
    assert rebuilt.state.payload[HANDLE] is None and len(rebuilt.state.payload[UNSENT]) == 8
    machine = STRATEGIES["previous_response_id"].start(settings(), TRANSCRIPT, rebuilt.state, None)
    machine.fire(ToolsAnswered((ToolResult("call_2", "MOVE", "frame 4"),)))
    (call,) = machine.fire(ObservationArrived("frame 5"))
    sent = [item["text"] for item in call.request.items]
    assert call.request.previous_response_id is None
    assert sent[-3:] == ["MOVE", "frame 4", "frame 5"] and sent[0] == "frame 1"


def test_a_machine_starts_where_a_resumed_run_rested_and_takes_the_next_observation_from_there():
    by_call = settings(
        compaction=HarnessSummary(trigger_tokens=10, max_output_tokens=50, input_headroom_tokens=0, fork=False)
    )
    state = STRATEGIES["continuous_conversation"].rebuild(by_call, TRANSCRIPT, TURNS[:1]).state
    machine = STRATEGIES["continuous_conversation"].start(by_call, TRANSCRIPT, state, "CompactionScheduled")
    assert machine.path == "CompactionScheduled"
    (summary_call,) = machine.fire(ObservationArrived("frame 2"))
    assert type(summary_call).__name__ == "CallSummary"  # the next turn compacts first


@pytest.mark.parametrize("at", ["AwaitingReply", "Provisional", "Nowhere"])
def test_a_machine_cannot_start_in_the_middle_of_a_turn(at):
    with pytest.raises(ValueError, match=f"{at}"):
        STRATEGIES["manual_rolling"].start(settings(), TRANSCRIPT, None, at)


def test_a_rebuilt_state_replays_as_a_live_one_would_after_its_calls_are_answered():
    """The rebuilt items are what the next request sends: a reply then commits on top of them."""
    state = STRATEGIES["continuous_conversation"].rebuild(settings(), TRANSCRIPT, TURNS).state
    machine = STRATEGIES["continuous_conversation"].start(settings(), TRANSCRIPT, state, None)
    machine.fire(ToolsAnswered((ToolResult("call_2", "MOVE", "frame 4"),)))
    (call,) = machine.fire(ObservationArrived("frame 5"))
    assert [item.get("text") for item in call.request.items][-3:] == ["MOVE", "frame 4", "frame 5"]
    machine.fire(ProviderReplied(native_reply("ACTION: DOWN")))
    assert machine.path == "Provisional"
