"""Gemini Interactions request validation: the first offending field wins, named by its path.

`parse_request` accepts a `POST /{v1,v1beta}/interactions` body or raises InvalidRequest in the
words of Google's JSON front end (google_words.py), e.g. `Invalid JSON payload received. Unknown
name "temperature": Cannot find field.` or `Invalid value at 'input[2].type' (one of user_input,
...), "function_response"`. The checks run in this order: unknown top-level fields, agent fields,
model, background, store, previous_interaction_id, continuation_token, stream, input (step by step,
content by content), system_instruction, generation_config, tools. Rules:

- The fields are those of the SDK's create request (google-genai 3.6: CreateModelInteractionParam
  and CreateAgentInteractionParam). This endpoint serves models only: `agent` and `agent_config` are
  refused, and `model` (a non-empty string) is required.
- `background: true` is refused: nothing here runs in the background (the SDK would then poll).
- `store` defaults to true (the docs: "The server enables state by default (store=true)"); a
  `previous_interaction_id` names a stored interaction to continue (looked up, 404 when unknown, by
  interactions_conversation.py), and is a 400 with `store: false`. A `continuation_token` is never
  issued, so any is a 400.
- `input` is required: a non-empty string, one content object, a list of contents (one user turn),
  or a list of steps. Steps are the SDK's (google-genai 3.6 StepParam) that a client may send this
  model: user_input {type, content}, thought {type, signature, summary}, model_output {type,
  content, error}, function_call {type, id, name, arguments} (id, name and an arguments object
  required, as FunctionCallStepParam has them; it has no signature: the thought step before it
  carries one) and function_result {type, call_id, result, is_error, name} (call_id and result
  required: a string, an object, or a list of contents; name optional, as in
  FunctionResultStepParam). Any other step type is refused. Contents are text {type, text,
  annotations}, image, document, audio and video, each with only its SDK keys; a thought's summary
  holds text and image contents. How function steps pair up and what they may name is checked with
  the conversation (interactions_conversation.py).
- An `image` content (ImageContentParam: data, mime_type, resolution, uri), wherever it is (a
  step's content, a thought's summary, a function_result's result list), is taken as the Gemini API
  takes inline data (local_provider/vision.py, rule 1, with GEMINI_IMAGE_LIMITS): `data` and
  `mime_type` required, a `uri` refused (this provider fetches nothing and holds no uploaded file),
  `resolution` one of the SDK's MediaResolution values (low, medium, high, ultra_high), `data`
  canonical base64 of a whole PNG within the published limits, the count the whole input's images.
  A refusal is a 400 naming the content's path, the reason and the fix.
- `system_instruction` is a string.
- `generation_config` holds only the SDK's keys: max_output_tokens an integer >= 1 (it bounds
  thought and output together), temperature in [0, 2], top_p in [0, 1], seed an integer,
  stop_sequences a list of strings (never matched), thinking_summaries "auto" or "none" (the
  default: no summary), thinking_level minimal, low, medium, high or xhigh (the model thinks the
  same at every level); the media and tool-choice settings are accepted and ignored.
- `tools` is a list of the SDK's tool types (ToolParam: function, google_search, code_execution ...);
  a function tool {type, name, description, parameters, defer_loading, short_description} holds
  only FunctionParam's keys. The function tools are what the model may call; the other tools are
  accepted and never used.
- Every other known field (safety_settings, response_format ...) is accepted and ignored.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from turnstate.adapters.image_costs import GEMINI_IMAGE_LIMITS, GEMINI_RESOLUTION_TOKENS
from turnstate.adapters.images import ImageError, ImagePart, refuse
from turnstate.local_provider.google_words import InvalidRequest, field_required, invalid_value, unknown_field
from turnstate.local_provider.vision import INLINE_FIX, inline_image, seen_text

Step = Mapping[str, object]

# Every top-level field of the create request (google-genai 3.6: CreateModelInteractionParam and
# CreateAgentInteractionParam); any other is "Unknown name".
REQUEST_FIELDS: frozenset[str] = frozenset(
    {
        "agent",
        "agent_config",
        "background",
        "cached_content",
        "continuation_token",
        "environment",
        "generation_config",
        "input",
        "labels",
        "model",
        "previous_interaction_id",
        "response_format",
        "response_mime_type",
        "response_modalities",
        "safety_settings",
        "service_tier",
        "store",
        "stream",
        "system_instruction",
        "tools",
        "webhook_config",
    }
)
AGENT_FIELDS = ("agent", "agent_config")
GENERATION_FIELDS: frozenset[str] = frozenset(
    {
        "image_config",
        "max_output_tokens",
        "seed",
        "speech_config",
        "stop_sequences",
        "temperature",
        "thinking_level",
        "thinking_summaries",
        "tool_choice",
        "top_p",
        "transcription_config",
        "video_config",
    }
)
STEP_KEYS: Mapping[str, frozenset[str]] = {
    "user_input": frozenset({"type", "content"}),
    "thought": frozenset({"type", "signature", "summary"}),
    "model_output": frozenset({"type", "content", "error"}),
    "function_call": frozenset({"type", "id", "name", "arguments"}),
    "function_result": frozenset({"type", "call_id", "result", "is_error", "name"}),
}
CONTENT_KEYS: Mapping[str, frozenset[str]] = {
    "text": frozenset({"type", "text", "annotations"}),
    "image": frozenset({"type", "data", "mime_type", "resolution", "uri"}),
    "document": frozenset({"type", "data", "mime_type", "processing", "resolution", "uri"}),
    "audio": frozenset({"type", "channels", "data", "mime_type", "processing", "sample_rate", "uri"}),
    "video": frozenset({"type", "data", "mime_type", "name", "processing", "resolution", "uri"}),
}
SUMMARY_KEYS: Mapping[str, frozenset[str]] = {name: CONTENT_KEYS[name] for name in ("text", "image")}
# The tool types of the SDK's ToolParam union; of them only a function tool is ever called here.
TOOL_TYPES = frozenset(
    {
        "code_execution",
        "computer_use",
        "file_search",
        "function",
        "google_maps",
        "google_search",
        "mcp_server",
        "retrieval",
        "tool_search",
        "url_context",
    }
)
FUNCTION_KEYS = frozenset({"type", "name", "description", "parameters", "defer_loading", "short_description"})
# A function_result's result, when a list, holds these (FunctionResultSubcontentParam).
RESULT_KEYS: Mapping[str, frozenset[str]] = {**CONTENT_KEYS, "function": FUNCTION_KEYS}
THINKING_SUMMARIES = ("auto", "none")
THINKING_LEVELS = ("minimal", "low", "medium", "high", "xhigh")
# (key, lowest, highest) of the sampling numbers the service range-checks.
SAMPLING_RANGES: tuple[tuple[str, float, float], ...] = (("temperature", 0.0, 2.0), ("top_p", 0.0, 1.0))


@dataclass(frozen=True)
class InteractionRequest:
    """An accepted request; `steps` is the input as steps (a string or contents is one user_input step)."""

    model: str
    steps: tuple[Step, ...]
    system: str
    stream: bool
    max_output_tokens: int | None
    show_summary: bool
    store: bool
    previous_interaction_id: str | None
    functions: tuple[Mapping[str, object], ...]
    """The function tools declared, as sent."""


def parse_request(body: Mapping[str, object]) -> InteractionRequest:
    for name in body:
        if name not in REQUEST_FIELDS:
            raise unknown_field(name)
    for name in AGENT_FIELDS:
        if name in body:
            raise InvalidRequest(f"Invalid value at '{name}': this endpoint serves models, not agents; send `model`.")
    model = _string(body, "model")
    if not model:
        raise field_required("model")
    if _boolean(body, "background", default=False):
        raise InvalidRequest("Invalid value at 'background': background interactions are not supported; send false.")
    store = _boolean(body, "store", default=True)
    previous = _previous_interaction(body, store=store)
    stream = _boolean(body, "stream", default=False)
    steps = _input(body.get("input"))
    _check_images(steps)
    system = _string(body, "system_instruction") or ""
    max_output_tokens, show_summary = _generation_config(body.get("generation_config"))
    functions = _function_tools(body.get("tools"))
    return InteractionRequest(model, steps, system, stream, max_output_tokens, show_summary, store, previous, functions)


def text_of(content: object, separator: str = "\n", *, images: bool = True) -> str:
    """What the model reads of a content list: its text contents, one per line, and with `images` each
    image read by the legend line before it (vision.seen_text; the image was checked when it was sent);
    other media read as nothing. Without images, exactly its texts joined by `separator`."""
    if not isinstance(content, list):
        return ""
    kinds = ("text", "image") if images else ("text",)
    parts: list[str | ImagePart] = [
        ImagePart.from_base64(str(part["data"])) if part.get("type") == "image" else str(part.get("text", ""))
        for part in content
        if part.get("type") in kinds
    ]
    return seen_text(parts, separator)


# --- the fields ------------------------------------------------------------------------------------


def _string(body: Mapping[str, object], name: str) -> str | None:
    value = body.get(name)
    if value is not None and not isinstance(value, str):
        raise invalid_value(name, "TYPE_STRING", value)
    return value


def _boolean(body: Mapping[str, object], name: str, *, default: bool) -> bool:
    value = body.get(name, default)
    if not isinstance(value, bool):
        raise invalid_value(name, "TYPE_BOOL", value)
    return value


def _previous_interaction(body: Mapping[str, object], *, store: bool) -> str | None:
    previous = _string(body, "previous_interaction_id")
    if previous is not None and not store:
        raise InvalidRequest(
            "Invalid value at 'previous_interaction_id': with store=false no interaction is kept to continue from; "
            "send the whole conversation as `input` instead."
        )
    if body.get("continuation_token") is not None:
        raise InvalidRequest("Invalid value at 'continuation_token': not a token this service issued.")
    return previous


def _input(value: object) -> tuple[Step, ...]:
    if value is None:
        raise field_required("input")
    if isinstance(value, str) and value:
        return (_user_turn([{"type": "text", "text": value}]),)
    if isinstance(value, dict):
        _check_content("input", value, CONTENT_KEYS)
        return (_user_turn([value]),)
    if not isinstance(value, list) or not value:
        raise invalid_value("input", "a non-empty string, content, or list of steps or contents", value)
    if all(isinstance(item, dict) and item.get("type") in CONTENT_KEYS for item in value):
        _check_contents("input", value, CONTENT_KEYS)
        return (_user_turn(value),)
    return tuple(_step(f"input[{index}]", item) for index, item in enumerate(value))


def _user_turn(content: list[object]) -> Step:
    return {"type": "user_input", "content": content}


def _step(path: str, step: object) -> Step:
    step = _typed(path, step, STEP_KEYS, f"one of {', '.join(STEP_KEYS)}")
    kind = step["type"]
    if kind == "thought":
        signature = step.get("signature")
        if signature is not None and not isinstance(signature, str):
            raise invalid_value(f"{path}.signature", "TYPE_BYTES", signature)
        _check_contents(f"{path}.summary", step.get("summary", []), SUMMARY_KEYS)
    elif kind == "function_call":
        _required_string(step, path, "id")
        _required_string(step, path, "name")
        _required(step, path, "arguments", dict, "TYPE_MESSAGE")
    elif kind == "function_result":
        _required_string(step, path, "call_id")
        _required(step, path, "result", (str, dict, list), "a string, an object or a list of contents")
        if isinstance(step["result"], list):
            _check_contents(f"{path}.result", step["result"], RESULT_KEYS)
        _optional(step, path, "name", str, "TYPE_STRING")
        _optional(step, path, "is_error", bool, "TYPE_BOOL")
    else:
        _check_contents(f"{path}.content", step.get("content", []), CONTENT_KEYS)
    if "error" in step and not isinstance(step["error"], dict):
        raise invalid_value(f"{path}.error", "TYPE_MESSAGE", step["error"])
    return step


def _required(step: Step, path: str, key: str, kinds: type | tuple[type, ...], expected: str) -> None:
    if step.get(key) is None:
        raise field_required(f"{path}.{key}")
    if not isinstance(step[key], kinds):
        raise invalid_value(f"{path}.{key}", expected, step[key])


def _required_string(step: Step, path: str, key: str) -> None:
    """A required string field: an empty one is as unset as a missing one."""
    if step.get(key) == "":
        raise field_required(f"{path}.{key}")
    _required(step, path, key, str, "TYPE_STRING")


def _optional(step: Mapping[str, object], path: str, key: str, kind: type, expected: str) -> None:
    """An optional field: absent or null (unset, as JSON null reads in a proto), else of `kind`."""
    if step.get(key) is not None and not isinstance(step[key], kind):
        raise invalid_value(f"{path}.{key}", expected, step[key])


def _function_tools(value: object) -> tuple[Mapping[str, object], ...]:
    """The function tools among `tools`, once every tool is one of the SDK's types."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise invalid_value("tools", "a list of tools", value)
    functions = []
    for index, tool in enumerate(value):
        path = f"tools[{index}]"
        if not isinstance(tool, dict):
            raise invalid_value(path, "TYPE_MESSAGE", tool)
        if tool.get("type") is None:
            raise field_required(f"{path}.type")
        if tool["type"] not in TOOL_TYPES:
            raise invalid_value(f"{path}.type", f"one of {', '.join(sorted(TOOL_TYPES))}", tool["type"])
        if tool["type"] == "function":
            _check_function(path, tool)
            functions.append(tool)
    return tuple(functions)


def _check_function(path: str, tool: Mapping[str, object]) -> None:
    for key in tool:
        if key not in FUNCTION_KEYS:
            raise unknown_field(key, path)
    for key in ("name", "description", "short_description"):
        _optional(tool, path, key, str, "TYPE_STRING")
    _optional(tool, path, "defer_loading", bool, "TYPE_BOOL")


def _check_contents(path: str, value: object, types: Mapping[str, frozenset[str]]) -> None:
    if not isinstance(value, list):
        raise invalid_value(path, "a list of contents", value)
    for index, content in enumerate(value):
        _check_content(f"{path}[{index}]", content, types)


def _check_content(path: str, content: object, types: Mapping[str, frozenset[str]]) -> None:
    content = _typed(path, content, types, f"one of {', '.join(types)}")
    if content["type"] == "text" and not isinstance(content.get("text"), str):
        raise field_required(f"{path}.text")
    if content["type"] == "image":
        _check_image_fields(path, content)


def _check_image_fields(path: str, content: Mapping[str, object]) -> None:
    """An image content's fields (the module's rules), before its data is decoded."""
    if content.get("uri") is not None:
        raise InvalidRequest(
            f"Invalid value at '{path}.uri': {refuse('the local provider fetches no image URI', INLINE_FIX)}"
        )
    for key in ("data", "mime_type"):
        if content.get(key) is None:
            raise field_required(f"{path}.{key}")
        _optional(content, path, key, str, "TYPE_STRING" if key == "mime_type" else "TYPE_BYTES")
    resolution = content.get("resolution")
    if resolution is not None and resolution not in GEMINI_RESOLUTION_TOKENS:
        raise invalid_value(
            f"{path}.resolution", f"TYPE_ENUM: one of {', '.join(GEMINI_RESOLUTION_TOKENS)}", resolution
        )


def image_contents(steps: Sequence[Step]) -> list[tuple[str, Mapping[str, object]]]:
    """Every image content of the input's steps, with its path (`input[i]...`)."""
    places: list[tuple[str, Mapping[str, object]]] = []
    for index, step in enumerate(steps):
        for key in ("content", "summary", "result"):
            held = step.get(key)
            for at, content in enumerate(held if isinstance(held, list) else []):
                if isinstance(content, dict) and content.get("type") == "image":
                    places.append((f"input[{index}].{key}[{at}]", content))
    return places


def _check_images(steps: Sequence[Step]) -> None:
    """Each image's data taken as Gemini takes inline data; the count is the whole input's."""
    found = image_contents(steps)
    for path, content in found:
        try:
            inline_image(str(content["data"]), str(content["mime_type"]), GEMINI_IMAGE_LIMITS, len(found))
        except ImageError as error:
            raise InvalidRequest(f"Invalid value at '{path}.data': {error}") from None


def _typed(path: str, value: object, shapes: Mapping[str, frozenset[str]], expected: str) -> Mapping[str, object]:
    """The step or content at `path`, once it is an object of one of `shapes`' types holding only
    that type's keys."""
    if not isinstance(value, dict):
        raise invalid_value(path, "TYPE_MESSAGE", value)
    kind = value.get("type")
    if kind is None:
        raise field_required(f"{path}.type")
    if kind not in shapes:
        raise invalid_value(f"{path}.type", expected, kind)
    for key in value:
        if key not in shapes[kind]:
            raise unknown_field(key, path)
    return value


def _generation_config(value: object) -> tuple[int | None, bool]:
    """(max_output_tokens, whether the thought's summary is shown)."""
    if value is None:
        return None, False
    if not isinstance(value, dict):
        raise invalid_value("generation_config", "TYPE_MESSAGE", value)
    for key in value:
        if key not in GENERATION_FIELDS:
            raise unknown_field(key, "generation_config")
    max_output_tokens = _integer(value, "max_output_tokens", minimum=1)
    _integer(value, "seed")
    for key, lowest, highest in SAMPLING_RANGES:
        number = value.get(key)
        if number is not None and (isinstance(number, bool) or not isinstance(number, (int, float))):
            raise invalid_value(f"generation_config.{key}", "TYPE_FLOAT", number)
        if number is not None and not lowest <= number <= highest:
            raise invalid_value(f"generation_config.{key}", f"must be between {lowest} and {highest}", number)
    stops = value.get("stop_sequences")
    if stops is not None and not (isinstance(stops, list) and all(isinstance(stop, str) for stop in stops)):
        raise invalid_value("generation_config.stop_sequences", "a list of strings", stops)
    summaries = _enum(value, "thinking_summaries", THINKING_SUMMARIES)
    _enum(value, "thinking_level", THINKING_LEVELS)
    return max_output_tokens, summaries == "auto"


def _integer(config: Mapping[str, object], key: str, *, minimum: int | None = None) -> int | None:
    value = config.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid_value(f"generation_config.{key}", "TYPE_INT32", value)
    if minimum is not None and value < minimum:
        raise invalid_value(f"generation_config.{key}", f"must be at least {minimum}", value)
    return value


def _enum(config: Mapping[str, object], key: str, allowed: Sequence[str]) -> object:
    value = config.get(key)
    if value is not None and value not in allowed:
        raise invalid_value(f"generation_config.{key}", f"TYPE_ENUM: one of {', '.join(allowed)}", value)
    return value
