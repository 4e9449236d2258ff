"""Function tools on the Gemini Interactions wire, through the real google-genai SDK over real HTTP.

Offered the game's actions as function tools (alone or among others), the model acts by calling
the one its `ACTION:` line names: a signed thought step, then a function_call step of that action.
The client answers with a function_result step paired to the call by its id. The policy notes a
level's beacon only in its thought, so the action called after a dark frame shows whether that
thought was read back.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from google import genai
from google.genai import _interactions

from turnstate.local_provider.server import LocalProvider

from .action_tools import game_tools, interactions_tool
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

ACTIONS = game_tools(interactions_tool)
ACTION_LINE = re.compile(r"^ACTION: (\S+)$", re.MULTILINE)
LOOK = {"type": "function", "name": "look", "description": "Look around.", "parameters": {"type": "object"}}


@pytest.fixture
def client() -> Iterator[genai.Client]:
    with LocalProvider() as provider, client_for(provider) as sdk_client:
        yield sdk_client


def action_of(client: genai.Client, steps: list[Step]) -> str | None:
    """The action the model names in text, offered no tool: the tool its call should be of."""
    named = ACTION_LINE.search(text_of(ask(client, steps)))
    return named.group(1) if named else None


def result(call: Step, text: str) -> Step:
    return {"type": "function_result", "call_id": call["id"], "name": call["name"], "result": text}


def called(client: genai.Client, steps: list[Step], **params: Any) -> tuple[Interaction, Step]:
    reply = ask(client, steps, tools=ACTIONS, **params)
    return reply, replayed(reply)[-1]


def test_offered_the_actions_as_tools_the_model_acts_through_a_signed_call_of_the_one_it_names(
    client: genai.Client,
) -> None:
    reply, call = called(client, [user(SHOWN)])
    assert reply.status == "requires_action"
    assert [step["type"] for step in replayed(reply)] == ["thought", "function_call"]
    assert call["name"] == action_of(client, [user(SHOWN)]) and call["id"].startswith("call_")
    assert call["arguments"] == {}


def test_a_function_call_and_its_result_round_trip_paired_by_id(client: genai.Client) -> None:
    """The result is read as the current turn and the call's thought as memory: the dark frame gets the
    remembered beacon's action, not the guess an unremembered dark frame gets."""
    first, call = called(client, [user(SHOWN)])
    remembered = action_of(client, [user(SHOWN), *replayed(ask(client, [user(SHOWN)])), user(DARK)])
    assert remembered != action_of(client, [user(DARK)])
    _, answer = called(client, [user(SHOWN), *replayed(first), result(call, DARK)])
    assert answer["name"] == remembered


def test_a_stored_function_call_is_answered_by_its_result_alone(client: genai.Client) -> None:
    """The documented flow: continue the stored interaction with the function_result step only."""
    first = client.interactions.create(model="gemini-3-pro-preview", input=SHOWN, tools=ACTIONS)  # type: ignore[arg-type]
    call = replayed(first)[-1]
    reply = client.interactions.create(
        model="gemini-3-pro-preview",
        input=[result(call, DARK)],  # type: ignore[list-item]
        previous_interaction_id=first.id,
        tools=[LOOK],  # type: ignore[list-item]
    )
    assert reply.status == "completed" and "ACTION: " in text_of(reply)


def test_offered_the_actions_among_other_tools_the_model_still_acts_through_them(client: genai.Client) -> None:
    reply = ask(client, [user(SHOWN)], tools=[LOOK, *ACTIONS])
    assert [(step["type"], step.get("name")) for step in replayed(reply)] == [
        ("thought", None),
        ("function_call", action_of(client, [user(SHOWN)])),
    ]


def test_a_streamed_function_call_accumulates_to_the_call_and_round_trips(client: genai.Client) -> None:
    events = list(ask(client, [user(SHOWN)], tools=ACTIONS, stream=True))
    start = [event.step for event in events if event.event_type == "step.start"][-1]
    assert start.type == "function_call" and start.arguments == {}
    assert events[-1].interaction.status == "requires_action"
    steps = accumulated(events)
    call = steps[-1]
    assert call["name"] == action_of(client, [user(SHOWN)]) and call["arguments"] == {}
    assert called(client, [user(SHOWN), *steps, result(call, DARK)])[0].status == "requires_action"


def test_a_function_call_of_an_earlier_turn_needs_no_thought(client: genai.Client) -> None:
    """Only the current turn's calls are validated: a client may replay a call it made up."""
    made_up = {"type": "function_call", "id": "mine", "name": "ACTION6", "arguments": {}}
    reply = ask(client, [user(SHOWN), made_up, result(made_up, "done"), user(DARK)], tools=[*ACTIONS, LOOK])
    assert reply.status == "requires_action"  # accepted, and answered through an action tool


def test_a_current_turn_function_call_without_its_thought_is_a_400(client: genai.Client) -> None:
    first, call = called(client, [user(SHOWN)])
    with pytest.raises(_interactions.BadRequestError) as raised:
        ask(client, [user(SHOWN), call, result(call, DARK)], tools=ACTIONS)
    assert "input[1]: this function_call step comes without the thought step it was generated with" in google_error(
        raised
    )


def test_a_function_call_with_altered_arguments_breaks_its_thought_signature(client: genai.Client) -> None:
    first, call = called(client, [user(SHOWN)])
    altered = {**call, "arguments": {"to": "ELSEWHERE"}}
    with pytest.raises(_interactions.BadRequestError) as raised:
        ask(client, [user(SHOWN), replayed(first)[0], altered, result(altered, DARK)], tools=ACTIONS)
    assert "input[1].signature: Thought signature is not valid for input[2]" in google_error(raised)


def test_a_function_call_naming_an_undeclared_tool_is_a_400(client: genai.Client) -> None:
    made_up = {"type": "function_call", "id": "mine", "name": "teleport", "arguments": {}}
    with pytest.raises(_interactions.BadRequestError) as raised:
        ask(client, [user(SHOWN), made_up, result(made_up, "done"), user(DARK)], tools=ACTIONS)
    assert "input[1].name: function 'teleport' is not declared in `tools`" in google_error(raised)


def test_a_function_result_whose_call_id_matches_no_function_call_is_a_400(client: genai.Client) -> None:
    first, call = called(client, [user(SHOWN)])
    orphan = {**result(call, DARK), "call_id": "call_unknown"}
    with pytest.raises(_interactions.BadRequestError) as raised:
        ask(client, [user(SHOWN), *replayed(first), orphan], tools=ACTIONS)
    assert "input[3].call_id: no function_call step before this result has the id 'call_unknown'" in google_error(
        raised
    )
