"""The OpenAI Responses wire: `POST /v1/responses`, streamed and not, as a strict counterpart.

It validates a request as the service does (responses_request.py), reads its conversation back
under the replay rules (responses_conversation.py: stored responses, opaque reasoning that chains
turn to turn, compaction), enforces the context window with the service's own error, asks the
Exchange's reasoning model for a private thought and a visible reply, and words them as a
`response` object or as a server-sent event stream.

What a response holds, in this order:
- a reasoning item {type, id rs_T, summary, encrypted_content}: the summary is one readable line
  only when `reasoning.summary` is set; encrypted_content is the sealed thought only with
  `include: ["reasoning.encrypted_content"]`, else null (the thought is then replayable only from a
  stored response). No `status`: recorded real reasoning items have none, streamed or not
  (thinking_part, streaming_usage), though the SDK's type allows one;
- the output message {type, id msg_T, role, status, content: [output_text]}: the visible reply;
  or, when a completed reply calls offered function tools, the calls instead, one function_call
  item {id fc_T_i, type, status completed, arguments (a JSON string), call_id call_T_i, name} each,
  in order and with no message (the text beside them is not said), as recorded
  (thinking_with_tool_calls: [reasoning, function_call]; streaming_usage: the same streamed). The
  model calls as on every wire (policy.offered_calls): its reply's `CALL: <tool> <JSON object>`
  lines and its `ACTION: <name> [values...]` line, when they name an offered function, are its
  calls (a latest input asking "call TOOL with {JSON object}" is answered with those CALL lines: a
  test's convention). A function_call_output reaches it as `{"role": "tool", "content": <output
  text>}` in the current turn (responses_conversation.py);
- with `context_management: [{"type": "compaction", "compact_threshold": N}]`, when the context
  (the prompt estimate plus this response's output) passes N and the response is a message: a
  compaction item {type, id cmp_T, encrypted_content}, last. Recorded (compact_stateful_mode,
  streamed and not): the real service answers first and compacts when the context crosses the
  threshold, putting the compaction item after the message (output_index 1), with no `created_by`,
  and bills its summary as output. So the compaction stands for the whole conversation, this
  response included: its sealed summary is the model's own summary of its memory (the previous
  compaction's summary, the replaced reasoning's thoughts, this response's thought, and a compacted
  window's kept messages), and a client that keeps "the latest compaction item and everything after
  it" keeps the compaction item alone, then appends the next input. A response whose output is
  function calls is never compacted inline, however large the context: reported of the real
  service (openai/openai-python#3075, gpt-5.4 with store false: "a long request that returns only
  `function_call`" gets no compaction item, turn after turn, until a turn answers with a message).
  A compaction after the calls would stand for them too, and a client keeping only it would then
  send their outputs without their calls, which the service refuses (rule 9 of
  responses_conversation.py).

Status: completed; incomplete with incomplete_details.reason max_output_tokens when the reply was
cut by `max_output_tokens` (which bounds thought and reply together), or content_filter when the
reply was filtered (the message is then empty and incomplete). Usage: input_tokens is the prompt
estimate (responses_conversation.py); input_tokens_details holds cached_tokens and
cache_write_tokens (both required by the spec's ResponseUsage and the SDK): what the prefix cache
served and what this request stored, by OpenAI's prompt-caching rule over the prompt's items
(openai_words.cache_reads_and_writes); output_tokens is the reply plus the thought
(reasoning_tokens), plus an inline compaction's summary.

A stream sends `event:` and `data:` lines; every event has `type` and `sequence_number`, in the
order response.created, response.in_progress, then per item, in output order,
response.output_item.added, its content events (reasoning_summary_part/text for a summary;
content_part.added, output_text.delta, output_text.done, content_part.done for the message;
response.function_call_arguments.delta and .done for a call, as recorded in streaming_usage;
response.compaction.compacting for a compaction), response.output_item.done with the full item (the
final encrypted_content is here, the added event has none), and last response.completed or
response.incomplete.

Faults, in this wire's words: refusal is an incomplete response filtered for content; truncation
half a reply ended by max_output_tokens; empty and malformed an empty or useless reply that
completes; stream_cut a stream cut after its first text delta (a non-streamed request gets no
response); garbled a JSON body cut in half, or a data line that is not JSON; empty_choices a
well-formed response whose `output` is empty; null_message an output message with `content: null`;
expire_handle forgets the stored responses first (responses_conversation.py).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from turnstate.adapters.tokens import estimate_text_tokens, item_tokens
from turnstate.local_provider.exchange import Exchange, Reasoning, SseEvent
from turnstate.local_provider.openai_words import cache_reads_and_writes, error_body
from turnstate.local_provider.openai_words import error_reply as error_reply
from turnstate.local_provider.policy import offered_calls
from turnstate.local_provider.prefix_cache import PrefixCache
from turnstate.local_provider.responses_conversation import (
    CALL_ID_PREFIX,
    COMPACTION_KIND,
    COMPACTION_PREFIX,
    FUNCTION_CALL_PREFIX,
    MESSAGE_PREFIX,
    REASONING_KIND,
    REASONING_PREFIX,
    RESPONSE_PREFIX,
    Conversation,
    ReplayError,
    calls_digest,
    conversation_items,
    fitted,
    kept_digest,
    message_digest,
    read_conversation,
    responses_state,
)
from turnstate.local_provider.responses_request import CreateRequest, InvalidParam, parse_create
from turnstate.local_provider.sealed import Sealer, digest

STATUSES: Mapping[str, str] = {
    "stop": "completed",
    "length": "incomplete",
    "pause": "incomplete",
    "refusal": "incomplete",
}
INCOMPLETE_REASONS: Mapping[str, str] = {
    "length": "max_output_tokens",
    "pause": "max_output_tokens",
    "refusal": "content_filter",
}
TERMINAL_EVENTS: Mapping[str, str] = {
    "completed": "response.completed",
    "incomplete": "response.incomplete",
    "failed": "response.failed",
}
REASONING_SUMMARY = "Compared the frame with what I remember, then chose the next move."
STREAM_PIECES = 3  # deltas per streamed text, so a client must reassemble them
BROKEN_REPLIES = frozenset({"garbled", "empty_choices", "null_message"})
GARBLED_EVENT: SseEvent = {"event": "response.output_text.delta", "data": '{"type": "response.output_text.delta", '}
CONTEXT_EXCEEDED = "Your input exceeds the context window of this model. Please adjust your input and try again."


def handle(exchange: Exchange) -> None:
    """Answer one admitted request: an error if it is invalid, breaks a replay rule or overflows the
    window; else the response."""
    try:
        request = parse_create(exchange.body)
    except InvalidParam as invalid:
        exchange.send_json(400, error_body(invalid.message, param=invalid.param, code=invalid.code))
        return
    state = responses_state(exchange)
    budget = request.max_output_tokens or 0
    try:
        items = conversation_items(state, request.previous_response_id, request.items)
        if request.truncation == "auto":
            items = fitted(items, request.instructions, exchange.context_window - budget)
        conversation = read_conversation(state.sealer, items, request.instructions)
    except ReplayError as refused:
        exchange.send_json(refused.status, error_body(refused.message, param=refused.param, code=refused.code))
        return
    prompt_tokens = conversation.prompt_tokens
    if prompt_tokens + budget > exchange.context_window:
        exchange.send_json(400, context_exceeded_body())
        return
    kind = exchange.fault.kind if exchange.fault is not None else None
    if kind == "stream_cut" and not request.stream:
        exchange.drop_connection()
        return

    produced = produce(exchange, request, conversation, state.sealer)
    if request.store:
        state.store.keep(produced.response_id, request.previous_response_id, conversation.items, produced.stored_output)
    cached, written = prompt_cache_usage(exchange.prefix_cache, request.model, conversation)
    usage = usage_object(prompt_tokens, cached, written, produced.output_tokens, produced.reasoning.thought_tokens)
    output = broken_output(produced.output, kind) if kind in BROKEN_REPLIES else produced.output
    ending = produced.reasoning.completion.ending
    body = response_object(request, produced.response_id, STATUSES[ending], INCOMPLETE_REASONS.get(ending), output)
    body["usage"] = usage
    if not request.stream:
        exchange.send_reply(body)
        return
    events = stream_events(body, output)
    if kind == "garbled":
        events = [events[0], GARBLED_EVENT, *events[1:]]
    exchange.send_sse(events, cut_after=_cut_point(events) if kind == "stream_cut" else None)


def context_exceeded_body() -> dict[str, object]:
    return error_body(CONTEXT_EXCEEDED, param="input", code="context_length_exceeded")


@dataclass(frozen=True)
class Produced:
    """One response's items, in the forms the client gets and the store keeps."""

    token: str
    reasoning: Reasoning
    reasoning_item: dict[str, object]
    answer: tuple[dict[str, object], ...]
    """The output message, or the function calls that stand in its place."""
    answer_tokens: int
    compaction: dict[str, object] | None
    summary_tokens: int
    include_encrypted_reasoning: bool

    @property
    def response_id(self) -> str:
        return RESPONSE_PREFIX + self.token

    @property
    def output(self) -> list[dict[str, object]]:
        """As the client gets them: the thought withheld unless included."""
        reasoning = dict(self.reasoning_item)
        if not self.include_encrypted_reasoning:
            reasoning["encrypted_content"] = None
        return [reasoning, *self.stored_output[1:]]

    @property
    def stored_output(self) -> list[dict[str, object]]:
        """As the store keeps them: valid input items, the thought sealed in."""
        tail = [] if self.compaction is None else [self.compaction]
        return [self.reasoning_item, *self.answer, *tail]

    @property
    def output_tokens(self) -> int:
        return self.answer_tokens + self.reasoning.thought_tokens + self.summary_tokens


def produce(exchange: Exchange, request: CreateRequest, conversation: Conversation, sealer: Sealer) -> Produced:
    """Think and answer, then compact if the context crossed the threshold and the answer is a
    message; seal what must stay opaque."""
    token = sealer.new_token()
    reasoning = exchange.reason(
        conversation.system,
        conversation.current,
        (*conversation.earlier, *conversation.memory),
        request.max_output_tokens,
        context=conversation.kept,
    )
    completion = reasoning.completion
    content: list[dict[str, object]] = [
        {"type": "output_text", "text": completion.text, "annotations": [], "logprobs": []}
    ]
    message: dict[str, object] = {
        "type": "message",
        "id": MESSAGE_PREFIX + token,
        "role": "assistant",
        "status": "completed" if completion.ending == "stop" else "incomplete",
        "content": content,
    }
    calls = function_calls(token, request, completion.text) if completion.ending == "stop" else []
    answer = calls or [message]
    answer_tokens = (
        estimate_text_tokens("".join(str(call["arguments"]) for call in calls)) if calls else completion.tokens
    )
    summary_parts = [{"type": "summary_text", "text": REASONING_SUMMARY}] if request.summary_requested else []
    pinned = {"calls": calls_digest(calls)} if calls else {"message": message_digest(content)}
    sealed = {
        "kind": REASONING_KIND,
        "token": token,
        "after": conversation.last_link,
        "summary": digest(summary_parts),
        **pinned,
        "thought": reasoning.thought,
    }
    reasoning_item: dict[str, object] = {
        "type": "reasoning",
        "id": REASONING_PREFIX + token,
        "summary": summary_parts,
        "encrypted_content": sealer.seal(sealed),
    }
    compaction, summary_tokens = None, 0
    threshold = request.compaction.threshold if request.compaction is not None else None
    context = conversation.prompt_tokens + answer_tokens + reasoning.thought_tokens
    if threshold is not None and context > threshold and not calls:
        kept_texts = [str(kept["content"]) for kept in conversation.kept]
        summary = exchange.summarize((*kept_texts, *conversation.memory, reasoning.thought))
        compaction, summary_tokens = compaction_item(sealer, token, summary), estimate_text_tokens(summary)
    return Produced(
        token,
        reasoning,
        reasoning_item,
        tuple(answer),
        answer_tokens,
        compaction,
        summary_tokens,
        request.include_encrypted_reasoning,
    )


def function_calls(token: str, request: CreateRequest, reply: str) -> list[dict[str, object]]:
    """A completed reply's calls of the offered functions (policy.offered_calls), as output items;
    none when it makes none."""
    _, asked = offered_calls(reply, request.functions)
    return [
        {
            "id": f"{FUNCTION_CALL_PREFIX}{token}_{number}",
            "type": "function_call",
            "status": "completed",
            # Compact, as api.openai.com writes them (recorded).
            "arguments": json.dumps(arguments, separators=(",", ":")),
            "call_id": f"{CALL_ID_PREFIX}{token}_{number}",
            "name": name,
        }
        for number, (name, arguments) in enumerate(asked, start=1)
    ]


def compaction_item(
    sealer: Sealer,
    token: str,
    summary: str,
    kept: Sequence[Mapping[str, object]] = (),
    unread: Sequence[Mapping[str, object]] = (),
) -> dict[str, object]:
    """A compaction item {type, id, encrypted_content}, as real output has it and input takes it: the
    summary, a digest of each message it keeps, and the input no reply had read
    (responses_conversation.py, rule 4), sealed under the provider's key."""
    payload = {
        "kind": COMPACTION_KIND,
        "token": token,
        "summary": summary,
        "kept": [kept_digest(message) for message in kept],
        "unread": [dict(message) for message in unread],
    }
    return {"type": "compaction", "id": COMPACTION_PREFIX + token, "encrypted_content": sealer.seal(payload)}


def prompt_cache_usage(cache: PrefixCache, model: str, conversation: Conversation) -> tuple[int, int]:
    """(cached_tokens, cache_write_tokens) of this prompt; the prompt is then recorded in the cache."""
    matched = cache.match_and_record(model, conversation.prompt_items)
    tokens = [item_tokens(item) for item in conversation.prompt_items]
    return cache_reads_and_writes(sum(tokens), sum(tokens[:matched]))


def broken_output(output: Sequence[dict[str, object]], kind: str | None) -> list[dict[str, object]]:
    if kind == "empty_choices":
        return []
    if kind == "null_message":
        return [{**item, "content": None} if item["type"] == "message" else item for item in output]
    return list(output)  # garbled breaks the bytes, not the items


def usage_object(
    input_tokens: int, cached_tokens: int, cache_write_tokens: int, output_tokens: int, reasoning_tokens: int
) -> dict[str, object]:
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": cached_tokens, "cache_write_tokens": cache_write_tokens},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": reasoning_tokens},
        "total_tokens": input_tokens + output_tokens,
    }


def response_object(
    request: CreateRequest,
    response_id: str,
    status: str,
    incomplete_reason: str | None,
    output: Sequence[Mapping[str, object]],
) -> dict[str, object]:
    """The `response` object, with the settings it was made with, as the service echoes them."""
    now = int(time.time())
    return {
        "id": response_id,
        "object": "response",
        "created_at": now,
        "status": status,
        "background": False,
        "completed_at": now if status == "completed" else None,
        "error": None,
        "incomplete_details": None if incomplete_reason is None else {"reason": incomplete_reason},
        "instructions": request.instructions,
        "max_output_tokens": request.max_output_tokens,
        "max_tool_calls": None,
        "model": request.model,
        "output": list(output),
        "previous_response_id": request.previous_response_id,
        "service_tier": "default",
        "store": request.store,
        **request.echo,
        "usage": None,
    }


# --- the event stream ------------------------------------------------------------------------------


def stream_events(final: Mapping[str, object], output: Sequence[Mapping[str, object]]) -> list[SseEvent]:
    """The events of one response, `final` being the response object the stream ends with."""
    pending = {**final, "status": "in_progress", "completed_at": None, "incomplete_details": None}
    pending.update(output=[], usage=None)
    events: list[dict[str, object]] = [
        {"type": "response.created", "response": pending},
        {"type": "response.in_progress", "response": pending},
    ]
    for index, item in enumerate(output):
        events += _item_events(index, item)
    events.append({"type": TERMINAL_EVENTS[str(final["status"])], "response": final})
    return [
        {"event": str(event["type"]), "data": json.dumps({**event, "sequence_number": number})}
        for number, event in enumerate(events)
    ]


def _item_events(index: int, item: Mapping[str, object]) -> list[dict[str, object]]:
    where = {"output_index": index, "item_id": item["id"]}
    events: list[dict[str, object]] = [{"type": "response.output_item.added", "output_index": index}]
    kind = item["type"]
    if kind == "compaction":
        events[0]["item"] = {**item, "encrypted_content": ""}
        events.append({"type": "response.compaction.compacting", **where})
    elif kind == "reasoning":
        events[0]["item"] = {**item, "summary": [], "encrypted_content": None}
        summary = item["summary"]
        assert isinstance(summary, list)
        for summary_index, part in enumerate(summary):
            events += _summary_events(where, summary_index, str(part["text"]))
    elif kind == "function_call":
        events[0]["item"] = {**item, "status": "in_progress", "arguments": ""}
        arguments = str(item["arguments"])
        events += [
            *(
                {"type": "response.function_call_arguments.delta", **where, "delta": piece}
                for piece in _pieces(arguments)
            ),
            {"type": "response.function_call_arguments.done", **where, "arguments": arguments},
        ]
    else:  # the output message
        content = item["content"]
        events[0]["item"] = {**item, "status": "in_progress", "content": [] if content is not None else None}
        for content_index, part in enumerate(content if isinstance(content, list) else []):
            events += _text_events(where, content_index, part)
    events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    return events


def _summary_events(where: Mapping[str, object], summary_index: int, text: str) -> list[dict[str, object]]:
    at = {**where, "summary_index": summary_index}
    return [
        {"type": "response.reasoning_summary_part.added", **at, "part": {"type": "summary_text", "text": ""}},
        *({"type": "response.reasoning_summary_text.delta", **at, "delta": piece} for piece in _pieces(text)),
        {"type": "response.reasoning_summary_text.done", **at, "text": text},
        {"type": "response.reasoning_summary_part.done", **at, "part": {"type": "summary_text", "text": text}},
    ]


def _text_events(
    where: Mapping[str, object], content_index: int, part: Mapping[str, object]
) -> list[dict[str, object]]:
    at = {**where, "content_index": content_index}
    text = str(part["text"])
    empty = {**part, "text": ""}
    return [
        {"type": "response.content_part.added", **at, "part": empty},
        *({"type": "response.output_text.delta", **at, "delta": piece, "logprobs": []} for piece in _pieces(text)),
        {"type": "response.output_text.done", **at, "text": text, "logprobs": []},
        {"type": "response.content_part.done", **at, "part": dict(part)},
    ]


def _cut_point(events: Sequence[SseEvent]) -> int:
    """A cut stream shows everything up to the first piece of visible text, if any, and never its end."""
    for index, event in enumerate(events):
        if event["event"] == "response.output_text.delta":
            return index + 1
    return 2


def _pieces(text: str) -> list[str]:
    size = max(1, -(-len(text) // STREAM_PIECES))
    return [text[start : start + size] for start in range(0, len(text), size)]
