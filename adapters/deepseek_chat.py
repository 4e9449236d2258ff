"""deepseek.chat_completions.v1: DeepSeek's thinking mode over Chat Completions, acting through a tool.

A leaf action, Chat Completions through the openai SDK (adapters/chat_completions.py). Every request
offers one adapter-owned tool, `submit_action`, and a reply carries an action only as exactly one
call of it (the runner requires that; a text ACTION line does not count). DeepSeek's thinking mode
wants the reasoning of a turn that called a tool back with it, so an accepted turn keeps, exactly as
returned, the assistant message with its `reasoning_content` and tool call, then the tool result the
adapter answers the call with: every turn is whole, so a harness summary or an overflow recovery
never separates a call from its result. The observations that follow arrive as user messages and
stay outside summaries until they are answered. Harness summaries can continue from it. A request's
own function tools are offered before `submit_action`; their calls are the reply's `tool_calls`,
kept on the answer beside its `reasoning_content` and answered by the harness, not by the adapter.

On the embedded local provider it speaks to the DeepSeek-like server at `/deepseek/v1`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar

from turnstate.adapters import openai_sdk
from turnstate.adapters.chat_completions import ChatCompletionsAdapter
from turnstate.adapters.contract import (
    Endpoint,
    Item,
    ModelRequest,
    OptionProblem,
    RequestSettings,
    SummaryCompaction,
)

LOCAL_PREFIX = "/deepseek/v1"
ACTION_TOOL_NAME = "submit_action"
ACTION_TOOL: Mapping[str, Any] = {
    "type": "function",
    "function": {
        "name": ACTION_TOOL_NAME,
        "description": "Submit the one action to take now, named as the instructions list it.",
        "parameters": {
            "type": "object",
            "properties": {"action": {"type": "string", "description": "the action's name, e.g. ACTION1"}},
            "required": ["action"],
        },
    },
}
TOOL_RESULT = "Submitted. The next observation follows."
OWNED_OPTIONS = ("tools", "tool_choice", "parallel_tool_calls")


class DeepSeekChatAdapter(ChatCompletionsAdapter):
    summary_compaction: ClassVar[SummaryCompaction | None] = SummaryCompaction()
    reasoning_aliases = ("reasoning_content",)
    action_tool: ClassVar[str | None] = ACTION_TOOL_NAME

    @classmethod
    def connect(cls, endpoint: Endpoint, settings: RequestSettings) -> DeepSeekChatAdapter:
        return cls(openai_sdk.client_for(endpoint, LOCAL_PREFIX), settings)

    @classmethod
    def check_options(cls, options: Mapping[str, Any], strategy: str, compaction: str) -> list[OptionProblem]:
        return [
            OptionProblem(
                key,
                "the adapter owns the request's one tool"
                if key in OWNED_OPTIONS
                else "DeepSeek takes no request.options",
                "remove it",
            )
            for key in options
        ]

    def build_request(self, request: ModelRequest) -> dict[str, Any]:
        """The request's own tools, if any, then the action tool."""
        body = super().build_request(request)
        return {**body, "tools": [*body.get("tools", []), dict(ACTION_TOOL)]}

    def _reply_items(self, answer: dict[str, Any], calls: list[dict[str, Any]]) -> tuple[Item, ...]:
        """The answer with its reasoning and tool calls, then the adapter's result for each call of
        the action tool; a call of a request's tool is left for the harness's ToolResult, which
        follows (ModelResponse.tool_calls holds those calls alone)."""
        own = [call for call in calls if call["function"]["name"] == ACTION_TOOL_NAME]
        results = [{"role": "tool", "tool_call_id": call.get("id", ""), "content": TOOL_RESULT} for call in own]
        return (*super()._reply_items(answer, calls), *results)

    def _tool_actions(self, calls: list[dict[str, Any]]) -> tuple[str, ...]:
        """The action each call of the action tool names; a call of another tool, or one whose
        arguments are not an object naming an action, names none (so the reply carries no action)."""
        actions = []
        for call in calls:
            function = call.get("function") or {}
            try:
                arguments = json.loads(function.get("arguments") or "")
            except ValueError:
                arguments = None
            if function.get("name") == ACTION_TOOL_NAME and isinstance(arguments, dict):
                action = arguments.get("action")
                actions.append(action if isinstance(action, str) else "")
            else:
                actions.append("")
        return tuple(actions)
