"""The Chat Completions wire: `POST /v1/chat/completions`, as strict as the real service.

It only translates. It validates a request as OpenAI does (400 naming the offending param), enforces
the context window with OpenAI's own error, asks the server's Exchange for the model's Completion, and
words it as a `chat.completion` object or a `chat.completion.chunk` event stream. Auth, ordinals,
faults, the prefix cache and HTTP framing belong to the server.

Tokens are the harness's estimate (turnstate.adapters.tokens) over the messages with their content
flattened to text, so a prompt the harness trimmed to fit the window fits here exactly.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from turnstate.adapters.tokens import estimate_messages_tokens
from turnstate.local_provider.exchange import Completion, Exchange, SharedError, SseEvent

ROLES = ("system", "assistant", "user", "tool")
FINISH_REASONS: Mapping[str, str] = {"stop": "stop", "length": "length", "refusal": "content_filter"}
STREAM_PIECES = 3  # content deltas per streamed reply, so a client must reassemble them

# kind -> (status, message, type, code), as api.openai.com answers them.
SHARED_ERRORS: Mapping[str, tuple[int, str, str, str | None]] = {
    "missing_api_key": (
        401,
        "You didn't provide an API key. You need to provide your API key in an Authorization header "
        "using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
        "invalid_request_error",
        "invalid_api_key",
    ),
    "unparseable_body": (
        400,
        "We could not parse the JSON body of your request. The OpenAI API expects a JSON object as the request body.",
        "invalid_request_error",
        None,
    ),
    "rate_limit": (429, "Rate limit reached for requests", "requests", "rate_limit_exceeded"),
    "server_error": (500, "The server had an error while processing your request.", "server_error", None),
    "overloaded": (503, "The engine is currently overloaded. Please try again later.", "overloaded_error", None),
}


def error_reply(kind: SharedError) -> tuple[int, dict[str, object]]:
    status, message, error_type, code = SHARED_ERRORS[kind]
    return status, error_body(message, error_type=error_type, code=code)


def error_body(
    message: str,
    *,
    error_type: str = "invalid_request_error",
    param: str | None = None,
    code: str | None = None,
) -> dict[str, object]:
    return {"error": {"message": message, "type": error_type, "param": param, "code": code}}


def context_length_body(window: int, prompt_tokens: int, max_tokens: int) -> dict[str, object]:
    message = (
        f"This model's maximum context length is {window} tokens. However, you requested "
        f"{prompt_tokens + max_tokens} tokens ({prompt_tokens} in the messages, {max_tokens} in the "
        "completion). Please reduce the length of the messages or completion."
    )
    return error_body(message, param="messages", code="context_length_exceeded")


class InvalidParam(ValueError):
    """A request field the real service would reject with 400, naming the field."""

    def __init__(self, param: str, message: str, code: str | None = "invalid_value") -> None:
        super().__init__(message)
        self.param = param
        self.message = message
        self.code = code


@dataclass(frozen=True)
class ChatRequest:
    """A request that passed validation, in the two forms the wire needs."""

    model: str
    sent_messages: tuple[Mapping[str, object], ...]
    """The messages exactly as sent: what the prefix cache compares."""
    messages: tuple[dict[str, object], ...]
    """The same messages with content flattened to text: what the model reads and the estimate counts."""
    max_tokens: int | None
    stream: bool
    include_usage: bool


def handle(exchange: Exchange) -> None:
    """Answer one admitted request: 400 if invalid or over the window, else the completion."""
    try:
        request = parse_request(exchange.body)
    except InvalidParam as invalid:
        exchange.send_json(400, error_body(invalid.message, param=invalid.param, code=invalid.code))
        return
    prompt_tokens = estimate_messages_tokens(request.messages)
    completion_budget = request.max_tokens or 0
    if prompt_tokens + completion_budget > exchange.context_window:
        exchange.send_json(400, context_length_body(exchange.context_window, prompt_tokens, completion_budget))
        return
    stream_cut = exchange.fault is not None and exchange.fault.kind == "stream_cut"
    if stream_cut and not request.stream:
        exchange.drop_connection()
        return

    system, messages = system_prompt(request.messages), conversation(request.messages)
    completion = exchange.complete(system, messages, request.max_tokens)
    cached_messages = exchange.prefix_cache.match_and_record(request.model, request.sent_messages)
    cached_tokens = estimate_messages_tokens(request.messages[:cached_messages])
    usage = usage_object(prompt_tokens, cached_tokens, completion.tokens)
    head = {"id": f"chatcmpl-local-{exchange.ordinal}", "created": int(time.time()), "model": request.model}
    if not request.stream:
        exchange.send_json(200, completion_object(head, completion, usage))
        return
    events = chunk_events(head, completion, usage if request.include_usage else None)
    # A cut stream shows the role chunk and the first piece of text, if any, but never its end.
    exchange.send_sse(events, cut_after=(2 if completion.text else 1) if stream_cut else None)


def system_prompt(messages: Sequence[Mapping[str, object]]) -> str:
    return "\n".join(str(message["content"]) for message in messages if message["role"] == "system")


def conversation(messages: Sequence[Mapping[str, object]]) -> list[Mapping[str, object]]:
    return [message for message in messages if message["role"] != "system"]


def usage_object(prompt_tokens: int, cached_tokens: int, completion_tokens: int) -> dict[str, object]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cached_tokens},
        "completion_tokens_details": {"reasoning_tokens": 0},
    }


def completion_object(
    head: Mapping[str, object], completion: Completion, usage: Mapping[str, object]
) -> dict[str, object]:
    choice = {
        "index": 0,
        "message": {"role": "assistant", "content": completion.text},
        "finish_reason": FINISH_REASONS[completion.ending],
        "logprobs": None,
    }
    return {**head, "object": "chat.completion", "choices": [choice], "usage": usage}


def chunk_events(
    head: Mapping[str, object], completion: Completion, usage: Mapping[str, object] | None
) -> Sequence[SseEvent]:
    """Role chunk, content chunks, finish chunk, then (if asked) a usage chunk without choices, then [DONE]."""
    chunks = [_chunk(head, {"role": "assistant", "content": ""})]
    chunks += [_chunk(head, {"content": piece}) for piece in _pieces(completion.text, STREAM_PIECES)]
    chunks.append(_chunk(head, {}, FINISH_REASONS[completion.ending]))
    if usage is not None:
        chunks.append({**head, "object": "chat.completion.chunk", "choices": [], "usage": usage})
    return [{"data": json.dumps(chunk)} for chunk in chunks] + [{"data": "[DONE]"}]


def _chunk(
    head: Mapping[str, object], delta: Mapping[str, object], finish_reason: str | None = None
) -> dict[str, object]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}
    return {**head, "object": "chat.completion.chunk", "choices": [choice]}


def _pieces(text: str, count: int) -> list[str]:
    size = max(1, -(-len(text) // count))
    return [text[start : start + size] for start in range(0, len(text), size)]


# --- request validation: the first offending field wins, named as OpenAI names it -------------------


def parse_request(body: Mapping[str, object]) -> ChatRequest:
    """Validate `body`; unknown top-level fields (temperature, top_p, seed, stop, ...) are ignored."""
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise _invalid_type("model", "a string", model)
    if not model:
        raise InvalidParam("model", "you must provide a model parameter", code="missing_required_parameter")
    sent_messages = _messages(body)
    stream = _optional_bool(body, "stream") or False
    return ChatRequest(
        model=model,
        sent_messages=sent_messages,
        messages=tuple(_flattened(message) for message in sent_messages),
        max_tokens=_max_tokens(body),
        stream=stream,
        include_usage=_include_usage(body, stream),
    )


def _messages(body: Mapping[str, object]) -> tuple[Mapping[str, object], ...]:
    messages = body.get("messages")
    if messages is None:
        raise InvalidParam("messages", "Missing required parameter: 'messages'.", code="missing_required_parameter")
    if not isinstance(messages, list):
        raise _invalid_type("messages", "an array", messages)
    if not messages:
        raise _empty_array("messages")
    for index, message in enumerate(messages):
        _check_message(f"messages[{index}]", message)
    return tuple(messages)


def _check_message(param: str, message: object) -> None:
    if not isinstance(message, dict):
        raise _invalid_type(param, "an object", message)
    role = message.get("role")
    if role not in ROLES:
        raise _invalid_value(f"{param}.role", role, ROLES)
    _check_content(f"{param}.content", message.get("content"))


def _check_content(param: str, content: object) -> None:
    if isinstance(content, str):
        return
    if not isinstance(content, list):
        raise _invalid_type(param, "a string or an array of text parts", content)
    if not content:
        raise _empty_array(param)
    for index, part in enumerate(content):
        part_param = f"{param}[{index}]"
        if not isinstance(part, dict):
            raise _invalid_type(part_param, "an object", part)
        if part.get("type") != "text":
            raise _invalid_value(f"{part_param}.type", part.get("type"), ("text",))
        if not isinstance(part.get("text"), str):
            raise _invalid_type(f"{part_param}.text", "a string", part.get("text"))


def _flattened(message: Mapping[str, object]) -> dict[str, object]:
    """The message with its text parts joined into one content string; other fields kept."""
    content = message["content"]
    if isinstance(content, list):
        content = "".join(part["text"] for part in content)
    return {**message, "content": content}


def _max_tokens(body: Mapping[str, object]) -> int | None:
    limits = (_optional_positive_int(body, "max_tokens"), _optional_positive_int(body, "max_completion_tokens"))
    given = [limit for limit in limits if limit is not None]
    if len(given) > 1:
        message = "Setting 'max_tokens' and 'max_completion_tokens' at the same time is not supported."
        raise InvalidParam("max_tokens", message)
    return given[0] if given else None


def _include_usage(body: Mapping[str, object], stream: bool) -> bool:
    options = body.get("stream_options")
    if options is None:
        return False
    if not stream:
        message = "The 'stream_options' parameter is only allowed when 'stream' is enabled."
        raise InvalidParam("stream_options", message)
    if not isinstance(options, dict):
        raise _invalid_type("stream_options", "an object", options)
    return _optional_bool(options, "include_usage", prefix="stream_options.") or False


def _optional_positive_int(body: Mapping[str, object], name: str) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise _invalid_type(name, "an integer", value)
    if value < 1:
        message = f"Invalid '{name}': integer below minimum value. Expected a value >= 1, but got {value} instead."
        raise InvalidParam(name, message, code="integer_below_min_value")
    return value


def _optional_bool(body: Mapping[str, object], name: str, *, prefix: str = "") -> bool | None:
    value = body.get(name)
    if value is not None and not isinstance(value, bool):
        raise _invalid_type(prefix + name, "a boolean", value)
    return value


def _invalid_type(param: str, expected: str, value: object) -> InvalidParam:
    message = f"Invalid type for '{param}': expected {expected}, but got {_json_type(value)} instead."
    return InvalidParam(param, message, code="invalid_type")


def _invalid_value(param: str, value: object, supported: Sequence[str]) -> InvalidParam:
    choices = ", ".join(f"'{choice}'" for choice in supported)
    return InvalidParam(param, f"Invalid value: {value!r}. Supported values are: {choices}.")


def _empty_array(param: str) -> InvalidParam:
    message = (
        f"Invalid '{param}': empty array. Expected an array with minimum length 1, but got an empty array instead."
    )
    return InvalidParam(param, message, code="empty_array")


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a decimal"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"
