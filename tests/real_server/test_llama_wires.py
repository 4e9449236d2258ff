"""The adapters over the real server's three wires, through the recording proxy: function tools (a
call, its result by id), Anthropic thinking blocks with the server's empty signatures replayed
verbatim, and the server's context-overflow refusal read as an overflow.

The 135M model does not start a tool call of its own (tools/llama_server.py): each tool request ends
with the assistant prefill `<tool_call>` and asks for a call, which the server then parses."""

from __future__ import annotations

from typing import Any

import pytest

from tests.real_server.conftest import KEY, RecordingProxy
from turnstate.adapters.anthropic_messages import MessagesAdapter
from turnstate.adapters.chat_completions import ChatCompletionsAdapter
from turnstate.adapters.contract import (
    Endpoint,
    ErrorKind,
    ModelRequest,
    ModelResponse,
    RequestSettings,
    ToolResult,
    ToolSpec,
)
from turnstate.adapters.responses import ResponsesAdapter

LOOK = ToolSpec(
    "look",
    "Look at one cell of the grid and say what is there.",
    {"type": "object", "properties": {"cell": {"type": "string"}}, "required": ["cell"], "additionalProperties": False},
)
PREFILL = "<tool_call>\n"
# Each wire's adapter, where its API root is, and the settings that ask the server for exactly one call.
WIRES: dict[str, tuple[Any, str, dict[str, Any], dict[str, Any]]] = {
    "chat": (ChatCompletionsAdapter, "/v1", {}, {"tool_choice": "required", "stop": ["</tool_call>"]}),
    "responses": (ResponsesAdapter, "/v1", {}, {"tool_choice": "required", "stop": ["</tool_call>"]}),
    "messages": (MessagesAdapter, "", {"stop_sequences": ["</tool_call>"]}, {"tool_choice": {"type": "any"}}),
}


def connected(wire: str, proxy: RecordingProxy, max_output_tokens: int = 64, **settings: Any) -> Any:
    adapter, root, options, extra_body = WIRES[wire]
    endpoint = Endpoint(proxy.base_url + root, KEY, is_local=False, timeout_seconds=120)
    defaults: dict[str, Any] = {"options": options, "extra_body": extra_body, "output_limit_param": "max_tokens"}
    return adapter.connect(endpoint, RequestSettings("smollm2-135m", max_output_tokens, **(defaults | settings)))


def prefill(adapter: Any) -> dict[str, Any]:
    """The assistant prefill as the wire's input item (a trailing assistant message is continued)."""
    if isinstance(adapter, ResponsesAdapter):
        return {"type": "message", "role": "assistant", "content": PREFILL}
    return {"role": "assistant", "content": PREFILL}


@pytest.mark.parametrize("wire", list(WIRES))
def test_a_tool_call_and_its_result_by_id_travel_over_each_wire(wire, proxy):
    adapter = connected(wire, proxy)
    opening = adapter.transcript.user_items(["Look at cell B2, then act."])
    first = adapter.call(ModelRequest("You play a grid game.", (*opening, prefill(adapter)), tools=(LOOK,)))
    assert isinstance(first, ModelResponse), first
    (call,) = first.tool_calls
    assert call.name == "look" and call.id
    answer = adapter.transcript.tool_result_items([ToolResult(call.id, call.name, "B2 holds door B.")])
    items = (*opening, *adapter.transcript.reply_items(first), *answer)
    adapter.call(ModelRequest("You play a grid game.", items, tools=(LOOK,)))  # a reply or a truncated one
    answered = proxy.model_calls()[-1]
    assert answered.status == 200  # the server took the call and its result
    assert call.id in str(answered.request)  # the result names its call's id, as the server issued it
    assert "B2 holds door B." in str(answered.request)


def test_an_anthropic_thinking_block_with_the_servers_empty_signature_is_sent_back_verbatim_and_taken(proxy):
    """llama-server writes `signature: ""` (SmolLM2 itself thinks on no wire but through a grammar, which
    this wire drops): such a block, replayed as the adapter keeps it, is taken."""
    adapter = connected("messages", proxy, 16, options={}, extra_body={})
    thought = {"type": "thinking", "thinking": "Door B is up.", "signature": ""}
    reply = {"role": "assistant", "content": [thought, {"type": "text", "text": "ACTION: ACTION1"}]}
    items = (*adapter.transcript.user_items(["Frame 1."]), reply, *adapter.transcript.user_items(["Frame 2."]))
    adapter.call(ModelRequest("You play a grid game.", items))
    (exchange,) = proxy.model_calls()
    assert exchange.status == 200
    assert exchange.request["messages"][1]["content"][0] == thought


@pytest.mark.parametrize("wire", list(WIRES))
def test_the_servers_context_overflow_is_read_as_an_overflow_on_each_wire(wire, proxy):
    adapter = connected(wire, proxy, extra_body={})
    too_long = adapter.transcript.user_items(["#.#." * 3000])  # past the server's 4096-token context
    failed = adapter.call(ModelRequest("You play a grid game.", tuple(too_long)))
    assert not isinstance(failed, ModelResponse)
    assert failed.kind is ErrorKind.CONTEXT_OVERFLOW
