"""How an open-weight Chat Completions server (vLLM, SGLang, DeepSeek's API) holds a conversation that
replays its reasoning strings.

Such a server's model thinks before it answers and returns the thought as a readable string beside
the content, under `reasoning_content` or `reasoning` (this one returns both, as servers that
support either alias do). A client that continues the conversation sends each assistant message
back with its reasoning under the alias(es) it chose; the chat template puts it back in the prompt.

Rules (the first one broken is a 400 in OpenAI's error shape, param `messages[i]`, i the message's
own index in the request's `messages`, system messages counted):
1. Missing. An assistant message whose content this provider issued must carry the reasoning it was
   issued with, under at least one alias: else "... is missing its reasoning".
2. Altered. Every alias it carries must hold exactly a reasoning string issued with that content:
   else "... reasoning does not match the one issued with this message".
   Assistant messages this provider never issued (a client's own) are read as they are.

DeepSeek's thinking mode (TOOL_TURNS) holds them by turn, a turn being the messages between two
user messages. Its guide (api-docs.deepseek.com/guides/thinking_mode): in a turn without a tool
call the reasoning "does not need to participate in the context concatenation. If passed to the API
in subsequent turns, it will be ignored"; in a turn that made one it "must be passed back to the
API in all subsequent user interaction turns". So:
3. Only in a turn that made a tool call is an assistant message's reasoning read, and there every
   assistant message must carry `reasoning_content`, issued here or not (the real API keeps nothing
   to tell them apart): else DeepSeek's own 400, param null: "The `reasoning_content` in the
   thinking mode must be passed back to the API." (quoted from replies of deepseek-v4-flash in
   client issues, 2026). Any string passes for a message not issued here: a recorded request was
   served with `reasoning_content: ''` on a client-made tool-call message. Rule 2 holds for the
   rest. In any other turn the reasoning is neither checked nor read, as the guide says.

What the model reads: the system prompt, the current turn (the user and tool messages after the
last assistant message), and its memory: in order, the reasoning of every replayed assistant message
(under TOOL_TURNS, of those rule 3 reads) and the text of every earlier user message (where a
harness hands it a summary), from which the model takes only notes. Never an old frame's beacon, so
only a faithful replay remembers it.
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
class ReplayRule:
    """Which assistant messages bring their reasoning back: every one this provider issued (EVERY_TURN,
    rules 1 and 2), or every one in a turn that made a tool call (TOOL_TURNS, rule 3)."""

    tool_turns_only: bool


EVERY_TURN = ReplayRule(tool_turns_only=False)
TOOL_TURNS = ReplayRule(tool_turns_only=True)
PASSED_BACK = "The `reasoning_content` in the thinking mode must be passed back to the API."


@dataclass(frozen=True)
class Conversation:
    current: tuple[Mapping[str, object], ...]
    memory: tuple[str, ...]


def read_conversation(
    issued: IssuedReasoning,
    messages: Sequence[Mapping[str, object]],
    system_at: Sequence[int] = (),
    rule: ReplayRule = EVERY_TURN,
) -> Conversation:
    """Hold the non-system `messages` (content flattened to text) to `rule`; what the model reads.
    `system_at` are the request indices of the system messages left out, so an error names the
    request's own index."""
    last_reply = max((index for index, message in enumerate(messages) if message["role"] == "assistant"), default=-1)
    read = _in_tool_turns(messages) if rule.tool_turns_only else None
    memory: list[str] = []
    for position, message in enumerate(messages[: last_reply + 1]):
        if message["role"] == "assistant" and (read is None or position in read):
            memory += _replayed_reasoning(issued, message, rule, request_index(position, system_at))
        elif message["role"] == "user":
            memory.append(str(message["content"]))
    current = tuple(message for message in messages[last_reply + 1 :] if message["role"] in ("user", "tool"))
    return Conversation(current=current, memory=tuple(memory))


def request_index(position: int, system_at: Sequence[int]) -> int:
    """The index in the request's `messages` of the conversation's `position`-th message, given the
    (ascending) indices of the system messages taken out of it."""
    index = position
    for at in system_at:
        if at > index:
            break
        index += 1
    return index


def _in_tool_turns(messages: Sequence[Mapping[str, object]]) -> frozenset[int]:
    """The positions of the assistant messages whose turn (the messages between two user messages)
    made a tool call."""
    kept: list[int] = []
    turn: list[int] = []
    called = False
    for position, message in enumerate((*messages, {"role": "user"})):  # a last user message ends the last turn
        if message["role"] == "user":
            kept += turn if called else []
            turn, called = [], False
        elif message["role"] == "assistant":
            turn.append(position)
            called = called or "tool_calls" in message
    return frozenset(kept)


def _replayed_reasoning(
    issued: IssuedReasoning, message: Mapping[str, object], rule: ReplayRule, index: int
) -> list[str]:
    given = [str(message[name]) for name in REASONING_FIELDS if name in message]
    if not given and rule.tool_turns_only:
        raise InvalidParam(None, PASSED_BACK, code="invalid_request_error")
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
