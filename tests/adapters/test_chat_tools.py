"""Function tools on the Chat Completions adapters (OpenAI's, the open-weight servers', DeepSeek's),
through the real openai SDK against the local provider, streamed and not: tools offered in the wire's
shape, calls read in order, results laid out as tool messages and accepted, the pairing refused as
OpenAI refuses it, and a request without tools sent as it always was.

The local model calls a tool when the latest user message asks "call TOOL with {JSON}" (policy.
asked_calls), so each test knows the calls it will get.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from turnstate.adapters.chat_completions import ERROR_RESULT_PREFIX, ChatCompletionsAdapter, ChatMessages
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
    UsageSeen,
    never_raising,
)
from turnstate.adapters.deepseek_chat import DeepSeekChatAdapter
from turnstate.adapters.open_source_chat import OpenSourceChatAdapter
from turnstate.local_provider.server import LocalProvider

from ..recorded import interactions

SYSTEM = "You answer with tools when asked."
LOOK = ToolSpec(
    "look",
    "Look at one thing and say what it shows.",
    {"type": "object", "properties": {"at": {"type": "string"}}, "required": ["at"]},
)
NOTE = ToolSpec("note", "Read a note by its number.", {"type": "object", "properties": {"n": {"type": "integer"}}})
TOOLS = (LOOK, NOTE)
ONE_CALL = 'call look with {"at": "door"}'
TWO_CALLS = 'call note with {"n": 2} and then call look with {"at": "wall"}'
ITEMS = ChatMessages()
DEEPSEEK_TOOLS = "test_deepseek/test_deepseek_deferred_capability_with_thinking.yaml"

ADAPTERS: dict[str, tuple[type[ChatCompletionsAdapter], RequestSettings]] = {
    "openai": (ChatCompletionsAdapter, RequestSettings("local-policy-1", 256)),
    "open_weight": (
        OpenSourceChatAdapter,
        RequestSettings("glm-5.3-flash", 256, output_limit_param="max_tokens", options={"reasoning_field": "both"}),
    ),
    "deepseek": (DeepSeekChatAdapter, RequestSettings("deepseek-reasoner", 256, output_limit_param="max_tokens")),
}


@pytest.fixture(params=sorted(ADAPTERS))
def kind(request) -> str:
    return str(request.param)


@pytest.fixture(params=[False, True], ids=["plain", "stream"])
def stream(request) -> bool:
    return bool(request.param)


@pytest.fixture
def provider() -> Iterator[LocalProvider]:
    with LocalProvider() as running:
        yield running


def connect(provider: LocalProvider, kind: str, *, stream: bool) -> ChatCompletionsAdapter:
    adapter_class, settings = ADAPTERS[kind]
    streamed = RequestSettings(
        settings.model,
        settings.max_output_tokens,
        stream=stream,
        output_limit_param=settings.output_limit_param,
        options=settings.options,
    )
    return adapter_class.connect(Endpoint(provider.base_url, "test-key", is_local=True, timeout_seconds=10.0), streamed)


def asking(*items: Any, text: str = ONE_CALL) -> ModelRequest:
    return ModelRequest(SYSTEM, (*items, *ITEMS.user_items([text])), tools=TOOLS)


def replied(adapter: ChatCompletionsAdapter, request: ModelRequest) -> ModelResponse:
    reply = adapter.call(request)
    assert isinstance(reply, ModelResponse), reply
    return reply


def test_tools_are_offered_in_the_wires_function_shape(provider, kind):
    replied(connect(provider, kind, stream=False), asking())
    (body,) = provider.request_log
    offered = [
        {
            "type": "function",
            "function": {"name": spec.name, "description": spec.description, "parameters": spec.parameters},
        }
        for spec in TOOLS
    ]
    assert body["tools"] == offered  # DeepSeek's too: no adapter adds a tool of its own


def test_a_single_call_is_read_with_its_id_name_and_arguments(provider, kind, stream):
    reply = replied(connect(provider, kind, stream=stream), asking())
    (call,) = reply.tool_calls
    assert call.id.startswith("call_") and call.name == "look" and call.arguments == {"at": "door"}
    assert reply.stop_reason == "tool_calls"
    (answer,) = ITEMS.reply_items(reply)
    (kept,) = answer["tool_calls"]
    assert kept["id"] == call.id and kept["function"] == {"name": "look", "arguments": '{"at": "door"}'}


def test_several_calls_in_one_reply_are_read_in_the_order_made(provider, kind, stream):
    reply = replied(connect(provider, kind, stream=stream), asking(text=TWO_CALLS))
    assert [(call.name, dict(call.arguments)) for call in reply.tool_calls] == [
        ("note", {"n": 2}),
        ("look", {"at": "wall"}),
    ]
    assert len({call.id for call in reply.tool_calls}) == 2
    (answer,) = ITEMS.reply_items(reply)
    assert [kept["id"] for kept in answer["tool_calls"]] == [call.id for call in reply.tool_calls]


def test_a_reasoning_server_keeps_its_reasoning_beside_the_calls(provider, kind, stream):
    reply = replied(connect(provider, kind, stream=stream), asking())
    (answer,) = ITEMS.reply_items(reply)
    aliases = {"openai": (), "open_weight": ("reasoning_content", "reasoning"), "deepseek": ("reasoning_content",)}
    assert tuple(name for name in ("reasoning_content", "reasoning") if name in answer) == aliases[kind]
    assert all(answer[name] == reply.reasoning_summary for name in aliases[kind])


def answered(reply: ModelResponse, *, error: bool = False) -> list[Any]:
    results = [
        ToolResult(call.id, call.name, f"{call.name} saw {dict(call.arguments)}", is_error=error)
        for call in reply.tool_calls
    ]
    return ITEMS.tool_result_items(results)


def test_results_laid_out_by_tool_result_items_are_accepted_and_the_conversation_goes_on(provider, kind, stream):
    adapter = connect(provider, kind, stream=stream)
    first = asking(text=TWO_CALLS)
    reply = replied(adapter, first)
    turn = [*first.items, *ITEMS.reply_items(reply), *answered(reply)]
    later = replied(adapter, ModelRequest(SYSTEM, tuple(turn), tools=TOOLS))
    assert later.tool_calls == () and later.text  # the model answers: the results were taken
    sent = provider.request_log[-1]["messages"][1:]
    assert sent == turn  # the calls replayed exactly as returned, each result after them in the calls' order
    assert [message["tool_call_id"] for message in sent[2:]] == [call.id for call in reply.tool_calls]


def test_an_error_result_is_carried_in_the_text_behind_the_error_prefix(provider, kind):
    adapter = connect(provider, kind, stream=False)
    reply = replied(adapter, asking())
    (result,) = answered(reply, error=True)
    assert result == {
        "role": "tool",
        "tool_call_id": reply.tool_calls[0].id,
        "content": f"{ERROR_RESULT_PREFIX}look saw {{'at': 'door'}}",
    }
    replied(adapter, ModelRequest(SYSTEM, (*asking().items, *ITEMS.reply_items(reply), result), tools=TOOLS))


def refused(adapter: ChatCompletionsAdapter, items: list[Any]) -> ProviderError:
    outcome = adapter.call(ModelRequest(SYSTEM, tuple(items), tools=TOOLS))
    assert isinstance(outcome, ProviderError), outcome
    return outcome


@pytest.mark.parametrize("broken", ["orphan", "unanswered", "duplicate"])
def test_a_broken_pairing_is_refused_with_openais_400_and_classified_fatal(provider, kind, stream, broken):
    adapter = connect(provider, kind, stream=stream)
    opening = asking()
    reply = replied(adapter, opening)
    calls, results = ITEMS.reply_items(reply), answered(reply)
    orphan = ITEMS.tool_result_items([ToolResult("call_never_made", "look", "nothing")])
    items = {
        "orphan": [*opening.items, *orphan],
        "unanswered": [*opening.items, *calls, *ITEMS.user_items(["what next?"])],
        "duplicate": [*opening.items, *calls, *results, *results],
    }[broken]
    error = refused(adapter, items)
    assert error.kind is ErrorKind.FATAL
    assert error.diagnostics["status"] == 400 and error.diagnostics["error_type"] == "invalid_request_error"
    assert error.diagnostics["code"] is None


def test_a_request_without_tools_is_byte_identical_to_before(provider, kind, stream):
    adapter = connect(provider, kind, stream=stream)
    sent: list[bytes] = []
    post = adapter.client.post

    def spy(path: str, **options: Any) -> Any:
        sent.append(options["content"])
        return post(path, **options)

    adapter.client.post = spy  # type: ignore[method-assign]
    replied(adapter, ModelRequest(SYSTEM, tuple(ITEMS.user_items(["hello"]))))
    model, cap = {"openai": ("local-policy-1", "max_completion_tokens")}.get(
        kind, (ADAPTERS[kind][1].model, "max_tokens")
    )
    before = {
        "model": model,
        "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "hello"}],
        cap: 256,
        **({"stream": True, "stream_options": {"include_usage": True}} if stream else {}),
    }
    assert sent == [json.dumps(before, separators=(",", ":")).encode()]


class Chunks(list[Any]):
    """Raw stream chunks, as the SDK's Stream gives them to the adapter (a context manager)."""

    def __enter__(self) -> Chunks:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def read_raw(adapter: ChatCompletionsAdapter, raw: Any, *, stream: bool) -> ModelResponse | ProviderError:
    def read(seen: UsageSeen) -> ModelResponse | ProviderError:
        return adapter._collect_stream(Chunks(raw), seen) if stream else adapter._normalize(raw, seen)

    return never_raising(read, adapter.classify, openai.APIError)


@pytest.mark.parametrize("arguments", ['["door"]', '"door"', "{not json", "null"])
def test_a_call_whose_arguments_are_not_a_json_object_is_a_malformed_reply(kind, stream, arguments):
    adapter_class, settings = ADAPTERS[kind]
    adapter = adapter_class(None, settings)  # type: ignore[arg-type]
    call = {"id": "call_1", "type": "function", "function": {"name": "look", "arguments": arguments}}
    usage = {"prompt_tokens": 9, "completion_tokens": 3}
    if stream:
        raw: Any = [
            {"id": "c", "choices": [{"delta": {"tool_calls": [{"index": 0, **call}]}, "finish_reason": None}]},
            {"id": "c", "choices": [{"delta": {}, "finish_reason": "tool_calls"}], "usage": usage},
        ]
    else:
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        raw = {"id": "c", "choices": [{"message": message, "finish_reason": "tool_calls"}], "usage": usage}
    error = read_raw(adapter, raw, stream=stream)
    assert isinstance(error, ProviderError) and error.kind is ErrorKind.TRANSIENT
    assert error.diagnostics == {"error_class": "MalformedReply", "cause": "ToolArgumentsNotObject"}
    assert error.usage.input_tokens == 9


def test_a_recorded_deepseek_reply_with_two_calls_is_read_in_order_and_kept_as_returned():
    first, second, third = interactions(DEEPSEEK_TOOLS)
    adapter = DeepSeekChatAdapter(None, ADAPTERS["deepseek"][1])  # type: ignore[arg-type]
    recorded = second["response"]["parsed_body"]
    reply = read_raw(adapter, recorded, stream=False)
    assert isinstance(reply, ModelResponse)
    message = recorded["choices"][0]["message"]
    assert reply.tool_calls == tuple(
        ToolCall(call["id"], call["function"]["name"], {}) for call in message["tool_calls"]
    ) and [call.name for call in reply.tool_calls] == ["get_player_name", "roll_dice"]
    (answer,) = ITEMS.reply_items(reply)  # no call of the action tool: the adapter answers none itself
    (replayed,) = [
        sent
        for sent in third["request"]["parsed_body"]["messages"]
        if sent.get("tool_calls") and sent["tool_calls"][0]["id"] == message["tool_calls"][0]["id"]
    ]
    assert "index" in message["tool_calls"][0]  # the reply's calls say their position ...
    assert answer["tool_calls"] == replayed["tool_calls"]  # ... which a request's calls, as recorded, do not
    assert answer["reasoning_content"] == message["reasoning_content"]
    results = [ToolResult(call.id, call.name, text) for call, text in zip(reply.tool_calls, ["Anne", "4"], strict=True)]
    assert ITEMS.tool_result_items(results) == third["request"]["parsed_body"]["messages"][8:10]
