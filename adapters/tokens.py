"""The one token estimate shared by the harness and the embedded local provider.

Real providers count with their own tokenizers; turnstate needs a count that is cheap, deterministic
and identical on both sides of the wire, so that a window trimmed by the harness fits the local
provider's context window exactly. The estimate is one token per four UTF-8 bytes (rounded up), plus
a fixed overhead per chat message for its role and framing, as chat templates add. An image part costs
what its provider publishes for an image of its size (adapters/image_costs.py), whichever side counts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from turnstate.adapters.image_costs import anthropic_image_tokens, gemini_resolution_tokens, openai_image_tokens
from turnstate.adapters.images import data_url_payload, decode_base64, digest, png_size

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
        elif name == "content":
            tokens += content_text_tokens(text) + content_image_tokens(text)
    return tokens


def content_text_tokens(content: object) -> int:
    """The text parts of a Chat Completions content list (`{type: text, text}`), estimated together."""
    if not isinstance(content, list):
        return 0
    return estimate_text_tokens(
        "".join(
            str(part.get("text", "")) for part in content if isinstance(part, Mapping) and part.get("type") == "text"
        )
    )


def image_base64(part: Mapping[str, object]) -> str | None:
    """The base64 of an image part of any wire this harness speaks, or None for a part that is no image:
    Chat Completions `image_url` {url}, Responses `input_image` {image_url}, both data URLs; Anthropic
    `image` {source: {data}}; Gemini Interactions `image` {data}."""
    kind, nested = part.get("type"), part.get("image_url") if part.get("type") == "image_url" else part.get("source")
    if kind == "image_url" and isinstance(nested, Mapping):
        return data_url_payload(str(nested.get("url", "")))
    if kind == "input_image":
        return data_url_payload(str(part.get("image_url", "")))
    if kind == "image":
        return str(nested.get("data", "") if isinstance(nested, Mapping) else part.get("data", ""))
    return None


def image_part_tokens(part: Mapping[str, object]) -> int:
    """The estimate of one image part by its provider's published rule (0 for a part that is no image):
    OpenAI's tiles at the part's `detail`, Anthropic's pixel area, Gemini's fixed budget per resolution."""
    kind, nested = part.get("type"), part.get("image_url")
    if kind in ("image_url", "input_image"):
        detail = nested.get("detail", "auto") if isinstance(nested, Mapping) else part.get("detail", "auto")
        return openai_image_tokens(*png_size(image_base64(part) or ""), detail)  # type: ignore[arg-type]  # checked there
    if kind == "image" and isinstance(part.get("source"), Mapping):
        return anthropic_image_tokens(*png_size(image_base64(part) or ""))
    if kind == "image":
        return gemini_resolution_tokens(part.get("resolution"))  # type: ignore[arg-type]  # checked there
    return 0


def content_image_tokens(content: object) -> int:
    """The image parts of a content list, estimated (a string content holds none)."""
    if not isinstance(content, list):
        return 0
    return sum(image_part_tokens(part) for part in content if isinstance(part, Mapping))


def held_image_tokens(step: Mapping[str, object]) -> int:
    """The estimate of the images a Gemini Interactions step holds: in its content, or in a
    function_result's result list (the harness and the local provider count a step alike)."""
    return content_image_tokens(step.get("content")) + content_image_tokens(step.get("result"))


def image_label(part: Mapping[str, object]) -> str | None:
    """How a readable transcript shows an image part: `[image sha256:<digest>]`, the name of its file in
    a run folder's input_images/ (durable/images.py), never its bytes."""
    encoded = image_base64(part)
    return None if encoded is None else f"[image sha256:{digest(decode_base64(encoded))}]"


TEXT_PART_TYPES = ("text", "input_text", "output_text")


def readable_content(content: object) -> str:
    """A content string, or a content list as a reader sees it: its text parts, each image as its
    `image_label` on a line of its own (adjacent texts joined as `content_text` joins them)."""
    if isinstance(content, str):
        return content
    lines: list[str] = []
    texts: list[str] = []
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, Mapping):
            continue
        label = image_label(part)
        if label is None and part.get("type") in TEXT_PART_TYPES:
            texts.append(str(part.get("text", "")))
        elif label is not None:
            lines.extend(["".join(texts)] if texts else [])
            lines.append(label)
            texts = []
    lines.extend(["".join(texts)] if texts else [])
    return "\n".join(lines)


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
    """A content string, or the text of a content list's text parts joined (images read as nothing:
    `item_tokens` counts them, `image_label` shows them)."""
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
        images = content_image_tokens(item.get("output" if kind == "function_call_output" else "content"))
        return MESSAGE_OVERHEAD_TOKENS + estimate_text_tokens(text) + images
    return MESSAGE_OVERHEAD_TOKENS + estimate_text_tokens(text)
