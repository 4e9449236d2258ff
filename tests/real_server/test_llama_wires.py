"""The adapters over the real server's three wires, through the recording proxy: function tools (a
call, its result by id, and through a Session a rejected call that leaves nothing), Anthropic thinking blocks with the server's empty signatures replayed
verbatim, and the server's context-overflow refusal read as an overflow.

The 135M model does not start a tool call of its own (tools/llama_server.py): each tool request ends
with the assistant prefill `<tool_call>` and asks for a call, which the server then parses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.real_server.conftest import KEY, RecordingProxy
from tests.rewritten_requests import rewriting
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
from turnstate.session.profile import PROFILES_DIR, load_profile
from turnstate.session.session import Session

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


# Each wire's shipped llama profile, whose strategy a Session test drives.
PROFILES = {
    "chat": "llama-chat-manual-rolling",
    "responses": "llama-responses-continuous",
    "messages": "llama-messages-continuous",
}


def connected(
    wire: str, proxy: RecordingProxy, max_output_tokens: int = 64, adapter: Any = None, **settings: Any
) -> Any:
    wire_adapter, root, options, extra_body = WIRES[wire]
    endpoint = Endpoint(proxy.base_url + root, KEY, is_local=False, timeout_seconds=120)
    defaults: dict[str, Any] = {"options": options, "extra_body": extra_body, "output_limit_param": "max_tokens"}
    settings = defaults | settings
    return (adapter or wire_adapter).connect(endpoint, RequestSettings("smollm2-135m", max_output_tokens, **settings))


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


@pytest.mark.parametrize("wire", list(WIRES))
def test_a_tool_call_the_caller_rejects_leaves_nothing_and_an_accepted_one_is_answered_by_id(
    wire, proxy, monkeypatch, tmp_path
):
    """Through a Session on the wire's shipped profile: the rejected reply's call is in no later
    request, no result answers it, and the accepted state holds only the accepted call, whose
    result the next request carries under the id the server gave it."""
    monkeypatch.setenv("LLAMA_BASE_URL", proxy.base_url + WIRES[wire][1])
    profile = load_profile(PROFILES_DIR / f"{PROFILES[wire]}.yaml")
    # the prefill the 135M model needs to start a call, at the end of each request the Session builds
    adapter = rewriting(WIRES[wire][0], lambda wire_adapter, items: (*items, prefill(wire_adapter)))
    with Session(
        profile,
        actions=("ACTION1", "ACTION2"),
        tools=(LOOK,),
        out_dir=tmp_path,
        adapter_factory=lambda endpoint: connected(wire, proxy, adapter=adapter),
    ) as session:
        turn = session.observe("Look at cell B2 before you act.")
        assert turn.is_tool_round, turn.problem
        (rejected,) = turn.tool_calls
        turn = session.reject("not that call")
        assert turn.is_tool_round, turn.problem
        accepted = session.accept()
        (call,) = accepted.tool_calls
        assert call.id != rejected.id  # llama-server names each call anew
        session.observe(results=[ToolResult(call.id, call.name, "B2 holds door B.")])
        state = session.accepted_state.to_json()
        run_dir = session.run_dir
    first, *later = proxy.model_calls()
    assert rejected.id not in str(first.request) and "tool_calls" not in str(first.request)
    assert all(exchange.status == 200 for exchange in (first, *later))
    assert all(rejected.id not in str(exchange.request) for exchange in later)
    answered = later[-1].request
    assert call.id in str(answered) and "B2 holds door B." in str(answered)
    assert rejected.id not in str(state) and call.id in str(state)
    assert run_dir is not None
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    replies = [event for event in events if event["kind"] == "assistant_message"]
    assert [reply["status"] for reply in replies[:2]] == ["rejected", "accepted"]
    results = [event for event in events if event["kind"] == "tool_result"]
    assert [result["call_id"] for result in results] == [call.id]
    assert all(rejected.id not in path.read_text() for path in Path(run_dir).glob("step_*.json"))


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
