"""The open-weight Chat Completions servers (`/open-weight/v1`, and DeepSeek's `/deepseek/v1`, here
offered the game's actions as tools): reasoning strings returned, billed, streamed, and held to the replay rules
of chat_reasoning.py, through the real openai SDK."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from turnstate.adapters.tokens import estimate_text_tokens
from turnstate.local_provider.server import LocalProvider

from .action_tools import chat_tool, game_tools
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


BELIEVED = "heading for door A (beacon seen)"  # what the model says reading "beacon A" in its reasoning


@pytest.mark.parametrize(
    ("reasoning", "read"),
    [
        ({}, FORGOTTEN),
        ({"reasoning_content": "NOTES: level 1 beacon A"}, BELIEVED),
        ({"reasoning_content": THOUGHT, "reasoning": "NOTES: level 1 beacon A"}, REMEMBERED),
    ],
    ids=["dropped", "altered", "aliases differ"],
)
def test_the_server_keeps_no_state_so_its_own_reply_with_a_dropped_or_altered_reasoning_is_read_as_given(
    client, reasoning, read
):
    own = {"role": "assistant", "content": ask(client, [user(SHOWN)]).choices[0].message.content, **reasoning}
    later = ask(client, [user(SHOWN), own, user(DARK)])
    assert read in later.choices[0].message.content  # where both aliases are given, reasoning_content is read


def test_openais_own_server_refuses_a_reasoning_field():
    with LocalProvider() as provider:
        client = openai.OpenAI(base_url=f"{provider.base_url}/v1", api_key="test-key", max_retries=0)
        with pytest.raises(openai.BadRequestError) as raised:
            ask(client, [user(SHOWN), {"role": "assistant", "content": "x", "reasoning_content": "y"}, user(DARK)])
    assert "'reasoning_content' was unexpected" in str(raised.value.message)


# DeepSeek's thinking mode (`/deepseek/v1`): reasoning_content only, and actions as tool calls.

ACTIONS = game_tools(chat_tool)


@pytest.fixture
def deepseek() -> Iterator[openai.OpenAI]:
    with LocalProvider() as provider:
        yield openai.OpenAI(base_url=f"{provider.base_url}/deepseek/v1", api_key="test-key", max_retries=0)


def test_offered_the_actions_as_tools_the_model_acts_by_calling_the_one_its_action_line_names(deepseek):
    said = ask(deepseek, [user(SHOWN)]).choices[0].message.content
    reply = ask(deepseek, [user(SHOWN)], tools=ACTIONS)
    choice = reply.choices[0]
    (call,) = choice.message.tool_calls
    assert choice.finish_reason == "tool_calls" and call.function.name == said.rsplit("ACTION: ", 1)[1]
    assert json.loads(call.function.arguments) == {}
    assert choice.message.content == said.rsplit("\nACTION: ", 1)[0]
    assert choice.message.model_extra == {"reasoning_content": THOUGHT}


def test_a_streamed_tool_call_arrives_in_pieces_that_add_up(deepseek):
    whole = ask(deepseek, [user(SHOWN)], tools=ACTIONS).choices[0].message.tool_calls[0]
    chunks = list(ask(deepseek, [user(SHOWN)], tools=ACTIONS, stream=True))
    pieces = [call for chunk in chunks if chunk.choices for call in chunk.choices[0].delta.tool_calls or []]
    assert pieces[0].id.startswith("call_") and pieces[0].function.name == whole.function.name
    assert "".join(piece.function.arguments or "" for piece in pieces) == whole.function.arguments
    assert [chunk.choices[0].finish_reason for chunk in chunks if chunk.choices][-1] == "tool_calls"


def test_a_tool_call_must_be_answered_and_a_tool_result_must_answer_one(deepseek):
    reply = ask(deepseek, [user(SHOWN)], tools=ACTIONS).choices[0].message
    answer = {"role": "assistant", "content": reply.content, "reasoning_content": THOUGHT}
    called = {**answer, "tool_calls": [call.model_dump() for call in reply.tool_calls]}
    result = {"role": "tool", "tool_call_id": reply.tool_calls[0].id, "content": "ok"}
    with pytest.raises(openai.BadRequestError) as unanswered:
        ask(deepseek, [user(SHOWN), called, user(DARK)], tools=ACTIONS)
    assert "did not have response messages" in str(unanswered.value.message)
    with pytest.raises(openai.BadRequestError) as orphan:
        ask(deepseek, [user(SHOWN), answer, result, user(DARK)], tools=ACTIONS)
    assert "must be a response to a preceeding message with 'tool_calls'" in str(orphan.value.message)
    later = ask(deepseek, [user(SHOWN), called, result, user(DARK)], tools=ACTIONS)
    assert "(beacon seen)" in later.choices[0].message.content  # the beacon came back with the reasoning


# DeepSeek holds reasoning by turn (chat_reasoning.py, rule 2): only a turn that made a tool call
# must bring it back, and only there is it read.


def test_deepseek_serves_a_plain_answer_without_its_reasoning_and_ignores_any_replayed_with_it(deepseek):
    reply = ask(deepseek, [user(SHOWN)]).choices[0].message  # no tool offered: a plain answer
    bare = {"role": "assistant", "content": reply.content}
    for answer in (bare, {**bare, "reasoning_content": THOUGHT}, {**bare, "reasoning_content": "NOTES: beacon A"}):
        later = ask(deepseek, [user(SHOWN), answer, user(DARK)])
        assert FORGOTTEN in later.choices[0].message.content  # a turn without a tool call keeps no reasoning


def own_call(reasoning: dict[str, str]) -> list[dict[str, Any]]:
    """A tool call the client made itself (this provider never issued it), and its result."""
    call = {"id": "auto_1", "type": "function", "function": {"name": "ACTION6", "arguments": "{}"}}
    return [{"role": "assistant", "content": None, **reasoning, "tool_calls": [call]}, result_of("auto_1")]


def result_of(call_id: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": "ok"}


@pytest.mark.parametrize(
    "missing",
    ["the call issued here", "a call of the client's own", "the answer that closes the turn"],
)
def test_deepseek_refuses_a_tool_call_turn_without_reasoning_content_in_its_own_words(deepseek, missing):
    reply = ask(deepseek, [user(SHOWN)], tools=ACTIONS).choices[0].message
    called = {
        "role": "assistant",
        "content": reply.content,
        "tool_calls": [call.model_dump() for call in reply.tool_calls],
    }
    kept = {**called, "reasoning_content": THOUGHT}
    turn = {
        "the call issued here": [called, result_of(reply.tool_calls[0].id)],
        "a call of the client's own": own_call({}),
        "the answer that closes the turn": [kept, result_of(reply.tool_calls[0].id), assistant_text("Done.")],
    }[missing]
    with pytest.raises(openai.BadRequestError) as raised:
        ask(deepseek, [user(SHOWN), *turn, user(DARK)], tools=ACTIONS)
    assert raised.value.body == {
        "message": "The `reasoning_content` in the thinking mode must be passed back to the API.",
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_request_error",
    }


def assistant_text(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def test_deepseek_takes_any_reasoning_string_on_a_call_of_the_clients_own(deepseek):
    # Recorded: a client-made call replayed with `reasoning_content: ''` was served.
    later = ask(deepseek, [user(SHOWN), *own_call({"reasoning_content": ""}), user(DARK)], tools=ACTIONS)
    assert later.choices[0].finish_reason in ("stop", "tool_calls")


@pytest.mark.parametrize(("reasoning", "read"), [("", FORGOTTEN), ("NOTES: level 1 beacon A", BELIEVED)])
def test_deepseek_takes_a_call_it_issued_back_with_any_reasoning_string_and_reads_that_string(
    deepseek, reasoning, read
):
    reply = ask(deepseek, [user(SHOWN)], tools=ACTIONS).choices[0].message
    calls = [call.model_dump() for call in reply.tool_calls]
    called = {"role": "assistant", "content": reply.content, "reasoning_content": reasoning, "tool_calls": calls}
    later = ask(deepseek, [user(SHOWN), called, result_of(calls[0]["id"]), user(DARK)], tools=ACTIONS)
    assert read in later.choices[0].message.content


def test_deepseek_takes_back_a_reply_that_only_called_tools_with_an_empty_reasoning(deepseek):
    # A reply known only by its text and calls (a resume, a model switch) is replayed with content null
    # and `reasoning_content: ''`; every such reply has the same (empty) text, so only the key is checked.
    asked = user("call ACTION1 with {}")
    reply = ask(deepseek, [asked], tools=ACTIONS).choices[0].message
    calls = [call.model_dump() for call in reply.tool_calls]
    assert reply.content is None and (reply.model_extra or {})["reasoning_content"]
    called = {"role": "assistant", "content": None, "reasoning_content": "", "tool_calls": calls}
    later = ask(deepseek, [asked, called, result_of(calls[0]["id"]), user(DARK)], tools=ACTIONS)
    assert later.choices[0].finish_reason in ("stop", "tool_calls")
