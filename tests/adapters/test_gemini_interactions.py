"""google.interactions.v1 through the real google-genai SDK against the local Interactions wire.

What every adapter must do is checked by the contract suite (test_contract.py); this module checks
what is the Interactions surface's own: every generated step replayed verbatim (signatures
included), a stream rebuilt into the same steps, how an incomplete interaction fails, and the
options' rules.
"""

from __future__ import annotations

import pytest
from google.genai._interactions_continuation import ContinuationTimeoutError

from turnstate.adapters.contract import Endpoint, ErrorKind, ModelRequest, ModelResponse, ProviderError, RequestSettings
from turnstate.adapters.gemini_interactions import InteractionsAdapter
from turnstate.local_provider.faults import Fault
from turnstate.local_provider.server import LocalProvider

from ..local_provider.test_messages import DARK, FORGOTTEN, REMEMBERED, SHOWN

SYSTEM = "You play beacon_grid. Answer with one line ACTION: <action>."
ITEMS = InteractionsAdapter.transcript
SUMMARIES = {"generation_config": {"thinking_summaries": "auto"}}


def connect(provider: LocalProvider, *, stream: bool = False) -> InteractionsAdapter:
    settings = RequestSettings("gemini-3.8-flash", 256, stream=stream, options=SUMMARIES)
    return InteractionsAdapter.connect(Endpoint(provider.base_url, "test-key", is_local=True), settings)


def first_turn(adapter: InteractionsAdapter) -> tuple[list, ModelResponse]:
    opening = ITEMS.user_items([SHOWN])
    reply = adapter.call(ModelRequest(SYSTEM, tuple(opening)))
    assert isinstance(reply, ModelResponse), reply
    return [*opening, *ITEMS.reply_items(reply)], reply


@pytest.fixture(params=[False, True], ids=["plain", "stream"])
def stream(request) -> bool:
    return request.param


def test_a_reply_is_its_generated_steps_verbatim_and_a_faithful_replay_remembers(stream):
    with LocalProvider() as provider:
        adapter = connect(provider, stream=stream)
        history, reply = first_turn(adapter)
        later = adapter.call(ModelRequest(SYSTEM, (*history, *ITEMS.user_items([DARK]))))
        lossy = adapter.call(ModelRequest(SYSTEM, (history[0], history[2], *ITEMS.user_items([DARK]))))
        body = provider.request_log[1]
    thought, output = history[1:]
    assert thought["type"] == "thought" and thought["signature"] and thought["summary"]
    assert output == {"type": "model_output", "content": [{"type": "text", "text": reply.text}]}
    assert body["store"] is False and body["input"][1:3] == [thought, output]
    assert reply.reasoning_summary and "ACTION: " in reply.text
    assert isinstance(later, ModelResponse) and REMEMBERED in later.text
    assert isinstance(lossy, ModelResponse) and FORGOTTEN in lossy.text  # a dropped thought is forgotten, not refused
    readable = ITEMS.readable(history)
    assert [entry["role"] for entry in readable] == ["user", "thought summary", "model"]
    assert thought["signature"] not in str(readable)


def test_a_stream_rebuilds_the_steps_a_plain_call_returns():
    with LocalProvider() as provider:
        plain = first_turn(connect(provider))[0]
        streamed = first_turn(connect(provider, stream=True))[0]
    assert [step["type"] for step in streamed] == [step["type"] for step in plain]
    assert streamed[2] == plain[2] and streamed[1]["summary"] == plain[1]["summary"]


@pytest.mark.parametrize(
    ("fault", "kind"),
    [("refusal", ErrorKind.REFUSAL), ("truncation", ErrorKind.TRUNCATED), ("pause_turn", ErrorKind.TRUNCATED)],
)
def test_an_incomplete_interaction_never_carries_an_action(fault, kind, stream):
    with LocalProvider(faults=[Fault(at=1, kind=fault)]) as provider:
        outcome = connect(provider, stream=stream).call(ModelRequest(SYSTEM, tuple(ITEMS.user_items([SHOWN]))))
    assert isinstance(outcome, ProviderError) and outcome.kind is kind and outcome.usage.input_tokens > 0


def test_usage_bills_the_thought_as_output_with_its_breakdown():
    with LocalProvider() as provider:
        _, reply = first_turn(connect(provider))
    assert 0 < reply.usage.reasoning_tokens < reply.usage.output_tokens


def test_a_context_overflow_is_its_own_kind():
    with LocalProvider(faults=[Fault(at=1, kind="context_overflow")]) as provider:
        outcome = connect(provider).call(ModelRequest(SYSTEM, tuple(ITEMS.user_items([SHOWN]))))
    assert isinstance(outcome, ProviderError) and outcome.kind is ErrorKind.CONTEXT_OVERFLOW
    assert outcome.diagnostics["error_type"] == "INVALID_ARGUMENT"


def test_without_thought_summaries_the_model_still_answers():
    with LocalProvider() as provider:
        settings = RequestSettings("gemini-3.8-flash", 256)
        adapter = InteractionsAdapter.connect(Endpoint(provider.base_url, "k", is_local=True), settings)
        reply = adapter.call(ModelRequest(SYSTEM, tuple(ITEMS.user_items([DARK]))))
    assert isinstance(reply, ModelResponse) and FORGOTTEN in reply.text and reply.reasoning_summary is None


# fmt: off
PROBLEMS = [
    ({**SUMMARIES, "previous_interaction_id": "i_1"}, "continuous_conversation", "previous_interaction_id"),
    ({**SUMMARIES, "background": True}, "continuous_conversation", "background"),
    ({**SUMMARIES, "store": True}, "continuous_conversation", "store"),
    ({}, "continuous_conversation", "generation_config.thinking_summaries"),
    ({"generation_config": {"thinking_summaries": "none"}}, "continuous_conversation", "generation_config.thinking_summaries"),
    ({"generation_config": {"thinking_level": "extreme"}}, "manual_rolling", "generation_config.thinking_level"),
]
# fmt: on


@pytest.mark.parametrize(("options", "strategy", "path"), PROBLEMS)
def test_options_that_break_the_replay_are_named_with_a_fix(options, strategy, path):
    problems = InteractionsAdapter.check_options(options, strategy, "harness_summary")
    assert problems and problems[0].path == path and problems[0].fix


def test_the_profile_options_pass():
    assert InteractionsAdapter.check_options(SUMMARIES, "continuous_conversation", "harness_summary") == []


def test_the_sdks_own_deadline_for_a_call_is_a_deadline_exceeded(monkeypatch):
    # google-genai keeps the call's timeout itself across continuation hops, and raises its own error
    # when it passes first; that is the same deadline, classified as the bounded client's would be.
    with LocalProvider() as provider:
        adapter = connect(provider)

    def out_of_time(**arguments):
        assert arguments["timeout"] == adapter.timeout_seconds  # the call carries its deadline
        raise ContinuationTimeoutError("the per-call timeout ran out")

    monkeypatch.setattr(adapter.client.interactions, "create", out_of_time)
    outcome = adapter.call(ModelRequest(SYSTEM, tuple(ITEMS.user_items([SHOWN]))))
    assert isinstance(outcome, ProviderError) and outcome.kind is ErrorKind.TRANSIENT
    assert outcome.diagnostics == {"error_class": "DeadlineExceeded"}
