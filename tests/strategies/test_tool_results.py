"""Tool calls and their results in every strategy: an accepted reply's calls wait for their results,
which join that reply's turn (so a call and its result are kept, trimmed and summarized together); a
rejected reply's calls never reach the accepted state; results that do not pair with the calls, or
an observation before they are answered, are refused."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from turnstate.adapters.contract import ErrorKind, ModelResponse, ProviderError, ToolCall, ToolResult, ToolSpec, Usage
from turnstate.machine.engine import LiveMachine
from turnstate.strategies import continuous_conversation as cc
from turnstate.strategies import manual_rolling as mr
from turnstate.strategies import previous_response_id as prid
from turnstate.strategies.compaction import HarnessSummary, NativeByCall
from turnstate.strategies.events import (
    ActionAccepted,
    ActionRejected,
    CallProvider,
    CallSummary,
    CompactionReplied,
    ContextOverflowed,
    ObservationArrived,
    ProviderReplied,
    ToolsAnswered,
)
from turnstate.strategies.offload import Offload, pointer, ref_of
from turnstate.strategies.state import TurnSpan
from turnstate.strategies.strategy import StrategySettings
from turnstate.strategies.summary import bridge_text

from .native_items import NativeItems, native_reply
from .rows import check_row

LOOKUP = ToolSpec("lookup", "Look a page up.", {"type": "object", "properties": {"page": {"type": "integer"}}})
CALLS = (ToolCall("c1", "lookup", {"page": 1}), ToolCall("c2", "lookup", {"page": 2}))
RESULTS = (ToolResult("c1", "lookup", "page one"), ToolResult("c2", "lookup", "page two", is_error=True))
ITEMS = NativeItems()
OVERFLOW = ContextOverflowed(ProviderError(ErrorKind.CONTEXT_OVERFLOW))


def settings(adapter_id: str, **changes) -> StrategySettings:
    base = StrategySettings(adapter_id, "Play.", max_retries=2, max_context_length=4000, max_output_tokens=100)
    return replace(base, tools=(LOOKUP,), **changes)


BY_CALL = settings("xai.responses.v1", compaction=NativeByCall(trigger_tokens=50, max_output_tokens=100))
STARTS = {
    "manual_rolling": lambda: mr.start(settings("openai.chat_completions.v1"), ITEMS),
    "previous_response_id": lambda: prid.start(settings("openai.responses.v1"), ITEMS),
    "continuous_conversation": lambda: cc.start(settings("openai.responses.v1"), ITEMS),
}


def called(machine: LiveMachine, observation: str = "f1", calls=CALLS) -> None:
    """One turn whose accepted reply made `calls` (a tool round: no action), its completed context
    103 tokens (a plain reply's is 13)."""
    machine.fire(ObservationArrived(observation))
    reply = replace(native_reply("looking it up", calls=calls), usage=Usage(100, 0, 3))
    machine.fire(ProviderReplied(reply))
    machine.fire(ActionAccepted(None))


@pytest.mark.parametrize("strategy", STARTS)
def test_an_accepted_replys_calls_wait_for_their_results_in_the_calls_order(strategy):
    machine = STARTS[strategy]()
    called(machine)
    assert machine.model.accepted.unanswered == ("c1", "c2")
    with pytest.raises(
        ValueError, match=r"tool calls are c1, c2; pass one result for each, in that order \(got c2, c1\)$"
    ):
        machine.fire(ToolsAnswered(RESULTS[::-1]))
    with pytest.raises(ValueError, match=r"\(got c1\)$"):
        machine.fire(ToolsAnswered(RESULTS[:1]))
    assert machine.model.accepted.unanswered == ("c1", "c2")


@pytest.mark.parametrize("strategy", STARTS)
def test_an_observation_before_the_calls_are_answered_is_refused(strategy):
    machine = STARTS[strategy]()
    called(machine)
    with pytest.raises(RuntimeError, match="tool calls are unanswered"):
        machine.fire(ObservationArrived("f2"))


@pytest.mark.parametrize("strategy", STARTS)
def test_a_rejected_replys_calls_never_reach_the_accepted_state(strategy):
    machine = STARTS[strategy]()
    machine.fire(ObservationArrived("f1"))
    before = machine.model.accepted
    machine.fire(ProviderReplied(native_reply("looking it up", calls=CALLS)))
    (retry,) = machine.fire(ActionRejected("no"))
    assert machine.model.accepted is before and not before.unanswered
    assert isinstance(retry, CallProvider) and not any(item["type"] == "tool_call" for item in retry.request.items)


@pytest.mark.parametrize("strategy", ["manual_rolling", "continuous_conversation"])
def test_results_join_the_turn_whose_reply_made_the_calls_and_the_next_request_replays_them(strategy):
    machine = STARTS[strategy]()
    called(machine)
    turn_end = machine.model.accepted.turns[-1].end
    check_row(machine, [], ToolsAnswered(RESULTS), "Accepted", [])
    accepted = machine.model.accepted
    result_items = ITEMS.tool_result_items(RESULTS)
    assert accepted.turns == (TurnSpan(start=0, end=turn_end + 2),) and accepted.items[-2:] == result_items
    assert not accepted.unanswered
    (ask,) = machine.fire(ObservationArrived(""))  # a tool round's answer, no new observation
    assert list(ask.request.items) == accepted.items and ask.request.tools == (LOOKUP,)


def test_previous_response_id_sends_the_results_first_in_the_next_turn_and_drops_them_once_committed():
    machine = STARTS["previous_response_id"]()
    called(machine)
    check_row(machine, [], ToolsAnswered(RESULTS), "Accepted", [])
    (ask,) = machine.fire(ObservationArrived("f2"))
    assert list(ask.request.items) == [*ITEMS.tool_result_items(RESULTS), *ITEMS.user_items(["f2"])]
    assert ask.request.previous_response_id == "resp_1" and ask.request.tools == (LOOKUP,)
    machine.fire(ProviderReplied(native_reply("ACTION: ACTION1", response_id="resp_2")))
    machine.fire(ActionAccepted("ACTION1"))
    assert machine.model.accepted.payload == {prid.HANDLE: "resp_2"}


def test_manual_rolling_trims_a_call_and_its_result_together_once_a_reply_has_read_them():
    """Against: results appended as a turn of their own, which a trim could keep without the calls."""
    big = ToolResult("c1", "lookup", "x" * 4000)
    machine = mr.start(settings("openai.chat_completions.v1", max_context_length=900), ITEMS)
    called(machine, calls=CALLS[:1])
    machine.fire(ToolsAnswered((big,)))
    machine.fire(ObservationArrived(""))
    machine.fire(ProviderReplied(native_reply("ACTION: ACTION1")))
    machine.fire(ActionAccepted("ACTION1"))  # the reply read the results: the first turn is settled
    (ask,) = machine.fire(ObservationArrived("f2"))
    types = [item["type"] for item in ask.request.items]
    assert "tool_call" not in types and "tool_result" not in types and ask.request.items[-1]["text"] == "f2"


def test_manual_rolling_counts_the_results_in_its_window_estimate():
    """Against: the cached turn estimates left as they were when results joined the last turn."""
    machine = mr.start(settings("openai.chat_completions.v1"), ITEMS)
    called(machine)
    machine.fire(ToolsAnswered(RESULTS))
    model = machine.model
    assert model._turn_tokens() == [ITEMS.estimate_tokens(model.accepted.items)]


def test_a_compaction_scheduled_turn_takes_its_results_before_it_compacts():
    machine = cc.start(BY_CALL, ITEMS)
    machine.fire(ObservationArrived("f1"))
    machine.fire(ProviderReplied(native_reply("ACTION: ACTION1")))
    machine.fire(ActionAccepted("ACTION1"))
    called(machine, "f2")
    check_row(machine, [], ToolsAnswered(RESULTS), "CompactionScheduled", [])
    assert machine.model.accepted.unread_turn
    (compaction,) = machine.fire(ObservationArrived(""))
    assert compaction.request.tools == (LOOKUP,)


def test_a_first_turn_that_only_called_tools_schedules_no_compaction_it_would_have_nothing_to_take():
    """Against: a compaction of no settled turn (the first turn is the unread one once answered)."""
    machine = cc.start(BY_CALL, ITEMS)
    called(machine)
    assert machine.path == "Accepted"


# An unread last turn (tool results no reply has read) is the next reply's input: never trimmed,
# summarized or compacted before a reply has read it.


def summarizing_machine(turns_before: int):
    """A machine with `turns_before` plain turns, then a tool round whose results were answered, at a
    harness summary's trigger."""
    machine = cc.start(settings("openai.responses.v1", compaction=HarnessSummary(50, 100, 0, fork=True)), ITEMS)
    for number in range(turns_before):
        machine.fire(ObservationArrived(f"f{number}"))
        machine.fire(ProviderReplied(native_reply("ACTION: ACTION1")))
        machine.fire(ActionAccepted("ACTION1"))
    called(machine, "frame")
    machine.fire(ToolsAnswered(RESULTS))
    return machine


def test_a_harness_summary_keeps_the_unread_turn_verbatim_after_the_bridge():
    """Against: the summary taking every turn, the results (the frame an action answered) with them."""
    machine = summarizing_machine(turns_before=2)
    accepted = machine.model.accepted
    assert accepted.unread_turn and accepted.settled_turns == 2
    (summary,) = machine.fire(ObservationArrived(""))
    assert summary.summary_pass.summarized_turns == 2 and summary.summary_pass.excluded_turns == 1
    assert "page one" not in repr(summary.request.items)
    (action,) = machine.fire(CompactionReplied(ModelResponse("NOTES: x", Usage(5, 0, 1), "completed")))
    unread = accepted.items[accepted.turns[-1].start :]
    assert list(action.request.items) == [*ITEMS.user_items([bridge_text("NOTES: x")]), *unread]


def test_a_compaction_call_takes_the_unread_turn_with_the_rest():
    """Against: keeping the unread turn after the compaction item (compaction_call rule 1)."""
    machine = cc.start(BY_CALL, ITEMS)
    machine.fire(ObservationArrived("f1"))
    machine.fire(ProviderReplied(native_reply("ACTION: ACTION1")))
    machine.fire(ActionAccepted("ACTION1"))
    called(machine, "f2")
    machine.fire(ToolsAnswered(RESULTS))
    (compaction,) = machine.fire(ObservationArrived(""))
    assert list(compaction.request.items) == machine.model.accepted.items


def test_manual_rolling_never_trims_or_drops_the_unread_turn():
    big = ToolResult("c1", "lookup", "x" * 4000)
    machine = mr.start(settings("openai.chat_completions.v1", max_context_length=900), ITEMS)
    called(machine, calls=CALLS[:1])
    machine.fire(ToolsAnswered((big,)))
    (ask,) = machine.fire(ObservationArrived(""))  # over the budget, but the unread turn is the input
    assert list(ask.request.items) == machine.model.accepted.items
    assert not machine.model.has_droppable_turn(OVERFLOW)


# Stale tool-result offload (strategies/offload.py) in the requests the machines build.

OFFLOAD = Offload(keep_recent_per_tool=1, min_savings_chars=100)
PAGE = "p" * 1000


PLAIN_USAGE = Usage(10, 0, 3)  # a plain reply's, as native_reply makes it


def paged(machine: LiveMachine, pages: int, acted: Usage = PLAIN_USAGE) -> None:
    """`pages` tool rounds, each a lookup answered with a large page, then an action (its reply's
    usage `acted`) that read them all."""
    for number in range(pages):
        called(machine, f"f{number}", calls=(ToolCall(f"c{number}", "lookup", {"page": number}),))
        machine.fire(ToolsAnswered((ToolResult(f"c{number}", "lookup", f"{number}{PAGE}"),)))
    machine.fire(ObservationArrived(""))
    machine.fire(ProviderReplied(replace(native_reply("ACTION: ACTION1"), usage=acted)))
    machine.fire(ActionAccepted("ACTION1"))


@pytest.mark.parametrize("strategy", ["manual_rolling", "continuous_conversation"])
def test_stale_results_go_out_as_pointers_while_the_accepted_state_keeps_them_whole(strategy):
    adapter = "openai.chat_completions.v1" if strategy == "manual_rolling" else "openai.responses.v1"
    start = mr.start if strategy == "manual_rolling" else cc.start
    machine = start(settings(adapter, offload=OFFLOAD), ITEMS)
    paged(machine, 3)
    (ask,) = machine.fire(ObservationArrived("f9"))
    sent = [item["text"] for item in ask.request.items if item["type"] == "tool_result"]
    refs = [ref_of(f"{number}{PAGE}") for number in range(2)]
    assert sent == [pointer("lookup", refs[0], 1001), pointer("lookup", refs[1], 1001), f"2{PAGE}"]
    assert ask.offloaded == ((refs[0], f"0{PAGE}"), (refs[1], f"1{PAGE}"))
    kept = [item["text"] for item in machine.model.accepted.items if item["type"] == "tool_result"]
    assert kept == [f"{number}{PAGE}" for number in range(3)]  # only the request is projected


def test_an_unread_turns_results_are_never_offloaded_however_many_its_reply_made():
    """Against: projecting the unread turn, whose results the model is about to read."""
    machine = cc.start(settings("openai.responses.v1", offload=OFFLOAD), ITEMS)
    calls = (ToolCall("a", "lookup", {"page": 1}), ToolCall("b", "lookup", {"page": 2}))
    called(machine, calls=calls)
    machine.fire(ToolsAnswered((ToolResult("a", "lookup", f"a{PAGE}"), ToolResult("b", "lookup", f"b{PAGE}"))))
    (ask,) = machine.fire(ObservationArrived(""))
    assert [item["text"] for item in ask.request.items if item["type"] == "tool_result"] == [f"a{PAGE}", f"b{PAGE}"]
    assert ask.offloaded == ()


@pytest.mark.parametrize(("offload", "form"), [(None, "fork"), (OFFLOAD, "independent")])
def test_a_summary_forks_the_latest_request_only_when_it_was_not_made_lossy(offload, form):
    """The fork guard: a fork of a projected request would summarize pointers instead of the results.
    Either way the summary request holds the fact the model needs (page 1's text, whole)."""
    summarizing = settings("openai.responses.v1", offload=offload, compaction=HarnessSummary(1000, 100, 0, fork=True))
    machine = cc.start(summarizing, ITEMS)
    paged(machine, 3, acted=Usage(2000, 0, 3))  # the action reached the trigger: the next turn summarizes first
    (summary,) = machine.fire(ObservationArrived("f9"))
    assert isinstance(summary, CallSummary) and summary.summary_pass.fork is (form == "fork")
    assert f"1{PAGE}" in json.dumps(summary.request.items)
