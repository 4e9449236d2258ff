"""Every adapter's projected replies (`Transcript.projected_reply_items`): a past reply known only by
its text and calls, laid out as its wire takes an assistant turn, with no opaque field.

A conversation rebuilt from a projection (the opening input, the projected reply, the results of its
calls, the next input) goes through the adapter's real SDK to the local provider and is answered, for
a reply of text and a reply of calls, both for the provider's own reply (a resume without the
continuation) and for a reply another model wrote (a model switch). The local model calls what the
input asks ("call TOOL with ARGS", policy.asked_calls). The local provider refuses no projection the
real service takes: each wire module's docstring says, with its evidence, what its rules refuse.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from turnstate.adapters.anthropic_messages import MessagesAdapter
from turnstate.adapters.contract import (
    Endpoint,
    ErrorKind,
    Item,
    ModelRequest,
    ModelResponse,
    ProviderError,
    RequestSettings,
    ToolCall,
    ToolResult,
    ToolSpec,
)
from turnstate.adapters.registry import ADAPTERS
from turnstate.local_provider.server import LocalProvider

from ..recorded import interactions

SYSTEM = "You help, and call a tool when asked to."
LOOK = ToolSpec("look", "Look at one thing.", {"type": "object", "properties": {"at": {"type": "string"}}})
TOOLS = (LOOK,)
ASK = {"text": "What do you see?", "calls": 'call look with {"at": "door"}'}
NEXT = "What now?"
ELSEWHERE: Mapping[str, tuple[str, tuple[ToolCall, ...]]] = {  # replies another model wrote
    "text": ("The door is to the north.", ()),
    "calls": ("", (ToolCall("toolu_elsewhere_1", "look", {"at": "door"}),)),
}
CONTINUOUS_RESPONSES = {"store": False, "include": ["reasoning.encrypted_content"]}
SETTINGS: Mapping[str, RequestSettings] = {
    "openai.chat_completions.v1": RequestSettings("local-policy-1", 256),
    "openai.responses.v1": RequestSettings("local-policy-1", 256, options=CONTINUOUS_RESPONSES),
    "xai.responses.v1": RequestSettings("local-policy-1", 256, options=CONTINUOUS_RESPONSES),
    "anthropic.messages.v1": RequestSettings("claude-sonnet-4-6", 2048),
    "google.interactions.v1": RequestSettings(
        "gemini-3.8-flash", 256, options={"generation_config": {"thinking_summaries": "auto"}}
    ),
    "deepseek.chat_completions.v1": RequestSettings("deepseek-reasoner", 256, output_limit_param="max_tokens"),
    "open_source.chat_completions.v1": RequestSettings(
        "glm-5.3-flash", 256, output_limit_param="max_tokens", options={"reasoning_field": "both"}
    ),
}
THINKING = {"thinking": {"type": "enabled", "budget_tokens": 1024}}
OPAQUE_KEYS = frozenset({"encrypted_content", "signature", "data", "thinking", "summary", "status", "phase"})
OPAQUE_TYPES = frozenset({"reasoning", "thinking", "redacted_thinking", "thought", "compaction"})


def cases() -> list[Any]:
    return [
        pytest.param(adapter_id, shape, source, id=f"{adapter_id}-{shape}-{source}")
        for adapter_id in sorted(ADAPTERS)
        for shape in ("text", "calls")
        for source in ("own", "elsewhere")
    ]


def connect(provider: LocalProvider, adapter_id: str, options: Mapping[str, Any] | None = None) -> Any:
    settings = SETTINGS[adapter_id]
    if options is not None:
        settings = RequestSettings(
            settings.model, settings.max_output_tokens, output_limit_param=settings.output_limit_param, options=options
        )
    endpoint = Endpoint(provider.base_url, "test-key", is_local=True, timeout_seconds=10.0)
    return ADAPTERS[adapter_id].load().connect(endpoint, settings)


def replied(adapter: Any, items: Sequence[Item]) -> ModelResponse:
    reply = adapter.call(ModelRequest(SYSTEM, tuple(items), tools=TOOLS))
    assert isinstance(reply, ModelResponse), reply
    return reply


def rebuilt(transcript: Any, shape: str, text: str, calls: Sequence[ToolCall]) -> list[Item]:
    """The conversation a resume or a switch rebuilds: the opening input, the projected reply, the
    results of its calls (when it made any), then the next input."""
    results = [ToolResult(call.id, call.name, f"{call.name} shows a red door") for call in calls]
    return [
        *transcript.user_items([ASK[shape]]),
        *transcript.projected_reply_items(text, calls),
        *(transcript.tool_result_items(results) if results else []),
        *transcript.user_items([NEXT]),
    ]


def sent_items(body: Mapping[str, Any]) -> list[Any]:
    """A request body's conversation as sent: Responses' and Interactions' input, the chat wires' messages."""
    return list(body.get("input") or body["messages"])


@pytest.mark.parametrize(("adapter_id", "shape", "source"), cases())
def test_a_conversation_rebuilt_from_a_projected_reply_is_sent_as_laid_out_and_answered(adapter_id, shape, source):
    with LocalProvider() as provider:
        adapter = connect(provider, adapter_id)
        transcript = type(adapter).transcript
        if source == "own":
            own = replied(adapter, transcript.user_items([ASK[shape]]))
            text, calls = own.text, own.tool_calls
            assert bool(calls) == (shape == "calls") and (bool(text) or shape == "calls")
        else:
            text, calls = ELSEWHERE[shape]
        items = rebuilt(transcript, shape, text, calls)
        outcome = adapter.call(ModelRequest(SYSTEM, tuple(items), tools=TOOLS))
        assert isinstance(outcome, ModelResponse), outcome
        sent = sent_items(provider.request_log[-1])
    assert all(item in sent for item in transcript.projected_reply_items(text, calls))


def opaque_parts(value: Any, call_ids: set[str], path: str = "") -> list[str]:
    """Where `value` holds an opaque field, an opaque item or block, or an id that is no call's."""
    found = []
    if isinstance(value, Mapping):
        for key, inner in value.items():
            at = f"{path}.{key}"
            if key in OPAQUE_KEYS or key in ("id", "call_id") and inner not in call_ids:
                found.append(at)
            if key == "type" and inner in OPAQUE_TYPES:
                found.append(f"{at}={inner}")
            if key in ("reasoning_content", "reasoning") and inner != "":
                found.append(at)  # a projection knows no reasoning: at most an empty one
            found += opaque_parts(inner, call_ids, at)
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            found += opaque_parts(inner, call_ids, f"{path}[{index}]")
    return found


CALLS = (ToolCall("call_a", "look", {"at": "door"}), ToolCall("call_b", "look", {"at": "wall", "near": True}))


@pytest.mark.parametrize("adapter_id", sorted(ADAPTERS))
def test_projected_items_hold_no_opaque_field_and_no_id_but_the_calls(adapter_id):
    transcript = ADAPTERS[adapter_id].load().transcript
    for text, calls in (("I look.", CALLS), ("", CALLS), ("Done.", ())):
        items = transcript.projected_reply_items(text, calls)
        assert items and opaque_parts(items, {call.id for call in calls}) == []
        assert json.loads(json.dumps(items)) == items  # plain JSON, as a checkpoint stores it


@pytest.mark.parametrize("adapter_id", sorted(ADAPTERS))
def test_a_projection_with_neither_text_nor_calls_is_no_items(adapter_id):
    assert ADAPTERS[adapter_id].load().transcript.projected_reply_items("", ()) == []


@pytest.mark.parametrize("adapter_id", sorted(ADAPTERS))
def test_the_transcript_reads_projected_items_as_it_reads_live_ones(adapter_id):
    transcript = ADAPTERS[adapter_id].load().transcript
    projected = transcript.projected_reply_items("I look twice.", CALLS)
    results = transcript.tool_result_items([ToolResult(call.id, call.name, f"saw {call.arguments}") for call in CALLS])
    items = [*transcript.user_items(["Look."]), *projected, *results]
    assert [(found.call_id, found.name) for found in transcript.tool_results(items)] == [
        ("call_a", "look"),
        ("call_b", "look"),
    ]
    shown = " ".join(entry["content"] for entry in transcript.readable(projected))
    assert "I look twice." in shown and "look" in shown and "wall" in shown
    assert transcript.estimate_tokens(projected) == sum(transcript.estimate_tokens([item]) for item in projected) > 0
    assert transcript.latest_compaction(items) is None


def test_deepseeks_projected_call_has_the_shape_of_the_client_made_call_the_real_api_served():
    recorded = interactions("test_deepseek/test_deepseek_deferred_capability_with_thinking.yaml")[1]
    assert recorded["response"]["status"]["code"] == 200
    (client_made,) = [
        message for message in recorded["request"]["parsed_body"]["messages"] if message.get("content", "") is None
    ]
    (call,) = client_made["tool_calls"]
    arguments = json.loads(call["function"]["arguments"])
    transcript = ADAPTERS["deepseek.chat_completions.v1"].load().transcript
    (projected,) = transcript.projected_reply_items("", [ToolCall(call["id"], call["function"]["name"], arguments)])
    assert projected["content"] is None and projected["reasoning_content"] == client_made["reasoning_content"] == ""
    assert sorted(projected) == sorted(client_made)


def test_a_projected_responses_text_has_the_shape_of_the_id_less_assistant_message_the_real_api_served():
    recorded = interactions("test_openai_responses/test_openai_responses_thinking_with_modified_history.yaml")[2]
    assert recorded["response"]["status"]["code"] == 200
    served = [item for item in recorded["request"]["parsed_body"]["input"] if item.get("role") == "assistant"]
    transcript = ADAPTERS["openai.responses.v1"].load().transcript
    (projected,) = transcript.projected_reply_items(served[-1]["content"], ())
    assert projected == served[-1]


def test_with_thinking_on_a_projected_text_reply_before_a_new_user_turn_is_answered():
    recorded = interactions("test_anthropic/test_anthropic_model_thinking_part_from_other_model.yaml")[1]
    served = recorded["request"]["parsed_body"]["messages"][1]  # another model's reply, thinking on, 200
    assert served["role"] == "assistant" and {block["type"] for block in served["content"]} == {"text"}
    with LocalProvider() as provider:
        adapter = connect(provider, "anthropic.messages.v1", THINKING)
        own = replied(adapter, MessagesAdapter.transcript.user_items([ASK["text"]]))
        assert own.native_items[0]["content"][0]["type"] == "thinking"  # what the projection leaves out
        replied(adapter, rebuilt(MessagesAdapter.transcript, "text", own.text, ()))


def test_with_thinking_on_a_projected_reply_with_calls_cannot_end_an_open_tool_loop_but_can_once_closed():
    transcript = MessagesAdapter.transcript
    with LocalProvider() as provider:
        adapter = connect(provider, "anthropic.messages.v1", THINKING)
        own = replied(adapter, transcript.user_items([ASK["calls"]]))
        open_loop = rebuilt(transcript, "calls", own.text, own.tool_calls)
        refused = adapter.call(ModelRequest(SYSTEM, tuple(open_loop), tools=TOOLS))
        assert isinstance(refused, ProviderError) and refused.kind is ErrorKind.FATAL
        closed = [*open_loop[:-1], *transcript.projected_reply_items("The door is red.", ()), open_loop[-1]]
        replied(adapter, closed)
