"""Every transcript finds the tool results its items hold and rewrites one result's text, for the
stale tool-result offload (strategies/offload.py): on items its own adapter wrote in a real exchange
with the local provider through the real SDK (calls, results, one failed, over two rounds), and on
the recorded real traffic (../shared/recorded) where it holds a tool exchange.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from turnstate.adapters.anthropic_messages import MessagesAdapter, MessagesItems
from turnstate.adapters.chat_completions import ERROR_RESULT_PREFIX, ChatCompletionsAdapter, ChatMessages
from turnstate.adapters.contract import (
    Endpoint,
    Item,
    ModelRequest,
    ModelResponse,
    NoSuchToolResult,
    RequestSettings,
    ToolCall,
    ToolResult,
    ToolResultAt,
    ToolSpec,
    Transcript,
)
from turnstate.adapters.gemini_interactions import InteractionsAdapter
from turnstate.adapters.open_source_chat import OpenSourceChatAdapter
from turnstate.adapters.responses import ERROR_PREFIX, ResponsesAdapter, ResponsesItems
from turnstate.adapters.xai_responses import XaiResponsesAdapter
from turnstate.local_provider.server import LocalProvider

from ..recorded import interactions
from .test_responses import CONTINUOUS

SYSTEM = "You answer with tools when asked."
TOOLS = (
    ToolSpec("look", "Look at one thing.", {"type": "object", "properties": {"at": {"type": "string"}}}),
    ToolSpec("note", "Read a note by its number.", {"type": "object", "properties": {"n": {"type": "integer"}}}),
)
FIRST_ROUND = 'call look with {"at": "door"} and call note with {"n": 2}'
SECOND_ROUND = 'call look with {"at": "wall"}'


@dataclass(frozen=True)
class Wire:
    adapter: Any  # an adapter class
    settings: RequestSettings
    error_prefix: str = ""  # how a failed call's text reads on a wire without an error flag
    opaque: tuple[str, ...] = field(default=())  # the keys of the opaque state its replies carry


WIRES = {
    "chat": Wire(ChatCompletionsAdapter, RequestSettings("local-policy-1", 256), ERROR_RESULT_PREFIX),
    "open_weight": Wire(
        OpenSourceChatAdapter,
        RequestSettings("glm-5.3-flash", 256, output_limit_param="max_tokens", options={"reasoning_field": "both"}),
        ERROR_RESULT_PREFIX,
        ("reasoning_content",),
    ),
    "responses": Wire(ResponsesAdapter, RequestSettings("local-policy-1", 256, options=CONTINUOUS), ERROR_PREFIX),
    "xai": Wire(XaiResponsesAdapter, RequestSettings("local-policy-1", 256, options=CONTINUOUS), ERROR_PREFIX),
    "anthropic": Wire(
        MessagesAdapter,
        RequestSettings("claude-sonnet-4-6", 2048, options={"thinking": {"type": "enabled", "budget_tokens": 1024}}),
    ),
    "gemini": Wire(
        InteractionsAdapter,
        RequestSettings("gemini-3.8-flash", 256, options={"generation_config": {"thinking_summaries": "auto"}}),
    ),
}


@dataclass
class Exchange:
    """A conversation a wire's adapter held with the local provider: its items, and the results laid
    out in them, in order."""

    adapter: Any
    items: list[Item]
    results: list[ToolResult]

    @property
    def transcript(self) -> Transcript:
        return self.adapter.transcript

    def ask(self, text: str) -> ModelResponse:
        self.items += self.transcript.user_items([text])
        reply = self.adapter.call(ModelRequest(SYSTEM, tuple(self.items), tools=TOOLS))
        assert isinstance(reply, ModelResponse), reply
        self.items += self.transcript.reply_items(reply)
        return reply

    def answer(self, calls: tuple[ToolCall, ...], failing: str = "") -> None:
        results = [
            ToolResult(call.id, call.name, f"{call.name} at {call.arguments} shows " + "x" * 50, call.name == failing)
            for call in calls
        ]
        self.items += self.transcript.tool_result_items(results)
        self.results += results


@pytest.fixture(params=sorted(WIRES))
def wire(request) -> str:
    return str(request.param)


@pytest.fixture
def exchange(wire) -> Iterator[Exchange]:
    """Two rounds: a reply calling look and note (note fails), then one calling look again."""
    with LocalProvider() as provider:
        spec = WIRES[wire]
        endpoint = Endpoint(provider.base_url, "test-key", is_local=True, timeout_seconds=10.0)
        held = Exchange(spec.adapter.connect(endpoint, spec.settings), [], [])
        held.answer(held.ask(FIRST_ROUND).tool_calls, failing="note")
        held.answer(held.ask(SECOND_ROUND).tool_calls)
        yield held


def test_every_tool_result_is_found_in_order_with_its_tools_name_its_text_and_its_error(wire, exchange):
    found = exchange.transcript.tool_results(exchange.items)
    prefix = WIRES[wire].error_prefix
    assert [(result.call_id, result.name, result.text, result.is_error) for result in found] == [
        (result.call_id, result.name, prefix + result.content if result.is_error else result.content, result.is_error)
        for result in exchange.results
    ]
    assert [result.name for result in found] == ["look", "note", "look"]
    for result in found:  # each index is the item that holds the result (an Anthropic message may hold two)
        alone = exchange.transcript.tool_results([exchange.items[result.index]])
        assert result.call_id in [held.call_id for held in alone]


def test_a_rewritten_result_is_a_new_item_that_changes_that_result_alone_and_the_provider_accepts_it(wire, exchange):
    transcript = exchange.transcript
    before = copy.deepcopy(exchange.items)
    first = transcript.tool_results(exchange.items)[0]
    held = exchange.items[first.index]
    rewritten = transcript.with_tool_result_text(held, first.call_id, "[the look result, elsewhere]")
    assert exchange.items == before  # nothing given was changed
    items = [*exchange.items[: first.index], rewritten, *exchange.items[first.index + 1 :]]
    assert transcript.tool_results(items) == [
        ToolResultAt(first.index, first.call_id, "look", "[the look result, elsewhere]", False),
        *transcript.tool_results(exchange.items)[1:],
    ]
    assert transcript.with_tool_result_text(rewritten, first.call_id, first.text) == held  # only that content
    adapter = exchange.adapter
    reply = adapter.call(ModelRequest(SYSTEM, (*items, *transcript.user_items(["What now?"])), tools=TOOLS))
    assert isinstance(reply, ModelResponse), reply


def test_an_item_that_holds_no_result_of_the_call_is_refused_and_opaque_state_is_never_read(wire, exchange):
    transcript = exchange.transcript
    holding = {result.index for result in transcript.tool_results(exchange.items)}
    call_id = exchange.results[0].call_id
    for index, item in enumerate(exchange.items):
        if index not in holding:  # a user input, a reply with its calls and any reasoning
            with pytest.raises(NoSuchToolResult, match=call_id):
                transcript.with_tool_result_text(item, call_id, "x")
    with pytest.raises(NoSuchToolResult):
        transcript.with_tool_result_text(exchange.items[max(holding)], "call_unknown", "x")
    opaque = [item for item in exchange.items if _holds_opaque(item)]
    assert opaque or wire == "chat"  # every other wire's replies carry some
    assert transcript.tool_results(opaque) == []


def _holds_opaque(value: object) -> bool:
    """Whether a native item holds opaque provider state (a signature, encrypted content) or reasoning."""
    keys = {"signature", "encrypted_content", "reasoning_content", "thinking"}
    if isinstance(value, dict):
        return any(key in keys for key in value) or any(_holds_opaque(inner) for inner in value.values())
    return isinstance(value, list) and any(_holds_opaque(inner) for inner in value)


def test_an_anthropic_message_with_several_results_has_only_the_one_answering_the_call_rewritten():
    transcript = MessagesItems()
    (message,) = transcript.tool_result_items(
        [ToolResult("toolu_1", "look", "first"), ToolResult("toolu_2", "look", "second", is_error=True)]
    )
    rewritten = transcript.with_tool_result_text(message, "toolu_2", "short")
    assert rewritten["content"][0] is message["content"][0]
    assert rewritten["content"][1] == {
        "type": "tool_result",
        "tool_use_id": "toolu_2",
        "content": "short",
        "is_error": True,
    }
    assert message["content"][1]["content"] == "second"


PARTS = [{"type": "text", "text": "part one, "}, {"type": "text", "text": "part two"}]


@pytest.mark.parametrize(
    "transcript, item, text",
    [
        (ChatMessages(), {"role": "tool", "tool_call_id": "call_1", "content": PARTS}, "part one, part two"),
        (
            MessagesItems(),
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": PARTS}]},
            "part one, part two",
        ),
        (
            ResponsesItems(),
            {
                "type": "function_call_output",
                "call_id": "call_1",
                "output": [{**p, "type": "input_text"} for p in PARTS],
            },
            "part one, part two",
        ),
        (
            InteractionsAdapter.transcript,
            {"type": "function_result", "call_id": "call_1", "name": "look", "result": PARTS},
            "part one, \npart two",
        ),
    ],
    ids=["chat", "anthropic", "responses", "gemini"],
)
def test_a_result_whose_content_is_text_parts_reads_as_their_text_and_is_rewritten_as_a_string(transcript, item, text):
    (found,) = transcript.tool_results([item])
    assert found.text == text
    (rewritten,) = transcript.tool_results([transcript.with_tool_result_text(item, "call_1", "whole")])
    assert rewritten.text == "whole"


def test_the_recorded_deepseek_exchange_names_each_result_by_its_call():
    last = interactions("test_deepseek/test_deepseek_deferred_capability_with_thinking.yaml")[-1]
    items = [message for message in last["request"]["parsed_body"]["messages"] if message["role"] != "system"]
    found = ChatMessages().tool_results(items)
    assert [result.name for result in found] == ["load_capability", "search_tools", "get_player_name", "roll_dice"]
    assert [result.text for result in found] == [items[result.index]["content"] for result in found]
    assert not any(result.is_error for result in found)


def test_the_recorded_anthropic_exchange_reads_its_result_and_its_explicit_error_flag():
    second = interactions("test_anthropic/test_anthropic_tool_with_thinking.yaml")[1]
    items = second["request"]["parsed_body"]["messages"]
    (found,) = MessagesItems().tool_results(items)
    (call,) = [block for block in items[1]["content"] if block["type"] == "tool_use"]
    (block,) = items[2]["content"]
    assert block["is_error"] is False  # spelled out on the wire
    assert found == ToolResultAt(2, call["id"], call["name"], block["content"], False)


def test_the_recorded_responses_exchange_names_its_result_by_the_function_call_past_the_reasoning():
    second = interactions("test_openai_responses/test_openai_responses_thinking_with_tool_calls.yaml")[1]
    items = second["request"]["parsed_body"]["input"]
    assert [item.get("type", "message") for item in items] == [
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
    ]
    (found,) = ResponsesItems().tool_results(items)
    assert found == ToolResultAt(3, items[2]["call_id"], items[2]["name"], items[3]["output"], False)
