"""open_source.chat_completions.v1 through the real openai SDK against the local open-weight server.

What every adapter must do is checked by the contract suite (test_contract.py); this module checks
what is this adapter's own: the reasoning string read from the configured alias, replayed exactly
under it and never shown as content, and its options' rules.
"""

from __future__ import annotations

import pytest

from turnstate.adapters.contract import Endpoint, ModelRequest, ModelResponse, RequestSettings
from turnstate.adapters.open_source_chat import OpenSourceChatAdapter
from turnstate.local_provider.server import LocalProvider

from ..local_provider.test_messages import DARK, FORGOTTEN, REMEMBERED, SHOWN

SYSTEM = "You play beacon_grid. Answer with one line ACTION: <action>."
ITEMS = OpenSourceChatAdapter.transcript
THOUGHT = "NOTES: level 1 beacon C"


def connect(provider: LocalProvider, field: str, *, stream: bool = False) -> OpenSourceChatAdapter:
    settings = RequestSettings(
        model="qwen3.8-27b",
        max_output_tokens=256,
        stream=stream,
        output_limit_param="max_tokens",
        options={"reasoning_field": field},
    )
    endpoint = Endpoint(provider.base_url, "test-key", is_local=True, timeout_seconds=10.0)
    return OpenSourceChatAdapter.connect(endpoint, settings)


@pytest.fixture(params=[False, True], ids=["plain", "stream"])
def stream(request) -> bool:
    return request.param


@pytest.mark.parametrize(
    ("field", "aliases"),
    [
        ("reasoning_content", ["reasoning_content"]),
        ("reasoning", ["reasoning"]),
        ("both", ["reasoning_content", "reasoning"]),
    ],
)
def test_the_reasoning_is_read_and_replayed_exactly_under_the_configured_aliases(field, aliases, stream):
    with LocalProvider() as provider:
        adapter = connect(provider, field, stream=stream)
        opening = ITEMS.user_items([SHOWN])
        reply = adapter.call(ModelRequest(SYSTEM, tuple(opening)))
        assert isinstance(reply, ModelResponse)
        (answer,) = ITEMS.reply_items(reply)
        later = adapter.call(ModelRequest(SYSTEM, (*opening, answer, *ITEMS.user_items([DARK]))))
        sent = provider.request_log[-1]["messages"][2]
    assert answer == {"role": "assistant", "content": reply.text, **{alias: THOUGHT for alias in aliases}}
    assert THOUGHT not in reply.text and reply.reasoning_summary == THOUGHT
    assert sent == answer  # replayed as received, under exactly these aliases
    assert isinstance(later, ModelResponse) and REMEMBERED in later.text
    assert ITEMS.readable([answer]) == [{"role": "assistant", "content": reply.text}]  # never shown as content


def test_a_replay_without_the_reasoning_is_answered_by_a_model_that_forgot_it():
    # The server keeps no state to check a replay against (local_provider/chat_reasoning.py rule 1).
    with LocalProvider() as provider:
        adapter = connect(provider, "reasoning")
        opening = ITEMS.user_items([SHOWN])
        reply = adapter.call(ModelRequest(SYSTEM, tuple(opening)))
        stripped = {"role": "assistant", "content": reply.text}
        outcome = adapter.call(ModelRequest(SYSTEM, (*opening, stripped, *ITEMS.user_items([DARK]))))
    assert isinstance(outcome, ModelResponse) and FORGOTTEN in outcome.text


def test_the_replayed_reasoning_is_part_of_the_prompt_estimate():
    answer = {"role": "assistant", "content": "ACTION: ACTION1", "reasoning_content": "x" * 400}
    assert (
        ITEMS.estimate_tokens([answer])
        == ITEMS.estimate_tokens([{"role": "assistant", "content": "ACTION: ACTION1"}]) + 100
    )


@pytest.mark.parametrize(
    ("options", "strategy", "path"),
    [
        ({}, "continuous_conversation", "reasoning_field"),
        ({"reasoning_field": "thoughts"}, "continuous_conversation", "reasoning_field"),
        ({"reasoning_field": "both", "tools": []}, "manual_rolling", "tools"),
    ],
)
def test_options_that_break_the_replay_are_named_with_a_fix(options, strategy, path):
    problems = OpenSourceChatAdapter.check_options(options, strategy, "harness_summary")
    assert problems and problems[0].path == path and "reasoning_field" in problems[0].fix


def test_manual_rolling_needs_no_reasoning_field():
    assert OpenSourceChatAdapter.check_options({}, "manual_rolling", "none") == []
