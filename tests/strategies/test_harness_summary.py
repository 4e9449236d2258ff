"""continuous_conversation with harness summaries (the nested harness_summary machine), driven by
events alone: every row, and the rules of strategies/summary.py."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from turnstate.adapters.contract import ErrorKind, ModelResponse, ProviderError, Usage
from turnstate.machine.engine import path_of
from turnstate.strategies import continuous_conversation as cc
from turnstate.strategies import harness_summary as hs
from turnstate.strategies.compaction import HarnessSummary
from turnstate.strategies.events import (
    ActionAccepted,
    ActionRejected,
    BackoffElapsed,
    CallProvider,
    CallSummary,
    CompactionReplied,
    ContextOverflowed,
    FailClosed,
    InputBuffered,
    ObservationArrived,
    ProviderFailed,
    ProviderReplied,
    ReportSummary,
    SubmitAction,
    WaitBeforeRetry,
)
from turnstate.strategies.state import RuntimeState, TurnSpan
from turnstate.strategies.strategy import StrategySettings
from turnstate.strategies.summary import (
    BRIDGE,
    BUDGET,
    SUMMARIZER_SYSTEM,
    SUMMARY_INSTRUCTION,
    TASK_INSTRUCTIONS,
    bridge_text,
    fenced,
)

from .commit_discipline import WALK_SETTINGS, CommitDisciplineWalk
from .native_items import NativeItems, native_reply
from .rows import check_row

# Every accepted action (usage 10 + 3) reaches the trigger, so each commit schedules a summary.
SUMMARIZING = StrategySettings(
    "openai.responses.v1",
    "Play.",
    max_retries=1,
    max_context_length=4000,
    max_output_tokens=100,
    compaction=HarnessSummary(trigger_tokens=10, max_output_tokens=100, input_headroom_tokens=0, fork=True),
)
UNSCHEDULED = replace(SUMMARIZING, compaction=replace(SUMMARIZING.compaction, trigger_tokens=1000))
ITEMS = NativeItems()
SUMMARY_ASKED = path_of(cc.State.Compacting, hs.State.Summarizing)
RECOVERING = path_of(cc.State.Compacting, hs.State.OverflowRecovery)
SUMMARY_BACKING_OFF = path_of(cc.State.Compacting, hs.State.BackingOff)
OVERFLOW = ContextOverflowed(ProviderError(ErrorKind.CONTEXT_OVERFLOW))


def played(turns: int, settings: StrategySettings = SUMMARIZING):
    """A machine with `turns` accepted turns f1..fN, then one more played through it (f<N+1>), so
    that it has sent an action request; with SUMMARIZING that last commit schedules a summary."""
    items: list = []
    spans: list[TurnSpan] = []
    for number in range(1, turns + 1):
        turn = [*ITEMS.user_items([f"f{number}"]), *native_reply(f"ACTION: ACTION1 (f{number})").native_items]
        spans.append(TurnSpan(start=len(items), end=len(items) + len(turn)))
        items += turn
    state = RuntimeState(adapter_id=settings.adapter_id, strategy=cc.STRATEGY, payload={"items": items}, turns=spans)
    machine = cc.start(settings, ITEMS, state.replace(completed_context_tokens=13 if turns else 0))
    if turns:
        machine.fire(ObservationArrived(f"f{turns + 1}"))  # one more turn, so the machine saw a request
        machine.fire(ProviderReplied(native_reply(f"ACTION: ACTION1 (f{turns + 1})")))
        machine.fire(ActionAccepted("ACTION1"))
    return machine


def summarized(text: str = "NOTES: level 1 beacon C") -> CompactionReplied:
    return CompactionReplied(ModelResponse(text=text, usage=Usage(50, 0, 8), stop_reason="completed"))


def failure(kind: ErrorKind) -> ProviderFailed:
    return ProviderFailed(ProviderError(kind, Usage(5, 0, 0)))


OBSERVE = ObservationArrived("next")
REPLY = ProviderReplied(native_reply("ACTION: ACTION1 (next)"))

# (turns accepted before, events before, event, resulting path, effect types)
# fmt: off
CASES = {
    "an accepted action at the trigger schedules a summary": (0, [ObservationArrived("f1"), ProviderReplied(native_reply("x"))], ActionAccepted("ACTION1"), "CompactionScheduled", [SubmitAction]),
    "a scheduled machine buffers inputs": (1, [], InputBuffered("GAME_OVER"), "CompactionScheduled", []),
    "the next observation summarizes first": (1, [], OBSERVE, SUMMARY_ASKED, [CallSummary]),
    "a summary goes on to the action request": (1, [OBSERVE], summarized(), "AwaitingReply", [CallProvider]),
    "an empty summary is asked for again": (1, [OBSERVE], summarized("  "), SUMMARY_ASKED, [CallSummary]),
    "an empty summary without retries fails closed": (1, [OBSERVE, summarized("")], summarized(""), "FailedClosed", [FailClosed]),
    "a transient failure waits": (1, [OBSERVE], failure(ErrorKind.TRANSIENT), SUMMARY_BACKING_OFF, [WaitBeforeRetry]),
    "after the wait it asks again": (1, [OBSERVE, failure(ErrorKind.TRANSIENT)], BackoffElapsed(), SUMMARY_ASKED, [CallSummary]),
    "a refused summary is asked for again at once": (1, [OBSERVE], failure(ErrorKind.REFUSAL), SUMMARY_ASKED, [CallSummary]),
    "a fatal failure fails closed": (1, [OBSERVE], failure(ErrorKind.FATAL), "FailedClosed", [FailClosed]),
    "an overflow asks for fewer turns": (3, [OBSERVE], OVERFLOW, RECOVERING, [CallSummary]),
    "an overflow of one turn fails closed": (0, [ObservationArrived("f1"), REPLY, ActionAccepted("A"), OBSERVE], OVERFLOW, "FailedClosed", [FailClosed]),
    "recovery halves again": (7, [OBSERVE, OVERFLOW], OVERFLOW, RECOVERING, [CallSummary]),
    "recovery at the protected boundary fails closed": (1, [OBSERVE, OVERFLOW], OVERFLOW, "FailedClosed", [FailClosed]),
    "a recovered summary goes on": (3, [OBSERVE, OVERFLOW], summarized(), "AwaitingReply", [CallProvider]),
    "an empty recovered summary is asked for again as it stands": (3, [OBSERVE, OVERFLOW], summarized(""), SUMMARY_ASKED, [CallSummary]),
    "an empty recovered summary without retries fails closed": (3, [OBSERVE, OVERFLOW, summarized("")], summarized(""), "FailedClosed", [FailClosed]),
    "a transient failure in recovery waits": (3, [OBSERVE, OVERFLOW], failure(ErrorKind.TRANSIENT), SUMMARY_BACKING_OFF, [WaitBeforeRetry]),
    "a refusal in recovery is asked again at once as it stands": (3, [OBSERVE, OVERFLOW], failure(ErrorKind.REFUSAL), SUMMARY_ASKED, [CallSummary]),
    "a summary cut off at its cap is asked for shorter": (1, [OBSERVE], failure(ErrorKind.TRUNCATED), RECOVERING, [CallSummary]),
    "a summary cut off in recovery is asked for shorter again": (3, [OBSERVE, OVERFLOW], failure(ErrorKind.TRUNCATED), RECOVERING, [CallSummary]),
    "a summary cut off without retries fails closed": (1, [OBSERVE, failure(ErrorKind.TRUNCATED)], failure(ErrorKind.TRUNCATED), "FailedClosed", [FailClosed]),
    "a fatal failure in recovery fails closed": (3, [OBSERVE, OVERFLOW], failure(ErrorKind.FATAL), "FailedClosed", [FailClosed]),
    "a rejected action summarizes the accepted turns again": (1, [OBSERVE, summarized(), REPLY], ActionRejected("no action"), SUMMARY_ASKED, [CallSummary]),
    "a refused action request summarizes the accepted turns again": (1, [OBSERVE, summarized()], failure(ErrorKind.REFUSAL), SUMMARY_ASKED, [CallSummary]),
    "a transient action failure waits, then summarizes again": (1, [OBSERVE, summarized(), failure(ErrorKind.TRANSIENT)], BackoffElapsed(), SUMMARY_ASKED, [CallSummary]),
}
# fmt: on


@pytest.mark.parametrize(("turns", "before", "event", "path", "effect_types"), CASES.values(), ids=CASES.keys())
def test_table(turns, before, event, path, effect_types):
    check_row(played(turns) if turns else cc.start(SUMMARIZING, ITEMS), before, event, path, effect_types)


def test_an_action_overflow_summarizes_once_and_a_second_overflow_fails_closed():
    machine = played(2, UNSCHEDULED)
    assert machine.path == "Accepted"  # under the trigger: nothing scheduled
    (first,) = machine.fire(OBSERVE)
    (summary,) = machine.fire(OVERFLOW)
    assert isinstance(summary, CallSummary) and summary.summary_pass.lane == "action_overflow"
    assert summary.request.system == SUMMARIZER_SYSTEM  # the overflow lanes never fork
    (retried,) = machine.fire(summarized())
    assert isinstance(retried, CallProvider) and retried.request.items[-1] == first.request.items[-1]
    assert retried.request.items[0] == ITEMS.user_items([bridge_text("NOTES: level 1 beacon C")])[0]
    (closed,) = machine.fire(OVERFLOW)
    assert isinstance(closed, FailClosed) and machine.path == "FailedClosed"


def test_the_trigger_lane_forks_the_latest_action_request_and_holds_the_turns_inputs_aside():
    machine = played(2)
    latest = machine.model.latest_request
    machine.fire(InputBuffered("GAME_OVER"))
    (call,) = machine.fire(OBSERVE)
    request = call.request
    assert call.summary_pass.fork and request.system == latest.system == "Play."
    assert list(request.items[: len(latest.items)]) == list(latest.items)  # byte for byte: the cached prefix
    assert list(request.items[:-1]) == machine.model.accepted.items
    assert request.items[-1] == {"type": "input", "text": f"{SUMMARY_INSTRUCTION} {BUDGET.format(budget=100)}"}
    assert "GAME_OVER" not in repr(request) and "next" not in repr(request)


def test_a_latest_request_that_did_not_carry_the_whole_state_makes_the_summary_independent():
    machine = played(2)
    machine.model.latest_request = replace(machine.model.latest_request, items=machine.model.latest_request.items[2:])
    (call,) = machine.fire(OBSERVE)
    assert not call.summary_pass.fork and call.request.system == SUMMARIZER_SYSTEM
    (message,) = call.request.items
    assert "f1" in message["text"] and message["text"].endswith(f"{SUMMARY_INSTRUCTION} {BUDGET.format(budget=100)}")
    assert "sealed(" not in message["text"]  # opaque reasoning never reaches the independent form


def test_the_independent_summary_carries_the_tasks_instructions_as_fenced_context():
    machine = played(2)
    machine.model.latest_request = None  # nothing to fork
    (call,) = machine.fire(OBSERVE)
    (message,) = call.request.items
    text = message["text"]
    assert call.request.system == SUMMARIZER_SYSTEM and text.startswith(TASK_INSTRUCTIONS)
    assert f"```\n{machine.model.system_prompt}\n```" in text  # quoted whole, inside one fence
    assert text.index("```") < text.index("The conversation so far")


def test_a_fence_is_longer_than_any_backtick_run_in_what_it_quotes():
    quoted = "say ``` then ```` and stop"
    fence, body, closing = fenced(quoted).split("\n")
    assert fence == closing == "`````" and body == quoted
    assert fenced("no backticks").startswith("```\n")


@pytest.mark.parametrize("named", [100, 40])
def test_a_summary_request_names_its_output_cap_as_the_summarys_budget(named):
    machine = played(2, replace(SUMMARIZING, compaction=replace(SUMMARIZING.compaction, max_output_tokens=named)))
    (call,) = machine.fire(OBSERVE)
    assert call.request.max_output_tokens == named
    assert call.request.items[-1]["text"].endswith(
        f"Keep the summary within {named} tokens: a longer answer is cut off."
    )


def test_each_retry_of_a_summary_cut_off_at_its_cap_asks_within_half_the_budget_of_the_one_before():
    machine = played(2, replace(SUMMARIZING, max_retries=3))
    calls = machine.fire(OBSERVE)
    for _ in range(3):
        calls += machine.fire(failure(ErrorKind.TRUNCATED))
    texts = [call.request.items[-1]["text"] for call in calls]
    assert len(set(texts)) == len(texts) == 4  # no request of the turn repeats the one before it
    assert texts[0].endswith("Keep the summary within 100 tokens: a longer answer is cut off.")
    for text, budget in zip(texts[1:], (50, 25, 12), strict=True):
        assert text.endswith(f"A summary of this was cut off at 100 tokens; keep this one within {budget} tokens.")
    assert {call.request.max_output_tokens for call in calls} == {100}  # the cap itself is unchanged
    assert {(call.summary_pass.summarized_turns, call.summarized_items) for call in calls} == {(3, 9)}  # the same turns
    assert isinstance(machine.fire(failure(ErrorKind.TRUNCATED))[0], FailClosed)  # then the retries are spent


def test_a_cut_summary_that_then_overflows_keeps_its_halved_budget_for_fewer_turns():
    machine = played(3, replace(SUMMARIZING, max_retries=3))
    machine.fire(OBSERVE)
    machine.fire(failure(ErrorKind.TRUNCATED))
    (call,) = machine.fire(OVERFLOW)
    assert call.summary_pass.summarized_turns == 2 and call.summary_pass.cuts == 1
    assert call.request.items[-1]["text"].endswith("keep this one within 50 tokens.")


def test_a_summary_commits_only_with_the_action_as_one_bridge_then_the_turn():
    machine = played(2)
    before = machine.model.accepted
    machine.fire(InputBuffered("GAME_OVER"))
    machine.fire(OBSERVE)
    (action_request,) = machine.fire(summarized())
    bridge = ITEMS.user_items([bridge_text("NOTES: level 1 beacon C")])
    assert list(action_request.request.items) == [*bridge, *ITEMS.user_items(["GAME_OVER", "next"])]
    machine.fire(REPLY)
    assert machine.model.accepted.items == before.items  # nothing commits before the action
    effects = machine.fire(ActionAccepted("ACTION1"))
    (record,) = [effect for effect in effects if isinstance(effect, ReportSummary)]
    assert record.bridge == BRIDGE.format(summary="NOTES: level 1 beacon C") and record.items_before == 9
    state = machine.model.accepted
    assert state.items[:1] == bridge and state.turns == (TurnSpan(start=0, end=1), TurnSpan(start=1, end=5))
    assert state.pending == ()


def test_a_failed_summary_leaves_the_accepted_state_byte_identical():
    machine = played(2)
    kept = machine.model.accepted.to_json()
    machine.fire(OBSERVE)
    machine.fire(summarized(""))
    machine.fire(summarized(""))
    assert machine.path == "FailedClosed" and machine.model.accepted.to_json() == kept


def test_overflow_recovery_keeps_the_exact_native_tail_and_the_buffered_inputs_in_place():
    machine = played(3)
    accepted = machine.model.accepted  # turns f1..f4
    machine.fire(OBSERVE)
    machine.fire(OVERFLOW)  # 4 turns -> summarize 2, keep 2
    (call,) = machine.fire(OVERFLOW)  # -> summarize 1, keep 3
    assert call.summary_pass.summarized_turns == 1 and call.summary_pass.excluded_turns == 3
    assert "f2" not in call.request.items[0]["text"] and "f1" in call.request.items[0]["text"]
    machine.fire(summarized())
    machine.fire(REPLY)
    machine.fire(ActionAccepted("ACTION1"))
    state = machine.model.accepted
    tail = accepted.items[accepted.turns[1].start :]
    bridge = ITEMS.user_items([bridge_text("NOTES: level 1 beacon C")])
    assert state.items[: 1 + len(tail)] == [*bridge, *tail]  # the exact native items, in order
    assert [span.end - span.start for span in state.turns] == [1, 3, 3, 3, 3]  # boundaries remapped


def test_buffered_inputs_of_a_kept_turn_stay_where_they_were():
    machine = cc.start(UNSCHEDULED, ITEMS)
    for frame in ("f1", "f2"):
        if frame == "f2":
            machine.fire(InputBuffered("GAME_OVER"))
        machine.fire(ObservationArrived(frame))
        machine.fire(ProviderReplied(native_reply(f"ACTION: ACTION1 ({frame})")))
        machine.fire(ActionAccepted("ACTION1"))
    machine.fire(OBSERVE)
    machine.fire(OVERFLOW)  # action overflow: summarize both turns
    machine.fire(OVERFLOW)  # the summary overflows: summarize f1, keep f2 with its buffered input
    machine.fire(summarized())
    machine.fire(REPLY)
    machine.fire(ActionAccepted("ACTION1"))
    texts = [item.get("text") for item in machine.model.accepted.items if item["type"] == "input"]
    assert texts[1:] == ["GAME_OVER", "f2", "next"]


@pytest.mark.parametrize("turns", [1, 2, 5, 16, 37, 100])
def test_a_forced_deep_recovery_makes_at_most_ceil_log2_turns_plus_two_summary_requests(turns):
    machine = played(turns - 1) if turns > 1 else cc.start(SUMMARIZING, ITEMS)
    if turns == 1:
        machine.fire(ObservationArrived("f1"))
        machine.fire(REPLY)
        machine.fire(ActionAccepted("ACTION1"))
    requests = [effect for effect in machine.fire(OBSERVE) if isinstance(effect, CallSummary)]
    while machine.path != "FailedClosed":
        requests += [effect for effect in machine.fire(OVERFLOW) if isinstance(effect, CallSummary)]
    assert len(requests) <= math.ceil(math.log2(turns)) + 2
    assert [call.summary_pass.summarized_turns for call in requests][-1] == 1  # down to the protected boundary


def test_an_oversized_continuation_fails_closed():
    machine = played(1)
    machine.fire(OBSERVE)
    (closed,) = machine.fire(summarized("x" * 20_000))  # the bridge alone would not fit the context
    assert isinstance(closed, FailClosed)


class HarnessSummaryWalk(CommitDisciplineWalk):
    record = cc.DEFINITION
    strategy_settings = replace(
        SUMMARIZING, max_retries=2, compaction=replace(SUMMARIZING.compaction, trigger_tokens=60)
    )
    transcript = NativeItems()

    def reply_response(self, text: str) -> ModelResponse:
        return native_reply(text)

    def compaction_response(self) -> ModelResponse:
        return ModelResponse(text=self.fresh("summary"), usage=Usage(20, 0, 5), stop_reason="completed")


HarnessSummaryWalk.TestCase.settings = WALK_SETTINGS
TestHarnessSummaryWalk = HarnessSummaryWalk.TestCase
