"""anthropic.messages.v1: Anthropic Messages through the anthropic SDK, replaying native content.

A leaf action. Continuous conversation carries native Messages content in memory: every accepted
assistant message is replayed with its blocks in their original order (thinking with its signature,
redacted thinking, text, compaction), serialized with exclude_unset so supplied empty fields stay;
only the response-only `parsed_output` of text blocks and a null `encrypted_content` of compaction
blocks are dropped. The system prompt goes separately.

Only `end_turn` (or a configured stop sequence) can carry an action: a refusal, `max_tokens`,
`pause_turn` or an unfinished stream never does. `tool_use` is the one other stop a reply may end
with: it is a valid reply with calls (ModelResponse.tool_calls, never empty then), not an action and
not a retry; the turn is not over, and goes on once the calls are answered. So the two rules do not
meet: an end_turn reply carries no call (a tool_use block under any other stop is a malformed reply,
as is a tool_use stop without one), and what a tool_use reply's text says is never an action.

Tools. A request's ToolSpecs go as `tools: [{name, description, input_schema}]` (the SDK's
BetaToolParam; recorded so in test_anthropic_tool_with_thinking); none, and the body has no tool
field at all. A call is a `tool_use` block {id, name, input}; `input` must be a JSON object, else
the reply is malformed. The reply's message keeps every block as it came, so a call replays with
the thinking block and signature before it ("During tool use, you must pass thinking blocks back to
the API for the last assistant message", the extended-thinking docs). Results are the NEXT user
message: one `tool_result` block {tool_use_id, content, is_error: true only for a failed call} per
call, in the calls' order, before any other input (MessagesItems.tool_result_items). A request that
breaks the pairing (an unanswered call, an orphan or duplicate result) is the service's 400
invalid_request_error: the harness's bug, FATAL. Native compaction is on demand, a request of its
own (`compaction: {type: summarize}`, beta compact-2026-09-04) answered by one signed compaction
block, which the strategy's compaction_call machine asks for.

Usage: `usage.iterations` when present (compaction included), else the top level, never both;
input = uncached input + cache reads + cache writes, with cache reads as the cached part.

The SDK builds its message objects without validating them, so a reply is validated against the
shapes below (through the objects' attributes, the values as they came) before any of it is read:
a string `id`, a string or null `stop_reason`, a `content` list of blocks each with a string
`type`; a text block's `text`, a thinking block's `thinking` and `signature`, a redacted thinking
block's `data` strings, a tool_use block's `id` and `name` strings and `input` object (the SDK's
own BetaTextBlock, BetaThinkingBlock, BetaRedactedThinkingBlock and BetaToolUseBlock make them
required); a compaction block's `content`,
`signature` and `encrypted_content` strings or null (BetaCompactionBlock: null content is a
failed compaction); `stop_details` type and category strings or null; each stream event's string
`type`; every usage count a non-negative integer or absent. A compaction reply must moreover be
exactly one compaction block with nonempty content and a signature (what replay needs), and an
action reply may not compact inline: either is a malformed reply, retried.

For the stale tool-result offload, `MessagesItems.tool_results` lists each tool_result block (one
user message holds a block per call of the reply it answers), named by the tool_use block with its
id, its error the block's `is_error` (the recorded answer spells out `is_error: false`), its text
the content string or its text blocks (the SDK's BetaToolResultBlockParam takes either).
`with_tool_result_text` rewrites that one block's content in a new content list whose other blocks
are the very objects they were. Thinking, redacted thinking and compaction blocks are never read.

A reply known only by its projection (a resume without the continuation, a model switch:
`MessagesItems.projected_reply_items`) replays as one assistant message: a text block {type, text}
unless the text is empty (the service refuses one: "messages: text content blocks must be
non-empty", anthropics/claude-code#59812), then a tool_use block {type, id, name, input} per call
(BetaTextBlockParam, BetaToolUseBlockParam; the id is the call's, which its tool_result names); no
thinking block, signature or message id. Recorded: test_anthropic_model_thinking_part_from_other_model
sends claude-sonnet-4, thinking on, another model's reply as an assistant message of text blocks
only, answered 200. But with thinking on, the first assistant turn of a tool loop still open at the
end of the request must start with a thinking block, which a projection has none of: the service
refuses it ("Expected `thinking` or `redacted_thinking`, but found `tool_use`. When `thinking` is
enabled, a final `assistant` message must start with a thinking block", the extended-thinking docs;
local_provider/messages_conversation.py rule 4). So a rebuilt history whose last reply made calls
goes on with thinking on only once a later reply closes that loop.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, ClassVar, Literal, Self

import anthropic
from anthropic.resources.beta.messages import Messages as BetaMessages
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from turnstate.adapters.anthropic_models import ENABLED_THINKING_REFUSED, takes_enabled_thinking
from turnstate.adapters.bounded_http import bounded_client
from turnstate.adapters.contract import (
    LLAMA_CPP_CONTEXT_OVERFLOW,
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
    fatal_message,
    input_parts,
    malformed_reply,
    never_raising,
    refused_options,
    retry_after_seconds,
    schema_problems,
    text_content,
    token_count,
    with_extra_body,
)
from turnstate.adapters.image_costs import ANTHROPIC_IMAGE_LIMITS, ImageLimits
from turnstate.adapters.images import ImagePart
from turnstate.adapters.tokens import (
    MESSAGE_OVERHEAD_TOKENS,
    content_image_tokens,
    estimate_text_tokens,
    image_label,
    readable_content,
)

COMPACTION_BETA = "compact-2026-09-04"
OLD_COMPACTION_BETA = "compact-2026-01-12"  # threshold compaction (context_management edits): refused
MIN_THINKING_BUDGET = 1024  # the SDK's ThinkingConfigEnabledParam: ">=1024 and less than max_tokens"
_STOP_ERRORS = {"refusal": ErrorKind.REFUSAL, "max_tokens": ErrorKind.TRUNCATED, "pause_turn": ErrorKind.TRANSIENT}
_TRANSIENT_STATUS = {408, 409, 429, 529}
# An error event mid-stream arrives with status 200: its type says whether a retry can help.
_TRANSIENT_TYPES = {"overloaded_error", "api_error", "rate_limit_error", "timeout_error"}


class ThinkingDetails(ReplyShape):
    thinking_tokens: TokenCount = None


class UsagePart(ReplyShape):
    """The top level of `usage`, or one of its iterations."""

    type: str | None = None
    input_tokens: TokenCount = None
    cache_read_input_tokens: TokenCount = None
    cache_creation_input_tokens: TokenCount = None
    output_tokens: TokenCount = None
    output_tokens_details: ThinkingDetails | None = None


class MessagesUsage(UsagePart):
    iterations: list[UsagePart] | None = None


BLOCK_TEXTS: Mapping[str, tuple[str, ...]] = {
    "text": ("text",),
    "thinking": ("thinking", "signature"),
    "redacted_thinking": ("data",),
    "tool_use": ("id", "name"),
}
"""The string fields each kind of block must carry."""


class Block(ReplyShape):
    type: str
    text: str | None = None
    thinking: str | None = None
    signature: str | None = None
    data: str | None = None
    content: object = None  # a compaction's summary; other blocks (server tool results) have their own
    encrypted_content: str | None = None
    id: str | None = None
    name: str | None = None
    input: object = None  # a tool_use's arguments: a JSON object

    @model_validator(mode="after")
    def _carries_its_texts(self) -> Self:
        missing = [name for name in BLOCK_TEXTS.get(self.type, ()) if getattr(self, name) is None]
        if missing:
            raise ValueError(f"a {self.type} block without {', '.join(missing)}")
        if self.type == "tool_use" and not isinstance(self.input, dict):
            raise ValueError("a tool_use block whose input is not a JSON object")
        if self.type == "compaction" and not isinstance(self.content, str | None):
            raise ValueError("a compaction block whose content is not a string")
        return self


class StopDetails(ReplyShape):
    type: str | None = None
    category: str | None = None


class MessageReply(ReplyShape):
    id: str
    stop_reason: str | None = None
    content: list[Block]


class StreamEvent(ReplyShape):
    type: str


class MessageDelta(ReplyShape):
    stop_details: StopDetails | None = None


class MessageDeltaEvent(ReplyShape):
    delta: MessageDelta


class MessagesItems:
    """The Messages transcript: a turn opens with one user message holding its inputs; a reply is
    the assistant message with every content block, replay-ready."""

    def user_items(self, inputs: Sequence[Input]) -> list[Item]:
        """One user message of `text` blocks and `image` blocks with a base64 source {type: base64,
        media_type, data} (the SDK's ImageBlockParam and Base64ImageSourceParam)."""
        return [{"role": "user", "content": _content_blocks(input_parts(inputs))}]

    def reply_items(self, response: ModelResponse) -> list[Item]:
        return [dict(item) for item in response.native_items]

    def projected_reply_items(self, text: str, tool_calls: Sequence[ToolCall]) -> list[Item]:
        """One assistant message: a text block (none when the text is empty: the service refuses an
        empty one), then a tool_use block {type, id, name, input} per call; no thinking block, no
        signature, no message id (see the module docstring for the evidence)."""
        blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        blocks += [
            {"type": "tool_use", "id": call.id, "name": call.name, "input": dict(call.arguments)} for call in tool_calls
        ]
        return [{"role": "assistant", "content": blocks}] if blocks else []

    def tool_result_items(self, results: Sequence[ToolResult]) -> list[Item]:
        """One user message whose content is a tool_result block per result, in the calls' order, with
        `is_error: true` on a failed call's: the message right after the reply that made the calls,
        its results first ("tool_result blocks must come FIRST in the content array", the tool-use
        docs; recorded: test_anthropic_tool_with_thinking answers a call so). The next turn's inputs
        follow as a user message of their own, which the service reads as the same turn. A result that
        shows images holds a text block (none for an empty text: the service refuses one) and its
        image blocks as its content (the SDK's ToolResultBlockParam content list)."""
        blocks = [
            {
                "type": "tool_result",
                "tool_use_id": result.call_id,
                "content": _content_blocks(input_parts([UserInput(result.content, result.images)]))
                if result.images
                else result.content,
                **({"is_error": True} if result.is_error else {}),
            }
            for result in results
        ]
        return [{"role": "user", "content": blocks}]

    def tool_results(self, items: Sequence[Item]) -> list[ToolResultAt]:
        """Each tool_result block (a user message may hold several), named by the tool_use block with
        its id, its error from the block's `is_error`. Only tool_use and tool_result blocks are read:
        thinking, redacted thinking and compaction blocks are passed over by their type."""
        names: dict[str, str] = {}
        found = []
        for index, item in enumerate(items):
            for block in _blocks(item):
                kind = block.get("type")
                if kind == "tool_use":
                    names[str(block.get("id"))] = str(block.get("name"))
                elif kind == "tool_result":
                    call_id = str(block.get("tool_use_id"))
                    text = text_content(block.get("content"))
                    found.append(
                        ToolResultAt(index, call_id, names.get(call_id, ""), text, bool(block.get("is_error")))
                    )
        return found

    def with_tool_result_text(self, item: Item, call_id: str, text: str) -> Item:
        """The message with a new content list in which only the block answering `call_id` is new."""
        blocks = _blocks(item)
        for position, block in enumerate(blocks):
            if block.get("type") == "tool_result" and block.get("tool_use_id") == call_id:
                content = [*blocks[:position], {**block, "content": text}, *blocks[position + 1 :]]
                return {**item, "content": content}
        raise NoSuchToolResult(call_id)

    def estimate_tokens(self, items: Sequence[Item], system: str = "") -> int:
        head = MESSAGE_OVERHEAD_TOKENS + estimate_text_tokens(system) if system else 0
        return head + sum(
            MESSAGE_OVERHEAD_TOKENS
            + estimate_text_tokens(_block_text(item, opaque=True))
            + content_image_tokens(item.get("content"))
            + sum(
                content_image_tokens(block.get("content"))
                for block in _blocks(item)
                if block.get("type") == "tool_result"
            )
            for item in items
        )

    def readable(self, items: Sequence[Item]) -> list[dict[str, str]]:
        return [{"role": str(item.get("role", "")), "content": _block_text(item, opaque=False)} for item in items]

    def latest_compaction(self, items: Sequence[Item]) -> int | None:
        found = [index for index, item in enumerate(items) if _first_block_type(item) == "compaction"]
        return found[-1] if found else None


def _content_blocks(parts: Sequence[str | ImagePart]) -> list[dict[str, Any]]:
    """Input parts as Messages lays them out: `text` blocks and `image` blocks with a base64 source
    {type: base64, media_type, data} (the SDK's ImageBlockParam and Base64ImageSourceParam)."""
    return [
        {"type": "text", "text": part}
        if isinstance(part, str)
        else {"type": "image", "source": {"type": "base64", "media_type": part.media_type, "data": part.base64}}
        for part in parts
    ]


def _blocks(message: Item) -> list[Mapping[str, Any]]:
    """A message's content blocks; a plain string content has none."""
    content = message.get("content")
    return content if isinstance(content, list) else []


def _first_block_type(message: Item) -> str | None:
    content = message.get("content")
    if isinstance(content, list) and content and isinstance(content[0], Mapping):
        return str(content[0].get("type"))
    return None


def _block_text(message: Item, *, opaque: bool) -> str:
    """A message's readable text (thinking summaries, text, a compaction's content, an image's label);
    with `opaque`, signatures and redacted data too, as they are billed (and no image label: an image is
    billed by its size, `content_image_tokens`)."""
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
        elif kind == "tool_use":
            parts.append(f"[call {block.get('name')} {json.dumps(block.get('input'), sort_keys=True)}]")
        elif kind == "tool_result":
            failed = " (error)" if block.get("is_error") else ""
            held = block.get("content")
            shown = readable_content(held) if not opaque else text_content(held)
            parts.append(f"[result{failed}] {shown}")
        elif kind == "image" and not opaque:
            parts.append(image_label(block) or "")
        if opaque:
            parts.append(str(block.get("signature") or block.get("data") or ""))
    return "\n".join(part for part in parts if part)


class _Options(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class ThinkingOptions(_Options):
    type: Literal["enabled", "adaptive", "disabled"] = Field(
        description="`enabled` needs `budget_tokens`; `adaptive` and `disabled` take none. A model that thinks "
        "only adaptively refuses `enabled`, and validation names it"
    )
    budget_tokens: int | None = Field(
        default=None,
        ge=1024,
        description="`enabled` only: below the output cap of every request it goes on (`request.max_output_tokens`, "
        "and a compaction's `runtime.compaction.summary_max_output_tokens`), since thinking counts toward it",
    )
    display: Literal["summarized", "omitted"] | None = Field(
        default=None, description="how the reply shows the thinking; absent: the API's default"
    )


class OutputConfig(_Options):
    effort: Literal["low", "medium", "high", "xhigh", "max"] | None = Field(
        default=None, description="how much effort the model spends, on every request"
    )
    format: dict[str, Any] | None = Field(
        default=None, description="structured output, on action requests only (never a compaction's)"
    )


class CacheControl(_Options):
    type: Literal["ephemeral"] = Field(description="the kind of cache: ephemeral")
    ttl: Literal["5m", "1h"] | None = Field(default=None, description="how long the cache lives; absent: the API's")


class MessagesOptions(_Options):
    """`request.options` for Anthropic Messages. `context_management` and `compaction` are refused:
    compaction is on demand, a request of its own (`runtime.compaction.strategy: native`)."""

    thinking: ThinkingOptions | None = Field(
        default=None, description="extended thinking; its signed blocks are replayed verbatim"
    )
    output_config: OutputConfig | None = Field(
        default=None, description="sent as given, `format` on action requests only"
    )
    betas: list[str] = Field(
        default_factory=list,
        description=f"sent as given; `{COMPACTION_BETA}` is added to compaction requests and to every request that "
        f"replays a compaction block; `{OLD_COMPACTION_BETA}` (threshold compaction) is refused",
    )
    stop_sequences: list[str] = Field(default_factory=list, description="sent on action requests only")
    cache_control: CacheControl | None = Field(
        default=None, description="automatic caching, on both request kinds; never added when unset"
    )


# Options this adapter refuses by name, with why and the fix: compaction is on demand, a request of
# its own that the harness makes (runtime.compaction), never something an action request does.
REFUSED_OPTIONS: Mapping[str, tuple[str, str]] = {
    "context_management": (
        "threshold compaction (context_management, with or without pause_after_compaction) compacts inside "
        "an action request, where the newest observation can be summarized away",
        "remove it; set runtime.compaction.strategy: native for on-demand compaction",
    ),
    "compaction": (
        "the harness sends `compaction` itself, on its compaction requests only",
        "remove it; set runtime.compaction.strategy: native",
    ),
}


class MessagesAdapter:
    transcript: ClassVar[Transcript] = MessagesItems()
    native_compaction: ClassVar[NativeCompaction | None] = "call"
    summary_compaction: ClassVar[SummaryCompaction | None] = (
        None  # its compaction is native and on demand, never a harness summary
    )
    acts_through_tools: ClassVar[bool] = False
    # The SDK's Messages API (2.15) has no temperature: sent anyway, its call raises TypeError.
    takes_temperature: ClassVar[bool] = "temperature" in inspect.signature(BetaMessages.create).parameters
    body_fields: ClassVar[Mapping[str, str] | None] = {
        "model": "request.model",
        "max_tokens": "request.max_output_tokens",
        "system": "the system prompt",
        "messages": "the conversation",
        "temperature": "request.temperature",
        "tools": "the run's tools",
        "stream": "request.stream",
        "compaction": "runtime.compaction.strategy: native",
        **{name: f"request.options.{name}" for name in MessagesOptions.model_fields if name != "betas"},
    }
    grammar_field: ClassVar[str | None] = None  # llama-server's Messages wire drops a grammar (measured)
    options_model: ClassVar[type[BaseModel] | None] = MessagesOptions
    image_limits: ClassVar[ImageLimits | None] = ANTHROPIC_IMAGE_LIMITS

    def __init__(self, client: anthropic.Anthropic, settings: RequestSettings) -> None:
        self.client = client
        self.settings = settings
        self.options = MessagesOptions.model_validate(dict(settings.options))

    @classmethod
    def connect(cls, endpoint: Endpoint, settings: RequestSettings) -> MessagesAdapter:
        # Anthropic's base_url has no /v1; the SDK's own retries are off (the harness owns them), and its
        # HTTP client bounds each request by the endpoint's deadline and reply cap.
        client = anthropic.Anthropic(
            base_url=endpoint.base_url,
            api_key=endpoint.api_key,
            max_retries=0,
            timeout=endpoint.timeout_seconds,
            http_client=bounded_client(endpoint),
        )
        return cls(client, settings)

    @classmethod
    def check_options(
        cls, options: Mapping[str, Any], strategy: str, compaction: str, model: str = ""
    ) -> list[OptionProblem]:
        problems = refused_options(options, REFUSED_OPTIONS)
        betas = options.get("betas")
        if isinstance(betas, list) and OLD_COMPACTION_BETA in betas:
            problems.append(
                OptionProblem(
                    "betas",
                    f"{OLD_COMPACTION_BETA} is the beta of threshold compaction, which this adapter does not use",
                    f"remove it; on-demand compaction ({COMPACTION_BETA}) is sent with every request that needs it",
                )
            )
        thinking = options.get("thinking")
        if isinstance(thinking, Mapping) and thinking.get("type") == "enabled" and not takes_enabled_thinking(model):
            problems.append(
                OptionProblem(
                    "thinking.type", f"{model} refuses it: {ENABLED_THINKING_REFUSED}", "set thinking.type: adaptive"
                )
            )
        if problems:
            return problems
        try:
            MessagesOptions.model_validate(dict(options))
        except ValidationError as error:
            return schema_problems(error.errors(), "see request.options in docs/profiles.md")
        return []

    @classmethod
    def check_limits(cls, bounds: RequestBounds) -> list[OptionProblem]:
        """A thinking budget is enabled thinking's alone, and below the max_tokens of every request that
        carries it: action requests and compaction requests alike (thinking counts toward max_tokens)."""
        thinking = bounds.options.get("thinking")
        if not thinking:
            return []
        key, kind, budget = "request.options.thinking.budget_tokens", thinking["type"], thinking.get("budget_tokens")
        if kind != "enabled":
            if budget is not None:
                return [OptionProblem(key, f"thinking type {kind} takes no budget", "remove it, or set type: enabled")]
            return []
        if budget is None:
            return [
                OptionProblem(
                    key,
                    "thinking type enabled needs a budget",
                    f"add one of at least {MIN_THINKING_BUDGET}, below request.max_output_tokens",
                )
            ]
        return [
            OptionProblem(
                key,
                f"{budget} is not below {cap_key} {cap}, and thinking counts toward a request's max_tokens",
                f"make it at most {cap - 1}" if cap > MIN_THINKING_BUDGET else f"raise {cap_key} above it",
            )
            for cap_key, cap in bounds.output_caps
            if budget >= cap
        ]

    def build_request(self, request: ModelRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.settings.model,
            "max_tokens": request.output_cap(self.settings),
            "system": request.system,
            "messages": [dict(item) for item in request.items],
            **self.options.model_dump(exclude_none=True, exclude_defaults=True, exclude={"betas"}),
        }
        if self.settings.temperature is not None:
            body["temperature"] = self.settings.temperature
        if request.tools:
            body["tools"] = [
                {"name": tool.name, "description": tool.description, "input_schema": dict(tool.parameters)}
                for tool in request.tools
            ]
        return body  # the profile's extra_body goes as the SDK's extra_body (`_request`): `create` takes no other keys

    def call(self, request: ModelRequest) -> ModelResponse | ProviderError:
        """One SDK call; never raises (see the contract's malformed_reply)."""
        return self._request(self.build_request(request), self._betas(request), compaction=False)

    def compact(self, request: ModelRequest) -> ModelResponse | ProviderError:
        """An on-demand compaction of `request.items`: one signed compaction block replaces them. The
        same model, system prompt, thinking, effort and caching as an action request, with its own
        output cap (the request's), and without the action's stop sequences or output format."""
        body = self.build_request(request)
        body.pop("stop_sequences", None)
        output_config = {key: value for key, value in body.pop("output_config", {}).items() if key != "format"}
        if output_config:
            body["output_config"] = output_config
        return self._request(body, [*self._betas(request), COMPACTION_BETA], compaction=True)

    def classify(self, error: Exception) -> ProviderError:
        diagnostics: dict[str, Any] = {"error_class": type(error).__name__}
        if isinstance(error, anthropic.APIStatusError):
            body: Any = error.body if isinstance(error.body, Mapping) else {}
            details: Any = body.get("error") if isinstance(body.get("error"), Mapping) else {}
            error_type = details.get("type") if isinstance(details.get("type"), str) else None
            diagnostics |= {"status": error.status_code, "error_type": error_type, "request_id": error.request_id}
            wait = retry_after_seconds(error.response.headers)
            kind = _status_kind(error, error_type)
            said = fatal_message(kind, error.status_code, details.get("message", error.message))
            return ProviderError(kind, Usage(), diagnostics, retry_after_seconds=wait, server_message=said)
        return ProviderError(ErrorKind.TRANSIENT, Usage(), diagnostics)

    def _betas(self, request: ModelRequest) -> list[str]:
        """The profile's betas, and the compaction beta whenever a compaction block is replayed."""
        replays_compaction = self.transcript.latest_compaction(request.items) is not None
        return [*self.options.betas, *([COMPACTION_BETA] if replays_compaction else [])]

    def _request(self, body: dict[str, Any], betas: list[str], *, compaction: bool) -> ModelResponse | ProviderError:
        betas = list(dict.fromkeys(betas))
        fields = with_extra_body({"compaction": {"type": "summarize"}} if compaction else {}, self.settings.extra_body)
        extra = {"extra_body": fields} if fields else {}
        messages: Any = self.client.beta.messages  # the body is built as data; the SDK's overloads are narrower

        def read(seen: UsageSeen) -> ModelResponse | ProviderError:
            if not self.settings.stream:
                message = messages.create(**body, betas=betas, **extra)
                seen.usage = _usage(message.usage)
                return self._normalize(message, message.stop_details, seen.usage, compaction=compaction)
            with messages.stream(**body, betas=betas, **extra) as stream:
                stop_details, finished = None, False
                for event in stream:
                    kind = StreamEvent.model_validate(event).type
                    if kind in ("message_start", "message_delta"):  # usage so far, kept if the stream breaks
                        seen.usage = _usage(stream.current_message_snapshot.usage)
                    if kind == "message_delta":  # kept ourselves: not every SDK copies it
                        stop_details = MessageDeltaEvent.model_validate(event).delta.stop_details
                    finished = kind == "message_stop"
                if not finished:
                    return malformed_reply(EOFError("the stream ended before message_stop"), seen.usage)
                message = stream.get_final_message()
            seen.usage = _usage(message.usage)
            return self._normalize(message, stop_details, seen.usage, compaction=compaction)

        return never_raising(read, self.classify, anthropic.APIError)

    def _normalize(
        self, message: Any, stop_details: Any, usage: Usage, *, compaction: bool
    ) -> ModelResponse | ProviderError:
        stop = MessageReply.model_validate(message).stop_reason
        blocks = [
            _replayable(block.model_dump(mode="json", exclude_unset=True, warnings=False)) for block in message.content
        ]
        kinds = [block.get("type") for block in blocks]
        if compaction:
            signed = [block for block in blocks if block.get("type") == "compaction" and block.get("signature")]
            if stop != "compaction" or len(blocks) != 1 or len(signed) != 1 or not signed[0].get("content"):
                return malformed_reply(ValueError("a compaction reply is exactly one nonempty signed block"), usage)
        elif stop in _STOP_ERRORS:
            details = _stop_details(StopDetails.model_validate(stop_details) if stop_details is not None else None)
            return ProviderError(_STOP_ERRORS[stop], usage, {"finish_reason": stop, **details})
        elif stop == "model_context_window_exceeded":
            return ProviderError(ErrorKind.CONTEXT_OVERFLOW, usage, {"finish_reason": stop})
        elif stop == "tool_use" and "tool_use" not in kinds:
            return malformed_reply(ValueError("a tool_use stop without a call"), usage)
        elif stop != "tool_use" and (stop not in self._action_stops or "text" not in kinds or "tool_use" in kinds):
            return malformed_reply(ValueError(f"a reply that cannot carry an action: {stop}"), usage)
        elif "compaction" in kinds:
            return malformed_reply(ValueError("an action reply compacted inline"), usage)
        text = "".join(str(block.get("text", "")) for block in blocks if block.get("type") == "text")
        calls = tuple(
            ToolCall(str(block["id"]), str(block["name"]), dict(block["input"]))
            for block in blocks
            if block.get("type") == "tool_use"
        )
        summaries = [str(block.get("thinking", "")) for block in blocks if block.get("type") == "thinking"]
        return ModelResponse(
            text=text,
            usage=usage,
            stop_reason=str(stop),
            reasoning_summary=" ".join(summary for summary in summaries if summary) or None,
            response_id=message.id,
            native_items=({"role": "assistant", "content": blocks},),
            tool_calls=calls,
        )

    @property
    def _action_stops(self) -> tuple[str, ...]:
        """Only end_turn, or a stop sequence the profile configured, ends a reply that can carry an action."""
        return ("end_turn", "stop_sequence") if self.options.stop_sequences else ("end_turn",)


def _stop_details(details: StopDetails | None) -> dict[str, Any]:
    """A refusal's stop_details, sanitized: its type and policy category, never the explanation or
    the fallback credit token."""
    if details is None:
        return {}
    return {"stop_details": {"type": details.type, "category": details.category}}


def _replayable(block: dict[str, Any]) -> dict[str, Any]:
    """A content block as the next request's input: response-only fields dropped, nothing else."""
    if block.get("type") == "text":
        return {key: value for key, value in block.items() if key != "parsed_output"}
    if block.get("type") == "compaction" and block.get("encrypted_content", "") is None:
        return {key: value for key, value in block.items() if key != "encrypted_content"}
    return block


def _status_kind(error: anthropic.APIStatusError, error_type: str | None) -> ErrorKind:
    if error.status_code == 400 and (
        "prompt is too long" in str(error.message) or error_type == LLAMA_CPP_CONTEXT_OVERFLOW
    ):
        return ErrorKind.CONTEXT_OVERFLOW
    if error.status_code in _TRANSIENT_STATUS or error.status_code >= 500 or error_type in _TRANSIENT_TYPES:
        return ErrorKind.TRANSIENT
    return ErrorKind.FATAL


def _usage(value: object) -> Usage:
    """The iterations when present (compaction included), else the top level; never both. Thinking is
    a breakdown of output: the top level's count covers the non-compaction iterations and is used
    once (their own counts stand in when it is unreported); a compaction's own count is added once.
    No usage is unreported usage."""
    usage = MessagesUsage.model_validate(value) if value is not None else MessagesUsage()
    iterations = usage.iterations or []
    total = Usage()
    for part in iterations or [usage]:
        uncached = token_count(part.input_tokens)
        read = token_count(part.cache_read_input_tokens)
        written = token_count(part.cache_creation_input_tokens)
        total += Usage(
            input_tokens=uncached + read + written,
            cached_input_tokens=read,
            output_tokens=token_count(part.output_tokens),
            cache_write_tokens=written,
        )
    top = _thinking_tokens(usage)
    sampled = [part for part in iterations if part.type != "compaction"]
    compacting = [part for part in iterations if part.type == "compaction"]
    thinking = top if top is not None else sum(_thinking_tokens(part) or 0 for part in sampled)
    thinking += sum(_thinking_tokens(part) or 0 for part in compacting)
    return replace(total, reasoning_tokens=thinking)


def _thinking_tokens(part: UsagePart) -> int | None:
    """A usage part's reported thinking tokens; None when it reports none."""
    details = part.output_tokens_details
    return details.thinking_tokens if details is not None else None
