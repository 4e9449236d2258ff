"""anthropic.messages.v1: Anthropic Messages through the anthropic SDK, replaying native content.

A leaf action. Continuous conversation carries native Messages content in memory: every accepted
assistant message is replayed with its blocks in their original order (thinking with its signature,
redacted thinking, text, compaction), serialized with exclude_unset so supplied empty fields stay;
only the response-only `parsed_output` of text blocks and a null `encrypted_content` of compaction
blocks are dropped. The system prompt goes separately.

Only `end_turn` (or a configured stop sequence) can carry an action: a refusal, `max_tokens`,
`pause_turn` or an unfinished stream never does. Native compaction is on demand, a request of its
own (`compaction: {type: summarize}`, beta compact-2026-09-04) answered by one signed compaction
block, which the strategy's compaction_call machine asks for.

Usage: `usage.iterations` when present (compaction included), else the top level, never both;
input = uncached input + cache reads + cache writes, with cache reads as the cached part.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal

import anthropic
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from turnstate.adapters.contract import (
    Endpoint,
    ErrorKind,
    Item,
    ModelRequest,
    ModelResponse,
    NativeCompaction,
    OptionProblem,
    ProviderError,
    RequestSettings,
    Transcript,
    Usage,
    UsageSeen,
    malformed_reply,
    never_raising,
    retry_after_seconds,
    token_count,
)
from turnstate.adapters.tokens import MESSAGE_OVERHEAD_TOKENS, estimate_text_tokens

COMPACTION_BETA = "compact-2026-09-04"
_STOP_ERRORS = {"refusal": ErrorKind.REFUSAL, "max_tokens": ErrorKind.TRUNCATED, "pause_turn": ErrorKind.TRANSIENT}
_TRANSIENT_STATUS = {408, 409, 429, 529}


class MessagesItems:
    """The Messages transcript: a turn opens with one user message holding its inputs; a reply is
    the assistant message with every content block, replay-ready."""

    def user_items(self, inputs: Sequence[str]) -> list[Item]:
        return [{"role": "user", "content": [{"type": "text", "text": "\n\n".join(inputs)}]}]

    def reply_items(self, response: ModelResponse) -> list[Item]:
        return [dict(item) for item in response.native_items]

    def estimate_tokens(self, items: Sequence[Item], system: str = "") -> int:
        head = MESSAGE_OVERHEAD_TOKENS + estimate_text_tokens(system) if system else 0
        return head + sum(
            MESSAGE_OVERHEAD_TOKENS + estimate_text_tokens(_block_text(item, opaque=True)) for item in items
        )

    def readable(self, items: Sequence[Item]) -> list[dict[str, str]]:
        return [{"role": str(item.get("role", "")), "content": _block_text(item, opaque=False)} for item in items]

    def latest_compaction(self, items: Sequence[Item]) -> int | None:
        found = [index for index, item in enumerate(items) if _first_block_type(item) == "compaction"]
        return found[-1] if found else None


def _first_block_type(message: Item) -> str | None:
    content = message.get("content")
    if isinstance(content, list) and content and isinstance(content[0], Mapping):
        return str(content[0].get("type"))
    return None


def _block_text(message: Item, *, opaque: bool) -> str:
    """A message's readable text (thinking summaries, text, a compaction's content); with `opaque`,
    signatures and redacted data too, as they are billed."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    parts = []
    for block in content if isinstance(content, list) else []:
        kind = block.get("type")
        if kind == "text":
            parts.append(str(block.get("text", "")))
        elif kind == "thinking":
            parts.append(str(block.get("thinking", "")))
        elif kind == "compaction":
            parts.append(str(block.get("content") or "[the history before this point, compacted by the provider]"))
        if opaque:
            parts.append(str(block.get("signature") or block.get("data") or ""))
    return "\n".join(part for part in parts if part)


class _Options(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class ThinkingOptions(_Options):
    type: Literal["enabled", "adaptive", "disabled"]
    budget_tokens: int | None = Field(default=None, ge=1024)
    display: Literal["summarized", "omitted"] | None = None


class MessagesOptions(_Options):
    """`request.options` for Anthropic Messages."""

    thinking: ThinkingOptions | None = None
    betas: list[str] = Field(default_factory=list)
    stop_sequences: list[str] = Field(default_factory=list)
    cache_control: dict[str, Any] | None = None


class MessagesAdapter:
    transcript: ClassVar[Transcript] = MessagesItems()
    native_compaction: ClassVar[NativeCompaction | None] = "call"

    def __init__(self, client: anthropic.Anthropic, settings: RequestSettings) -> None:
        self.client = client
        self.settings = settings
        self.options = MessagesOptions.model_validate(dict(settings.options))

    @classmethod
    def connect(cls, endpoint: Endpoint, settings: RequestSettings) -> MessagesAdapter:
        # Anthropic's base_url has no /v1; the SDK's own retries are off (the harness owns them).
        client = anthropic.Anthropic(
            base_url=endpoint.base_url, api_key=endpoint.api_key, max_retries=0, timeout=endpoint.timeout_seconds
        )
        return cls(client, settings)

    @classmethod
    def check_options(cls, options: Mapping[str, Any], strategy: str, compaction: str) -> list[OptionProblem]:
        try:
            MessagesOptions.model_validate(dict(options))
        except ValidationError as error:
            return [
                OptionProblem(
                    ".".join(str(part) for part in item["loc"]), item["msg"], "see the Messages options in README.md"
                )
                for item in error.errors()
            ]
        return []

    def build_request(self, request: ModelRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.settings.model,
            "max_tokens": self.settings.max_output_tokens,
            "system": request.system,
            "messages": [dict(item) for item in request.items],
            **self.options.model_dump(exclude_none=True, exclude_defaults=True, exclude={"betas"}),
        }
        if self.settings.temperature is not None:
            body["temperature"] = self.settings.temperature
        return body

    def call(self, request: ModelRequest) -> ModelResponse | ProviderError:
        """One SDK call; never raises (see the contract's malformed_reply)."""
        return self._request(self.build_request(request), compaction=False)

    def compact(self, request: ModelRequest) -> ModelResponse | ProviderError:
        """An on-demand compaction of `request.items`: one signed compaction block replaces them."""
        body = self.build_request(request)
        body.pop("stop_sequences", None)
        return self._request(body, compaction=True)

    def classify(self, error: Exception) -> ProviderError:
        diagnostics: dict[str, Any] = {"error_class": type(error).__name__}
        if isinstance(error, anthropic.APIStatusError):
            body: Any = error.body if isinstance(error.body, Mapping) else {}
            details: Any = body.get("error") if isinstance(body.get("error"), Mapping) else {}
            diagnostics |= {
                "status": error.status_code,
                "error_type": details.get("type"),
                "request_id": error.request_id,
            }
            wait = retry_after_seconds(error.response.headers)
            return ProviderError(_status_kind(error), Usage(), diagnostics, retry_after_seconds=wait)
        return ProviderError(ErrorKind.TRANSIENT, Usage(), diagnostics)

    def _request(self, body: dict[str, Any], *, compaction: bool) -> ModelResponse | ProviderError:
        betas = [*self.options.betas, *([COMPACTION_BETA] if compaction else [])]
        extra = {"extra_body": {"compaction": {"type": "summarize"}}} if compaction else {}
        messages: Any = self.client.beta.messages  # the body is built as data; the SDK's overloads are narrower

        def read(seen: UsageSeen) -> ModelResponse | ProviderError:
            if self.settings.stream:
                with messages.stream(**body, betas=betas, **extra) as stream:
                    message = stream.get_final_message()
            else:
                message = messages.create(**body, betas=betas, **extra)
            seen.usage = _usage(message.usage)
            return self._normalize(message, seen.usage, compaction=compaction)

        return never_raising(read, self.classify, anthropic.APIError)

    def _normalize(self, message: Any, usage: Usage, *, compaction: bool) -> ModelResponse | ProviderError:
        stop = message.stop_reason
        blocks = [_replayable(block.model_dump(mode="json", exclude_unset=True)) for block in message.content]
        if compaction:
            signed = [block for block in blocks if block.get("type") == "compaction" and block.get("signature")]
            if stop != "compaction" or len(blocks) != 1 or len(signed) != 1 or not signed[0].get("content"):
                return malformed_reply(ValueError("a compaction reply is exactly one nonempty signed block"), usage)
        elif stop in _STOP_ERRORS:
            return ProviderError(_STOP_ERRORS[stop], usage, {"finish_reason": stop})
        elif stop == "model_context_window_exceeded":
            return ProviderError(ErrorKind.CONTEXT_OVERFLOW, usage, {"finish_reason": stop})
        elif stop not in ("end_turn", "stop_sequence") or not any(block.get("type") == "text" for block in blocks):
            return malformed_reply(ValueError(f"a reply that cannot carry an action: {stop}"), usage)
        text = "".join(str(block.get("text", "")) for block in blocks if block.get("type") == "text")
        summaries = [str(block.get("thinking", "")) for block in blocks if block.get("type") == "thinking"]
        return ModelResponse(
            text=text,
            usage=usage,
            stop_reason=str(stop),
            reasoning_summary=" ".join(summary for summary in summaries if summary) or None,
            response_id=message.id,
            native_items=({"role": "assistant", "content": blocks},),
        )


def _replayable(block: dict[str, Any]) -> dict[str, Any]:
    """A content block as the next request's input: response-only fields dropped, nothing else."""
    if block.get("type") == "text":
        return {key: value for key, value in block.items() if key != "parsed_output"}
    if block.get("type") == "compaction" and block.get("encrypted_content", "") is None:
        return {key: value for key, value in block.items() if key != "encrypted_content"}
    return block


def _status_kind(error: anthropic.APIStatusError) -> ErrorKind:
    if error.status_code == 400 and "prompt is too long" in str(error.message):
        return ErrorKind.CONTEXT_OVERFLOW
    if error.status_code in _TRANSIENT_STATUS or error.status_code >= 500:
        return ErrorKind.TRANSIENT
    return ErrorKind.FATAL


def _usage(usage: Any) -> Usage:
    """The iterations when present (compaction included), else the top level; never both."""
    parts = getattr(usage, "iterations", None) or [usage]
    total = Usage()
    for part in parts:
        uncached = token_count(getattr(part, "input_tokens", None))
        read = token_count(getattr(part, "cache_read_input_tokens", None))
        written = token_count(getattr(part, "cache_creation_input_tokens", None))
        details = getattr(part, "output_tokens_details", None)
        total += Usage(
            input_tokens=uncached + read + written,
            cached_input_tokens=read,
            output_tokens=token_count(getattr(part, "output_tokens", None)),
            reasoning_tokens=token_count(getattr(details, "thinking_tokens", None)),
        )
    return total
