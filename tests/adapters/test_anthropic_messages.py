"""anthropic.messages.v1 through the real anthropic SDK against the local provider's Messages wire.

What every adapter must do is checked by the contract suite (test_contract.py); this module checks
what is the Messages surface's own: verbatim replay of content blocks, which stop reasons may carry
an action, on-demand compaction, Anthropic's usage (iterations, cache reads and writes, thinking),
and its options' rules.
"""

from __future__ import annotations

from typing import Any

import anthropic
import httpx2
import pytest
from anthropic.types.beta import BetaMessage

from turnstate.adapters.anthropic_messages import COMPACTION_BETA, MessagesAdapter, _replayable
from turnstate.adapters.contract import Endpoint, ErrorKind, ModelRequest, ModelResponse, ProviderError, RequestSettings
from turnstate.local_provider.faults import Fault
from turnstate.local_provider.server import LocalProvider

from ..local_provider.test_messages import DARK, FORGOTTEN, REMEMBERED, SHOWN

SYSTEM = "You play beacon_grid. Answer with one line ACTION: <action>."
THINKING = {"type": "enabled", "budget_tokens": 1024}
THINKING_TOKENS_BETA = "thinking-token-count-2026-05-13"
ITEMS = MessagesAdapter.transcript


def connect(provider: LocalProvider, *, stream: bool = False, **options: Any) -> MessagesAdapter:
    settings = RequestSettings(
        model="claude-sonnet-4-6", max_output_tokens=2048, stream=stream, options={"thinking": THINKING, **options}
    )
    return MessagesAdapter.connect(
        Endpoint(provider.base_url, "test-key", is_local=True, timeout_seconds=10.0), settings
    )


def request(*items: Any) -> ModelRequest:
    return ModelRequest(system=SYSTEM, items=tuple(items))


def first_turn(adapter: MessagesAdapter) -> tuple[list[Any], ModelResponse]:
    """The beacon frame answered: the history so far, as the transcript keeps it, and the reply."""
    opening = ITEMS.user_items([SHOWN])
    reply = adapter.call(request(*opening))
    assert isinstance(reply, ModelResponse), reply
    return [*opening, *ITEMS.reply_items(reply)], reply


@pytest.fixture(params=[False, True], ids=["plain", "stream"])
def stream(request) -> bool:
    return request.param


# --- replay --------------------------------------------------------------------------------------


def test_a_reply_is_its_assistant_message_with_every_block_in_order(stream):
    with LocalProvider() as provider:
        _, reply = first_turn(connect(provider, stream=stream))
    (message,) = reply.native_items
    assert message["role"] == "assistant"
    thinking, text = message["content"]
    assert thinking["type"] == "thinking" and thinking["signature"] and thinking["thinking"]
    assert text == {"type": "text", "text": reply.text, "citations": None}  # a supplied null stays
    assert reply.stop_reason == "end_turn" and "ACTION: " in reply.text and reply.reasoning_summary


def test_empty_thinking_text_is_replayed_as_the_empty_string_it_was(stream):
    with LocalProvider() as provider:
        adapter = connect(provider, stream=stream, thinking={**THINKING, "display": "omitted"})
        history, reply = first_turn(adapter)
        later = adapter.call(request(*history, *ITEMS.user_items([DARK])))
    assert history[1]["content"][0]["thinking"] == "" and reply.reasoning_summary is None
    assert isinstance(later, ModelResponse) and REMEMBERED in later.text  # the signature still verified


def test_a_faithful_replay_carries_the_beacon_and_a_lossy_one_loses_it(stream):
    with LocalProvider() as provider:
        adapter = connect(provider, stream=stream)
        history, _ = first_turn(adapter)
        remembered = adapter.call(request(*history, *ITEMS.user_items([DARK])))
        forgotten = adapter.call(request(*ITEMS.user_items([DARK])))
    assert isinstance(remembered, ModelResponse) and REMEMBERED in remembered.text
    assert isinstance(forgotten, ModelResponse) and FORGOTTEN in forgotten.text


def test_an_altered_signature_is_a_fatal_400_whose_message_is_never_kept():
    with LocalProvider() as provider:
        adapter = connect(provider)
        history, _ = first_turn(adapter)
        thinking = history[1]["content"][0]
        altered = {
            **history[1],
            "content": [{**thinking, "signature": thinking["signature"][::-1]}, history[1]["content"][1]],
        }
        outcome = adapter.call(request(history[0], altered, *ITEMS.user_items([DARK])))
    assert isinstance(outcome, ProviderError) and outcome.kind is ErrorKind.FATAL
    assert outcome.diagnostics == {
        "error_class": "BadRequestError",
        "status": 400,
        "error_type": "invalid_request_error",
        "request_id": outcome.diagnostics["request_id"],
    }


def test_replay_drops_only_the_response_only_fields():
    text = {"type": "text", "text": "ACTION: UP", "citations": None, "parsed_output": {"action": "UP"}}
    assert _replayable(text) == {"type": "text", "text": "ACTION: UP", "citations": None}
    unsealed = {"type": "compaction", "content": "summary", "encrypted_content": None, "signature": "s"}
    assert _replayable(unsealed) == {"type": "compaction", "content": "summary", "signature": "s"}
    sealed = {**unsealed, "encrypted_content": "opaque", "future_field": [1]}
    assert _replayable(sealed) == sealed  # non-null encrypted metadata and unknown fields stay intact
    thinking = {"type": "thinking", "thinking": "", "signature": "sig"}
    redacted = {"type": "redacted_thinking", "data": "opaque"}
    assert (_replayable(thinking), _replayable(redacted)) == (thinking, redacted)


# --- what may carry an action --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fault", "kind"),
    [("refusal", ErrorKind.REFUSAL), ("pause_turn", ErrorKind.TRANSIENT), ("truncation", ErrorKind.TRUNCATED)],
)
def test_only_end_turn_carries_an_action_even_when_the_text_names_one(fault, kind, stream):
    with LocalProvider(faults=[Fault(at=1, kind=fault)]) as provider:
        outcome = connect(provider, stream=stream).call(request(*ITEMS.user_items([SHOWN])))
    assert isinstance(outcome, ProviderError) and outcome.kind is kind
    assert outcome.usage.input_tokens > 0  # what it cost is kept


def test_a_refusal_keeps_its_stop_details_sanitized(stream):
    with LocalProvider(faults=[Fault(at=1, kind="refusal")]) as provider:
        outcome = connect(provider, stream=stream).call(request(*ITEMS.user_items([SHOWN])))
    assert isinstance(outcome, ProviderError)
    assert outcome.diagnostics == {"finish_reason": "refusal", "stop_details": {"type": "refusal", "category": None}}


def sdk_message(stop_reason: str, *content: dict[str, Any], stop_details: Any = None) -> BetaMessage:
    return BetaMessage.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-6",
            "content": list(content),
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "stop_details": stop_details,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }
    )


TEXT = {"type": "text", "text": "ACTION: UP"}
REFUSAL_DETAILS = {
    "type": "refusal",
    "category": "cyber",
    "explanation": "The provider's own words.",
    "fallback_credit_token": "opaque-token",
}


def test_a_refusals_explanation_and_credit_token_never_reach_the_diagnostics():
    adapter = MessagesAdapter(anthropic.Anthropic(api_key="k"), RequestSettings("m", 64))
    message = sdk_message("refusal", TEXT, stop_details=REFUSAL_DETAILS)
    outcome = adapter._normalize(message, message.stop_details, adapter_usage(message), compaction=False)
    assert isinstance(outcome, ProviderError)
    assert outcome.diagnostics == {"finish_reason": "refusal", "stop_details": {"type": "refusal", "category": "cyber"}}


def adapter_usage(message: BetaMessage):
    from turnstate.adapters.anthropic_messages import _usage

    return _usage(message.usage)


@pytest.mark.parametrize(
    ("stop_sequences", "message", "carries"),
    [
        ([], sdk_message("end_turn", TEXT), True),
        ([], sdk_message("stop_sequence", TEXT), False),  # a stop sequence the profile never configured
        (["\nEND"], sdk_message("stop_sequence", TEXT), True),
        ([], sdk_message("tool_use", TEXT), False),
        ([], sdk_message("end_turn", {"type": "compaction", "content": "s", "signature": "x"}, TEXT), False),
        ([], sdk_message("end_turn", {"type": "thinking", "thinking": "t", "signature": "x"}), False),  # no text
    ],
    ids=[
        "end_turn",
        "unconfigured stop_sequence",
        "configured stop_sequence",
        "tool_use",
        "inline compaction",
        "no text",
    ],
)
def test_which_replies_may_carry_an_action(stop_sequences, message, carries):
    adapter = MessagesAdapter(
        anthropic.Anthropic(api_key="k"), RequestSettings("m", 64, options={"stop_sequences": stop_sequences})
    )
    outcome = adapter._normalize(message, None, adapter_usage(message), compaction=False)
    assert isinstance(outcome, ModelResponse) is carries


def test_a_stream_cut_mid_reply_is_never_a_reply_and_keeps_the_usage_it_saw():
    with LocalProvider(faults=[Fault(at=1, kind="stream_cut")]) as provider:
        outcome = connect(provider, stream=True).call(request(*ITEMS.user_items([SHOWN])))
    assert isinstance(outcome, ProviderError) and outcome.kind is ErrorKind.TRANSIENT
    assert outcome.usage.input_tokens > 0  # message_start had told it


def test_an_error_event_mid_stream_is_classified_by_its_type():
    adapter = MessagesAdapter(anthropic.Anthropic(api_key="k"), RequestSettings("m", 64))
    response = httpx2.Response(200, request=httpx2.Request("POST", "https://api.anthropic.com/v1/messages"))
    body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded: secret details"}}
    outcome = adapter.classify(anthropic.APIStatusError("Overloaded", response=response, body=body))
    assert outcome.kind is ErrorKind.TRANSIENT
    assert outcome.diagnostics["error_type"] == "overloaded_error" and "secret" not in str(outcome.diagnostics)


# --- on-demand compaction ------------------------------------------------------------------------


def test_a_compaction_is_one_signed_block_that_carries_the_beacon_and_sends_its_beta_on(stream):
    with LocalProvider() as provider:
        adapter = connect(provider, stream=stream)
        history, _ = first_turn(adapter)
        compacted = adapter.compact(request(*history))
        assert isinstance(compacted, ModelResponse), compacted
        items = ITEMS.reply_items(compacted)
        later = adapter.call(request(*items, *ITEMS.user_items([DARK])))  # refused without the beta
        body = provider.request_log[1]
    assert [block["type"] for block in items[0]["content"]] == ["compaction"]
    assert items[0]["content"][0]["signature"] and ITEMS.latest_compaction(items) == 0
    assert compacted.usage.input_tokens > 0 and compacted.usage.output_tokens > 0  # from its iterations
    assert body["compaction"] == {"type": "summarize"} and body["messages"] == history
    assert isinstance(later, ModelResponse) and REMEMBERED in later.text


def test_a_compaction_request_keeps_thinking_effort_and_caching_and_drops_action_only_settings():
    options = {
        "output_config": {"effort": "low", "format": {"type": "json_schema", "schema": {"type": "object"}}},
        "stop_sequences": ["\nEND"],
        "cache_control": {"type": "ephemeral"},
    }
    adapter = MessagesAdapter(
        anthropic.Anthropic(api_key="k"), RequestSettings("m", 64, options={"thinking": THINKING, **options})
    )
    action = adapter.build_request(request(*ITEMS.user_items([SHOWN])))
    assert action["output_config"] == options["output_config"] and action["stop_sequences"] == ["\nEND"]
    assert action["cache_control"] == {"type": "ephemeral"} and action["thinking"] == THINKING
    with LocalProvider() as provider:
        adapter = MessagesAdapter.connect(
            Endpoint(provider.base_url, "test-key", is_local=True, timeout_seconds=10.0),
            RequestSettings(
                "claude-sonnet-4-6",
                2048,
                options={
                    "thinking": THINKING,
                    "cache_control": {"type": "ephemeral"},
                    "output_config": {"effort": "low"},
                    "stop_sequences": ["\nEND"],
                },
            ),
        )
        history, _ = first_turn(adapter)
        adapter.compact(request(*history))
        action_body, compaction_body = provider.request_log
    assert action_body["cache_control"] == compaction_body["cache_control"] == {"type": "ephemeral"}
    assert compaction_body["thinking"] == THINKING and compaction_body["output_config"] == {"effort": "low"}
    assert "stop_sequences" not in compaction_body and action_body["stop_sequences"] == ["\nEND"]
    assert compaction_body["max_tokens"] == action_body["max_tokens"] == 2048


def test_no_cache_control_is_injected_when_the_profile_sets_none():
    with LocalProvider() as provider:
        adapter = connect(provider)
        history, _ = first_turn(adapter)
        adapter.compact(request(*history))
    assert all("cache_control" not in body for body in provider.request_log)


@pytest.mark.parametrize(
    "fault", ["refusal", "truncation", "pause_turn", "empty_choices", "null_message", "garbled", "stream_cut"]
)
def test_a_failed_compaction_is_never_a_compaction(fault, stream):
    with LocalProvider(faults=[Fault(at=2, kind=fault)]) as provider:
        adapter = connect(provider, stream=stream)
        history, _ = first_turn(adapter)
        outcome = adapter.compact(request(*history))
    assert isinstance(outcome, ProviderError)


@pytest.mark.parametrize(
    ("content", "stop_reason"),
    [
        ([{"type": "compaction", "content": "s"}], "compaction"),  # unsigned
        ([{"type": "compaction", "content": None, "signature": "x"}], "compaction"),  # empty
        ([{"type": "compaction", "content": "s", "signature": "x"}] * 2, "compaction"),  # two
        ([{"type": "compaction", "content": "s", "signature": "x"}], "max_tokens"),  # truncated
        ([TEXT], "end_turn"),  # an answer, not a compaction
    ],
    ids=["unsigned", "empty", "two blocks", "truncated", "no block"],
)
def test_only_one_nonempty_signed_block_is_a_compaction(content, stop_reason):
    adapter = MessagesAdapter(anthropic.Anthropic(api_key="k"), RequestSettings("m", 64))
    message = sdk_message(stop_reason, *content)
    assert isinstance(adapter._normalize(message, None, adapter_usage(message), compaction=True), ProviderError)


# --- usage ---------------------------------------------------------------------------------------


def usage_of(**fields: Any):
    from anthropic.types.beta import BetaUsage

    from turnstate.adapters.anthropic_messages import _usage

    return _usage(BetaUsage.model_validate({"input_tokens": 0, "output_tokens": 0, **fields}))


def iteration(kind: str, **counts: int) -> dict[str, Any]:
    zero = {"input_tokens": 0, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0, "output_tokens": 0}
    return {"type": kind, **zero, **counts}


def test_input_is_uncached_plus_cache_reads_plus_cache_writes_with_reads_as_the_cached_part():
    usage = usage_of(input_tokens=10, cache_read_input_tokens=1000, cache_creation_input_tokens=200, output_tokens=7)
    assert (usage.input_tokens, usage.cached_input_tokens, usage.output_tokens) == (1210, 1000, 7)


def test_iterations_are_the_source_when_present_and_the_top_level_is_not_added_again():
    usage = usage_of(
        input_tokens=40,
        output_tokens=9,
        output_tokens_details={"thinking_tokens": 4},
        iterations=[
            iteration("compaction", input_tokens=500, cache_read_input_tokens=100, output_tokens=30),
            iteration("message", input_tokens=40, output_tokens=9),
        ],
    )
    assert (usage.input_tokens, usage.cached_input_tokens, usage.output_tokens) == (640, 100, 39)
    assert usage.reasoning_tokens == 4  # the top-level breakdown, used once


def test_missing_counts_stay_zero_and_thinking_is_a_breakdown_not_extra_output():
    assert usage_of(input_tokens=5, output_tokens=3).reasoning_tokens == 0  # unreported, never estimated
    usage = usage_of(input_tokens=5, output_tokens=30, output_tokens_details={"thinking_tokens": 20})
    assert (usage.output_tokens, usage.reasoning_tokens, usage.total_tokens) == (30, 20, 35)


def test_automatic_caching_reads_back_what_the_previous_request_wrote(stream):
    with LocalProvider() as provider:
        adapter = connect(provider, stream=stream, cache_control={"type": "ephemeral"}, betas=[THINKING_TOKENS_BETA])
        history, first = first_turn(adapter)
        long_frame = SHOWN + "\n" + "x" * 6000  # past the minimum cacheable length
        second = adapter.call(request(*history, *ITEMS.user_items([long_frame])))
        assert isinstance(second, ModelResponse)
        history = [*history, *ITEMS.user_items([long_frame]), *ITEMS.reply_items(second)]
        third = adapter.call(request(*history, *ITEMS.user_items([DARK])))
    assert isinstance(third, ModelResponse)
    assert third.usage.cached_input_tokens > 1024 and third.usage.input_tokens > third.usage.cached_input_tokens
    assert 0 < first.usage.reasoning_tokens < first.usage.output_tokens  # the beta's breakdown of output


# --- options -------------------------------------------------------------------------------------

OPUS_OPTIONS = {
    "thinking": {"type": "adaptive", "display": "summarized"},
    "output_config": {"effort": "low"},
    "cache_control": {"type": "ephemeral"},
    "betas": [COMPACTION_BETA, THINKING_TOKENS_BETA],
}

# fmt: off
PROBLEMS = [
    ({"context_management": {"edits": [{"type": "compact_20260112", "pause_after_compaction": True}]}}, "context_management"),
    ({"context_management": {"edits": [{"type": "compact_20260112", "pause_after_compaction": False}]}}, "context_management"),
    ({"compaction": {"type": "summarize"}}, "compaction"),
    ({"betas": ["compact-2026-01-12"]}, "betas"),
    ({"thinking": {"type": "enabled", "budget_tokens": 10}}, "thinking.budget_tokens"),
    ({"output_config": {"effort": "extreme"}}, "output_config.effort"),
    ({"cache_control": {"type": "persistent"}}, "cache_control.type"),
    ({"temperature_": 1}, "temperature_"),
]
# fmt: on


@pytest.mark.parametrize(("options", "path"), PROBLEMS)
def test_options_that_break_on_demand_compaction_or_the_api_are_named_with_a_fix(options, path):
    problems = MessagesAdapter.check_options(options, "continuous_conversation", "native")
    assert problems and problems[0].path == path and problems[0].fix


def test_the_opus_profile_options_pass():
    assert MessagesAdapter.check_options(OPUS_OPTIONS, "continuous_conversation", "native", "claude-opus-5") == []


@pytest.mark.parametrize("model", ["claude-opus-5", "claude-opus-5-20261101"])
def test_a_fixed_thinking_budget_is_refused_for_a_model_that_thinks_adaptively_only(model):
    (problem,) = MessagesAdapter.check_options({"thinking": THINKING}, "continuous_conversation", "native", model)
    assert problem.path == "thinking.type" and "not supported for this model" in problem.problem
    assert problem.fix == "set thinking.type: adaptive"
    assert (
        MessagesAdapter.check_options({"thinking": THINKING}, "continuous_conversation", "native", "claude-sonnet-4-6")
        == []
    )


def test_the_adapter_takes_a_temperature_only_if_its_sdk_call_does():
    import inspect

    from anthropic.resources.beta.messages import Messages

    assert MessagesAdapter.takes_temperature is ("temperature" in inspect.signature(Messages.create).parameters)


def test_a_failed_compaction_request_keeps_allowlisted_diagnostics_only(stream):
    with LocalProvider(faults=[Fault(at=2, kind="rate_limit")]) as provider:
        adapter = connect(provider, stream=stream)
        history, _ = first_turn(adapter)
        outcome = adapter.compact(request(*history))
    assert isinstance(outcome, ProviderError) and outcome.kind is ErrorKind.TRANSIENT
    assert outcome.diagnostics["status"] == 429 and outcome.diagnostics["error_type"] == "rate_limit_error"
    assert set(outcome.diagnostics) == {"error_class", "status", "error_type", "request_id"}
