"""The Gemini Interactions wire: `POST /v1beta/interactions` and `POST /v1/interactions`, streamed and
not, as a strict counterpart.

It validates a request as the service does (interactions_request.py), reads its input back under
the replay rules (interactions_conversation.py: thought steps whose signatures chain turn to turn),
enforces the context window with the service's own error, asks the Exchange's reasoning model for a
private thought and a visible reply, and words them as an `interaction` or as an event stream.
Unless the request says `store: false`, the interaction is stored (interactions_conversation.py), so
a later request may continue it by `previous_interaction_id` and send only its new steps; with
`store: false` a client replays every step.

What an interaction holds: {id, model, status, created, updated, steps, usage}, its steps being
- a thought step {type, signature, summary?}: the signature seals the private thought and pins the
  output it came with; `summary` is one readable text content only with
  generation_config.thinking_summaries "auto". The model always thinks (there is no thinking-off
  level), and max_output_tokens bounds thought and output together;
- then a model_output step {type, content: [text]} with the visible reply; or function_call steps
  {type, id, name, arguments} in its place, one per call, all after the one thought step (the
  Interactions API carries a call's thought signature on the thought step before it; of parallel
  calls only the first carries one, the "Thought signatures" docs). The model calls as on every
  wire (policy.offered_calls): its completed reply's `CALL: <tool> <JSON object>` lines and its
  `ACTION: <name> [values...]` line, when they name a declared function tool, are its calls, in
  order (the text beside them is not said: the thought keeps what the model needs); else it
  answers in text. A current turn whose user input asks "call TOOL with {JSON object}" is answered
  with those CALL lines (a test's convention). Function results reach the model as `{"role":
  "tool", "content": <result text>}` in the current turn (interactions_conversation.py). The
  calls' ids are call_T, call_T_2, ..., T being the interaction's token.

Status: completed; incomplete when the reply was cut by max_output_tokens (or paused: this wire has
no pause), and incomplete for a safety stop, whose model_output step then has no content and an
`error` (google.rpc.Status with an ErrorInfo, reason SAFETY) in place of the text; requires_action
when it ends in a function call, which the client answers with a function_result step (the SDK's
InteractionStatus). Never requires_continuation: the SDK would re-post on its own.

Context window: a prompt estimate over the window is 400 INVALID_ARGUMENT "The input token count
(N) exceeds the maximum number of tokens allowed (M)."; a prompt that fits, but not with
max_output_tokens, is the same error naming both counts.

Usage: total_input_tokens is the prompt estimate, of which total_cached_tokens is the prefix an
earlier request of the same model sent (Gemini's implicit caching: only from 4,096 tokens on);
total_output_tokens is the visible reply (a call's arguments as JSON), total_thought_tokens the
thought, and total_tokens the sum of input, output and thought.

A stream sends only `data:` lines, each a JSON event named by its `event_type`: interaction.created
(status in_progress), interaction.status_update (in_progress), then per step step.start (a thought
step empty, a model_output step without content, with its error if any, a function_call step with
empty arguments), step.delta pieces (thought_summary, then thought_signature; text for the output,
in several pieces; one arguments_delta with a call's arguments as JSON text: the SDK's StepDelta
has that type, and a FunctionCallStep needs `arguments` at its start), step.stop; and
last interaction.completed with the final status and usage (its steps are the ones streamed).

Faults, in this wire's words (status faults and html_page are the server's; overloaded is 503
UNAVAILABLE): refusal is the safety stop above; truncation half a reply, incomplete; pause_turn the
whole reply, incomplete; empty and malformed an empty or useless reply that completes; leak_key the
key in the text; stream_cut a stream cut after its first text delta, or after its last step if it
has no text (a non-streamed request gets no response); garbled a JSON body cut in half, or a data
line that is not JSON; empty_choices an interaction with no steps; null_message a model_output step
whose content is null; expire_handle forgets every stored interaction (a later
previous_interaction_id naming one is 404).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import get_args

from turnstate.adapters.tokens import estimate_text_tokens
from turnstate.local_provider.exchange import Completion, Ending, Exchange, SseEvent
from turnstate.local_provider.google_words import IMPLICIT_CACHING, InvalidRequest, error_body
from turnstate.local_provider.google_words import error_reply as error_reply
from turnstate.local_provider.interactions_conversation import (
    THOUGHT_KIND,
    Conversation,
    interactions_state,
    issued_digest,
    read_conversation,
    shown_digest,
)
from turnstate.local_provider.interactions_request import InteractionRequest, parse_request
from turnstate.local_provider.policy import offered_calls
from turnstate.local_provider.stored import StoredState

# Every ending but a normal stop (a cut, a pause this wire has no word for, a safety stop) is incomplete.
STATUSES: Mapping[str, str] = {ending: "completed" if ending == "stop" else "incomplete" for ending in get_args(Ending)}
THOUGHT_SUMMARY = "**Choosing the next move**\n\nI checked the frame against what I remember and picked one step."
SAFETY_STOP: Mapping[str, object] = {
    "message": "The response was blocked by the safety filters.",
    "details": [
        {
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": "SAFETY",
            "domain": "generativelanguage.googleapis.com",
        }
    ],
}
INTERACTION_PREFIX, CALL_PREFIX = "v1_", "call_"
STREAM_PIECES = 3  # text deltas per streamed reply, so a client must reassemble them
GARBLED_EVENT: SseEvent = {"data": '{"event_type": "step.delta", "index": 1, '}

Event = dict[str, object]


def handle(exchange: Exchange) -> None:
    """Answer one admitted request: an error if it is invalid, breaks a replay rule or overflows the
    window; else the interaction."""
    state = interactions_state(exchange)
    try:
        request = parse_request(exchange.body)
        conversation = read_conversation(state, request)
        check_window(conversation.prompt_tokens, request.max_output_tokens, exchange.context_window)
    except InvalidRequest as invalid:
        exchange.send_json(invalid.status, error_body(invalid.message, invalid.status))
        return
    kind = exchange.fault.kind if exchange.fault is not None else None
    if kind == "stream_cut" and not request.stream:
        exchange.drop_connection()
        return
    matched = exchange.prefix_cache.match_and_record(request.model, conversation.units)
    cached = IMPLICIT_CACHING.reported(sum(conversation.unit_tokens[:matched]))
    interaction = reply_interaction(exchange, request, conversation, state, cached)
    if kind == "empty_choices":
        interaction["steps"] = []
    elif kind == "null_message":
        interaction["steps"] = [
            step if step["type"] == "thought" else {"type": "model_output", "content": None}
            for step in _steps(interaction)
        ]
    if request.store:
        state.store.keep(
            str(interaction["id"]), request.previous_interaction_id, conversation.steps, _steps(interaction)
        )
    if not request.stream:
        exchange.send_reply(interaction)
        return
    events = stream_events(interaction)
    frames: list[SseEvent] = [{"data": json.dumps(event)} for event in events]
    if kind == "garbled":
        frames.insert(1, GARBLED_EVENT)
    exchange.send_sse(frames, cut_after=cut_point(events) if kind == "stream_cut" else None)


def check_window(prompt_tokens: int, max_output_tokens: int | None, window: int) -> None:
    """Refuse, in the service's words, a request the context window cannot hold."""
    allowed = f"exceeds the maximum number of tokens allowed ({window})."
    if prompt_tokens > window:
        raise InvalidRequest(f"The input token count ({prompt_tokens}) {allowed}")
    if max_output_tokens is not None and prompt_tokens + max_output_tokens > window:
        raise InvalidRequest(
            f"The input token count ({prompt_tokens}) plus max_output_tokens ({max_output_tokens}) {allowed}"
        )


def reply_interaction(
    exchange: Exchange, request: InteractionRequest, conversation: Conversation, state: StoredState, cached: int
) -> Event:
    """Think and answer: a signed thought step, then the model's output (or its safety stop), or its
    call of the function tool it was offered."""
    token = state.sealer.new_token()
    reasoning = exchange.reason(
        conversation.system, conversation.current, conversation.memory, request.max_output_tokens
    )
    completion = reasoning.completion
    calls = function_calls(completion, request.functions, CALL_PREFIX + token)
    outputs: list[Event]
    if calls:
        arguments = [call["arguments"] for call in calls]
        outputs, status, output_tokens = calls, "requires_action", estimate_text_tokens(json.dumps(arguments))
    elif completion.ending == "refusal":
        outputs, status, output_tokens = [_safety_stop()], STATUSES["refusal"], completion.tokens
    else:
        outputs = [{"type": "model_output", "content": [{"type": "text", "text": completion.text}]}]
        status, output_tokens = STATUSES[completion.ending], completion.tokens
    summary = [{"type": "text", "text": THOUGHT_SUMMARY}] if request.show_summary else []
    sealed = {
        "kind": THOUGHT_KIND,
        "token": token,
        "after": conversation.last_link,
        "thought": reasoning.thought,
        "shown": shown_digest(summary),
        "output": issued_digest(outputs),
    }
    thought: Event = {"type": "thought", "signature": state.sealer.seal(sealed)}
    if summary:
        thought["summary"] = summary
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {
        "id": INTERACTION_PREFIX + token,
        "model": request.model,
        "status": status,
        "created": now,
        "updated": now,
        "steps": [thought, *outputs],
        "usage": usage_object(conversation.prompt_tokens, cached, output_tokens, reasoning.thought_tokens),
    }


def function_calls(completion: Completion, functions: Sequence[Mapping[str, object]], call_id: str) -> list[Event]:
    """The function calls a completed reply makes of the tools it was offered (policy.offered_calls),
    in order; none when it makes none (the reply stays text). The text beside them is not said: the
    thought carries what the model keeps. Several calls share the reply's id, numbered (call_T,
    call_T_2, ...)."""
    if completion.ending != "stop":
        return []
    _, asked = offered_calls(completion.text, ((tool.get("name"), tool.get("parameters")) for tool in functions))
    ids = [call_id if number == 1 else f"{call_id}_{number}" for number in range(1, len(asked) + 1)]
    return [
        {"type": "function_call", "id": id_, "name": name, "arguments": arguments}
        for id_, (name, arguments) in zip(ids, asked, strict=True)
    ]


def _safety_stop() -> Event:
    return {"type": "model_output", "content": [], "error": dict(SAFETY_STOP)}


def usage_object(input_tokens: int, cached_tokens: int, output_tokens: int, thought_tokens: int) -> dict[str, int]:
    return {
        "total_input_tokens": input_tokens,
        "total_cached_tokens": cached_tokens,
        "total_output_tokens": output_tokens,
        "total_thought_tokens": thought_tokens,
        "total_tokens": input_tokens + output_tokens + thought_tokens,
    }


# --- the event stream ------------------------------------------------------------------------------


def stream_events(interaction: Mapping[str, object]) -> list[Event]:
    """The events of one interaction, `interaction` being what a non-streamed request would get."""
    header = {key: interaction[key] for key in ("id", "model", "created", "updated")}
    events: list[Event] = [
        {"event_type": "interaction.created", "interaction": {**header, "status": "in_progress"}},
        {"event_type": "interaction.status_update", "interaction_id": interaction["id"], "status": "in_progress"},
    ]
    for index, step in enumerate(_steps(interaction)):
        events += _step_events(index, step)
    final = {**header, "status": interaction["status"], "usage": interaction["usage"]}
    events.append({"event_type": "interaction.completed", "interaction": final})
    return events


def _step_events(index: int, step: Mapping[str, object]) -> list[Event]:
    if step["type"] == "thought":
        start: Event = {"type": "thought"}
        deltas: list[Event] = [{"type": "thought_summary", "content": part} for part in _list(step.get("summary"))]
        deltas.append({"type": "thought_signature", "signature": step["signature"]})
    elif step["type"] == "function_call":
        # The call's arguments come as one JSON text delta, after a start that names the call.
        start = {**step, "arguments": {}}
        deltas = [{"type": "arguments_delta", "arguments": json.dumps(step["arguments"])}]
    else:
        # Its text comes in deltas; a null content (the null_message fault) is said at the start.
        start = {key: value for key, value in step.items() if key != "content" or value is None}
        texts = [str(part.get("text", "")) for part in _list(step.get("content"))]
        deltas = [{"type": "text", "text": piece} for text in texts for piece in _pieces(text)]
    return [
        {"event_type": "step.start", "index": index, "step": start},
        *({"event_type": "step.delta", "index": index, "delta": delta} for delta in deltas),
        {"event_type": "step.stop", "index": index},
    ]


def cut_point(events: Sequence[Mapping[str, object]]) -> int:
    """How many events a cut stream sends: through its first text delta, else through its last step."""
    for number, event in enumerate(events):
        delta = event.get("delta")
        if isinstance(delta, dict) and delta.get("type") == "text":
            return number + 1
    stops = [number for number, event in enumerate(events) if event["event_type"] == "step.stop"]
    return stops[-1] + 1 if stops else 1


def _steps(interaction: Mapping[str, object]) -> list[Mapping[str, object]]:
    return _list(interaction["steps"])


def _list(value: object) -> list[Mapping[str, object]]:
    return [part for part in value if isinstance(part, dict)] if isinstance(value, list) else []


def _pieces(text: str) -> list[str]:
    size = max(1, -(-len(text) // STREAM_PIECES))
    return [text[start : start + size] for start in range(0, len(text), size)]
