"""A Responses-like transcript for strategy tests: what the machines carry without knowing its shape.

An input becomes one item; a reply's native items are an opaque reasoning item, the message, and a
compaction item when the provider compacted. Nothing here talks to a provider.
"""

from __future__ import annotations

from collections.abc import Sequence

from turnstate.adapters.contract import Item, ModelResponse, ToolCall, ToolResult, ToolResultAt, Usage


class NativeItems:
    def user_items(self, inputs: Sequence[str]) -> list[Item]:
        return [{"type": "input", "text": text} for text in inputs]

    def reply_items(self, response: ModelResponse) -> list[Item]:
        return [dict(item) for item in response.native_items]

    def projected_reply_items(self, text: str, tool_calls: Sequence[ToolCall]) -> list[Item]:
        """The reply's message and calls as `native_reply` lays them out, without its sealed reasoning."""
        message = [{"type": "message", "text": text}] if text else []
        return [*message, *({"type": "tool_call", "call_id": call.id, "text": call.name} for call in tool_calls)]

    def tool_result_items(self, results: Sequence[ToolResult]) -> list[Item]:
        return [{"type": "tool_result", "call_id": result.call_id, "text": result.content} for result in results]

    def tool_results(self, items: Sequence[Item]) -> list[ToolResultAt]:
        names = {item["call_id"]: item["text"] for item in items if item["type"] == "tool_call"}
        return [
            ToolResultAt(index, item["call_id"], names.get(item["call_id"], ""), item["text"], False)
            for index, item in enumerate(items)
            if item["type"] == "tool_result"
        ]

    def with_tool_result_text(self, item: Item, call_id: str, text: str) -> Item:
        return {**item, "text": text}

    def estimate_tokens(self, items: Sequence[Item], system: str = "") -> int:
        return len(system) // 4 + sum(4 + len(str(item.get("text", ""))) // 4 for item in items)

    def readable(self, items: Sequence[Item]) -> list[dict[str, str]]:
        return [{"role": str(item["type"]), "content": str(item.get("text", ""))} for item in items]

    def latest_compaction(self, items: Sequence[Item]) -> int | None:
        found = [index for index, item in enumerate(items) if item["type"] == "compaction"]
        return found[-1] if found else None


def native_reply(
    text: str, *, compacted: bool = False, response_id: str | None = "resp_1", calls: Sequence[ToolCall] = ()
) -> ModelResponse:
    """A reply as a Responses-like adapter normalizes it: sealed reasoning, maybe a compaction, the
    message, then any tool calls it made."""
    items: list[Item] = [
        {"type": "reasoning", "encrypted_content": f"sealed({text})"},
        {"type": "message", "text": text},
        *({"type": "tool_call", "call_id": call.id, "text": call.name} for call in calls),
    ]
    if compacted:  # after the message, as OpenAI's inline compaction answers
        items.append({"type": "compaction", "encrypted_content": f"summary-through({text})"})
    return ModelResponse(
        text=text,
        usage=Usage(10, 0, 3),
        stop_reason="completed",
        response_id=response_id,
        native_items=tuple(items),
        tool_calls=tuple(calls),
    )
