"""The local provider's endpoints: which wire module answers each (method, path).

Adding a wire is one module beside chat_completions.py and one row here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from email.message import Message

from turnstate.local_provider import chat_completions
from turnstate.local_provider.exchange import Wire


def bearer_api_key(headers: Message) -> str | None:
    """The key of an `Authorization: Bearer <key>` header, as OpenAI-style wires carry it."""
    scheme, _, key = (headers.get("Authorization") or "").partition(" ")
    if scheme.lower() != "bearer":
        return None
    return key.strip() or None


@dataclass(frozen=True)
class Route:
    """An endpoint: the wire module that speaks it, and where its protocol carries the API key."""

    wire: Wire
    api_key: Callable[[Message], str | None]


ROUTES: Mapping[tuple[str, str], Route] = {
    ("POST", "/v1/chat/completions"): Route(chat_completions, bearer_api_key),
}
