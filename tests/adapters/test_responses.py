"""openai.responses.v1 through the real openai SDK against the local provider's Responses wire.

What every adapter must do is checked by the contract suite (test_contract.py); this module checks
what is the Responses surface's own: byte-faithful replay of native items, the two response-only
fields it drops, the request it builds, and its options' rules per strategy.
"""

from __future__ import annotations

from typing import Any

import pytest

from turnstate.adapters.contract import Endpoint, ErrorKind, ModelRequest, ModelResponse, ProviderError, RequestSettings
from turnstate.adapters.responses import ResponsesAdapter
from turnstate.local_provider.server import LocalProvider

from ..hostile_server import HostileServer, each_object

FRAME = "LEVEL 1/1 | STATE NOT_FINISHED\nBEACON (level 1): B\n#######\n#@.A.B#\n#######\nSTANDING ON: floor"
CONTINUOUS = {
    "store": False,
    "include": ["reasoning.encrypted_content"],
    "reasoning": {"summary": "auto", "context": "auto"},
}


def connect(provider: LocalProvider, *, stream: bool = False, options: dict | None = None) -> ResponsesAdapter:
    settings = RequestSettings(
        model="local-policy-1", max_output_tokens=256, stream=stream, options=options or CONTINUOUS
    )
    return ResponsesAdapter.connect(
        Endpoint(provider.base_url, "test-key", is_local=True, timeout_seconds=10.0), settings
    )


def first_turn(adapter: ResponsesAdapter) -> tuple[list[dict], ModelResponse]:
    opening = adapter.transcript.user_items([FRAME])
    reply = adapter.call(ModelRequest(system="Play.", items=tuple(opening)))
    assert isinstance(reply, ModelResponse)
    return opening, reply


@pytest.fixture(params=[False, True], ids=["plain", "stream"])
def stream(request) -> bool:
    return request.param


def with_response_only_fields(data: Any) -> Any:
    """A reply's JSON with `status` on every reasoning item, as the output schema allows (the local
    provider, like the recorded replies, sends none): what a replay must drop, the seed says."""

    def add_status(item: dict[str, Any]) -> None:
        if item.get("type") == "reasoning":
            item["status"] = "completed"

    return each_object(data, add_status)


def test_reply_items_are_every_output_item_less_the_response_only_fields(stream):
    with LocalProvider() as provider, HostileServer(provider.base_url, with_response_only_fields) as server:
        settings = RequestSettings(model="local-policy-1", max_output_tokens=256, stream=stream, options=CONTINUOUS)
        adapter = ResponsesAdapter.connect(
            Endpoint(server.base_url, "test-key", is_local=True, timeout_seconds=10.0), settings
        )
        _, reply = first_turn(adapter)
    kinds = [item["type"] for item in reply.native_items]
    assert kinds == ["reasoning", "message"]
    reasoning, message = reply.native_items
    assert reasoning["encrypted_content"] and "status" not in reasoning  # it came with one
    assert message["status"] == "completed" and message["content"][0]["annotations"] == []  # kept as returned
    assert reply.response_id and reply.text.startswith("Level 1") and "ACTION:" in reply.text


def test_a_faithful_replay_is_accepted_and_the_model_remembers_what_it_reasoned(stream):
    with LocalProvider() as provider:
        adapter = connect(provider, stream=stream)
        opening, reply = first_turn(adapter)
        history = [*opening, *adapter.transcript.reply_items(reply)]
        later = "LEVEL 1/1 | STATE NOT_FINISHED\nBEACON (level 1): dark\n#######\n#.@A.B#\n#######\nSTANDING ON: floor"
        second = adapter.call(ModelRequest(system="Play.", items=(*history, *adapter.transcript.user_items([later]))))
    assert isinstance(second, ModelResponse)
    assert "door B" in second.text  # the beacon is only in the first turn's sealed reasoning


@pytest.mark.parametrize("tamper", ["drop_reasoning", "alter_reasoning"])
def test_an_unfaithful_replay_is_refused_by_the_provider(tamper):
    with LocalProvider() as provider:
        adapter = connect(provider)
        opening, reply = first_turn(adapter)
        reasoning, message = adapter.transcript.reply_items(reply)
        if tamper == "drop_reasoning":
            replayed = [message]
        else:
            sealed = reasoning["encrypted_content"]
            replayed = [
                {**reasoning, "encrypted_content": sealed[:-4] + ("AAAA" if not sealed.endswith("AAAA") else "BBBB")},
                message,
            ]
        outcome = adapter.call(
            ModelRequest(system="Play.", items=(*opening, *replayed, *adapter.transcript.user_items(["next"])))
        )
    assert isinstance(outcome, ProviderError)
    assert outcome.kind is ErrorKind.FATAL and outcome.diagnostics["status"] == 400


def test_the_request_is_stateless_with_encrypted_reasoning_and_the_system_prompt_as_instructions():
    with LocalProvider() as provider:
        first_turn(connect(provider))
        (body,) = provider.request_log
    assert body["store"] is False and body["include"] == ["reasoning.encrypted_content"]
    assert body["instructions"] == "Play." and body["max_output_tokens"] == 256
    assert "previous_response_id" not in body


def test_a_handle_continues_a_stored_response_and_an_expired_one_is_its_own_kind():
    options = {"store": True, "include": ["reasoning.encrypted_content"]}
    with LocalProvider() as provider:
        adapter = connect(provider, options=options)
        _, reply = first_turn(adapter)
        follow = ModelRequest(
            system="Play.", items=tuple(adapter.transcript.user_items(["next"])), previous_response_id=reply.response_id
        )
        assert isinstance(adapter.call(follow), ModelResponse)
        unknown = ModelRequest(system="Play.", items=follow.items, previous_response_id="resp_unknown")
        expired = adapter.call(unknown)
    assert isinstance(expired, ProviderError) and expired.kind is ErrorKind.EXPIRED_HANDLE
    assert expired.diagnostics["status"] == 404


def test_inline_compaction_arrives_as_a_compaction_item_the_transcript_finds():
    options = {**CONTINUOUS, "context_management": [{"type": "compaction", "compact_threshold": 20}]}
    with LocalProvider() as provider:
        _, reply = first_turn(connect(provider, options=options))
    items = ResponsesAdapter.transcript.reply_items(reply)
    assert [item["type"] for item in items] == ["reasoning", "message", "compaction"]
    assert "created_by" not in items[2]
    assert ResponsesAdapter.transcript.latest_compaction(items) == 2
    readable = ResponsesAdapter.transcript.readable(items)
    assert all("encrypted_content" not in entry["content"] for entry in readable)
    assert readable[2]["role"] == "compaction"


# (options, strategy, compaction, the path the first problem names)
# fmt: off
PROBLEMS = [
    ({**CONTINUOUS, "store": True}, "continuous_conversation", "none", "store"),
    ({**CONTINUOUS, "include": []}, "continuous_conversation", "none", "include"),
    ({**CONTINUOUS, "reasoning": {"summary": "auto"}}, "continuous_conversation", "none", "reasoning.context"),
    ({**CONTINUOUS, "reasoning": {"context": "auto"}}, "continuous_conversation", "none", "reasoning.summary"),
    ({**CONTINUOUS, "background": True}, "continuous_conversation", "none", "background"),
    ({**CONTINUOUS, "conversation": "conv_1"}, "continuous_conversation", "none", "conversation"),
    ({**CONTINUOUS, "previous_response_id": "resp_1"}, "continuous_conversation", "none", "previous_response_id"),
    (CONTINUOUS, "continuous_conversation", "native", "context_management"),
    ({**CONTINUOUS, "context_management": [{"type": "compaction", "compact_threshold": 9}]}, "continuous_conversation", "none", "context_management"),
    ({"store": False}, "previous_response_id", "none", "store"),
    ({"stor": False}, "previous_response_id", "none", "stor"),
    ({"store": "no"}, "previous_response_id", "none", "store"),
]
# fmt: on


@pytest.mark.parametrize(("options", "strategy", "compaction", "path"), PROBLEMS)
def test_options_that_break_the_strategy_are_named(options, strategy, compaction, path):
    problems = ResponsesAdapter.check_options(options, strategy, compaction)
    assert problems and problems[0].path == path and problems[0].fix


def test_the_options_the_strategies_need_pass():
    assert ResponsesAdapter.check_options(CONTINUOUS, "continuous_conversation", "none") == []
    assert ResponsesAdapter.check_options({"store": True}, "previous_response_id", "none") == []
    assert ResponsesAdapter.check_options({}, "manual_rolling", "none") == []


def test_a_compaction_call_returns_the_history_as_one_compaction_item_replayable_as_returned():
    with LocalProvider() as provider:
        adapter = connect(provider)
        opening, reply = first_turn(adapter)
        history = (*opening, *adapter.transcript.reply_items(reply))
        compacted = adapter.compact(ModelRequest(system="Play.", items=history))
        assert isinstance(compacted, ModelResponse) and compacted.usage.input_tokens > 0
        items = adapter.transcript.reply_items(compacted)
        assert adapter.transcript.latest_compaction(items) == len(items) - 1  # kept user messages, then one compaction
        assert all("created_by" not in item for item in items)
        later = "LEVEL 1/1 | STATE NOT_FINISHED\nBEACON (level 1): dark\n#######\n#.@A.B#\n#######\nSTANDING ON: floor"
        after = adapter.call(ModelRequest(system="Play.", items=(*items, *adapter.transcript.user_items([later]))))
    assert isinstance(after, ModelResponse) and "door B" in after.text  # the compaction item carried the beacon


# fmt: off
XAI_PROBLEMS = [
    ({**CONTINUOUS, "context_management": [{"type": "compaction", "compact_threshold": 9}]}, "context_management"),
    ({"include": ["reasoning.encrypted_content"]}, "store"),
    ({"store": False}, "include"),
    ({"store": False, "include": ["reasoning.encrypted_content"], "conversation": "c"}, "conversation"),
]
# fmt: on


@pytest.mark.parametrize(("options", "path"), XAI_PROBLEMS)
def test_xai_options_that_break_continuous_conversation_are_named(options, path):
    from turnstate.adapters.xai_responses import XaiResponsesAdapter

    problems = XaiResponsesAdapter.check_options(options, "continuous_conversation", "native")
    assert problems and problems[0].path == path


def test_xai_compacts_by_a_call_and_openai_inline():
    from turnstate.adapters.xai_responses import XaiResponsesAdapter

    assert (XaiResponsesAdapter.native_compaction, ResponsesAdapter.native_compaction) == ("call", "inline")
    assert (
        XaiResponsesAdapter.check_options(
            {"store": False, "include": ["reasoning.encrypted_content"]}, "continuous_conversation", "native"
        )
        == []
    )
