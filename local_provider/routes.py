"""The local provider's endpoints: which wire module answers each (method, path).

Adding a wire is one module beside chat_completions.py and one row here. OpenAI Responses is two
wires (responses.py, responses_compact.py) that share their replay rules and stored responses;
Anthropic Messages (messages.py) carries its key in `x-api-key` (or a Bearer header); Gemini
Interactions (interactions.py) in `x-goog-api-key`, under both API versions the SDK can be set to.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from email.message import Message

from turnstate.local_provider import chat_completions, interactions, messages, responses, responses_compact
from turnstate.local_provider.exchange import Wire


def bearer_api_key(headers: Message) -> str | None:
    """The key of an `Authorization: Bearer <key>` header, as OpenAI-style wires carry it."""
    scheme, _, key = (headers.get("Authorization") or "").partition(" ")
    if scheme.lower() != "bearer":
        return None
    return key.strip() or None


def anthropic_api_key(headers: Message) -> str | None:
    """The key of an `x-api-key: <key>` header, as Anthropic's Messages wire carries it; else of an
    `Authorization: Bearer <key>` header, which the service also takes and anthropic SDK 2.x sends."""
    return (headers.get("x-api-key") or "").strip() or bearer_api_key(headers)


def google_api_key(headers: Message) -> str | None:
    """The key of an `x-goog-api-key: <key>` header, as the google-genai SDK sends it."""
    return (headers.get("x-goog-api-key") or "").strip() or None


@dataclass(frozen=True)
class Route:
    """An endpoint: the wire module that speaks it, and where its protocol carries the API key."""

    wire: Wire
    api_key: Callable[[Message], str | None]


ROUTES: Mapping[tuple[str, str], Route] = {
    ("POST", "/v1/chat/completions"): Route(chat_completions.OPENAI, bearer_api_key),
    ("POST", "/open-weight/v1/chat/completions"): Route(chat_completions.OPEN_WEIGHT, bearer_api_key),
    ("POST", "/deepseek/v1/chat/completions"): Route(chat_completions.DEEPSEEK, bearer_api_key),
    ("POST", "/v1/responses"): Route(responses, bearer_api_key),
    ("POST", "/v1/responses/compact"): Route(responses_compact, bearer_api_key),
    ("POST", "/v1/messages"): Route(messages, anthropic_api_key),
    ("POST", "/v1beta/interactions"): Route(interactions, google_api_key),
    ("POST", "/v1/interactions"): Route(interactions, google_api_key),
}
