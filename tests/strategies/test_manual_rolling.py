"""manual_rolling driven by events alone (no HTTP): every row of its table, and its window rules."""

from __future__ import annotations

import pytest

from turnstate.adapters.chat_completions import ChatMessages
from turnstate.adapters.contract import ErrorKind, ModelResponse, ProviderError, Usage
from turnstate.adapters.tokens import estimate_messages_tokens
from turnstate.machine.engine import InvalidEvent
from turnstate.strategies import manual_rolling as mr
from turnstate.strategies.events import (
    ActionAccepted,
    ActionRejected,
    BackoffElapsed,
    CallProvider,
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
from turnstate.strategies.manual_rolling import State
from turnstate.strategies.retry import Backoff
from turnstate.strategies.state import TurnSpan
from turnstate.strategies.strategy import StrategySettings

from .rows import check_row

ADAPTER = "openai.chat_completions.v1"
SYSTEM = "Play the game."


def settings(
    max_context_length: int = 4000, max_output_tokens: int = 100, max_retries: int = 2, trim_low_water: float = 1.0
) -> StrategySettings:
    return StrategySettings(ADAPTER, SYSTEM, max_retries, max_context_length, max_output_tokens, trim_low_water)


def start(max_context_length: int = 4000, max_output_tokens: int = 100, max_retries: int = 2, trim_low_water=1.0):
    return mr.start(settings(max_context_length, max_output_tokens, max_retries, trim_low_water), ChatMessages())


def reply(text: str = "ACTION: ACTION1") -> ProviderReplied:
    return ProviderReplied(
        ModelResponse(
            text=text, usage=Usage(10, 0, 3), stop_reason="stop", native_items=({"role": "assistant", "content": text},)
        )
    )


def failure(kind: ErrorKind) -> ProviderFailed:
    return ProviderFailed(ProviderError(kind, Usage(5, 0, 0)))


OVERFLOW = ContextOverflowed(ProviderError(ErrorKind.CONTEXT_OVERFLOW))


def play_turn(machine, observation: str, answer: str = "ACTION: ACTION1") -> None:
    machine.fire(ObservationArrived(observation))
    machine.fire(reply(answer))
    machine.fire(ActionAccepted("ACTION1"))


def request_of(effects) -> list[dict]:
    (effect,) = effects
    assert isinstance(effect, CallProvider)
    return list(effect.request.items)


# One row per table transition: the events that lead there, the event under test, the state and
# effect types that must follow.
# fmt: off
CASES = {
    "observed asks the provider": ([], ObservationArrived("f1"), State.AwaitingReply, [CallProvider]),
    "buffered waits in Accepted": ([], InputBuffered("GAME_OVER"), State.Accepted, []),
    "replied holds the reply and asks for a parse": ([ObservationArrived("f1")], reply(), State.Provisional, [ParseAction]),
    "transient failure waits first": ([ObservationArrived("f1")], failure(ErrorKind.TRANSIENT), State.BackingOff, [WaitBeforeRetry]),
    "after the wait it asks again": ([ObservationArrived("f1"), failure(ErrorKind.TRANSIENT)], BackoffElapsed(), State.AwaitingReply, [CallProvider]),
    "refusal asks again": ([ObservationArrived("f1")], failure(ErrorKind.REFUSAL), State.AwaitingReply, [CallProvider]),
    "truncation asks again": ([ObservationArrived("f1")], failure(ErrorKind.TRUNCATED), State.AwaitingReply, [CallProvider]),
    "fatal failure fails closed": ([ObservationArrived("f1")], failure(ErrorKind.FATAL), State.FailedClosed, [FailClosed]),
    "overflow with no turn to drop fails closed": ([ObservationArrived("f1")], OVERFLOW, State.FailedClosed, [FailClosed]),
    "accepted action commits and submits": ([ObservationArrived("f1"), reply()], ActionAccepted("ACTION1"), State.Accepted, [SubmitAction]),
    "rejected action asks again": ([ObservationArrived("f1"), reply("hmm")], ActionRejected("no action"), State.AwaitingReply, [CallProvider]),
    "rejected action with no retry left fails closed": ([ObservationArrived("f1"), *[reply("hmm"), ActionRejected("x")] * 2, reply("hmm")], ActionRejected("x"), State.FailedClosed, [FailClosed]),
    "overflow drops the oldest turn and asks again": ([ObservationArrived("f1"), reply(), ActionAccepted("ACTION1"), ObservationArrived("f2")], OVERFLOW, State.AwaitingReply, [CallProvider]),
}
# fmt: on


@pytest.mark.parametrize(("before", "event", "state", "effect_types"), CASES.values(), ids=CASES.keys())
def test_table(before, event, state, effect_types):
    check_row(start(), before, event, state, effect_types)


def test_a_committed_turn_is_one_user_message_and_the_visible_reply():
    machine = start()
    play_turn(machine, "frame 1", "going left\nACTION: ACTION1\nNOTES: beacon B")
    state = machine.model.accepted
    assert state.items == [
        {"role": "user", "content": "frame 1"},
        {"role": "assistant", "content": "going left\nACTION: ACTION1\nNOTES: beacon B"},
    ]
    assert state.turns == (TurnSpan(start=0, end=2),)


def test_the_system_prompt_carries_the_carry_forward_instruction():
    machine = start()
    (effect,) = machine.fire(ObservationArrived("frame 1"))
    assert effect.request.system.startswith(SYSTEM)
    assert "NOTES:" in effect.request.system


def test_buffered_inputs_are_replayed_in_order_before_the_next_observation_and_then_cleared():
    machine = start()
    play_turn(machine, "frame 1")
    machine.fire(InputBuffered("GAME_OVER frame"))
    machine.fire(InputBuffered("second buffered"))
    assert machine.model.accepted.pending == ("GAME_OVER frame", "second buffered")
    messages = request_of(machine.fire(ObservationArrived("reset frame")))
    assert messages[-1]["content"] == "GAME_OVER frame\n\nsecond buffered\n\nreset frame"
    machine.fire(reply())
    machine.fire(ActionAccepted("ACTION1"))
    assert machine.model.accepted.pending == ()


def test_retries_are_bounded_and_exhaustion_fails_closed_keeping_the_accepted_state():
    machine = start(max_retries=2)
    play_turn(machine, "frame 1")
    machine.fire(InputBuffered("buffered"))
    accepted_before = machine.model.accepted.to_json()
    machine.fire(ObservationArrived("frame 2"))
    machine.fire(failure(ErrorKind.TRANSIENT))  # retry 1, after a wait
    machine.fire(BackoffElapsed())
    machine.fire(reply("no action here"))
    machine.fire(ActionRejected("no action"))  # retry 2
    machine.fire(reply("still none"))
    effects = machine.fire(ActionRejected("no action"))
    assert machine.state is State.FailedClosed
    assert [type(effect) for effect in effects] == [FailClosed]
    assert "retries exhausted" in effects[0].reason
    assert machine.model.accepted.to_json() == accepted_before


def test_a_retry_sends_exactly_the_request_of_the_first_attempt():
    machine = start()
    play_turn(machine, "frame 1")
    first = request_of(machine.fire(ObservationArrived("frame 2")))
    machine.fire(reply("garbage"))
    again = request_of(machine.fire(ActionRejected("no action")))
    assert again == first
    assert "garbage" not in str(again)


def test_an_overflow_drops_the_oldest_whole_turn_and_asks_again():
    machine = start()
    play_turn(machine, "frame 1")
    play_turn(machine, "frame 2")
    first = request_of(machine.fire(ObservationArrived("frame 3")))
    assert [m["content"] for m in first if m["role"] == "user"] == ["frame 1", "frame 2", "frame 3"]
    smaller = request_of(machine.fire(OVERFLOW))
    assert [m["content"] for m in smaller if m["role"] == "user"] == ["frame 2", "frame 3"]
    assert smaller[0]["role"] == "user"  # never half a turn: the window still starts with a user message
    machine.fire(reply())
    machine.fire(ActionAccepted("ACTION1"))
    assert [m["content"] for m in machine.model.accepted.items if m["role"] == "user"] == ["frame 2", "frame 3"]


def test_the_window_is_trimmed_by_whole_oldest_turns_to_fit_the_estimate():
    budget_for_three_turns = 400
    machine = start(max_context_length=budget_for_three_turns + 100, max_output_tokens=100)
    frame = "x" * 200  # 50 tokens + 4 overhead
    for index in range(8):
        play_turn(machine, f"{index} {frame}")
    messages = request_of(machine.fire(ObservationArrived(f"8 {frame}")))
    system = {"role": "system", "content": machine.model.system_prompt}
    assert estimate_messages_tokens([system, *messages]) <= budget_for_three_turns
    users = [m["content"].split()[0] for m in messages if m["role"] == "user"]
    assert users == [str(index) for index in range(8 - len(users) + 1, 9)]  # the newest turns, contiguous
    assert len(users) >= 2
    assert [m["role"] for m in messages] == ["user", "assistant"] * (len(users) - 1) + ["user"]


def test_a_full_window_is_trimmed_to_the_low_water_mark_and_then_keeps_its_prefix():
    machine = start(max_context_length=1100, max_output_tokens=100, trim_low_water=0.5)  # low water: 500
    frame = "x" * 200  # a turn: 54 + 16 tokens
    requests = []
    for index in range(30):
        requests.append(request_of(machine.fire(ObservationArrived(f"{index} {frame}"))))
        machine.fire(reply())
        machine.fire(ActionAccepted("ACTION1"))
    system = {"role": "system", "content": machine.model.system_prompt}
    sizes = [estimate_messages_tokens([system, *request]) for request in requests]
    assert max(sizes) <= 1000
    trims = [n for n in range(1, 30) if requests[n][: len(requests[n - 1])] != requests[n - 1]]
    assert trims, "the window never filled"
    for n in trims:  # each trim brings the request down to the low-water mark, not just under the limit
        assert sizes[n] <= 500 < sizes[n - 1] + 70
    # Between trims every request begins with the one before it: the prefix a cache can serve.
    assert len(trims) <= 30 * 70 // (1000 - 500) + 1


def test_a_window_that_fits_the_budget_exactly_is_sent_whole():
    probe = start()
    play_turn(probe, "frame 1")
    sent = request_of(probe.fire(ObservationArrived("frame 2")))
    exact = ChatMessages().estimate_tokens(sent, probe.model.system_prompt)
    fits_exactly = start(max_context_length=exact + 100, max_output_tokens=100)
    play_turn(fits_exactly, "frame 1")
    assert request_of(fits_exactly.fire(ObservationArrived("frame 2"))) == sent
    one_token_short = start(max_context_length=exact + 99, max_output_tokens=100)
    play_turn(one_token_short, "frame 1")
    assert request_of(one_token_short.fire(ObservationArrived("frame 2"))) == sent[2:]


def test_a_commit_trims_the_accepted_window_to_the_budget_at_once():
    machine = start(max_context_length=500, max_output_tokens=100)
    play_turn(machine, "frame 1")
    play_turn(machine, "frame 2", "ACTION: ACTION1\nNOTES: " + "n" * 1200)  # both turns: 401 tokens > 400
    state = machine.model.accepted
    budget = 500 - 100
    assert ChatMessages().estimate_tokens(state.items, machine.model.system_prompt) <= budget
    assert [item["content"] for item in state.items if item["role"] == "user"] == ["frame 2"]
    assert len(state.turns) == 1


def test_a_state_for_another_adapter_is_refused():
    state = start().model.accepted.replace(adapter_id="some.other.adapter")
    with pytest.raises(ValueError, match="belongs to adapter 'some.other.adapter'"):
        mr.start(settings(), ChatMessages(), state)


def test_an_action_before_any_reply_is_an_invalid_event():
    machine = start()
    machine.fire(ObservationArrived("frame 1"))
    with pytest.raises(InvalidEvent):
        machine.fire(ActionAccepted("ACTION1"))
    assert machine.state is State.AwaitingReply


def test_an_overflow_drops_a_turn_the_trimmed_request_actually_sent():
    machine = start(max_context_length=500, max_output_tokens=100)
    frame = "x" * 200
    for index in range(8):
        play_turn(machine, f"{index} {frame}")
    sent = request_of(machine.fire(ObservationArrived(f"8 {frame}")))
    smaller = request_of(machine.fire(OVERFLOW))
    users = [[m["content"].split()[0] for m in messages if m["role"] == "user"] for messages in (sent, smaller)]
    assert users[1] == users[0][1:]  # exactly the oldest turn that was sent is gone


class ReasoningItems:
    """A transcript unlike Chat Completions': a turn opens with one item per input and a reply is an
    opaque reasoning item followed by a message, as Responses-style adapters lay them out."""

    def user_items(self, inputs):
        return [{"type": "input", "text": text} for text in inputs]

    def reply_items(self, response):
        return list(response.native_items)

    def estimate_tokens(self, items, system=""):
        return len(system) // 4 + sum(10 + len(str(item.get("text", ""))) // 4 for item in items)

    def readable(self, items):
        return [{"role": item["type"], "content": str(item.get("text", ""))} for item in items if "text" in item]


def reasoning_reply(n: int) -> ProviderReplied:
    native = (
        {"type": "reasoning", "encrypted_content": f"opaque-{n}"},
        {"type": "message", "text": f"ACTION: ACTION1 #{n}"},
    )
    return ProviderReplied(
        ModelResponse(text=f"ACTION: ACTION1 #{n}", usage=Usage(), stop_reason="stop", native_items=native)
    )


def test_any_adapters_items_are_carried_through_its_transcript_as_whole_turns_and_replayed_verbatim():
    machine = mr.start(settings(max_context_length=170, max_output_tokens=10), ReasoningItems())
    for n in range(1, 6):
        machine.fire(InputBuffered(f"buffered {n}"))
        sent = request_of(machine.fire(ObservationArrived(f"frame {n}")))
        assert sent[-2:] == [{"type": "input", "text": f"buffered {n}"}, {"type": "input", "text": f"frame {n}"}]
        machine.fire(reasoning_reply(n))
        machine.fire(ActionAccepted("ACTION1"))
    state = machine.model.accepted
    assert all(span.end - span.start == 4 for span in state.turns)  # two inputs, reasoning, message
    kept = [item["encrypted_content"] for item in state.items if item["type"] == "reasoning"]
    assert kept == [f"opaque-{n}" for n in range(6 - len(kept), 6)] and 0 < len(kept) < 5  # oldest whole turns went
    next_request = request_of(machine.fire(ObservationArrived("frame 6")))
    assert next_request[: len(state.items)] == state.items  # replayed exactly as accepted


def test_a_transient_failure_whose_wait_would_pass_the_turns_budget_fails_closed():
    machine = mr.start(
        StrategySettings(
            ADAPTER, SYSTEM, 5, 4000, 100, backoff=Backoff(1.0, 8.0, max_total_seconds=2.0), random_seed=7
        ),
        ChatMessages(),
    )
    machine.fire(ObservationArrived("frame 1"))
    (wait,) = machine.fire(failure(ErrorKind.TRANSIENT))
    assert isinstance(wait, WaitBeforeRetry) and 0.5 <= wait.seconds <= 1.0
    machine.fire(BackoffElapsed())
    (closed,) = machine.fire(failure(ErrorKind.TRANSIENT))  # the next wait, up to 2 s, would pass 2 s in all
    assert machine.state is State.FailedClosed
    assert closed == FailClosed("transient provider failure, the next wait would pass the turn's 2 s of waiting")


def test_the_providers_retry_after_sets_the_wait():
    machine = start()
    machine.fire(ObservationArrived("frame 1"))
    (wait,) = machine.fire(ProviderFailed(ProviderError(ErrorKind.TRANSIENT, retry_after_seconds=4.0)))
    assert wait == WaitBeforeRetry(4.0)
