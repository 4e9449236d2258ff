"""Function tools on google.interactions.v1, through the real google-genai SDK against the local
Interactions wire, streamed and not.

The adapter offers a request's tools as function tools, reads the reply's function_call steps as its
tool calls (kept verbatim, after the thought step that signs them), and lays out the results as
function_result steps; the wire refuses unpaired calls and results, which the adapter classifies as
fatal. The local model calls what the user input asks for ("call TOOL with ARGS").

No recorded Interactions traffic exists in ../shared/recorded (its cassettes are Anthropic, DeepSeek,
Groq, OpenAI and OpenRouter ones), so there is no recorded tool call of this wire to read.
"""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest

from turnstate.adapters.contract import (
    Endpoint,
    ErrorKind,
    ModelRequest,
    ModelResponse,
    ProviderError,
    RequestSettings,
    ToolCall,
    ToolResult,
    ToolSpec,
)
from turnstate.adapters.gemini_interactions import InteractionsAdapter
from turnstate.local_provider.server import LocalProvider

from ..hostile_server import HostileServer, Retype

SYSTEM = "You help."
ITEMS = InteractionsAdapter.transcript
OPTIONS = {"generation_config": {"thinking_summaries": "auto"}}
LOOK = ToolSpec("look", "Look around.", {"type": "object", "properties": {"where": {"type": "string"}}})
NOTE = ToolSpec("note", "Write a note.", {"type": "object", "properties": {"text": {"type": "string"}}})
TOOLS = (LOOK, NOTE)
ONE_CALL = 'Please call look with {"where": "north"}.'
TWO_CALLS = 'First call look with {"where": "north"} and call note with {"text": "door B"}.'


def connect(base_url: str, *, stream: bool) -> InteractionsAdapter:
    settings = RequestSettings("gemini-3.8-flash", 256, stream=stream, options=OPTIONS)
    return InteractionsAdapter.connect(Endpoint(base_url, "test-key", is_local=True), settings)


@pytest.fixture(params=[False, True], ids=["plain", "stream"])
def stream(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


def called(adapter: InteractionsAdapter, ask: str) -> tuple[list[Any], ModelResponse]:
    """The conversation after the model's calls: the ask, then the reply's steps."""
    opening = ITEMS.user_items([ask])
    reply = adapter.call(ModelRequest(SYSTEM, tuple(opening), tools=TOOLS))
    assert isinstance(reply, ModelResponse), reply
    return [*opening, *ITEMS.reply_items(reply)], reply


def answers(reply: ModelResponse, *, failed: str = "") -> list[ToolResult]:
    """One result per call, in order; the call named `failed` fails."""
    return [
        ToolResult(call.id, call.name, f"{call.name} done", is_error=call.name == failed) for call in reply.tool_calls
    ]


def test_offered_tools_are_sent_as_function_tools_and_a_call_is_read_with_its_id_name_and_arguments(stream):
    with LocalProvider() as provider:
        history, reply = called(connect(provider.base_url, stream=stream), ONE_CALL)
        body = provider.request_log[0]
    assert body["tools"] == [
        {"type": "function", "name": "look", "description": "Look around.", "parameters": dict(LOOK.parameters)},
        {"type": "function", "name": "note", "description": "Write a note.", "parameters": dict(NOTE.parameters)},
    ]
    (call,) = reply.tool_calls
    assert call == ToolCall(call.id, "look", {"where": "north"}) and call.id
    assert reply.stop_reason == "requires_action" and reply.text == ""
    thought, step = history[1:]
    assert thought["type"] == "thought" and thought["signature"]
    assert step == {"type": "function_call", "id": call.id, "name": "look", "arguments": {"where": "north"}}


def test_several_calls_in_one_reply_are_read_in_the_order_the_reply_made_them(stream):
    with LocalProvider() as provider:
        history, reply = called(connect(provider.base_url, stream=stream), TWO_CALLS)
    assert [(call.name, call.arguments) for call in reply.tool_calls] == [
        ("look", {"where": "north"}),
        ("note", {"text": "door B"}),
    ]
    assert [step["type"] for step in history[1:]] == ["thought", "function_call", "function_call"]
    assert [step["id"] for step in history[2:]] == [call.id for call in reply.tool_calls]


def test_a_streamed_reply_reads_the_same_calls_as_a_plain_one():
    with LocalProvider() as provider:
        _, plain = called(connect(provider.base_url, stream=False), TWO_CALLS)
        _, streamed = called(connect(provider.base_url, stream=True), TWO_CALLS)
    assert [(call.name, call.arguments) for call in streamed.tool_calls] == [
        (call.name, call.arguments) for call in plain.tool_calls
    ]


def test_results_laid_out_by_tool_result_items_are_accepted_and_the_conversation_goes_on(stream):
    with LocalProvider() as provider:
        adapter = connect(provider.base_url, stream=stream)
        history, reply = called(adapter, TWO_CALLS)
        results = ITEMS.tool_result_items(answers(reply))
        answered = adapter.call(ModelRequest(SYSTEM, (*history, *results), tools=TOOLS))
        assert isinstance(answered, ModelResponse), answered
        then = (*history, *results, *ITEMS.reply_items(answered), *ITEMS.user_items(["Thanks."]))
        later = adapter.call(ModelRequest(SYSTEM, then, tools=TOOLS))
        sent = provider.request_log[1]["input"]
    assert results == [
        {"type": "function_result", "call_id": call.id, "name": call.name, "result": f"{call.name} done"}
        for call in reply.tool_calls
    ]
    assert sent[-2:] == results and answered.text and answered.tool_calls == ()
    assert isinstance(later, ModelResponse) and later.text


def test_an_error_result_is_carried_as_the_steps_is_error_and_accepted(stream):
    with LocalProvider() as provider:
        adapter = connect(provider.base_url, stream=stream)
        history, reply = called(adapter, TWO_CALLS)
        results = ITEMS.tool_result_items(answers(reply, failed="note"))
        answered = adapter.call(ModelRequest(SYSTEM, (*history, *results), tools=TOOLS))
        sent = provider.request_log[1]["input"]
    assert [step.get("is_error") for step in sent[-2:]] == [None, True]
    assert isinstance(answered, ModelResponse)


def _orphan(history: list[Any], results: list[Any]) -> list[Any]:
    return [*history, *results, {**results[0], "call_id": "call_unknown"}]


def _unanswered(history: list[Any], results: list[Any]) -> list[Any]:
    return [*history, results[0], *ITEMS.user_items(["Go on."])]


def _duplicate(history: list[Any], results: list[Any]) -> list[Any]:
    return [*history, *results, results[1]]


@pytest.mark.parametrize(
    ("unpaired", "words"),
    [
        (_orphan, "no function_call step before this result has the id 'call_unknown'"),
        (_unanswered, "has no function_result step before input[5] (a user_input step)"),
        (_duplicate, "is already answered by input[5]"),
    ],
    ids=["orphan", "unanswered", "duplicate"],
)
def test_an_unpaired_call_or_result_is_refused_as_a_400_and_classified_fatal(stream, unpaired, words):
    with LocalProvider() as provider:
        adapter = connect(provider.base_url, stream=stream)
        history, reply = called(adapter, TWO_CALLS)
        request = ModelRequest(SYSTEM, tuple(unpaired(history, ITEMS.tool_result_items(answers(reply)))), tools=TOOLS)
        outcome = adapter.call(request)
        # The same body, posted raw, shows which rule refused it (the adapter keeps no message).
        raw = httpx2.post(
            f"{provider.base_url}/v1beta/interactions",
            json=adapter.build_request(request),
            headers={"x-goog-api-key": "test-key"},
        )
    assert isinstance(outcome, ProviderError) and outcome.kind is ErrorKind.FATAL
    assert outcome.diagnostics["status"] == 400 and outcome.diagnostics["error_type"] == "INVALID_ARGUMENT"
    assert raw.status_code == 400 and words in raw.json()["error"]["message"]


def test_a_request_without_tools_is_sent_byte_for_byte_as_before(stream):
    """The body the adapter built before tools existed, in its key order, and the JSON the provider
    received: the same (the SDK serializes one dict the same way every time)."""
    with LocalProvider() as provider:
        adapter = connect(provider.base_url, stream=stream)
        items = tuple(ITEMS.user_items(["Hello."]))
        adapter.call(ModelRequest(SYSTEM, items))
        body = provider.request_log[0]
    before = {
        "model": "gemini-3.8-flash",
        "input": [dict(item) for item in items],
        "system_instruction": SYSTEM,
        "store": False,
        "generation_config": {"thinking_summaries": "auto", "max_output_tokens": 256},
        **({"stream": True} if stream else {}),
    }
    built = adapter.build_request(ModelRequest(SYSTEM, items))
    assert json.dumps(built) == json.dumps({key: value for key, value in before.items() if key != "stream"})
    assert body == before


@pytest.mark.parametrize(
    ("stream", "path", "value"),
    [
        (False, ("steps", "*", "arguments"), ["north"]),
        (False, ("steps", "*", "arguments"), "north"),
        (False, ("steps", "*", "id"), 7),
        (True, ("delta", "arguments"), '["north"]'),
        (True, ("delta", "arguments"), '{"where": '),
    ],
)
def test_a_call_whose_arguments_are_not_a_json_object_is_a_malformed_reply(stream, path, value):
    retype = Retype(path, value)
    with LocalProvider() as provider, HostileServer(provider.base_url, retype) as server:
        outcome = connect(server.base_url, stream=stream).call(
            ModelRequest(SYSTEM, tuple(ITEMS.user_items([ONE_CALL])), tools=TOOLS)
        )
    assert retype.applied
    assert isinstance(outcome, ProviderError) and outcome.kind is ErrorKind.TRANSIENT
    assert outcome.diagnostics["error_class"] == "MalformedReply"


def test_calls_and_results_read_as_tool_calls_and_results_and_are_counted():
    with LocalProvider() as provider:
        history, reply = called(connect(provider.base_url, stream=False), ONE_CALL)
    items = [*history, *ITEMS.tool_result_items(answers(reply))]
    readable = ITEMS.readable(items)
    assert [entry["role"] for entry in readable] == ["user", "thought summary", "tool call", "tool result"]
    assert readable[2]["content"] == 'look({"where": "north"})' and readable[3]["content"] == "look done"
    assert history[1]["signature"] not in str(readable)
    assert ITEMS.estimate_tokens(items[2:3]) > ITEMS.estimate_tokens([{"type": "function_call"}])
