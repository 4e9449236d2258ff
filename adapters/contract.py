"""The provider contract: the normalized shapes that pass between strategies, adapters and the runner.

A strategy builds a `ModelRequest`; an adapter turns it into one SDK call and answers with a
`ModelResponse` or a `ProviderError` whose `kind` is one of a handful the machines branch on. The
adapter never decides what happens next; it only says what happened. This module knows nothing of
machines or profiles, so an adapter imports only this, its SDK and the token estimate.
"""

from __future__ import annotations

import enum
import math
import re
import socket
import ssl
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Annotated, Any, ClassVar, Literal, NamedTuple, Protocol

from pydantic import BaseModel, ConfigDict, Field

from turnstate.adapters.image_costs import ImageLimits
from turnstate.adapters.images import ImagePart, refuse

Item = Mapping[str, Any]
"""One native item of an adapter's transcript (a message, a reasoning item, a content block ...):
JSON-serializable, and possibly holding opaque provider state that must be replayed verbatim."""


class ErrorKind(str, enum.Enum):
    TRANSIENT = "transient"  # 408/409/429/5xx, connection cut: the same request may succeed later
    CONTEXT_OVERFLOW = "context_overflow"  # the request does not fit the provider's window
    REFUSAL = "refusal"  # the provider declined to answer
    TRUNCATED = "truncated"  # the answer was cut (output limit); it cannot carry an action
    EXPIRED_HANDLE = "expired_handle"  # the server no longer has the response this request continues from
    FATAL = "fatal"  # auth, bad request, unknown model: retrying cannot help


@dataclass(frozen=True)
class Usage:
    """Provider-reported usage; zero means unreported. `input_tokens` includes the cache reads
    (`cached_input_tokens`) and the cache writes (`cache_write_tokens`), which are breakdowns of it,
    as `reasoning_tokens` is of `output_tokens`. `cost` is the provider's own figure (`usage.cost`)
    when it reports one, never the harness's estimate; None means unreported."""

    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cache_write_tokens: int = 0
    cost: float | None = None

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.cached_input_tokens + other.cached_input_tokens,
            self.output_tokens + other.output_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
            other.cost if self.cost is None else self.cost if other.cost is None else self.cost + other.cost,
        )

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def to_dict(self) -> dict[str, Any]:
        counts: dict[str, Any] = {
            "input_tokens": self.input_tokens,
            "cached_input_tokens": self.cached_input_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "output_tokens": self.output_tokens,
            "reasoning_tokens": self.reasoning_tokens,
            "total_tokens": self.total_tokens,
        }
        if self.cost is not None:
            counts["cost"] = self.cost
        return counts

    @classmethod
    def from_dict(cls, counts: Mapping[str, Any]) -> Usage:
        """The usage `to_dict` wrote (its derived total is read over)."""
        return cls(
            counts["input_tokens"],
            counts["cached_input_tokens"],
            counts["output_tokens"],
            counts["reasoning_tokens"],
            counts["cache_write_tokens"],
            counts.get("cost"),
        )


@dataclass(frozen=True)
class ToolSpec:
    """A function tool offered to the model: its name, what it does, and its parameters as a JSON
    Schema object (each adapter sends it in its provider's shape)."""

    name: str
    description: str
    parameters: Mapping[str, Any]


@dataclass(frozen=True)
class ToolCall:
    """One function call a reply made: the provider's id for it (Chat Completions' tool call id,
    Responses' call_id, Anthropic's tool_use id, Gemini's function call id), the tool's name and its
    arguments as parsed JSON. A reply's calls are answered in the order it made them."""

    id: str
    name: str
    arguments: Mapping[str, Any]


@dataclass(frozen=True)
class ToolResult:
    """The answer to one ToolCall, paired with it by `call_id`: the text the model reads, the images it
    shows after that text (checked PNGs, `ImagePart`: an action's next frame drawn as an image), and
    whether the call failed (Anthropic's `is_error`; the other wires carry it in the text). `ran` is
    when the tool ran, (start, end) in Unix nanoseconds, for the run's traces: never sent, and no part
    of what the result is (it does not compare)."""

    call_id: str
    name: str
    content: str
    is_error: bool = False
    images: tuple[ImagePart, ...] = ()
    ran: tuple[int, int] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "images", checked_images("ToolResult", self.images))


@dataclass(frozen=True)
class UserInput:
    """One input that shows images: its text, then its images (checked PNGs, `ImagePart`), in order.
    A plain string is an input of text alone; a transcript lays either out in its wire's parts."""

    text: str
    images: tuple[ImagePart, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise TypeError(f"a UserInput's text is a str, not {type(self.text).__name__}")
        object.__setattr__(self, "images", checked_images("UserInput", self.images))


def checked_images(owner: str, images: Sequence[ImagePart]) -> tuple[ImagePart, ...]:
    """`images` as a tuple (a list given is kept as one), each an ImagePart, else a TypeError naming
    the place and the fix."""
    kept = tuple(images)
    for index, image in enumerate(kept):
        if not isinstance(image, ImagePart):
            raise TypeError(
                f"a {owner}'s images[{index}] is a {type(image).__name__}, not an ImagePart; "
                "fix: wrap the PNG bytes as ImagePart(data), which checks them"
            )
    return kept


Input = str | UserInput
"""One input of a turn: text, or text with images (`UserInput`)."""


def taken_input(given: Input, limits: ImageLimits | None, adapter_id: str) -> UserInput:
    """`given` as a UserInput (a string is its text, with no images) whose images an adapter's API
    takes (`limits`: its `image_limits`), checked before anything is logged or sent: TypeError for
    what is no input, ImageError naming the problem and the fix."""
    if isinstance(given, str):
        return UserInput(given)
    if not isinstance(given, UserInput):
        raise TypeError(f"an input is a str or a UserInput, not {type(given).__name__}")
    _check_taken(given.images, limits, adapter_id, "", "send text")
    return given


def taken_results(results: Sequence[ToolResult], limits: ImageLimits | None, adapter_id: str) -> tuple[ToolResult, ...]:
    """Tool results whose images an adapter's API takes, checked as `taken_input` checks an input's
    (the count is the images of all the results together, as they go in one request)."""
    images = [image for result in results for image in result.images]
    _check_taken(images, limits, adapter_id, f", and a tool result shows {len(images)}", "answer with text")
    return tuple(results)


def _check_taken(
    images: Sequence[ImagePart], limits: ImageLimits | None, adapter_id: str, shown: str, text_fix: str
) -> None:
    """Images one request shows, each checked against the adapter's `limits` with their count; an
    ImageError when its API takes none (`shown` says where they were, `text_fix` how to do without)."""
    if images and limits is None:
        raise refuse(
            f"adapter {adapter_id!r} sends no images (its API takes text only){shown}",
            f"{text_fix}, or use an adapter whose API takes images",
        )
    for image in images:
        assert limits is not None
        limits.check(image, len(images))


def input_parts(inputs: Sequence[Input]) -> list[str | ImagePart]:
    """A turn's inputs as the parts of one user message, in order: each input's text, then its images,
    consecutive texts joined by blank lines. Inputs of text alone are one text, exactly as they were
    before images (`"\\n\\n".join(inputs)`), so a text run's requests are unchanged."""
    if all(isinstance(given, str) for given in inputs):
        return ["\n\n".join(str(given) for given in inputs)]
    parts: list[str | ImagePart] = []
    texts: list[str] = []
    for given in inputs:
        text, images = (given, ()) if isinstance(given, str) else (given.text, given.images)
        if text:
            texts.append(text)
        if images and texts:
            parts.append("\n\n".join(texts))
            texts = []
        parts.extend(images)
    if texts:
        parts.append("\n\n".join(texts))
    return parts


def input_images(inputs: Sequence[Input]) -> list[ImagePart]:
    return [image for given in inputs if not isinstance(given, str) for image in given.images]


@dataclass(frozen=True, slots=True)  # slotted: a request's projection lists every result of the history
class ToolResultAt:
    """One tool result found in a transcript's items (`Transcript.tool_results`): `index` the item
    that holds it, the call it answers, the tool that call named (resolved from the call's own item;
    "" when no item before it made that call), the text the model reads (an error prefix included
    on a wire that has no flag), and whether it is an error result."""

    index: int
    call_id: str
    name: str
    text: str
    is_error: bool


def text_content(content: object) -> str:
    """A content string, or the text of its `{"type": "text", "text"}` parts joined (images and
    documents have no text): a tool result's content as the model reads it, on the wires that take
    either (Chat Completions' tool message, Anthropic's tool_result block)."""
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    return "".join(
        str(part.get("text", "")) for part in parts if isinstance(part, Mapping) and part.get("type") == "text"
    )


class NoSuchToolResult(ValueError):
    """`Transcript.with_tool_result_text` was handed an item that holds no result answering the call."""

    def __init__(self, call_id: str) -> None:
        super().__init__(f"the item holds no tool result answering call {call_id!r}")


@dataclass(frozen=True)
class ModelRequest:
    """One model request as a strategy built it: the system prompt and the adapter's native items to
    send, in order (the accepted turns the strategy kept, then the open turn's items)."""

    system: str
    items: tuple[Item, ...]
    # A server-side handle to continue from (previous_response_id); None sends the items alone.
    previous_response_id: str | None = None
    # This request's own output cap (a harness summary's); None is the run's request.max_output_tokens.
    max_output_tokens: int | None = None
    # The function tools offered with this request, in the provider's shape once the adapter sends them.
    tools: tuple[ToolSpec, ...] = ()

    def output_cap(self, settings: RequestSettings) -> int:
        return self.max_output_tokens if self.max_output_tokens is not None else settings.max_output_tokens


@dataclass(frozen=True)
class ModelResponse:
    text: str
    usage: Usage
    stop_reason: str
    reasoning_summary: str | None = None
    response_id: str | None = None
    # Adapter-owned items to replay in the next request once the reply is accepted; may hold opaque
    # provider state, so they live in memory only and are never written to an artifact as they are.
    native_items: tuple[Item, ...] = ()
    # The function calls the reply made of the request's tools, in order; each must be answered (a
    # ToolResult with its id, laid out by the transcript's `tool_result_items`) before the conversation goes on.
    tool_calls: tuple[ToolCall, ...] = ()


DIAGNOSTIC_KEYS = frozenset(
    {"error_class", "error_type", "status", "code", "request_id", "finish_reason", "stop_details", "cause", "detail"}
)
"""All a ProviderError's diagnostics may hold: the exception class, the provider's error type and code,
the HTTP status, the request id, the finish reason, a refusal's sanitized stop details (type and
category), the class of what broke a malformed reply, and a `detail` the harness wrote itself (why a
connection failed and to which URL, which argument the SDK refused): the failure's reason names it.
Never the provider's message or body, which may echo the request or a credential (a 401 names the
key it refused): a fatal refusal's message goes to the console alone (ProviderError.server_message)."""

SERVER_MESSAGE_CHARS = 200
_OPAQUE_RUN = re.compile(r"[A-Za-z0-9+/=_-]{24,}")  # a key, a token, encrypted state: never a word of a message
LLAMA_CPP_CONTEXT_OVERFLOW = "exceed_context_size_error"  # llama.cpp's llama-server's error type, on every wire


def fatal_message(kind: ErrorKind, status: int, message: object) -> str | None:
    """The words a refusal of `kind` carries to the console: a fatal one's (`server_message`); none
    for a failure the machine retries or reads, whose message nobody is shown."""
    return server_message(status, message) if kind is ErrorKind.FATAL else None


def server_message(status: int, message: object) -> str:
    """A refusal's message as the console may show it: its first line, each run of 24 or more
    letters, digits and `+/=_-` (what a key, a token or opaque state is made of) replaced with
    `[…]`, cut to SERVER_MESSAGE_CHARS: "HTTP 400: llama.cpp does not support 'previous_response_id'."."""
    lines = str(message).strip().splitlines()
    text = _OPAQUE_RUN.sub("[…]", lines[0] if lines else "")
    if len(text) > SERVER_MESSAGE_CHARS:
        text = text[: SERVER_MESSAGE_CHARS - 1] + "…"
    return f"HTTP {status}: {text}" if text else f"HTTP {status}"


@dataclass(frozen=True)
class ProviderError:
    """A failed call, classified, with diagnostics from DIAGNOSTIC_KEYS only."""

    kind: ErrorKind
    usage: Usage = Usage()
    diagnostics: Mapping[str, Any] = field(default_factory=dict)
    # How long the provider asked us to wait before trying again (Retry-After / retry-after-ms).
    retry_after_seconds: float | None = None
    # A fatal refusal in the server's words (`server_message`), for the console only: never written.
    server_message: str | None = field(default=None, repr=False)


class ReplyShape(BaseModel):
    """The shape of what an adapter reads of a reply, field by field with its type. The SDKs build
    reply objects without validating them (a missing field reads None, a number stays a number where
    a string was promised), so an adapter validates each reply against its shapes before reading it:
    a field of the wrong type fails validation, which `never_raising` makes a malformed reply with
    the usage seen. Strict: no number is read as a string, nor a bool as a number. Extra fields are
    allowed and left unread; a shape validates plain JSON or an SDK's object alike (its attributes)."""

    model_config = ConfigDict(strict=True, extra="allow", frozen=True, from_attributes=True)


TokenCount = Annotated[int, Field(ge=0)] | None
"""A provider-reported token count in a reply shape: a non-negative whole number, or None (unreported)."""


def token_count(value: int | None) -> int:
    """A validated TokenCount as a count: unreported is 0."""
    return value or 0


def reported_cost(usage: object) -> float | None:
    """A provider-reported `usage.cost` (OpenRouter's, for one); None unless it is a finite,
    non-negative number. The SDKs keep such unknown fields as extras, read here by name."""
    value = getattr(usage, "cost", None)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if 0 <= value < float("inf") else None


def no_compaction_call(adapter: object) -> ProviderError:
    """What an adapter without a compaction call answers if asked for one: a machine never should."""
    return ProviderError(ErrorKind.FATAL, Usage(), {"error_class": "NoCompactionCall", "cause": type(adapter).__name__})


class DeadlineExceeded(Exception):
    """Marks an exception raised because a request passed its deadline (Endpoint.timeout_seconds),
    whatever the SDK wrapped it in (adapters/bounded_http.py raises it)."""


class ReplyRefused(Exception):
    """Marks an exception raised because a reply could not be read within its bounds: larger than
    Endpoint.max_reply_bytes, or compressed though no compression was accepted."""


def never_raising(
    read: Callable[[UsageSeen], ModelResponse | ProviderError],
    classify: Callable[[Exception], ProviderError],
    sdk_error: type[Exception],
    sdk_deadline: tuple[type[Exception], ...] = (),
) -> ModelResponse | ProviderError:
    """Make one SDK call and read its reply with `read`, never raising: a request that passed its
    bounds is a transient DeadlineExceeded or a malformed reply, whatever the SDK wrapped that in (an
    SDK that keeps the same deadline itself names its own errors for it in `sdk_deadline`); the
    SDK's own errors are classified; and anything else that breaks while reading a 200 (the SDKs do
    not validate replies) is a malformed reply with the usage `read` had seen. Every adapter's call
    and compact go through this, so the rule is kept in one place."""
    seen = UsageSeen()
    try:
        return read(seen)
    except Exception as error:
        deadlines: tuple[type[Exception], ...] = (DeadlineExceeded, *sdk_deadline)
        bound = _bound_passed(error, deadlines)
        if isinstance(bound, deadlines):
            return ProviderError(ErrorKind.TRANSIENT, seen.usage, {"error_class": "DeadlineExceeded"})
        if bound is not None:
            return malformed_reply(bound, seen.usage)
        refused = _refused_argument(error)
        if refused is not None:  # the SDK refused the call before sending it: our bug or the profile's
            detail = f"the SDK takes no {refused!r} argument: a request field this adapter cannot send"
            return ProviderError(ErrorKind.FATAL, seen.usage, {"error_class": "TypeError", "detail": detail})
        if isinstance(error, sdk_error):
            classified = classify(error)
            unreached = connection_failure(error)
            if unreached is None:
                return classified
            return replace(classified, diagnostics={**classified.diagnostics, "detail": unreached})
        return malformed_reply(error, seen.usage)


# Python's own wording for a call it cannot bind, and google-genai's ("got unexpected keyword argument(s): x").
_REFUSED_ARGUMENT = re.compile(r"got (?:an )?unexpected keyword argument(?:\(s\))?:? '?(\w+)")


def _refused_argument(error: Exception) -> str | None:
    """The keyword argument an SDK call refused (a TypeError from binding the call's arguments), if
    that is what `error` is: nothing was sent, and no retry can help."""
    if not isinstance(error, TypeError):
        return None
    match = _REFUSED_ARGUMENT.search(str(error))
    return None if match is None else match.group(1)


def connection_failure(error: BaseException) -> str | None:
    """Why a request never reached its server, and where, from the exceptions `error` was raised
    from: "connection refused at http://127.0.0.1:9/v1/chat/completions", "name not found at ...",
    "TLS failed (...) at ..."; None when no connection failed."""
    reason, url = None, None
    seen: set[int] = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if url is None:
            url = _request_url(cause)
        if reason is None and isinstance(cause, OSError):
            reason = _connection_reason(cause)
        cause = cause.__cause__ or cause.__context__
    if reason is None:
        return None
    return reason if url is None else f"{reason} at {url}"


_CONNECTION_REASONS: tuple[tuple[type[OSError], str], ...] = (
    (socket.gaierror, "name not found"),
    (ConnectionRefusedError, "connection refused"),
    (ConnectionResetError, "connection reset"),
    (TimeoutError, "connection timed out"),
)


def _connection_reason(error: OSError) -> str:
    if isinstance(error, ssl.SSLError):
        return f"TLS failed ({error.reason or error.strerror or type(error).__name__})"
    named = next((reason for kind, reason in _CONNECTION_REASONS if isinstance(error, kind)), None)
    return named or error.strerror or type(error).__name__


def _request_url(error: BaseException) -> str | None:
    """The URL of the request an SDK or HTTP error carries (without its query), if it carries one."""
    try:
        request = getattr(error, "request", None)
        url = getattr(request, "url", None)
    except Exception:  # httpx raises for an error made without a request
        return None
    if url is None:
        return None
    text = str(url)
    return text.split("?", 1)[0]


def _bound_passed(error: BaseException, deadlines: tuple[type[Exception], ...]) -> Exception | None:
    """The bound-passed mark (a deadline's or a refused reply's) among `error` and the exceptions it
    was raised from, if any."""
    seen: set[int] = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, Exception) and isinstance(cause, (*deadlines, ReplyRefused)):
            return cause
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return None


def malformed_reply(error: Exception, usage: Usage = Usage()) -> ProviderError:
    """A reply the adapter could not read (a 200 whose body is not what the API promises): retryable,
    with whatever usage it carried. Every adapter's normalization ends here instead of raising."""
    return ProviderError(ErrorKind.TRANSIENT, usage, {"error_class": "MalformedReply", "cause": type(error).__name__})


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """How long a provider asked to wait: `retry-after-ms`, else `retry-after` in seconds or as an
    HTTP date; None when absent or unreadable."""
    lowered = {name.lower(): value for name, value in headers.items()}
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = lowered.get(name)
        if value is None:
            continue
        seconds: float | None
        try:
            seconds = float(value) * scale
        except ValueError:
            seconds = _seconds_until(value)
        if seconds is not None and math.isfinite(seconds) and seconds >= 0:
            return seconds
    return None


def _seconds_until(http_date: str) -> float | None:
    try:
        when = parsedate_to_datetime(http_date)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())


DEFAULT_MAX_REPLY_BYTES = 16 * 1024 * 1024
"""The largest reply or stream a request reads unless client.max_reply_bytes says otherwise."""


@dataclass(frozen=True)
class Endpoint:
    """Where an adapter's SDK client points. `base_url` is the provider root as the profile gave it;
    for the embedded local provider it is the server root and each adapter appends its API prefix."""

    base_url: str
    api_key: str
    is_local: bool
    # A deadline for each whole request (connect, first byte, whole body, streamed or not).
    timeout_seconds: float = 120.0
    # The most one request may read from its connection; a larger reply is a malformed one.
    max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES


OutputLimitParam = Literal["max_tokens", "max_completion_tokens"]


@dataclass(frozen=True)
class RequestSettings:
    """What every request of a run asks for; the harness builds it from the profile's `request` section."""

    model: str
    max_output_tokens: int
    stream: bool = False
    temperature: float | None = None
    # The request field that carries max_output_tokens. OpenAI's own endpoint wants
    # max_completion_tokens (its reasoning models reject max_tokens); many compatible servers
    # (DeepSeek, older open-weight servers) only know max_tokens.
    output_limit_param: OutputLimitParam = "max_completion_tokens"
    # Settings only this adapter's API has (`request.options` in a profile); the adapter validates them.
    options: Mapping[str, Any] = field(default_factory=dict)
    # Body fields a server takes beyond the API's own (`request.extra_body`: llama.cpp's `grammar`,
    # vLLM's `chat_template_kwargs`), sent as given beside the ones the adapter sets, never over them.
    extra_body: Mapping[str, Any] = field(default_factory=dict)


def with_extra_body(body: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """`body` with the profile's extra fields beside its own: a field the adapter sets wins (validation
    refuses an extra field an adapter's `body_fields` names, so none is ever dropped in a run)."""
    return {**extra, **body} if extra else body


class OptionProblem(NamedTuple):
    """One thing wrong with an adapter's `request.options` for a strategy: where (a key path under
    request.options), what, and the fix."""

    path: str
    problem: str
    fix: str


@dataclass(frozen=True)
class RequestBounds:
    """The values a run's requests carry that a provider bounds across a profile's sections (its
    `check_limits`): each output cap sent, with its profile key (the action request's first), the
    context budget, and request.options. Validation names what the provider would refuse with a 400
    once the run is under way."""

    output_caps: tuple[tuple[str, int], ...]
    max_context_length: int
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def max_output_tokens(self) -> int:
        """The action request's output cap (request.max_output_tokens)."""
        return self.output_caps[0][1]


def refused_options(options: Mapping[str, Any], refused: Mapping[str, tuple[str, str]]) -> list[OptionProblem]:
    """The options an adapter refuses by name (key -> (problem, fix)) that `options` sets."""
    return [OptionProblem(key, *refused[key]) for key in refused if key in options]


def schema_problems(errors: Sequence[Mapping[str, Any]], fix: str) -> list[OptionProblem]:
    """A schema validator's errors (pydantic's `ValidationError.errors()`) as option problems, each
    named by its key path."""
    return [OptionProblem(".".join(str(part) for part in item["loc"]), str(item["msg"]), fix) for item in errors]


@dataclass
class UsageSeen:
    """What a call has read so far, so that a reply that breaks mid-way still reports its usage."""

    usage: Usage = field(default_factory=lambda: Usage())


class Transcript(Protocol):
    """How an adapter lays out its native items in the payload (`RuntimeState.payload["items"]`).

    The payload is the adapter's. A strategy machine decides WHEN a turn opens, commits, is trimmed
    or dropped; the transcript decides WHAT the items of a turn are and how they replay. Every method
    is a pure function of its arguments, so a strategy written against this protocol carries any
    adapter's items, opaque reasoning included, without knowing their shape.
    """

    def user_items(self, inputs: Sequence[Input]) -> list[Item]:
        """The items that open a turn from its inputs: every input since the last reply, in order
        (`input_parts`), each image in the wire's own image part."""
        ...

    def reply_items(self, response: ModelResponse) -> list[Item]:
        """The native items an accepted reply appends to its turn, exactly as they must replay."""
        ...

    def projected_reply_items(self, text: str, tool_calls: Sequence[ToolCall]) -> list[Item]:
        """The items a past accepted reply replays as when only its projection is known (its text and
        its calls, no reasoning, signatures or ids the provider minted for the message itself): what
        a resume without the continuation, or a model switch, rebuilds the conversation from. They
        are what the provider takes as an assistant turn in a request's input, hold no opaque field,
        and keep each call's id, which pairs it with its result (`tool_result_items` follow them).
        Either part may be empty (a reply that only called tools has no text); a projection with
        neither is no items, since some wires refuse an empty assistant turn and nothing is lost."""
        ...

    def tool_result_items(self, results: Sequence[ToolResult]) -> list[Item]:
        """The items that answer a reply's tool calls, in the provider's shape and in the calls'
        order: they follow the reply that made the calls and come before any other input, so a call
        and its result always travel together."""
        ...

    def tool_results(self, items: Sequence[Item]) -> list[ToolResultAt]:
        """Every tool result `items` hold, in order, each with the name of the tool its call named
        (read from the call's item before it). Opaque items are passed over, never read."""
        ...

    def with_tool_result_text(self, item: Item, call_id: str, text: str) -> Item:
        """A new item equal to `item` (which holds the result answering `call_id`) except that this
        result's content is `text`; any other result or block it holds is kept as it is, and `item`
        itself is never changed. Raises ValueError when `item` holds no result answering `call_id`."""
        ...

    def estimate_tokens(self, items: Sequence[Item], system: str = "") -> int:
        """Estimated prompt tokens of `items`, behind `system` if one is given; additive over items."""
        ...

    def readable(self, items: Sequence[Item]) -> list[dict[str, str]]:
        """The {role, content} projection of `items` for artifacts; never any opaque state. Item by
        item: a list's projection is its items' projections, concatenated."""
        ...

    def latest_compaction(self, items: Sequence[Item]) -> int | None:
        """The index of the latest provider compaction item in `items` (replay keeps it and everything
        after it), or None when there is none or the surface has no compaction items."""
        ...


NativeCompaction = Literal["inline", "call"]
"""How a provider compacts natively: inside an action reply (inline), or by a call of its own."""


@dataclass(frozen=True)
class SummaryCompaction:
    """An adapter's capability to continue from a harness-written summary: its state can be rebuilt as
    one user-role message followed by accepted turns' exact native items, and its summary requests
    are ordinary calls. `fork` is the adapter's default for forking the latest action request (None:
    no opinion; the profile's explicit value comes first, and without either it is on)."""

    fork: bool | None = None


class ProviderAdapter(Protocol):
    """A leaf action: one normalized request to one SDK call, and back."""

    transcript: ClassVar[Transcript]
    native_compaction: ClassVar[NativeCompaction | None]
    summary_compaction: ClassVar[SummaryCompaction | None]  # None: harness summaries are refused
    # Whether the model must act by calling the environment's action tools (`agent.action_mode:
    # tools`), as DeepSeek's thinking mode wants: its reasoning is replayed only beside tool calls.
    acts_through_tools: ClassVar[bool]
    # Whether the SDK call this adapter makes takes `request.temperature` (read off the SDK's own
    # signature where it varies): a profile that sets it for an adapter that cannot send it is refused.
    takes_temperature: ClassVar[bool]
    # The body fields the adapter sets itself, each with the profile setting (or the run) it comes
    # from: a `request.extra_body` field among them is refused, naming both. None: the adapter's API
    # takes no extra body fields.
    body_fields: ClassVar[Mapping[str, str] | None]
    # The body field that carries a GBNF grammar on the servers that speak this wire (llama.cpp's
    # `grammar`, `request.action_grammar`), or None where none takes one.
    grammar_field: ClassVar[str | None]
    # What its provider accepts of an inline image (adapters/image_costs.py), or None where the API
    # takes no images: a profile that renders images for such an adapter is refused at validation.
    image_limits: ClassVar[ImageLimits | None]
    # The pydantic model of its `request.options` (None: it takes none), whose fields' descriptions the
    # profile reference in docs/ lists under the adapter's id (turnstate/reports/reference.py).
    options_model: ClassVar[type[BaseModel] | None]

    @classmethod
    def connect(cls, endpoint: Endpoint, settings: RequestSettings) -> ProviderAdapter:
        """A ready adapter whose SDK client points at `endpoint`, with the SDK's own retries off."""
        ...

    @classmethod
    def check_options(
        cls, options: Mapping[str, Any], strategy: str, compaction: str, model: str = ""
    ) -> list[OptionProblem]:
        """What is wrong with `request.options` for this strategy, compaction and model; empty if nothing."""
        ...

    @classmethod
    def check_limits(cls, bounds: RequestBounds) -> list[OptionProblem]:
        """What the provider refuses of the values the run sends, where a refusal spans the profile's
        sections (check_options sees the options alone): each named by its profile key path."""
        ...

    def build_request(self, request: ModelRequest) -> dict[str, Any]: ...

    def call(self, request: ModelRequest) -> ModelResponse | ProviderError: ...

    def compact(self, request: ModelRequest) -> ModelResponse | ProviderError:
        """A compaction call over `request.items`: its native items replace them (native_compaction
        "call"); an adapter without one answers a fatal error."""
        ...

    def classify(self, error: Exception) -> ProviderError: ...
