"""The one token estimate shared by the harness and the embedded local provider.

Real providers count with their own tokenizers; turnstate needs a count that is cheap, deterministic
and identical on both sides of the wire, so that a window trimmed by the harness fits the local
provider's context window exactly. The estimate is one token per four UTF-8 bytes (rounded up), plus
a fixed overhead per chat message for its role and framing, as chat templates add.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

BYTES_PER_TOKEN = 4
MESSAGE_OVERHEAD_TOKENS = 4
MIN_CONTEXT_TOKENS = 256  # the smallest context budget or local window that holds a frame and a reply


def estimate_text_tokens(text: str) -> int:
    """Tokens for a piece of text: ceil(utf-8 bytes / 4)."""
    size = len(text) if text.isascii() else len(text.encode("utf-8"))  # ASCII: one byte a character
    return -(-size // BYTES_PER_TOKEN)


# Where open-weight servers (vLLM, SGLang, DeepSeek) put an assistant message's reasoning string;
# a replayed one is part of the prompt, so it is counted, under every alias it is sent under.
REASONING_FIELDS = ("reasoning_content", "reasoning")


MESSAGE_TEXT_FIELDS = ("content", *REASONING_FIELDS)


def estimate_message_tokens(message: Mapping[str, object]) -> int:
    """Tokens for one chat message {role, content, reasoning?}: its text plus the per-message overhead."""
    tokens = MESSAGE_OVERHEAD_TOKENS
    for name in MESSAGE_TEXT_FIELDS:  # a loop, not a generator: the provider counts every message
        text = message.get(name)
        if isinstance(text, str):
            tokens += estimate_text_tokens(text)
    return tokens


def estimate_messages_tokens(messages: Iterable[Mapping[str, object]]) -> int:
    return sum(estimate_message_tokens(message) for message in messages)


# OpenAI Responses items: each costs the per-message overhead plus its text, where the text of a
# reasoning item is its summary and its sealed content, and of a compaction item its sealed content
# (opaque state is billed by its length, as real providers bill it).


def item_text(item: Mapping[str, object]) -> str:
    """The readable text of an input item: a message's text parts joined, a tool call's name and
    arguments, a tool result's output; reasoning and compaction have none (theirs is sealed)."""
    kind = item.get("type", "message")
    if kind == "message":
        return content_text(item.get("content"))
    if kind == "function_call":
        return f"{item.get('name', '')}({item.get('arguments', '')})"
    if kind == "function_call_output":
        return content_text(item.get("output"))
    return ""


def content_text(content: object) -> str:
    """A content string, or the text of a content list's text parts joined (images read as nothing)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    texts = []
    for part in content:
        if isinstance(part, dict) and part.get("type") in ("input_text", "output_text"):
            texts.append(str(part.get("text", "")))
    return "".join(texts)


def item_tokens(item: Mapping[str, object]) -> int:
    """The estimate of one Responses item; the request's instructions count as one item of their own."""
    kind = item.get("type", "message")
    if kind == "reasoning":
        summary = item.get("summary")
        parts = summary if isinstance(summary, list) else []
        text = "".join(str(part.get("text", "")) for part in parts if isinstance(part, dict))
        text += str(item.get("encrypted_content") or "")
    elif kind == "compaction":
        text = str(item.get("encrypted_content") or "")
    elif kind == "instructions":
        text = str(item.get("text", ""))
    else:
        text = item_text(item)
    return MESSAGE_OVERHEAD_TOKENS + estimate_text_tokens(text)
