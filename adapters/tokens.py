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


def estimate_text_tokens(text: str) -> int:
    """Tokens for a piece of text: ceil(utf-8 bytes / 4)."""
    return -(-len(text.encode("utf-8")) // BYTES_PER_TOKEN)


def estimate_message_tokens(message: Mapping[str, object]) -> int:
    """Tokens for one chat message {role, content}: its text plus the per-message overhead."""
    content = message.get("content")
    text = content if isinstance(content, str) else ""
    return MESSAGE_OVERHEAD_TOKENS + estimate_text_tokens(text)


def estimate_messages_tokens(messages: Iterable[Mapping[str, object]]) -> int:
    return sum(estimate_message_tokens(message) for message in messages)
