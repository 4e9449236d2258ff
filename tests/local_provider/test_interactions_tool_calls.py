"""Several function calls in one reply, and their pairing with results, on the Gemini Interactions
wire, through the real google-genai SDK over real HTTP.

The model calls what the user input asks for ("call TOOL with ARGS", the local policy's test
convention): one thought step, then the calls in a row. Each call of a reply is answered exactly once
by a function_result step right after the calls, before anything else; an unanswered call or a
second result is refused as a 400 INVALID_ARGUMENT in Google's words.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from google import genai
from google.genai import _interactions

from turnstate.local_provider.server import LocalProvider

from .test_interactions import Interaction, Step, accumulated, ask, client_for, google_error, replayed, text_of, user

LOOK = {"type": "function", "name": "look", "description": "Look around.", "parameters": {"type": "object"}}
NOTE = {
    "type": "function",
    "name": "note",
    "description": "Write a note.",
    "parameters": {"type": "object", "properties": {"text": {"type": "string"}}},
}
TOOLS = [LOOK, NOTE]
TWO_CALLS = 'First call look with {"where": "north"} and then call note with {"text": "a \\"quoted\\" {brace}"}.'
UNPAIRED = "Please ensure that the number of function response parts is equal to the number of function call parts"


@pytest.fixture
def client() -> Iterator[genai.Client]:
    with LocalProvider() as provider, client_for(provider) as sdk_client:
        yield sdk_client


def asked(client: genai.Client, steps: list[Step], **params: Any) -> Interaction:
    return ask(client, steps, tools=TOOLS, **params)


def result(call: Step, text: str, **extra: Any) -> Step:
    return {"type": "function_result", "call_id": call["id"], "name": call["name"], "result": text, **extra}


def two_calls(client: genai.Client) -> tuple[list[Step], Step, Step]:
    """The conversation so far (the ask, the thought, both calls) and the two calls."""
    steps = replayed(asked(client, [user(TWO_CALLS)]))
    return [user(TWO_CALLS), *steps], steps[1], steps[2]


def refusal(client: genai.Client, steps: list[Step]) -> str:
    with pytest.raises(_interactions.BadRequestError) as raised:
        asked(client, steps)
    return google_error(raised)


def test_asked_for_two_calls_the_reply_is_one_thought_then_both_calls_in_order(client: genai.Client) -> None:
    reply = asked(client, [user(TWO_CALLS)])
    steps = replayed(reply)
    assert reply.status == "requires_action"
    assert [step["type"] for step in steps] == ["thought", "function_call", "function_call"]
    assert [(step["name"], step["arguments"]) for step in steps[1:]] == [
        ("look", {"where": "north"}),
        ("note", {"text": 'a "quoted" {brace}'}),
    ]
    assert steps[1]["id"] != steps[2]["id"]


def test_a_streamed_reply_with_two_calls_accumulates_to_the_plain_replys_steps(client: genai.Client) -> None:
    events = list(asked(client, [user(TWO_CALLS)], stream=True))
    plain = replayed(asked(client, [user(TWO_CALLS)]))
    streamed = accumulated(events)
    assert [step["type"] for step in streamed] == ["thought", "function_call", "function_call"]
    assert [(step["name"], step["arguments"]) for step in streamed[1:]] == [
        (step["name"], step["arguments"]) for step in plain[1:]
    ]
    assert events[-1].interaction.status == "requires_action"


def test_both_calls_answered_in_order_are_accepted_and_the_conversation_goes_on(client: genai.Client) -> None:
    history, look, note = two_calls(client)
    answered = [*history, result(look, "a wall"), result(note, "noted")]
    reply = asked(client, answered)
    assert reply.status == "completed" and text_of(reply)
    later = asked(client, [*answered, *replayed(reply), user("Thanks.")])
    assert later.status == "completed"


def test_a_reply_s_calls_may_be_answered_in_any_order_and_an_error_result_is_carried(client: genai.Client) -> None:
    history, look, note = two_calls(client)
    reply = asked(client, [*history, result(note, "disk full", is_error=True), result(look, "a wall")])
    assert reply.status == "completed"


def test_a_call_followed_by_a_user_input_instead_of_its_result_is_a_400(client: genai.Client) -> None:
    history, look, note = two_calls(client)
    message = refusal(client, [*history, result(look, "a wall"), user("Go on.")])
    assert message.startswith(f"input[3]: {UNPAIRED}")
    assert (
        f"the function_call '{note['id']}' has no function_result step before input[5] (a user_input step)" in message
    )


def test_a_call_the_request_ends_with_is_unanswered_and_a_400(client: genai.Client) -> None:
    history, look, note = two_calls(client)
    message = refusal(client, [*history, result(note, "noted")])
    assert message.startswith(f"input[2]: {UNPAIRED}") and "has no function_result step after it" in message


def test_a_second_result_for_the_same_call_is_a_400(client: genai.Client) -> None:
    history, look, note = two_calls(client)
    message = refusal(client, [*history, result(look, "a wall"), result(note, "noted"), result(look, "again")])
    assert message.startswith(f"input[6].call_id: {UNPAIRED}")
    assert f"the function_call '{look['id']}' is already answered by input[4]" in message


def test_a_call_of_a_tool_not_offered_is_not_made_and_the_model_answers_in_text(client: genai.Client) -> None:
    reply = ask(client, [user("call teleport with {}")], tools=TOOLS)
    assert reply.status == "completed" and [step.type for step in reply.steps or []] == ["thought", "model_output"]


def test_a_client_s_own_call_appended_to_a_reply_s_calls_breaks_their_signature(client: genai.Client) -> None:
    history, look, note = two_calls(client)
    mine = {"type": "function_call", "id": "mine", "name": "look", "arguments": {}}
    message = refusal(client, [*history, mine, result(look, "a"), result(note, "b"), result(mine, "c")])
    assert message.startswith("input[1].signature: Thought signature is not valid for input[2]")
