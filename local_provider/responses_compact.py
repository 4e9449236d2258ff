"""The OpenAI Responses compact wire: `POST /v1/responses/compact`, as a strict counterpart.

It takes {model, input, instructions?, previous_response_id?} (responses_request.py), reads the
conversation under the same replay rules as `POST /v1/responses` (responses_conversation.py: a
tampered, orphaned, reordered or missing reasoning item is refused here too), and answers a
`response.compaction` object: {id, object, created_at, output, usage}. The output is the user
messages of the conversation it read (from its latest compaction item on), verbatim and in order
(given `type: "message"` when the short form left it out), then one compaction item {type, id cmp_T, encrypted_content, created_by}. The compaction's sealed
summary is the model's own summary of its memory, so a later request that replays the compaction
item reads the hidden facts back from it, and nothing from the items it replaced (they come before
it, so they are not read).

It is not streamed. Usage: input_tokens is the prompt estimate, cached_tokens follows OpenAI's rule,
output_tokens is the summary's estimate (no reasoning tokens). Faults: stream_cut closes the
connection without a response; garbled cuts the JSON body in half; empty_choices answers with an
empty `output` (no compaction item); null_message gives the compaction item `encrypted_content:
null`; expire_handle forgets the stored responses first. The content faults that shape a visible
reply (refusal, truncation, empty, malformed, leak_key) have nothing to shape here: a compaction
has no visible text.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from turnstate.adapters.tokens import estimate_text_tokens, item_tokens
from turnstate.local_provider.exchange import Exchange
from turnstate.local_provider.openai_words import PROMPT_CACHING, error_body
from turnstate.local_provider.openai_words import error_reply as error_reply
from turnstate.local_provider.responses import compaction_item, context_exceeded_body, usage_object
from turnstate.local_provider.responses_conversation import (
    RESPONSE_PREFIX,
    ReplayError,
    conversation_items,
    read_conversation,
    responses_state,
)
from turnstate.local_provider.responses_request import InvalidParam, parse_compact

COMPACTOR = "responses.compact"


def handle(exchange: Exchange) -> None:
    """Answer one admitted compact request: an error, or the user messages plus one compaction item."""
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
    summary = exchange.summarize(conversation.memory)
    compaction = {**compaction_item(state.sealer, token, summary), "created_by": COMPACTOR}
    output: list[Mapping[str, object]] = [*kept_user_messages(conversation.items), compaction]
    if kind == "empty_choices":
        output = []
    elif kind == "null_message":
        output = [*output[:-1], {**compaction, "encrypted_content": None}]
    matched = exchange.prefix_cache.match_and_record(request.model, conversation.prompt_items)
    cached_tokens = PROMPT_CACHING.reported(sum(item_tokens(item) for item in conversation.prompt_items[:matched]))
    body = {
        "id": RESPONSE_PREFIX + token,
        "object": "response.compaction",
        "created_at": int(time.time()),
        "output": output,
        "usage": usage_object(prompt_tokens, cached_tokens, estimate_text_tokens(summary), 0),
    }
    exchange.send_reply(body)


def kept_user_messages(items: Sequence[Mapping[str, object]]) -> list[Mapping[str, object]]:
    """The user messages from the latest compaction item on (those before it were compacted already),
    as sent, with the `type` the short form leaves out, so each reads back as a message item."""
    start = max((index for index, item in enumerate(items) if item.get("type") == "compaction"), default=0)
    return [
        {"type": "message", **item}
        for item in items[start:]
        if item.get("type", "message") == "message" and item.get("role") == "user"
    ]
