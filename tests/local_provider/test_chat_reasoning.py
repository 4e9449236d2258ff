"""The open-weight Chat Completions servers (`/open-weight/v1`, and DeepSeek's `/deepseek/v1`, whose
model acts through a tool): reasoning strings returned, billed, streamed, and held to the replay rules
of chat_reasoning.py, through the real openai SDK."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from turnstate.adapters.tokens import estimate_text_tokens
from turnstate.local_provider.server import LocalProvider

from .test_messages import DARK, FORGOTTEN, REMEMBERED, SHOWN

SYSTEM = {"role": "system", "content": "You play beacon_grid. Answer with one line ACTION: <action>."}
THOUGHT = "NOTES: level 1 beacon C"


@pytest.fixture
def client() -> Iterator[openai.OpenAI]:
    with LocalProvider() as provider:
        yield openai.OpenAI(base_url=f"{provider.base_url}/open-weight/v1", api_key="test-key", max_retries=0)


def ask(client: openai.OpenAI, messages: list[dict[str, Any]], **params: Any) -> Any:
    return client.chat.completions.create(model="glm-5.3-flash", messages=[SYSTEM, *messages], **params)


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def replayed(reply: Any, *aliases: str) -> dict[str, Any]:
    message = reply.choices[0].message
    extra = message.model_extra or {}
    return {"role": "assistant", "content": message.content, **{alias: extra[alias] for alias in aliases}}


def test_the_reply_carries_its_thought_under_both_aliases_billed_as_reasoning(client):
    reply = ask(client, [user(SHOWN)])
    extra = reply.choices[0].message.model_extra
    assert extra["reasoning_content"] == extra["reasoning"] == THOUGHT
    assert THOUGHT not in reply.choices[0].message.content  # never in the visible text
    details = reply.usage.completion_tokens_details
    assert details.reasoning_tokens == estimate_text_tokens(THOUGHT)
    assert (
        reply.usage.completion_tokens
        == estimate_text_tokens(reply.choices[0].message.content) + details.reasoning_tokens
    )


def test_a_stream_sends_the_reasoning_in_deltas_before_the_content(client):
    chunks = list(ask(client, [user(SHOWN)], stream=True, stream_options={"include_usage": True}))
    pieces = [(chunk.choices[0].delta.model_extra or {}).get("reasoning_content") for chunk in chunks if chunk.choices]
    assert "".join(piece for piece in pieces if piece) == THOUGHT
    first_content = next(n for n, chunk in enumerate(chunks) if chunk.choices and chunk.choices[0].delta.content)
    last_reasoning = max(n for n, piece in enumerate(pieces) if piece)
    assert last_reasoning < first_content and chunks[-1].usage.completion_tokens_details.reasoning_tokens > 0


@pytest.mark.parametrize("aliases", [("reasoning_content",), ("reasoning",), ("reasoning_content", "reasoning")])
def test_a_faithful_replay_under_any_alias_carries_the_beacon(client, aliases):
    first = ask(client, [user(SHOWN)])
    later = ask(client, [user(SHOWN), replayed(first, *aliases), user(DARK)])
    assert REMEMBERED in later.choices[0].message.content


def test_a_message_the_provider_never_issued_is_read_as_it_is(client):
    own = {"role": "assistant", "content": "I looked around."}
    assert FORGOTTEN in ask(client, [user(SHOWN), own, user(DARK)]).choices[0].message.content


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"drop": True}, "is missing its reasoning"),
        ({"reasoning_content": "NOTES: level 1 beacon A"}, "does not match the one issued"),
        ({"reasoning": "NOTES: level 1 beacon A"}, "does not match the one issued"),
    ],
    ids=["dropped", "altered", "altered alias"],
)
def test_a_dropped_or_altered_reasoning_string_is_a_400(client, change, problem):
    first = ask(client, [user(SHOWN)])
    message = replayed(first, "reasoning_content")
    if change.pop("drop", False):
        del message["reasoning_content"]
    message |= change
    with pytest.raises(openai.BadRequestError) as raised:
        ask(client, [user(SHOWN), message, user(DARK)])
    assert raised.value.param == "messages[1]" and problem in str(raised.value.message)


def test_openais_own_server_refuses_a_reasoning_field():
    with LocalProvider() as provider:
        client = openai.OpenAI(base_url=f"{provider.base_url}/v1", api_key="test-key", max_retries=0)
        with pytest.raises(openai.BadRequestError) as raised:
            ask(client, [user(SHOWN), {"role": "assistant", "content": "x", "reasoning_content": "y"}, user(DARK)])
    assert "'reasoning_content' was unexpected" in str(raised.value.message)


# DeepSeek's thinking mode (`/deepseek/v1`): reasoning_content only, and actions as tool calls.

TOOL = {
    "type": "function",
    "function": {
        "name": "submit_action",
        "parameters": {"type": "object", "properties": {"action": {"type": "string"}}, "required": ["action"]},
    },
}


@pytest.fixture
def deepseek() -> Iterator[openai.OpenAI]:
    with LocalProvider() as provider:
        yield openai.OpenAI(base_url=f"{provider.base_url}/deepseek/v1", api_key="test-key", max_retries=0)


def test_offered_one_function_the_model_acts_by_calling_it(deepseek):
    reply = ask(deepseek, [user(SHOWN)], tools=[TOOL])
    choice = reply.choices[0]
    (call,) = choice.message.tool_calls
    assert choice.finish_reason == "tool_calls" and call.function.name == "submit_action"
    assert json.loads(call.function.arguments)["action"].startswith("ACTION")
    assert "ACTION:" not in choice.message.content and choice.message.model_extra == {"reasoning_content": THOUGHT}


def test_a_streamed_tool_call_arrives_in_pieces_that_add_up(deepseek):
    whole = ask(deepseek, [user(SHOWN)], tools=[TOOL]).choices[0].message.tool_calls[0]
    chunks = list(ask(deepseek, [user(SHOWN)], tools=[TOOL], stream=True))
    pieces = [call for chunk in chunks if chunk.choices for call in chunk.choices[0].delta.tool_calls or []]
    assert pieces[0].id.startswith("call_") and pieces[0].function.name == "submit_action"
    assert "".join(piece.function.arguments or "" for piece in pieces) == whole.function.arguments
    assert [chunk.choices[0].finish_reason for chunk in chunks if chunk.choices][-1] == "tool_calls"


def test_a_tool_call_must_be_answered_and_a_tool_result_must_answer_one(deepseek):
    reply = ask(deepseek, [user(SHOWN)], tools=[TOOL]).choices[0].message
    answer = {"role": "assistant", "content": reply.content, "reasoning_content": THOUGHT}
    called = {**answer, "tool_calls": [call.model_dump() for call in reply.tool_calls]}
    result = {"role": "tool", "tool_call_id": reply.tool_calls[0].id, "content": "ok"}
    with pytest.raises(openai.BadRequestError) as unanswered:
        ask(deepseek, [user(SHOWN), called, user(DARK)], tools=[TOOL])
    assert "did not have response messages" in str(unanswered.value.message)
    with pytest.raises(openai.BadRequestError) as orphan:
        ask(deepseek, [user(SHOWN), answer, result, user(DARK)], tools=[TOOL])
    assert "must be a response to a preceeding message with 'tool_calls'" in str(orphan.value.message)
    later = ask(deepseek, [user(SHOWN), called, result, user(DARK)], tools=[TOOL])
    assert "(beacon seen)" in later.choices[0].message.content  # the beacon came back with the reasoning
