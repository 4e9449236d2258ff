"""The adapter contract, checked for every registered adapter through its real SDK over real HTTP.

Registering an adapter in turnstate.adapters.registry is what enrolls it here. Requests are built only
through the adapter's own transcript and outcomes are read only through the contract's shapes, so no
test here knows an adapter's native items; what one adapter alone does is tested in its own module.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from turnstate.adapters.contract import (
    DIAGNOSTIC_KEYS,
    Endpoint,
    ErrorKind,
    ModelRequest,
    ModelResponse,
    ProviderAdapter,
    ProviderError,
    RequestBounds,
    RequestSettings,
    ToolResult,
    ToolSpec,
)
from turnstate.adapters.registry import ADAPTERS, AdapterDescriptor
from turnstate.durable.redaction import OPAQUE_KEYS, REDACTED, Redactor
from turnstate.durable.writer import ArtifactWriter
from turnstate.local_provider.exchange import MALFORMED_REPLY
from turnstate.local_provider.faults import Fault
from turnstate.local_provider.routes import ROUTES
from turnstate.local_provider.server import LocalProvider
from turnstate.strategies import STRATEGIES

REPO = Path(__file__).resolve().parents[2]
API_KEY = "sk-test-contract-key"  # long enough to be redacted by value (redaction.MIN_SECRET_CHARS)
SYSTEM = "You play beacon_grid. Answer with one ACTION line."
FRAME = "LEVEL 1/1 | STATE NOT_FINISHED\nBEACON (level 1): dark\n#####\n#@.A#\n#####\nSTANDING ON: floor"
TRANSCRIPT_METHODS = ("user_items", "reply_items", "tool_result_items", "estimate_tokens", "readable")


@pytest.fixture(params=list(ADAPTERS.values()), ids=list(ADAPTERS))
def descriptor(request) -> AdapterDescriptor:
    return request.param


@pytest.fixture(params=[False, True], ids=["plain", "stream"])
def stream(request) -> bool:
    return request.param


# The options an adapter needs to replay a reply the way its server requires (the open-weight adapter
# sends its reasoning back only under the alias the server's chat template reads).
REPLAY_OPTIONS: Mapping[str, Mapping[str, Any]] = {"open_source.chat_completions.v1": {"reasoning_field": "both"}}


def connect(descriptor: AdapterDescriptor, base_url: str, *, stream: bool) -> ProviderAdapter:
    options = REPLAY_OPTIONS.get(descriptor.adapter_id, {})
    settings = RequestSettings(model="local-policy-1", max_output_tokens=64, stream=stream, options=options)
    endpoint = Endpoint(base_url, API_KEY, is_local=True, timeout_seconds=10.0)
    return descriptor.load().connect(endpoint, settings)


SETTINGS = RequestSettings(model="local-policy-1", max_output_tokens=64)


def request_for(descriptor: AdapterDescriptor, text: str = FRAME) -> ModelRequest:
    """A one-turn request in the adapter's own items: the contract never spells an item out."""
    return ModelRequest(system=SYSTEM, items=tuple(descriptor.load().transcript.user_items([text])))


def keys_in(value: Any) -> Iterator[str]:
    """Every dict key at any depth of a JSON-like value."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield key
            yield from keys_in(item)
    elif isinstance(value, Sequence) and not isinstance(value, str):
        for item in value:
            yield from keys_in(item)


def message_texts(body: Any) -> Iterator[str]:
    """The human-readable `message` texts of a provider's error body, at any depth."""
    if isinstance(body, Mapping):
        for key, item in body.items():
            if key == "message" and isinstance(item, str):
                yield item
            else:
                yield from message_texts(item)


def rate_limit_messages() -> set[str]:
    """Every wording of a 429 among the local provider's wires: text that must never reach diagnostics."""
    return {message for route in ROUTES.values() for message in message_texts(route.wire.error_reply("rate_limit")[1])}


def leaky_reply(system: str, messages: Sequence[Mapping[str, object]]) -> str:
    """A model that repeats the API key, as a model that saw it in its prompt could."""
    return f"ACTION: ACTION4 (my key is {API_KEY})"


def test_each_registered_adapter_loads_from_the_file_its_descriptor_names(descriptor):
    adapter_class = descriptor.load()
    assert ADAPTERS[descriptor.adapter_id] is descriptor
    assert (REPO / descriptor.implementation_path).is_file()
    assert Path(inspect.getfile(adapter_class)).as_posix().endswith("/" + descriptor.implementation_path)
    assert f"{adapter_class.__module__}:{adapter_class.__qualname__}" == descriptor.implementation
    assert callable(adapter_class.connect)
    for method in TRANSCRIPT_METHODS:
        assert callable(getattr(adapter_class.transcript, method, None)), method


def test_each_registered_adapter_implements_only_known_strategies(descriptor):
    assert descriptor.strategies
    assert set(descriptor.strategies) <= set(STRATEGIES)


def test_each_registered_adapter_keeps_its_providers_limits_and_a_profile_within_them_passes(descriptor):
    """A provider's limits across a profile's sections live with its adapter (check_limits), so adding
    an adapter edits no harness file; the profile tests hold each refusal."""
    within = RequestBounds((("request.max_output_tokens", 1024),), 16_000, {})
    assert descriptor.load().check_limits(within) == []
    if descriptor.api_surface == "responses":  # the Responses API's floor of 16 output tokens
        (problem,) = descriptor.load().check_limits(RequestBounds((("request.max_output_tokens", 8),), 16_000))
        assert problem.path == "request.max_output_tokens" and "floor of 16" in problem.problem


def test_a_reply_is_normalized_into_text_usage_a_stop_reason_and_replayable_items(descriptor, stream):
    transcript = descriptor.load().transcript
    request = request_for(descriptor, FRAME)
    with LocalProvider() as provider:
        response = connect(descriptor, provider.base_url, stream=stream).call(request)
    assert isinstance(response, ModelResponse)
    assert response.text
    assert response.usage.input_tokens > 0 and response.usage.output_tokens > 0
    assert response.stop_reason
    reply_items = transcript.reply_items(response)
    assert reply_items
    json.dumps(reply_items, allow_nan=False)  # raises unless checkpointable, as RuntimeState requires
    readable = transcript.readable([*request.items, *reply_items])
    assert readable
    for entry in readable:
        assert set(entry) == {"role", "content"}
        assert all(isinstance(value, str) for value in entry.values())
    assert any(FRAME in entry["content"] for entry in transcript.readable(request.items))
    assert any(response.text in entry["content"] for entry in transcript.readable(reply_items))


@pytest.mark.parametrize(
    ("fault", "kind"),
    [
        ("rate_limit", ErrorKind.TRANSIENT),
        ("server_error", ErrorKind.TRANSIENT),
        ("overloaded", ErrorKind.TRANSIENT),
        ("stream_cut", ErrorKind.TRANSIENT),
        ("refusal", ErrorKind.REFUSAL),
        ("truncation", ErrorKind.TRUNCATED),
    ],
)
def test_each_fault_is_classified_into_its_error_kind_and_the_next_call_succeeds(descriptor, stream, fault, kind):
    with LocalProvider(faults=[Fault(at=1, kind=fault)]) as provider:
        adapter = connect(descriptor, provider.base_url, stream=stream)
        failed = adapter.call(request_for(descriptor))
        recovered = adapter.call(request_for(descriptor))
    assert isinstance(failed, ProviderError)
    assert failed.kind is kind
    assert isinstance(recovered, ModelResponse)


@pytest.mark.parametrize("fault", ["html_page", "garbled", "empty_choices", "null_message"])
def test_a_200_the_sdk_cannot_read_is_a_retryable_error_never_an_exception(descriptor, stream, fault):
    with LocalProvider(faults=[Fault(at=1, kind=fault)]) as provider:
        adapter = connect(descriptor, provider.base_url, stream=stream)
        broken = adapter.call(request_for(descriptor))  # must return, whatever the body was
        recovered = adapter.call(request_for(descriptor))
    assert isinstance(broken, ProviderError)
    assert broken.kind is ErrorKind.TRANSIENT
    assert set(broken.diagnostics) <= DIAGNOSTIC_KEYS
    assert isinstance(recovered, ModelResponse)


def test_a_broken_reply_still_reports_the_usage_it_carried(descriptor):
    with LocalProvider(faults=[Fault(at=1, kind="empty_choices")]) as provider:
        broken = connect(descriptor, provider.base_url, stream=False).call(request_for(descriptor))
    assert isinstance(broken, ProviderError)
    assert broken.usage.input_tokens > 0 and broken.usage.output_tokens > 0


def test_a_rate_limit_reports_how_long_the_provider_asked_to_wait(descriptor, stream):
    with LocalProvider(faults=[Fault(at=1, kind="rate_limit", retry_after_seconds=2.5)]) as provider:
        refused = connect(descriptor, provider.base_url, stream=stream).call(request_for(descriptor))
    assert isinstance(refused, ProviderError) and refused.kind is ErrorKind.TRANSIENT
    assert refused.retry_after_seconds == pytest.approx(2.5, abs=0.1)


def test_an_empty_or_malformed_reply_is_a_reply_for_the_parser_to_judge(descriptor, stream):
    with LocalProvider(faults=[Fault(at=1, kind="empty"), Fault(at=2, kind="malformed")]) as provider:
        adapter = connect(descriptor, provider.base_url, stream=stream)
        empty, malformed = adapter.call(request_for(descriptor)), adapter.call(request_for(descriptor))
    assert isinstance(empty, ModelResponse) and empty.text == ""
    assert isinstance(malformed, ModelResponse) and malformed.text == MALFORMED_REPLY


def test_a_request_beyond_the_context_window_is_a_context_overflow(descriptor, stream):
    with LocalProvider(context_window=256) as provider:
        outcome = connect(descriptor, provider.base_url, stream=stream).call(request_for(descriptor, "x" * 2000))
    assert isinstance(outcome, ProviderError)
    assert outcome.kind is ErrorKind.CONTEXT_OVERFLOW


def test_a_refusal_still_reports_the_usage_it_cost(descriptor, stream):
    with LocalProvider(faults=[Fault(at=1, kind="refusal")]) as provider:
        failed = connect(descriptor, provider.base_url, stream=stream).call(request_for(descriptor))
    assert isinstance(failed, ProviderError) and failed.kind is ErrorKind.REFUSAL
    assert failed.usage.input_tokens > 0


def test_a_rate_limit_carries_allowlisted_diagnostics_and_never_the_providers_message(descriptor, stream):
    worded = rate_limit_messages()
    assert worded  # else the message check below could not fail
    with LocalProvider(faults=[Fault(at=1, kind="rate_limit")]) as provider:
        failed = connect(descriptor, provider.base_url, stream=stream).call(request_for(descriptor))
    assert isinstance(failed, ProviderError)
    assert set(failed.diagnostics) <= DIAGNOSTIC_KEYS
    assert failed.diagnostics["status"] == 429
    assert failed.diagnostics["error_class"]
    for value in failed.diagnostics.values():
        assert not any(message in str(value) for message in worded), value


def test_a_refused_connection_is_transient(descriptor, stream):
    with LocalProvider() as provider:
        adapter = connect(descriptor, provider.base_url, stream=stream)
        base_url = provider.base_url
    outcome = adapter.call(request_for(descriptor))  # the provider has stopped: nothing listens
    assert isinstance(outcome, ProviderError)
    assert outcome.kind is ErrorKind.TRANSIENT
    assert outcome.diagnostics["detail"].startswith(f"connection refused at {base_url}/")


def test_a_host_that_does_not_resolve_is_named_with_its_url(descriptor):
    url = "http://no-such-host.invalid"  # .invalid never resolves (RFC 2606)
    adapter = descriptor.load().connect(Endpoint(url, API_KEY, is_local=True, timeout_seconds=10.0), SETTINGS)
    outcome = adapter.call(request_for(descriptor))
    assert isinstance(outcome, ProviderError) and outcome.kind is ErrorKind.TRANSIENT
    assert outcome.diagnostics["detail"].startswith(f"name not found at {url}/")


# The SDKs whose calls refuse an argument they do not know (the openai SDK sends any keyword it is given).
REFUSING_SDKS = [ADAPTERS["anthropic.messages.v1"], ADAPTERS["google.interactions.v1"]]


@pytest.mark.parametrize("descriptor", REFUSING_SDKS, ids=[descriptor.adapter_id for descriptor in REFUSING_SDKS])
def test_an_argument_the_sdk_call_refuses_is_fatal_naming_it_before_anything_is_sent(descriptor):
    """A request field the adapter cannot send (validation refuses it: here it slipped past) is our bug
    or the profile's, never the network's: no retry can help."""
    settings = RequestSettings(model="local-policy-1", max_output_tokens=64)
    with LocalProvider() as provider:
        adapter = descriptor.load().connect(Endpoint(provider.base_url, API_KEY, is_local=True), settings)
        real = adapter.build_request
        adapter.build_request = lambda request: {**real(request), "not_an_argument": 1}  # type: ignore[method-assign]
        outcome = adapter.call(request_for(descriptor))
        assert provider.request_log == []  # nothing was sent
    assert isinstance(outcome, ProviderError) and outcome.kind is ErrorKind.FATAL
    assert outcome.diagnostics["detail"] == (
        "the SDK takes no 'not_an_argument' argument: a request field this adapter cannot send"
    )


def test_an_unknown_endpoint_is_fatal(descriptor, stream):
    with LocalProvider() as provider:
        outcome = connect(descriptor, provider.base_url + "/nowhere", stream=stream).call(request_for(descriptor))
    assert isinstance(outcome, ProviderError)
    assert outcome.kind is ErrorKind.FATAL
    assert outcome.diagnostics["status"] == 404


def test_reply_items_reach_artifacts_without_the_api_key_or_opaque_state(descriptor, stream, tmp_path):
    transcript = descriptor.load().transcript
    with LocalProvider(reply=leaky_reply) as provider:
        response = connect(descriptor, provider.base_url, stream=stream).call(request_for(descriptor))
    assert isinstance(response, ModelResponse)
    reply_items = transcript.reply_items(response)
    assert API_KEY in json.dumps(reply_items)  # the model leaked it, so the writer has something to redact
    writer = ArtifactWriter(tmp_path, "run-1", Redactor(secrets=(API_KEY,)))
    written = writer.write_json("reply.json", {"items": reply_items}).read_text(encoding="utf-8")
    writer.close()
    assert API_KEY not in written and REDACTED in written
    assert not OPAQUE_KEYS & set(keys_in(json.loads(written)))
    assert not OPAQUE_KEYS & set(keys_in(transcript.readable(reply_items)))


TOOLS = (
    ToolSpec("look", "Look at a cell of the grid.", {"type": "object", "properties": {"x": {"type": "integer"}}}),
    ToolSpec("note", "Keep a note.", {"type": "object", "properties": {"text": {"type": "string"}}}),
)
# The local model's convention for tool tests (local_provider/policy.py: asked_calls).
ASK_TWO_CALLS = 'call look with {"x": 3} and call note with {"text": "beacon A"}'


def asked_for_calls(descriptor: AdapterDescriptor, adapter: ProviderAdapter) -> tuple[ModelRequest, ModelResponse]:
    request = replace(request_for(descriptor, ASK_TWO_CALLS), tools=TOOLS)
    reply = adapter.call(request)
    assert isinstance(reply, ModelResponse), reply
    return request, reply


def test_tool_calls_are_read_in_order_and_their_results_let_the_conversation_go_on(descriptor, stream):
    transcript = descriptor.load().transcript
    with LocalProvider() as provider:
        adapter = connect(descriptor, provider.base_url, stream=stream)
        request, reply = asked_for_calls(descriptor, adapter)
        calls = reply.tool_calls
        assert [(call.name, dict(call.arguments)) for call in calls] == [
            ("look", {"x": 3}),
            ("note", {"text": "beacon A"}),
        ]
        assert len({call.id for call in calls}) == 2 and all(call.id for call in calls)
        results = [
            ToolResult(calls[0].id, "look", "a wall"),
            ToolResult(calls[1].id, "note", "disk full", is_error=True),
        ]
        answered = (*request.items, *transcript.reply_items(reply), *transcript.tool_result_items(results))
        followed = adapter.call(replace(request, items=(*answered, *transcript.user_items([FRAME]))))
    assert isinstance(followed, ModelResponse), followed
    readable = " ".join(entry["content"] for entry in transcript.readable(answered))
    assert "a wall" in readable and "disk full" in readable


def test_an_unanswered_call_or_an_orphan_result_is_refused_by_the_provider_and_fatal(descriptor, stream):
    transcript = descriptor.load().transcript
    with LocalProvider() as provider:
        adapter = connect(descriptor, provider.base_url, stream=stream)
        request, reply = asked_for_calls(descriptor, adapter)
        unanswered = (*request.items, *transcript.reply_items(reply), *transcript.user_items([FRAME]))
        orphan = (*request.items, *transcript.tool_result_items([ToolResult("call_nowhere", "look", "a wall")]))
        outcomes = [adapter.call(replace(request, items=items)) for items in (unanswered, orphan)]
    for outcome in outcomes:
        assert isinstance(outcome, ProviderError) and outcome.kind is ErrorKind.FATAL, outcome
