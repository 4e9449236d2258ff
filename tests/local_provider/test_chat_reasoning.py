"""The open-weight Chat Completions server (`/open-weight/v1`): reasoning strings returned, billed,
streamed, and held to the replay rules of chat_reasoning.py, through the real openai SDK."""

from __future__ import annotations

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
