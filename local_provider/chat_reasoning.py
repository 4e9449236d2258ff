"""How an open-weight Chat Completions server (vLLM, SGLang, DeepSeek's API) holds a conversation that
replays its reasoning strings.

Such a server's model thinks before it answers and returns the thought as a readable string beside
the content, under `reasoning_content` or `reasoning` (this one returns both, as servers that
support either alias do). A client that continues the conversation sends each assistant message
back with its reasoning under the alias(es) it chose; the chat template puts it back in the prompt.

Rules (the first one broken is a 400 in OpenAI's error shape, param `messages[i]`):
1. Missing. An assistant message whose content this provider issued must carry the reasoning it was
   issued with, under at least one alias: else "... is missing its reasoning".
2. Altered. Every alias it carries must hold exactly a reasoning string issued with that content:
   else "... reasoning does not match the one issued with this message".
   Assistant messages this provider never issued (a client's own) are read as they are.

What the model reads: the system prompt, the current turn (the user and tool messages after the
last assistant message), and its memory: in order, the reasoning of every replayed assistant message
and the text of every earlier user message (where a harness hands it a summary), from which the
model takes only notes. Never an old frame's beacon, so only a faithful replay remembers it.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from turnstate.adapters.tokens import REASONING_FIELDS
from turnstate.local_provider.exchange import Exchange
from turnstate.local_provider.openai_words import InvalidParam

STATE_NAME = "chat.reasoning"


@dataclass
class IssuedReasoning:
    """The reasoning strings this provider issued with each reply content. Kept as the strings (a
    dictionary lookup per replayed message) rather than digests, which cost a canonical JSON dump
    and a hash for every assistant message of every request."""

    _issued: dict[str, frozenset[str]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def issue(self, content: str, reasoning: str) -> None:
        with self._lock:
            self._issued[content] = self._issued.get(content, frozenset()) | {reasoning}

    def issued_with(self, content: str) -> frozenset[str] | None:
        return self._issued.get(content)  # a frozenset, replaced whole: safe to read unlocked


def issued_reasoning(exchange: Exchange) -> IssuedReasoning:
    return exchange.state.get(STATE_NAME, IssuedReasoning)


@dataclass(frozen=True)
class Conversation:
    current: tuple[Mapping[str, object], ...]
    memory: tuple[str, ...]


def read_conversation(issued: IssuedReasoning, messages: Sequence[Mapping[str, object]]) -> Conversation:
    """Hold the non-system `messages` (content flattened to text) to the rules; what the model reads."""
    last_reply = max((index for index, message in enumerate(messages) if message["role"] == "assistant"), default=-1)
    memory: list[str] = []
    for index, message in enumerate(messages[: last_reply + 1]):
        if message["role"] == "assistant":
            memory += _replayed_reasoning(issued, index, message)
        elif message["role"] == "user":
            memory.append(str(message["content"]))
    current = tuple(message for message in messages[last_reply + 1 :] if message["role"] in ("user", "tool"))
    return Conversation(current=current, memory=tuple(memory))


def _replayed_reasoning(issued: IssuedReasoning, index: int, message: Mapping[str, object]) -> list[str]:
    given = [str(message[name]) for name in REASONING_FIELDS if name in message]
    expected = issued.issued_with(str(message["content"]))
    if expected is None:
        return given  # not this provider's reply: read as it is
    if not given:
        raise InvalidParam(f"messages[{index}]", f"messages[{index}]: the assistant message is missing its reasoning.")
    if any(text not in expected for text in given):
        raise InvalidParam(
            f"messages[{index}]",
            f"messages[{index}]: the reasoning does not match the one issued with this message.",
        )
    return given[:1]
