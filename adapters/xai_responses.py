"""xai.responses.v1: xAI's Responses API through the openai SDK's Responses surface.

The same wire as OpenAI Responses (adapters/responses.py: exact encrypted replay, the same
response-only fields dropped, the same reply rules), with xAI's own request rules and its own native
compaction: a separate POST /responses/compact call that the strategy makes when the accepted
history passes runtime.compaction.trigger_tokens, never OpenAI's inline context_management.
Function tools, calls and results are OpenAI's, inherited unchanged (function tools, function_call
items by call_id, function_call_output results), and so are projected replies (a short-form assistant
message and function_call items without ids); no recorded xAI tool traffic is on hand to hold them
to, so they are tested against the local provider's OpenAI wire only.
"""

from __future__ import annotations

from typing import ClassVar

from turnstate.adapters.contract import NativeCompaction, OptionProblem, SummaryCompaction
from turnstate.adapters.image_costs import XAI_IMAGE_LIMITS, ImageLimits
from turnstate.adapters.responses import ResponsesAdapter, ResponsesOptions, state_problems


class XaiResponsesAdapter(ResponsesAdapter):
    native_compaction: ClassVar[NativeCompaction | None] = "call"
    summary_compaction: ClassVar[SummaryCompaction | None] = None  # its compaction is native, by /responses/compact
    image_limits: ClassVar[ImageLimits | None] = XAI_IMAGE_LIMITS

    @classmethod
    def option_rules(cls, options: ResponsesOptions, strategy: str, compaction: str) -> list[OptionProblem]:
        """xAI's rules beside every Responses surface's: no OpenAI inline compaction (xAI compacts by
        a call the strategy makes when the history passes runtime.compaction.trigger_tokens)."""
        problems = state_problems(options, strategy)
        if options.context_management:
            fix = "remove it; set runtime.compaction.strategy: native and runtime.compaction.trigger_tokens"
            inline = OptionProblem(
                "context_management", "xAI compacts by a separate /responses/compact call, not inline", fix
            )
            problems.insert(0, inline)
        return problems
