"""deepseek.chat_completions.v1: DeepSeek's thinking mode over Chat Completions, acting through tools.

A leaf action, Chat Completions through the openai SDK (adapters/chat_completions.py). DeepSeek's
thinking mode wants the reasoning of a turn that called a tool back with it, so the model acts by
calling the environment's action tools (`acts_through_tools`: a profile must set `agent.action_mode:
tools`), and an accepted turn keeps, exactly as returned, the assistant message with its
`reasoning_content` and tool calls; the harness answers every call (the action's result carries the
next frame) inside the same turn, so a harness summary or an overflow recovery never separates a
call from its result. Harness summaries can continue from it.

A projected reply (a resume without the continuation, a model switch) is Chat's assistant message
with `reasoning_content: ""`: in a turn that called a tool, thinking mode refuses an assistant
message without one ("The `reasoning_content` in the thinking mode must be passed back to the
API."), the real API keeps nothing to check the string against, and the recorded request served a
client-made call as {content: null, reasoning_content: '', tool_calls} (test_deepseek_deferred_
capability_with_thinking, 200). An empty string says what the projection knows of that reasoning:
nothing. In any other turn it is ignored (the thinking-mode guide), so every projected message
carries it.

On the embedded local provider it speaks to the DeepSeek-like server at `/deepseek/v1`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from turnstate.adapters import openai_sdk
from turnstate.adapters.chat_completions import ChatCompletionsAdapter, ChatMessages
from turnstate.adapters.contract import (
    Endpoint,
    Item,
    OptionProblem,
    RequestSettings,
    SummaryCompaction,
    ToolCall,
    Transcript,
)
from turnstate.adapters.image_costs import ImageLimits

LOCAL_PREFIX = "/deepseek/v1"
NO_REASONING = ""  # what a projected reply says its reasoning was: nothing known


class DeepSeekMessages(ChatMessages):
    """The Chat Completions transcript, whose projected replies carry an empty `reasoning_content`."""

    def projected_reply_items(self, text: str, tool_calls: Sequence[ToolCall]) -> list[Item]:
        """Chat's projected assistant message with `reasoning_content: ""`: thinking mode refuses an
        assistant message without one in a turn that called a tool, and a projection cannot know
        which turn it will stand in (see the module docstring for the evidence)."""
        return [
            {**message, "reasoning_content": NO_REASONING}
            for message in super().projected_reply_items(text, tool_calls)
        ]


class DeepSeekChatAdapter(ChatCompletionsAdapter):
    transcript: ClassVar[Transcript] = DeepSeekMessages()
    summary_compaction: ClassVar[SummaryCompaction | None] = SummaryCompaction()
    acts_through_tools: ClassVar[bool] = True
    image_limits: ClassVar[ImageLimits | None] = None  # DeepSeek's chat models take text only
    reasoning_aliases = ("reasoning_content",)

    @classmethod
    def connect(cls, endpoint: Endpoint, settings: RequestSettings) -> DeepSeekChatAdapter:
        return cls(openai_sdk.client_for(endpoint, LOCAL_PREFIX), settings)

    @classmethod
    def check_options(
        cls, options: Mapping[str, Any], strategy: str, compaction: str, model: str = ""
    ) -> list[OptionProblem]:
        return [OptionProblem(key, "DeepSeek takes no request.options", "remove it") for key in options]
