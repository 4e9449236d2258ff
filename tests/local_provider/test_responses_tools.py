"""Function tools on the local provider's Responses wire, through the real openai SDK: the model calls
what the latest input asks for of the offered tools ("call TOOL with ARGS", answered with CALL lines:
policy.asked_calls, policy.offered_calls), as function_call items after its reasoning, and the wire holds the calls and their outputs to the
pairing api.openai.com enforces (responses_conversation.py, rules 7 and 9)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import openai
import pytest
from openai.types.responses import Response

from turnstate.local_provider.server import LocalProvider

from .test_responses import ENCRYPTED, MODEL, SYSTEM, client_for, refusal, replayable, user

Item = dict[str, Any]
LOOKUP = {
    "type": "function",
    "name": "lookup",
    "description": "Look a note up by its key.",
    "parameters": {
        "type": "object",
        "properties": {"key": {"type": "string"}},
        "required": ["key"],
        "additionalProperties": False,
    },
}
NOTE = {**LOOKUP, "name": "note", "description": "Write a note."}
ONE_CALL = 'call lookup with {"key": "beacon"}'
TWO_CALLS = 'call lookup with {"key": "beacon"} and call note with {"key": "door", "text": "B"}'


@pytest.fixture
def client() -> Iterator[openai.OpenAI]:
    with LocalProvider() as provider, client_for(provider) as sdk_client:
        yield sdk_client


def ask(client: openai.OpenAI, items: Sequence[Item], **params: Any) -> Any:
    settings: dict[str, Any] = {"store": False, "include": ENCRYPTED, "instructions": SYSTEM, **params}
    return client.responses.create(model=MODEL, input=list(items), tools=[LOOKUP, NOTE], **settings)


def streamed(client: openai.OpenAI, items: Sequence[Item]) -> Response:
    """The response a stream ends with, after checking each call's arguments arrive as deltas."""
    events = list(ask(client, items, stream=True))
    deltas = "".join(event.delta for event in events if event.type == "response.function_call_arguments.delta")
    done = [event.arguments for event in events if event.type == "response.function_call_arguments.done"]
    assert deltas == "".join(done) and done
    return next(event.response for event in events if event.type == "response.completed")


def output(call_id: str, text: str = "the beacon is B") -> Item:
    return {"type": "function_call_output", "call_id": call_id, "output": text}


def called(client: openai.OpenAI, asked: str = ONE_CALL) -> tuple[list[Item], list[Item]]:
    """The conversation after a reply that called tools, replayed faithfully, and its calls."""
    opening = [user(asked)]
    reply = replayable(ask(client, opening))
    return opening + reply, [item for item in reply if item["type"] == "function_call"]


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_a_call_asked_for_is_a_function_call_item_after_the_reasoning_and_no_message(
    client: openai.OpenAI, stream: bool
) -> None:
    response = streamed(client, [user(ONE_CALL)]) if stream else ask(client, [user(ONE_CALL)])
    assert response.status == "completed"
    assert [item.type for item in response.output] == ["reasoning", "function_call"]
    call = response.output[1].model_dump(mode="json", exclude_unset=True)
    assert set(call) == {"id", "type", "status", "arguments", "call_id", "name"}  # as recorded
    assert call["name"] == "lookup" and json.loads(call["arguments"]) == {"key": "beacon"}
    assert call["id"].startswith("fc_") and call["call_id"].startswith("call_") and call["status"] == "completed"


def test_several_calls_in_one_reply_come_in_the_order_asked(client: openai.OpenAI) -> None:
    _, calls = called(client, TWO_CALLS)
    assert [(call["name"], json.loads(call["arguments"])) for call in calls] == [
        ("lookup", {"key": "beacon"}),
        ("note", {"key": "door", "text": "B"}),
    ]
    assert len({call["call_id"] for call in calls}) == 2


def test_without_tools_offered_the_asked_call_stays_a_line_of_the_message(client: openai.OpenAI) -> None:
    response = client.responses.create(model=MODEL, input=[user(ONE_CALL)], store=False, include=ENCRYPTED)
    assert [item.type for item in response.output] == ["reasoning", "message"]
    assert response.output_text == 'CALL: lookup {"key": "beacon"}'


def test_answered_calls_are_accepted_and_the_conversation_goes_on(client: openai.OpenAI) -> None:
    history, calls = called(client, TWO_CALLS)
    answered = [*history, *(output(call["call_id"]) for call in calls)]
    reply = ask(client, answered)
    assert [item.type for item in reply.output] == ["reasoning", "message"]
    later = ask(client, [*answered, *replayable(reply), user("And now?")])
    assert later.status == "completed"


def test_a_stored_responses_calls_are_answered_through_previous_response_id(client: openai.OpenAI) -> None:
    first = client.responses.create(model=MODEL, input=[user(ONE_CALL)], tools=[LOOKUP], instructions=SYSTEM)
    call_id = first.output[1].model_dump()["call_id"]
    reply = client.responses.create(
        model=MODEL, input=[output(call_id)], previous_response_id=first.id, tools=[LOOKUP], instructions=SYSTEM
    )
    assert [item.type for item in reply.output] == ["reasoning", "message"]
    with pytest.raises(openai.BadRequestError) as raised:
        client.responses.create(model=MODEL, input=[user("next")], previous_response_id=first.id, tools=[LOOKUP])
    assert refusal(raised)["message"] == f"No tool output found for function call {call_id}."


def unanswered(history: list[Item], calls: list[Item]) -> tuple[list[Item], str]:
    return [*history, user("go on")], f"No tool output found for function call {calls[0]['call_id']}."


def half_answered(history: list[Item], calls: list[Item]) -> tuple[list[Item], str]:
    return [*history, output(calls[0]["call_id"])], f"No tool output found for function call {calls[1]['call_id']}."


def answered_too_late(history: list[Item], calls: list[Item]) -> tuple[list[Item], str]:
    late = [*history, user("first this"), *(output(call["call_id"]) for call in calls)]
    return late, f"No tool output found for function call {calls[0]['call_id']}."


def orphan(history: list[Item], calls: list[Item]) -> tuple[list[Item], str]:
    answered = [*history, *(output(call["call_id"]) for call in calls), output("call_nobody")]
    return answered, "No tool call found for function call output with call_id call_nobody."


def duplicate(history: list[Item], calls: list[Item]) -> tuple[list[Item], str]:
    answered = [*history, *(output(call["call_id"]) for call in calls), output(calls[1]["call_id"], "again")]
    message = (
        f"Duplicate function_call_output for call_id '{calls[1]['call_id']}'. Each function_call must have "
        "exactly one matching function_call_output"
    )
    return answered, message


def call_without_its_reasoning(history: list[Item], calls: list[Item]) -> tuple[list[Item], str]:
    kept = [item for item in history if item.get("type") != "reasoning"]
    answered = [*kept, *(output(call["call_id"]) for call in calls)]
    reasoning_id = "rs_" + calls[0]["id"].removeprefix("fc_").rpartition("_")[0]
    message = (
        f"Item '{calls[0]['id']}' of type 'function_call' was provided without its required 'reasoning' item: "
        f"'{reasoning_id}'."
    )
    return answered, message


def altered_arguments(history: list[Item], calls: list[Item]) -> tuple[list[Item], str]:
    changed = [{**item, "arguments": '{"key": "other"}'} if item is calls[0] else item for item in history]
    answered = [*changed, *(output(call["call_id"]) for call in calls)]
    return answered, "the function calls after it are not the ones it was issued with"


@pytest.mark.parametrize(
    "broken",
    [
        unanswered,
        half_answered,
        answered_too_late,
        orphan,
        duplicate,
        call_without_its_reasoning,
        altered_arguments,
    ],
)
def test_a_broken_pairing_is_a_400_naming_input_in_the_services_words(client: openai.OpenAI, broken) -> None:
    history, calls = called(client, TWO_CALLS)
    items, message = broken(history, calls)
    with pytest.raises(openai.BadRequestError) as raised:
        ask(client, items)
    error = refusal(raised)
    assert message in error["message"]
    assert error["type"] == "invalid_request_error" and error["param"] == "input"


def test_a_calls_arguments_are_compact_json_so_a_client_that_re_serializes_them_replays_the_same_bytes(
    client: openai.OpenAI,
) -> None:
    """api.openai.com writes arguments as compact JSON (recorded: `{"result":6666...`), and pydantic-ai
    replays a call with its arguments parsed and dumped again: the same bytes, which the seal pins."""
    history, calls = called(client, TWO_CALLS)
    assert [call["arguments"] for call in calls] == ['{"key":"beacon"}', '{"key":"door","text":"B"}']
    resent = [
        {**item, "arguments": json.dumps(json.loads(item["arguments"]), separators=(",", ":"))}
        if item.get("type") == "function_call"
        else item
        for item in history
    ]
    reply = ask(client, [*resent, *(output(call["call_id"]) for call in calls)])
    assert reply.status == "completed"
