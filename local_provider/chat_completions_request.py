"""Chat Completions request validation: the first offending field wins, named as api.openai.com names it.

The wire (chat_completions.py) answers a request only after `parse_request` accepts it. The checks
run in a fixed order (unknown arguments, model, messages in order, stream, sampling, n, tools,
response_format, the output limit, stream_options) and the first failure is the 400. Being laxer
than the real service would let an adapter bug pass here and fail against the real one; being
stricter would reject what the real one serves. So the rules follow the API reference and the
installed SDK's parameter types, and the messages follow replies quoted from api.openai.com; where
no reply could be checked, the wording follows the same patterns. That includes the service's own
inconsistencies: most errors name `messages[1].content`, a few name `messages.[1].content`, and some
(unknown arguments, unknown message keys) name no param at all.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from turnstate.adapters.image_costs import OPENAI_IMAGE_LIMITS, ImageLimits
from turnstate.adapters.images import ImageError, ImagePart
from turnstate.local_provider.openai_words import (
    InvalidParam,
    check_decimal,
    empty_array,
    invalid_type,
    invalid_value,
    missing,
    missing_or_invalid_type,
    optional_bool,
    optional_int,
)
from turnstate.local_provider.vision import seen_text, url_image

# Every top-level field of the real Chat Completions create request (openai SDK 3.57); any other
# field is "Unrecognized request argument supplied". A test compares this with the installed SDK.
KNOWN_PARAMS: frozenset[str] = frozenset(
    {
        "model",
        "messages",
        "audio",
        "frequency_penalty",
        "function_call",
        "functions",
        "logit_bias",
        "logprobs",
        "max_completion_tokens",
        "max_tokens",
        "metadata",
        "modalities",
        "moderation",
        "n",
        "parallel_tool_calls",
        "prediction",
        "presence_penalty",
        "prompt_cache_key",
        "prompt_cache_options",
        "prompt_cache_retention",
        "reasoning_effort",
        "response_format",
        "safety_identifier",
        "seed",
        "service_tier",
        "stop",
        "store",
        "stream",
        "stream_options",
        "temperature",
        "tool_choice",
        "tools",
        "top_logprobs",
        "top_p",
        "user",
        "verbosity",
        "web_search_options",
    }
)

# In the order the real service lists them when it rejects a role.
ROLES = ("system", "assistant", "user", "function", "tool", "developer")
SYSTEM_ROLES = frozenset({"system", "developer"})  # both instruct the model; developer is o1's name for system

MESSAGE_KEYS: Mapping[str, frozenset[str]] = {
    "system": frozenset({"role", "content", "name"}),
    "developer": frozenset({"role", "content", "name"}),
    "user": frozenset({"role", "content", "name"}),
    # `annotations`: the reply message's own field, which the real service takes back when a client
    # replays the SDK's message as it came (`messages.append(choice.message)`), the common idiom.
    "assistant": frozenset(
        {"role", "content", "name", "refusal", "tool_calls", "function_call", "audio", "annotations"}
    ),
    "tool": frozenset({"role", "content", "tool_call_id"}),
    "function": frozenset({"role", "content", "name"}),
}
PART_TYPES: Mapping[str, tuple[str, ...]] = {
    "user": ("text", "image_url", "input_audio", "file"),
    "assistant": ("text", "refusal"),
}
OPENAI_DETAILS = (
    "auto",
    "low",
    "high",
)  # an image_url part's detail ("original", newer models' own, is not modelled here)
TEXT_PARTS = ("text",)  # system, developer and tool content
STRING_PARTS = frozenset({"text", "refusal"})  # parts whose payload is a string, not an object

DECIMAL_RANGES: Mapping[str, tuple[int, int]] = {
    "temperature": (0, 2),
    "top_p": (0, 1),
    "presence_penalty": (-2, 2),
    "frequency_penalty": (-2, 2),
}
MAX_CHOICES = 128
TOOL_TYPES = ("function", "custom")
RESPONSE_FORMATS = ("json_object", "json_schema", "text")

# The real service rejects `max_tokens` for its reasoning models (they spend part of the budget on
# hidden reasoning); `max_completion_tokens` is the field they take.
REASONING_MODEL_PREFIXES = ("o1", "o3", "o4", "gpt-5")


@dataclass(frozen=True)
class ChatRequest:
    """A request that passed validation, in the forms the wire needs."""

    model: str
    sent_messages: tuple[Mapping[str, object], ...]
    """The messages exactly as sent: what the prefix cache compares."""
    messages: tuple[dict[str, object], ...]
    """The same messages with their text parts joined into one content string (other parts, such as
    images, dropped): what the text model reads and the estimate counts."""
    max_tokens: int | None
    choices: int
    stream: bool
    include_usage: bool
    tools: tuple[Mapping[str, object], ...] = ()


def parse_request(
    body: Mapping[str, object],
    reasoning_fields: Sequence[str] = (),
    known: Sequence[dict[str, object]] = (),
    image_limits: ImageLimits | None = OPENAI_IMAGE_LIMITS,
) -> ChatRequest:
    """Validate `body` in the module's order; the first offending field raises InvalidParam. An
    open-weight server also takes an assistant message's reasoning under `reasoning_fields`.

    `known` are the read (flattened) forms of the leading messages this request shares with a recent
    one the same server validated (its prompt cache says which): they are neither checked nor read
    again, so a request costs what it added to the conversation."""
    _check_known_params(body)
    model = _model(body)
    sent_messages = _messages(body, reasoning_fields, len(known))
    images = _images(sent_messages, len(known), image_limits)
    stream = optional_bool(body, "stream") or False
    for name, (low, high) in DECIMAL_RANGES.items():
        check_decimal(body, name, low, high)
    choices = optional_int(body, "n", minimum=1, maximum=MAX_CHOICES) or 1
    tools = _tools(body)
    _check_response_format(body)
    max_tokens = _max_tokens(body, model)
    return ChatRequest(
        model=model,
        sent_messages=sent_messages,
        messages=(*known, *(_flattened(message, images.get(index)) for index, message in _new(sent_messages, known))),
        max_tokens=max_tokens,
        choices=choices,
        stream=stream,
        include_usage=_include_usage(body, stream),
        tools=tools,
    )


def is_reasoning_model(model: str) -> bool:
    return model.startswith(REASONING_MODEL_PREFIXES)


def _check_known_params(body: Mapping[str, object]) -> None:
    for name in body:
        if name not in KNOWN_PARAMS:
            raise InvalidParam(None, f"Unrecognized request argument supplied: {name}", code=None)


def _model(body: Mapping[str, object]) -> str:
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise invalid_type("model", "a string", model)
    if not model:
        raise InvalidParam("model", "you must provide a model parameter", code="missing_required_parameter")
    return model


# --- messages --------------------------------------------------------------------------------------


def _messages(
    body: Mapping[str, object], reasoning_fields: Sequence[str], checked: int
) -> tuple[Mapping[str, object], ...]:
    messages = body.get("messages")
    if messages is None:
        raise missing("messages")
    if not isinstance(messages, list):
        raise invalid_type("messages", "an array", messages)
    if not messages:
        raise empty_array("messages")
    reasoning = frozenset(reasoning_fields)
    allowed = {role: keys | reasoning if role == "assistant" else keys for role, keys in MESSAGE_KEYS.items()}
    for index in range(checked, len(messages)):
        _check_message(index, messages[index], allowed, reasoning_fields)
    _check_tool_results(messages, checked)
    return tuple(messages)


def _check_tool_results(messages: Sequence[Mapping[str, object]], checked: int) -> None:
    """Every tool call is answered by one tool message right after its assistant message, and a tool
    message answers a call of the assistant message before it, once; the first message that breaks
    this is OpenAI's 400, code null (TOOL_PAIRING says which words). The `checked` leading messages
    were valid in an earlier request, so pairing is read again only from the last of them that is
    not a tool result (everything before it was answered)."""
    start = checked - 1
    while start > 0 and messages[start]["role"] == "tool":
        start -= 1
    caller = 0
    calls: Sequence[str] = ()  # what the assistant message before the tool messages called
    answered: dict[str, int] = {}  # each answered call, and the index of its tool message
    for index in range(max(start, 0), len(messages)):
        message = messages[index]
        if message["role"] == "tool":
            call_id = str(message["tool_call_id"])
            _check_answers(index, call_id, calls, answered)
            answered[call_id] = index
            continue
        _check_answered(caller, calls, answered)
        tool_calls = message.get("tool_calls") if message["role"] == "assistant" else None
        caller, answered = index, {}
        calls = [str(call["id"]) for call in tool_calls] if isinstance(tool_calls, list) else []
    _check_answered(caller, calls, answered)


TOOL_PAIRING: Mapping[str, str] = {
    # OpenAI's words for each broken pairing, quoted from its 400s in client issues (type
    # invalid_request_error, code null): a tool message after a message without calls
    # (smarter-sh/smarter#264, sdcb/chats#132: param messages.[i].role); one after calls that do not
    # include its id (dapr/dapr-agents#145, the param not quoted there: the message's tool_call_id,
    # as for a duplicate); a second answer to one call (agno-agi/agno#5116: param
    # messages.[i].tool_call_id); calls left unanswered (sdcb/chats#132: param messages.[i].role, i
    # the assistant message that made them).
    "orphan": "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with "
    "'tool_calls'.",
    "not_called": "Invalid parameter: 'tool_call_id' of '{id}' not found in 'tool_calls' of previous message.",
    "duplicate": "Invalid parameter: Duplicate value for 'tool_call_id' of '{id}', in messages[{first}] and "
    "messages[{index}].",
    "unanswered": "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
    "'tool_call_id'. The following tool_call_ids did not have response messages: {ids}",
}


def _check_answers(index: int, call_id: str, calls: Sequence[str], answered: Mapping[str, int]) -> None:
    """The tool message at `index` answers one of `calls` not `answered` yet."""
    if not calls:
        raise InvalidParam(f"messages.[{index}].role", TOOL_PAIRING["orphan"], code=None)
    if call_id not in calls:
        text = TOOL_PAIRING["not_called"].format(id=call_id)
        raise InvalidParam(f"messages.[{index}].tool_call_id", text, code=None)
    if call_id in answered:
        text = TOOL_PAIRING["duplicate"].format(id=call_id, first=answered[call_id], index=index)
        raise InvalidParam(f"messages.[{index}].tool_call_id", text, code=None)


def _check_answered(caller: int, calls: Sequence[str], answered: Mapping[str, int]) -> None:
    awaiting = [call_id for call_id in calls if call_id not in answered]
    if awaiting:
        text = TOOL_PAIRING["unanswered"].format(ids=", ".join(awaiting))
        raise InvalidParam(f"messages.[{caller}].role", text, code=None)


def _check_message(
    index: int, message: object, allowed: Mapping[str, frozenset[str]], reasoning_fields: Sequence[str]
) -> None:
    """One message's shape; `allowed` gives each role's keys. Every request checks every message, so
    the usual message (text content, known keys) takes no more than a few lookups."""
    param = f"messages[{index}]"
    if not isinstance(message, dict):
        raise invalid_type(param, "an object", message)
    role = message.get("role")
    if role is None:
        raise missing(f"{param}.role")
    if role not in ROLES:
        raise invalid_value(f"{param}.role", role, ROLES)
    if not allowed[role].issuperset(message):
        unexpected = [key for key in message if key not in allowed[role]]
        names = ", ".join(f"'{key}'" for key in unexpected)
        verb = "was" if len(unexpected) == 1 else "were"
        message_text = f"Additional properties are not allowed ({names} {verb} unexpected) - 'messages.{index}'"
        raise InvalidParam(None, message_text, code=None)
    if role == "assistant":
        _check_assistant(index, message)
        for field in reasoning_fields:
            if field in message and not isinstance(message[field], str):
                raise invalid_type(f"{param}.{field}", "a string", message[field])
    elif role == "function":
        _check_function(param, message)
    else:
        _check_content(f"{param}.content", message.get("content"), PART_TYPES.get(role, TEXT_PARTS))
    if role == "tool":
        _check_tool_call_id(index, message)


def _check_assistant(index: int, message: Mapping[str, object]) -> None:
    """Content may be null (or absent) only when the assistant called a tool instead of answering."""
    param = f"messages[{index}]"
    content = message.get("content")
    called = "tool_calls" in message or "function_call" in message
    if content is None and not called:
        message_text = "Invalid value for 'content': expected a string, got null."
        raise InvalidParam(f"messages.[{index}].content", message_text, code=None)
    if content is not None:
        _check_content(f"{param}.content", content, PART_TYPES["assistant"])
    if "annotations" in message and not isinstance(message["annotations"], list):
        raise invalid_type(f"{param}.annotations", "an array", message["annotations"])
    if "tool_calls" in message:
        tool_calls = message["tool_calls"]
        if not isinstance(tool_calls, list):
            raise invalid_type(f"{param}.tool_calls", "an array", tool_calls)
        if not tool_calls:
            raise empty_array(f"{param}.tool_calls")
        for call_index, call in enumerate(tool_calls):
            call_param = f"{param}.tool_calls[{call_index}]"
            call_id = _typed_object(call_param, call, TOOL_TYPES).get("id")
            if not isinstance(call_id, str):
                raise missing_or_invalid_type(f"{call_param}.id", "a string", call_id)


def _check_function(param: str, message: Mapping[str, object]) -> None:
    """The deprecated `function` role: a required name, and content that is text or null."""
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        raise invalid_type(f"{param}.content", "a string", content)
    if not isinstance(message.get("name"), str):
        raise missing_or_invalid_type(f"{param}.name", "a string", message.get("name"))


def _check_tool_call_id(index: int, message: Mapping[str, object]) -> None:
    tool_call_id = message.get("tool_call_id")
    if tool_call_id is None:
        text = "Missing parameter 'tool_call_id': messages with role 'tool' must have a 'tool_call_id'."
        raise InvalidParam(f"messages.[{index}].tool_call_id", text, code=None)
    if not isinstance(tool_call_id, str):
        raise invalid_type(f"messages[{index}].tool_call_id", "a string", tool_call_id)


def _check_content(param: str, content: object, part_types: Sequence[str]) -> None:
    if isinstance(content, str):
        return
    if not isinstance(content, list):
        raise invalid_type(param, "one of a string or array of objects", content)
    if not content:
        raise empty_array(param)
    for index, part in enumerate(content):
        part_param = f"{param}[{index}]"
        if not isinstance(part, dict):
            raise invalid_type(part_param, "an object", part)
        kind = part.get("type")
        if kind is None:
            raise missing(f"{part_param}.type")
        if kind not in part_types:
            raise invalid_value(f"{part_param}.type", kind, part_types)
        payload = part.get(kind)
        expected = ("a string", str) if kind in STRING_PARTS else ("an object", dict)
        if not isinstance(payload, expected[1]):
            raise missing_or_invalid_type(f"{part_param}.{kind}", expected[0], payload)
        if kind == "image_url" and isinstance(payload, dict) and not isinstance(payload.get("url"), str):
            raise missing_or_invalid_type(f"{part_param}.image_url.url", "a string", payload.get("url"))


def _new(
    messages: Sequence[Mapping[str, object]], known: Sequence[object]
) -> Iterator[tuple[int, Mapping[str, object]]]:
    return ((index, messages[index]) for index in range(len(known), len(messages)))


def _images(
    messages: Sequence[Mapping[str, object]], checked: int, limits: ImageLimits | None
) -> dict[int, dict[int, ImagePart]]:
    """The images of the messages after the first `checked`, by message and part, each taken as the
    server takes it (vision.py rule 1); a server that takes no image (DeepSeek) refuses the part's
    type. The count a limit reads is the whole request's."""
    places = [
        (index, at, part)
        for index, message in enumerate(messages)
        if message.get("role") == "user" and isinstance(content := message.get("content"), list)
        for at, part in enumerate(content)
        if part["type"] == "image_url"
    ]
    found: dict[int, dict[int, ImagePart]] = {}
    for index, at, part in places:
        if index < checked:
            continue
        param = f"messages[{index}].content[{at}]"
        if limits is None:
            raise invalid_value(f"{param}.type", "image_url", ("text",))
        payload = part["image_url"]
        detail = payload.get("detail", "auto")
        if detail not in OPENAI_DETAILS:
            raise invalid_value(f"{param}.image_url.detail", detail, OPENAI_DETAILS)
        try:
            found.setdefault(index, {})[at] = url_image(payload["url"], limits, len(places))
        except ImageError as error:
            raise InvalidParam(f"{param}.image_url.url", f"Invalid image: {error}", code="invalid_image") from None
    return found


def _flattened(message: Mapping[str, object], images: Mapping[int, ImagePart] | None = None) -> dict[str, object]:
    """The message with its text parts joined into one content string, each image read as the model
    sees it (vision.seen_text); other parts and fields kept out of the text, null content read as empty."""
    content = message.get("content")
    if isinstance(content, str) and content and isinstance(message, dict):
        return message  # already text: the same message, not a copy of it
    if isinstance(content, list):
        images = images or {}
        parts = [
            images[at] if at in images else str(part["text"])
            for at, part in enumerate(content)
            if at in images or part["type"] == "text"
        ]
        content = seen_text(parts)
    return {**message, "content": content or ""}


# --- other parameters ------------------------------------------------------------------------------


def _tools(body: Mapping[str, object]) -> tuple[Mapping[str, object], ...]:
    tools = body.get("tools")
    if tools is None:
        return ()
    if not isinstance(tools, list):
        raise invalid_type("tools", "an array", tools)
    if not tools:
        raise empty_array("tools")
    return tuple(_typed_object(f"tools[{index}]", tool, TOOL_TYPES) for index, tool in enumerate(tools))


def _typed_object(param: str, value: object, types: Sequence[str]) -> dict[str, object]:
    """`value` if it has the shape of a tool and of a tool call: `{"type": t, t: {"name": ..., ...}}`."""
    if not isinstance(value, dict):
        raise invalid_type(param, "an object", value)
    kind = value.get("type")
    if kind is None:
        raise missing(f"{param}.type")
    if kind not in types:
        raise invalid_value(f"{param}.type", kind, types)
    payload = value.get(kind)
    if not isinstance(payload, dict):
        raise missing_or_invalid_type(f"{param}.{kind}", "an object", payload)
    if not isinstance(payload.get("name"), str):
        raise missing_or_invalid_type(f"{param}.{kind}.name", "a string", payload.get("name"))
    return value


def _check_response_format(body: Mapping[str, object]) -> None:
    response_format = body.get("response_format")
    if response_format is None:
        return
    if not isinstance(response_format, dict):
        raise invalid_type("response_format", "an object", response_format)
    kind = response_format.get("type")
    if kind is None:
        raise missing("response_format.type")
    if kind not in RESPONSE_FORMATS:
        raise invalid_value("response_format.type", kind, RESPONSE_FORMATS)
    if kind == "json_schema" and not isinstance(response_format.get("json_schema"), dict):
        schema = response_format.get("json_schema")
        raise missing_or_invalid_type("response_format.json_schema", "an object", schema)


def _max_tokens(body: Mapping[str, object], model: str) -> int | None:
    max_tokens = optional_int(body, "max_tokens", minimum=1)
    max_completion_tokens = optional_int(body, "max_completion_tokens", minimum=1)
    if max_tokens is not None and is_reasoning_model(model):
        message = (
            "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead."
        )
        raise InvalidParam("max_tokens", message, code="unsupported_parameter")
    if max_tokens is not None and max_completion_tokens is not None:
        message = "Setting 'max_tokens' and 'max_completion_tokens' at the same time is not supported."
        raise InvalidParam("max_tokens", message)
    return max_tokens if max_tokens is not None else max_completion_tokens


def _include_usage(body: Mapping[str, object], stream: bool) -> bool:
    options = body.get("stream_options")
    if options is None:
        return False
    if not stream:
        message = "The 'stream_options' parameter is only allowed when 'stream' is enabled."
        raise InvalidParam("stream_options", message)
    if not isinstance(options, dict):
        raise invalid_type("stream_options", "an object", options)
    return optional_bool(options, "include_usage", prefix="stream_options.") or False
