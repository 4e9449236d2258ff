"""The Responses wire's replies against replies recorded from api.openai.com (../shared/recorded,
read when present; these tests skip without it), field for field, through the real openai SDK: the
same item fields, the same output order, the same usage details."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import openai
import pytest

from turnstate.local_provider.server import LocalProvider

from ..recorded import interactions
from .test_responses import DARK, ENCRYPTED, MODEL, SHOWN, SYSTEM, Item, client_for, replayable, user

THINKING = "test_openai_responses/test_openai_responses_model_thinking_part.yaml"
THINKING_STREAM = "test_openai_responses/test_openai_responses_thinking_part_iter.yaml"
INLINE = "test_openai_responses/test_openai_responses_compact_stateful_mode.yaml"
INLINE_STREAM = "test_openai_responses/test_openai_responses_compact_stateful_mode_stream.yaml"
COMPACT = "test_openai_responses/test_openai_responses_compact_messages.yaml"
PROMPT_CACHE = "test_openai_prompt_cache/test_openai_responses_prompt_cache_e2e.yaml"
COMPACT_AT = [{"type": "compaction", "compact_threshold": 200}]


def recorded_replies(cassette: str) -> list[dict[str, Any]]:
    """The final response objects of a cassette, streamed or not."""
    replies = []
    for interaction in interactions(cassette):
        reply = interaction["response"]
        if reply.get("parsed_body") is not None:
            replies.append(reply["parsed_body"])
        else:
            events = stream_events(reply["body"]["string"])
            replies.append(events[-1]["response"])
    return replies


def stream_events(text: str) -> list[dict[str, Any]]:
    return [json.loads(line.removeprefix("data:")) for line in text.splitlines() if line.startswith("data:")]


def recorded_stream_items(cassette: str) -> list[tuple[str, int, dict[str, Any]]]:
    """(event type, output_index, item) of every output_item event a cassette's streams sent."""
    found = []
    for interaction in interactions(cassette):
        for event in stream_events(interaction["response"]["body"]["string"]):
            if event["type"] in ("response.output_item.added", "response.output_item.done"):
                found.append((event["type"], event["output_index"], event["item"]))
    return found


def keys_of(items: Sequence[dict[str, Any]], kind: str) -> set[frozenset[str]]:
    return {frozenset(item) for item in items if item.get("type") == kind}


def output_items(replies: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [item for reply in replies for item in reply["output"]]


@pytest.fixture
def client() -> Iterator[openai.OpenAI]:
    with LocalProvider() as provider, client_for(provider) as sdk_client:
        yield sdk_client


def raw_create(client: openai.OpenAI, items: Sequence[Item], **params: Any) -> dict[str, Any]:
    """The response's JSON exactly as the server sent it."""
    settings: dict[str, Any] = {"store": False, "include": ENCRYPTED, "instructions": SYSTEM, **params}
    raw = client.responses.with_raw_response.create(model=MODEL, input=list(items), **settings)
    body: dict[str, Any] = raw.http_response.json()
    return body


def raw_stream(client: openai.OpenAI, items: Sequence[Item], **params: Any) -> list[dict[str, Any]]:
    settings: dict[str, Any] = {"store": False, "include": ENCRYPTED, "instructions": SYSTEM, **params}
    raw = client.responses.with_raw_response.create(model=MODEL, input=list(items), stream=True, **settings)
    return stream_events(raw.http_response.read().decode("utf-8"))


def compacted_turns(client: openai.OpenAI) -> list[Item]:
    first = client.responses.create(model=MODEL, input=[user(SHOWN)], store=False, include=ENCRYPTED)
    return [user(SHOWN), *replayable(first), user(DARK)]


def test_reasoning_items_carry_the_fields_recorded_ones_carry(client: openai.OpenAI) -> None:
    recorded = keys_of(output_items(recorded_replies(THINKING)), "reasoning")
    fake = keys_of(raw_create(client, [user(SHOWN)])["output"], "reasoning")

    assert recorded == fake == {frozenset({"type", "id", "summary", "encrypted_content"})}


def test_streamed_reasoning_items_carry_the_fields_recorded_ones_carry(client: openai.OpenAI) -> None:
    recorded = {
        (event, frozenset(item))
        for event, _, item in recorded_stream_items(THINKING_STREAM)
        if item["type"] == "reasoning"
    }
    events = raw_stream(client, [user(SHOWN)])
    fake = {
        (event["type"], frozenset(event["item"]))
        for event in events
        if event["type"].startswith("response.output_item.") and event["item"]["type"] == "reasoning"
    }

    assert recorded == fake


def test_an_inline_compaction_follows_the_message_as_recorded(client: openai.OpenAI) -> None:
    recorded = [[item["type"] for item in reply["output"]] for reply in recorded_replies(INLINE)]
    fake = raw_create(client, compacted_turns(client), context_management=COMPACT_AT)["output"]

    assert ["message", "compaction"] in recorded
    assert [item["type"] for item in fake] == ["reasoning", "message", "compaction"]
    assert keys_of(output_items(recorded_replies(INLINE)), "compaction") == keys_of(fake, "compaction")


def test_a_streamed_inline_compaction_is_the_last_output_index_as_recorded(client: openai.OpenAI) -> None:
    recorded = [(event, index, item["type"]) for event, index, item in recorded_stream_items(INLINE_STREAM)]
    events = raw_stream(client, compacted_turns(client), context_management=COMPACT_AT)
    fake = [
        (event["type"], event["output_index"], event["item"]["type"])
        for event in events
        if event["type"].startswith("response.output_item.")
    ]

    assert ("response.output_item.done", 1, "compaction") in recorded  # after the message at index 0
    assert fake[-2:] == [
        ("response.output_item.added", 2, "compaction"),
        ("response.output_item.done", 2, "compaction"),
    ]


def test_a_compact_output_carries_the_fields_recorded_ones_carry(client: openai.OpenAI) -> None:
    recorded = [reply for reply in recorded_replies(COMPACT) if reply["object"] == "response.compaction"]
    raw = client.responses.with_raw_response.compact(model=MODEL, input=compacted_turns(client))
    fake = raw.http_response.json()

    assert fake.keys() == recorded[0].keys()
    for kind in ("message", "compaction"):
        assert keys_of(fake["output"], kind) == keys_of(recorded[0]["output"], kind)
    parts = {frozenset(part) for item in fake["output"] if item["type"] == "message" for part in item["content"]}
    assert parts == {frozenset(part) for item in recorded[0]["output"][:-1] for part in item["content"]}
    assert [item["type"] for item in fake["output"]] == ["message", "message", "compaction"]


def test_usage_details_carry_the_fields_recorded_ones_carry(client: openai.OpenAI) -> None:
    recorded = recorded_replies(PROMPT_CACHE)[0]["usage"]
    fake = raw_create(client, [user(SHOWN)])["usage"]

    assert fake.keys() == recorded.keys()
    assert fake["input_tokens_details"].keys() == recorded["input_tokens_details"].keys()
    assert fake["output_tokens_details"].keys() == recorded["output_tokens_details"].keys()
