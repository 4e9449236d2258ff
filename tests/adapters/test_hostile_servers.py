"""Every registered adapter, through its real SDK, against servers the local provider never imitates:
one that never answers, one that trickles, one that never ends, one that sends too much, one whose
reply is the wire's own with a field of the wrong type, and one whose compaction cannot be replayed.

The hostile server (tests/hostile_server.py) forwards each request to the embedded local provider
and delivers the provider's real reply hostilely, so an adapter that read the reply as it came would
succeed. Each hostility of time or size runs the whole adapter matrix (every adapter, streamed and
not, action call and compaction call where the adapter has one) at once, so a deadline of one second
costs the module about one second per hostility.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

import pytest

from turnstate.adapters.contract import (
    Endpoint,
    ErrorKind,
    ModelRequest,
    ModelResponse,
    ProviderAdapter,
    ProviderError,
    RequestSettings,
)
from turnstate.adapters.registry import ADAPTERS
from turnstate.environments.beacon_grid import BeaconGrid
from turnstate.local_provider.server import LocalProvider
from turnstate.session.scaffold import action_tools

from ..hostile_server import DELETE, HostileServer, Hostility, Retype, each_object, elapsed

API_KEY = "test-key"
SYSTEM = "You play beacon_grid. Answer with one line ACTION: <action>."
FRAME = "LEVEL 1/1 | STATE NOT_FINISHED\nBEACON (level 1): dark\n#####\n#@.A#\n#####\nSTANDING ON: floor"
DEADLINE = 1.0
MARGIN = 2.0  # generous: the whole matrix shares two cores
SMALL_CAP = 32 * 1024
# Each adapter's richest reply (reasoning, signatures, encrypted state), so every field it reads is there.
OPTIONS: Mapping[str, Mapping[str, Any]] = {
    "openai.responses.v1": {
        "store": False,
        "include": ["reasoning.encrypted_content"],
        "reasoning": {"summary": "auto", "context": "auto"},
    },
    "xai.responses.v1": {"store": False, "include": ["reasoning.encrypted_content"]},
    "anthropic.messages.v1": {"thinking": {"type": "enabled", "budget_tokens": 1024}},
    "google.interactions.v1": {"generation_config": {"thinking_summaries": "auto"}},
    "open_source.chat_completions.v1": {"reasoning_field": "both"},
}


@dataclass(frozen=True)
class Case:
    """One request of the matrix: an adapter, streamed or not, asked to act or to compact."""

    adapter_id: str
    stream: bool
    kind: Literal["call", "compact"]

    def __str__(self) -> str:
        return f"{self.adapter_id}-{'stream' if self.stream else 'plain'}-{self.kind}"

    def connect(self, base_url: str, options: Mapping[str, Any] | None = None, **bounds: Any) -> ProviderAdapter:
        """The adapter on `base_url`, with its richest options unless `options` are given."""
        options = OPTIONS.get(self.adapter_id, {}) if options is None else options
        settings = RequestSettings("local-policy-1", 2048, stream=self.stream, options=options)
        return ADAPTERS[self.adapter_id].load().connect(Endpoint(base_url, API_KEY, is_local=True, **bounds), settings)

    def request(self, provider: LocalProvider) -> ModelRequest:
        """The request, built through the adapter's own transcript; a compaction compacts one real turn."""
        adapter = ADAPTERS[self.adapter_id].load()
        transcript = adapter.transcript
        opening = tuple(transcript.user_items([FRAME]))
        if self.kind == "call":  # an adapter that acts through tools is offered the game's, and calls one
            return ModelRequest(SYSTEM, opening, tools=ACTION_TOOLS if adapter.acts_through_tools else ())
        reply = self.connect(provider.base_url).call(ModelRequest(SYSTEM, opening))
        assert isinstance(reply, ModelResponse), reply
        return ModelRequest(SYSTEM, (*opening, *transcript.reply_items(reply)))

    def send(self, adapter: ProviderAdapter, request: ModelRequest) -> ModelResponse | ProviderError:
        return adapter.call(request) if self.kind == "call" else adapter.compact(request)


ACTION_TOOLS = action_tools(BeaconGrid.actions)

CASES = [Case(adapter_id, stream, "call") for adapter_id in ADAPTERS for stream in (False, True)] + [
    Case(adapter_id, stream, "compact")
    for adapter_id, descriptor in ADAPTERS.items()
    if descriptor.load().native_compaction == "call"
    for stream in (False, True)
]


@pytest.fixture(scope="module")
def hostile() -> Iterator[tuple[HostileServer, dict[Case, ModelRequest]]]:
    """One hostile server in front of one local provider for the module, and each case's request;
    each test sets the server's hostility."""
    with LocalProvider() as provider, HostileServer(provider.base_url, "stall") as server:
        yield server, {case: case.request(provider) for case in CASES}


_CONNECTED: dict[tuple[Any, ...], ProviderAdapter] = {}


def connected(case: Case, base_url: str, *, inline: bool = False, **bounds: Any) -> ProviderAdapter:
    """The case's adapter on `base_url` (with OpenAI's inline compaction on, if `inline`), connected
    once for the module: an SDK client takes some 70 ms to build, and the matrix uses hundreds."""
    key = (case, base_url, inline, tuple(sorted(bounds.items())))
    if key not in _CONNECTED:
        _CONNECTED[key] = case.connect(base_url, INLINE if inline else None, **bounds)
    return _CONNECTED[key]


def run_matrix(hostile, hostility: Hostility, limit: float, **bounds: Any) -> list[tuple[Case, Any, float]]:
    """Every case against the hostile server at once: what each returned and how long its request
    took. A case still running after `limit` seconds is reported as such."""
    server, requests = hostile
    server.hostility = hostility
    adapters = {case: connected(case, server.base_url, **bounds) for case in CASES}
    with ThreadPoolExecutor(len(CASES)) as pool:
        futures = {case: pool.submit(elapsed, partial(case.send, adapters[case], requests[case])) for case in CASES}
        wait(futures.values(), timeout=limit)
        outcomes = [
            (case, *future.result()) if future.done() else (case, "still running", limit)
            for case, future in futures.items()
        ]
        server.release()  # a case still running (a bug) ends with the hostile reply
    return outcomes


def failures(outcomes: list[tuple[Case, Any, float]], expected: Callable[[Any], bool], limit: float) -> list[str]:
    return [
        f"{case}: {seconds:.2f}s {getattr(outcome, 'diagnostics', outcome)}"
        for case, outcome, seconds in outcomes
        if seconds >= limit or not (isinstance(outcome, ProviderError) and expected(outcome))
    ]


def is_deadline(outcome: ProviderError) -> bool:
    return outcome.kind is ErrorKind.TRANSIENT and outcome.diagnostics == {"error_class": "DeadlineExceeded"}


def is_too_large(outcome: ProviderError) -> bool:
    return outcome.kind is ErrorKind.TRANSIENT and outcome.diagnostics == {
        "error_class": "MalformedReply",
        "cause": "ReplyTooLarge",
    }


@pytest.mark.parametrize("hostility", ["stall", "trickle"])
def test_a_server_that_stalls_or_trickles_ends_every_request_at_its_deadline(hostile, hostility):
    limit = DEADLINE + MARGIN
    outcomes = run_matrix(hostile, hostility, limit, timeout_seconds=DEADLINE)
    assert not failures(outcomes, is_deadline, limit), "\n".join(failures(outcomes, is_deadline, limit))


def test_an_endless_reply_ends_at_the_deadline_or_the_reply_cap_whichever_comes_first(hostile):
    limit = DEADLINE + MARGIN

    def bounded(outcome: ProviderError) -> bool:
        return is_deadline(outcome) or is_too_large(outcome)

    outcomes = run_matrix(hostile, "endless", limit, timeout_seconds=DEADLINE)
    assert not failures(outcomes, bounded, limit), "\n".join(failures(outcomes, bounded, limit))


@pytest.mark.parametrize("hostility", ["endless", "oversized"])
def test_a_reply_past_the_cap_is_a_malformed_reply_long_before_the_deadline(hostile, hostility):
    limit = 10.0  # the deadline is 30 s: only the cap can end these in time
    outcomes = run_matrix(hostile, hostility, limit, timeout_seconds=30.0, max_reply_bytes=SMALL_CAP)
    assert not failures(outcomes, is_too_large, limit), "\n".join(failures(outcomes, is_too_large, limit))


def test_a_reply_compressed_though_no_coding_was_accepted_is_a_malformed_reply(hostile):
    def encoded(outcome: ProviderError) -> bool:
        return outcome.diagnostics == {"error_class": "MalformedReply", "cause": "EncodedReply"}

    outcomes = run_matrix(hostile, "gzip", 10.0, timeout_seconds=10.0)
    assert not failures(outcomes, encoded, 10.0), "\n".join(failures(outcomes, encoded, 10.0))


# --- replies with a field of the wrong type -------------------------------------------------------

WRONG: Mapping[str, tuple[Any, ...]] = {
    "text": (7, ["x"], {"x": "y"}),
    "list": ("x", {"x": 1}),
    "object": ("x", [1]),
    "count": ("twelve", -1, 2.5, True),
    "index": ("0", 2.5),
}
"""Wrong values for each kind of field: a field of a kind is tried with one of them, in turn."""

CHAT_PLAIN = [
    (("id",), "text"),
    (("choices",), "list"),
    (("choices", 0), "object"),
    (("choices", 0, "message"), "object"),
    (("choices", 0, "message", "tool_calls"), "list"),
    (("choices", 0, "finish_reason"), "text"),
    (("usage",), "object"),
    (("usage", "prompt_tokens"), "count"),
    (("usage", "completion_tokens"), "count"),
    (("usage", "prompt_cache_hit_tokens"), "count"),
    (("usage", "prompt_tokens_details"), "object"),
    (("usage", "prompt_tokens_details", "cached_tokens"), "count"),
    (("usage", "prompt_tokens_details", "cache_write_tokens"), "count"),
    (("usage", "completion_tokens_details", "reasoning_tokens"), "count"),
]
CHAT_STREAM = [
    (("id",), "text"),
    (("choices",), "list"),
    (("choices", "*", "delta"), "object"),
    (("choices", "*", "delta", "content"), "text"),
    (("choices", "*", "delta", "tool_calls"), "list"),
    (("choices", "*", "finish_reason"), "text"),
    (("usage",), "object"),
    (("usage", "prompt_tokens"), "count"),
    (("usage", "completion_tokens"), "count"),
    (("usage", "prompt_tokens_details", "cached_tokens"), "count"),
]
CALL = ("choices", 0, "message", "tool_calls", 0)
PIECE = ("choices", "*", "delta", "tool_calls", "*")
DEEPSEEK_PLAIN = [
    ((*CALL,), "object"),
    ((*CALL, "id"), "text"),
    ((*CALL, "type"), "text"),
    ((*CALL, "function"), "object"),
    ((*CALL, "function", "name"), "text"),
    ((*CALL, "function", "arguments"), "text"),
    (("choices", 0, "message", "reasoning_content"), "text"),
]
DEEPSEEK_STREAM = [
    ((*PIECE, "index"), "index"),
    ((*PIECE, "id"), "text"),
    ((*PIECE, "function"), "object"),
    ((*PIECE, "function", "name"), "text"),
    ((*PIECE, "function", "arguments"), "text"),
    (("choices", "*", "delta", "reasoning_content"), "text"),
]
REASONING_PLAIN = [(("choices", 0, "message", alias), "text") for alias in ("reasoning_content", "reasoning")]
REASONING_STREAM = [(("choices", "*", "delta", alias), "text") for alias in ("reasoning_content", "reasoning")]
RESPONSE = [
    (("id",), "text"),
    (("status",), "text"),
    (("output",), "list"),
    (("output", "*"), "object"),
    (("output", "*", "type"), "text"),
    (("output", "*", "role"), "text"),
    (("output", "*", "content"), "list"),
    (("output", "*", "content", "*"), "object"),
    (("output", "*", "content", "*", "type"), "text"),
    (("output", "*", "content", "*", "text"), "text"),
    (("output", "*", "summary"), "list"),
    (("output", "*", "summary", "*", "text"), "text"),
    (("output", "*", "encrypted_content"), "text"),
    (("incomplete_details",), "object"),
    (("error",), "object"),
    (("usage",), "object"),
    (("usage", "input_tokens"), "count"),
    (("usage", "output_tokens"), "count"),
    (("usage", "input_tokens_details"), "object"),
    (("usage", "input_tokens_details", "cached_tokens"), "count"),
    (("usage", "input_tokens_details", "cache_write_tokens"), "count"),
    (("usage", "output_tokens_details", "reasoning_tokens"), "count"),
]
XAI_RESPONSE = [field for field in RESPONSE if "summary" not in field[0][2:]]  # xAI reasons without summaries
MESSAGES_PLAIN = [
    (("id",), "text"),
    (("stop_reason",), "text"),
    (("content",), "list"),
    (("content", "*"), "object"),
    (("content", "*", "type"), "text"),
    (("content", "*", "text"), "text"),
    (("content", "*", "thinking"), "text"),
    (("content", "*", "signature"), "text"),
    (("usage",), "object"),
    (("usage", "input_tokens"), "count"),
    (("usage", "output_tokens"), "count"),
    (("usage", "cache_read_input_tokens"), "count"),
    (("usage", "cache_creation_input_tokens"), "count"),
    (("usage", "iterations"), "list"),
]
MESSAGES_STREAM = [
    (("type",), "text"),
    (("message",), "object"),
    (("message", "id"), "text"),
    (("message", "usage", "input_tokens"), "count"),
    (("usage", "output_tokens"), "count"),
    (("content_block",), "object"),
    (("content_block", "type"), "text"),
    (("delta",), "object"),
    (("delta", "text"), "text"),
    (("delta", "thinking"), "text"),
    (("delta", "signature"), "text"),
    (("delta", "stop_reason"), "text"),
]
INTERACTIONS_PLAIN = [
    (("id",), "text"),
    (("status",), "text"),
    (("steps",), "list"),
    (("steps", "*"), "object"),
    (("steps", "*", "type"), "text"),
    (("steps", "*", "content"), "list"),
    (("steps", "*", "content", "*", "text"), "text"),
    (("steps", "*", "summary"), "list"),
    (("steps", "*", "summary", "*", "text"), "text"),
    (("steps", "*", "signature"), "text"),
    (("usage",), "object"),
    (("usage", "total_input_tokens"), "count"),
    (("usage", "total_output_tokens"), "count"),
    (("usage", "total_thought_tokens"), "count"),
    (("usage", "total_cached_tokens"), "count"),
]
INTERACTIONS_STREAM = [
    (("event_type",), "text"),
    (("index",), "index"),
    (("step", "type"), "text"),
    (("step", "content"), "list"),
    (("delta", "type"), "text"),
    (("delta", "text"), "text"),
    (("delta", "signature"), "text"),
    (("delta", "content"), "object"),
    (("delta", "content", "text"), "text"),
    (("interaction", "id"), "text"),
    (("interaction", "status"), "text"),
    (("interaction", "usage", "total_input_tokens"), "count"),
    (("interaction", "usage", "total_output_tokens"), "count"),
]
FIELDS: Mapping[tuple[str, bool], list[tuple[tuple[str | int, ...], str]]] = {
    ("openai.chat_completions.v1", False): CHAT_PLAIN,
    ("openai.chat_completions.v1", True): CHAT_STREAM,
    ("deepseek.chat_completions.v1", False): CHAT_PLAIN + DEEPSEEK_PLAIN,
    ("deepseek.chat_completions.v1", True): CHAT_STREAM + DEEPSEEK_STREAM,
    ("open_source.chat_completions.v1", False): CHAT_PLAIN + REASONING_PLAIN,
    ("open_source.chat_completions.v1", True): CHAT_STREAM + REASONING_STREAM,
    ("openai.responses.v1", False): RESPONSE,
    ("openai.responses.v1", True): [(("type",), "text"), *[(("response", *path), kind) for path, kind in RESPONSE]],
    ("xai.responses.v1", False): XAI_RESPONSE,
    ("xai.responses.v1", True): [(("type",), "text"), *[(("response", *path), kind) for path, kind in XAI_RESPONSE]],
    ("anthropic.messages.v1", False): MESSAGES_PLAIN,
    ("anthropic.messages.v1", True): MESSAGES_STREAM,
    ("google.interactions.v1", False): INTERACTIONS_PLAIN,
    ("google.interactions.v1", True): INTERACTIONS_STREAM,
}


def converted_by_the_sdk(adapter_id: str, value: Any) -> bool:
    """Wrong values an SDK turns right before any shape sees them: the anthropic SDK builds a bool
    count as 0 or 1, and google-genai validates laxly (a bool or a digit string is a number)."""
    if adapter_id == "anthropic.messages.v1":
        return value is True
    return adapter_id == "google.interactions.v1" and (value is True or value == "0")


def wrong_types() -> list[Any]:
    """Every field each adapter reads, each with one wrong value of its kind in turn (so every wrong
    value of a kind is tried), and the issue's case, a Chat message's content as a number, a list and
    an object, on every Chat adapter."""
    cases = []
    for (adapter_id, stream), fields in FIELDS.items():
        turn = dict.fromkeys(WRONG, 0)
        for path, kind in fields:
            values = [value for value in WRONG[kind] if not converted_by_the_sdk(adapter_id, value)]
            value = values[turn[kind] % len(values)]
            turn[kind] += 1
            cases.append(pytest.param(adapter_id, stream, path, value, id=f"{adapter_id}-{stream}-{path}={value!r}"))
    for adapter_id in ("openai.chat_completions.v1", "deepseek.chat_completions.v1", "open_source.chat_completions.v1"):
        for value in WRONG["text"]:
            path = ("choices", 0, "message", "content")
            cases.append(pytest.param(adapter_id, False, path, value, id=f"{adapter_id}-False-{path}={value!r}"))
    return cases


@pytest.mark.parametrize(("adapter_id", "stream", "path", "value"), wrong_types())
def test_a_reply_field_of_the_wrong_type_is_a_malformed_reply_with_the_usage_seen(
    hostile, adapter_id, stream, path, value
):
    server, requests = hostile
    case = Case(adapter_id, stream, "call")
    server.hostility = retype = Retype(path, value)
    outcome = connected(case, server.base_url, timeout_seconds=10.0).call(requests[case])
    assert retype.applied, f"{retype} is in no reply: the case tests nothing"
    assert isinstance(outcome, ProviderError), f"{retype} was read as {outcome}"
    assert outcome.kind is ErrorKind.TRANSIENT and outcome.diagnostics["error_class"] == "MalformedReply"
    if not stream and "usage" not in path:  # a whole reply's usage is read before anything else
        assert outcome.usage.input_tokens > 0


# --- compaction items that cannot be replayed ----------------------------------------------------


class OnCompactions:
    """A rewrite that sets `field` to `value` (or deletes it: DELETE) on every compaction item or
    block of a reply, wherever it is (an output item, a content block, a streamed block's start)."""

    def __init__(self, field: str, value: Any) -> None:
        self.field, self.value, self.applied = field, value, 0

    def __call__(self, data: Any) -> Any:
        return each_object(data, self._retype)

    def _retype(self, block: dict[str, Any]) -> None:
        if block.get("type") == "compaction" and ("content" in block or "encrypted_content" in block):
            Retype((self.field,), self.value)(block)
            self.applied += 1

    def __repr__(self) -> str:
        return repr(Retype(("compaction", self.field), self.value))


INLINE = {**OPTIONS["openai.responses.v1"], "context_management": [{"type": "compaction", "compact_threshold": 20}]}
UNREPLAYABLE = [None, DELETE, 7, ""]


def compaction_cases() -> list[Any]:
    """xAI's and OpenAI's /responses/compact, OpenAI's inline compaction in an action reply, and
    Anthropic's compaction call, each with a compaction whose opaque state cannot be replayed."""
    kinds = [
        ("xai.responses.v1", "compact", "encrypted_content", UNREPLAYABLE),
        ("openai.responses.v1", "inline", "encrypted_content", UNREPLAYABLE),
        ("anthropic.messages.v1", "compact", "content", UNREPLAYABLE),
        ("anthropic.messages.v1", "compact", "signature", [None, DELETE, 7]),
    ]
    return [
        pytest.param(
            adapter_id, stream, kind, field, value, id=f"{adapter_id}-{stream}-{kind}-{Retype((field,), value)}"
        )
        for adapter_id, kind, field, values in kinds
        for stream in (False, True)
        for value in values
    ]


@pytest.mark.parametrize(("adapter_id", "stream", "kind", "field", "value"), compaction_cases())
def test_a_compaction_that_cannot_be_replayed_is_a_malformed_reply_never_a_compaction(
    hostile, adapter_id, stream, kind, field, value
):
    server, requests = hostile
    case = Case(adapter_id, stream, "call" if kind == "inline" else "compact")
    request = requests[case]
    adapter = connected(case, server.base_url, inline=kind == "inline", timeout_seconds=10.0)
    server.hostility = lambda data: data
    honest = case.send(adapter, request)
    server.hostility = rewrite = OnCompactions(field, value)
    outcome = case.send(adapter, request)
    transcript = ADAPTERS[adapter_id].load().transcript
    assert (
        isinstance(honest, ModelResponse) and transcript.latest_compaction(transcript.reply_items(honest)) is not None
    )
    assert rewrite.applied, f"{rewrite} is in no reply: the case tests nothing"
    assert isinstance(outcome, ProviderError), f"{rewrite} was accepted as {outcome}"
    assert outcome.kind is ErrorKind.TRANSIENT and outcome.diagnostics["error_class"] == "MalformedReply"
    assert outcome.usage.input_tokens > 0
