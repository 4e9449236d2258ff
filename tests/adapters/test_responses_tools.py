"""Function tools on openai.responses.v1, through the real openai SDK against the local provider: the
tools offered in the Responses shape, the calls read from function_call items (streamed and not),
the results laid out as function_call_output items, and the provider's pairing refusals classified.
The local model calls what the input asks for ("call TOOL with ARGS", policy.asked_calls)."""

from __future__ import annotations

import json
from typing import Any

import openai
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
from turnstate.adapters.responses import ERROR_PREFIX, ResponsesAdapter
from turnstate.adapters.xai_responses import XaiResponsesAdapter
from turnstate.local_provider.server import LocalProvider

from ..hostile_server import HostileServer
from ..recorded import interactions
from .test_responses import CONTINUOUS

SYSTEM = "Use the tools you are asked to."
SCHEMA = {
    "type": "object",
    "properties": {"key": {"type": "string"}},
    "required": ["key"],
    "additionalProperties": False,
}
TOOLS = (ToolSpec("lookup", "Look a note up by its key.", SCHEMA), ToolSpec("note", "Write a note.", SCHEMA))
ONE_CALL = 'call lookup with {"key": "beacon"}'
TWO_CALLS = 'call lookup with {"key": "beacon"} and call note with {"key": "door"}'
RECORDED = "test_openai_responses/test_openai_responses_thinking_with_tool_calls.yaml"
RECORDED_STREAM = "test_openai_responses/test_openai_responses_streaming_usage.yaml"


@pytest.fixture(params=[False, True], ids=["plain", "stream"])
def stream(request) -> bool:
    return request.param


def connect(base_url: str, *, stream: bool = False, adapter: type[ResponsesAdapter] = ResponsesAdapter):
    settings = RequestSettings(model="local-policy-1", max_output_tokens=256, stream=stream, options=CONTINUOUS)
    return adapter.connect(Endpoint(base_url, "test-key", is_local=True, timeout_seconds=10.0), settings)


def asked(adapter: ResponsesAdapter, text: str) -> tuple[list[dict[str, Any]], ModelResponse]:
    """The opening input and the reply that called tools."""
    opening = adapter.transcript.user_items([text])
    reply = adapter.call(ModelRequest(SYSTEM, tuple(opening), tools=TOOLS))
    assert isinstance(reply, ModelResponse), reply
    return [dict(item) for item in opening], reply


def results(reply: ModelResponse, *, is_error: bool = False) -> list[ToolResult]:
    return [ToolResult(call.id, call.name, f"{call.name} done", is_error) for call in reply.tool_calls]


@pytest.mark.parametrize("adapter", [ResponsesAdapter, XaiResponsesAdapter], ids=["openai", "xai"])
def test_a_single_call_is_read_with_its_id_name_and_arguments(stream, adapter):
    with LocalProvider() as provider:
        _, reply = asked(connect(provider.base_url, stream=stream, adapter=adapter), ONE_CALL)
    (call,) = reply.tool_calls
    native = [item for item in reply.native_items if item["type"] == "function_call"]
    assert call == ToolCall(native[0]["call_id"], "lookup", {"key": "beacon"})
    assert [item["type"] for item in reply.native_items] == ["reasoning", "function_call"]  # kept as returned
    assert reply.text == ""


def test_several_calls_in_one_reply_are_read_in_order(stream):
    with LocalProvider() as provider:
        _, reply = asked(connect(provider.base_url, stream=stream), TWO_CALLS)
    assert [(call.name, dict(call.arguments)) for call in reply.tool_calls] == [
        ("lookup", {"key": "beacon"}),
        ("note", {"key": "door"}),
    ]
    calls = [item["call_id"] for item in reply.native_items if item["type"] == "function_call"]
    assert [call.id for call in reply.tool_calls] == calls


def test_the_tools_are_offered_in_the_responses_shape():
    with LocalProvider() as provider:
        adapter = connect(provider.base_url)
        asked(adapter, ONE_CALL)
        sent = provider.request_log[0]
    assert sent["tools"] == [
        {"type": "function", "name": "lookup", "description": "Look a note up by its key.", "parameters": SCHEMA},
        {"type": "function", "name": "note", "description": "Write a note.", "parameters": SCHEMA},
    ]


def test_results_laid_out_after_the_reply_are_accepted_and_the_conversation_goes_on(stream):
    with LocalProvider() as provider:
        adapter = connect(provider.base_url, stream=stream)
        opening, reply = asked(adapter, TWO_CALLS)
        answered = adapter.transcript.tool_result_items(results(reply))
        history = [*opening, *adapter.transcript.reply_items(reply), *answered]
        after = adapter.call(ModelRequest(SYSTEM, tuple(history), tools=TOOLS))
        assert isinstance(after, ModelResponse) and after.text and after.tool_calls == ()
        later = [*history, *adapter.transcript.reply_items(after), *adapter.transcript.user_items(["And now?"])]
        assert isinstance(adapter.call(ModelRequest(SYSTEM, tuple(later), tools=TOOLS)), ModelResponse)
    assert answered == [
        {"type": "function_call_output", "call_id": reply.tool_calls[0].id, "output": "lookup done"},
        {"type": "function_call_output", "call_id": reply.tool_calls[1].id, "output": "note done"},
    ]


def test_an_error_result_is_carried_in_its_output_text_and_accepted():
    with LocalProvider() as provider:
        adapter = connect(provider.base_url)
        opening, reply = asked(adapter, ONE_CALL)
        answered = adapter.transcript.tool_result_items(results(reply, is_error=True))
        history = (*opening, *adapter.transcript.reply_items(reply), *answered)
        after = adapter.call(ModelRequest(SYSTEM, history, tools=TOOLS))
    assert answered[0]["output"] == ERROR_PREFIX + "lookup done"
    assert isinstance(after, ModelResponse)
    assert adapter.transcript.readable(answered) == [{"role": "tool", "content": "ERROR: lookup done"}]


def unanswered(history: list[Any], answered: list[Any]) -> list[Any]:
    return [*history, {"role": "user", "content": "go on"}]


def orphan(history: list[Any], answered: list[Any]) -> list[Any]:
    return [*history, *answered, {**answered[0], "call_id": "call_nobody"}]


def duplicate(history: list[Any], answered: list[Any]) -> list[Any]:
    return [*history, *answered, answered[-1]]


@pytest.mark.parametrize(
    ("broken", "words"),
    [
        (unanswered, "No tool output found for function call"),
        (orphan, "No tool call found for function call output with call_id call_nobody."),
        (duplicate, "Duplicate function_call_output for call_id"),
    ],
)
def test_a_broken_pairing_is_refused_by_the_provider_and_fatal(broken, words):
    with LocalProvider() as provider:
        adapter = connect(provider.base_url)
        opening, reply = asked(adapter, TWO_CALLS)
        history = [*opening, *adapter.transcript.reply_items(reply)]
        items = broken(history, adapter.transcript.tool_result_items(results(reply)))
        request = ModelRequest(SYSTEM, tuple(items), tools=TOOLS)
        outcome = adapter.call(request)
        with pytest.raises(openai.BadRequestError) as raised:
            adapter.client.responses.create(**adapter.build_request(request))
    assert words in raised.value.message and raised.value.param == "input"
    assert isinstance(outcome, ProviderError) and outcome.kind is ErrorKind.FATAL
    assert outcome.diagnostics["status"] == 400 and outcome.diagnostics["error_type"] == "invalid_request_error"
    assert words not in json.dumps(outcome.diagnostics)  # the provider's message stays out of diagnostics


def test_a_request_without_tools_is_sent_byte_for_byte_as_before(stream):
    with LocalProvider() as provider:
        adapter = connect(provider.base_url, stream=stream)
        items = tuple(adapter.transcript.user_items([ONE_CALL]))
        reply = adapter.call(ModelRequest(SYSTEM, items))
        body = provider.request_log[0]
    before = {
        "model": "local-policy-1",
        "instructions": SYSTEM,
        "input": [dict(item) for item in items],
        "max_output_tokens": 256,
        **CONTINUOUS,
        **({"stream": True} if stream else {}),
    }
    assert json.dumps(body) == json.dumps(before)
    assert isinstance(reply, ModelResponse) and reply.tool_calls == () and reply.text


@pytest.mark.parametrize("arguments", ["[1, 2]", '"key"', "{not json"])
def test_a_call_whose_arguments_are_not_a_json_object_is_a_malformed_reply(stream, arguments):
    def rewrite(reply: Any) -> Any:
        found = reply.get("response", reply)  # a body, or a stream event (the terminal one has the response)
        for item in found.get("output") or []:
            if item.get("type") == "function_call":
                item["arguments"] = arguments
        return reply

    with LocalProvider() as provider, HostileServer(provider.base_url, rewrite) as server:
        outcome = connect(server.base_url, stream=stream).call(
            ModelRequest(SYSTEM, ({"role": "user", "content": ONE_CALL},), tools=TOOLS)
        )
    assert isinstance(outcome, ProviderError) and outcome.kind is ErrorKind.TRANSIENT
    assert outcome.diagnostics["error_class"] == "MalformedReply"


def recorded_output(stream: bool) -> list[dict[str, Any]]:
    """The recorded reply that called a tool: the plain one's body, or the stream's completed event."""
    if not stream:
        return interactions(RECORDED)[0]["response"]["parsed_body"]["output"]
    text = interactions(RECORDED_STREAM)[0]["response"]["body"]["string"]
    events = [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]
    return next(event["response"]["output"] for event in events if event["type"] == "response.completed")


def test_the_adapter_reads_a_recorded_reply_that_called_a_tool(stream):
    output = recorded_output(stream)

    def recorded(reply: Any) -> Any:
        found = reply.get("response") if isinstance(reply, dict) and "response" in reply else reply
        if isinstance(found, dict) and found.get("status") == "completed":
            found["output"] = output
        return reply

    with LocalProvider() as provider, HostileServer(provider.base_url, recorded) as server:
        outcome = connect(server.base_url, stream=stream).call(
            ModelRequest(SYSTEM, ({"role": "user", "content": "anything"},), tools=TOOLS)
        )
    assert isinstance(outcome, ModelResponse), outcome
    calls = [item for item in output if item["type"] == "function_call"]
    assert [(call.id, call.name, dict(call.arguments)) for call in outcome.tool_calls] == [
        (item["call_id"], item["name"], json.loads(item["arguments"])) for item in calls
    ]
    assert list(outcome.native_items) == output  # reasoning beside the call, exactly as returned
