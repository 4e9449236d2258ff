"""xai.responses.v1: xAI's Responses API through the openai SDK's Responses surface.

The same wire as OpenAI Responses (adapters/responses.py: exact encrypted replay, the same
response-only fields dropped, the same reply rules), with xAI's own request rules and its own native
compaction: a separate POST /responses/compact call that the strategy makes when the accepted
history passes runtime.compaction.trigger_tokens, never OpenAI's inline context_management.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import ValidationError

from turnstate.adapters.contract import NativeCompaction, OptionProblem
from turnstate.adapters.responses import ENCRYPTED_REASONING, ResponsesAdapter, ResponsesOptions, option_problems


class XaiResponsesAdapter(ResponsesAdapter):
    native_compaction: ClassVar[NativeCompaction | None] = "call"

    @classmethod
    def check_options(cls, options: Mapping[str, Any], strategy: str, compaction: str) -> list[OptionProblem]:
        """xAI's rules: no OpenAI inline compaction, no server-side state beside the strategy's own;
        continuous conversation is stateless and replays encrypted reasoning."""
        try:
            parsed = ResponsesOptions.model_validate(dict(options))
        except ValidationError as error:
            return option_problems(error)
        problems = []
        if parsed.context_management:
            problems.append(
                OptionProblem(
                    "context_management",
                    "xAI compacts by a separate /responses/compact call, not inline",
                    "remove it; set runtime.compaction.strategy: native and runtime.compaction.trigger_tokens",
                )
            )
        for name in ("background", "conversation", "previous_response_id"):
            if getattr(parsed, name):
                problems.append(OptionProblem(name, "the strategy owns the conversation state", "remove it"))
        if strategy == "continuous_conversation":
            if parsed.store is not False:
                problems.append(
                    OptionProblem("store", "continuous conversation is stateless on the server", "set store: false")
                )
            if ENCRYPTED_REASONING not in parsed.include:
                problems.append(
                    OptionProblem(
                        "include",
                        "without encrypted reasoning the replay loses the model's reasoning",
                        f"add {ENCRYPTED_REASONING}",
                    )
                )
        return problems
