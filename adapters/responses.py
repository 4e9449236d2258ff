"""openai.responses.v1: the OpenAI Responses API through the openai SDK, replaying native items.

A leaf action. Continuous conversation is stateless on the server (store false): every accepted
turn's input and EVERY native output item (reasoning with its encrypted content, messages, function
calls, compaction items) are sent again in the next request, in order, exactly as returned, less
`created_by` on compaction items (the input schema rejects it) and the response-only `status` on
reasoning items (the input schema takes it, but replay does not need it; the seed's reference
adapter drops it). Items are kept as the JSON the server sent, so supplied empty fields stay and no
field is invented. previous_response_id instead sends only the new input and the handle.

A reply is usable only when its status is completed; incomplete (output limit, content filter),
failed, or a stream that ends early never yields an action. Streaming is a transport setting: the
adapter waits for the terminal event and its usage either way.

A reply is read as the JSON the server sent (the SDK's raw `object` cast) and validated against the
shapes below before any of it is read: a string `id` and `status`, an `output` list of items each
with a string `type`; a message's `content` a list of parts, a text part (`output_text`, or a
compaction's kept `input_text`) with a string `text`; a reasoning item's `summary` a list of
parts with a string `text`, its `encrypted_content` a string or absent; a string `code` where an
error or a stream's error event has one; every usage count a non-negative integer or absent. A
compaction item must carry its `encrypted_content` as a nonempty string: it is what the next
request replays, and the input schema requires it (the SDK's ResponseCompactionItemParamParam:
`encrypted_content: Required[str]`; its ResponseCompactionItem types it `str`; every compaction
item in the recorded traffic has one), so one without it, inline in an action reply or in a
/responses/compact reply, is a malformed reply, retried, never a compaction to commit (xAI's
`encrypted_content: null` was accepted, and the next request refused, fatally).

Function tools. A request's tools go as `tools: [{"type": "function", "name", "description",
"parameters"}]` (the spec's FunctionTool; `strict` is left out, so the service uses strict
validation when the schema allows it, its documented default); a request without tools sends no
tools field at all. A reply's calls are its `function_call` output items, in output order: each
with a string `call_id` (the id its result answers), `name` and `arguments`, a JSON string that must
parse to an object, else the reply is malformed (as a reply whose shape breaks). A completed reply
may hold calls and no message (recorded thinking_with_tool_calls and streaming_usage: [reasoning,
function_call]); one with neither is malformed. The calls stay among the native items exactly as
returned, beside the reasoning item that preceded them, which a store-false replay must carry
(responses_conversation.py, rule 7). Results are `function_call_output` input items (the recorded
second request: {type, call_id, output}); refusals of the pairing (an unanswered call, an orphan or
a duplicate output) are 400 invalid_request_error, fatal: the harness built the request wrong.

For the stale tool-result offload, `ResponsesItems.tool_results` lists each function_call_output,
named by the function_call item with its call_id (the recorded second request: message, reasoning,
function_call, function_call_output), its text its `output` (a string or input_text parts, the
SDK's FunctionCallOutput), an error one behind ERROR_PREFIX; `with_tool_result_text` copies it with
a new `output` string. Reasoning and compaction items are passed over by their type, never read.

A reply known only by its projection (a resume without the continuation, a model switch:
`ResponsesItems.projected_reply_items`) replays as a short-form assistant message {role, content:
its text} (none when the text is empty), then a `function_call` item {type, call_id, name,
arguments: a JSON string} per call, and nothing else. Not the output form of a message: the SDK's
ResponseOutputMessageParam requires the `id` the service minted, and a message or call replayed by
its id without the reasoning item it came with is refused ("Item 'msg_...' of type 'message' was
provided without its required 'reasoning' item", local_provider/responses_conversation.py rule 7).
The short form (EasyInputMessageParam: role assistant, content a string, "can also contain previous
assistant responses") is what the real service answered 200 in the recorded
thinking_with_modified_history third request: assistant messages of string content, no reasoning,
no id. ResponseFunctionToolCallParam requires only type, call_id, name and arguments.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal, Self

import openai
from openai import Stream
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from turnstate.adapters import openai_sdk
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
    ToolSpec,
    Transcript,
    Usage,
    UsageSeen,
    UserInput,
    input_parts,
    malformed_reply,
    never_raising,
    reported_cost,
    schema_problems,
    token_count,
    with_extra_body,
)
from turnstate.adapters.image_costs import OPENAI_IMAGE_DETAIL, OPENAI_IMAGE_LIMITS, ImageLimits
from turnstate.adapters.images import ImagePart
from turnstate.adapters.tokens import content_text, item_text, item_tokens, readable_content

ENCRYPTED_REASONING = "reasoning.encrypted_content"
RESPONSE_ONLY_FIELDS = {"reasoning": "status", "compaction": "created_by"}  # item type -> field replay drops
RESPONSES_PATH = "/responses"
COMPACT_PATH = "/responses/compact"
MIN_OUTPUT_TOKENS = 16  # OpenAI's spec: CreateResponse.max_output_tokens minimum 16
MIN_COMPACT_THRESHOLD = 1000  # OpenAI's spec: ContextManagementParam.compact_threshold minimum 1000
TEXT_PARTS = ("output_text", "input_text")
ERROR_PREFIX = "ERROR: "  # how a failed tool call's output says so (function_call_output has no flag)
_INCOMPLETE_ERRORS = {"max_output_tokens": ErrorKind.TRUNCATED, "content_filter": ErrorKind.REFUSAL}
_TERMINAL_EVENTS = {"response.completed", "response.incomplete", "response.failed"}


class ResponsesItems:
    """The Responses transcript: a turn opens with one user message holding its inputs; a reply adds
    every native output item, replay-ready."""

    def user_items(self, inputs: Sequence[Input]) -> list[Item]:
        """One user message: its text as `content`, or with images a list of `input_text` parts and
        `input_image` parts {image_url: a PNG data URL, detail: high} (the SDK's ResponseInputImageParam,
        whose `detail` is required)."""
        parts = input_parts(inputs)
        if len(parts) == 1 and isinstance(parts[0], str):
            return [{"role": "user", "content": parts[0]}]
        return [{"role": "user", "content": _input_content(parts)}]

    def reply_items(self, response: ModelResponse) -> list[Item]:
        return [dict(item) for item in response.native_items]

    def projected_reply_items(self, text: str, tool_calls: Sequence[ToolCall]) -> list[Item]:
        """The text as one short-form assistant message {role, content} (omitted when empty), then one
        `function_call` item {type, call_id, name, arguments} per call, its arguments a JSON string:
        no item id, reasoning or status (see the module docstring for the evidence)."""
        message = [{"role": "assistant", "content": text}] if text else []
        calls = [
            {
                "type": "function_call",
                "call_id": call.id,
                "name": call.name,
                "arguments": json.dumps(dict(call.arguments)),
            }
            for call in tool_calls
        ]
        return [*message, *calls]

    def tool_result_items(self, results: Sequence[ToolResult]) -> list[Item]:
        """One `function_call_output` item {type, call_id, output} per result, in the calls' order,
        to follow the reply's items (the recorded thinking_with_tool_calls second request; the spec's
        FunctionCallOutputItemParam). Its output is the text, or, for a result that shows images, an
        `input_text` part and the `input_image` parts a user message holds (the SDK's
        ResponseFunctionCallOutputItemListParam). The item has no error flag, so a failed call's text
        is behind ERROR_PREFIX, which the model reads."""
        items: list[Item] = []
        for result in results:
            text = ERROR_PREFIX + result.content if result.is_error else result.content
            output: str | list[dict[str, str]] = (
                _input_content(input_parts([UserInput(text, result.images)])) if result.images else text
            )
            items.append({"type": "function_call_output", "call_id": result.call_id, "output": output})
        return items

    def tool_results(self, items: Sequence[Item]) -> list[ToolResultAt]:
        """Each function_call_output item, named by the function_call item with its call_id; its
        output is a string or input_text parts (the SDK's FunctionCallOutput), an error one behind
        ERROR_PREFIX. Reasoning and compaction items are passed over by their type."""
        names: dict[str, str] = {}
        found = []
        for index, item in enumerate(items):
            kind = item.get("type")
            if kind == "function_call":
                names[str(item.get("call_id"))] = str(item.get("name"))
            elif kind == "function_call_output":
                call_id = str(item.get("call_id"))
                text = content_text(item.get("output"))
                found.append(ToolResultAt(index, call_id, names.get(call_id, ""), text, text.startswith(ERROR_PREFIX)))
        return found

    def with_tool_result_text(self, item: Item, call_id: str, text: str) -> Item:
        if item.get("type") != "function_call_output" or item.get("call_id") != call_id:
            raise NoSuchToolResult(call_id)
        return {**item, "output": text}

    def estimate_tokens(self, items: Sequence[Item], system: str = "") -> int:
        instructions = item_tokens({"type": "instructions", "text": system}) if system else 0
        return instructions + sum(item_tokens(item) for item in items)

    def readable(self, items: Sequence[Item]) -> list[dict[str, str]]:
        return [_readable(item) for item in items]

    def latest_compaction(self, items: Sequence[Item]) -> int | None:
        found = [index for index, item in enumerate(items) if item.get("type") == "compaction"]
        return found[-1] if found else None


def _input_content(parts: Sequence[str | ImagePart]) -> list[dict[str, str]]:
    """Input parts as Responses lays them out: `input_text` {text} and `input_image` {image_url: a PNG
    data URL, detail: high} (the SDK's ResponseInputImageParam, whose `detail` is required)."""
    return [
        {"type": "input_text", "text": part}
        if isinstance(part, str)
        else {"type": "input_image", "image_url": part.data_url, "detail": OPENAI_IMAGE_DETAIL}
        for part in parts
    ]


def _readable(item: Item) -> dict[str, str]:
    kind = str(item.get("type", "message"))
    if kind == "message":
        return {"role": str(item.get("role", "assistant")), "content": readable_content(item.get("content"))}
    if kind == "reasoning":
        summary = " ".join(str(part.get("text", "")) for part in item.get("summary") or [])
        return {"role": "reasoning", "content": summary}
    if kind == "compaction":
        return {"role": "compaction", "content": "[the history before this point, compacted by the provider]"}
    if kind == "function_call_output":
        return {"role": "tool", "content": readable_content(item.get("output"))}
    return {"role": kind, "content": item_text(item)}


class InputDetails(ReplyShape):
    cached_tokens: TokenCount = None
    cache_write_tokens: TokenCount = None


class OutputDetails(ReplyShape):
    reasoning_tokens: TokenCount = None


class ResponsesUsage(ReplyShape):
    input_tokens: TokenCount = None
    output_tokens: TokenCount = None
    input_tokens_details: InputDetails | None = None
    output_tokens_details: OutputDetails | None = None
    cost: object = None  # a provider's own figure; see the contract's reported_cost


class ContentPart(ReplyShape):
    type: str
    text: str | None = None
    refusal: str | None = None

    @model_validator(mode="after")
    def _text_part_has_its_text(self) -> Self:
        if self.type in TEXT_PARTS and self.text is None:
            raise ValueError(f"a {self.type} part without its text")
        return self


class SummaryPart(ReplyShape):
    text: str


class OutputItem(ReplyShape):
    type: str
    role: str | None = None
    content: list[ContentPart] | None = None
    summary: list[SummaryPart] | None = None
    encrypted_content: str | None = None
    name: str | None = None
    arguments: str | None = None
    call_id: str | None = None

    @model_validator(mode="after")
    def _replayable(self) -> Self:
        if self.type == "function_call" and None in (self.call_id, self.name, self.arguments):
            raise ValueError("a function call without its call_id, name or arguments")
        if self.type == "message" and self.content is None:
            raise ValueError("a message without its content list")
        if self.type == "reasoning" and self.summary is None:
            raise ValueError("a reasoning item without its summary list")
        if self.type == "compaction" and not self.encrypted_content:
            raise ValueError("a compaction item without encrypted content cannot be replayed")
        return self


class IncompleteDetails(ReplyShape):
    reason: str | None = None


class ResponseError(ReplyShape):
    code: str | None = None


class ResponseReply(ReplyShape):
    id: str
    status: str
    output: list[OutputItem]
    incomplete_details: IncompleteDetails | None = None
    error: ResponseError | None = None


class CompactionReply(ReplyShape):
    id: str
    output: list[OutputItem]


class StreamEvent(ReplyShape):
    type: str
    code: str | None = None


class _Options(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class ReasoningOptions(_Options):
    effort: Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"] | None = Field(
        default=None, description="how much the model reasons; absent: the model's default"
    )
    summary: Literal["auto", "concise", "detailed"] | None = Field(
        default=None, description="the reasoning summaries the reply carries; continuous_conversation needs `auto`"
    )
    context: Literal["auto", "current_turn", "all_turns"] | None = Field(
        default=None,
        description="which turns' reasoning the model reads; continuous_conversation needs `auto` (the model's own "
        "choice)",
    )


class CompactionSetting(_Options):
    type: Literal["compaction"] = Field(description="the kind of context management: compaction")
    compact_threshold: int = Field(
        ge=1,
        description=f"the prompt tokens past which the server compacts; at least {MIN_COMPACT_THRESHOLD} (OpenAI's "
        "minimum), and it plus `request.max_output_tokens` must fit `agent.max_context_length`",
    )


# The options that would take the conversation state from the strategy, each with why it refuses them.
STATE_OPTIONS: Mapping[str, str] = {
    "background": "background mode cannot hand a reply to the machine",
    "conversation": "a server conversation replaces the strategy's own state",
    "previous_response_id": "the strategy sets the handle, not the profile",
}


class ResponsesOptions(_Options):
    """`request.options` for the Responses API: what it sends beside the model and the output limit."""

    store: bool | None = Field(
        default=None,
        description="`false` for continuous_conversation (required), `true` or absent for previous_response_id",
    )
    include: list[str] = Field(
        default_factory=list,
        description=f"must hold `{ENCRYPTED_REASONING}` for continuous_conversation",
    )
    reasoning: ReasoningOptions | None = Field(
        default=None, description="continuous_conversation needs `summary: auto` and `context: auto`"
    )
    context_management: list[CompactionSetting] | None = Field(
        default=None,
        description="OpenAI's inline native compaction, once the prompt passes `compact_threshold` tokens: required "
        "with `runtime.compaction.strategy: native`, refused without it; refused on xAI, which compacts by a call of "
        "its own once the history passes `runtime.compaction.trigger_tokens`",
    )
    background: bool | None = Field(default=None, description=f"refused: {STATE_OPTIONS['background']}")
    conversation: str | None = Field(default=None, description=f"refused: {STATE_OPTIONS['conversation']}")
    previous_response_id: str | None = Field(
        default=None, description=f"refused: {STATE_OPTIONS['previous_response_id']}"
    )
    truncation: Literal["auto", "disabled"] | None = Field(
        default=None,
        description="`auto` lets the server drop a stored previous_response_id chain's oldest turns once it outgrows "
        "the model's window, rather than refuse the request (how such a run plays a game longer than the window); "
        "refused for continuous_conversation, whose replay it would cut unseen",
    )


class ResponsesAdapter:
    transcript: ClassVar[Transcript] = ResponsesItems()
    native_compaction: ClassVar[NativeCompaction | None] = "inline"  # request.options.context_management
    summary_compaction: ClassVar[SummaryCompaction | None] = SummaryCompaction()
    acts_through_tools: ClassVar[bool] = False
    takes_temperature: ClassVar[bool] = True
    body_fields: ClassVar[Mapping[str, str] | None] = {
        "model": "request.model",
        "instructions": "the system prompt",
        "input": "the conversation",
        "max_output_tokens": "request.max_output_tokens",
        "tools": "the run's tools",
        "temperature": "request.temperature",
        "stream": "request.stream",
        **{name: f"request.options.{name}" for name in ResponsesOptions.model_fields},
    }
    grammar_field: ClassVar[str | None] = "grammar"  # llama.cpp's llama-server
    options_model: ClassVar[type[BaseModel] | None] = ResponsesOptions
    image_limits: ClassVar[ImageLimits | None] = OPENAI_IMAGE_LIMITS

    def __init__(self, client: openai.OpenAI, settings: RequestSettings) -> None:
        self.client = client
        self.settings = settings
        self.options = ResponsesOptions.model_validate(dict(settings.options))

    @classmethod
    def connect(cls, endpoint: Endpoint, settings: RequestSettings) -> ResponsesAdapter:
        return cls(openai_sdk.client_for(endpoint), settings)

    @classmethod
    def check_options(
        cls, options: Mapping[str, Any], strategy: str, compaction: str, model: str = ""
    ) -> list[OptionProblem]:
        """What `request.options` must say for the strategy, each violation with its fix."""
        try:
            parsed = ResponsesOptions.model_validate(dict(options))
        except ValidationError as error:
            return schema_problems(error.errors(), "see request.options in docs/profiles.md")
        return cls.option_rules(parsed, strategy, compaction)

    @classmethod
    def check_limits(cls, bounds: RequestBounds) -> list[OptionProblem]:
        """Every output cap sent is at least the API's floor, and an inline compaction's threshold is
        at least its minimum and leaves room for the output cap, or it could never fire before the
        context budget is spent."""
        problems = [
            OptionProblem(
                key,
                f"{cap} is below the Responses API's floor of {MIN_OUTPUT_TOKENS} output tokens",
                f"make it at least {MIN_OUTPUT_TOKENS}",
            )
            for key, cap in bounds.output_caps
            if cap < MIN_OUTPUT_TOKENS
        ]
        output, capacity = bounds.max_output_tokens, bounds.max_context_length
        for index, setting in enumerate(bounds.options.get("context_management") or ()):
            key, threshold = (
                f"request.options.context_management.{index}.compact_threshold",
                setting["compact_threshold"],
            )
            if threshold < MIN_COMPACT_THRESHOLD:
                problems.append(
                    OptionProblem(
                        key,
                        f"{threshold} is below the Responses API's minimum of {MIN_COMPACT_THRESHOLD}",
                        f"make it at least {MIN_COMPACT_THRESHOLD}",
                    )
                )
            elif threshold + output > capacity:
                problems.append(
                    OptionProblem(
                        key,
                        f"{threshold} + request.max_output_tokens {output} = {threshold + output} exceeds "
                        f"agent.max_context_length {capacity}, so a request just below it would not fit",
                        f"set it at most {capacity - output}",
                    )
                )
        return problems

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
        if request.tools:
            body["tools"] = [_function_tool(tool) for tool in request.tools]
        if request.previous_response_id is not None:
            body["previous_response_id"] = request.previous_response_id
        if self.settings.temperature is not None:
            body["temperature"] = self.settings.temperature
        return with_extra_body(body, self.settings.extra_body)

    def call(self, request: ModelRequest) -> ModelResponse | ProviderError:
        """One SDK call; never raises (see the contract's malformed_reply)."""
        body = self.build_request(request)
        return never_raising(lambda seen: self._read(body, seen), self.classify, openai.APIError)

    def _read(self, body: dict[str, Any], seen: UsageSeen) -> ModelResponse | ProviderError:
        # Through the SDK's own POST, as adapters/chat_completions.py does and for the same reason:
        # the body is final, and `create`'s transform over every input item grows with the history.
        # The reply comes back as the JSON sent (cast to `object`), to be validated by its shape.
        if self.settings.stream:
            events = self.client.post(
                RESPONSES_PATH, body={**body, "stream": True}, cast_to=object, stream=True, stream_cls=Stream[object]
            )
            return self._collect_stream(events, seen)
        return self._normalize(self.client.post(RESPONSES_PATH, body=body, cast_to=object), seen)

    def compact(self, request: ModelRequest) -> ModelResponse | ProviderError:
        """POST /responses/compact over `request.items`; its output (the kept messages and one
        compaction item) replaces them. Never raises."""
        return never_raising(lambda seen: self._read_compaction(request, seen), self.classify, openai.APIError)

    def _read_compaction(self, request: ModelRequest, seen: UsageSeen) -> ModelResponse | ProviderError:
        # The SDK's `responses.compact` posts exactly this (unset parameters are dropped); its POST is
        # called directly for the reply's raw JSON.
        body = {
            "model": self.settings.model,
            "input": [dict(item) for item in request.items],
            "instructions": request.system,
        }
        raw: Any = self.client.post(COMPACT_PATH, body=body, cast_to=object)
        seen.usage = _usage(_field(raw, "usage"))
        compacted = CompactionReply.model_validate(raw)
        items = [_replayable(item) for item in raw["output"]]
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
            for raw in stream:
                event = StreamEvent.model_validate(raw)
                if event.type == "error":
                    return ProviderError(
                        ErrorKind.TRANSIENT, seen.usage, {"error_class": "StreamError", "code": event.code}
                    )
                if event.type in _TERMINAL_EVENTS:
                    final = raw["response"]
        if final is None:
            # The stream ended without its terminal event: treat like a cut connection.
            return ProviderError(ErrorKind.TRANSIENT, seen.usage, {"error_class": "IncompleteStream"})
        return self._normalize(final, seen)

    def _normalize(self, raw: Any, seen: UsageSeen) -> ModelResponse | ProviderError:
        seen.usage = _usage(_field(raw, "usage"))
        response = ResponseReply.model_validate(raw)
        if response.status == "incomplete":
            reason = response.incomplete_details.reason if response.incomplete_details else None
            kind = _INCOMPLETE_ERRORS.get(reason or "", ErrorKind.TRANSIENT)
            return ProviderError(kind, seen.usage, {"finish_reason": f"incomplete:{reason}"})
        if response.status != "completed":
            code = response.error.code if response.error else None
            return ProviderError(ErrorKind.TRANSIENT, seen.usage, {"finish_reason": response.status, "code": code})
        items = [_replayable(item) for item in raw["output"]]
        messages = [item for item in response.output if item.type == "message"]
        calls = [_tool_call(item) for item in response.output if item.type == "function_call"]
        if not messages and not calls:
            return malformed_reply(ValueError("a completed response without a message or a call"), seen.usage)
        if any(part.type == "refusal" for item in messages for part in item.content or []):
            return ProviderError(ErrorKind.REFUSAL, seen.usage, {"finish_reason": "refusal"})
        summaries = [_readable(item)["content"] for item in items if item.get("type") == "reasoning"]
        return ModelResponse(
            text="".join(content_text(item.get("content")) for item in items if item.get("type") == "message"),
            usage=seen.usage,
            stop_reason="completed",
            reasoning_summary=" ".join(summary for summary in summaries if summary) or None,
            response_id=response.id,
            native_items=tuple(items),
            tool_calls=tuple(calls),
        )


def _function_tool(tool: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "name": tool.name,
        "description": tool.description,
        "parameters": dict(tool.parameters),
    }


def _tool_call(item: OutputItem) -> ToolCall:
    """A validated function_call item as a ToolCall; arguments that are not a JSON object raise
    (a malformed reply)."""
    arguments = json.loads(str(item.arguments))
    if not isinstance(arguments, dict):
        raise ValueError("a function call whose arguments are not a JSON object")
    return ToolCall(str(item.call_id), str(item.name), arguments)


def _field(raw: object, name: str) -> object:
    """One field of a reply that may not even be an object (its shape says so next)."""
    return raw.get(name) if isinstance(raw, Mapping) else None


def _replayable(item: dict[str, Any]) -> dict[str, Any]:
    """The output item as the next request's input: only the response-only field is dropped."""
    dropped = RESPONSE_ONLY_FIELDS.get(item.get("type", ""))
    return {key: value for key, value in item.items() if key != dropped}


def state_problems(options: ResponsesOptions, strategy: str) -> list[OptionProblem]:
    """The rules of every Responses surface: the strategy owns the conversation state, and continuous
    conversation is stateless on the server and replays encrypted reasoning."""
    problems = [OptionProblem(name, why, "remove it") for name, why in STATE_OPTIONS.items() if getattr(options, name)]
    if strategy == "continuous_conversation":
        if options.store is not False:
            problems.append(
                OptionProblem("store", "continuous conversation is stateless on the server", "set store: false")
            )
        if ENCRYPTED_REASONING not in options.include:
            why = "without encrypted reasoning the replay loses the model's reasoning"
            problems.append(OptionProblem("include", why, f"add {ENCRYPTED_REASONING}"))
        if options.truncation == "auto":
            why = "the server would drop the oldest of the items the strategy replays, unseen by it"
            problems.append(OptionProblem("truncation", why, "remove it, and compact (runtime.compaction)"))
    if strategy == "previous_response_id" and options.store is False:
        problems.append(
            OptionProblem("store", "previous_response_id continues a stored response", "set store: true or remove it")
        )
    return problems


def _usage(value: object) -> Usage:
    """No usage is unreported usage."""
    if value is None:
        return Usage()
    usage = ResponsesUsage.model_validate(value)
    inputs = usage.input_tokens_details or InputDetails()
    outputs = usage.output_tokens_details or OutputDetails()
    return Usage(
        input_tokens=token_count(usage.input_tokens),
        cached_input_tokens=token_count(inputs.cached_tokens),
        output_tokens=token_count(usage.output_tokens),
        reasoning_tokens=token_count(outputs.reasoning_tokens),
        cache_write_tokens=token_count(inputs.cache_write_tokens),
        cost=reported_cost(usage),
    )
