"""What every wire of the local provider shares: one admitted request and the model behind it.

The server admits a request (auth, body, ordinal, fault) and hands the route's wire module an
`Exchange`. The wire validates its own format, asks `complete` for the model's `Completion`, and
answers through the exchange with JSON or a server-sent event stream. This module knows nothing of
HTTP framing or of any one wire, so wires and the server both import it and never each other.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from turnstate.adapters.tokens import BYTES_PER_TOKEN, estimate_text_tokens
from turnstate.local_provider.faults import Fault, FaultKind
from turnstate.local_provider.prefix_cache import PrefixCache

ReplyFn = Callable[[str, Sequence[Mapping[str, object]]], str]
"""(system prompt, non-system messages with text content) -> reply text."""

Ending = Literal["stop", "length", "refusal"]
"""Why a completion ended, before a wire names it (e.g. Chat Completions: stop, length, content_filter)."""

SharedError = Literal[
    "missing_api_key",
    "invalid_api_key",
    "unsupported_content_type",
    "unparseable_body",
    "rate_limit",
    "server_error",
    "overloaded",
]
"""Errors the server answers for every wire; each wire words them as its real service does."""

SseEvent = Mapping[str, str]
"""One server-sent event as its fields, e.g. {"data": "..."} or {"event": "...", "data": "..."}."""

MALFORMED_REPLY = "I am not sure what to do."
"""The reply a `malformed` fault puts in place of the model's: text that holds no valid action."""


@dataclass(frozen=True)
class Completion:
    """What the model produced for one request, before a wire words it."""

    text: str
    ending: Ending

    @property
    def tokens(self) -> int:
        return estimate_text_tokens(self.text)


class Responder(Protocol):
    """The HTTP side of one request, as the server implements it."""

    def write_json(self, status: int, body: Mapping[str, object], headers: Mapping[str, str]) -> None: ...

    def write_raw(self, status: int, content_type: str, data: bytes, headers: Mapping[str, str]) -> None: ...

    def write_sse(self, events: Iterable[SseEvent], cut_after: int | None) -> None: ...

    def drop_connection(self) -> None: ...


class Wire(Protocol):
    """What a wire module provides; the server does everything else."""

    def error_reply(self, kind: SharedError, detail: str = "") -> tuple[int, dict[str, object]]:
        """HTTP status and JSON body of a shared error, as this wire's real service words it.

        `detail` is the value the real message quotes, if any: the rejected API key or Content-Type.
        """
        ...

    def handle(self, exchange: Exchange) -> None:
        """Answer one admitted request through `exchange`."""
        ...


class Exchange:
    """One admitted model request: its body and fault, the model behind it, and the ways to answer.

    `body` is also the provider's request_log entry, so a wire must not mutate it. `api_key` is the key
    the request carried; only a `leak_key` fault ever puts it in a reply.
    """

    def __init__(
        self,
        responder: Responder,
        body: dict[str, object],
        ordinal: int,
        fault: Fault | None,
        *,
        context_window: int,
        prefix_cache: PrefixCache,
        reply: ReplyFn,
        api_key: str,
    ) -> None:
        self.body = body
        self.ordinal = ordinal
        self.fault = fault
        self.context_window = context_window
        self.prefix_cache = prefix_cache
        self._reply = reply
        self._responder = responder
        self._api_key = api_key

    def complete(self, system: str, messages: Sequence[Mapping[str, object]], max_tokens: int | None) -> Completion:
        """The model's reply, cut to the token budget, with this request's content fault applied."""
        text = self._reply(system, messages)
        if not isinstance(text, str):
            raise TypeError(f"the reply function returned {type(text).__name__}, not str")
        completion = _within_budget(text, max_tokens)
        if self.fault is None:
            return completion
        if self.fault.kind == "leak_key":
            # After the budget cut, so the key always shows: the point is to prove it gets redacted.
            return Completion(f"{completion.text}\nAuthorization: Bearer {self._api_key}", completion.ending)
        return _with_content_fault(completion, self.fault.kind)

    def send_json(self, status: int, body: Mapping[str, object], headers: Mapping[str, str] | None = None) -> None:
        self._responder.write_json(status, body, headers or {})

    def send_sse(self, events: Iterable[SseEvent], *, cut_after: int | None = None) -> None:
        """Stream `events`; with `cut_after`, close the connection after that many, leaving the stream unended."""
        self._responder.write_sse(events, cut_after)

    def send_raw(self, status: int, content_type: str, data: bytes) -> None:
        """Answer with exactly these bytes: how a wire sends a reply it garbles on purpose."""
        self._responder.write_raw(status, content_type, data, {})

    def drop_connection(self) -> None:
        """Close the connection without any response, as a crashed upstream does."""
        self._responder.drop_connection()


def _within_budget(text: str, max_tokens: int | None) -> Completion:
    """A reply over budget is cut to the bytes the estimate allows, on a character boundary, and ends by length."""
    if max_tokens is None or estimate_text_tokens(text) <= max_tokens:
        return Completion(text, "stop")
    cut = text.encode("utf-8")[: max_tokens * BYTES_PER_TOKEN].decode("utf-8", errors="ignore")
    return Completion(cut, "length")


def _with_content_fault(completion: Completion, kind: FaultKind) -> Completion:
    if kind == "refusal":
        return Completion("", "refusal")
    if kind == "truncation":
        return Completion(completion.text[: len(completion.text) // 2], "length")
    if kind == "empty":
        return Completion("", "stop")
    if kind == "malformed":
        return Completion(MALFORMED_REPLY, "stop")
    return completion  # the other kinds act on the transport, not the text
