"""What every wire of the local provider shares: one admitted request and the model behind it.

The server admits a request (auth, body, ordinal, fault) and hands the route's wire module an
`Exchange`. The wire validates its own format, asks `complete` for the model's `Completion` (or, on
a reasoning wire, `reason` for a private thought and a Completion, and `summarize` for a
compaction), and answers through the exchange with JSON or a server-sent event stream. What a wire
keeps between one provider's requests (stored responses, a sealing key) lives in `state`, made from
its service. This module knows nothing of HTTP framing or of any one wire, so wires and the server
both import it and never each other.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from email.message import Message
from typing import Literal, Protocol, TypeVar, cast

from turnstate.adapters.tokens import BYTES_PER_TOKEN, estimate_text_tokens
from turnstate.local_provider.faults import Fault, FaultKind
from turnstate.local_provider.prefix_cache import PrefixCache
from turnstate.local_provider.service import Service

ReplyFn = Callable[[str, Sequence[Mapping[str, object]]], str]
"""(system prompt, non-system messages with text content) -> reply text."""

Ending = Literal["stop", "length", "refusal", "pause"]
"""Why a completion ended, before a wire names it (e.g. Chat Completions: stop, length, content_filter;
a pause, which only Messages has, is a truncation elsewhere)."""


class Thinker(Protocol):
    """A reasoning model, as the reasoning wires (OpenAI Responses) use it; the policy module is one.

    `memory` is what the model reads back from replayed opaque state, oldest first: the thoughts of
    earlier reasoning, and a compaction's summary. `context` is earlier messages that stay in the
    context beside them (the user messages a compacted window kept): read, but not the current turn.
    A thought is what the wire seals into new opaque state and never shows.
    """

    def think(
        self,
        system: str,
        messages: Sequence[Mapping[str, object]],
        memory: Sequence[str],
        context: Sequence[Mapping[str, object]] = (),
    ) -> tuple[str, str]:
        """(system prompt, the current turn's messages with text content, memory, earlier messages kept
        in the context) -> (thought, visible reply)."""
        ...

    def summarize(self, memory: Sequence[str]) -> str:
        """What a compaction keeps of `memory`: the text a later turn reads back in its place."""
        ...


class Model(Thinker, Protocol):
    """A whole model: its chat reply and its reasoning (the policy module is one; so is
    recording_policy.RecordingModel)."""

    def reply(self, system: str, messages: Sequence[Mapping[str, object]]) -> str:
        """(system prompt, the request's messages with text content) -> the visible reply."""
        ...


def unread_input(carried: object) -> tuple[Mapping[str, object], ...]:
    """The input no reply had read when a compaction was made, as the compaction carries it (the
    `unread` list its wire sealed: the messages of the current turn it replaced, {role, content}
    with text content).

    A compaction stands for everything it replaced, and a summary made to let the conversation go on
    carries the input it has not answered yet: tool results a client compacts with the rest. Until
    the model writes after the compaction, that input opens its current turn, read as it was."""
    if not isinstance(carried, list):
        return ()
    return tuple(
        {"role": str(message.get("role")), "content": str(message.get("content"))}
        for message in carried
        if isinstance(message, dict)
    )


def carried_tokens(summary: str, unread: Sequence[Mapping[str, object]]) -> int:
    """What writing a compaction costs in output tokens: its summary and the unread input it carries."""
    return estimate_text_tokens(summary) + sum(estimate_text_tokens(str(message["content"])) for message in unread)


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
    withheld: str = ""  # a refusal's text the model had written before the filter stopped it

    @property
    def tokens(self) -> int:
        return estimate_text_tokens(self.text)


@dataclass(frozen=True)
class Reasoning:
    """What a reasoning model produced for one request: a private thought, then the visible completion."""

    thought: str
    completion: Completion

    @property
    def thought_tokens(self) -> int:
        return estimate_text_tokens(self.thought)


_Value = TypeVar("_Value")


class ProviderState:
    """What wires keep from one request to the next of the same provider (a sealing key, stored
    responses), by name; each value is made on its first use. What must outlive the provider (a
    sealing key, stored conversations) a wire makes from `service` (service.py), so two providers
    share state only through a service."""

    def __init__(self, service: Service) -> None:
        self.service = service
        self._values: dict[str, object] = {}
        self._lock = threading.Lock()

    def get(self, name: str, make: Callable[[], _Value]) -> _Value:
        with self._lock:
            if name not in self._values:
                self._values[name] = make()
            return cast(_Value, self._values[name])


class Responder(Protocol):
    """The HTTP side of one request, as the server implements it."""

    headers: Message
    """The request's headers (a wire that reads one, e.g. Anthropic's `anthropic-beta`, asks `Exchange.headers`)."""

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
        thinker: Thinker,
        state: ProviderState,
    ) -> None:
        self.body = body
        self.ordinal = ordinal
        self.fault = fault
        # A context_overflow fault leaves this one request no window at all, so each wire answers it
        # with its own overflow error, as it would a prompt too long for the model.
        self.context_window = 0 if fault is not None and fault.kind == "context_overflow" else context_window
        self.prefix_cache = prefix_cache
        self.state = state
        """What the wires keep between this provider's requests."""
        self._reply = reply
        self._thinker = thinker
        self._responder = responder
        self._api_key = api_key

    @property
    def headers(self) -> Message:
        """The request's HTTP headers, for a wire whose protocol carries settings there."""
        return self._responder.headers

    def complete(self, system: str, messages: Sequence[Mapping[str, object]], max_tokens: int | None) -> Completion:
        """The model's reply, cut to the token budget, with this request's content fault applied."""
        text = self._reply(system, messages)
        if not isinstance(text, str):
            raise TypeError(f"the reply function returned {type(text).__name__}, not str")
        return self._faulted(_within_budget(text, max_tokens))

    def reason(
        self,
        system: str,
        messages: Sequence[Mapping[str, object]],
        memory: Sequence[str],
        max_tokens: int | None,
        *,
        thought_in_budget: bool = True,
        context: Sequence[Mapping[str, object]] = (),
    ) -> Reasoning:
        """The reasoning model's thought and reply. `max_tokens` bounds both: the thought comes first
        and is kept whole, and the reply gets what is left of the budget, with the content fault applied.
        With `thought_in_budget` False (a wire whose thinking is off, so the thought is neither sent
        nor billed) `max_tokens` bounds the reply alone."""
        thought, text = self._thinker.think(system, messages, memory, context)
        for name, value in (("thought", thought), ("reply", text)):
            if not isinstance(value, str):
                raise TypeError(f"the think function returned a {type(value).__name__} {name}, not str")
        spent = estimate_text_tokens(thought) if thought_in_budget else 0
        budget = None if max_tokens is None else max(0, max_tokens - spent)
        return Reasoning(thought, self._faulted(_within_budget(text, budget)))

    def summarize(self, memory: Sequence[str]) -> str:
        """The model's summary of its memory, for a compaction item to carry."""
        summary = self._thinker.summarize(memory)
        if not isinstance(summary, str):
            raise TypeError(f"the thinker's summary is a {type(summary).__name__}, not str")
        return summary

    def _faulted(self, completion: Completion) -> Completion:
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

    def send_reply(self, body: Mapping[str, object]) -> None:
        """A 200 carrying the JSON `body`; under a `garbled` fault, only the first half of its bytes,
        as an upstream that breaks mid-body sends it (every wire garbles a reply this one way)."""
        if self.fault is None or self.fault.kind != "garbled":
            self.send_json(200, body)
            return
        data = json.dumps(body).encode("utf-8")
        self._responder.write_raw(200, "application/json", data[: len(data) // 2], {})

    def drop_connection(self) -> None:
        """Close the connection without any response, as a crashed upstream does."""
        self._responder.drop_connection()


class Thoughtless:
    """A Thinker made of a ReplyFn: it thinks nothing, and its summary is its memory as it is. How a
    provider started with a test's reply function (an echo, say) answers on a reasoning wire."""

    def __init__(self, reply: ReplyFn) -> None:
        self._reply = reply

    def think(
        self,
        system: str,
        messages: Sequence[Mapping[str, object]],
        memory: Sequence[str],
        context: Sequence[Mapping[str, object]] = (),
    ) -> tuple[str, str]:
        return "", self._reply(system, [*context, *messages])

    def summarize(self, memory: Sequence[str]) -> str:
        return "\n".join(memory)


def _within_budget(text: str, max_tokens: int | None) -> Completion:
    """A reply over budget is cut to the bytes the estimate allows, on a character boundary, and ends by length."""
    if max_tokens is None or estimate_text_tokens(text) <= max_tokens:
        return Completion(text, "stop")
    cut = text.encode("utf-8")[: max_tokens * BYTES_PER_TOKEN].decode("utf-8", errors="ignore")
    return Completion(cut, "length")


def _with_content_fault(completion: Completion, kind: FaultKind) -> Completion:
    if kind == "refusal":
        return Completion("", "refusal", withheld=completion.text)
    if kind == "pause_turn":
        return Completion(completion.text, "pause")
    if kind == "truncation":
        return Completion(completion.text[: len(completion.text) // 2], "length")
    if kind == "empty":
        return Completion("", "stop")
    if kind == "malformed":
        return Completion(MALFORMED_REPLY, "stop")
    return completion  # the other kinds act on the transport, not the text
