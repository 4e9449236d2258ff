"""The Messages wire's replay rules, what its model reads, its token estimate and its prompt cache.

Opaque state. Every reply of one request is built from one token T (sealed.py). A thinking block's
`signature` seals {kind, token, after, thought, shown, reply}: the private thought, a digest of the
readable `thinking` text, a digest of the rest of its assistant message (its text and tool_use
blocks), and `after`, the chain element it followed (the token of the previous thinking block or
compaction the model had read, or None). A compaction block's `signature` seals {kind, token, after,
summary, shown}: the model's summary of its memory and a digest of the readable `content`.

Rules, checked from the latest compaction on (messages before it are tolerated and not read):
1. Compaction. A compaction block comes first in its assistant message. The latest one whose
   content is not null (a null one is a failed compaction: a no-op) must open under the provider's
   key and match its content, else 400 "Invalid `signature` in `compaction` block". Its summary is
   the first entry of the model's memory and the first element of the chain.
2. Altered. A thinking block must open under the provider's key and match its own `thinking` text
   and the rest of its message, else 400 "Invalid `signature` in `thinking` block" (so a thinking
   block moved into another turn fails too). A redacted_thinking block is never issued here, so
   its data never verifies.
3. Misordered. A thinking block comes first in its assistant message (after a compaction block, if
   any), else 400. After the first chain element read (the conversation may begin at any whole
   turn: dropping old turns only loses what they held), each thinking block must follow the
   element it followed when it was produced, else 400.
4. Dropped. With thinking on, every assistant message read must start with a thinking block, else
   400 "Expected `thinking` or `redacted_thinking`, but found `text`", as the real service words it.

What the model reads: the system prompt, the current turn (the text of the user messages after the
last assistant message), and its memory: the latest compaction's summary, then the thought of every
thinking block after it, in order. Never the text of older user messages.

Token estimate: the system prompt counts as one message; every message costs the per-message
overhead plus the estimate of its blocks' text, where a thinking block's text is its `thinking`
and its signature, a compaction's its content and signature (opaque state weighs what it is long),
a tool_use's its name and input JSON. Every message is counted, those before a compaction included.

Prompt caching (`PromptCache`, Anthropic's documented rules, simplified): the prompt is a list of
blocks (system blocks, then each message's blocks). A breakpoint is a block with `cache_control`, or,
with the top-level `cache_control` (automatic caching), the last block; at most 4. A request writes
the prefix ending at each breakpoint that is at least 1,024 tokens long; it reads the longest prefix,
ending at any block boundary up to its last breakpoint, that an earlier request of the same model
wrote. cache_read_input_tokens is that prefix's length; cache_creation_input_tokens is what the
longest written prefix adds beyond it; input_tokens is the rest. Without a breakpoint nothing is read
or written. A block's `cache_control` is not part of what is compared, so a breakpoint may move.
Time to live is not modelled: an entry lives as long as its provider.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from turnstate.adapters.tokens import MESSAGE_OVERHEAD_TOKENS, estimate_text_tokens
from turnstate.local_provider.anthropic_words import MAX_BREAKPOINTS, MIN_CACHEABLE_TOKENS, InvalidRequest
from turnstate.local_provider.exchange import Exchange
from turnstate.local_provider.messages_request import Block, MessagesRequest, text_of
from turnstate.local_provider.sealed import Sealer, digest

STATE_NAME = "anthropic.messages"
THINKING_KIND, COMPACTION_KIND = "anthropic.thinking", "anthropic.compaction"
THINKING_TYPES = frozenset({"thinking", "redacted_thinking"})


class PromptCache:
    """The prefixes earlier requests wrote to the cache, per model; safe to share between threads."""

    def __init__(self) -> None:
        self._written: set[bytes] = set()
        self._lock = threading.Lock()

    def read_and_write(self, model: str, units: Sequence[PromptUnit]) -> tuple[int, int]:
        """(cache_read_input_tokens, cache_creation_input_tokens) of a prompt; records its writes."""
        ends = [index for index, unit in enumerate(units) if unit.breakpoint]
        if not ends:
            return 0, 0
        keys, lengths = _prefix_keys(model, units)
        writes = [index for index in ends if lengths[index] >= MIN_CACHEABLE_TOKENS]
        with self._lock:
            hits = [index for index in range(ends[-1] + 1) if keys[index] in self._written]
            self._written.update(keys[index] for index in writes)
        read = lengths[hits[-1]] if hits else 0
        written = lengths[writes[-1]] if writes else 0
        return read, max(0, written - read)


@dataclass(frozen=True)
class PromptUnit:
    """One block of the prompt as the cache and the estimate see it."""

    role: str
    block: Block
    tokens: int
    breakpoint: bool


@dataclass(frozen=True)
class MessagesState:
    """What the Messages wire keeps for one provider: the key of its opaque state, and its cache."""

    sealer: Sealer
    cache: PromptCache

    @classmethod
    def new(cls) -> MessagesState:
        return cls(Sealer(), PromptCache())


def messages_state(exchange: Exchange) -> MessagesState:
    return exchange.state.get(STATE_NAME, MessagesState.new)


@dataclass(frozen=True)
class Conversation:
    """A conversation that passed the rules, as the model reads it."""

    system: str
    current: tuple[Mapping[str, object], ...]
    memory: tuple[str, ...]
    last_link: str | None
    units: tuple[PromptUnit, ...]

    @property
    def prompt_tokens(self) -> int:
        return sum(unit.tokens for unit in self.units)


def reply_digest(blocks: Sequence[Block]) -> str:
    """What a thinking block pins of its message: the type and text of every other block but compaction."""
    pinned = [
        [block.get("type"), block.get("text", block.get("input"))]
        for block in blocks
        if block.get("type") not in THINKING_TYPES and block.get("type") != "compaction"
    ]
    return digest(pinned)


def read_conversation(sealer: Sealer, request: MessagesRequest) -> Conversation:
    """Hold the request's messages to the module's rules; the conversation as the model reads it."""
    messages = request.messages
    start = _latest_compaction(messages)
    memory: list[str] = []
    link: str | None = None
    if start is not None:
        payload = _opened(sealer, messages[start], start, 0, COMPACTION_KIND)
        memory.append(str(payload.get("summary", "")))
        link = str(payload["token"])
    chained = link is not None
    for index in range(start or 0, len(messages)):
        message = messages[index]
        if message["role"] != "assistant":
            continue
        blocks = _blocks(message)
        first = 1 if blocks[0].get("type") == "compaction" else 0
        for position, block in enumerate(blocks):
            kind = block.get("type")
            if kind == "compaction" and position != 0:
                raise InvalidRequest(
                    f"messages.{index}.content.{position}: a `compaction` block must come first in its message"
                )
            if kind in THINKING_TYPES and position != first:
                raise InvalidRequest(
                    f"messages.{index}.content.{position}: `{kind}` blocks must come first in an `assistant` message"
                )
        if first == len(blocks):
            continue  # a compaction alone: it was read above, or it is an earlier one, not read
        if blocks[first].get("type") in THINKING_TYPES:
            payload = _opened(sealer, message, index, first, THINKING_KIND)
            if chained and payload.get("after") != link:
                raise InvalidRequest(
                    f"messages.{index}.content.{first}: this `thinking` block was produced in another place in the "
                    "conversation; replay thinking blocks verbatim, in their own turns and in the order they were produced"
                )
            memory.append(str(payload.get("thought", "")))
            link, chained = str(payload["token"]), True
        elif request.thinking:
            found = blocks[first].get("type")
            raise InvalidRequest(
                f"messages.{index}.content.{first}.type: Expected `thinking` or `redacted_thinking`, but found `{found}`. "
                "When `thinking` is enabled, an `assistant` message must start with a thinking block. "
                "We recommend you include thinking blocks from previous turns."
            )
    return Conversation(
        system="\n".join(str(block.get("text", "")) for block in request.system),
        current=_current_turn(messages),
        memory=tuple(memory),
        last_link=link,
        units=prompt_units(request),
    )


def prompt_units(request: MessagesRequest) -> tuple[PromptUnit, ...]:
    """The prompt's blocks in order, each with its estimate and whether it is a cache breakpoint."""
    units: list[PromptUnit] = []
    for position, block in enumerate(request.system):
        overhead = MESSAGE_OVERHEAD_TOKENS if position == 0 else 0
        units.append(PromptUnit("system", block, overhead + block_tokens(block), _marked(block)))
    for message in request.messages:
        for position, block in enumerate(_blocks(message)):
            overhead = MESSAGE_OVERHEAD_TOKENS if position == 0 else 0
            units.append(PromptUnit(str(message["role"]), block, overhead + block_tokens(block), _marked(block)))
    if request.automatic_cache and units:
        units[-1] = PromptUnit(units[-1].role, units[-1].block, units[-1].tokens, True)
    breakpoints = sum(unit.breakpoint for unit in units)
    if breakpoints > MAX_BREAKPOINTS:
        raise InvalidRequest(
            f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {breakpoints}."
        )
    return tuple(units)


def block_tokens(block: Block) -> int:
    kind = block.get("type")
    if kind == "thinking":
        text = f"{block.get('thinking', '')}{block.get('signature', '')}"
    elif kind == "redacted_thinking":
        text = str(block.get("data", ""))
    elif kind == "compaction":
        text = "".join(str(block.get(key) or "") for key in ("content", "encrypted_content", "signature"))
    elif kind == "tool_use":
        text = f"{block.get('name', '')}{json.dumps(block.get('input'), sort_keys=True)}"
    else:
        text = text_of([block])
    return estimate_text_tokens(text)


# --- the rules -------------------------------------------------------------------------------------


def _blocks(message: Mapping[str, object]) -> list[Block]:
    content = message["content"]
    assert isinstance(content, list)  # messages_request made every content a list
    return content


def _latest_compaction(messages: Sequence[Mapping[str, object]]) -> int | None:
    for index in range(len(messages) - 1, -1, -1):
        blocks = _blocks(messages[index])
        if blocks[0].get("type") == "compaction" and blocks[0].get("content") is not None:
            return index
    return None


def _opened(sealer: Sealer, message: Mapping[str, object], index: int, position: int, kind: str) -> dict[str, object]:
    """Rules 1 and 2: the payload sealed in the block at `position`, if it is the one issued for it."""
    blocks = _blocks(message)
    block = blocks[position]
    if block.get("type") == "redacted_thinking":
        raise InvalidRequest(f"messages.{index}.content.{position}: Invalid `data` in `redacted_thinking` block")
    payload = sealer.open(block.get("signature"))
    if kind == THINKING_KIND:
        valid = (
            payload is not None
            and payload.get("kind") == kind
            and payload.get("shown") == digest(block.get("thinking"))
            and payload.get("reply") == reply_digest(blocks)
        )
    else:
        valid = (
            payload is not None and payload.get("kind") == kind and payload.get("shown") == digest(block.get("content"))
        )
    if not valid or payload is None:
        name = "thinking" if kind == THINKING_KIND else "compaction"
        raise InvalidRequest(f"messages.{index}.content.{position}: Invalid `signature` in `{name}` block")
    return payload


def _current_turn(messages: Sequence[Mapping[str, object]]) -> tuple[Mapping[str, object], ...]:
    last = max((index for index, message in enumerate(messages) if message["role"] == "assistant"), default=-1)
    return tuple({"role": "user", "content": text_of(_blocks(message))} for message in messages[last + 1 :])


def _marked(block: Block) -> bool:
    return block.get("cache_control") is not None


def _prefix_keys(model: str, units: Sequence[PromptUnit]) -> tuple[list[bytes], list[int]]:
    """For each block boundary: a digest of the prefix ending there (cache_control left out) and its tokens."""
    keys, lengths = [], []
    key, length = hashlib.sha256(model.encode("utf-8")).digest(), 0
    for unit in units:
        block = {name: value for name, value in unit.block.items() if name != "cache_control"}
        canonical = json.dumps([unit.role, block], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        key = hashlib.sha256(key + canonical.encode("utf-8")).digest()
        length += unit.tokens
        keys.append(key)
        lengths.append(length)
    return keys, lengths
