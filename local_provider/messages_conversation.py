"""The Messages wire's replay rules, what its model reads, its token estimate and its prompt cache.

Turns. Consecutive messages of one role are one turn, their blocks in order (the SDK's `messages`
docstring: "Consecutive `user` or `assistant` turns in your request will be combined into a single
turn"); every rule below reads turns, and names a block by the path it was sent at.

Opaque state. Every reply of one request is built from one token T (sealed.py). A thinking block's
`signature` seals {kind, token, after, depth, thought, shown, reply}: the private thought, a digest
of the readable `thinking` text, a digest of the rest of its assistant turn (its text and tool_use
blocks), `after`, the chain element it followed (the token of the previous thinking block or
compaction the model had read, or None), and `depth`, that element's depth plus one (0 after none).
A compaction block's `signature` seals {kind, token, after, depth, summary, unread, shown}: the
model's summary of its memory, the input no reply had read (messages.py) and a digest of the
readable `content`. The provider's key is its service's (service.py): Anthropic verifies its own
signatures whenever they come back, so a provider opened on the same service folder verifies what
an earlier one signed; another service's signature, or an earlier in-memory provider's, fails.

Rules, checked from the latest compaction on (turns before it are tolerated and not read):
1. Compaction. A compaction block comes first in its assistant turn. The latest one whose content
   is not null (a null one is a failed compaction: a no-op) must open under the provider's key and
   match its content, else 400 "Invalid `signature` in `compaction` block". Its summary is the
   first entry of the model's memory and the first element of the chain.
2. Altered. A thinking block must open under the provider's key and match its own `thinking` text
   and the rest of its turn, else 400 "Invalid `signature` in `thinking` block" (so a thinking
   block moved into another turn fails too). A redacted_thinking block is never issued here, so
   its data never verifies.
3. Misordered. A thinking block comes first in its assistant turn (after a compaction block, if
   any), else 400. After the first chain element read (the conversation may begin at any whole
   turn: dropping old turns only loses what they held), each thinking block must follow the
   element read before it: it was produced after it (`after` is that element), or after elements
   the request left out (its `depth` is more than one past that element's), else 400. So thinking
   dropped from earlier turns is allowed, and only forgets; a block that is moved, swapped,
   repeated or from another branch of the conversation is not.
4. Dropped. With thinking on, the first assistant turn of an open tool loop (the turns after the
   last user turn without a tool_result, when the request ends with a user turn that has one) must
   start with a thinking block, else 400 "Expected `thinking` or `redacted_thinking`, but found
   `text`. When `thinking` is enabled, a final `assistant` message must start with a thinking
   block (preceeding the lastmost set of `tool_use` and `tool_result` blocks)...", as the real
   service words it. Any other assistant turn may lack one: recorded, claude-sonnet-4 accepted
   thinking on with a final assistant turn of text blocks only, followed by a user text turn
   (test_anthropic_model_thinking_part_from_other_model); the extended-thinking docs: "During tool
   use, you must pass thinking blocks back to the API for the last assistant message", while
   thinking blocks "from prior assistant role turns" may be omitted. The loop's later assistant
   turns are exempt too: without interleaved thinking the model writes none after a tool result
   (recorded in test_anthropic_tool_with_thinking).

5. Tool pairing (checked first, over every turn). The turn after an assistant turn with tool_use
   blocks must be a user turn that opens with one tool_result block for each of its calls (the
   results come first; text may follow them), else 400 "messages.N: `tool_use` ids were found
   without `tool_result` blocks immediately after: ID, ID. Each `tool_use` block must have a
   corresponding `tool_result` block in the next message." (N the assistant message; an assistant
   turn that ends the request with calls is unanswered too). A tool_result whose id no call of the
   assistant turn just before it made is 400 "messages.N.content.M: unexpected `tool_use_id` found
   in `tool_result` blocks: ID. Each `tool_result` block must have a corresponding `tool_use` block
   in the previous message."; a second result for one call is 400 "messages.N.content.M: each
   tool_use must have a single result. Found multiple `tool_result` blocks with id: ID". The
   service's words, as its 400s are quoted in public issue threads (anthropics/claude-code#5989 and
   #13460, a duplicate's in the public records of several agent tools); the docs: "tool_result
   blocks must come FIRST in the content array". Checked in the order of the messages, so a call
   answered by a wrong id is reported unanswered (its message comes first).

What the model reads: the system prompt, the current turn (the user turn after the last assistant
turn: each tool_result block as a message `{"role": "tool", "content": <its text>}`, its string
content or the text of its text blocks, and each run of other blocks as one user message of their
text, in the order sent, each image in either read as vision.py reads it (a legend line followed by
the rows of the image it reads; an image no legend reads shows nothing); a turn of tool results
alone is a turn too; when the last assistant turn is the latest compaction's and holds that block
alone, nothing written after it, the unread input the compaction carries comes first, then the turn
after it, if any), and its memory: the latest
compaction's summary, then the thought of every thinking block after it, in order. Never the text
of older user turns, but one case: a history another model wrote. An assistant turn this service's
model did not write after the user turn before it (its `ReplyLog`, service.py, keeps a digest of each
user turn and the reply written to it, thinking and cache_control left out, so a turn of its own
replayed without its thinking is still its own) is a history handed over, as a harness replays one
when it switches models (a resume with another profile). The model holds no thought about it, so it
reads it as text: the user turns before the last such turn, from the latest compaction on, are its
context (as on the Responses wire a compacted window's kept messages are: it follows a beacon their
frames show and does not note it again), and a compaction's summary keeps what they hold.

Token estimate: the system prompt counts as one message; every turn costs the per-message overhead
plus the estimate of its blocks' text, where a thinking block's text is its `thinking` and its
signature, a compaction's its content and signature (opaque state weighs what it is long), a
tool_use's its name and input JSON, a document's its readable text (a PDF or URL source weighs
nothing here); an image, in a message or held in a tool result or a document, weighs Anthropic's
published estimate of its size as the harness counts it (adapters/tokens.py, image_part_tokens).
Every turn is counted, those before a compaction included.

Prompt caching (`PromptCache`, Anthropic's documented rules, simplified): the prompt is a list of
blocks (system blocks, then each turn's blocks). A breakpoint is a block with `cache_control`, or,
with the top-level `cache_control` (automatic caching), the last block; at most 4. A request writes
the prefix ending at each breakpoint that is at least 1,024 tokens long; it reads the longest prefix,
ending at any block boundary up to its last breakpoint, that an earlier request of the same model
wrote. cache_read_input_tokens is that prefix's length; cache_creation_input_tokens is what the
longest written prefix adds beyond it; input_tokens is the rest. Without a breakpoint nothing is read
or written. A block's `cache_control` is not part of what is compared, so a breakpoint may move.
The writes are split by the ttl of the breakpoint that wrote them ("Mixing different TTLs" in the
prompt-caching guide): with A the read prefix, B the longest prefix a 1h breakpoint writes (or A),
C the longest written prefix, cache_creation.ephemeral_1h_input_tokens is B - A and
ephemeral_5m_input_tokens is C - B. A 1h breakpoint after a 5m one is a 400, "a ttl='1h'
cache_control block must not come after a ttl='5m' cache_control block" (the service's words, as
quoted in a public write-up of the error). Time to live is not modelled otherwise: an entry lives as
long as its provider.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from itertools import groupby

from turnstate.adapters.images import ImagePart
from turnstate.adapters.tokens import MESSAGE_OVERHEAD_TOKENS, estimate_text_tokens, image_part_tokens
from turnstate.local_provider.anthropic_words import MAX_BREAKPOINTS, MIN_CACHEABLE_TOKENS, InvalidRequest
from turnstate.local_provider.exchange import Exchange, unread_input
from turnstate.local_provider.messages_request import Block, MessagesRequest, cache_ttl, image_blocks, text_of
from turnstate.local_provider.sealed import Sealer, digest
from turnstate.local_provider.service import ReplyLog, Service

STATE_NAME = "anthropic.messages"
THINKING_KIND, COMPACTION_KIND = "anthropic.thinking", "anthropic.compaction"
THINKING_TYPES = frozenset({"thinking", "redacted_thinking"})
THINKING_DOCS = "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"


class PromptCache:
    """The prefixes earlier requests wrote to the cache, per model; safe to share between threads."""

    def __init__(self) -> None:
        self._written: set[bytes] = set()
        self._lock = threading.Lock()

    def read_and_write(self, model: str, units: Sequence[PromptUnit]) -> CacheUse:
        """What a prompt reads from the cache and writes to it; records its writes."""
        ends = [index for index, unit in enumerate(units) if unit.ttl is not None]
        if not ends:
            return CacheUse()
        keys, lengths = _prefix_keys(model, units)
        writes = [index for index in ends if lengths[index] >= MIN_CACHEABLE_TOKENS]
        with self._lock:
            hits = [index for index in range(ends[-1] + 1) if keys[index] in self._written]
            self._written.update(keys[index] for index in writes)
        read = lengths[hits[-1]] if hits else 0
        longest = lengths[writes[-1]] if writes else 0
        hour = max([read, *(lengths[index] for index in writes if units[index].ttl == "1h")])
        return CacheUse(read, written_5m=max(0, longest - hour), written_1h=hour - read)


@dataclass(frozen=True)
class CacheUse:
    """What a prompt read from the cache, and what it wrote, by the ttl of the breakpoint that wrote it."""

    read: int = 0
    written_5m: int = 0
    written_1h: int = 0

    @property
    def written(self) -> int:
        return self.written_5m + self.written_1h


@dataclass(frozen=True)
class PromptUnit:
    """One block of the prompt as the cache and the estimate see it; `ttl` is its breakpoint's, None
    when it is not a breakpoint; `path` is where it was sent."""

    role: str
    block: Block
    tokens: int
    ttl: str | None = None
    path: str = ""


@dataclass(frozen=True)
class Turn:
    """Consecutive messages of one role, read as one turn: their blocks in order, each with the path
    it was sent at."""

    role: str
    blocks: tuple[Block, ...]
    paths: tuple[str, ...]

    def has(self, kind: str) -> bool:
        return any(block.get("type") == kind for block in self.blocks)


def turns_of(messages: Sequence[Mapping[str, object]]) -> tuple[Turn, ...]:
    """The request's messages as turns: consecutive messages of one role combined."""
    turns: list[Turn] = []
    for index, message in enumerate(messages):
        blocks = _blocks(message)
        paths = tuple(f"messages.{index}.content.{position}" for position in range(len(blocks)))
        if turns and turns[-1].role == message["role"]:
            last = turns.pop()
            turns.append(Turn(last.role, last.blocks + tuple(blocks), last.paths + paths))
        else:
            turns.append(Turn(str(message["role"]), tuple(blocks), paths))
    return tuple(turns)


@dataclass(frozen=True)
class MessagesState:
    """What the Messages wire keeps for one provider: the key of its opaque state, the replies its
    model wrote, and its cache."""

    sealer: Sealer
    written: ReplyLog
    cache: PromptCache

    @classmethod
    def of(cls, service: Service, name: str) -> MessagesState:
        """The service's key and reply log for this wire (its signatures open, and its replies are its
        own, on any provider of the same service); the cache is this provider's own (service.py)."""
        return cls(Sealer(service.key(name)), service.replies(name), PromptCache())


def messages_state(exchange: Exchange) -> MessagesState:
    return exchange.state.get(STATE_NAME, partial(MessagesState.of, exchange.state.service, STATE_NAME))


@dataclass(frozen=True)
class Conversation:
    """A conversation that passed the rules, as the model reads it."""

    system: str
    current: tuple[Mapping[str, object], ...]
    memory: tuple[str, ...]
    context: tuple[Mapping[str, object], ...]  # a history handed over, read as text
    asked: str | None  # the digest of the user turn a reply answers, None when the request ends with a reply
    last_link: str | None
    depth: int  # the depth of the last chain element read, -1 when none was
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


def written_digest(asked: str | None, reply: Sequence[Block]) -> str:
    """What the reply log keeps of a reply: the user turn it answered (`asked`) and its blocks."""
    return digest([asked, reply_digest(reply)])


def read_conversation(state: MessagesState, request: MessagesRequest) -> Conversation:
    """Hold the request's turns to the module's rules; the conversation as the model reads it."""
    sealer = state.sealer
    images = request.images
    turns = turns_of(request.messages)
    _check_tool_pairing(turns)
    start = _latest_compaction(turns)
    memory: list[str] = []
    link: str | None = None
    depth = -1
    unread: tuple[Mapping[str, object], ...] = ()
    if start is not None:
        payload = _opened(sealer, turns[start], 0, COMPACTION_KIND)
        memory.append(str(payload.get("summary", "")))
        link, depth = str(payload["token"]), _depth(payload)
        if len(turns[start].blocks) == 1 and not any(turn.role == "assistant" for turn in turns[start + 1 :]):
            unread = unread_input(payload.get("unread"))  # nothing written since: still unread
    chained = link is not None
    opener = _tool_loop_opener(turns)
    handed_over = start or 0
    for index in range(start or 0, len(turns)):
        turn = turns[index]
        if turn.role != "assistant":
            continue
        first = _check_order(turn)
        if first == len(turn.blocks):
            continue  # a compaction alone: it was read above, or it is an earlier one, not read
        if index > 0 and written_digest(_asked(turns[index - 1], images), turn.blocks) not in state.written:
            handed_over = index
        if turn.blocks[first].get("type") in THINKING_TYPES:
            payload = _opened(sealer, turn, first, THINKING_KIND)
            if chained and not _follows(payload, link, depth):
                raise InvalidRequest(
                    f"{turn.paths[first]}: this `thinking` block was produced in another place in the conversation; "
                    "replay thinking blocks verbatim, in their own turns and in the order they were produced"
                )
            memory.append(str(payload.get("thought", "")))
            link, depth, chained = str(payload["token"]), _depth(payload), True
        elif request.thinking and index == opener:
            found = turn.blocks[first].get("type")
            raise InvalidRequest(
                f"{turn.paths[first]}.type: Expected `thinking` or `redacted_thinking`, but found `{found}`. "
                "When `thinking` is enabled, a final `assistant` message must start with a thinking block "
                "(preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you include "
                f"thinking blocks from previous turns. To avoid this requirement, disable `thinking`. "
                f"Please consult our documentation at {THINKING_DOCS}"
            )
    return Conversation(
        system="\n".join(str(block.get("text", "")) for block in request.system),
        current=(*unread, *_current_turn(turns, images)),
        memory=tuple(memory),
        context=tuple(
            message
            for turn in turns[start or 0 : handed_over]
            if turn.role == "user"
            for message in _read_messages(turn, images)
        ),
        asked=_asked(turns[-1], images) if turns else None,
        last_link=link,
        depth=depth,
        units=prompt_units(request, turns),
    )


def prompt_units(request: MessagesRequest, turns: Sequence[Turn]) -> tuple[PromptUnit, ...]:
    """The prompt's blocks in order, each with its estimate and its breakpoint's ttl, if it is one."""
    parts = [Turn("system", request.system, tuple(f"system.{index}" for index in range(len(request.system))))]
    units: list[PromptUnit] = []
    for turn in (*parts, *turns):
        for position, (block, path) in enumerate(zip(turn.blocks, turn.paths, strict=True)):
            overhead = MESSAGE_OVERHEAD_TOKENS if position == 0 else 0
            units.append(PromptUnit(turn.role, block, overhead + block_tokens(block), cache_ttl(block), path))
    if request.automatic_cache is not None and units and units[-1].ttl is None:
        units[-1] = replace(units[-1], ttl=request.automatic_cache)
    ttls = [unit for unit in units if unit.ttl is not None]
    if len(ttls) > MAX_BREAKPOINTS:
        raise InvalidRequest(
            f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {len(ttls)}."
        )
    for before, after in zip(ttls, ttls[1:], strict=False):
        if (before.ttl, after.ttl) == ("5m", "1h"):
            raise InvalidRequest(
                f"{after.path}.cache_control.ttl: a ttl='1h' cache_control block must not come after "
                "a ttl='5m' cache_control block."
            )
    return tuple(units)


def block_tokens(block: Block) -> int:
    """A block's estimate: its text's, as the module says, and the images it is or holds."""
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
        text = text_of([block])  # an image's is none: it weighs its own estimate
    return estimate_text_tokens(text) + sum(image_part_tokens(image) for _, image in image_blocks("", block))


# --- the rules -------------------------------------------------------------------------------------


def _blocks(message: Mapping[str, object]) -> list[Block]:
    content = message["content"]
    assert isinstance(content, list)  # messages_request made every content a list
    return content


def _latest_compaction(turns: Sequence[Turn]) -> int | None:
    for index in range(len(turns) - 1, -1, -1):
        block = turns[index].blocks[0]
        if block.get("type") == "compaction" and block.get("content") is not None:
            return index
    return None


def _check_order(turn: Turn) -> int:
    """Rules 1 and 3's order: compaction first, thinking right after it; where the reply's blocks start."""
    first = 1 if turn.blocks[0].get("type") == "compaction" else 0
    for position, block in enumerate(turn.blocks):
        kind = block.get("type")
        if kind == "compaction" and position != 0:
            raise InvalidRequest(f"{turn.paths[position]}: a `compaction` block must come first in its message")
        if kind in THINKING_TYPES and position != first:
            raise InvalidRequest(f"{turn.paths[position]}: `{kind}` blocks must come first in an `assistant` message")
    return first


def _check_tool_pairing(turns: Sequence[Turn]) -> None:
    """Rule 5: every call answered first thing in the next turn, once, and no result without its call."""
    calls: list[str] = []
    where = ""
    for turn in (*turns, Turn("end", (), ())):
        pairs = list(zip(turn.blocks, turn.paths, strict=True))
        leading = [block for block, _ in pairs[: _leading_results(turn)]]
        missing = [call for call in calls if call not in {block.get("tool_use_id") for block in leading}]
        if (turn.role != "user" and calls) or missing:
            listed = ", ".join(missing or calls)
            raise InvalidRequest(
                f"{where}: `tool_use` ids were found without `tool_result` blocks immediately after: {listed}. "
                "Each `tool_use` block must have a corresponding `tool_result` block in the next message."
            )
        answered: set[object] = set()
        for block, path in pairs:
            if block.get("type") != "tool_result":
                continue
            call = block.get("tool_use_id")
            if call not in calls:
                raise InvalidRequest(
                    f"{path}: unexpected `tool_use_id` found in `tool_result` blocks: {call}. "
                    "Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
                )
            if call in answered:
                raise InvalidRequest(
                    f"{path}: each tool_use must have a single result. Found multiple `tool_result` blocks with id: {call}"
                )
            answered.add(call)
        made = [(block, path) for block, path in pairs if block.get("type") == "tool_use"]
        calls = [str(block.get("id")) for block, _ in made]
        where = made[-1][1].rsplit(".content.", 1)[0] if made else ""


def _leading_results(turn: Turn) -> int:
    """How many tool_result blocks open a turn."""
    count = 0
    while count < len(turn.blocks) and turn.blocks[count].get("type") == "tool_result":
        count += 1
    return count


def _tool_loop_opener(turns: Sequence[Turn]) -> int | None:
    """Rule 4: the index of the first assistant turn of an open tool loop, None when no loop is open."""
    if not turns or turns[-1].role != "user" or not turns[-1].has("tool_result"):
        return None
    openers = [index for index, turn in enumerate(turns) if turn.role == "user" and not turn.has("tool_result")]
    after = openers[-1] + 1 if openers else 0
    return next((index for index in range(after, len(turns)) if turns[index].role == "assistant"), None)


def _follows(payload: Mapping[str, object], link: str | None, depth: int) -> bool:
    """Rule 3: a block follows the element read before it, or elements the request left out."""
    return payload.get("after") == link or _depth(payload) > depth + 1


def _depth(payload: Mapping[str, object]) -> int:
    value = payload.get("depth")
    return value if isinstance(value, int) else 0


def _opened(sealer: Sealer, turn: Turn, position: int, kind: str) -> dict[str, object]:
    """Rules 1 and 2: the payload sealed in the block at `position`, if it is the one issued for it."""
    block = turn.blocks[position]
    if block.get("type") == "redacted_thinking":
        raise InvalidRequest(f"{turn.paths[position]}: Invalid `data` in `redacted_thinking` block")
    payload = sealer.open(block.get("signature"))
    if kind == THINKING_KIND:
        valid = (
            payload is not None
            and payload.get("kind") == kind
            and payload.get("shown") == digest(block.get("thinking"))
            and payload.get("reply") == reply_digest(turn.blocks)
        )
    else:
        valid = (
            payload is not None and payload.get("kind") == kind and payload.get("shown") == digest(block.get("content"))
        )
    if not valid or payload is None:
        name = "thinking" if kind == THINKING_KIND else "compaction"
        raise InvalidRequest(f"{turn.paths[position]}: Invalid `signature` in `{name}` block")
    return payload


def _current_turn(turns: Sequence[Turn], images: Mapping[str, ImagePart]) -> tuple[Mapping[str, object], ...]:
    """The user turn after the last assistant turn as the model reads it (none when the request ends
    with an assistant turn)."""
    if not turns or turns[-1].role != "user":
        return ()
    return _read_messages(turns[-1], images)


def _asked(turn: Turn, images: Mapping[str, ImagePart]) -> str | None:
    """The digest of a user turn as the model reads it, None for an assistant turn."""
    return digest([dict(message) for message in _read_messages(turn, images)]) if turn.role == "user" else None


def _read_messages(turn: Turn, images: Mapping[str, ImagePart]) -> tuple[Mapping[str, object], ...]:
    """A user turn as the model reads it: a tool message per tool result, a user message per run of
    other blocks, in order; `images` (the request's) seen as text_of sees them."""
    messages: list[Mapping[str, object]] = []
    for results, blocks in groupby(turn.blocks, key=_is_tool_result):
        if results:
            messages += [{"role": "tool", "content": text_of([block], images)} for block in blocks]
        else:
            messages.append({"role": "user", "content": text_of(list(blocks), images)})
    return tuple(messages)


def _is_tool_result(block: Block) -> bool:
    return block.get("type") == "tool_result"


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
