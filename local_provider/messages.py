"""The Anthropic Messages wire: `POST /v1/messages`, streamed and not, as a strict counterpart.

It validates a request as the service does (messages_request.py), reads its conversation back under
the replay rules (messages_conversation.py: signed thinking that chains turn to turn, compaction),
enforces the context window with the service's own errors, asks the Exchange's reasoning model for
a private thought and a visible reply, and words them as a `message` or as an event stream.

What a reply holds:
- a compaction request (`compaction: {type: "summarize"}`, beta compact-2026-09-04): one compaction
  block {type, content, signature} and stop_reason "compaction". The content is a readable line; the
  signature seals the model's own summary of its memory, which a later request that replays the
  block reads back, and the input no reply has read (the request's current turn: the tool_result
  blocks of a tool loop compacted with the rest, and any text beside them), as it was. The block
  goes "first in messages, in place of the messages it summarizes" (the compaction overview), so it
  stands for that input too: until the model writes after it, the input opens the model's current
  turn (messages_conversation.py), and the model answers it rather than finding nothing to answer.
  Nothing is sampled after it. `compaction.instructions` are accepted and ignored. A request that
  ends with a tool loop's results holds its tool_use and tool_result blocks to the pairing rule
  like any other (messages_conversation.py, rule 5): the results answer the calls before them.
- otherwise, with thinking on: a thinking block {type, thinking, signature} first. `thinking` is a
  readable line (empty with `display: "omitted"`); the thought itself lives only sealed in the
  signature. Then one text block {type, text, citations: null} with the visible reply.
  With thinking off, the model still thinks, but the thought is neither sent nor billed.
- offered custom tools, a reply that calls them: after the thinking block and the text (if the
  reply has any: a call that says nothing has no text block), one tool_use block {type, id, name,
  input} per call, in order, and stop_reason "tool_use" (recorded: test_anthropic_tool_with_thinking,
  thinking then text then tool_use). The model calls as on every wire (policy.offered_calls): its
  reply's `CALL: <tool> <JSON object>` lines and its `ACTION: <name> [values...]` line, when they
  name an offered custom tool (`input_schema` its parameters), are its calls, in order, and the
  other lines its text (a current turn asking "call TOOL with {JSON object}" is answered with those
  CALL lines: a test's convention). Only a completed reply calls: under a refusal, truncation or
  pause fault the stop reason is the fault's. A call's id is `toolu_` and
  its message's token, cut, then its place. Its output is billed as its name and input JSON.
- stop_reason: end_turn; max_tokens when the reply was cut by `max_tokens` (which bounds thought and
  reply together); refusal (with stop_details, and a text block only if the model had written
  something before the filter stopped it) when the reply was filtered; pause_turn when the turn was
  paused.
  `stop_sequences` are accepted and never matched.

Context window: a prompt estimate over the window is 400 "prompt is too long: N tokens > M
maximum"; a prompt that fits but not with `max_tokens` is the service's "input length and
`max_tokens` exceed context limit" (a compaction request samples nothing and is checked on its
prompt alone).

Usage: input_tokens (the uncached part), cache_read_input_tokens and cache_creation_input_tokens
by the caching rules of messages_conversation.py, with cache_creation {ephemeral_5m_input_tokens,
ephemeral_1h_input_tokens} splitting the writes by their breakpoint's ttl (always present, zeros
included, as in every recorded reply); output_tokens is the reply plus the thought when thinking is
on; with the thinking-token-count-2026-05-13 beta, output_tokens_details.thinking_tokens is the
thought; service_tier "standard" (this provider has no priority or batch capacity; recorded replies
say "standard"). A compaction's usage has iterations [{type: compaction, the prompt's input and
cache figures, output_tokens: the summary and the unread input it carries}, {type: message, all 0:
nothing was sampled}], each with
its own cache_creation and no service_tier (as recorded), and the top-level figures are those of the
message iteration: a compaction entry is not added to them.

A stream sends `event:` and `data:` lines: message_start (content [], stop_reason null, the usage
with output_tokens 0), per block content_block_start (an empty thinking/text accumulator),
thinking_delta or text_delta pieces, then signature_delta for a thinking block, or for a tool_use
block (which starts with its id, name and `input: {}`) input_json_delta pieces of its input's JSON
(the streaming guide's "partial_json"), content_block_stop;
then message_delta (stop_reason, stop_details, the cumulative usage) and message_stop. The
message_delta's usage has only MessageDeltaUsage's keys: no cache_creation or service_tier, which
stay those of message_start (recorded so: test_anthropic_compaction_usage_with_cache_streaming,
test_anthropic_model_thinking_part_stream).
A compaction block arrives whole in its content_block_start, then content_block_stop, with no
delta: the on-demand compaction guide (compaction-on-demand, beta compact-2026-09-04) says "When you
stream the response, the block arrives whole. You get one `content_block_start` event carrying the
complete block, then `content_block_stop`, with no `content_block_delta` events." The recorded
stream that opens a compaction block empty (`content: null`) and sends its content in one
`compaction_delta` is threshold compaction (context_management compact_20260112,
test_anthropic_compaction_usage_with_cache_streaming), which this wire refuses; and the SDK's
accumulator would lose a signature sent that way (a compaction_delta carries content and
encrypted_content only, and signature_delta is applied to thinking blocks only).

Faults, in this wire's words (status faults and html_page are the server's, overloaded is 529
overloaded_error): refusal is stop_reason "refusal" after the text the model had written (which
may name an action: a client must not act on it); pause_turn is stop_reason "pause_turn" after the
whole reply; truncation half a reply ended by max_tokens;
empty and malformed an empty or useless reply that ends its turn; leak_key the key in the text;
a compaction request under refusal, truncation or pause_turn gets no block, only that stop
reason; stream_cut a stream cut after its first text delta, or after its last block if it has no text (a
non-streamed request gets no response); garbled a JSON body cut in half, or a data line that is not
JSON; empty_choices an empty content list; null_message `content: null`; expire_handle changes
nothing here (nothing is stored).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from turnstate.adapters.tokens import estimate_text_tokens
from turnstate.local_provider.anthropic_words import InvalidRequest, error_body
from turnstate.local_provider.anthropic_words import error_reply as error_reply
from turnstate.local_provider.exchange import Exchange, SseEvent, carried_tokens
from turnstate.local_provider.messages_conversation import (
    COMPACTION_KIND,
    THINKING_KIND,
    CacheUse,
    Conversation,
    MessagesState,
    block_tokens,
    messages_state,
    read_conversation,
    reply_digest,
    written_digest,
)
from turnstate.local_provider.messages_request import THINKING_TOKENS_BETA, MessagesRequest, parse_request
from turnstate.local_provider.policy import message_text, offered_calls
from turnstate.local_provider.sealed import Sealer, digest

STOP_REASONS: Mapping[str, str] = {
    "stop": "end_turn",
    "length": "max_tokens",
    "pause": "pause_turn",
    "refusal": "refusal",
}
THINKING_SUMMARY = "Compared the frame with what I remember, then chose the next move."
COMPACTION_CONTENT = "Summary of the conversation so far; what I keep of it is sealed in this block's signature."
# A compaction the model could not finish: what it stops with instead of a compaction block.
FAILED_COMPACTIONS: Mapping[str, str] = {"refusal": "refusal", "truncation": "max_tokens", "pause_turn": "pause_turn"}
MESSAGE_PREFIX = "msg_"
TOOL_USE_PREFIX, TOOL_USE_ID_CHARS = "toolu_", 20  # a call's id: its message's token, cut, and its place
STREAM_PIECES = 3  # deltas per streamed text, so a client must reassemble them
GARBLED_EVENT: SseEvent = {"event": "content_block_delta", "data": '{"type": "content_block_delta", '}
SERVICE_TIER = "standard"
START_ONLY_USAGE = frozenset({"cache_creation", "service_tier"})  # not MessageDeltaUsage's: message_start's stand


def handle(exchange: Exchange) -> None:
    """Answer one admitted request: a 400 if it is invalid, breaks a replay rule or overflows the
    window; else the message."""
    state = messages_state(exchange)
    try:
        request = parse_request(exchange.body, exchange.headers)
        conversation = read_conversation(state, request)
    except InvalidRequest as invalid:
        exchange.send_json(400, error_body(invalid.message))
        return
    overflow = context_overflow(conversation.prompt_tokens, request, exchange.context_window)
    if overflow is not None:
        exchange.send_json(400, error_body(overflow))
        return
    kind = exchange.fault.kind if exchange.fault is not None else None
    if kind == "stream_cut" and not request.stream:
        exchange.drop_connection()
        return
    cache = state.cache.read_and_write(request.model, conversation.units)
    prompt = Prompt(conversation.prompt_tokens - cache.read - cache.written, cache)
    if request.compaction:
        message = compaction_message(exchange, request, conversation, state.sealer, prompt)
    else:
        message = reply_message(exchange, request, conversation, state, prompt)
    if kind == "empty_choices":
        message["content"] = []
    elif kind == "null_message":
        message["content"] = None
    if not request.stream:
        exchange.send_reply(message)
        return
    events = stream_events(message)
    if kind == "garbled":
        events = [events[0], GARBLED_EVENT, *events[1:]]
    exchange.send_sse(events, cut_after=cut_point(events) if kind == "stream_cut" else None)


def context_overflow(prompt_tokens: int, request: MessagesRequest, window: int) -> str | None:
    """The service's message for a request the window cannot hold, or None."""
    if prompt_tokens > window:
        return f"prompt is too long: {prompt_tokens} tokens > {window} maximum"
    if not request.compaction and prompt_tokens + request.max_tokens > window:
        return (
            f"input length and `max_tokens` exceed context limit: {prompt_tokens} + {request.max_tokens} > {window}, "
            "decrease input length or `max_tokens` and try again"
        )
    return None


def reply_message(
    exchange: Exchange,
    request: MessagesRequest,
    conversation: Conversation,
    state: MessagesState,
    prompt: Prompt,
) -> dict[str, object]:
    """Think and answer: a signed thinking block (with thinking on), then the text; the reply log
    keeps the answer as one its model wrote."""
    sealer = state.sealer
    token = sealer.new_token()
    reasoning = exchange.reason(
        conversation.system,
        conversation.current,
        conversation.memory,
        request.max_tokens,
        thought_in_budget=request.thinking,
        context=conversation.context,
    )
    completion = reasoning.completion
    # A refusal shows what the model had written before the filter stopped it, if anything.
    refused = completion.ending == "refusal"
    text = completion.withheld if refused else completion.text
    calls: list[tuple[str, dict[str, object]]] = []
    if completion.ending == "stop":
        text, calls = offered_calls(text, ((tool.get("name"), tool.get("input_schema")) for tool in request.tools))
    uses: list[dict[str, object]] = [
        {"type": "tool_use", "id": f"{TOOL_USE_PREFIX}{token[:TOOL_USE_ID_CHARS]}{index}", "name": name, "input": args}
        for index, (name, args) in enumerate(calls)
    ]
    shows_text = text or not (refused or uses)
    answer: list[dict[str, object]] = [{"type": "text", "text": text, "citations": None}] if shows_text else []
    answer += uses
    blocks: list[dict[str, object]] = []
    thought_tokens = reasoning.thought_tokens if request.thinking else 0
    if request.thinking:
        shown = THINKING_SUMMARY if request.show_thinking else ""
        sealed = {
            "kind": THINKING_KIND,
            "token": token,
            "after": conversation.last_link,
            "depth": conversation.depth + 1,
            "thought": reasoning.thought,
            "shown": digest(shown),
            "reply": reply_digest(answer),
        }
        blocks.append({"type": "thinking", "thinking": shown, "signature": sealer.seal(sealed)})
    written = estimate_text_tokens(text) + sum(block_tokens(use) for use in uses)
    usage = {**usage_object(prompt, written + thought_tokens), "service_tier": SERVICE_TIER}
    if THINKING_TOKENS_BETA in request.betas:
        usage["output_tokens_details"] = {"thinking_tokens": thought_tokens}
    stop = "tool_use" if uses else STOP_REASONS[completion.ending]
    if conversation.asked is not None:
        state.written.add(written_digest(conversation.asked, answer))
    return message_object(token, request, [*blocks, *answer], stop, usage)


def compaction_message(
    exchange: Exchange,
    request: MessagesRequest,
    conversation: Conversation,
    sealer: Sealer,
    prompt: Prompt,
) -> dict[str, object]:
    """One signed compaction block: the model's summary of its memory and the input no reply has
    read, sealed; or, under a refusal, truncation or pause fault, no block at all and that stop reason."""
    token = sealer.new_token()
    summary = exchange.summarize((*map(message_text, conversation.context), *conversation.memory))
    unread = conversation.current
    failed = FAILED_COMPACTIONS.get(exchange.fault.kind) if exchange.fault is not None else None
    if failed is not None:
        return message_object(token, request, [], failed, {**usage_object(prompt, 0), "service_tier": SERVICE_TIER})
    sealed = {
        "kind": COMPACTION_KIND,
        "token": token,
        "after": conversation.last_link,
        "depth": conversation.depth + 1,
        "summary": summary,
        "unread": [dict(message) for message in unread],
        "shown": digest(COMPACTION_CONTENT),
    }
    block = {"type": "compaction", "content": COMPACTION_CONTENT, "signature": sealer.seal(sealed)}
    compacting = {"type": "compaction", **usage_object(prompt, carried_tokens(summary, unread))}
    sampling = {"type": "message", **usage_object(Prompt(0, CacheUse()), 0)}
    usage = {
        **usage_object(Prompt(0, CacheUse()), 0),
        "service_tier": SERVICE_TIER,
        "iterations": [compacting, sampling],
    }
    return message_object(token, request, [block], "compaction", usage)


@dataclass(frozen=True)
class Prompt:
    """How a prompt's tokens are billed: the uncached input, and what the cache read and wrote."""

    uncached: int
    cache: CacheUse


def usage_object(prompt: Prompt, output_tokens: int) -> dict[str, object]:
    """One usage entry's token counts (a message's usage, or one of its iterations)."""
    return {
        "input_tokens": prompt.uncached,
        "cache_creation_input_tokens": prompt.cache.written,
        "cache_read_input_tokens": prompt.cache.read,
        "cache_creation": {
            "ephemeral_5m_input_tokens": prompt.cache.written_5m,
            "ephemeral_1h_input_tokens": prompt.cache.written_1h,
        },
        "output_tokens": output_tokens,
    }


def message_object(
    token: str,
    request: MessagesRequest,
    content: Sequence[Mapping[str, object]],
    stop_reason: str,
    usage: Mapping[str, object],
) -> dict[str, object]:
    return {
        "id": MESSAGE_PREFIX + token,
        "type": "message",
        "role": "assistant",
        "model": request.model,
        "content": list(content),
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "stop_details": {"type": "refusal", "category": None, "explanation": None}
        if stop_reason == "refusal"
        else None,
        "usage": dict(usage),
    }


# --- the event stream ------------------------------------------------------------------------------


def stream_events(message: Mapping[str, object]) -> list[SseEvent]:
    """The events of one message, `message` being what a non-streamed request would get."""
    content = message["content"]
    usage = message["usage"]
    assert isinstance(usage, dict)
    opening = {**message, "content": [] if content is not None else None, "stop_reason": None, "stop_details": None}
    opening["usage"] = {**usage, "output_tokens": 0}
    events: list[dict[str, object]] = [{"type": "message_start", "message": opening}]
    for index, block in enumerate(content if isinstance(content, list) else []):
        events += _block_events(index, block)
    delta = {
        "stop_reason": message["stop_reason"],
        "stop_sequence": message["stop_sequence"],
        "stop_details": message["stop_details"],
    }
    delta_usage = {key: value for key, value in usage.items() if key not in START_ONLY_USAGE}
    events.append({"type": "message_delta", "delta": delta, "usage": delta_usage})
    events.append({"type": "message_stop"})
    return [{"event": str(event["type"]), "data": json.dumps(event)} for event in events]


def _block_events(index: int, block: Mapping[str, object]) -> list[dict[str, object]]:
    kind = block["type"]
    if kind == "compaction":
        return [
            {"type": "content_block_start", "index": index, "content_block": dict(block)},
            {"type": "content_block_stop", "index": index},
        ]
    if kind == "thinking":
        start: dict[str, object] = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [{"type": "thinking_delta", "thinking": piece} for piece in _pieces(str(block["thinking"]))]
        deltas.append({"type": "signature_delta", "signature": str(block["signature"])})
    elif kind == "tool_use":
        start = {**block, "input": {}}
        arguments = json.dumps(block["input"])
        deltas = [{"type": "input_json_delta", "partial_json": piece} for piece in _pieces(arguments)]
    else:
        start = {"type": "text", "text": "", "citations": None}
        deltas = [{"type": "text_delta", "text": piece} for piece in _pieces(str(block["text"]))]
    return [
        {"type": "content_block_start", "index": index, "content_block": start},
        *({"type": "content_block_delta", "index": index, "delta": delta} for delta in deltas),
        {"type": "content_block_stop", "index": index},
    ]


def _pieces(text: str) -> list[str]:
    if not text:
        return []
    size = -(-len(text) // STREAM_PIECES)
    return [text[start : start + size] for start in range(0, len(text), size)]


def cut_point(events: Sequence[SseEvent]) -> int:
    """How many events a cut stream sends: through its first text delta, else through its last block."""
    stops = [number for number, event in enumerate(events) if event["event"] == "content_block_stop"]
    for number, event in enumerate(events):
        if '"text_delta"' in event["data"]:
            return number + 1
    return stops[-1] + 1 if stops else 1
