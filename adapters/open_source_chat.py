"""open_source.chat_completions.v1: OpenAI-compatible open-weight servers (vLLM, SGLang and the like)
whose models return a reasoning string beside each answer.

A leaf action, Chat Completions through the openai SDK (adapters/chat_completions.py) with one
difference: every accepted answer is replayed with its exact reasoning string, under the alias or
aliases the profile selects in `request.options.reasoning_field` (`reasoning_content`, `reasoning`,
or `both`), as the model server's chat template reads it. The reasoning is never turned into visible
text, and the adapter sends no tool of its own: actions are plain text (a request's own function
tools are offered, and an answer that calls them keeps its reasoning beside the calls). A stream
asks for usage in its last chunk, which accounting and usage-triggered compaction need. Harness
summaries can continue from it.

A projected reply (a resume without the continuation, a model switch) is Chat's plain assistant
message, with no reasoning under any alias (none is known): these servers keep no state to check
one against, and this adapter replays none whenever `reasoning_field` is unset. The local open-weight
wire takes it as the real servers do, and its model reads no reasoning for that turn
(local_provider/chat_reasoning.py rule 1).

On the embedded local provider it speaks to the open-weight server at `/open-weight/v1`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

import openai
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from turnstate.adapters import openai_sdk
from turnstate.adapters.chat_completions import ChatCompletionsAdapter
from turnstate.adapters.contract import Endpoint, OptionProblem, RequestSettings, SummaryCompaction, schema_problems

LOCAL_PREFIX = "/open-weight/v1"
ALIASES: Mapping[str, tuple[str, ...]] = {
    "reasoning_content": ("reasoning_content",),
    "reasoning": ("reasoning",),
    "both": ("reasoning_content", "reasoning"),
}


class OpenSourceOptions(BaseModel):
    """`request.options` for an open-weight server."""

    model_config = ConfigDict(extra="forbid", strict=True)

    reasoning_field: Literal["reasoning_content", "reasoning", "both"] | None = Field(
        default=None,
        description="where the server returns an answer's reasoning and its chat template reads it back; servers "
        "differ (SGLang and DeepSeek: `reasoning_content`; recent vLLM: `reasoning`), so continuous_conversation "
        "needs it said. Absent: the reasoning is neither read nor replayed",
    )


class OpenSourceChatAdapter(ChatCompletionsAdapter):
    summary_compaction: ClassVar[SummaryCompaction | None] = SummaryCompaction()
    options_model: ClassVar[type[BaseModel] | None] = OpenSourceOptions

    def __init__(self, client: openai.OpenAI, settings: RequestSettings) -> None:
        super().__init__(client, settings)
        field = OpenSourceOptions.model_validate(dict(settings.options)).reasoning_field
        self.reasoning_aliases = ALIASES[field] if field is not None else ()

    @classmethod
    def connect(cls, endpoint: Endpoint, settings: RequestSettings) -> OpenSourceChatAdapter:
        return cls(openai_sdk.client_for(endpoint, LOCAL_PREFIX), settings)

    @classmethod
    def check_options(
        cls, options: Mapping[str, Any], strategy: str, compaction: str, model: str = ""
    ) -> list[OptionProblem]:
        fix = "set reasoning_field to reasoning_content, reasoning or both, as the server's chat template reads it"
        try:
            parsed = OpenSourceOptions.model_validate(dict(options))
        except ValidationError as error:
            return schema_problems(error.errors(), fix)
        if strategy == "continuous_conversation" and parsed.reasoning_field is None:
            return [OptionProblem("reasoning_field", "continuous conversation replays each answer's reasoning", fix)]
        return []
