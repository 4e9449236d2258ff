"""Function tools on the local provider's Chat Completions servers (OpenAI's, the open-weight one,
DeepSeek's), through the real openai SDK: the model calls the offered tools a user message asks for,
and the pairing of calls and tool messages is held as OpenAI holds it, in its words."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from turnstate.adapters.tokens import estimate_text_tokens
from turnstate.local_provider.chat_completions_request import TOOL_PAIRING
from turnstate.local_provider.server import LocalProvider

from ..recorded import interactions
from .test_chat_reasoning import ACTIONS
from .test_messages import SHOWN

SYSTEM = {"role": "system", "content": "You answer with tools when asked."}
LOOK = {
    "type": "function",
    "function": {"name": "look", "parameters": {"type": "object", "properties": {"at": {"type": "string"}}}},
}
NOTE = {"type": "function", "function": {"name": "note", "parameters": {"type": "object"}}}
ONE_CALL = 'call look with {"at": "door"}'
TWO_CALLS = 'call note with {"n": 2} and then call look with {"at": "wall"}'
SERVERS = {"openai": "/v1", "open_weight": "/open-weight/v1", "deepseek": "/deepseek/v1"}
DEEPSEEK_TOOLS = "test_deepseek/test_deepseek_deferred_capability_with_thinking.yaml"


@pytest.fixture
def provider() -> Iterator[LocalProvider]:
    with LocalProvider() as running:
        yield running


@pytest.fixture(params=sorted(SERVERS))
def server(request) -> str:
    return str(request.param)


def client_for(provider: LocalProvider, server: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{provider.base_url}{SERVERS[server]}", api_key="test-key", max_retries=0)


def ask(client: openai.OpenAI, messages: list[dict[str, Any]], **params: Any) -> Any:
    return client.chat.completions.create(model="local-model", messages=[SYSTEM, *messages], **params)


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def test_asked_for_a_call_of_an_offered_tool_the_model_makes_it_with_nothing_beside(provider, server):
    reply = ask(client_for(provider, server), [user(ONE_CALL)], tools=[LOOK, NOTE])
    choice = reply.choices[0]
    (call,) = choice.message.tool_calls
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    assert (
        call.type == "function"
        and call.function.name == "look"
        and json.loads(call.function.arguments) == {"at": "door"}
    )
    # DeepSeek writes each call's index in a whole reply (recorded replies do); OpenAI's do not.
    assert ("index" in (call.model_extra or {})) is (server == "deepseek")
    thought = reply.usage.completion_tokens_details.reasoning_tokens
    assert reply.usage.completion_tokens == estimate_text_tokens(call.function.arguments) + thought


def test_asked_for_two_calls_the_model_makes_both_in_order_and_streams_them_in_indexed_pieces(provider, server):
    client = client_for(provider, server)
    whole = ask(client, [user(TWO_CALLS)], tools=[LOOK, NOTE]).choices[0].message.tool_calls
    assert [(call.function.name, json.loads(call.function.arguments)) for call in whole] == [
        ("note", {"n": 2}),
        ("look", {"at": "wall"}),
    ]
    chunks = list(ask(client, [user(TWO_CALLS)], tools=[LOOK, NOTE], stream=True))
    pieces = [piece for chunk in chunks if chunk.choices for piece in chunk.choices[0].delta.tool_calls or []]
    gathered: dict[int, list[Any]] = {}
    for piece in pieces:
        gathered.setdefault(piece.index, []).append(piece)
    assert [[piece.function.name for piece in gathered[index] if piece.id] for index in (0, 1)] == [["note"], ["look"]]
    arguments = ["".join(piece.function.arguments or "" for piece in gathered[index]) for index in (0, 1)]
    assert [json.loads(text) for text in arguments] == [{"n": 2}, {"at": "wall"}]
    assert [chunk.choices[0].finish_reason for chunk in chunks if chunk.choices][-1] == "tool_calls"


def test_asked_for_a_tool_not_offered_the_model_calls_nothing_and_answers_in_text(provider, server):
    reply = ask(client_for(provider, server), [user('call delete with {"all": true}')], tools=[LOOK])
    assert reply.choices[0].message.tool_calls is None and reply.choices[0].finish_reason == "stop"
    assert reply.choices[0].message.content


def refusal(client: openai.OpenAI, messages: list[dict[str, Any]]) -> openai.BadRequestError:
    with pytest.raises(openai.BadRequestError) as refused:
        ask(client, messages, tools=[LOOK, NOTE])
    assert refused.value.status_code == 400
    return refused.value


def called(client: openai.OpenAI, text: str) -> tuple[dict[str, Any], list[str]]:
    """The model's reply to `text` as a client replays it, and the ids of its calls."""
    message = ask(client, [user(text)], tools=[LOOK, NOTE]).choices[0].message
    replayed = {"role": "assistant", "content": message.content, **(message.model_extra or {})}
    replayed["tool_calls"] = [call.model_dump(exclude_none=True) for call in message.tool_calls]
    return replayed, [call.id for call in message.tool_calls]


def result(call_id: str, text: str = "seen") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def test_a_tool_message_after_no_calls_is_refused_as_an_orphan(provider, server):
    client = client_for(provider, server)
    error = refusal(client, [user("hello"), result("call_made_up")])
    assert error.body == {
        "message": TOOL_PAIRING["orphan"],
        "type": "invalid_request_error",
        "param": "messages.[2].role",
        "code": None,
    }


def test_a_tool_message_answering_a_call_the_message_before_did_not_make_is_refused(provider, server):
    client = client_for(provider, server)
    answer, (call_id,) = called(client, ONE_CALL)
    error = refusal(client, [user(ONE_CALL), answer, result(call_id), result("call_elsewhere")])
    message = "Invalid parameter: 'tool_call_id' of 'call_elsewhere' not found in 'tool_calls' of previous message."
    assert error.body == {
        "message": message,
        "type": "invalid_request_error",
        "param": "messages.[4].tool_call_id",
        "code": None,
    }


def test_a_second_answer_to_one_call_is_refused_as_a_duplicate(provider, server):
    client = client_for(provider, server)
    answer, (call_id,) = called(client, ONE_CALL)
    error = refusal(client, [user(ONE_CALL), answer, result(call_id), result(call_id, "again")])
    message = f"Invalid parameter: Duplicate value for 'tool_call_id' of '{call_id}', in messages[3] and messages[4]."
    assert error.body == {
        "message": message,
        "type": "invalid_request_error",
        "param": "messages.[4].tool_call_id",
        "code": None,
    }


def test_a_call_left_unanswered_is_refused_naming_every_call_without_a_result(provider, server):
    client = client_for(provider, server)
    answer, (first, second) = called(client, TWO_CALLS)
    error = refusal(client, [user(TWO_CALLS), answer, result(second), user("go on")])
    message = (
        "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
        f"'tool_call_id'. The following tool_call_ids did not have response messages: {first}"
    )
    assert error.body == {
        "message": message,
        "type": "invalid_request_error",
        "param": "messages.[2].role",
        "code": None,
    }


def test_every_call_answered_in_any_order_the_conversation_goes_on(provider, server):
    client = client_for(provider, server)
    answer, (first, second) = called(client, TWO_CALLS)
    later = ask(client, [user(TWO_CALLS), answer, result(second), result(first)], tools=[LOOK, NOTE])
    assert later.choices[0].finish_reason == "stop" and later.choices[0].message.tool_calls is None


def test_the_recorded_deepseek_tool_conversation_is_accepted_and_refused_without_one_of_its_results(provider):
    *_, last = interactions(DEEPSEEK_TOOLS)
    body = last["request"]["parsed_body"]
    client = client_for(provider, "deepseek")
    reply = client.chat.completions.create(**body)
    assert reply.choices[0].finish_reason == "stop"
    messages = body["messages"]
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(**{**body, "messages": messages[:-1]})
    assert refused.value.body["param"] == "messages.[7].role"
    assert str(messages[7]["tool_calls"][1]["id"]) in refused.value.body["message"]


def test_an_action_call_bills_its_arguments_as_completion_tokens(provider, server):
    reply = ask(client_for(provider, server), [user(SHOWN)], tools=[LOOK, *ACTIONS])  # found by name beside others
    message = reply.choices[0].message
    (call,) = message.tool_calls
    assert call.function.name in {tool["function"]["name"] for tool in ACTIONS}
    written = estimate_text_tokens(message.content) + estimate_text_tokens(call.function.arguments)
    assert reply.usage.completion_tokens == written + reply.usage.completion_tokens_details.reasoning_tokens
