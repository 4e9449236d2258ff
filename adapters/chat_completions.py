"""openai.chat_completions.v1: plain OpenAI-compatible Chat Completions through the openai SDK.

A leaf action: it sends the strategy's messages behind the system prompt, waits for the whole text
and the usage (streamed or not), and reports what happened. Refusal (finish_reason content_filter)
and truncation (finish_reason length) are errors of their own kinds: neither can carry an action.

A reply is read as the JSON the server sent (the SDK's raw `object` cast: its models are built
without validation) and validated against the shapes below before any of it is read: the
completion's `id` a string or absent, at least one choice, its `message` with `content` a string
or null, any `tool_calls` each with a string `id`, `type`, `function.name` and
`function.arguments`, a string `finish_reason`; a streamed chunk's `choices` and `delta` alike,
its tool-call pieces indexed by an integer, its `finish_reason` a string or null; the reasoning
under each configured alias a string or null; every usage count a non-negative integer or absent
(prompt_tokens, completion_tokens and their details, DeepSeek's prompt_cache_hit_tokens).
Anything else is a malformed reply. Evidence: the SDK's own types (ChatCompletion: `finish_reason`
a required literal, `message.content` Optional[str]; ChatCompletionMessageFunctionToolCall: `id`,
`type`, `function.name`, `function.arguments` required strings; CompletionUsage: integer counts),
and the recorded chat replies (a whole reply's finish_reason a string, a stream's null until its
last chunk).

Function tools. A request's `tools` go out as `[{"type": "function", "function": {name,
description, parameters}}]`, and no `tools` key at all when it offers none, so a request without
tools is the body it always was (the SDK's ChatCompletionFunctionToolParam). The calls a reply makes
arrive in `message.tool_calls` (a stream's in indexed pieces, gathered in index order), each
`{id, type: "function", function: {name, arguments}}` with `arguments` a JSON string; they become
`ModelResponse.tool_calls` in that order, and a call whose arguments are not a JSON object is a
malformed reply. The accepted answer keeps them exactly as returned, beside its content and its
reasoning string (DeepSeek's and the open-weight servers' chat templates read it back with the
calls: recorded DeepSeek requests replay `reasoning_content` on every message that made a call).
Their results are `{"role": "tool", "tool_call_id", "content"}` messages right after it, one per
call (ChatMessages.tool_result_items). A request that breaks that pairing is OpenAI's 400
`invalid_request_error`, code null, naming the message (an unanswered call, a result that answers
no call, or one answered twice): the harness's own bug, so FATAL, as every 400 that is not an
overflow is.

For the stale tool-result offload, `ChatMessages.tool_results` lists each tool message, named by the
`tool_calls[].function.name` of the assistant message whose call it answers, its text its `content`
(a string or text parts: the SDK's ChatCompletionToolMessageParam takes either), an error one whose
text begins with ERROR_RESULT_PREFIX, as tool_result_items writes it (the wire has no flag).
`with_tool_result_text` copies one tool message with a new `content` string; the recorded DeepSeek
requests replay tool messages as {role, tool_call_id, content} and nothing else.

A reply known only by its projection (a resume without the continuation, a model switch:
`ChatMessages.projected_reply_items`) replays as one assistant message {role, content} with its
calls as `tool_calls`, each {id, type: "function", function: {name, arguments: a JSON string}}, and
no reasoning string: the SDK's ChatCompletionAssistantMessageParam, whose `content` is "Required
unless `tool_calls` ... is specified", so a reply that only called tools has content null, as the
recorded DeepSeek request sends a client-made call (deferred_capability_with_thinking, answered 200).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import openai
from openai import Stream
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

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
    input_parts,
    never_raising,
    no_compaction_call,
    reported_cost,
    text_content,
    token_count,
    with_extra_body,
)
from turnstate.adapters.image_costs import OPENAI_IMAGE_DETAIL, OPENAI_IMAGE_LIMITS, ImageLimits
from turnstate.adapters.images import ImagePart
from turnstate.adapters.json_bytes import json_bytes
from turnstate.adapters.tokens import estimate_messages_tokens, readable_content

COMPLETIONS_PATH = "/chat/completions"
_FINISH_ERRORS = {"length": ErrorKind.TRUNCATED, "content_filter": ErrorKind.REFUSAL}


class PromptDetails(ReplyShape):
    cached_tokens: TokenCount = None
    cache_write_tokens: TokenCount = None


class CompletionDetails(ReplyShape):
    reasoning_tokens: TokenCount = None


class ChatUsage(ReplyShape):
    prompt_tokens: TokenCount = None
    completion_tokens: TokenCount = None
    prompt_cache_hit_tokens: TokenCount = None  # DeepSeek's cache reads
    prompt_tokens_details: PromptDetails | None = None
    completion_tokens_details: CompletionDetails | None = None
    cost: object = None  # a provider's own figure (OpenRouter's); see the contract's reported_cost


class ToolFunction(ReplyShape):
    name: str
    arguments: str


class ToolCallShape(ReplyShape):
    id: str
    type: str
    function: ToolFunction


class ChatMessage(ReplyShape):
    content: str | None = None
    tool_calls: list[ToolCallShape] | None = None


class ChatChoice(ReplyShape):
    message: ChatMessage
    finish_reason: str


class ChatReply(ReplyShape):
    id: str | None = None
    choices: list[ChatChoice] = Field(min_length=1)


class ToolFunctionPiece(ReplyShape):
    name: str | None = None
    arguments: str | None = None


class ToolCallPiece(ReplyShape):
    index: int
    id: str | None = None
    type: str | None = None
    function: ToolFunctionPiece | None = None


class ChatDelta(ReplyShape):
    content: str | None = None
    tool_calls: list[ToolCallPiece] | None = None


class ChunkChoice(ReplyShape):
    delta: ChatDelta
    finish_reason: str | None = None


class ChatChunk(ReplyShape):
    id: str | None = None
    choices: list[ChunkChoice] = []
    usage: ChatUsage | None = None


_REASONING: TypeAdapter[str | None] = TypeAdapter(str | None, config=ConfigDict(strict=True))


ERROR_RESULT_PREFIX = "Error: "


IMAGES_FOLLOW = "The result shows {count} image(s): its text and its images follow in the next user message."


def _content_parts(parts: Sequence[str | ImagePart]) -> list[dict[str, Any]]:
    """Input parts as Chat Completions lays them out: `text` parts and `image_url` parts {url: a PNG
    data URL, detail: high} (the SDK's ChatCompletionContentPart*Param)."""
    return [
        {"type": "text", "text": part}
        if isinstance(part, str)
        else {"type": "image_url", "image_url": {"url": part.data_url, "detail": OPENAI_IMAGE_DETAIL}}
        for part in parts
    ]


class ChatMessages:
    """The Chat Completions transcript: plain {role, content} messages. A turn is one user message
    holding every input since the last reply (joined by blank lines), then the assistant's reply (with
    its `tool_calls` as returned, if it made any, and their tool messages)."""

    def user_items(self, inputs: Sequence[Input]) -> list[Item]:
        """One user message: its text as `content`, or with images a list of `text` parts and
        `image_url` parts {url: a PNG data URL, detail: high} (the SDK's ChatCompletionContentPart*Param)."""
        parts = input_parts(inputs)
        if len(parts) == 1 and isinstance(parts[0], str):
            return [{"role": "user", "content": parts[0]}]
        return [{"role": "user", "content": _content_parts(parts)}]

    def reply_items(self, response: ModelResponse) -> list[Item]:
        return [dict(item) for item in response.native_items]

    def projected_reply_items(self, text: str, tool_calls: Sequence[ToolCall]) -> list[Item]:
        """One assistant message: its text as `content` (null when it only called tools), and its
        calls as `tool_calls` [{id, type: "function", function: {name, arguments}}], the arguments a
        JSON string; no reasoning string (see the module docstring for the evidence)."""
        if not tool_calls:
            return [{"role": "assistant", "content": text}] if text else []
        calls = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(dict(call.arguments))},
            }
            for call in tool_calls
        ]
        return [{"role": "assistant", "content": text or None, "tool_calls": calls}]

    def tool_result_items(self, results: Sequence[ToolResult]) -> list[Item]:
        """One `{"role": "tool", "tool_call_id", "content"}` message per result, in the calls' order,
        right after the assistant message that made the calls. The wire has no error flag: a failed
        call's text is sent behind ERROR_RESULT_PREFIX. Evidence: the SDK's
        ChatCompletionToolMessageParam (role, content, tool_call_id: nothing else), and OpenAI's 400
        for an assistant message with `tool_calls` not "followed by tool messages responding to each
        'tool_call_id'" (local_provider/chat_completions_request.py quotes it).

        A tool message takes text only (ChatCompletionToolMessageParam's content: a string or text
        parts), so a result that shows images is shown, text and images together, by one user message
        after the tool messages: its tool message says so (IMAGES_FOLLOW), and the user message holds,
        for each such result in order, a text part naming its call with the result's text, then its
        image parts (the layout pydantic-ai's OpenAI chat model gives a tool's images)."""
        messages: list[Item] = []
        shown: list[str | ImagePart] = []
        for result in results:
            text = result.content
            if result.images:
                shown += [f"The result of call {result.call_id}:\n{text}", *result.images]
                text = IMAGES_FOLLOW.format(count=len(result.images))
            content = f"{ERROR_RESULT_PREFIX}{text}" if result.is_error else text
            messages.append({"role": "tool", "tool_call_id": result.call_id, "content": content})
        return [*messages, *([{"role": "user", "content": _content_parts(shown)}] if shown else [])]

    def tool_results(self, items: Sequence[Item]) -> list[ToolResultAt]:
        """Each tool message, named by the `tool_calls[].function.name` of the assistant message that
        made its call; an error is a text behind ERROR_RESULT_PREFIX (the wire has no flag)."""
        names: dict[str, str] = {}
        found = []
        for index, item in enumerate(items):
            role = item.get("role")
            if role == "assistant":
                for call in item.get("tool_calls") or ():
                    names[call["id"]] = call["function"]["name"]
            elif role == "tool":
                call_id = str(item.get("tool_call_id"))
                text = text_content(item.get("content"))
                found.append(
                    ToolResultAt(index, call_id, names.get(call_id, ""), text, text.startswith(ERROR_RESULT_PREFIX))
                )
        return found

    def with_tool_result_text(self, item: Item, call_id: str, text: str) -> Item:
        if item.get("role") != "tool" or item.get("tool_call_id") != call_id:
            raise NoSuchToolResult(call_id)
        return {**item, "content": text}

    def estimate_tokens(self, items: Sequence[Item], system: str = "") -> int:
        head = [{"role": "system", "content": system}] if system else []
        return estimate_messages_tokens([*head, *items])

    def readable(self, items: Sequence[Item]) -> list[dict[str, str]]:
        return [{"role": str(item["role"]), "content": _readable_content(item)} for item in items]

    def latest_compaction(self, items: Sequence[Item]) -> int | None:
        return None  # Chat Completions has no compaction items


def _readable_content(message: Item) -> str:
    """A message's text, and the tool calls it made as `name(arguments)` lines (never its reasoning)."""
    calls = [
        f"{call['function']['name']}({call['function']['arguments']})"
        for call in message.get("tool_calls") or []
        if isinstance(call, Mapping) and isinstance(call.get("function"), Mapping)
    ]
    return "\n".join(part for part in [readable_content(message.get("content")), *calls] if part)


class ChatCompletionsAdapter:
    transcript: ClassVar[Transcript] = ChatMessages()
    native_compaction: ClassVar[NativeCompaction | None] = None
    summary_compaction: ClassVar[SummaryCompaction | None] = None
    acts_through_tools: ClassVar[bool] = False
    takes_temperature: ClassVar[bool] = True
    # Where a server returns an answer's reasoning string, read from the reply and replayed with the
    # answer under each of these names; none here: OpenAI's models do not show their reasoning.
    reasoning_aliases: tuple[str, ...] = ()
    body_fields: ClassVar[Mapping[str, str] | None] = {
        "model": "request.model",
        "messages": "the conversation",
        "max_tokens": "request.max_output_tokens (request.output_limit_param)",
        "max_completion_tokens": "request.max_output_tokens (request.output_limit_param)",
        "temperature": "request.temperature",
        "tools": "the run's tools",
        "stream": "request.stream",
        "stream_options": "request.stream",
    }
    grammar_field: ClassVar[str | None] = "grammar"  # llama.cpp's llama-server
    options_model: ClassVar[type[BaseModel] | None] = None  # Chat Completions takes no request.options
    image_limits: ClassVar[ImageLimits | None] = OPENAI_IMAGE_LIMITS

    def __init__(self, client: openai.OpenAI, settings: RequestSettings) -> None:
        self.client = client
        self.settings = settings

    @classmethod
    def connect(cls, endpoint: Endpoint, settings: RequestSettings) -> ChatCompletionsAdapter:
        return cls(openai_sdk.client_for(endpoint), settings)

    @classmethod
    def check_options(
        cls, options: Mapping[str, Any], strategy: str, compaction: str, model: str = ""
    ) -> list[OptionProblem]:
        return [OptionProblem(key, "Chat Completions takes no request.options", "remove it") for key in options]

    @classmethod
    def check_limits(cls, bounds: RequestBounds) -> list[OptionProblem]:
        """Chat Completions servers bound nothing across a profile's sections that validation can know."""
        return []

    def build_request(self, request: ModelRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.settings.model,
            # The items themselves, not copies: the SDK only serializes them, and a copy of every
            # message per call is work (and garbage) that grows with the history.
            "messages": [{"role": "system", "content": request.system}, *request.items],
            self.settings.output_limit_param: request.output_cap(self.settings),
        }
        if self.settings.temperature is not None:
            body["temperature"] = self.settings.temperature
        if request.tools:
            body["tools"] = [function_tool(spec) for spec in request.tools]
        if self.settings.stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        return with_extra_body(body, self.settings.extra_body)

    def call(self, request: ModelRequest) -> ModelResponse | ProviderError:
        """One SDK call; never raises. The SDK does not validate replies, so anything it or the
        normalization cannot read becomes a retryable malformed-reply error with the usage seen."""
        body = self.build_request(request)
        # A stream cut mid-way arrives as APIConnectionError, one of the SDK's errors.
        return never_raising(lambda seen: self._read(body, seen), self.classify, openai.APIError)

    def _read(self, body: dict[str, Any], seen: UsageSeen) -> ModelResponse | ProviderError:
        # The body is already the JSON the API takes, built from plain data, so it goes through the
        # SDK's own POST: its HTTP client, error classes and response parsing, without the request
        # transform `create` runs over every message, whose cost grows with the history (about 0.3 ms
        # per message per call; bench/long_run.py). It is encoded here, in one pass straight to bytes
        # (the SDK sends `content` as it is): the SDK's json.dumps builds a list of small strings
        # as long as the history before joining them, a transient several times the body's size.
        # The reply comes back as the JSON sent (cast to `object`), to be validated by its shape.
        encoded = json_bytes(body)
        if self.settings.stream:
            stream = self.client.post(
                COMPLETIONS_PATH, content=encoded, cast_to=object, stream=True, stream_cls=Stream[object]
            )
            return self._collect_stream(stream, seen)
        return self._normalize(self.client.post(COMPLETIONS_PATH, content=encoded, cast_to=object), seen)

    def _normalize(self, raw: object, seen: UsageSeen) -> ModelResponse | ProviderError:
        seen.usage = _usage(raw.get("usage") if isinstance(raw, Mapping) else None)
        completion = ChatReply.model_validate(raw)
        choice = completion.choices[0]
        message = choice.message
        reasoning = self._reasoning_of(message)
        calls = [call.model_dump(mode="json", exclude_unset=True, warnings=False) for call in message.tool_calls or []]
        return self._finish(message.content or "", reasoning, calls, choice.finish_reason, seen.usage, completion.id)

    def _collect_stream(self, stream: Any, seen: UsageSeen) -> ModelResponse | ProviderError:
        parts: list[str] = []
        thought: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        finish_reason = None
        response_id = None
        with stream:
            for raw in stream:
                chunk = ChatChunk.model_validate(raw)
                response_id = chunk.id
                if chunk.usage is not None:
                    seen.usage = _usage(chunk.usage)
                for choice in chunk.choices:
                    parts.append(choice.delta.content or "")
                    thought.append(self._reasoning_of(choice.delta) or "")
                    for piece in choice.delta.tool_calls or []:
                        _gather_call(calls.setdefault(piece.index, {}), piece)
                    finish_reason = choice.finish_reason or finish_reason
        if finish_reason is None:
            # The stream ended without saying how: treat like a cut connection.
            return ProviderError(ErrorKind.TRANSIENT, seen.usage, {"error_class": "IncompleteStream"})
        reasoning = "".join(thought) if any(thought) else None
        gathered = [calls[index] for index in sorted(calls)]
        return self._finish("".join(parts), reasoning, gathered, finish_reason, seen.usage, response_id)

    def _reasoning_of(self, message: ChatMessage | ChatDelta) -> str | None:
        """A message's (or a delta's) reasoning string under the first configured alias that has one;
        no API field carries it, so it is read from the extra fields, each a string or null."""
        extra = message.model_extra or {}
        found = [_REASONING.validate_python(extra.get(alias)) for alias in self.reasoning_aliases]
        return next((text for text in found if text is not None), None)

    def _finish(
        self,
        text: str,
        reasoning: str | None,
        calls: list[dict[str, Any]],
        finish_reason: str,
        usage: Usage,
        response_id: str | None,
    ) -> ModelResponse | ProviderError:
        kind = _FINISH_ERRORS.get(finish_reason)
        if kind is not None:
            return ProviderError(kind, usage, {"finish_reason": finish_reason})
        replayed = {alias: reasoning for alias in self.reasoning_aliases} if reasoning is not None else {}
        return ModelResponse(
            text=text,
            usage=usage,
            stop_reason=finish_reason,
            reasoning_summary=reasoning,
            response_id=response_id,
            native_items=self._reply_items({"role": "assistant", "content": text, **replayed}, calls),
            tool_calls=tuple(map(parsed_call, calls)),
        )

    def _reply_items(self, answer: dict[str, Any], calls: list[dict[str, Any]]) -> tuple[Item, ...]:
        """The accepted reply's items: the answer, with its reasoning and its calls (a replay must bring
        back the calls its tool messages answer) as a request's message holds them: the fields of the
        SDK's tool call param only. A reply's call carries more: DeepSeek's its position, `index`
        (recorded), which the request's type lacks and pydantic-ai's recorded replay leaves out."""
        return ({**answer, "tool_calls": [_replayable_call(call) for call in calls]},) if calls else (answer,)

    def compact(self, request: ModelRequest) -> ModelResponse | ProviderError:
        return no_compaction_call(self)

    def classify(self, error: Exception) -> ProviderError:
        return openai_sdk.classify(error)


def function_tool(spec: ToolSpec) -> dict[str, Any]:
    """A ToolSpec in the wire's shape: `{"type": "function", "function": {name, description,
    parameters}}` (the SDK's ChatCompletionFunctionToolParam and FunctionDefinition)."""
    function = {"name": spec.name, "description": spec.description, "parameters": dict(spec.parameters)}
    return {"type": "function", "function": function}


class ToolArgumentsNotObject(ValueError):
    """A tool call whose `arguments` string is not a JSON object: a malformed reply."""


def parsed_call(call: Mapping[str, Any]) -> ToolCall:
    """A call as the reply made it (validated whole, or gathered from a stream) as the contract's
    ToolCall; one without an id or whose arguments are not a JSON object raises, which the call's
    `never_raising` makes a malformed reply."""
    try:
        arguments = json.loads(call["function"]["arguments"])
    except ValueError as error:
        raise ToolArgumentsNotObject(call["function"]["name"]) from error
    if not isinstance(arguments, dict):
        raise ToolArgumentsNotObject(call["function"]["name"])
    return ToolCall(id=call["id"], name=call["function"]["name"], arguments=arguments)


_CALL_FIELDS = ("id", "type", "function")  # ChatCompletionMessageToolCallParam's (openai SDK 3.57)


def _replayable_call(call: dict[str, Any]) -> dict[str, Any]:
    return {key: call[key] for key in _CALL_FIELDS if key in call}


def _gather_call(call: dict[str, Any], piece: ToolCallPiece) -> None:
    """Add one streamed piece of a tool call (its id, type and name come once, its arguments in parts)."""
    for key, value in (("id", piece.id), ("type", piece.type)):
        if value:
            call[key] = value
    function = call.setdefault("function", {"name": "", "arguments": ""})
    if piece.function is not None:
        function["name"] = piece.function.name or function["name"]
        function["arguments"] += piece.function.arguments or ""


def _usage(value: object) -> Usage:
    """OpenAI's fields, with DeepSeek's `prompt_cache_hit_tokens` standing in for cache reads where
    `prompt_tokens_details` does not report them; no usage is unreported usage."""
    if value is None:
        return Usage()
    usage = ChatUsage.model_validate(value)
    prompt = usage.prompt_tokens_details or PromptDetails()
    completion = usage.completion_tokens_details or CompletionDetails()
    cached = prompt.cached_tokens if prompt.cached_tokens is not None else usage.prompt_cache_hit_tokens
    return Usage(
        input_tokens=token_count(usage.prompt_tokens),
        cached_input_tokens=token_count(cached),
        output_tokens=token_count(usage.completion_tokens),
        reasoning_tokens=token_count(completion.reasoning_tokens),
        cache_write_tokens=token_count(prompt.cache_write_tokens),
        cost=reported_cost(usage),
    )
