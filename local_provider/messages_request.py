"""Anthropic Messages request validation: the first offending field wins, named by its dotted path.

`parse_request` accepts a `POST /v1/messages` body (and the `anthropic-beta` header's list) or raises
InvalidRequest with the message api.anthropic.com gives, e.g. `max_tokens: Field required`,
`temperature: Extra inputs are not permitted`. The checks run in this order: unknown top-level
fields, model, max_tokens, messages (message by message, block by block), system, thinking, the
beta-only fields, the rest. Rules:

- `model` (a non-empty string) and `max_tokens` (an integer >= 1) are required.
- `messages` is a non-empty list of {role, content}; role is user or assistant; content is a
  non-empty string or a non-empty list of blocks, each with only its type's keys. Thinking,
  redacted_thinking, compaction and tool_use blocks are assistant-only, tool_result user-only.
- A compaction block is known only with the compact-2026-09-04 beta: every request that replays one
  sends the beta, as the request that asked for it did.
- Roles alternate, starting with user. One exception: a conversation may start with an assistant
  message whose first block is a compaction block (a compaction replayed "first in `messages`, in
  place of the messages it summarizes").
- `system` is a string or a list of text blocks.
- `thinking` is {type: enabled, budget_tokens >= 1024 and < max_tokens, display?}, {type: adaptive,
  display?} or {type: disabled}; display is summarized (the default) or omitted.
- `compaction: {type: "summarize", instructions?}` needs the compact-2026-09-04 beta, and cannot be
  combined with `context_management`, which this model does not offer at all.
- a top-level `cache_control` is {type: "ephemeral", ttl?: "5m" | "1h"}: automatic caching.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from email.message import Message

from turnstate.local_provider.anthropic_words import InvalidRequest, extra_input, field_required, wrong_type

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
    "thinking": frozenset({"type", "thinking", "signature"}),
    "redacted_thinking": frozenset({"type", "data"}),
    "compaction": frozenset({"type", "content", "encrypted_content", "signature", "cache_control", "tool_changes"}),
    "tool_use": frozenset({"type", "id", "name", "input", "cache_control"}),
    "tool_result": frozenset({"type", "tool_use_id", "content", "is_error", "cache_control"}),
}
BETA_BLOCKS: Mapping[str, str] = {"compaction": COMPACTION_BETA}  # block types only their beta knows
ASSISTANT_ONLY = frozenset({"thinking", "redacted_thinking", "compaction", "tool_use"})
USER_ONLY = frozenset({"tool_result"})
THINKING_TYPES = ("adaptive", "disabled", "enabled")
DISPLAYS = ("summarized", "omitted")
CACHE_TTLS = ("5m", "1h")


@dataclass(frozen=True)
class MessagesRequest:
    """An accepted request; `messages` have list content (a string content is one text block)."""

    model: str
    max_tokens: int
    messages: tuple[Mapping[str, object], ...]
    system: tuple[Block, ...]
    thinking: bool
    show_thinking: bool
    stream: bool
    compaction: bool
    automatic_cache: bool
    betas: frozenset[str]


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
    system = _system(body.get("system"))
    thinking, show = _thinking(body.get("thinking"), max_tokens)
    compaction = _compaction(body, betas)
    automatic = _cache_control("cache_control", body.get("cache_control"))
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise wrong_type("stream", "a valid boolean")
    stops = body.get("stop_sequences")
    if stops is not None and not (isinstance(stops, list) and all(isinstance(stop, str) for stop in stops)):
        raise wrong_type("stop_sequences", "a valid list of strings")
    return MessagesRequest(model, max_tokens, messages, system, thinking, show, stream, compaction, automatic, betas)


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
    for before, after in zip(messages, messages[1:], strict=False):
        if before["role"] == after["role"]:
            raise InvalidRequest(
                f'messages: roles must alternate between "user" and "assistant", '
                f'but found multiple "{after["role"]}" roles in a row'
            )
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
    if not isinstance(block, dict):
        raise wrong_type(path, "a valid dictionary")
    kind = block.get("type")
    if kind is None:
        raise field_required(f"{path}.type")
    known = [name for name in BLOCK_KEYS if name not in BETA_BLOCKS or BETA_BLOCKS[name] in betas]
    if kind not in known:
        expected = ", ".join(f"'{name}'" for name in known)
        raise InvalidRequest(
            f"{path}: Input tag '{kind}' found using 'type' does not match any of the expected tags: {expected}"
        )
    for key in block:
        if key not in BLOCK_KEYS[str(kind)]:
            raise extra_input(f"{path}.{kind}.{key}")
    if (kind in ASSISTANT_ONLY and role != "assistant") or (kind in USER_ONLY and role != "user"):
        raise InvalidRequest(f"{path}.type: `{kind}` blocks are not allowed in `{role}` messages")
    for key in {"text": ("text",), "thinking": ("thinking", "signature"), "redacted_thinking": ("data",)}.get(
        str(kind), ()
    ):
        if key not in block:
            raise field_required(f"{path}.{kind}.{key}")
        if not isinstance(block[key], str):
            raise wrong_type(f"{path}.{kind}.{key}", "a valid string")
    if kind == "compaction" and "content" in block and block["content"] is not None:
        if not isinstance(block["content"], str) or not block["content"]:
            raise InvalidRequest(f"{path}.compaction.content: must be a non-empty string or null")
    if "cache_control" in block:
        _cache_control(f"{path}.{kind}.cache_control", block["cache_control"])


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
            raise InvalidRequest(f"{path}.type: Input should be 'text'")
        _check_block(path, block, "system")
    return tuple(value)


def _thinking(value: object, max_tokens: int) -> tuple[bool, bool]:
    """(thinking on, its text shown)."""
    if value is None:
        return False, False
    if not isinstance(value, dict):
        raise wrong_type("thinking", "a valid dictionary")
    kind = value.get("type")
    if kind not in THINKING_TYPES:
        expected = ", ".join(f"'{name}'" for name in THINKING_TYPES)
        raise InvalidRequest(
            f"thinking: Input tag '{kind}' found using 'type' does not match any of the expected tags: {expected}"
        )
    allowed = {"enabled": {"type", "budget_tokens", "display"}, "adaptive": {"type", "display"}}.get(
        str(kind), {"type"}
    )
    for key in value:
        if key not in allowed:
            raise extra_input(f"thinking.{kind}.{key}")
    if kind == "disabled":
        return False, False
    if kind == "enabled":
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


def _cache_control(path: str, value: object) -> bool:
    """Whether a cache_control value asks for a breakpoint (None does not); raises if it is malformed."""
    if value is None:
        return False
    if not isinstance(value, dict) or value.get("type") != "ephemeral":
        raise wrong_type(f"{path}.type", "'ephemeral'")
    for key in value:
        if key not in ("type", "ttl"):
            raise extra_input(f"{path}.{key}")
    if value.get("ttl", "5m") not in CACHE_TTLS:
        raise wrong_type(f"{path}.ttl", "'5m' or '1h'")
    return True


def text_of(blocks: Sequence[Block]) -> str:
    """The readable text of content blocks: text blocks, and tool results' text, joined by newlines."""
    texts = []
    for block in blocks:
        if block.get("type") == "text":
            texts.append(str(block.get("text", "")))
        elif block.get("type") == "tool_result":
            content = block.get("content")
            if isinstance(content, str):
                texts.append(content)
            elif isinstance(content, list):
                texts.append(text_of([part for part in content if isinstance(part, dict)]))
    return "\n".join(texts)
