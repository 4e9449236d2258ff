"""The OpenAI Responses compact wire: `POST /v1/responses/compact`, as a strict counterpart.

It takes {model, input, instructions?, previous_response_id?, ...} (responses_request.py), reads the
conversation under the same replay rules as `POST /v1/responses` (responses_conversation.py: a
tampered, orphaned, reordered or missing reasoning item is refused here too), and answers a
`response.compaction` object: {id, object, created_at, output, usage}.

The output is every user message of its input, in order, then one compaction item {type, id cmp_T,
encrypted_content}. Decisions and evidence:
- every user message, those before an earlier compaction item included: the SDK's
  CompactedResponse.output is "a list of all user messages, followed by a single compaction item",
  user messages are never compacted (openai-agents counts "user and compaction items" out of its
  compaction candidates), and an earlier compaction's kept messages are still the record of what the
  user said; the earlier compaction item itself is replaced by the new one;
- each kept message in the output form {type: message, id msg_X, role: user, status: completed,
  content: [input_text parts]}: recorded (compact_messages.yaml) and the spec's CompactResource
  (`ItemField`: a Message has id, status, role and a content array), a string content given as one
  input_text part. A fresh id per message; replaying it unchanged is accepted (responses_request.py);
- the compaction item without `created_by`: the recorded one has none;
- the compaction stands for what it replaced (assistant messages, reasoning, tool calls and their
  outputs, the earlier compaction), not for the messages it keeps, which the next request reads back
  (responses_conversation.py, rule 4): its sealed summary is the model's summary of its memory less
  what the kept messages already say (the lines of that summary which the model's summary of the
  kept messages does not hold), and it seals a digest of each kept message;
- it also carries what it replaced of the input no reply has read (the function_call_outputs after
  the last item the model wrote; a user message among them is kept, as every user message is), as
  it was, which the model answers next (rule 4 there). A client compacting in a tool loop sends outputs not yet answered: Codex's
  mid-turn compaction counts and sends the "trailing tool output" (openai/codex#10374) and installs
  a history that ends with the compaction item, from which the model goes on; and the endpoint
  refuses a call without its output ("No tool output found for function call",
  openai/openai-agents-python#2317), so what it compacts in a tool loop ends with outputs. A summary
  that dropped them would leave the model nothing to answer.

It is not streamed. Usage: input_tokens is the prompt estimate, cached_tokens and cache_write_tokens
follow OpenAI's rule (as on create), output_tokens is the estimate of the summary and the unread input
it carries (no reasoning tokens).
Faults: stream_cut closes the connection without a response; garbled cuts the JSON body in half;
empty_choices answers with an empty `output` (no compaction item); null_message gives the compaction
item `encrypted_content: null`; expire_handle forgets the stored responses first. The content faults
that shape a visible reply (refusal, truncation, empty, malformed, leak_key) have nothing to shape
here: a compaction has no visible text.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from turnstate.adapters.tokens import item_text
from turnstate.local_provider.exchange import Exchange, carried_tokens
from turnstate.local_provider.openai_words import error_body
from turnstate.local_provider.openai_words import error_reply as error_reply
from turnstate.local_provider.responses import (
    compaction_item,
    context_exceeded_body,
    prompt_cache_usage,
    usage_object,
)
from turnstate.local_provider.responses_conversation import (
    MESSAGE_PREFIX,
    RESPONSE_PREFIX,
    ReplayError,
    conversation_items,
    is_user_message,
    read_conversation,
    responses_state,
)
from turnstate.local_provider.responses_request import InvalidParam, parse_compact
from turnstate.local_provider.sealed import Sealer


def handle(exchange: Exchange) -> None:
    """Answer one admitted compact request: an error, or the user messages plus one compaction item
    (which carries the input no reply has read)."""
    try:
        request = parse_compact(exchange.body)
    except InvalidParam as invalid:
        exchange.send_json(400, error_body(invalid.message, param=invalid.param, code=invalid.code))
        return
    state = responses_state(exchange)
    try:
        items = conversation_items(state, request.previous_response_id, request.items)
        conversation = read_conversation(state.sealer, items, request.instructions)
    except ReplayError as refused:
        exchange.send_json(refused.status, error_body(refused.message, param=refused.param, code=refused.code))
        return
    prompt_tokens = conversation.prompt_tokens
    if prompt_tokens > exchange.context_window:
        exchange.send_json(400, context_exceeded_body())
        return
    kind = exchange.fault.kind if exchange.fault is not None else None
    if kind == "stream_cut":
        exchange.drop_connection()
        return

    token = state.sealer.new_token()
    kept = kept_user_messages(state.sealer, conversation.items)
    summary = summary_beyond(exchange, conversation.memory, [item_text(message) for message in kept])
    unread = [message for message in conversation.current if message["role"] == "tool"]  # the rest is kept
    compaction = compaction_item(state.sealer, token, summary, kept, unread)
    output: list[Mapping[str, object]] = [*kept, compaction]
    if kind == "empty_choices":
        output = []
    elif kind == "null_message":
        output = [*output[:-1], {**compaction, "encrypted_content": None}]
    cached, written = prompt_cache_usage(exchange.prefix_cache, request.model, conversation)
    body = {
        "id": RESPONSE_PREFIX + token,
        "object": "response.compaction",
        "created_at": int(time.time()),
        "output": output,
        "usage": usage_object(prompt_tokens, cached, written, carried_tokens(summary, unread), 0),
    }
    exchange.send_reply(body)


def kept_user_messages(sealer: Sealer, items: Sequence[Mapping[str, object]]) -> list[Mapping[str, object]]:
    """Every user message of the input, in order, in the output form: a fresh id, status completed,
    and content as input parts (a string becomes one input_text part)."""
    return [
        {
            "type": "message",
            "id": MESSAGE_PREFIX + sealer.new_token(),
            "role": "user",
            "status": "completed",
            "content": input_parts(item.get("content")),
        }
        for item in items
        if is_user_message(item)
    ]


def input_parts(content: object) -> object:
    return [{"type": "input_text", "text": content}] if isinstance(content, str) else content


def summary_beyond(exchange: Exchange, memory: Sequence[str], kept_texts: Sequence[str]) -> str:
    """The model's summary of its memory, less the lines its summary of the kept messages holds: the
    compaction need not carry what stays in the context beside it."""
    already = set(exchange.summarize(kept_texts).splitlines())
    return "\n".join(line for line in exchange.summarize(memory).splitlines() if line not in already)
