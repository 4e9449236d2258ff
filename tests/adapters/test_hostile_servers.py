"""Every registered adapter, through its real SDK, against servers the local provider never imitates:
one that never answers, one that trickles, one that never ends, one that sends too much, and one
whose reply is the wire's own with a field of the wrong type.

The hostile server (tests/hostile_server.py) forwards each request to the embedded local provider
and delivers the provider's real reply hostilely, so an adapter that read the reply as it came would
succeed. Each hostility runs the whole adapter matrix (every adapter, streamed and not, action call
and compaction call where the adapter has one) at once, so a deadline of one second costs the module
about one second per hostility.
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
from turnstate.local_provider.server import LocalProvider

from ..hostile_server import HostileServer, Hostility, elapsed

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

    def connect(self, base_url: str, **bounds: Any) -> ProviderAdapter:
        settings = RequestSettings("local-policy-1", 2048, stream=self.stream, options=OPTIONS.get(self.adapter_id, {}))
        return ADAPTERS[self.adapter_id].load().connect(Endpoint(base_url, API_KEY, is_local=True, **bounds), settings)

    def request(self, provider: LocalProvider) -> ModelRequest:
        """The request, built through the adapter's own transcript; a compaction compacts one real turn."""
        transcript = ADAPTERS[self.adapter_id].load().transcript
        opening = tuple(transcript.user_items([FRAME]))
        if self.kind == "call":
            return ModelRequest(SYSTEM, opening)
        reply = self.connect(provider.base_url).call(ModelRequest(SYSTEM, opening))
        assert isinstance(reply, ModelResponse), reply
        return ModelRequest(SYSTEM, (*opening, *transcript.reply_items(reply)))

    def send(self, adapter: ProviderAdapter, request: ModelRequest) -> ModelResponse | ProviderError:
        return adapter.call(request) if self.kind == "call" else adapter.compact(request)


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


def run_matrix(hostile, hostility: Hostility, limit: float, **bounds: Any) -> list[tuple[Case, Any, float]]:
    """Every case against the hostile server at once: what each returned and how long its request
    took. A case still running after `limit` seconds is reported as such."""
    server, requests = hostile
    server.hostility = hostility
    adapters = {case: case.connect(server.base_url, **bounds) for case in CASES}
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
