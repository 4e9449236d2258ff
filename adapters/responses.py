"""openai.responses.v1: the OpenAI Responses API through the openai SDK, replaying native items.

A leaf action. Continuous conversation is stateless on the server (store false): every accepted
turn's input and EVERY native output item (reasoning with its encrypted content, messages, function
calls, compaction items) are sent again in the next request, in order, exactly as returned, less
`created_by` on compaction items (the input schema rejects it) and the response-only `status` on
reasoning items (the input schema takes it, but replay does not need it; the seed's reference
adapter drops it). Items are serialized with exclude_unset, so supplied empty fields stay and fields
the SDK adds are not invented. previous_response_id instead sends only the new input and the handle.

A reply is usable only when its status is completed; incomplete (output limit, content filter),
failed, or a stream that ends early never yields an action. Streaming is a transport setting: the
adapter waits for the terminal event and its usage either way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal

import openai
from openai import Stream
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from turnstate.adapters import openai_sdk
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
    SummaryCompaction,
    Transcript,
    Usage,
    UsageSeen,
    malformed_reply,
    never_raising,
    reported_cost,
    schema_problems,
    token_count,
)
from turnstate.adapters.tokens import content_text, item_text, item_tokens

ENCRYPTED_REASONING = "reasoning.encrypted_content"
RESPONSE_ONLY_FIELDS = {"reasoning": "status", "compaction": "created_by"}  # item type -> field replay drops
RESPONSES_PATH = "/responses"
_INCOMPLETE_ERRORS = {"max_output_tokens": ErrorKind.TRUNCATED, "content_filter": ErrorKind.REFUSAL}
_TERMINAL_EVENTS = {"response.completed", "response.incomplete", "response.failed"}


class ResponsesItems:
    """The Responses transcript: a turn opens with one user message holding its inputs; a reply adds
    every native output item, replay-ready."""

    def user_items(self, inputs: Sequence[str]) -> list[Item]:
        return [{"role": "user", "content": "\n\n".join(inputs)}]

    def reply_items(self, response: ModelResponse) -> list[Item]:
        return [dict(item) for item in response.native_items]

    def estimate_tokens(self, items: Sequence[Item], system: str = "") -> int:
        instructions = item_tokens({"type": "instructions", "text": system}) if system else 0
        return instructions + sum(item_tokens(item) for item in items)

    def readable(self, items: Sequence[Item]) -> list[dict[str, str]]:
        return [_readable(item) for item in items]

    def latest_compaction(self, items: Sequence[Item]) -> int | None:
        found = [index for index, item in enumerate(items) if item.get("type") == "compaction"]
        return found[-1] if found else None


def _readable(item: Item) -> dict[str, str]:
    kind = str(item.get("type", "message"))
    if kind == "message":
        return {"role": str(item.get("role", "assistant")), "content": item_text(item)}
    if kind == "reasoning":
        summary = " ".join(str(part.get("text", "")) for part in item.get("summary") or [])
        return {"role": "reasoning", "content": summary}
    if kind == "compaction":
        return {"role": "compaction", "content": "[the history before this point, compacted by the provider]"}
    return {"role": kind, "content": item_text(item)}


class _Options(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class ReasoningOptions(_Options):
    effort: Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"] | None = None
    summary: Literal["auto", "concise", "detailed"] | None = None
    context: Literal["auto", "current_turn", "all_turns"] | None = None


class CompactionSetting(_Options):
    type: Literal["compaction"]
    compact_threshold: int = Field(ge=1)


class ResponsesOptions(_Options):
    """`request.options` for the Responses API: what it sends beside the model and the output limit."""

    store: bool | None = None
    include: list[str] = Field(default_factory=list)
    reasoning: ReasoningOptions | None = None
    context_management: list[CompactionSetting] | None = None
    background: bool | None = None
    conversation: str | None = None
    previous_response_id: str | None = None


class ResponsesAdapter:
    transcript: ClassVar[Transcript] = ResponsesItems()
    native_compaction: ClassVar[NativeCompaction | None] = "inline"  # request.options.context_management
    summary_compaction: ClassVar[SummaryCompaction | None] = SummaryCompaction()
    action_tool: ClassVar[str | None] = None

    def __init__(self, client: openai.OpenAI, settings: RequestSettings) -> None:
        self.client = client
        self.settings = settings
        self.options = ResponsesOptions.model_validate(dict(settings.options))

    @classmethod
    def connect(cls, endpoint: Endpoint, settings: RequestSettings) -> ResponsesAdapter:
        return cls(openai_sdk.client_for(endpoint), settings)

    @classmethod
    def check_options(cls, options: Mapping[str, Any], strategy: str, compaction: str) -> list[OptionProblem]:
        """What `request.options` must say for the strategy, each violation with its fix."""
        try:
            parsed = ResponsesOptions.model_validate(dict(options))
        except ValidationError as error:
            return schema_problems(error.errors(), "see the Responses options in README.md")
        return cls.option_rules(parsed, strategy, compaction)

    @classmethod
    def option_rules(cls, options: ResponsesOptions, strategy: str, compaction: str) -> list[OptionProblem]:
        """OpenAI's rules beside every Responses surface's (state_problems): reasoning summary and
        context auto for continuous conversation, and inline compaction (context_management)
        exactly when compaction is native."""
        problems = state_problems(options, strategy)
        if strategy == "continuous_conversation":
            reasoning = options.reasoning or ReasoningOptions()
            if reasoning.context != "auto":
                why = "continuous conversation needs the model's own choice"
                problems.append(OptionProblem("reasoning.context", why, "set it to auto"))
            if reasoning.summary != "auto":
                why = "continuous conversation asks for summaries"
                problems.append(OptionProblem("reasoning.summary", why, "set it to auto"))
        if compaction == "native" and not options.context_management:
            why = "native compaction is the Responses context_management setting"
            problems.append(OptionProblem("context_management", why, "add [{type: compaction, compact_threshold: N}]"))
        if compaction != "native" and options.context_management:
            fix = "remove it, or set runtime.compaction.strategy: native"
            problems.append(OptionProblem("context_management", f"compaction is {compaction!r}", fix))
        return problems

    def build_request(self, request: ModelRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.settings.model,
            "instructions": request.system,
            "input": [dict(item) for item in request.items],
            "max_output_tokens": request.output_cap(self.settings),
            **self.options.model_dump(exclude_none=True, exclude_defaults=True),
        }
        if request.previous_response_id is not None:
            body["previous_response_id"] = request.previous_response_id
        if self.settings.temperature is not None:
            body["temperature"] = self.settings.temperature
        return body

    def call(self, request: ModelRequest) -> ModelResponse | ProviderError:
        """One SDK call; never raises (see the contract's malformed_reply)."""
        body = self.build_request(request)
        return never_raising(lambda seen: self._read(body, seen), self.classify, openai.APIError)

    def _read(self, body: dict[str, Any], seen: UsageSeen) -> ModelResponse | ProviderError:
        # Through the SDK's own POST, as adapters/chat_completions.py does and for the same reason:
        # the body is final, and `create`'s transform over every input item grows with the history.
        if self.settings.stream:
            events = self.client.post(
                RESPONSES_PATH,
                body={**body, "stream": True},
                cast_to=Response,
                stream=True,
                stream_cls=Stream[ResponseStreamEvent],
            )
            return self._collect_stream(events, seen)
        return self._normalize(self.client.post(RESPONSES_PATH, body=body, cast_to=Response), seen)

    def compact(self, request: ModelRequest) -> ModelResponse | ProviderError:
        """POST /responses/compact over `request.items`; its output (the kept messages and one
        compaction item) replaces them. Never raises."""
        return never_raising(lambda seen: self._read_compaction(request, seen), self.classify, openai.APIError)

    def _read_compaction(self, request: ModelRequest, seen: UsageSeen) -> ModelResponse | ProviderError:
        items_sent: Any = [dict(item) for item in request.items]  # replayed as returned; the SDK's types are narrower
        compacted = self.client.responses.compact(
            model=self.settings.model, input=items_sent, instructions=request.system
        )
        seen.usage = _usage(compacted.usage)
        # warnings off: the SDK types every output message as an assistant's, user ones included.
        items = [
            _replayable(item.model_dump(mode="json", exclude_unset=True, warnings=False)) for item in compacted.output
        ]
        if self.transcript.latest_compaction(items) is None:
            return malformed_reply(ValueError("a compaction reply without a compaction item"), seen.usage)
        return ModelResponse(
            text="", usage=seen.usage, stop_reason="compacted", response_id=compacted.id, native_items=tuple(items)
        )

    def classify(self, error: Exception) -> ProviderError:
        return openai_sdk.classify(error)

    def _collect_stream(self, stream: Any, seen: UsageSeen) -> ModelResponse | ProviderError:
        final = None
        with stream:
            for event in stream:
                if event.type == "error":
                    return ProviderError(
                        ErrorKind.TRANSIENT, seen.usage, {"error_class": "StreamError", "code": event.code}
                    )
                if event.type in _TERMINAL_EVENTS:
                    final = event.response
        if final is None:
            # The stream ended without its terminal event: treat like a cut connection.
            return ProviderError(ErrorKind.TRANSIENT, seen.usage, {"error_class": "IncompleteStream"})
        return self._normalize(final, seen)

    def _normalize(self, response: Any, seen: UsageSeen) -> ModelResponse | ProviderError:
        seen.usage = _usage(response.usage)
        if response.status == "incomplete":
            reason = getattr(response.incomplete_details, "reason", None)
            kind = _INCOMPLETE_ERRORS.get(reason or "", ErrorKind.TRANSIENT)
            return ProviderError(kind, seen.usage, {"finish_reason": f"incomplete:{reason}"})
        if response.status != "completed":
            code = getattr(response.error, "code", None)
            return ProviderError(ErrorKind.TRANSIENT, seen.usage, {"finish_reason": str(response.status), "code": code})
        items = [_replayable(item.model_dump(mode="json", exclude_unset=True)) for item in response.output]
        messages = [item for item in items if item.get("type") == "message"]
        if not messages or any(not isinstance(item.get("content"), list) for item in messages):
            return malformed_reply(ValueError("a completed response without a readable message"), seen.usage)
        if any(part.get("type") == "refusal" for item in messages for part in item.get("content") or []):
            return ProviderError(ErrorKind.REFUSAL, seen.usage, {"finish_reason": "refusal"})
        summaries = [_readable(item)["content"] for item in items if item.get("type") == "reasoning"]
        return ModelResponse(
            text="".join(content_text(item.get("content")) for item in messages),
            usage=seen.usage,
            stop_reason="completed",
            reasoning_summary=" ".join(summary for summary in summaries if summary) or None,
            response_id=response.id,
            native_items=tuple(items),
        )


def _replayable(item: dict[str, Any]) -> dict[str, Any]:
    """The output item as the next request's input: only the response-only field is dropped."""
    dropped = RESPONSE_ONLY_FIELDS.get(item.get("type", ""))
    return {key: value for key, value in item.items() if key != dropped}


def state_problems(options: ResponsesOptions, strategy: str) -> list[OptionProblem]:
    """The rules of every Responses surface: the strategy owns the conversation state, and continuous
    conversation is stateless on the server and replays encrypted reasoning."""
    problems = [
        OptionProblem(name, why, "remove it")
        for name, why in (
            ("background", "background mode cannot hand a reply to the machine"),
            ("conversation", "a server conversation replaces the strategy's own state"),
            ("previous_response_id", "the strategy sets the handle, not the profile"),
        )
        if getattr(options, name)
    ]
    if strategy == "continuous_conversation":
        if options.store is not False:
            problems.append(
                OptionProblem("store", "continuous conversation is stateless on the server", "set store: false")
            )
        if ENCRYPTED_REASONING not in options.include:
            why = "without encrypted reasoning the replay loses the model's reasoning"
            problems.append(OptionProblem("include", why, f"add {ENCRYPTED_REASONING}"))
    if strategy == "previous_response_id" and options.store is False:
        problems.append(
            OptionProblem("store", "previous_response_id continues a stored response", "set store: true or remove it")
        )
    return problems


def _usage(usage: Any) -> Usage:
    input_details = getattr(usage, "input_tokens_details", None)
    output_details = getattr(usage, "output_tokens_details", None)
    return Usage(
        input_tokens=token_count(getattr(usage, "input_tokens", None)),
        cached_input_tokens=token_count(getattr(input_details, "cached_tokens", None)),
        output_tokens=token_count(getattr(usage, "output_tokens", None)),
        reasoning_tokens=token_count(getattr(output_details, "reasoning_tokens", None)),
        cache_write_tokens=token_count(getattr(input_details, "cache_write_tokens", None)),
        cost=reported_cost(usage),
    )
