"""Function tools on the Gemini Interactions wire, through the real google-genai SDK over real HTTP.

Offered a `submit_action` function tool with a required parameter (alone or among others), the model
acts by calling it: a signed thought step, then a function_call step naming the action. The client answers with a function_result
step paired to the call by its id. The policy notes a level's beacon only in its thought, so the
action called after a dark frame shows whether that thought was read back.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from google import genai
from google.genai import _interactions

from turnstate.local_provider.policy import split_action
from turnstate.local_provider.server import LocalProvider

from .test_interactions import (
    DARK,
    SHOWN,
    Interaction,
    Step,
    accumulated,
    ask,
    client_for,
    google_error,
    replayed,
    text_of,
    user,
)

SUBMIT = {
    "type": "function",
    "name": "submit_action",
    "description": "Take one action in the game.",
    "parameters": {"type": "object", "properties": {"action": {"type": "string"}}, "required": ["action"]},
}
LOOK = {"type": "function", "name": "look", "description": "Look around.", "parameters": {"type": "object"}}


@pytest.fixture
def client() -> Iterator[genai.Client]:
    with LocalProvider() as provider, client_for(provider) as sdk_client:
        yield sdk_client


def action_of(client: genai.Client, steps: list[Step]) -> str | None:
    """The action the model names in text, offered no tool: what its call should carry."""
    return split_action(text_of(ask(client, steps)))[1]


def result(call: Step, text: str) -> Step:
    return {"type": "function_result", "call_id": call["id"], "name": call["name"], "result": text}


def called(client: genai.Client, steps: list[Step], **params: Any) -> tuple[Interaction, Step]:
    reply = ask(client, steps, tools=[SUBMIT], **params)
    return reply, replayed(reply)[-1]


def test_offered_one_function_tool_the_model_acts_through_a_signed_function_call(client: genai.Client) -> None:
    reply, call = called(client, [user(SHOWN)])
    assert reply.status == "requires_action"
    assert [step["type"] for step in replayed(reply)] == ["thought", "function_call"]
    assert call["name"] == "submit_action" and call["id"].startswith("call_")
    assert call["arguments"] == {"action": action_of(client, [user(SHOWN)])}


def test_a_function_call_and_its_result_round_trip_paired_by_id(client: genai.Client) -> None:
    """The result is read as the current turn and the call's thought as memory: the dark frame gets the
    remembered beacon's action, not the guess an unremembered dark frame gets."""
    first, call = called(client, [user(SHOWN)])
    remembered = action_of(client, [user(SHOWN), *replayed(ask(client, [user(SHOWN)])), user(DARK)])
    assert remembered != action_of(client, [user(DARK)])
    _, answer = called(client, [user(SHOWN), *replayed(first), result(call, DARK)])
    assert answer["arguments"] == {"action": remembered}


def test_a_stored_function_call_is_answered_by_its_result_alone(client: genai.Client) -> None:
    """The documented flow: continue the stored interaction with the function_result step only."""
    first = client.interactions.create(model="gemini-3-pro-preview", input=SHOWN, tools=[SUBMIT])  # type: ignore[list-item]
    call = replayed(first)[-1]
    reply = client.interactions.create(
        model="gemini-3-pro-preview",
        input=[result(call, DARK)],  # type: ignore[list-item]
        previous_interaction_id=first.id,
        tools=[LOOK],  # type: ignore[list-item]
    )
    assert reply.status == "completed" and "ACTION: " in text_of(reply)


def test_offered_submit_action_among_other_tools_the_model_still_acts_through_it(client: genai.Client) -> None:
    reply = ask(client, [user(SHOWN)], tools=[LOOK, SUBMIT])
    assert [(step["type"], step.get("name")) for step in replayed(reply)] == [
        ("thought", None),
        ("function_call", "submit_action"),
    ]


def test_a_streamed_function_call_accumulates_to_the_call_and_round_trips(client: genai.Client) -> None:
    events = list(ask(client, [user(SHOWN)], tools=[SUBMIT], stream=True))
    start = [event.step for event in events if event.event_type == "step.start"][-1]
    assert start.type == "function_call" and start.arguments == {}
    assert events[-1].interaction.status == "requires_action"
    steps = accumulated(events)
    call = steps[-1]
    assert call["arguments"] == {"action": action_of(client, [user(SHOWN)])}
    assert called(client, [user(SHOWN), *steps, result(call, DARK)])[0].status == "requires_action"


def test_a_function_call_of_an_earlier_turn_needs_no_thought(client: genai.Client) -> None:
    """Only the current turn's calls are validated: a client may replay a call it made up."""
    made_up = {"type": "function_call", "id": "mine", "name": "submit_action", "arguments": {"action": "WAIT"}}
    reply = ask(client, [user(SHOWN), made_up, result(made_up, "done"), user(DARK)], tools=[SUBMIT, LOOK])
    assert reply.status == "requires_action"  # accepted, and answered through submit_action


def test_a_current_turn_function_call_without_its_thought_is_a_400(client: genai.Client) -> None:
    first, call = called(client, [user(SHOWN)])
    with pytest.raises(_interactions.BadRequestError) as raised:
        ask(client, [user(SHOWN), call, result(call, DARK)], tools=[SUBMIT])
    assert "input[1]: this function_call step comes without the thought step it was generated with" in google_error(
        raised
    )


def test_a_function_call_with_altered_arguments_breaks_its_thought_signature(client: genai.Client) -> None:
    first, call = called(client, [user(SHOWN)])
    altered = {**call, "arguments": {"action": "ELSEWHERE"}}
    with pytest.raises(_interactions.BadRequestError) as raised:
        ask(client, [user(SHOWN), replayed(first)[0], altered, result(altered, DARK)], tools=[SUBMIT])
    assert "input[1].signature: Thought signature is not valid for input[2]" in google_error(raised)


def test_a_function_call_naming_an_undeclared_tool_is_a_400(client: genai.Client) -> None:
    made_up = {"type": "function_call", "id": "mine", "name": "teleport", "arguments": {}}
    with pytest.raises(_interactions.BadRequestError) as raised:
        ask(client, [user(SHOWN), made_up, result(made_up, "done"), user(DARK)], tools=[SUBMIT])
    assert "input[1].name: function 'teleport' is not declared in `tools`" in google_error(raised)


def test_a_function_result_whose_call_id_matches_no_function_call_is_a_400(client: genai.Client) -> None:
    first, call = called(client, [user(SHOWN)])
    orphan = {**result(call, DARK), "call_id": "call_unknown"}
    with pytest.raises(_interactions.BadRequestError) as raised:
        ask(client, [user(SHOWN), *replayed(first), orphan], tools=[SUBMIT])
    assert "input[3].call_id: no function_call step before this result has the id 'call_unknown'" in google_error(
        raised
    )
