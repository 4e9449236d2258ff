"""deepseek.chat_completions.v1 through the real openai SDK against the local DeepSeek-like server.

What every adapter must do is checked by the contract suite (test_contract.py); this module checks
what is this adapter's own: its one tool on every request, actions only as calls of it, and whole
turns (the answer with its reasoning and call, then the tool result) replayed exactly.
"""

from __future__ import annotations

import pytest

from turnstate.adapters.contract import Endpoint, ModelRequest, ModelResponse, RequestSettings
from turnstate.adapters.deepseek_chat import ACTION_TOOL, TOOL_RESULT, DeepSeekChatAdapter
from turnstate.local_provider.server import LocalProvider

from ..local_provider.test_messages import DARK, REMEMBERED, SHOWN

SYSTEM = "You play beacon_grid. Answer with one line ACTION: <action>."
ITEMS = DeepSeekChatAdapter.transcript


def connect(provider: LocalProvider, *, stream: bool = False) -> DeepSeekChatAdapter:
    settings = RequestSettings("deepseek-reasoner", 256, stream=stream, output_limit_param="max_tokens")
    return DeepSeekChatAdapter.connect(Endpoint(provider.base_url, "test-key", is_local=True), settings)


@pytest.fixture(params=[False, True], ids=["plain", "stream"])
def stream(request) -> bool:
    return request.param


def test_an_action_is_one_call_of_the_tool_and_the_turn_keeps_its_result(stream):
    with LocalProvider() as provider:
        adapter = connect(provider, stream=stream)
        opening = ITEMS.user_items([SHOWN])
        reply = adapter.call(ModelRequest(SYSTEM, tuple(opening)))
        assert isinstance(reply, ModelResponse)
        answer, result = ITEMS.reply_items(reply)
        later = adapter.call(ModelRequest(SYSTEM, (*opening, answer, result, *ITEMS.user_items([DARK]))))
        first_body, second_body = provider.request_log
    assert first_body["tools"] == second_body["tools"] == [ACTION_TOOL]
    (call,) = answer["tool_calls"]
    assert reply.tool_actions is not None and len(reply.tool_actions) == 1
    assert reply.tool_actions[0] in call["function"]["arguments"] and answer["reasoning_content"]
    assert result == {"role": "tool", "tool_call_id": call["id"], "content": TOOL_RESULT}
    assert second_body["messages"][2:4] == [answer, result]  # replayed exactly as received
    assert isinstance(later, ModelResponse) and REMEMBERED in later.text
    assert f"submit_action({call['function']['arguments']})" in ITEMS.readable([answer])[0]["content"]


@pytest.mark.parametrize(
    ("calls", "actions"),
    [
        ([], ()),  # text alone carries no action, even an ACTION line
        ([{"id": "c", "function": {"name": "submit_action", "arguments": '{"action": "ACTION2"}'}}], ("ACTION2",)),
        ([{"id": "c", "function": {"name": "other", "arguments": '{"action": "ACTION2"}'}}], ("",)),
        ([{"id": "c", "function": {"name": "submit_action", "arguments": "{not json"}}], ("",)),
        ([{"id": "c", "function": {"name": "submit_action", "arguments": '{"action": "A"}'}}] * 2, ("A", "A")),
    ],
    ids=["no call", "one call", "another tool", "broken arguments", "two calls"],
)
def test_the_actions_are_read_from_the_calls_alone(calls, actions):
    adapter = DeepSeekChatAdapter(None, RequestSettings("m", 64))  # type: ignore[arg-type]
    assert adapter._tool_actions(calls) == actions


@pytest.mark.parametrize("key", ["tools", "tool_choice", "temperature_"])
def test_request_options_are_refused(key):
    (problem,) = DeepSeekChatAdapter.check_options({key: 1}, "continuous_conversation", "harness_summary")
    assert problem.path == key and problem.fix == "remove it"
