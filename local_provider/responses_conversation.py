"""How the OpenAI Responses wires read a conversation back: stored responses, replayed opaque state.

A request's conversation is the chain of a stored response (with `previous_response_id`) followed
by its `input` items. The provider issues opaque state and holds a continuation to these rules; the
first one broken is the error, in the real service's shape ({"error": {"message", "type":
"invalid_request_error", "param", "code"}}):

1. Ids. Every response is built from one token T that the provider can recognize as its own
   (sealed.py): resp_T, its reasoning item rs_T, its output message msg_T and, when it compacts,
   its compaction item cmp_T. A reasoning item's encrypted_content seals T, the id of the chain
   element before it (`after`), a digest of its summary, a digest of msg_T's content, and the
   model's private thought.
2. Stored state. With store (the default) a response's whole chain, its conversation plus its
   output, is kept by the provider's service (service.py: in memory, or in a service folder that a
   later provider continues; OpenAI keeps a stored response 30 days, and stores a chain as each
   response naming the one before, community.openai.com/t/1149127) for `previous_response_id`; an
   unknown or forgotten id is 404 previous_response_not_found (param previous_response_id). A
   reasoning item replayed without encrypted_content, or an item_reference, is looked up among
   stored items; one not found is 404 "Item with id ... not found" (param input): without store and
   include, reasoning cannot be replayed, as on the real service. The `expire_handle` fault forgets
   everything stored.
3. Duplicates. An item id given twice in the conversation is 400 (param input).
4. Compaction. The latest compaction item starts the conversation: the items before it are
   tolerated (and billed) but not read, except its kept messages (below). Its encrypted_content must
   open under the provider's key and name its own id, else 400 invalid_encrypted_content. Its sealed
   summary is the first entry of the model's memory, and it is the first element of the reasoning
   chain. A compaction made by `/responses/compact` also seals which user messages it kept (a digest
   of each one's text): it stands only for what it replaced (assistant messages, reasoning, tool
   calls), so its summary holds only what those carried beyond the kept messages, and the model reads
   the kept messages back, wherever they stand before it, as the record of what the user said ("user
   messages are kept verbatim": the SDK's CompactedResponse.output is "all user messages, followed by
   a single compaction item"). A client that replays the compacted window whole keeps all of it; one
   that drops the kept messages loses what only they held. An inline compaction (context_management)
   keeps no messages: it stands for everything before it (the compaction guide lets a client "drop
   items that came before the most recent compaction item"). A compaction by `/responses/compact`
   also seals the function_call_outputs no reply had read when it was made (a client compacting in
   a tool loop, responses_compact.py); until the model writes after it, they open the current turn,
   as they were, so the model answers them.
5. Altered. A reasoning item whose encrypted_content does not open, belongs to another item, or
   whose summary differs from the one it was issued with is 400 invalid_encrypted_content (param
   input); so is an output message whose content differs from the one its reasoning item pins.
6. Orphaned. A reasoning item must be followed at once by what it was issued with: its message
   (msg_T), or the function calls of a reply that called tools (fc_T_1, fc_T_2, ..., in order; the
   seal pins each one's call_id, name and arguments, as it pins a message's text): else 400 "Item
   'rs_T' of type 'reasoning' was provided without its required following item."
7. Missing. An output message or function call the provider issued (msg_T, fc_T_i, recognized by
   its id) must come right after its reasoning item rs_T (a call, after rs_T and the calls before
   it): else 400 "Item 'msg_T' of type 'message' was provided without its required 'reasoning' item:
   'rs_T'." (of type 'function_call' for a call). The recorded tool round (thinking_with_tool_calls,
   store false) replays [reasoning, function_call] then the function_call_output: the reasoning that
   preceded a call travels with it.
8. Reordered. Each reasoning item names the chain element it followed when it was produced; after
   the first chain element of a conversation (which may begin anywhere: dropping whole old turns is
   allowed, as on the real service, and only loses what they held), every reasoning item must
   follow that same element, else 400 (code reasoning_out_of_order).
9. Tool pairing (the real service's words, all 400 invalid_request_error, param input, code null).
   Every function call must be answered by a function_call_output with its call_id before anything
   else follows the reply's calls (a message, a reasoning item), and before the input ends: else "No
   tool output found for function call call_X." (the message clients quote from api.openai.com,
   e.g. openai/codex#93, the mcp1 workaround that parses it). An output whose call_id no earlier
   call has is "No tool call found for function call output with call_id call_X." (quoted whole,
   with its param and code, in microsoft/vscode#320060 and continuedev/continue#10092). A second
   output for the same call is "Duplicate function_call_output for call_id 'call_X'. Each
   function_call must have exactly one matching function_call_output" (quoted from a strict Responses
   provider through a gateway, NousResearch/hermes-agent#102629; api.openai.com's own wording for it
   is not on record). The chain of a previous_response_id counts: its stored calls are answered by
   the new input's outputs. The first offence in item order is the error.

What the model reads (the local model does not re-read old frames, except a compacted window's
kept messages, which the service keeps in its context): the system prompt (`instructions` plus
system and developer messages from the latest compaction on), the latest compaction's kept messages
then the current turn (the user messages and function_call_outputs after the last item the model
wrote, or all of them on a first turn, after the unread input the latest compaction carries when it
is that last item; an output as `{"role": "tool", "content": <its text>}`, so a turn of outputs
alone is a turn too) as messages, in order, and its memory (the compaction summary,
then the thought of every replayed reasoning item, in order); the text of the other user messages
after the latest compaction is handed to it too, from which it takes only notes (a harness's
summary), never an old frame's beacon. A message's or an output's text is what it shows the model
(vision.seen_text): its text parts, each image read by the legend line before it (an image was
checked when it was sent, responses_request.py); the earlier user messages hand over their text
parts only. A message without images reads as its text parts joined, as before images.

Token estimate (billing and the context window): every item the model was sent, those before the
latest compaction included, costs the per-message overhead plus its text at one token per four
UTF-8 bytes; the text of reasoning is its summary and its encrypted_content, and of a compaction its
encrypted_content, counted by length as sent (an opaque blob costs what it weighs). `instructions`
count as one system message.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from turnstate.adapters.images import ImagePart
from turnstate.adapters.tokens import (
    content_text,
    item_text,
    item_tokens,
)
from turnstate.local_provider.exchange import Exchange, unread_input
from turnstate.local_provider.responses_request import IMAGE_PART, SYSTEM_ROLES, is_assistant_output
from turnstate.local_provider.sealed import Sealer, digest
from turnstate.local_provider.stored import ChainStore, StoredState, stored_state
from turnstate.local_provider.vision import seen_text

Item = Mapping[str, object]

RESPONSE_PREFIX, REASONING_PREFIX, MESSAGE_PREFIX, COMPACTION_PREFIX = "resp_", "rs_", "msg_", "cmp_"
FUNCTION_CALL_PREFIX, CALL_ID_PREFIX = "fc_", "call_"
REASONING_KIND, COMPACTION_KIND = "reasoning", "compaction"
STATE_NAME = "openai.responses"


class ReplayError(Exception):
    """A conversation the provider will not continue: the HTTP status and the error's fields."""

    def __init__(self, status: int, message: str, param: str | None, code: str | None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code


def responses_state(exchange: Exchange) -> StoredState:
    """This provider's Responses state (its sealing key, its stored responses)."""
    return stored_state(exchange, STATE_NAME)


@dataclass(frozen=True)
class Conversation:
    """A conversation that passed the rules, as the model reads it."""

    items: tuple[Item, ...]
    """Every item the model was sent, in order, with stored items resolved."""
    instructions: str | None
    system: str
    current: tuple[Mapping[str, object], ...]
    """The current turn's messages as {role, content} with text content."""
    memory: tuple[str, ...]
    last_link: str | None
    """The id of the last chain element (compaction or reasoning item): what new reasoning follows."""
    earlier: tuple[str, ...] = ()
    """The text of the user messages before the current turn (after the latest compaction): where a
    harness's summary of an earlier conversation is handed to the model."""
    kept: tuple[Mapping[str, object], ...] = ()
    """The latest compaction's kept messages (rule 4), in the same form: the model reads them too."""

    @property
    def prompt_items(self) -> tuple[Item, ...]:
        """What the prefix cache compares: the instructions (as one leading item), then every item."""
        if self.instructions is None:
            return self.items
        return ({"type": "instructions", "text": self.instructions}, *self.items)

    @property
    def prompt_tokens(self) -> int:
        return sum(item_tokens(item) for item in self.prompt_items)


def message_digest(content: object) -> str:
    """What a reasoning item pins of its message: each part's type and text, not its annotations."""
    if not isinstance(content, list):
        return digest(content)
    pinned = []
    for part in content:
        if isinstance(part, dict):
            pinned.append([part.get("type"), part.get("text", part.get("refusal"))])
    return digest(pinned)


def calls_digest(calls: Sequence[Item]) -> str:
    """What a reasoning item pins of the function calls it was issued with: each one's call_id, name
    and arguments, in order."""
    return digest([[call.get("call_id"), call.get("name"), call.get("arguments")] for call in calls])


def conversation_items(state: StoredState, previous_response_id: str | None, items: Sequence[Item]) -> tuple[Item, ...]:
    """The stored chain of `previous_response_id` followed by `items`, stored items resolved (rule 2)."""
    chain: tuple[Item, ...] = ()
    if previous_response_id is not None:
        stored = state.store.chain(previous_response_id)
        if stored is None:
            raise ReplayError(
                404,
                f"Previous response with id '{previous_response_id}' not found.",
                "previous_response_id",
                "previous_response_not_found",
            )
        chain = stored
    return (*chain, *(_resolved(state.store, item) for item in items))


def fitted(items: Sequence[Item], instructions: str | None, budget: int) -> tuple[Item, ...]:
    """`truncation: auto`: the items without their oldest whole turns, until the prompt fits `budget`.

    A turn starts where the user speaks, so a reasoning item is never cut from its message."""
    kept = list(items)
    base = 0 if instructions is None else item_tokens({"type": "instructions", "text": instructions})
    while kept and base + sum(item_tokens(item) for item in kept) > budget:
        kept.pop(0)
        while kept and is_assistant_output(kept[0]):
            kept.pop(0)
    return tuple(kept)


def read_conversation(sealer: Sealer, items: Sequence[Item], instructions: str | None) -> Conversation:
    """Hold `items` to the module's rules 3-9; the conversation as the model reads it."""
    _check_no_duplicates(items)
    _check_tool_pairing(items)
    start = _latest_compaction(items)
    memory: list[str] = []
    last_link: str | None = None
    kept: tuple[Mapping[str, object], ...] = ()
    unread: tuple[Mapping[str, object], ...] = ()
    read_from = 0
    if start is not None:
        compaction = items[start]
        opened = _opened_compaction(sealer, compaction)
        memory.append(str(opened["summary"]))
        kept = _kept_messages(items[:start], opened.get("kept"))
        unread = unread_input(opened.get("unread"))
        last_link = _compaction_id(sealer, compaction)
        read_from = start + 1
    chained = last_link is not None
    for index in range(read_from, len(items)):
        item = items[index]
        if item.get("type") == "reasoning":
            memory.append(_replayed_reasoning(sealer, items, index, last_link, chained))
            last_link, chained = str(item["id"]), True
        elif _issued_token(sealer, item) is not None:
            _check_has_reasoning(sealer, items, index)
    begin = 0 if start is None else start
    read = items[begin:]
    return Conversation(
        items=tuple(items),
        instructions=instructions,
        system=_system_prompt(instructions, read),
        current=_current_turn(read, unread),
        kept=kept,
        memory=tuple(memory),
        last_link=last_link,
        earlier=_earlier_user_texts(read),
    )


# --- the rules -------------------------------------------------------------------------------------


def _resolved(store: ChainStore, item: Item) -> Item:
    kind = item.get("type")
    if kind == "item_reference" or (kind == "reasoning" and item.get("encrypted_content") is None):
        item_id = str(item["id"])
        stored = store.item(item_id)
        if stored is None or (kind == "reasoning" and stored.get("type") != "reasoning"):
            message = (
                f"Item with id '{item_id}' not found. Items are not persisted when `store` is set to false. "
                "Try again with `store` set to true, or remove this item from your input."
            )
            raise ReplayError(404, message, "input", None)
        return stored
    return item


def _check_no_duplicates(items: Sequence[Item]) -> None:
    seen: set[str] = set()
    for item in items:
        item_id = item.get("id")
        if not isinstance(item_id, str):
            continue
        if item_id in seen:
            message = f"Duplicate item found with id {item_id}. Remove duplicate items from your input and try again."
            raise ReplayError(400, message, "input", None)
        seen.add(item_id)


def _latest_compaction(items: Sequence[Item]) -> int | None:
    for index in range(len(items) - 1, -1, -1):
        if items[index].get("type") == "compaction":
            return index
    return None


def _opened_compaction(sealer: Sealer, item: Item) -> dict[str, object]:
    payload = sealer.open(item.get("encrypted_content"))
    item_id = item.get("id")
    if (
        payload is None
        or payload.get("kind") != COMPACTION_KIND
        or (item_id is not None and item_id != COMPACTION_PREFIX + str(payload.get("token")))
    ):
        raise _unverified(item_id if isinstance(item_id, str) else "compaction", "could not be decrypted or parsed")
    return payload


def _compaction_id(sealer: Sealer, item: Item) -> str:
    """The compaction's id, read from its seal when the client sent none (the input schema allows that)."""
    return COMPACTION_PREFIX + str(_opened_compaction(sealer, item)["token"])


def _replayed_reasoning(sealer: Sealer, items: Sequence[Item], index: int, link: str | None, chained: bool) -> str:
    """Rules 5, 6 and 8 for the reasoning item at `index`; its thought."""
    item = items[index]
    item_id = str(item["id"])
    payload = sealer.open(item.get("encrypted_content"))
    if payload is None or payload.get("kind") != REASONING_KIND:
        raise _unverified(item_id, "could not be decrypted or parsed")
    token = str(payload.get("token"))
    if item_id != REASONING_PREFIX + token:
        raise _unverified(item_id, f"it was issued for item '{REASONING_PREFIX}{token}'")
    if digest(item.get("summary")) != payload.get("summary"):
        raise _unverified(item_id, "the item's summary is not the one it was issued with")
    if chained and payload.get("after") != link:
        issued_after = payload.get("after") or "the start of the conversation"
        message = (
            f"Item '{item_id}' of type 'reasoning' is out of order: it was produced after '{issued_after}', "
            f"but it follows '{link}' in this input. Replay reasoning items in the order they were produced."
        )
        raise ReplayError(400, message, "input", "reasoning_out_of_order")
    following = items[index + 1] if index + 1 < len(items) else None
    followed_by = FUNCTION_CALL_PREFIX + token + "_1" if "calls" in payload else MESSAGE_PREFIX + token
    if following is None or following.get("id") != followed_by:
        message = f"Item '{item_id}' of type 'reasoning' was provided without its required following item."
        raise ReplayError(400, message, "input", None)
    if "calls" in payload:
        calls = _calls_of(sealer, items, index + 1, token)
        if calls_digest(calls) != payload["calls"]:
            raise _unverified(item_id, "the function calls after it are not the ones it was issued with")
    elif message_digest(following.get("content")) != payload.get("message"):
        raise _unverified(item_id, f"item '{followed_by}' is not the message it was issued with")
    return str(payload.get("thought", ""))


def _calls_of(sealer: Sealer, items: Sequence[Item], start: int, token: str) -> list[Item]:
    """The run of function calls issued with token `token` from `start` on."""
    calls = []
    for item in items[start:]:
        if item.get("type") != "function_call" or _issued_token(sealer, item) != token:
            break
        calls.append(item)
    return calls


def _issued_token(sealer: Sealer, item: Item) -> str | None:
    """The token of an output message (msg_T) or function call (fc_T_i) this provider issued; None
    for any other item."""
    item_id = item.get("id")
    if not isinstance(item_id, str):
        return None
    kind = item.get("type", "message")
    if kind == "message" and item.get("role") == "assistant" and item_id.startswith(MESSAGE_PREFIX):
        token = item_id.removeprefix(MESSAGE_PREFIX)
    elif kind == "function_call" and item_id.startswith(FUNCTION_CALL_PREFIX):
        token = item_id.removeprefix(FUNCTION_CALL_PREFIX).rpartition("_")[0]
    else:
        return None
    return token if sealer.issued(token) else None


def _check_has_reasoning(sealer: Sealer, items: Sequence[Item], index: int) -> None:
    """Rule 7: an issued message right after its reasoning item; an issued call after its reasoning
    item and the calls issued before it."""
    item = items[index]
    token = _issued_token(sealer, item)
    reasoning_id = REASONING_PREFIX + str(token)
    before = index - 1
    while (
        before >= 0 and items[before].get("type") == "function_call" and _issued_token(sealer, items[before]) == token
    ):
        before -= 1
    if before < 0 or items[before].get("id") != reasoning_id:
        kind = item.get("type", "message")
        message = (
            f"Item '{item['id']}' of type '{kind}' was provided without its required 'reasoning' item: "
            f"'{reasoning_id}'."
        )
        raise ReplayError(400, message, "input", None)


def _check_tool_pairing(items: Sequence[Item]) -> None:
    """Rule 9: every call answered once, before anything else follows; no output without its call."""
    called: set[str] = set()
    answered: set[str] = set()
    waiting: list[str] = []  # the calls of the current run of calls and outputs, in order
    for item in (*items, None):
        kind = None if item is None else item.get("type", "message")
        if kind == "function_call" and item is not None:
            called.add(str(item.get("call_id")))
            waiting.append(str(item.get("call_id")))
        elif kind == "function_call_output" and item is not None:
            call_id = str(item.get("call_id"))
            if call_id not in called:
                message = f"No tool call found for function call output with call_id {call_id}."
                raise ReplayError(400, message, "input", None)
            if call_id in answered:
                message = (
                    f"Duplicate function_call_output for call_id '{call_id}'. Each function_call must have "
                    "exactly one matching function_call_output"
                )
                raise ReplayError(400, message, "input", None)
            answered.add(call_id)
        else:
            unanswered = [call_id for call_id in waiting if call_id not in answered]
            if unanswered:
                raise ReplayError(400, f"No tool output found for function call {unanswered[0]}.", "input", None)
            waiting = []


def _unverified(item_id: str, reason: str) -> ReplayError:
    message = f"The encrypted content for item {item_id} could not be verified. Reason: {reason}."
    return ReplayError(400, message, "input", "invalid_encrypted_content")


# --- what the model reads --------------------------------------------------------------------------


def _system_prompt(instructions: str | None, items: Sequence[Item]) -> str:
    parts = [] if instructions is None else [instructions]
    for item in items:
        if item.get("type", "message") == "message" and item.get("role") in SYSTEM_ROLES:
            parts.append(seen_content(item.get("content")))
    return "\n".join(parts)


def seen_content(content: object) -> str:
    """What the model reads of a content string or list: its text parts (as `content_text` reads
    them) and its images, in order (vision.seen_text); without images, exactly `content_text`."""
    if not isinstance(content, list):
        return content_text(content)
    parts: list[str | ImagePart] = [
        ImagePart.from_data_url(str(part["image_url"]))
        if isinstance(part, dict) and part.get("type") == IMAGE_PART
        else content_text([part])
        for part in content
    ]
    return seen_text([part for part in parts if part != ""])  # a part that is no text shows nothing


def seen_item(item: Item) -> str:
    """What the model reads of a user message or a function_call_output."""
    return seen_content(item.get("output" if item.get("type") == "function_call_output" else "content"))


def kept_digest(item: Item) -> str:
    """What a compaction seals of a message it kept: a digest of its text, so the message is known
    again whatever form (short or typed, with or without id and status) the client replays it in."""
    return digest(item_text(item))


def is_user_message(item: Item) -> bool:
    return item.get("type", "message") == "message" and item.get("role") == "user"


def _kept_messages(before: Sequence[Item], sealed: object) -> tuple[Mapping[str, object], ...]:
    """The user messages before the compaction that it sealed as kept, as the model reads them."""
    digests = set(sealed) if isinstance(sealed, list) else set()
    return tuple(
        {"role": "user", "content": seen_item(item)}
        for item in before
        if is_user_message(item) and kept_digest(item) in digests
    )


def _earlier_user_texts(items: Sequence[Item]) -> tuple[str, ...]:
    last_output = max((index for index, item in enumerate(items) if is_assistant_output(item)), default=-1)
    return tuple(item_text(item) for item in items[: last_output + 1] if is_user_message(item))


def _current_turn(
    items: Sequence[Item], unread: Sequence[Mapping[str, object]] = ()
) -> tuple[Mapping[str, object], ...]:
    """The inputs after the last item the model wrote; when that item is the latest compaction
    (`items` start with it), after the unread input it carries."""
    last_output = max((index for index, item in enumerate(items) if is_assistant_output(item)), default=-1)
    current: list[Mapping[str, object]] = list(unread) if last_output == 0 else []
    for item in items[last_output + 1 :]:
        kind = item.get("type", "message")
        if kind == "message" and item.get("role") == "user":
            current.append({"role": "user", "content": seen_item(item)})
        elif kind == "function_call_output":
            current.append({"role": "tool", "content": seen_item(item)})
    return tuple(current)
