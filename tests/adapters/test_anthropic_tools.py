"""anthropic.messages.v1's function tools, through the real anthropic SDK against the local provider.

The adapter offers ToolSpecs as Anthropic tools, reads a `tool_use` reply's calls in order, replays
the reply (thinking and its signature before the calls) verbatim, and lays out results as the next
user message's `tool_result` blocks; the local provider holds the pairing as the service does, and
its refusals are classified. The local model calls what the input asks ("call TOOL with ARGS").
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
import pytest
from anthropic.types.beta import BetaMessage

from turnstate.adapters.anthropic_messages import MessagesAdapter
from turnstate.adapters.contract import (
    ErrorKind,
    ModelRequest,
    ModelResponse,
    ProviderError,
    RequestSettings,
    ToolCall,
    ToolResult,
    ToolSpec,
    UsageSeen,
    never_raising,
)
from turnstate.local_provider.server import LocalProvider

from ..local_provider.test_messages import DARK, REMEMBERED, SHOWN
from ..recorded import interactions
from .test_anthropic_messages import SYSTEM, adapter_usage, connect, sdk_message

ITEMS = MessagesAdapter.transcript
LOOK = ToolSpec("look", "Look around.", {"type": "object", "properties": {"far": {"type": "boolean"}}})
MOVE = ToolSpec("move", "Move somewhere.", {"type": "object", "properties": {"to": {"type": "string"}}})
ASK_ONE = 'call look with {"far": true}'
ASK_TWO = 'call look with {"far": true} and call move with {"to": "door C"}'


@pytest.fixture(params=[False, True], ids=["plain", "stream"])
def stream(request) -> bool:
    return request.param


def offered(*items: Any, tools: tuple[ToolSpec, ...] = (LOOK, MOVE)) -> ModelRequest:
    return ModelRequest(system=SYSTEM, items=tuple(items), tools=tools)


def called(adapter: MessagesAdapter, ask: str) -> tuple[list[Any], ModelResponse]:
    """The history after a reply that made the calls `ask` asks for, and that reply."""
    opening = ITEMS.user_items([ask])
    reply = adapter.call(offered(*opening))
    assert isinstance(reply, ModelResponse), reply
    return [*opening, *ITEMS.reply_items(reply)], reply


def test_a_single_call_is_read_with_its_id_name_and_arguments(stream):
    with LocalProvider() as provider:
        _, reply = called(connect(provider, stream=stream), ASK_ONE)
    ((call),) = reply.tool_calls
    assert reply.stop_reason == "tool_use" and call.name == "look" and call.arguments == {"far": True}
    (message,) = reply.native_items
    assert [block for block in message["content"] if block["type"] == "tool_use"] == [
        {"type": "tool_use", "id": call.id, "name": "look", "input": {"far": True}}
    ]


def test_several_calls_in_one_reply_are_read_in_the_order_made_after_the_thinking(stream):
    with LocalProvider() as provider:
        _, reply = called(connect(provider, stream=stream), ASK_TWO)
    assert [(call.name, call.arguments) for call in reply.tool_calls] == [
        ("look", {"far": True}),
        ("move", {"to": "door C"}),
    ]
    (message,) = reply.native_items
    kinds = [block["type"] for block in message["content"]]
    assert kinds[0] == "thinking" and message["content"][0]["signature"] and kinds[-2:] == ["tool_use", "tool_use"]


def test_results_laid_out_by_the_transcript_are_accepted_and_the_conversation_goes_on(stream):
    with LocalProvider() as provider:
        adapter = connect(provider, stream=stream)
        history, reply = called(adapter, ASK_TWO)
        first, second = reply.tool_calls
        results = ITEMS.tool_result_items([ToolResult(first.id, "look", SHOWN), ToolResult(second.id, "move", "moved")])
        later = adapter.call(offered(*history, *results, *ITEMS.user_items(["What now?"])))
        sent = provider.request_log[1]["messages"]
    assert isinstance(later, ModelResponse), later
    assert later.stop_reason == "end_turn" and later.tool_calls == () and REMEMBERED in later.text
    assert sent[1] == history[1]  # the reply replayed verbatim: thinking, its signature, the calls
    assert sent[2] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": first.id, "content": SHOWN},
            {"type": "tool_result", "tool_use_id": second.id, "content": "moved"},
        ],
    }


def test_an_error_result_is_carried_as_is_error(stream):
    with LocalProvider() as provider:
        adapter = connect(provider, stream=stream)
        history, reply = called(adapter, ASK_ONE)
        (call,) = reply.tool_calls
        results = ITEMS.tool_result_items([ToolResult(call.id, "look", "the lamp is out", is_error=True)])
        later = adapter.call(offered(*history, *results))
        sent = provider.request_log[1]["messages"][2]["content"]
    assert isinstance(later, ModelResponse), later
    assert sent == [{"type": "tool_result", "tool_use_id": call.id, "content": "the lamp is out", "is_error": True}]
    assert ITEMS.readable(results) == [{"role": "user", "content": "[result (error)] the lamp is out"}]


def _orphan(history: list[Any], calls: tuple[ToolCall, ...]) -> list[Any]:
    answers = [ToolResult(call.id, call.name, "ok") for call in calls]
    return [*history, *ITEMS.tool_result_items([*answers, ToolResult("toolu_nobody", "look", "ok")])]


def _unanswered(history: list[Any], calls: tuple[ToolCall, ...]) -> list[Any]:
    return [*history, *ITEMS.user_items([DARK])]


def _duplicate(history: list[Any], calls: tuple[ToolCall, ...]) -> list[Any]:
    answers = [ToolResult(call.id, call.name, "ok") for call in calls]
    return [*history, *ITEMS.tool_result_items([*answers, answers[0]])]


@pytest.mark.parametrize(
    ("broken", "said"),
    [
        (_orphan, "unexpected `tool_use_id` found in `tool_result` blocks"),
        (_unanswered, "`tool_use` ids were found without `tool_result` blocks immediately after"),
        (_duplicate, "each tool_use must have a single result"),
    ],
    ids=["orphan", "unanswered", "duplicate"],
)
def test_a_broken_pairing_is_refused_by_the_provider_and_classified_fatal(stream, broken, said):
    with LocalProvider() as provider:
        adapter = connect(provider, stream=stream)
        history, reply = called(adapter, ASK_TWO)
        outcome = adapter.call(offered(*broken(history, reply.tool_calls)))
    assert isinstance(outcome, ProviderError) and outcome.kind is ErrorKind.FATAL
    assert outcome.diagnostics["status"] == 400 and outcome.diagnostics["error_type"] == "invalid_request_error"
    assert said not in str(outcome.diagnostics)  # the provider's message is never a diagnostic
    assert said in provider_message(broken(history, reply.tool_calls), history)


def provider_message(items: list[Any], history: list[Any]) -> str:
    """The local provider's own words for a request of `items` (the adapter keeps none of them)."""
    with LocalProvider() as provider:
        client = anthropic.Anthropic(base_url=provider.base_url, api_key="k", max_retries=0)
        tools: Any = [{"name": "look", "input_schema": {"type": "object"}}, {"name": "move", "input_schema": {}}]
        try:
            client.messages.create(model="m", max_tokens=64, messages=items, tools=tools)
        except anthropic.BadRequestError as error:
            return str(error.message)
    return ""


def test_a_request_without_tools_sends_no_tool_field_and_with_tools_only_adds_them():
    with LocalProvider() as provider:
        adapter = connect(provider)
        opening = ITEMS.user_items([SHOWN])
        adapter.call(ModelRequest(system=SYSTEM, items=tuple(opening)))
        adapter.call(offered(*opening))
        plain, with_tools = provider.request_log
    assert set(plain) == {"model", "max_tokens", "system", "messages", "thinking"}
    assert {key: value for key, value in with_tools.items() if key != "tools"} == plain
    assert with_tools["tools"] == [
        {"name": "look", "description": "Look around.", "input_schema": dict(LOOK.parameters)},
        {"name": "move", "description": "Move somewhere.", "input_schema": dict(MOVE.parameters)},
    ]
    assert json.dumps(adapter.build_request(ModelRequest(SYSTEM, tuple(opening)))) == json.dumps(
        adapter.build_request(ModelRequest(SYSTEM, tuple(opening), tools=()))
    )


def test_the_readable_projection_names_calls_and_results_without_signatures(stream):
    with LocalProvider() as provider:
        history, reply = called(connect(provider, stream=stream), ASK_ONE)
    (readable,) = ITEMS.readable(history[1:])
    signature = history[1]["content"][0]["signature"]
    assert '[call look {"far": true}]' in readable["content"] and signature not in readable["content"]


TOOL_USE = {"type": "tool_use", "id": "toolu_1", "name": "look", "input": {}}


def _arguments_not_an_object() -> BetaMessage:
    message = sdk_message("tool_use", TOOL_USE)
    object.__setattr__(message.content[0], "input", ["not", "an", "object"])  # as an SDK reads it, unvalidated
    return message


@pytest.mark.parametrize(
    "message",
    [
        lambda: sdk_message("tool_use", {"type": "text", "text": "Looking."}),
        lambda: sdk_message("end_turn", {"type": "text", "text": "ACTION: UP"}, TOOL_USE),
        _arguments_not_an_object,
    ],
    ids=["tool_use stop without a call", "a call in an end_turn reply", "arguments not an object"],
)
def test_a_reply_whose_calls_cannot_be_read_is_malformed(message):
    """Read as `call` reads a reply: inside never_raising, where a shape that fails validation is malformed."""
    built = message()
    adapter = MessagesAdapter(anthropic.Anthropic(api_key="k"), RequestSettings("m", 64))

    def read(seen: UsageSeen) -> ModelResponse | ProviderError:
        return adapter._normalize(built, None, adapter_usage(built), compaction=False)

    outcome = never_raising(read, adapter.classify, anthropic.APIError)
    assert isinstance(outcome, ProviderError) and outcome.kind is ErrorKind.TRANSIENT
    assert outcome.diagnostics["error_class"] == "MalformedReply"


def test_the_recorded_tool_use_reply_is_read_with_its_thinking_kept_before_the_call():
    recorded = interactions("test_anthropic/test_anthropic_tool_with_thinking.yaml")
    body = recorded[0]["response"]["parsed_body"]
    message = BetaMessage.model_validate(body)
    adapter = MessagesAdapter(anthropic.Anthropic(api_key="k"), RequestSettings("m", 64))
    reply = adapter._normalize(message, None, adapter_usage(message), compaction=False)
    assert isinstance(reply, ModelResponse), reply
    assert reply.tool_calls == (ToolCall("toolu_01YGzqpRE16Vricda3Aqcejo", "get_user_country", {}),)
    assert reply.stop_reason == "tool_use"
    assert ITEMS.reply_items(reply) == [{"role": "assistant", "content": body["content"]}]
    # the recorded answer is what tool_result_items lays out, less the `is_error: false` it spelled out
    answer = recorded[1]["request"]["parsed_body"]["messages"][2]
    (block,) = answer["content"]
    assert block.pop("is_error") is False
    assert ITEMS.tool_result_items([ToolResult(block["tool_use_id"], "get_user_country", "Mexico")]) == [answer]
