"""OpenAI Responses request validation: the first offending field wins, named as api.openai.com names it.

The wires (responses.py for `POST /v1/responses`, responses_compact.py for `POST /v1/responses/compact`)
answer a request only after `parse_create` / `parse_compact` accepts it. The checks run in a fixed
order: unknown arguments, model, input (item by item, in order), then the other parameters, and the
first failure is the 400. The rules follow OpenAI's published OpenAPI spec (openai/openai-openapi,
`CreateResponse`, `InputItem`), the installed SDK's parameter types, and the replies api.openai.com
is known to give (`Unknown parameter: 'input[3].status'.`, `unknown_parameter`). Decisions where
those sources need weighing, each with its evidence:

- an input `reasoning` item may carry `status` (in_progress, completed or incomplete): the spec's
  input `ReasoningItem` and the SDK's `ResponseReasoningItemParam` both list it, and OpenAI's own
  openai-node `toResponseInputItems` replays it unchanged. The seed's "the input schema rejects
  status" is not what the schema says; the live rejections reported by clients (haskell-agent #689,
  oh-my-pi #6513, nanobot #5613) are from the ChatGPT Codex backend and Copilot, not this API. The
  real service never returns it (recorded replies: reasoning items are {type, id, summary,
  encrypted_content}), so a client replaying output unchanged never sends it anyway;
- an input `compaction` item may not carry `created_by`: the spec's `CompactionSummaryItemParam`
  has only type, id and encrypted_content, and openai-node's `toResponseInputItems` strips
  `created_by` from every item as output-only provenance;
- a user, system or developer message may carry `id` and `status`: `status` is in the spec's
  `InputMessage`; `id` is not, but `/responses/compact` returns each kept user message with both
  (recorded: compact_messages.yaml), the guide says to pass that output to the next request, and
  OpenAI's openai-agents compaction session replays those messages unchanged (its issue #2727: only
  assistant ids that had lost their reasoning were refused). So a client may keep or drop them;
- an assistant message's text parts are `output_text` (with `annotations`, which may be empty) or
  `refusal`, never `input_text` nor `input_image`; a user, system or developer message takes input
  parts only (the spec's `InputMessageContentList`, images included);
- an `input_image` part, in a message or in a function_call_output's `output` list (the SDK's
  ResponseFunctionCallOutputItemListParam; that list's image parts have a message's keys and checks,
  its other parts are read as before), is taken as api.openai.com takes it (local_provider/vision.py,
  rule 1, with OPENAI_IMAGE_LIMITS, for the xAI service on this wire too): `image_url` a base64 data
  URL of a whole PNG (a web URL is refused, as this provider fetches nothing), no `file_id` (this
  provider stores no file: send `image_url` as a data URL), `detail` low, high or auto (absent reads
  as auto, as the vision guide's examples send it; newer models' "original" is not modelled: else
  invalid_value), the count the whole input's image parts. An image or file refused is 400
  invalid_image naming the part's `...image_url` (or `...file_id`), the reason and its fix;
- `service_tier`, `tools[].type`, a function tool's `name`, `tool_choice`, `text.format.type`,
  `text.verbosity` and `metadata` (at most 16 string values, keys up to 64 and values up to 512
  characters) take the spec's values, in the service's words (invalid_value, missing, invalid_type,
  object_above_max_properties, string_above_max_length). A test compares each list with the SDK's.

Only the item types this model can read are accepted: messages (the short form, the input
form and the output form with an id), reasoning, compaction, function_call, function_call_output and
item_reference. Anything else is an invalid `type`.

The response echoes the request's settings as the service does; a function tool is echoed with
`strict` (which the response's `FunctionTool` requires): as sent, else true when the parameters
schema is strict-compatible, else false, since "if omitted, Responses attempts to use strict
validation when the schema is compatible, and falls back to non-strict validation otherwise" (the
spec's `FunctionToolParam.strict`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from turnstate.adapters.image_costs import OPENAI_IMAGE_LIMITS
from turnstate.adapters.images import ImageError, refuse
from turnstate.local_provider.chat_completions_request import OPENAI_DETAILS
from turnstate.local_provider.openai_words import (
    InvalidParam,
    check_decimal,
    invalid_type,
    invalid_value,
    missing,
    missing_or_invalid_type,
    optional_bool,
    optional_int,
    unknown,
)
from turnstate.local_provider.vision import url_image

# Every top-level field of the real create request (openai SDK 3.57, ResponseCreateParams); any other
# field is "Unknown parameter". A test compares this with the installed SDK.
CREATE_PARAMS: frozenset[str] = frozenset(
    {
        "access_programs",
        "background",
        "background_options",
        "context_management",
        "conversation",
        "image",
        "include",
        "input",
        "instructions",
        "max_output_tokens",
        "max_tool_calls",
        "metadata",
        "model",
        "moderation",
        "parallel_tool_calls",
        "previous_response_id",
        "prompt",
        "prompt_cache_key",
        "prompt_cache_options",
        "prompt_cache_retention",
        "reasoning",
        "safety_identifier",
        "service_tier",
        "store",
        "stream",
        "stream_options",
        "temperature",
        "text",
        "tool_choice",
        "tools",
        "top_logprobs",
        "top_p",
        "truncation",
        "user",
    }
)
# The same for the compact request (ResponseCompactParams).
COMPACT_PARAMS: frozenset[str] = frozenset(
    {
        "image",
        "input",
        "instructions",
        "model",
        "previous_response_id",
        "prompt_cache_key",
        "prompt_cache_options",
        "prompt_cache_retention",
        "service_tier",
    }
)

ENCRYPTED_REASONING = "reasoning.encrypted_content"
INCLUDABLE = (
    "file_search_call.results",
    "web_search_call.results",
    "web_search_call.action.sources",
    "message.input_image.image_url",
    "computer_call_output.output.image_url",
    "code_interpreter_call.outputs",
    ENCRYPTED_REASONING,
    "message.output_text.logprobs",
)
ROLES = ("user", "assistant", "system", "developer")
SYSTEM_ROLES = frozenset({"system", "developer"})
ITEM_TYPES = (
    "message",
    "reasoning",
    "compaction",
    "function_call",
    "function_call_output",
    "item_reference",
)
ITEM_KEYS: Mapping[str, frozenset[str]] = {
    "input_message": frozenset({"type", "role", "content", "id", "status"}),
    "assistant_message": frozenset({"type", "role", "content", "id", "status", "phase"}),
    "reasoning": frozenset({"type", "id", "summary", "content", "encrypted_content", "status"}),
    # `created_by` is output-only on compaction items (see the docstring).
    "compaction": frozenset({"type", "id", "encrypted_content"}),
    "function_call": frozenset({"type", "id", "call_id", "name", "arguments", "status", "namespace", "caller"}),
    "function_call_output": frozenset({"type", "id", "call_id", "output", "status", "caller", "name", "namespace"}),
    "item_reference": frozenset({"type", "id"}),
}
INPUT_PART_TYPES = ("input_text", "input_image", "input_file")
OUTPUT_PART_TYPES = ("output_text", "refusal")
PART_KEYS: Mapping[str, frozenset[str]] = {
    "input_text": frozenset({"type", "text", "prompt_cache_breakpoint"}),
    "input_image": frozenset({"type", "image_url", "file_id", "detail", "prompt_cache_breakpoint"}),
    "input_file": frozenset({"type", "file_id", "file_data", "file_url", "filename", "prompt_cache_breakpoint"}),
    "output_text": frozenset({"type", "text", "annotations", "logprobs"}),
    "refusal": frozenset({"type", "refusal"}),
}
REASONING_KEYS = frozenset({"effort", "summary", "generate_summary", "context", "mode"})
REASONING_VALUES: Mapping[str, tuple[str, ...]] = {
    "effort": ("none", "minimal", "low", "medium", "high", "xhigh", "max"),
    "summary": ("auto", "concise", "detailed"),
    "generate_summary": ("auto", "concise", "detailed"),
    "context": ("auto", "current_turn", "all_turns"),
}
ITEM_STATUSES = ("in_progress", "completed", "incomplete")
CONTEXT_MANAGEMENT_TYPES = ("compaction",)
SERVICE_TIERS = ("auto", "default", "flex", "scale", "priority", "fast", "ultrafast")  # ServiceTierResponses
COMPACT_SERVICE_TIERS = ("auto", "default", "fast", "flex", "priority")  # ServiceTierEnum
TOOL_TYPES = (
    "function",
    "file_search",
    "computer",
    "computer_use_preview",
    "web_search",
    "web_search_2025_08_26",
    "mcp",
    "code_interpreter",
    "programmatic_tool_calling",
    "image_generation",
    "local_shell",
    "shell",
    "custom",
    "namespace",
    "tool_search",
    "web_search_preview",
    "web_search_preview_2025_03_11",
    "apply_patch",
)
TOOL_CHOICE_MODES = ("none", "auto", "required")
TOOL_CHOICE_TYPES = (
    "allowed_tools",
    "file_search",
    "web_search_preview",
    "computer",
    "computer_use_preview",
    "computer_use",
    "web_search_preview_2025_03_11",
    "image_generation",
    "code_interpreter",
    "function",
    "mcp",
    "custom",
    "programmatic_tool_calling",
    "apply_patch",
    "shell",
)
TEXT_KEYS = frozenset({"format", "verbosity"})
TEXT_FORMAT_TYPES = ("text", "json_schema", "json_object")
VERBOSITY_VALUES = ("low", "medium", "high")
METADATA_PAIRS, METADATA_KEY_CHARS, METADATA_VALUE_CHARS = 16, 64, 512
TRUNCATION_VALUES = ("auto", "disabled")
CACHE_RETENTION_VALUES = ("in_memory", "24h")
DECIMAL_RANGES: Mapping[str, tuple[int, int]] = {"temperature": (0, 2), "top_p": (0, 1)}
MIN_OUTPUT_TOKENS = 16  # the service's floor for max_output_tokens
MAX_TOP_LOGPROBS = 20
IMAGE_PART = "input_image"
FILE_ID_FIX = "send `image_url` as a data URL, data:image/png;base64,<the PNG's base64>"


@dataclass(frozen=True)
class CompactionSetting:
    """`context_management: [{"type": "compaction", "compact_threshold": N}]`: compact when the prompt
    estimate exceeds N (no threshold: never inline)."""

    threshold: int | None


@dataclass(frozen=True)
class CreateRequest:
    """A `POST /v1/responses` body that passed validation."""

    model: str
    items: tuple[Mapping[str, object], ...]
    """The input items as sent (a string input as one user message)."""
    instructions: str | None
    previous_response_id: str | None
    store: bool
    stream: bool
    include_encrypted_reasoning: bool
    summary_requested: bool
    max_output_tokens: int | None
    compaction: CompactionSetting | None
    truncation: str
    echo: Mapping[str, object]
    """Settings the response object repeats (temperature, reasoning, text, ...), as the service does."""
    functions: tuple[tuple[str, object], ...] = ()
    """The function tools offered, in order, as (name, parameters' JSON Schema): what the model may call."""


@dataclass(frozen=True)
class CompactRequest:
    """A `POST /v1/responses/compact` body that passed validation."""

    model: str
    items: tuple[Mapping[str, object], ...]
    instructions: str | None
    previous_response_id: str | None


def parse_create(body: Mapping[str, object]) -> CreateRequest:
    """Validate a create body in the module's order; the first offending field raises InvalidParam."""
    _check_known(body, CREATE_PARAMS)
    model = _model(body)
    items = _input(body)
    instructions = _optional_str(body, "instructions")
    previous_response_id = _optional_str(body, "previous_response_id")
    if not items and previous_response_id is None:
        raise missing("input")
    include = _include(body)
    reasoning = _reasoning(body)
    store = optional_bool(body, "store")
    stream = optional_bool(body, "stream") or False
    background = optional_bool(body, "background")
    if background:
        message = "Background mode is not supported by this endpoint; leave 'background' unset or false."
        raise InvalidParam("background", message, code="unsupported_value")
    optional_bool(body, "parallel_tool_calls")
    for name, (low, high) in DECIMAL_RANGES.items():
        check_decimal(body, name, low, high)
    max_output_tokens = optional_int(body, "max_output_tokens", minimum=MIN_OUTPUT_TOKENS)
    optional_int(body, "max_tool_calls", minimum=1)
    optional_int(body, "top_logprobs", minimum=0, maximum=MAX_TOP_LOGPROBS)
    compaction = _context_management(body)
    truncation = _choice(body, "truncation", TRUNCATION_VALUES) or "disabled"
    _choice(body, "prompt_cache_retention", CACHE_RETENTION_VALUES)
    _choice(body, "service_tier", SERVICE_TIERS)
    for name in ("prompt_cache_key", "safety_identifier", "user"):
        _optional_str(body, name)
    for name in ("prompt", "moderation", "image", "access_programs", "background_options"):
        _optional_object(body, name)
    _check_metadata(body)
    _check_text(body)
    _check_tools(body)
    _check_tool_choice(body)
    _check_stream_options(body, stream)
    _check_conversation(body)
    return CreateRequest(
        model=model,
        items=items,
        instructions=instructions,
        previous_response_id=previous_response_id,
        store=True if store is None else store,  # the service stores responses unless told not to
        stream=stream,
        include_encrypted_reasoning=ENCRYPTED_REASONING in include,
        summary_requested=reasoning.get("summary") is not None or reasoning.get("generate_summary") is not None,
        max_output_tokens=max_output_tokens,
        compaction=compaction,
        truncation=truncation,
        echo=_echo(body, reasoning),
        functions=_functions(body),
    )


def parse_compact(body: Mapping[str, object]) -> CompactRequest:
    """Validate a compact body: the same rules for the fields it shares with create."""
    _check_known(body, COMPACT_PARAMS)
    model = _model(body)
    items = _input(body)
    instructions = _optional_str(body, "instructions")
    previous_response_id = _optional_str(body, "previous_response_id")
    if not items and previous_response_id is None:
        raise missing("input")
    _choice(body, "prompt_cache_retention", CACHE_RETENTION_VALUES)
    _choice(body, "service_tier", COMPACT_SERVICE_TIERS)
    _optional_str(body, "prompt_cache_key")
    for name in ("prompt_cache_options", "image"):
        _optional_object(body, name)
    return CompactRequest(model, items, instructions, previous_response_id)


def is_assistant_output(item: Mapping[str, object]) -> bool:
    """Items the model wrote (replayed output), as opposed to what the user or a tool sent."""
    kind = item.get("type", "message")
    if kind == "message":
        return item.get("role") == "assistant"
    return kind in ("reasoning", "compaction", "function_call")


# --- top level -------------------------------------------------------------------------------------


def _check_known(body: Mapping[str, object], known: frozenset[str]) -> None:
    for name in body:
        if name not in known:
            raise unknown(name)


def _model(body: Mapping[str, object]) -> str:
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise invalid_type("model", "a string", model)
    if not model:
        raise missing("model")
    return model


def _input(body: Mapping[str, object]) -> tuple[Mapping[str, object], ...]:
    value = body.get("input")
    if value is None:
        return ()
    if isinstance(value, str):
        return ({"role": "user", "content": value},)
    if not isinstance(value, list):
        raise invalid_type("input", "one of a string or array of input items", value)
    for index, item in enumerate(value):
        _check_item(f"input[{index}]", item)
    images = _image_parts(value)
    for param, part in images:
        _check_image(param, part, len(images))
    return tuple(value)


def _include(body: Mapping[str, object]) -> list[str]:
    include = body.get("include")
    if include is None:
        return []
    if not isinstance(include, list):
        raise invalid_type("include", "an array", include)
    for index, value in enumerate(include):
        if value not in INCLUDABLE:
            raise invalid_value(f"include[{index}]", value, INCLUDABLE)
    return include


def _reasoning(body: Mapping[str, object]) -> Mapping[str, object]:
    reasoning = _optional_object(body, "reasoning") or {}
    for key, value in reasoning.items():
        if key not in REASONING_KEYS:
            raise unknown(f"reasoning.{key}")
        if value is not None and key in REASONING_VALUES and value not in REASONING_VALUES[key]:
            raise invalid_value(f"reasoning.{key}", value, REASONING_VALUES[key])
        if value is not None and key == "mode" and not isinstance(value, str):
            raise invalid_type("reasoning.mode", "a string", value)
    return reasoning


def _context_management(body: Mapping[str, object]) -> CompactionSetting | None:
    entries = body.get("context_management")
    if entries is None:
        return None
    if not isinstance(entries, list):
        raise invalid_type("context_management", "an array", entries)
    setting = None
    for index, entry in enumerate(entries):
        param = f"context_management[{index}]"
        if not isinstance(entry, dict):
            raise invalid_type(param, "an object", entry)
        for key in entry:
            if key not in ("type", "compact_threshold"):
                raise unknown(f"{param}.{key}")
        kind = entry.get("type")
        if kind is None:
            raise missing(f"{param}.type")
        if kind not in CONTEXT_MANAGEMENT_TYPES:
            raise invalid_value(f"{param}.type", kind, CONTEXT_MANAGEMENT_TYPES)
        setting = CompactionSetting(optional_int(entry, "compact_threshold", minimum=1, prefix=f"{param}."))
    return setting


def _check_tools(body: Mapping[str, object]) -> None:
    tools = body.get("tools")
    if tools is None:
        return
    if not isinstance(tools, list):
        raise invalid_type("tools", "an array", tools)
    for index, tool in enumerate(tools):
        param = f"tools[{index}]"
        if not isinstance(tool, dict):
            raise invalid_type(param, "an object", tool)
        kind = tool.get("type")
        if kind is None:
            raise missing(f"{param}.type")
        if kind not in TOOL_TYPES:
            raise invalid_value(f"{param}.type", kind, TOOL_TYPES)
        if kind == "function":
            _required_str(param, tool, "name")
            optional_bool(tool, "strict", prefix=f"{param}.")
            _optional_object(tool, "parameters", prefix=f"{param}.")


def _functions(body: Mapping[str, object]) -> tuple[tuple[str, object], ...]:
    """The offered function tools' names and parameters (the tools passed _check_tools)."""
    tools = body.get("tools")
    listed = tools if isinstance(tools, list) else []
    return tuple((str(tool["name"]), tool.get("parameters")) for tool in listed if tool.get("type") == "function")


def _check_tool_choice(body: Mapping[str, object]) -> None:
    """A mode string, or an object naming a kind of tool (function, mcp, a hosted tool, ...)."""
    choice = body.get("tool_choice")
    if choice is None or isinstance(choice, dict) and choice.get("type") in TOOL_CHOICE_TYPES:
        return
    if isinstance(choice, dict):
        if choice.get("type") is None:
            raise missing("tool_choice.type")
        raise invalid_value("tool_choice.type", choice.get("type"), TOOL_CHOICE_TYPES)
    if not isinstance(choice, str):
        raise invalid_type("tool_choice", "one of a string or object", choice)
    if choice not in TOOL_CHOICE_MODES:
        raise invalid_value("tool_choice", choice, TOOL_CHOICE_MODES)


def _check_text(body: Mapping[str, object]) -> None:
    text = _optional_object(body, "text") or {}
    _check_keys("text", text, TEXT_KEYS)
    text_format = _optional_object(text, "format", prefix="text.")
    if text_format is not None:
        if text_format.get("type") is None:
            raise missing("text.format.type")
        _choice(text_format, "type", TEXT_FORMAT_TYPES, prefix="text.format.")
    _choice(text, "verbosity", VERBOSITY_VALUES, prefix="text.")


def _check_metadata(body: Mapping[str, object]) -> None:
    """Up to 16 string values, keys up to 64 and values up to 512 characters (the spec's `Metadata`)."""
    metadata = _optional_object(body, "metadata") or {}
    if len(metadata) > METADATA_PAIRS:
        message = (
            f"Invalid 'metadata': too many properties. Expected an object with at most {METADATA_PAIRS} "
            f"properties, but got an object with {len(metadata)} properties instead."
        )
        raise InvalidParam("metadata", message, code="object_above_max_properties")
    for key, value in metadata.items():
        param = f"metadata.{key}"
        if len(key) > METADATA_KEY_CHARS:
            message = (
                f"Invalid property name in 'metadata': '{key}' is too long. Expected a string with maximum "
                f"length {METADATA_KEY_CHARS}, but got a string with length {len(key)} instead."
            )
            raise InvalidParam(param, message, code="property_name_above_max_length")
        if not isinstance(value, str):
            raise invalid_type(param, "a string", value)
        if len(value) > METADATA_VALUE_CHARS:
            message = (
                f"Invalid '{param}': string too long. Expected a string with maximum length "
                f"{METADATA_VALUE_CHARS}, but got a string with length {len(value)} instead."
            )
            raise InvalidParam(param, message, code="string_above_max_length")


def _check_stream_options(body: Mapping[str, object], stream: bool) -> None:
    options = body.get("stream_options")
    if options is None:
        return
    if not stream:
        raise InvalidParam("stream_options", "The 'stream_options' parameter is only allowed when 'stream' is enabled.")
    if not isinstance(options, dict):
        raise invalid_type("stream_options", "an object", options)


def _check_conversation(body: Mapping[str, object]) -> None:
    """Conversations are a server-side store this provider does not keep, so any id is unknown."""
    conversation = body.get("conversation")
    if conversation is None:
        return
    conversation_id = conversation.get("id") if isinstance(conversation, dict) else conversation
    raise InvalidParam(
        "conversation", f"Conversation with id '{conversation_id}' not found.", code="conversation_not_found"
    )


def _echo(body: Mapping[str, object], reasoning: Mapping[str, object]) -> dict[str, object]:
    tools = body.get("tools")
    return {
        "temperature": body.get("temperature", 1.0),
        "top_p": body.get("top_p", 1.0),
        "reasoning": {"effort": reasoning.get("effort", "medium"), "summary": reasoning.get("summary")},
        "text": {"format": {"type": "text"}, "verbosity": "medium", **(_optional_object(body, "text") or {})},
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": [_echoed_tool(tool) for tool in tools if isinstance(tool, dict)] if isinstance(tools, list) else [],
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "metadata": body.get("metadata") or {},
        "truncation": body.get("truncation") or "disabled",
        "user": body.get("user"),
    }


def _echoed_tool(tool: Mapping[str, object]) -> Mapping[str, object]:
    """A tool as the response repeats it: a function tool with every field its `FunctionTool` requires."""
    if tool.get("type") != "function":
        return tool
    parameters = tool.get("parameters")
    strict = tool.get("strict")
    if strict is None:
        strict = is_strict_compatible(parameters)
    return {"description": None, **tool, "parameters": parameters, "strict": strict}


def is_strict_compatible(schema: object) -> bool:
    """Whether strict mode can take this JSON schema as it is: every object in it closed
    (`additionalProperties: false`) with all its properties required (the structured outputs guide)."""
    if isinstance(schema, list):
        return all(is_strict_compatible(value) for value in schema)
    if not isinstance(schema, dict):
        return True
    properties = schema.get("properties")
    if schema.get("type") == "object" or isinstance(properties, dict):
        fields = properties if isinstance(properties, dict) else {}
        required = schema.get("required")
        if schema.get("additionalProperties") is not False or set(required or []) != set(fields):
            return False
    return all(is_strict_compatible(value) for key, value in schema.items() if key not in ("required", "enum"))


# --- input items -----------------------------------------------------------------------------------


def _check_item(param: str, item: object) -> None:
    if not isinstance(item, dict):
        raise invalid_type(param, "an object", item)
    kind = item.get("type", "message")
    if kind not in ITEM_TYPES:
        raise invalid_value(f"{param}.type", kind, ITEM_TYPES)
    if kind == "message":
        _check_message(param, item)
    elif kind == "reasoning":
        _check_reasoning(param, item)
    elif kind == "compaction":
        _check_keys(param, item, ITEM_KEYS["compaction"])
        _required_str(param, item, "encrypted_content")
        _optional_str(item, "id", prefix=f"{param}.")
    elif kind == "function_call":
        _check_keys(param, item, ITEM_KEYS["function_call"])
        for key in ("call_id", "name", "arguments"):
            _required_str(param, item, key)
    elif kind == "function_call_output":
        _check_keys(param, item, ITEM_KEYS["function_call_output"])
        output = item.get("output")
        if not isinstance(output, (str, list)):
            raise missing_or_invalid_type(f"{param}.output", "one of a string or array", output)
        for at, part in _held_images(output):
            _check_part(f"{param}.output[{at}]", part, INPUT_PART_TYPES)
    else:  # item_reference
        _check_keys(param, item, ITEM_KEYS["item_reference"])
        _required_str(param, item, "id")


def _check_message(param: str, item: Mapping[str, object]) -> None:
    role = item.get("role")
    if role is None:
        raise missing(f"{param}.role")
    if role not in ROLES:
        raise invalid_value(f"{param}.role", role, ROLES)
    assistant = role == "assistant"
    _check_keys(param, item, ITEM_KEYS["assistant_message" if assistant else "input_message"])
    _optional_str(item, "id", prefix=f"{param}.")
    content = item.get("content")
    if isinstance(content, str):
        return
    if not isinstance(content, list):
        raise missing_or_invalid_type(f"{param}.content", "one of a string or array of objects", content)
    part_types = OUTPUT_PART_TYPES if assistant else INPUT_PART_TYPES
    for index, part in enumerate(content):
        _check_part(f"{param}.content[{index}]", part, part_types)


def _check_part(param: str, part: object, part_types: Sequence[str]) -> None:
    if not isinstance(part, dict):
        raise invalid_type(param, "an object", part)
    kind = part.get("type")
    if kind is None:
        raise missing(f"{param}.type")
    if kind not in part_types:
        raise invalid_value(f"{param}.type", kind, part_types)
    _check_keys(param, part, PART_KEYS[kind])
    if kind in ("input_text", "output_text"):
        _required_str(param, part, "text")
    if kind == "output_text" and not isinstance(part.get("annotations"), list):
        raise missing_or_invalid_type(f"{param}.annotations", "an array", part.get("annotations"))
    if kind == "refusal":
        _required_str(param, part, "refusal")


def _held_images(held: object) -> list[tuple[int, Mapping[str, object]]]:
    """The image parts of a content or output list, by their place in it."""
    parts = held if isinstance(held, list) else []
    return [(at, part) for at, part in enumerate(parts) if isinstance(part, dict) and part.get("type") == IMAGE_PART]


def _image_parts(items: Sequence[Mapping[str, object]]) -> list[tuple[str, Mapping[str, object]]]:
    """Every image part of the input, with its path: in a message's content (an assistant's holds
    none, _check_part saw to that) or in a function_call_output's output list."""
    places = []
    for index, item in enumerate(items):
        kind = item.get("type", "message")
        field = "content" if kind == "message" else "output" if kind == "function_call_output" else None
        if field is not None:
            places += [(f"input[{index}].{field}[{at}]", part) for at, part in _held_images(item.get(field))]
    return places


def _check_image(param: str, part: Mapping[str, object], images_in_request: int) -> None:
    """An image part taken as the service takes it (the docstring); the first offending field raises."""
    file_id = part.get("file_id")
    if file_id is not None:
        problem = refuse(f"no file {file_id!r}: the local provider stores no file", FILE_ID_FIX)
        raise InvalidParam(f"{param}.file_id", f"Invalid image: {problem}", code="invalid_image")
    detail = part.get("detail", "auto")
    if detail not in OPENAI_DETAILS:
        raise invalid_value(f"{param}.detail", detail, OPENAI_DETAILS)
    url = _required_str(param, part, "image_url")
    try:
        url_image(url, OPENAI_IMAGE_LIMITS, images_in_request)
    except ImageError as error:
        raise InvalidParam(f"{param}.image_url", f"Invalid image: {error}", code="invalid_image") from None


def _check_reasoning(param: str, item: Mapping[str, object]) -> None:
    _check_keys(param, item, ITEM_KEYS["reasoning"])
    _required_str(param, item, "id")
    summary = item.get("summary")
    if not isinstance(summary, list):
        raise missing_or_invalid_type(f"{param}.summary", "an array", summary)
    for index, part in enumerate(summary):
        part_param = f"{param}.summary[{index}]"
        if not isinstance(part, dict):
            raise invalid_type(part_param, "an object", part)
        _check_keys(part_param, part, frozenset({"type", "text"}))
        kind = part.get("type")
        if kind is None:
            raise missing(f"{part_param}.type")
        if kind != "summary_text":
            raise invalid_value(f"{part_param}.type", kind, ("summary_text",))
        _required_str(part_param, part, "text")
    encrypted = item.get("encrypted_content")
    if encrypted is not None and not isinstance(encrypted, str):
        raise invalid_type(f"{param}.encrypted_content", "a string", encrypted)
    _choice(item, "status", ITEM_STATUSES, prefix=f"{param}.")


def _check_keys(param: str, value: Mapping[str, object], allowed: frozenset[str]) -> None:
    for key in value:
        if key not in allowed:
            raise unknown(f"{param}.{key}")


def _required_str(param: str, value: Mapping[str, object], key: str) -> str:
    found = value.get(key)
    if not isinstance(found, str):
        raise missing_or_invalid_type(f"{param}.{key}", "a string", found)
    return found


# --- scalar parameters -----------------------------------------------------------------------------


def _optional_str(body: Mapping[str, object], name: str, *, prefix: str = "") -> str | None:
    value = body.get(name)
    if value is not None and not isinstance(value, str):
        raise invalid_type(prefix + name, "a string", value)
    return value if isinstance(value, str) else None


def _optional_object(body: Mapping[str, object], name: str, *, prefix: str = "") -> dict[str, object] | None:
    value = body.get(name)
    if value is not None and not isinstance(value, dict):
        raise invalid_type(prefix + name, "an object", value)
    return value if isinstance(value, dict) else None


def _choice(body: Mapping[str, object], name: str, choices: Sequence[str], *, prefix: str = "") -> str | None:
    value = body.get(name)
    if value is not None and value not in choices:
        raise invalid_value(prefix + name, value, choices)
    return value if isinstance(value, str) else None
