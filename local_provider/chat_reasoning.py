"""How an open-weight Chat Completions server (vLLM, SGLang, DeepSeek's API) holds a conversation that
replays its reasoning strings.

Such a server's model thinks before it answers and returns the thought as a readable string beside
the content, under `reasoning_content` or `reasoning` (this one returns both, as servers that
support either alias do). A client that continues the conversation sends each assistant message
back with its reasoning under the alias(es) it chose; the chat template puts it back in the prompt.

Rules:
1. Stateless. No reasoning string is checked against the one issued, and an assistant message
   without one is taken: the server keeps no state between requests, so it can neither tell a reply
   it issued from one a client wrote nor know what reasoning came with it (vLLM's chat_utils hands an
   assistant message's reasoning to the chat template when present and compares it with nothing).
   The model reads what is given: a dropped reasoning is forgotten, an altered one believed, and where
   both aliases are given it reads `reasoning_content`.

DeepSeek's thinking mode (TOOL_TURNS) holds them by turn, a turn being the messages between two
user messages. Its guide (api-docs.deepseek.com/guides/thinking_mode): in a turn without a tool
call the reasoning "does not need to participate in the context concatenation. If passed to the API
in subsequent turns, it will be ignored"; in a turn that made one it "must be passed back to the
API in all subsequent user interaction turns". So:
2. Only in a turn that made a tool call is an assistant message's reasoning read, and there every
   assistant message must carry the `reasoning_content` key, else DeepSeek's own 400, param null:
   "The `reasoning_content` in the thinking mode must be passed back to the API." (quoted from
   replies of deepseek-v4-flash in client issues, 2026). Any string passes, the one issued or not
   (rule 1: the API keeps nothing to check it against): a recorded request was served with
   `reasoning_content: ''` on a client-made tool-call message, and clients fix this 400 by sending
   '' (QwenLM/qwen-code#3729). (One client PR, NousResearch/hermes-agent#17341, reports
   deepseek-v4-pro refusing ''; no traffic shows it, and the model served here is deepseek-reasoner,
   recorded as deepseek-v4-flash.) In any other turn the reasoning is neither checked nor read, as
   the guide says.

What the model reads: the system prompt, the current turn (the user and tool messages after the
last assistant message), and its memory: in order, the reasoning of every replayed assistant message
(under TOOL_TURNS, of those rule 2 reads) and the text of every earlier user message (where a
harness hands it a summary), from which the model takes only notes. Never an old frame's beacon, so
only a faithful replay remembers it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from turnstate.adapters.tokens import REASONING_FIELDS
from turnstate.local_provider.openai_words import InvalidParam


@dataclass(frozen=True)
class ReplayRule:
    """Which assistant messages bring their reasoning back: none must (EVERY_TURN, rule 1: every
    replayed one is read), or every one in a turn that made a tool call (TOOL_TURNS, rule 2)."""

    tool_turns_only: bool


EVERY_TURN = ReplayRule(tool_turns_only=False)
TOOL_TURNS = ReplayRule(tool_turns_only=True)
PASSED_BACK = "The `reasoning_content` in the thinking mode must be passed back to the API."


@dataclass(frozen=True)
class Conversation:
    current: tuple[Mapping[str, object], ...]
    memory: tuple[str, ...]


def read_conversation(messages: Sequence[Mapping[str, object]], rule: ReplayRule = EVERY_TURN) -> Conversation:
    """Hold the non-system `messages` (content flattened to text) to `rule`; what the model reads."""
    last_reply = max((index for index, message in enumerate(messages) if message["role"] == "assistant"), default=-1)
    read = _in_tool_turns(messages) if rule.tool_turns_only else None
    memory: list[str] = []
    for position, message in enumerate(messages[: last_reply + 1]):
        if message["role"] == "assistant" and (read is None or position in read):
            memory += _replayed_reasoning(message, rule)
        elif message["role"] == "user":
            memory.append(str(message["content"]))
    current = tuple(message for message in messages[last_reply + 1 :] if message["role"] in ("user", "tool"))
    return Conversation(current=current, memory=tuple(memory))


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


def _replayed_reasoning(message: Mapping[str, object], rule: ReplayRule) -> list[str]:
    """The reasoning the model reads of one replayed assistant message: the first alias given, as it
    is (rule 1); under TOOL_TURNS a message without `reasoning_content` is refused (rule 2)."""
    given = [str(message[name]) for name in REASONING_FIELDS if name in message]
    if not given and rule.tool_turns_only:
        raise InvalidParam(None, PASSED_BACK, code="invalid_request_error")
    return given[:1]
