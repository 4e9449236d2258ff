"""What each Chat Completions server's reply carries, field for field, against its spec and against
replies recorded from the real services (../shared/recorded, read when present; those tests skip
without it), through the real openai SDK."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest

from turnstate.local_provider.server import LocalProvider

from ..recorded import interactions
from .action_tools import chat_tool, game_tools
from .test_messages import SHOWN

OPENAI_CHAT = "test_openai_prompt_cache/test_openai_chat_prompt_cache_e2e.yaml"
DEEPSEEK_ANSWER = "test_deepseek/test_deepseek_model_thinking_part.yaml"
DEEPSEEK_TOOL_CALLS = "test_deepseek/test_deepseek_deferred_capability_with_thinking.yaml"


def recorded(cassette: str, side: str) -> list[dict[str, Any]]:
    """The JSON bodies of a cassette's requests or (non-streamed) replies, `side` naming which; skips
    the test when the recordings are absent."""
    return [interaction[side]["parsed_body"] for interaction in interactions(cassette)]


def recorded_replies(cassette: str) -> list[dict[str, Any]]:
    return recorded(cassette, "response")


def recorded_messages(cassette: str) -> list[dict[str, Any]]:
    return [choice["message"] for reply in recorded_replies(cassette) for choice in reply["choices"]]


@pytest.fixture
def provider() -> Iterator[LocalProvider]:
    with LocalProvider() as running:
        yield running


def raw_reply(provider: LocalProvider, prefix: str, **params: Any) -> dict[str, Any]:
    """The reply's JSON exactly as the server sent it (the SDK's objects cannot tell null from absent)."""
    with openai.OpenAI(base_url=provider.base_url + prefix, api_key="test-key", max_retries=0) as client:
        params.setdefault("messages", [{"role": "user", "content": SHOWN}])
        raw = client.chat.completions.with_raw_response.create(model="local-model", **params)
        reply: dict[str, Any] = raw.http_response.json()
    return reply


def test_an_openai_reply_message_carries_a_null_refusal_as_the_spec_requires(provider):
    (choice,) = raw_reply(provider, "/v1")["choices"]
    assert "refusal" in choice["message"] and choice["message"]["refusal"] is None


def test_an_openai_reply_message_has_the_fields_of_a_recorded_one(provider):
    recorded = [sorted(message) for message in recorded_messages(OPENAI_CHAT)]
    (choice,) = raw_reply(provider, "/v1")["choices"]
    assert recorded == [["annotations", "content", "refusal", "role"]] * 2
    assert sorted(choice["message"]) == recorded[0] and choice["message"]["annotations"] == []


def test_an_open_weight_reply_message_carries_a_null_refusal_as_vllm_writes_it(provider):
    (choice,) = raw_reply(provider, "/open-weight/v1")["choices"]
    assert sorted(choice["message"]) == ["content", "reasoning", "reasoning_content", "refusal", "role"]
    assert choice["message"]["refusal"] is None


def test_a_deepseek_answer_has_the_fields_of_a_recorded_one_and_no_refusal(provider):
    recorded = {tuple(sorted(message)) for message in recorded_messages(DEEPSEEK_ANSWER)}
    (choice,) = raw_reply(provider, "/deepseek/v1")["choices"]
    assert recorded == {("content", "reasoning_content", "role")}
    assert (*sorted(choice["message"]),) in recorded


def test_a_deepseek_tool_call_has_the_fields_of_a_recorded_one(provider):
    called = [message for message in recorded_messages(DEEPSEEK_TOOL_CALLS) if "tool_calls" in message]
    recorded_calls = {tuple(sorted(call)) for message in called for call in message["tool_calls"]}
    (choice,) = raw_reply(provider, "/deepseek/v1", tools=game_tools(chat_tool))["choices"]
    message = choice["message"]
    assert {tuple(sorted(message)) for message in called} == {tuple(sorted(message))}
    assert recorded_calls == {("function", "id", "index", "type")} == {tuple(sorted(message["tool_calls"][0]))}


def test_deepseek_usage_has_the_fields_of_a_recorded_one(provider):
    recorded = {
        tuple(sorted(reply["usage"]))
        for cassette in (DEEPSEEK_ANSWER, DEEPSEEK_TOOL_CALLS)
        for reply in recorded_replies(cassette)
    }
    usage = raw_reply(provider, "/deepseek/v1")["usage"]
    assert recorded == {tuple(sorted(usage))}
    assert "prompt_cache_hit_tokens" in usage and usage["prompt_tokens_details"] == {"cached_tokens": 0}


def test_recorded_deepseek_usage_splits_the_prompt_into_hits_and_misses_that_cached_tokens_repeats():
    """What the wire reproduces: hit + miss = prompt tokens, and cached_tokens are the hits."""
    usages = [
        reply["usage"] for cassette in (DEEPSEEK_ANSWER, DEEPSEEK_TOOL_CALLS) for reply in recorded_replies(cassette)
    ]
    for usage in usages:
        assert usage["prompt_cache_hit_tokens"] + usage["prompt_cache_miss_tokens"] == usage["prompt_tokens"]
        assert usage["prompt_tokens_details"]["cached_tokens"] == usage["prompt_cache_hit_tokens"]
    assert any(0 < usage["prompt_cache_hit_tokens"] < 1024 for usage in usages)  # no 1,024-token minimum


def test_the_recorded_deepseek_requests_with_their_tool_turns_are_served(provider):
    """Their replayed tool turns carry `reasoning_content` on every assistant message, one of them
    `''` on a call the client made itself: the real service served them, so must the wire."""
    with openai.OpenAI(base_url=provider.base_url + "/deepseek/v1", api_key="test-key", max_retries=0) as client:
        for body in recorded(DEEPSEEK_TOOL_CALLS, "request"):
            assert client.chat.completions.create(**body).choices
