"""deepseek.chat_completions.v1: DeepSeek's thinking mode over Chat Completions, acting through tools.

A leaf action, Chat Completions through the openai SDK (adapters/chat_completions.py). DeepSeek's
thinking mode wants the reasoning of a turn that called a tool back with it, so the model acts by
calling the environment's action tools (`acts_through_tools`: a profile must set `agent.action_mode:
tools`), and an accepted turn keeps, exactly as returned, the assistant message with its
`reasoning_content` and tool calls; the harness answers every call (the action's result carries the
next frame) inside the same turn, so a harness summary or an overflow recovery never separates a
call from its result. Harness summaries can continue from it.

On the embedded local provider it speaks to the DeepSeek-like server at `/deepseek/v1`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from turnstate.adapters import openai_sdk
from turnstate.adapters.chat_completions import ChatCompletionsAdapter
from turnstate.adapters.contract import (
    Endpoint,
    OptionProblem,
    RequestSettings,
    SummaryCompaction,
)

LOCAL_PREFIX = "/deepseek/v1"


class DeepSeekChatAdapter(ChatCompletionsAdapter):
    summary_compaction: ClassVar[SummaryCompaction | None] = SummaryCompaction()
    acts_through_tools: ClassVar[bool] = True
    reasoning_aliases = ("reasoning_content",)

    @classmethod
    def connect(cls, endpoint: Endpoint, settings: RequestSettings) -> DeepSeekChatAdapter:
        return cls(openai_sdk.client_for(endpoint, LOCAL_PREFIX), settings)

    @classmethod
    def check_options(cls, options: Mapping[str, Any], strategy: str, compaction: str) -> list[OptionProblem]:
        return [OptionProblem(key, "DeepSeek takes no request.options", "remove it") for key in options]
