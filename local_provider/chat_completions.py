"""The Chat Completions wire: `POST /v1/chat/completions`, as strict as the real service.

Three servers speak it. OPENAI is api.openai.com's: its model does not show reasoning, and an
assistant message with a field the API does not know is a 400. OPEN_WEIGHT is an open-weight
server's (vLLM, SGLang), served at `/open-weight/v1/chat/completions`: its model thinks before it
answers, returns the thought under `reasoning_content` and `reasoning` (chat_reasoning.py states how
it holds a replay of them), bills it as completion tokens (`completion_tokens_details.
reasoning_tokens`) and streams it as reasoning deltas before the content. DEEPSEEK is DeepSeek's
thinking mode, at `/deepseek/v1/chat/completions`: reasoning under `reasoning_content` alone, held by
turn (chat_reasoning.py, rule 2; a missing one is DeepSeek's own 400 with no param).

It only translates. It validates a request as OpenAI does (chat_completions_request.py: 400 naming
the offending param), enforces the context window with OpenAI's own error, asks the server's Exchange
for the model's Completion, and words it as a `chat.completion` object or a `chat.completion.chunk`
event stream, with `n` choices. Auth, ordinals, faults, the prefix cache and HTTP framing belong to
the server.

Tokens are the harness's estimate (turnstate.adapters.tokens) over the messages with their content
flattened to text, so a prompt the harness trimmed to fit the window fits here exactly. Cached tokens
follow each server's documented prompt-caching rule (PROMPT_CACHING; DEEPSEEK_CACHING).

Function tools, on every server. The model calls the tools a request offers as every wire's model
does (policy.offered_calls): its completed reply's `CALL: <tool> <JSON object>` lines and its
`ACTION: <name> [values...]` line, when they name an offered function, are its calls, in order,
and the other lines its content (a user message asking "call TOOL with {JSON object}" is answered
with those CALL lines: a test's convention, deterministic). Tool messages reach the model as
`{"role": "tool", "content": <text>}` in their place, so it reads a frame a tool result carries;
a turn they answer goes on as text unless the reply has CALL or ACTION lines. A reply that calls
is `finish_reason: "tool_calls"` with `message.tool_calls`, each `{id, type: "function", function:
{name, arguments}}`, arguments a JSON string, ids `call_<request ordinal>_<position>`, and null
content when it says nothing beside them (the SDK's ChatCompletionMessage: content Optional);
streamed, each call opens with its index, id and name, then its arguments in pieces under that
index, as OpenAI streams them. A call's arguments are billed as completion tokens, since the model
writes them (CompletionUsage.completion_tokens: "Number of tokens in the generated completion").
The reasoning servers return their reasoning beside the calls and,
in DeepSeek's thinking mode, require it back with them (chat_reasoning.py, rule 2). The pairing of
calls and tool messages is checked as OpenAI checks it, in its words (chat_completions_request.
TOOL_PAIRING): an unanswered call, a tool message answering no call of the message before it, and a
second answer to one call are each a 400.

What each server's reply carries, and why:
- OPENAI's message is `role`, `content`, `refusal: null` and `annotations: []`. `refusal` is required
  by the spec (openai-openapi, ChatCompletionResponseMessage: role, content, refusal); both it and the
  empty `annotations` are in recorded replies of api.openai.com.
- OPEN_WEIGHT's message also carries `refusal: null`: vLLM's ChatMessage has the field and its server
  writes the whole model (`model_dump()`), null fields included. (SGLang's has no `refusal`; vLLM's
  other null fields, `annotations`, `audio`, `function_call`, and its `tool_calls: []` are left out.)
- DEEPSEEK's message has no `refusal` and no `annotations`: recorded DeepSeek replies carry only
  `role`, `content`, `reasoning_content` and, when it called a tool, `tool_calls`, each call with its
  `index`. Its usage adds `prompt_cache_hit_tokens` and `prompt_cache_miss_tokens` (hit + miss =
  prompt_tokens) beside `prompt_tokens_details.cached_tokens` (= the hits), as every recorded reply
  does.
"""

from __future__ import annotations

import json
import time
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from turnstate.adapters.image_costs import OPENAI_IMAGE_LIMITS, ImageLimits
from turnstate.adapters.tokens import estimate_message_tokens, estimate_text_tokens
from turnstate.local_provider.chat_completions_request import SYSTEM_ROLES, ChatRequest, InvalidParam, parse_request
from turnstate.local_provider.chat_reasoning import (
    EVERY_TURN,
    REASONING_FIELDS,
    TOOL_TURNS,
    ReplayRule,
    read_conversation,
)
from turnstate.local_provider.chat_reasoning import Conversation as ReasoningConversation
from turnstate.local_provider.exchange import Completion, Exchange, SharedError, SseEvent
from turnstate.local_provider.openai_words import PROMPT_CACHING, error_body, error_reply
from turnstate.local_provider.policy import Call, offered_calls
from turnstate.local_provider.prefix_cache import CacheRule

FINISH_REASONS: Mapping[str, str] = {
    "stop": "stop",
    "length": "length",
    "pause": "length",
    "refusal": "content_filter",
}
STREAM_PIECES = 3  # content deltas per streamed reply, so a client must reassemble them

# DeepSeek's context caching (api-docs.deepseek.com/guides/kv_cache, "Additional Notes"): "The cache
# system uses 64 tokens as a storage unit; content less than 64 tokens will not be cached." OpenAI's
# 1,024-token minimum does not hold there: a recorded reply reports 512 hit tokens of a 563-token prompt.
DEEPSEEK_CACHING = CacheRule(min_tokens=64, increment=64)


def context_length_body(window: int, prompt_tokens: int, max_tokens: int) -> dict[str, object]:
    message = (
        f"This model's maximum context length is {window} tokens. However, you requested "
        f"{prompt_tokens + max_tokens} tokens ({prompt_tokens} in the messages, {max_tokens} in the "
        "completion). Please reduce the length of the messages or completion."
    )
    return error_body(message, param="messages", code="context_length_exceeded")


@dataclass(frozen=True, eq=False)  # a wire is itself: compared and hashed (in the prompt cache's key) by identity
class ChatWire:
    """One server's Chat Completions: the fields it returns and reads reasoning under (none: OpenAI)
    and which replayed messages must bring it back, the fields every reply message carries beside
    role and content, whether its calls carry their index, its caching rule, and whether its usage
    also splits the prompt into cache hits and misses (DeepSeek)."""

    reasoning_fields: tuple[str, ...] = ()
    replay: ReplayRule = EVERY_TURN
    message_fields: Mapping[str, object] = field(default_factory=dict)
    indexes_calls: bool = False
    cache_rule: CacheRule = PROMPT_CACHING
    splits_cache_hits: bool = False
    image_limits: ImageLimits | None = OPENAI_IMAGE_LIMITS  # None: the server takes no image (DeepSeek)

    def error_reply(self, kind: SharedError, detail: str = "") -> tuple[int, dict[str, object]]:
        return error_reply(kind, detail)

    def handle(self, exchange: Exchange) -> None:
        """Answer one admitted request: 400 if invalid, breaking a replay rule or over the window, else
        the completion."""
        cache_key = (self, str(exchange.body.get("model")))
        shared = exchange.prefix_cache.match(cache_key, _as_list(exchange.body.get("messages")))
        known = shared.note if isinstance(shared.note, ReadMessages) else ReadMessages((), (), (), ())
        try:
            request = parse_request(
                exchange.body, self.reasoning_fields, known.messages[: shared.messages], self.image_limits
            )
            system_at, messages = read_roles(request.messages, known, shared.messages)
            system = "\n".join(str(request.messages[index]["content"]) for index in system_at)
            read = read_conversation(messages, self.replay) if self.reasoning_fields else None
        except InvalidParam as invalid:
            exchange.send_json(400, error_body(invalid.message, param=invalid.param, code=invalid.code))
            return
        message_tokens = (
            *known.tokens[: shared.messages],
            *map(estimate_message_tokens, request.sent_messages[shared.messages :]),  # images as sent
        )
        prompt_tokens = sum(message_tokens)
        completion_budget = request.max_tokens or 0
        if prompt_tokens + completion_budget > exchange.context_window:
            exchange.send_json(400, context_length_body(exchange.context_window, prompt_tokens, completion_budget))
            return
        stream_cut = exchange.fault is not None and exchange.fault.kind == "stream_cut"
        if stream_cut and not request.stream:
            exchange.drop_connection()
            return
        thought, completion = _answer(exchange, system, messages, read, request.max_tokens)
        call = tool_calls(request, completion, exchange.ordinal)
        if call is not None:
            completion = Completion(call.content, completion.ending)
        reasoning = {name: thought for name in self.reasoning_fields} if thought is not None else {}
        reading = ReadMessages(request.messages, message_tokens, system_at, messages)
        exchange.prefix_cache.record(cache_key, request.sent_messages, reading, shared)
        cached_tokens = self.cache_rule.reported(sum(message_tokens[: shared.messages]))
        thought_tokens = estimate_text_tokens(thought) if thought is not None else 0
        completion_tokens = (completion.tokens + (call.tokens if call else 0) + thought_tokens) * request.choices
        usage = usage_object(prompt_tokens, cached_tokens, completion_tokens, thought_tokens * request.choices)
        if self.splits_cache_hits:
            usage |= {
                "prompt_cache_hit_tokens": cached_tokens,
                "prompt_cache_miss_tokens": prompt_tokens - cached_tokens,
            }
        head = {"id": f"chatcmpl-local-{exchange.ordinal}", "created": int(time.time()), "model": request.model}
        broken = exchange.fault.kind if exchange.fault is not None and exchange.fault.kind in BROKEN_REPLIES else None
        if not request.stream:
            fields = {**self.message_fields, **reasoning}
            body = completion_object(head, completion, request.choices, usage, fields, call, self.indexes_calls)
            exchange.send_reply(body if broken in (None, "garbled") else _broken_object(body, broken))
            return
        included = usage if request.include_usage else None
        events = chunk_events(head, completion, request.choices, included, reasoning, call)
        if broken:
            events = _broken_events(events, broken)
        # A cut stream shows the role chunk and the first piece of text, if any, but never its end.
        exchange.send_sse(events, cut_after=(2 if completion.text else 1) if stream_cut else None)


def _answer(
    exchange: Exchange,
    system: str,
    messages: Sequence[Mapping[str, object]],
    read: ReasoningConversation | None,
    max_tokens: int | None,
) -> tuple[str | None, Completion]:
    """(the thought, the completion): a server without reasoning fields shows no thought."""
    if read is None:
        return None, exchange.complete(system, messages, max_tokens)
    reasoning = exchange.reason(system, read.current, read.memory, max_tokens)
    return reasoning.thought, reasoning.completion


@dataclass(frozen=True)
class ReadMessages:
    """What the server read of a request's messages, kept with it in the prompt cache: each message
    flattened as the model reads it, and its estimate; where the system (and developer) messages
    are; the conversation, the others. A later request that shares a prefix with it reuses these for
    the shared messages instead of validating and reading them again."""

    messages: tuple[dict[str, object], ...]
    tokens: tuple[int, ...]
    system_at: tuple[int, ...]
    conversation: tuple[Mapping[str, object], ...]


def read_roles(
    messages: Sequence[Mapping[str, object]], known: ReadMessages, shared: int
) -> tuple[tuple[int, ...], tuple[Mapping[str, object], ...]]:
    """The indices of the system and developer messages (they instruct the model), and the
    conversation, the others in order; what `known` read of the `shared` leading messages is reused."""
    system_at = list(known.system_at[: bisect_left(known.system_at, shared)])
    conversation = list(known.conversation[: shared - len(system_at)])
    for index in range(shared, len(messages)):
        if messages[index]["role"] in SYSTEM_ROLES:
            system_at.append(index)
        else:
            conversation.append(messages[index])
    return tuple(system_at), tuple(conversation)


def _as_list(messages: object) -> list[object]:
    return messages if isinstance(messages, list) else []


OPENAI = ChatWire(message_fields={"refusal": None, "annotations": []})
OPEN_WEIGHT = ChatWire(reasoning_fields=REASONING_FIELDS, message_fields={"refusal": None})
DEEPSEEK = ChatWire(
    reasoning_fields=("reasoning_content",),
    replay=TOOL_TURNS,
    indexes_calls=True,
    cache_rule=DEEPSEEK_CACHING,
    splits_cache_hits=True,
    image_limits=None,
)


@dataclass(frozen=True)
class ToolCalls:
    """The model's reply as calls of function tools it was offered: the text left beside them, and
    the calls in order, each `{id, type: "function", function: {name, arguments}}`, arguments a JSON
    string (the SDK's ChatCompletionMessageFunctionToolCall)."""

    content: str
    calls: tuple[Mapping[str, object], ...]

    @property
    def tokens(self) -> int:
        """What the calls' arguments add to the completion's tokens."""
        return sum(estimate_text_tokens(str(_function(call)["arguments"])) for call in self.calls)


def _function(value: Mapping[str, object]) -> Mapping[str, object]:
    function = value["function"]
    assert isinstance(function, Mapping)  # parse_request checked it
    return function


def tool_calls(request: ChatRequest, completion: Completion, ordinal: int) -> ToolCalls | None:
    """A completed reply as calls of the offered functions (policy.offered_calls) and the content
    left beside them; None when it makes none (it stays text)."""
    if completion.ending != "stop" or not request.tools:
        return None
    offered = [_function(tool) for tool in request.tools if tool.get("type") == "function"]
    content, calls = offered_calls(completion.text, ((f.get("name"), f.get("parameters")) for f in offered))
    if not calls:
        return None
    return ToolCalls(content, tuple(_call(ordinal, position, call) for position, call in enumerate(calls)))


def _call(ordinal: int, position: int, call: Call) -> Mapping[str, object]:
    """A call with an id unique to this provider: the request's ordinal, then the call's position."""
    name, arguments = call
    function = {"name": name, "arguments": json.dumps(arguments)}
    return {"id": f"call_{ordinal}_{position}", "type": "function", "function": function}


BROKEN_REPLIES = frozenset({"garbled", "empty_choices", "null_message"})
"""Faults that break a 200 reply's body (see faults.py); the SDK reads them without validating."""


def _broken_object(body: dict[str, object], kind: str) -> dict[str, object]:
    choices = body["choices"]
    assert isinstance(choices, list)
    if kind == "empty_choices":
        return {**body, "choices": []}
    return {**body, "choices": [{**choice, "message": None} for choice in choices]}  # null_message


def _broken_events(events: Sequence[SseEvent], kind: str) -> list[SseEvent]:
    if kind == "garbled":
        return [events[0], {"data": '{"id": "chatcmpl-local", "choices": [{"delta": '}, *events[1:]]
    broken = []
    for event in events:
        if event["data"] == "[DONE]":
            broken.append(event)
            continue
        chunk = json.loads(event["data"])
        if kind == "empty_choices":
            chunk["choices"] = []
        else:  # null_message
            chunk["choices"] = [{**choice, "delta": None} for choice in chunk["choices"]]
        broken.append({"data": json.dumps(chunk)})
    return broken


def usage_object(
    prompt_tokens: int, cached_tokens: int, completion_tokens: int, reasoning_tokens: int
) -> dict[str, object]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cached_tokens},
        "completion_tokens_details": {"reasoning_tokens": reasoning_tokens},
    }


def completion_object(
    head: Mapping[str, object],
    completion: Completion,
    choices: int,
    usage: Mapping[str, object],
    fields: Mapping[str, object] | None = None,
    call: ToolCalls | None = None,
    indexes_calls: bool = False,
) -> dict[str, object]:
    """`fields` are what the message carries beside its role and content (the server's own fields,
    the reasoning), before any tool calls; each call with its `index` where the server writes one.
    A message that is calls alone has null content, as the SDK's type allows."""
    calls = (
        [{"index": index, **call} if indexes_calls else call for index, call in enumerate(call.calls)] if call else []
    )
    called = {"tool_calls": calls} if calls else {}
    content = None if calls and not completion.text else completion.text
    message = {"role": "assistant", "content": content, **(fields or {}), **called}
    finish_reason = "tool_calls" if call is not None else FINISH_REASONS[completion.ending]
    listed = [
        {"index": index, "message": message, "finish_reason": finish_reason, "logprobs": None}
        for index in range(choices)
    ]
    return {**head, "object": "chat.completion", "choices": listed, "usage": usage}


def chunk_events(
    head: Mapping[str, object],
    completion: Completion,
    choices: int,
    usage: Mapping[str, object] | None,
    reasoning: Mapping[str, str] | None = None,
    call: ToolCalls | None = None,
) -> Sequence[SseEvent]:
    """Per choice: role chunk, reasoning chunks, content chunks, each tool call (its arguments in
    pieces), finish chunk; then (if asked) a usage chunk without choices, then [DONE]."""
    chunks = []
    thought = next(iter((reasoning or {}).values()), "")
    for index in range(choices):
        chunks.append(_chunk(head, index, {"role": "assistant", "content": ""}))
        for piece in _pieces(thought, STREAM_PIECES) if thought else []:
            chunks.append(_chunk(head, index, {name: piece for name in reasoning or {}}))
        chunks += [_chunk(head, index, {"content": piece}) for piece in _pieces(completion.text, STREAM_PIECES)]
        chunks += _call_chunks(head, index, call) if call is not None else []
        chunks.append(_chunk(head, index, {}, "tool_calls" if call is not None else FINISH_REASONS[completion.ending]))
    if usage is not None:
        chunks.append({**head, "object": "chat.completion.chunk", "choices": [], "usage": usage})
    return [{"data": json.dumps(chunk)} for chunk in chunks] + [{"data": "[DONE]"}]


def _call_chunks(head: Mapping[str, object], index: int, call: ToolCalls) -> list[dict[str, object]]:
    """Each call as OpenAI streams one: its index, id, type and name with empty arguments, then the
    arguments in pieces under the same index."""
    chunks = []
    for position, whole in enumerate(call.calls):
        function = _function(whole)
        opening = {"index": position, **whole, "function": {"name": function["name"], "arguments": ""}}
        chunks.append(_chunk(head, index, {"tool_calls": [opening]}))
        for piece in _pieces(str(function["arguments"]), STREAM_PIECES):
            chunks.append(_chunk(head, index, {"tool_calls": [{"index": position, "function": {"arguments": piece}}]}))
    return chunks


def _chunk(
    head: Mapping[str, object], index: int, delta: Mapping[str, object], finish_reason: str | None = None
) -> dict[str, object]:
    choice = {"index": index, "delta": delta, "finish_reason": finish_reason, "logprobs": None}
    return {**head, "object": "chat.completion.chunk", "choices": [choice]}


def _pieces(text: str, count: int) -> list[str]:
    size = max(1, -(-len(text) // count))
    return [text[start : start + size] for start in range(0, len(text), size)]
