"""google.interactions.v1: Gemini's Interactions API through the google-genai SDK, replaying every step.

A leaf action. With `store: false` nothing stays on the server, so continuous conversation carries
the steps in memory: each accepted user input, then every step the model generated, exactly as
returned (a thought step's signature verbatim, its readable summary, the model output). Readable
thought summaries are the reply's reasoning summary; the profile must ask for them
(`generation_config.thinking_summaries: auto`) and may not use `previous_interaction_id` or
background mode. Harness summaries can continue from it.

Status `completed` carries an action; `requires_action` carries function calls; `incomplete` is a
safety stop (a step's error with reason SAFETY: a refusal) or a cut reply (truncated); anything else
cannot be read. Usage: input is
`total_input_tokens` (with `total_cached_tokens` the cached part); output is the visible output plus
the thought, `total_thought_tokens` being the reasoning breakdown.

The SDK keeps what a reply says even where its own types disagree (a number where `text: str` is
declared is kept, and printed as a serializer warning when dumped), so a reply is validated against
the shapes below (through the objects' attributes) before any of it is read or dumped: a string
`status` and an `id` string or absent; steps each with a string `type`, a content or summary list of
parts each with a string `type` and, a text part, a string `text`; a thought's `signature` a string
or absent; a step error's detail `reason` a string or absent; each stream event's string
`event_type`, a step event's integer `index`, a delta's string `type` with the field its type
carries (a signature, a summary part, a text, a call's arguments text); every usage count a
non-negative integer or absent; a function_call step's `id` and `name` strings and its `arguments` an
object (streamed: the arguments_delta texts joined, which must parse as a JSON object), else the
reply is malformed.

Function tools. A request's tools are sent as `tools: [{type: "function", name, description,
parameters}]` (google-genai 3.6 FunctionParam, parameters a JSON Schema), and nothing tool-related
when it offers none, so a request without tools is sent as before. The model calls them with
function_call steps {type, id, name, arguments} after its thought step (FunctionCallStep has no
signature: the thought step before the calls carries it, and the calls replay verbatim beside it);
they are the reply's tool calls, in order, and a reply is answered by `tool_result_items`. The
service refuses an unpaired call or result with a 400 INVALID_ARGUMENT, classified as the harness's
bug: fatal.

For the stale tool-result offload, `InteractionSteps.tool_results` lists each function_result step,
named by the function_call step whose id it answers (else by its own `name`), its error the step's
`is_error`, its text as `readable` shows it; `with_tool_result_text` copies it with a new `result`
string (FunctionResultStepParam takes a string). Thought steps and their signatures are never read.

A reply known only by its projection (a resume without the continuation, a model switch:
`InteractionSteps.projected_reply_items`) replays as a model_output step {type, content: [{type:
text, text}]} (none when the text is empty), then a function_call step {type, id, name, arguments}
per call (google-genai 3.6 ModelOutputStepParam and FunctionCallStepParam, which require nothing
more); no thought step and no signature, which only the service can mint. Gemini 3 strictly
validates the signatures of the current turn's function calls only (the "Thought signatures" docs),
so the projected calls of an earlier turn are taken, and a model output without its thought step is
taken in any turn; the local Interactions wire does the same, its model reading no thought for it
(local_provider/interactions_conversation.py rule 3).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal, Self

from google import genai
from google.genai import _interactions, types
from google.genai._interactions_continuation import ContinuationTimeoutError
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from turnstate.adapters.bounded_http import bounded_client
from turnstate.adapters.contract import (
    Endpoint,
    ErrorKind,
    Input,
    Item,
    ModelRequest,
    ModelResponse,
    NativeCompaction,
    NoSuchToolResult,
    OptionProblem,
    ProviderError,
    ReplyShape,
    RequestBounds,
    RequestSettings,
    SummaryCompaction,
    TokenCount,
    ToolCall,
    ToolResult,
    ToolResultAt,
    Transcript,
    Usage,
    UsageSeen,
    UserInput,
    input_parts,
    malformed_reply,
    never_raising,
    no_compaction_call,
    refused_options,
    retry_after_seconds,
    schema_problems,
    token_count,
)
from turnstate.adapters.image_costs import GEMINI_IMAGE_LIMITS, ImageLimits
from turnstate.adapters.images import ImagePart
from turnstate.adapters.tokens import MESSAGE_OVERHEAD_TOKENS, estimate_text_tokens, held_image_tokens, image_label

API_VERSION = "v1beta"
TEMPERATURE_RANGE = (0.0, 2.0)  # what the Interactions service takes (local_provider's SAMPLING_RANGES)
MODEL_STEPS = ("thought", "model_output", "function_call")
_TRANSIENT_STATUS = {408, 409, 429}
_CONTEXT_OVERFLOW = "exceeds the maximum number of tokens allowed"


class InteractionsUsage(ReplyShape):
    total_input_tokens: TokenCount = None
    total_cached_tokens: TokenCount = None
    total_output_tokens: TokenCount = None
    total_thought_tokens: TokenCount = None


class Part(ReplyShape):
    type: str
    text: str | None = None

    @model_validator(mode="after")
    def _text_part_has_its_text(self) -> Self:
        if self.type == "text" and self.text is None:
            raise ValueError("a text part without its text")
        return self


class ErrorDetail(ReplyShape):
    reason: str | None = None


class StepError(ReplyShape):
    details: list[ErrorDetail] | None = None


class Step(ReplyShape):
    type: str
    content: list[Part] | None = None
    summary: list[Part] | None = None
    signature: str | None = None
    error: StepError | None = None
    id: str | None = None
    name: str | None = None
    arguments: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _a_call_has_its_id_name_and_arguments(self) -> Self:
        if self.type == "function_call" and (self.id is None or self.name is None or self.arguments is None):
            raise ValueError("a function call without its id, name or arguments object")
        return self


class InteractionReply(ReplyShape):
    id: str | None = None
    status: str
    steps: list[Step] | None = None


class StreamEvent(ReplyShape):
    event_type: str


class StepEvent(ReplyShape):
    index: int


DELTA_FIELDS: Mapping[str, str] = {
    "thought_signature": "signature",
    "thought_summary": "content",
    "text": "text",
    "arguments_delta": "arguments",
}
"""The field each kind of delta carries."""


class Delta(ReplyShape):
    type: str
    signature: str | None = None
    content: Part | None = None
    text: str | None = None
    arguments: str | None = None

    @model_validator(mode="after")
    def _carries_its_field(self) -> Self:
        field = DELTA_FIELDS.get(self.type)
        if field is not None and getattr(self, field) is None:
            raise ValueError(f"a {self.type} delta without its {field}")
        return self


class InteractionSteps:
    """The Interactions transcript: a turn opens with one user_input step holding its inputs; a reply
    is every step the model generated, replay-ready."""

    def user_items(self, inputs: Sequence[Input]) -> list[Item]:
        """One user_input step of `text` contents and `image` contents {data: base64, mime_type}
        (google-genai's ImageContentParam; no `resolution`: the service's default, high)."""
        return [{"type": "user_input", "content": _contents(input_parts(inputs))}]

    def reply_items(self, response: ModelResponse) -> list[Item]:
        return [dict(item) for item in response.native_items]

    def projected_reply_items(self, text: str, tool_calls: Sequence[ToolCall]) -> list[Item]:
        """A model_output step {type, content: [one text part]} (none when the text is empty), then a
        function_call step {type, id, name, arguments} per call; no thought step and no signature (see
        the module docstring for the evidence)."""
        output = [{"type": "model_output", "content": [{"type": "text", "text": text}]}] if text else []
        calls = [
            {"type": "function_call", "id": call.id, "name": call.name, "arguments": dict(call.arguments)}
            for call in tool_calls
        ]
        return [*output, *calls]

    def tool_result_items(self, results: Sequence[ToolResult]) -> list[Item]:
        """One function_result step per result, in the calls' order, right after the reply's calls:
        {type, call_id, name, result} with the content as the result string, or for a result that
        shows images a list of its text and image contents (google-genai 3.6
        FunctionResultStepParam: call_id is the "ID to match the ID from the function call block",
        result a string, an object or contents), and `is_error: true` for a failed call, the step's
        own field ("Whether the tool call resulted in an error"), absent otherwise. The service refuses
        a reply's call left unanswered before any other step, and a second result for one call (400
        INVALID_ARGUMENT; local_provider/interactions_conversation.py, rule 7)."""
        return [
            {
                "type": "function_result",
                "call_id": result.call_id,
                "name": result.name,
                "result": _contents(input_parts([UserInput(result.content, result.images)]))
                if result.images
                else result.content,
                **({"is_error": True} if result.is_error else {}),
            }
            for result in results
        ]

    def tool_results(self, items: Sequence[Item]) -> list[ToolResultAt]:
        """Each function_result step, named by the function_call step with its id (else by its own
        `name`), its error from the step's `is_error`. Thought steps are passed over by their type."""
        names: dict[str, str] = {}
        found = []
        for index, step in enumerate(items):
            kind = step.get("type")
            if kind == "function_call":
                names[str(step.get("id"))] = str(step.get("name"))
            elif kind == "function_result":
                call_id = str(step.get("call_id"))
                name = names.get(call_id) or str(step.get("name") or "")
                found.append(ToolResultAt(index, call_id, name, _result_text(step), bool(step.get("is_error"))))
        return found

    def with_tool_result_text(self, item: Item, call_id: str, text: str) -> Item:
        if item.get("type") != "function_result" or item.get("call_id") != call_id:
            raise NoSuchToolResult(call_id)
        return {**item, "result": text}

    def estimate_tokens(self, items: Sequence[Item], system: str = "") -> int:
        head = MESSAGE_OVERHEAD_TOKENS + estimate_text_tokens(system) if system else 0
        return head + sum(
            MESSAGE_OVERHEAD_TOKENS + estimate_text_tokens(_step_text(item, opaque=True)) + held_image_tokens(item)
            for item in items
        )

    def readable(self, items: Sequence[Item]) -> list[dict[str, str]]:
        roles = {
            "user_input": "user",
            "thought": "thought summary",
            "model_output": "model",
            "function_call": "tool call",
            "function_result": "tool result",
        }
        return [
            {"role": roles.get(str(item.get("type")), str(item.get("type"))), "content": _step_text(item, opaque=False)}
            for item in items
        ]

    def latest_compaction(self, items: Sequence[Item]) -> int | None:
        return None  # the Interactions API has no compaction steps


def _contents(parts: Sequence[str | ImagePart]) -> list[dict[str, str]]:
    """Input parts as Interactions lays them out: `text` contents and `image` contents {data: base64,
    mime_type} (google-genai's ImageContentParam; no `resolution`: the service's default, high)."""
    return [
        {"type": "text", "text": part}
        if isinstance(part, str)
        else {"type": "image", "data": part.base64, "mime_type": part.media_type}
        for part in parts
    ]


def _texts(contents: object, *, images: bool = False) -> list[str]:
    """The text contents' texts, in order; with `images`, each image content as its label too."""
    parts = [part for part in (contents if isinstance(contents, list) else []) if isinstance(part, Mapping)]
    return [
        str(part.get("text", "")) if part.get("type") == "text" else image_label(part) or ""
        for part in parts
        if part.get("type") == "text" or (images and part.get("type") == "image")
    ]


def _result_text(step: Item, *, images: bool = False) -> str:
    """A function_result's text as the model reads it: the result string, its text contents (with
    `images`, each image content's label too), or the result object as JSON (FunctionResultStepParam
    takes any of the three)."""
    result = step.get("result")
    return result if isinstance(result, str) else "\n".join(_texts(result, images=images)) or json.dumps(result)


def _step_text(step: Item, *, opaque: bool) -> str:
    """A step's readable text (a user input's, an output's, a thought's summary, a call's name and
    arguments as JSON, a result's text); with `opaque`, a thought's signature too, as it is billed."""
    if step.get("type") == "function_call":
        return f"{step.get('name')}({json.dumps(step.get('arguments'))})"
    if step.get("type") == "function_result":
        return _result_text(step, images=not opaque)
    texts = _texts(step.get("summary") if step.get("type") == "thought" else step.get("content"), images=not opaque)
    if opaque and step.get("type") == "thought":
        texts.append(str(step.get("signature") or ""))
    return "\n".join(text for text in texts if text)


class GenerationConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    thinking_summaries: Literal["auto", "none"] | None = Field(
        default=None,
        description="continuous_conversation needs `auto`: the thought summaries are the reply's reasoning",
    )
    thinking_level: Literal["minimal", "low", "medium", "high"] | None = Field(
        default=None, description="how much the model thinks; absent: the model's default"
    )
    temperature: float | None = Field(
        default=None,
        description=f"the sampling temperature, from {TEMPERATURE_RANGE[0]:g} to {TEMPERATURE_RANGE[1]:g} "
        "(Gemini's range)",
    )


class GeminiOptions(BaseModel):
    """`request.options` for Gemini Interactions. `previous_interaction_id` and `background` are
    refused: the harness carries the conversation's steps itself."""

    model_config = ConfigDict(extra="forbid", strict=True)

    store: Literal[False] = Field(default=False, description="sent always: nothing is kept on the server")
    generation_config: GenerationConfig = Field(
        default=GenerationConfig(), description="continuous_conversation needs `thinking_summaries: auto`"
    )


REFUSED_OPTIONS: Mapping[str, tuple[str, str]] = {
    "previous_interaction_id": (
        "the harness carries the conversation's steps itself (store: false)",
        "remove it",
    ),
    "background": ("a background interaction returns before its steps exist", "remove it"),
}


class InteractionsAdapter:
    transcript: ClassVar[Transcript] = InteractionSteps()
    native_compaction: ClassVar[NativeCompaction | None] = None
    summary_compaction: ClassVar[SummaryCompaction | None] = SummaryCompaction()
    acts_through_tools: ClassVar[bool] = False
    takes_temperature: ClassVar[bool] = True
    body_fields: ClassVar[Mapping[str, str] | None] = None  # no server but Google's speaks this wire: no extra fields
    grammar_field: ClassVar[str | None] = None
    options_model: ClassVar[type[BaseModel] | None] = GeminiOptions
    image_limits: ClassVar[ImageLimits | None] = GEMINI_IMAGE_LIMITS

    def __init__(self, client: genai.Client, settings: RequestSettings, timeout_seconds: float | None = None) -> None:
        self.client = client
        self.settings = settings
        self.options = GeminiOptions.model_validate(dict(settings.options))
        # A per-call timeout, which the SDK makes one deadline for all the continuation hops it may
        # post for one call (each hop sent with the time left); None: each hop has the client's own.
        self.timeout_seconds = timeout_seconds

    @classmethod
    def connect(cls, endpoint: Endpoint, settings: RequestSettings) -> InteractionsAdapter:
        # The SDK's own retries are off (one attempt): the harness owns them. Its timeout is in ms; its
        # HTTP client bounds each request by the endpoint's deadline and reply cap.
        options = types.HttpOptions(
            base_url=endpoint.base_url,
            api_version=API_VERSION,
            timeout=int(endpoint.timeout_seconds * 1000),
            retry_options=types.HttpRetryOptions(attempts=1),
            httpx_client=bounded_client(endpoint),
        )
        return cls(genai.Client(api_key=endpoint.api_key, http_options=options), settings, endpoint.timeout_seconds)

    @classmethod
    def check_options(
        cls, options: Mapping[str, Any], strategy: str, compaction: str, model: str = ""
    ) -> list[OptionProblem]:
        problems = refused_options(options, REFUSED_OPTIONS)
        if problems:
            return problems
        try:
            parsed = GeminiOptions.model_validate(dict(options))
        except ValidationError as error:
            return schema_problems(error.errors(), "see request.options in docs/profiles.md")
        if strategy == "continuous_conversation" and parsed.generation_config.thinking_summaries != "auto":
            return [
                OptionProblem(
                    "generation_config.thinking_summaries",
                    "continuous conversation maps the thought summaries to the reply's reasoning",
                    "set it to auto",
                )
            ]
        return []

    @classmethod
    def check_limits(cls, bounds: RequestBounds) -> list[OptionProblem]:
        """A temperature in the range the Interactions service takes."""
        low, high = TEMPERATURE_RANGE
        temperature = (bounds.options.get("generation_config") or {}).get("temperature")
        if temperature is None or low <= temperature <= high:
            return []
        return [
            OptionProblem(
                "request.options.generation_config.temperature",
                f"{temperature} is outside Gemini's range {low:g}-{high:g}",
                f"use a value from {low:g} to {high:g}",
            )
        ]

    def build_request(self, request: ModelRequest) -> dict[str, Any]:
        config = self.options.generation_config.model_dump(exclude_none=True)
        if self.settings.temperature is not None:
            config["temperature"] = self.settings.temperature
        body: dict[str, Any] = {
            "model": self.settings.model,
            "input": [dict(item) for item in request.items],
            "system_instruction": request.system,
            "store": False,
            "generation_config": {**config, "max_output_tokens": request.output_cap(self.settings)},
        }
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": dict(tool.parameters),
                }
                for tool in request.tools
            ]
        return body

    def call(self, request: ModelRequest) -> ModelResponse | ProviderError:
        """One SDK call; never raises (see the contract's malformed_reply)."""
        body = self.build_request(request)

        def read(seen: UsageSeen) -> ModelResponse | ProviderError:
            if not self.settings.stream:
                interaction = self.client.interactions.create(**body, timeout=self.timeout_seconds)
                seen.usage = _usage(interaction.usage)
                reply = InteractionReply.model_validate(interaction)
                steps = [
                    step.model_dump(mode="json", exclude_unset=True, warnings=False) for step in interaction.steps or []
                ]
                return _normalize(reply.status, steps, seen.usage, reply.id)
            events = self.client.interactions.create(**body, stream=True, timeout=self.timeout_seconds)
            return _collect_stream(events, seen)

        # The SDK keeps the call's timeout as one deadline across its hops (the same deadline).
        return never_raising(read, self.classify, _interactions.APIError, (ContinuationTimeoutError,))

    def compact(self, request: ModelRequest) -> ModelResponse | ProviderError:
        return no_compaction_call(self)

    def classify(self, error: Exception) -> ProviderError:
        diagnostics: dict[str, Any] = {"error_class": type(error).__name__}
        if not isinstance(error, _interactions.APIStatusError):
            return ProviderError(ErrorKind.TRANSIENT, Usage(), diagnostics)  # a connection cut or timed out
        body: Any = error.body if isinstance(error.body, Mapping) else {}
        details: Any = body.get("error") if isinstance(body.get("error"), Mapping) else {}
        status_name = details.get("status") if isinstance(details.get("status"), str) else None
        code = error.status_code or 0
        diagnostics |= {"status": code, "error_type": status_name}
        wait = retry_after_seconds(error.response.headers)
        if code == 400 and _CONTEXT_OVERFLOW in str(details.get("message", "")):
            kind = ErrorKind.CONTEXT_OVERFLOW
        elif code in _TRANSIENT_STATUS or code >= 500:
            kind = ErrorKind.TRANSIENT
        else:
            kind = ErrorKind.FATAL
        return ProviderError(kind, Usage(), diagnostics, retry_after_seconds=wait)


def _collect_stream(events: Any, seen: UsageSeen) -> ModelResponse | ProviderError:
    """The steps rebuilt from a stream (each step's start with its deltas folded in), and the status
    and usage its interaction.completed event reports; a stream without one never finished."""
    steps: dict[int, dict[str, Any]] = {}
    arguments: dict[int, str] = {}  # a function call's arguments, as the JSON text its deltas carry
    final = None
    for event in events:
        kind = StreamEvent.model_validate(event).event_type
        if kind == "step.start":
            Step.model_validate(event.step)
            step = event.step.model_dump(mode="json", exclude_unset=True, warnings=False)
            if step.get("type") == "model_output":  # its text comes in deltas; a null content is said here
                null = "content" in event.step.model_fields_set and event.step.content is None
                step["content"] = None if null else step.get("content", [])
            steps[StepEvent.model_validate(event).index] = step
        elif kind == "step.delta":
            index, delta = StepEvent.model_validate(event).index, Delta.model_validate(event.delta)
            if delta.type == "arguments_delta":
                arguments[index] = arguments.get(index, "") + str(delta.arguments)
            else:
                _fold_delta(steps[index], delta, event.delta)
        elif kind == "interaction.completed":
            seen.usage = _usage(event.interaction.usage)
            final = InteractionReply.model_validate(event.interaction)
        elif kind not in ("interaction.created", "interaction.status_update", "step.stop"):
            return malformed_reply(ValueError(f"an unreadable stream event: {kind}"), seen.usage)
    if final is None:
        return malformed_reply(EOFError("the stream ended before interaction.completed"), seen.usage)
    for index, text in arguments.items():
        steps[index]["arguments"] = json.loads(text)  # not JSON: a malformed reply (never_raising)
    return _normalize(final.status, [steps[index] for index in sorted(steps)], seen.usage, final.id)


def _fold_delta(step: dict[str, Any], delta: Delta, sent: Any) -> None:
    """Fold one validated delta into its step; a summary part is kept as `sent` dumps it."""
    if delta.type == "thought_signature":
        step["signature"] = delta.signature
    elif delta.type == "thought_summary":
        step.setdefault("summary", []).append(sent.content.model_dump(mode="json", exclude_unset=True, warnings=False))
    elif delta.type == "text" and isinstance(step.get("content"), list):
        content = step["content"]
        if not content:
            content.append({"type": "text", "text": ""})
        content[-1]["text"] += delta.text


def _normalize(
    status: str, steps: list[dict[str, Any]], usage: Usage, interaction_id: str | None
) -> ModelResponse | ProviderError:
    model_steps = [step for step in steps if step.get("type") in MODEL_STEPS]
    shaped = [Step.model_validate(step) for step in model_steps]
    if status == "incomplete":
        refused = any(_is_safety_stop(step.error) for step in shaped)
        return ProviderError(ErrorKind.REFUSAL if refused else ErrorKind.TRUNCATED, usage, {"finish_reason": status})
    outputs = [step for step in model_steps if step.get("type") == "model_output"]
    calls = [
        ToolCall(str(step.id), str(step.name), dict(step.arguments or {}))
        for step in shaped
        if step.type == "function_call"
    ]
    carried = {"requires_action": bool(calls), "completed": bool(outputs)}.get(status, False)
    if not carried or any(not isinstance(step.get("content"), list) for step in outputs):
        return malformed_reply(ValueError(f"an interaction that cannot carry an action: {status}"), usage)
    text = "".join(text for step in outputs for text in _texts(step.get("content")))
    summaries = [_step_text(step, opaque=False) for step in model_steps if step.get("type") == "thought"]
    return ModelResponse(
        text=text,
        usage=usage,
        stop_reason=status,
        reasoning_summary=" ".join(summary for summary in summaries if summary) or None,
        response_id=interaction_id,
        native_items=tuple(model_steps),
        tool_calls=tuple(calls),
    )


def _is_safety_stop(error: StepError | None) -> bool:
    return error is not None and any(detail.reason == "SAFETY" for detail in error.details or [])


def _usage(value: object) -> Usage:
    """No usage is unreported usage."""
    usage = InteractionsUsage.model_validate(value) if value is not None else InteractionsUsage()
    thought = token_count(usage.total_thought_tokens)
    return Usage(
        input_tokens=token_count(usage.total_input_tokens),
        cached_input_tokens=token_count(usage.total_cached_tokens),
        output_tokens=token_count(usage.total_output_tokens) + thought,
        reasoning_tokens=thought,
    )
