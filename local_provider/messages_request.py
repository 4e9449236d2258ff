"""Anthropic Messages request validation: the first offending field wins, named by its dotted path.

`parse_request` accepts a `POST /v1/messages` body (and the `anthropic-beta` header's list) or raises
InvalidRequest with the message api.anthropic.com gives, e.g. `max_tokens: Field required`,
`temperature: Extra inputs are not permitted`. The checks run in this order: unknown top-level
fields, model, max_tokens, messages (message by message, block by block), system, thinking, the
beta-only fields, the rest. Rules:

- `model` (a non-empty string) and `max_tokens` (an integer >= 1) are required.
- `messages` is a non-empty list of {role, content}; role is user or assistant; content is a
  non-empty string or a non-empty list of blocks, each with only its type's keys. Thinking,
  redacted_thinking, compaction and tool_use blocks are assistant-only, tool_result and image
  user-only (an image in an assistant turn, or in `system`, which holds text blocks only, is refused
  saying where images go: a user turn or a tool result's content). A tool_use needs a string `id`
  and `name` and an object `input`, a tool_result a string `tool_use_id`, a boolean `is_error` if
  any, and a `content` that is a string or a list of TOOL_RESULT_BLOCKS, the text, image and
  document ones checked as a user turn's (the SDK's ToolUseBlockParam, ToolResultBlockParam); how
  calls and results pair is messages_conversation.py's rule 5.
- An `image` block's source is one of the SDK's three (ImageBlockParam.Source), each with only its
  own keys. Only `base64` {media_type, data} is taken (local_provider/vision.py, rule 1): `url` is
  refused, as this provider fetches nothing, and `file`, as it keeps no files. The media type is one
  Anthropic accepts (ANTHROPIC_IMAGE_LIMITS), else the validator's `Input should be ...`. Then every
  image of the request (in a message, a tool result's content or a document's content source) is
  taken as Anthropic takes it: canonical base64 of a whole PNG (the only format this model reads: a
  JPEG, GIF or WebP is refused by name), within the published limits (5 MB of base64 an image, 8000
  px a side, 2000 px above 20 images, 100 images), the count being the whole request's; a refusal
  names the image's `...image.source.base64.data` and the fix. The service's own words for two, as
  its 400s are quoted in public issue threads: `messages.0.content.1.image.source.base64: image
  exceeds 5 MB maximum: N bytes > 5242880 bytes` and `messages.N.content.M.image.source.base64.data:
  At least one of the image dimensions exceed max allowed size: 8000 pixels`. The request keeps
  each image it took, decoded, by its base64 data, for the model to read (`text_of`).
- A compaction block is known only with the compact-2026-09-04 beta: every request that replays one
  sends the beta, as the request that asked for it did.
- The conversation starts with user. One exception: it may start with an assistant message whose
  first block is a compaction block (a compaction replayed "first in `messages`, in place of the
  messages it summarizes").
- Roles need not alternate: consecutive user (or assistant) messages are accepted and read as one
  turn (messages_conversation.py). Evidence: the SDK's `messages` docstring, "Consecutive `user` or
  `assistant` turns in your request will be combined into a single turn."
- A `document` block's source is one of the SDK's five (DocumentBlockParam.Source), each with only
  its own keys: `text` (media_type "text/plain", data) and `content` (a string, or text and image
  blocks) are read as text (its images as a message's are); `base64` (media_type "application/pdf")
  and `url` are accepted and not read (this model reads no PDF and fetches nothing); `file` is
  refused, because this provider keeps no files for a `file_id` to name. `citations` is
  {enabled?: bool}; `title` and `context` are strings.
- `metadata` is {user_id?: string or null}; `tools` is a list of tools: a custom tool (`type`
  absent, null or "custom") needs `name` (a string) and `input_schema` (an object) and has only
  BetaToolParam's keys; a server tool is known by its `type` (the SDK's BetaToolUnionParam) and is
  accepted unchecked, never run (this model calls only custom tools, which the request keeps). `tool_choice` is {type: auto | any |
  tool | none} with its type's keys (`tool` needs `name`). Each as the SDK's types have it.
- `system` is a string or a list of text blocks.
- `thinking` is {type: enabled, budget_tokens >= 1024 and < max_tokens, display?}, {type: adaptive,
  display?} or {type: disabled}; display is summarized (the default) or omitted.
- `compaction: {type: "summarize", instructions?}` needs the compact-2026-09-04 beta, and cannot be
  combined with `context_management`, which this model does not offer at all.
- a top-level `cache_control` is {type: "ephemeral", ttl?: "5m" | "1h"}: automatic caching.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from email.message import Message

from turnstate.adapters.anthropic_models import ENABLED_THINKING_REFUSED, takes_enabled_thinking
from turnstate.adapters.image_costs import ANTHROPIC_IMAGE_LIMITS, ImageLimits
from turnstate.adapters.images import ImageError, ImagePart, refuse
from turnstate.local_provider.anthropic_words import InvalidRequest, extra_input, field_required, wrong_type
from turnstate.local_provider.vision import INLINE_FIX, inline_image, seen_text

Block = Mapping[str, object]

# Every top-level field of the create request (anthropic SDK 2.14: beta MessageCreateParamsBase minus
# `betas`, which travels as a header, plus `stream`); any other is "Extra inputs are not permitted".
REQUEST_FIELDS: frozenset[str] = frozenset(
    {
        "billing_policy",
        "cache_control",
        "compaction",
        "container",
        "context_management",
        "diagnostics",
        "fallback_credit_token",
        "fallbacks",
        "inference_geo",
        "max_tokens",
        "mcp_servers",
        "messages",
        "metadata",
        "model",
        "output_config",
        "service_tier",
        "speed",
        "stop_sequences",
        "stream",
        "system",
        "thinking",
        "thread",
        "tool_choice",
        "tools",
        "user_profile_id",
        "workspace_id",
    }
)
BETA_HEADER = "anthropic-beta"
VERSION_HEADER = "anthropic-version"
COMPACTION_BETA = "compact-2026-09-04"
THINKING_TOKENS_BETA = "thinking-token-count-2026-05-13"
MIN_THINKING_BUDGET = 1024
ROLES = ("user", "assistant")
BLOCK_KEYS: Mapping[str, frozenset[str]] = {
    "text": frozenset({"type", "text", "cache_control", "citations"}),
    "image": frozenset({"type", "source", "cache_control"}),
    "document": frozenset({"type", "source", "cache_control", "citations", "context", "title"}),
    "thinking": frozenset({"type", "thinking", "signature"}),
    "redacted_thinking": frozenset({"type", "data"}),
    "compaction": frozenset({"type", "content", "encrypted_content", "signature", "cache_control", "tool_changes"}),
    "tool_use": frozenset({"type", "id", "name", "input", "cache_control"}),
    "tool_result": frozenset({"type", "tool_use_id", "content", "is_error", "cache_control"}),
}
# The string fields each kind of block requires (the SDK's *BlockParam types).
REQUIRED_STRINGS: Mapping[str, tuple[str, ...]] = {
    "text": ("text",),
    "thinking": ("thinking", "signature"),
    "redacted_thinking": ("data",),
    "tool_use": ("id", "name"),
    "tool_result": ("tool_use_id",),
}
BETA_BLOCKS: Mapping[str, str] = {"compaction": COMPACTION_BETA}  # block types only their beta knows
ASSISTANT_ONLY = frozenset({"thinking", "redacted_thinking", "compaction", "tool_use"})
USER_ONLY = frozenset({"tool_result", "image"})
IMAGE_PLACES = "send images in `user` messages or in a `tool_result`'s content"
THINKING_TYPES = ("adaptive", "disabled", "enabled")
DISPLAYS = ("summarized", "omitted")
CACHE_TTLS = ("5m", "1h")
DEFAULT_TTL = "5m"
# A document's sources (anthropic SDK 2.15: DocumentBlockParam.Source), each with its keys.
DOCUMENT_SOURCES: Mapping[str, frozenset[str]] = {
    "base64": frozenset({"type", "media_type", "data"}),
    "text": frozenset({"type", "media_type", "data"}),
    "content": frozenset({"type", "content"}),
    "url": frozenset({"type", "url"}),
    "file": frozenset({"type", "file_id"}),
}
SOURCE_MEDIA_TYPES: Mapping[str, str] = {"base64": "application/pdf", "text": "text/plain"}
SOURCE_CONTENT_BLOCKS = ("text", "image")  # what a `content` source may hold
# What a tool result's content list may hold (anthropic SDK 2.15: ToolResultBlockParam.Content); the
# kinds BLOCK_KEYS knows are checked as a user turn's blocks, the others are accepted unchecked.
TOOL_RESULT_BLOCKS = ("text", "image", "search_result", "document", "tool_reference", "browser_state")
# An image's sources (anthropic SDK 2.15: ImageBlockParam.Source), each with its keys.
IMAGE_SOURCES: Mapping[str, frozenset[str]] = {
    "base64": frozenset({"type", "media_type", "data"}),
    "url": frozenset({"type", "url"}),
    "file": frozenset({"type", "file_id"}),
}
# A custom tool's keys (BetaToolParam), and the server tools known by their `type` (BetaToolUnionParam).
CUSTOM_TOOL_KEYS = frozenset(
    {
        "type",
        "name",
        "input_schema",
        "description",
        "cache_control",
        "strict",
        "allowed_callers",
        "defer_loading",
        "eager_input_streaming",
        "input_examples",
    }
)
SERVER_TOOL_TYPES: frozenset[str] = frozenset(
    {
        "advisor_20260301",
        "bash_20241022",
        "bash_20250124",
        "browser_toolset_20260801",
        "code_execution_20250522",
        "code_execution_20250825",
        "code_execution_20260120",
        "code_execution_20260521",
        "computer_20241022",
        "computer_20250124",
        "computer_20251124",
        "computer_toolset_20260801",
        "mcp_toolset",
        "memory_20250818",
        "text_editor_20241022",
        "text_editor_20250124",
        "text_editor_20250429",
        "text_editor_20250728",
        "tool_search_tool_bm25",
        "tool_search_tool_bm25_20251119",
        "tool_search_tool_regex",
        "tool_search_tool_regex_20251119",
        "web_fetch_20250910",
        "web_fetch_20260209",
        "web_fetch_20260309",
        "web_fetch_20260318",
        "web_search_20250305",
        "web_search_20260209",
        "web_search_20260318",
    }
)
TOOL_CHOICE_KEYS: Mapping[str, frozenset[str]] = {
    "auto": frozenset({"type", "disable_parallel_tool_use"}),
    "any": frozenset({"type", "disable_parallel_tool_use"}),
    "tool": frozenset({"type", "name", "disable_parallel_tool_use"}),
    "none": frozenset({"type"}),
}


@dataclass(frozen=True)
class MessagesRequest:
    """An accepted request; `messages` have list content (a string content is one text block);
    `automatic_cache` is the ttl of automatic caching, None when it is off; `images` are the request's
    images as taken, decoded, by their base64 data."""

    model: str
    max_tokens: int
    messages: tuple[Mapping[str, object], ...]
    system: tuple[Block, ...]
    thinking: bool
    show_thinking: bool
    stream: bool
    compaction: bool
    automatic_cache: str | None
    betas: frozenset[str]
    tools: tuple[Mapping[str, object], ...] = ()  # the custom tools offered, as sent
    images: Mapping[str, ImagePart] = field(default_factory=dict)


def betas_of(headers: Message) -> frozenset[str]:
    """The betas the `anthropic-beta` header lists (comma-joined, possibly in several headers)."""
    names = ",".join(headers.get_all(BETA_HEADER) or []).split(",")
    return frozenset(name.strip() for name in names if name.strip())


def parse_request(body: Mapping[str, object], headers: Message) -> MessagesRequest:
    if not headers.get(VERSION_HEADER):
        raise InvalidRequest(f"{VERSION_HEADER}: header is required")
    betas = betas_of(headers)
    for name in body:
        if name not in REQUEST_FIELDS:
            raise extra_input(name)
    model = body.get("model")
    if model is None:
        raise field_required("model")
    if not isinstance(model, str) or not model:
        raise wrong_type("model", "a valid string")
    max_tokens = _max_tokens(body.get("max_tokens"))
    messages = _messages(body.get("messages"), betas)
    images = _images(messages, ANTHROPIC_IMAGE_LIMITS)
    system = _system(body.get("system"))
    thinking, show = _thinking(body.get("thinking"), max_tokens, model)
    compaction = _compaction(body, betas)
    automatic = _cache_control("cache_control", body.get("cache_control"))
    _metadata(body.get("metadata"))
    tools = _tools(body.get("tools"))
    _tool_choice(body.get("tool_choice"))
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise wrong_type("stream", "a valid boolean")
    stops = body.get("stop_sequences")
    if stops is not None and not (isinstance(stops, list) and all(isinstance(stop, str) for stop in stops)):
        raise wrong_type("stop_sequences", "a valid list of strings")
    return MessagesRequest(
        model, max_tokens, messages, system, thinking, show, stream, compaction, automatic, betas, tools, images
    )


def _max_tokens(value: object) -> int:
    if value is None:
        raise field_required("max_tokens")
    if isinstance(value, bool) or not isinstance(value, int):
        raise wrong_type("max_tokens", "a valid integer")
    if value < 1:
        raise wrong_type("max_tokens", "greater than or equal to 1")
    return value


def _messages(value: object, betas: frozenset[str]) -> tuple[Mapping[str, object], ...]:
    if value is None:
        raise field_required("messages")
    if not isinstance(value, list):
        raise wrong_type("messages", "a valid list")
    if not value:
        raise InvalidRequest("messages: at least one message is required")
    messages = tuple(_message(f"messages.{index}", message, betas) for index, message in enumerate(value))
    first = messages[0]
    opens_with_compaction = first["role"] == "assistant" and _first_type(first) == "compaction"
    if first["role"] != "user" and not opens_with_compaction:
        raise InvalidRequest('messages: first message must use the "user" role')
    return messages


def _message(path: str, message: object, betas: frozenset[str]) -> Mapping[str, object]:
    if not isinstance(message, dict):
        raise wrong_type(path, "a valid dictionary")
    for key in message:
        if key not in ("role", "content"):
            raise extra_input(f"{path}.{key}")
    role = message.get("role")
    if role is None:
        raise field_required(f"{path}.role")
    if role not in ROLES:
        raise wrong_type(f"{path}.role", "'user' or 'assistant'")
    content = message.get("content")
    if content is None:
        raise field_required(f"{path}.content")
    if isinstance(content, str):
        if not content:
            raise InvalidRequest(f"{path}: all messages must have non-empty content")
        return {"role": role, "content": [{"type": "text", "text": content}]}
    if not isinstance(content, list):
        raise wrong_type(f"{path}.content", "a valid string or a valid list")
    if not content:
        raise InvalidRequest(f"{path}: all messages must have non-empty content")
    for index, block in enumerate(content):
        _check_block(f"{path}.content.{index}", block, str(role), betas)
    return {"role": role, "content": content}


def _check_block(path: str, block: object, role: str, betas: frozenset[str] = frozenset()) -> None:
    known = [name for name in BLOCK_KEYS if name not in BETA_BLOCKS or BETA_BLOCKS[name] in betas]
    kind = _tag_of(path, block, known)
    assert isinstance(block, dict)
    _only_keys(f"{path}.{kind}", block, BLOCK_KEYS[kind])
    if (kind in ASSISTANT_ONLY and role != "assistant") or (kind in USER_ONLY and role != "user"):
        raise InvalidRequest(f"{path}.type: `{kind}` blocks are not allowed in `{role}` messages{_placement(kind)}")
    for key in REQUIRED_STRINGS.get(kind, ()):
        _required_string(f"{path}.{kind}", block, key)
    if kind == "tool_use" and "input" not in block:
        raise field_required(f"{path}.tool_use.input")
    if kind == "tool_use" and not isinstance(block["input"], dict):
        raise wrong_type(f"{path}.tool_use.input", "a valid dictionary")
    if kind == "tool_result" and not isinstance(block.get("is_error", False), bool):
        raise wrong_type(f"{path}.tool_result.is_error", "a valid boolean")
    if kind == "tool_result" and block.get("content") is not None:
        _check_held(f"{path}.tool_result.content", block["content"], TOOL_RESULT_BLOCKS)
    if kind == "compaction" and "content" in block and block["content"] is not None:
        if not isinstance(block["content"], str) or not block["content"]:
            raise InvalidRequest(f"{path}.compaction.content: must be a non-empty string or null")
    if kind == "document":
        _check_document(f"{path}.document", block)
    if kind == "image":
        _check_image(f"{path}.image", block)
    if "cache_control" in block:
        _cache_control(f"{path}.{kind}.cache_control", block["cache_control"])


def _source(path: str, block: Block, sources: Mapping[str, frozenset[str]]) -> tuple[str, Block]:
    """A block's (source type, source): one of `sources`, with only its keys, each a string but `type`
    and a `content` source's content."""
    if "source" not in block:
        raise field_required(f"{path}.source")
    source = block["source"]
    kind = _tag_of(f"{path}.source", source, list(sources))
    assert isinstance(source, dict)
    where = f"{path}.source.{kind}"
    _only_keys(where, source, sources[kind])
    for key in sorted(sources[kind] - {"type", "content"}):
        _required_string(where, source, key)
    return kind, source


def _check_document(path: str, block: Block) -> None:
    """A document's source (one of DOCUMENT_SOURCES, with only its keys), citations, title, context."""
    kind, source = _source(path, block, DOCUMENT_SOURCES)
    where = f"{path}.source.{kind}"
    if kind == "content":
        _check_held(f"{where}.content", source.get("content"), SOURCE_CONTENT_BLOCKS)
    media_type = SOURCE_MEDIA_TYPES.get(kind)
    if media_type is not None and source["media_type"] != media_type:
        raise wrong_type(f"{where}.media_type", f"'{media_type}'")
    if kind == "file":
        raise InvalidRequest(f"{where}.file_id: no file `{source['file_id']}`: this provider keeps no files")
    citations = block.get("citations")
    if citations is not None:
        if not isinstance(citations, dict):
            raise wrong_type(f"{path}.citations", "a valid dictionary")
        _only_keys(f"{path}.citations", citations, frozenset({"enabled"}))
        if "enabled" in citations and not isinstance(citations["enabled"], bool):
            raise wrong_type(f"{path}.citations.enabled", "a valid boolean")
    for key in ("title", "context"):
        if block.get(key) is not None and not isinstance(block[key], str):
            raise wrong_type(f"{path}.{key}", "a valid string")


def _check_held(path: str, content: object, kinds: Sequence[str]) -> None:
    """The content a block holds (a `content` source's, a tool result's): a string, or a list of blocks
    of `kinds`, those BLOCK_KEYS knows checked as a user turn's."""
    if content is None:
        raise field_required(path)
    if isinstance(content, str):
        return
    if not isinstance(content, list):
        raise wrong_type(path, "a valid string or a valid list")
    for index, block in enumerate(content):
        if _tag_of(f"{path}.{index}", block, kinds) in BLOCK_KEYS:
            _check_block(f"{path}.{index}", block, "user")


def _check_image(path: str, block: Block) -> None:
    """An image's source (one of IMAGE_SOURCES, with only its keys): base64 of a media type Anthropic
    accepts; a URL or a file is refused, as this provider fetches nothing and keeps no file."""
    kind, source = _source(path, block, IMAGE_SOURCES)
    where = f"{path}.source.{kind}"
    if kind == "url":
        raise InvalidRequest(f"{where}.url: {refuse('the local provider fetches no image URL', INLINE_FIX)}")
    if kind == "file":
        missing = refuse(f"no file `{source['file_id']}`: this provider keeps no files", INLINE_FIX)
        raise InvalidRequest(f"{where}.file_id: {missing}")
    if source["media_type"] not in ANTHROPIC_IMAGE_LIMITS.media_types:
        raise wrong_type(f"{where}.media_type", _literals(sorted(ANTHROPIC_IMAGE_LIMITS.media_types)))


def _images(messages: Sequence[Mapping[str, object]], limits: ImageLimits) -> dict[str, ImagePart]:
    """Every image of the request taken as `limits`' provider takes it (vision.py rule 1), by its base64
    data (the same data is the same image, taken once); the count a limit reads is the whole request's."""
    found = [
        place
        for index, message in enumerate(messages)
        for position, block in enumerate(_listed(message["content"]))
        for place in image_blocks(f"messages.{index}.content.{position}", block)
    ]
    images: dict[str, ImagePart] = {}
    for path, block in found:
        source = block["source"]
        assert isinstance(source, dict)  # _check_image took it
        data = str(source["data"])
        if data in images:
            continue
        try:
            images[data] = inline_image(data, str(source["media_type"]), limits, len(found))
        except ImageError as error:
            raise InvalidRequest(f"{path}.image.source.base64.data: {error}") from None
    return images


def image_blocks(path: str, block: Block) -> Iterator[tuple[str, Block]]:
    """The image blocks a block is or holds (in its held content, at any depth), each with its path."""
    if block.get("type") == "image":
        yield path, block
    held = _held(block)
    if held is not None:
        where, content = held
        for position, inner in enumerate(_listed(content)):
            yield from image_blocks(f"{path}.{where}.{position}", inner)


def _held(block: Block) -> tuple[str, object] | None:
    """The content a tool result or a `content`-source document holds (a string or blocks), and the
    path of its blocks under the block's own; None for a block that holds none."""
    source = block.get("source")
    if block.get("type") == "tool_result":
        return "tool_result.content", block.get("content")
    if block.get("type") == "document" and isinstance(source, dict) and source.get("type") == "content":
        return "document.source.content.content", source.get("content")
    return None


def _listed(content: object) -> list[Block]:
    """The blocks of a content list (a string or absent content has none)."""
    return [block for block in content if isinstance(block, dict)] if isinstance(content, list) else []


def _placement(kind: object) -> str:
    """The fix a block in the wrong place is refused with: where images go; nothing for other blocks."""
    return f"; fix: {IMAGE_PLACES}" if kind == "image" else ""


def _literals(names: Sequence[str]) -> str:
    """The validator's list of the values a field may take: 'a', 'b' or 'c'."""
    quoted = [f"'{name}'" for name in names]
    return " or ".join([", ".join(quoted[:-1]), quoted[-1]]) if len(quoted) > 1 else quoted[0]


def _tag_of(path: str, value: object, tags: Sequence[str]) -> str:
    """The `type` of a member of a tagged union, or the validator's error naming the expected tags."""
    if not isinstance(value, dict):
        raise wrong_type(path, "a valid dictionary")
    kind = value.get("type")
    if kind is None:
        raise field_required(f"{path}.type")
    if kind not in tags:
        expected = ", ".join(f"'{name}'" for name in tags)
        raise InvalidRequest(
            f"{path}: Input tag '{kind}' found using 'type' does not match any of the expected tags: {expected}"
        )
    return str(kind)


def _only_keys(path: str, value: Mapping[str, object], allowed: frozenset[str]) -> None:
    for key in value:
        if key not in allowed:
            raise extra_input(f"{path}.{key}")


def _required_string(path: str, value: Mapping[str, object], key: str) -> None:
    if key not in value:
        raise field_required(f"{path}.{key}")
    if not isinstance(value[key], str):
        raise wrong_type(f"{path}.{key}", "a valid string")


def _first_type(message: Mapping[str, object]) -> object:
    content = message["content"]
    return content[0].get("type") if isinstance(content, list) and content else None


def _system(value: object) -> tuple[Block, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return ({"type": "text", "text": value},) if value else ()
    if not isinstance(value, list):
        raise wrong_type("system", "a valid string or a valid list")
    for index, block in enumerate(value):
        path = f"system.{index}"
        if not isinstance(block, dict) or block.get("type") != "text":
            kind = block.get("type") if isinstance(block, dict) else None
            raise InvalidRequest(f"{path}.type: Input should be 'text'{_placement(kind)}")
        _check_block(path, block, "system")
    return tuple(value)


def _thinking(value: object, max_tokens: int, model: str) -> tuple[bool, bool]:
    """(thinking on, its text shown). A model that thinks adaptively only refuses a fixed budget, as
    the API does (adapters/anthropic_models.py)."""
    if value is None:
        return False, False
    kind = _tag_of("thinking", value, THINKING_TYPES)
    assert isinstance(value, dict)
    allowed = {"enabled": {"type", "budget_tokens", "display"}, "adaptive": {"type", "display"}}.get(kind, {"type"})
    _only_keys(f"thinking.{kind}", value, frozenset(allowed))
    if kind == "disabled":
        return False, False
    if kind == "enabled":
        if not takes_enabled_thinking(model):
            raise InvalidRequest(f"thinking.type: {ENABLED_THINKING_REFUSED}")
        budget = value.get("budget_tokens")
        if budget is None:
            raise field_required("thinking.enabled.budget_tokens")
        if isinstance(budget, bool) or not isinstance(budget, int):
            raise wrong_type("thinking.enabled.budget_tokens", "a valid integer")
        if budget < MIN_THINKING_BUDGET:
            raise wrong_type("thinking.enabled.budget_tokens", f"greater than or equal to {MIN_THINKING_BUDGET}")
        if budget >= max_tokens:
            raise InvalidRequest("`max_tokens` must be greater than `thinking.budget_tokens`")
    display = value.get("display", "summarized")
    if display is not None and display not in DISPLAYS:
        raise wrong_type(f"thinking.{kind}.display", "'summarized' or 'omitted'")
    return True, display != "omitted"


def _compaction(body: Mapping[str, object], betas: frozenset[str]) -> bool:
    if "context_management" in body:
        raise InvalidRequest("context_management: not supported by this model; send `compaction` instead")
    value = body.get("compaction")
    if value is None:
        return False
    if COMPACTION_BETA not in betas:
        raise extra_input("compaction")
    if not isinstance(value, dict):
        raise wrong_type("compaction", "a valid dictionary")
    for key in value:
        if key not in ("type", "instructions", "cache_control"):
            raise extra_input(f"compaction.{key}")
    if value.get("type") != "summarize":
        raise wrong_type("compaction.type", "'summarize'")
    instructions = value.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise wrong_type("compaction.instructions", "a valid string")
    return True


def _cache_control(path: str, value: object) -> str | None:
    """The ttl of the breakpoint a cache_control value asks for (None asks for none); raises if it is
    malformed."""
    if value is None:
        return None
    if not isinstance(value, dict) or value.get("type") != "ephemeral":
        raise wrong_type(f"{path}.type", "'ephemeral'")
    _only_keys(path, value, frozenset({"type", "ttl"}))
    ttl = value.get("ttl", DEFAULT_TTL)
    if ttl not in CACHE_TTLS:
        raise wrong_type(f"{path}.ttl", "'5m' or '1h'")
    return str(ttl)


def cache_ttl(block: Block) -> str | None:
    """The ttl of the breakpoint a validated block asks for, None when it is not one."""
    return _cache_control("cache_control", block.get("cache_control"))


def _metadata(value: object) -> None:
    if value is None:
        return
    if not isinstance(value, dict):
        raise wrong_type("metadata", "a valid dictionary")
    _only_keys("metadata", value, frozenset({"user_id"}))
    if value.get("user_id") is not None and not isinstance(value["user_id"], str):
        raise wrong_type("metadata.user_id", "a valid string")


def _tools(value: object) -> tuple[Mapping[str, object], ...]:
    """Custom tools checked as BetaToolParam; server tools known by their type and accepted unchecked.
    The custom tools, which this model may call."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise wrong_type("tools", "a valid list")
    tags = ["custom", *sorted(SERVER_TOOL_TYPES)]
    custom: list[Mapping[str, object]] = []
    for index, tool in enumerate(value):
        path = f"tools.{index}"
        if not isinstance(tool, dict):
            raise wrong_type(path, "a valid dictionary")
        if tool.get("type") is not None and _tag_of(path, tool, tags) != "custom":
            continue
        where = f"{path}.custom"
        _only_keys(where, tool, CUSTOM_TOOL_KEYS)
        _required_string(where, tool, "name")
        if "input_schema" not in tool:
            raise field_required(f"{where}.input_schema")
        if not isinstance(tool["input_schema"], dict):
            raise wrong_type(f"{where}.input_schema", "a valid dictionary")
        _cache_control(f"{where}.cache_control", tool.get("cache_control"))
        custom.append(tool)
    return tuple(custom)


def _tool_choice(value: object) -> None:
    if value is None:
        return
    kind = _tag_of("tool_choice", value, list(TOOL_CHOICE_KEYS))
    assert isinstance(value, dict)
    where = f"tool_choice.{kind}"
    _only_keys(where, value, TOOL_CHOICE_KEYS[kind])
    if kind == "tool":
        _required_string(where, value, "name")
    if "disable_parallel_tool_use" in value and not isinstance(value["disable_parallel_tool_use"], bool):
        raise wrong_type(f"{where}.disable_parallel_tool_use", "a valid boolean")


def text_of(blocks: Sequence[Block], images: Mapping[str, ImagePart] | None = None) -> str:
    """The readable text of content blocks, joined by newlines: text blocks, tool results' content,
    documents with a `text` or `content` source; and each of `images` (a request's, by base64 data)
    as the model sees it (vision.seen_text: a legend line followed by the rows of the image it reads).
    Without images, the text alone."""
    return seen_text(_read_parts(blocks, images or {}), "\n")


def _read_parts(blocks: Sequence[Block], images: Mapping[str, ImagePart]) -> list[str | ImagePart]:
    parts: list[str | ImagePart] = []
    for block in blocks:
        kind, source, held = block.get("type"), block.get("source"), _held(block)
        data = source.get("data") if isinstance(source, dict) else None
        if kind == "text":
            parts.append(str(block.get("text", "")))
        elif kind == "image" and isinstance(data, str) and data in images:
            parts.append(images[data])
        elif held is not None:
            content = held[1]
            parts += [content] if isinstance(content, str) else _read_parts(_listed(content), images) or [""]
        elif kind == "document" and isinstance(source, dict) and source.get("type") == "text":
            parts.append(str(data or ""))
    return parts
