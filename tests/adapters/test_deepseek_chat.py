"""deepseek.chat_completions.v1 through the real openai SDK against the local DeepSeek-like server.

What every adapter must do is checked by the contract suite (test_contract.py); this module checks
what is this adapter's own: it acts through the environment's action tools (the profile must say so),
and a turn (the answer with its reasoning and calls, then their results) is replayed exactly.
"""

from __future__ import annotations

import pytest

from turnstate.adapters.contract import Endpoint, ModelRequest, ModelResponse, RequestSettings, ToolResult
from turnstate.adapters.deepseek_chat import DeepSeekChatAdapter
from turnstate.local_provider.server import LocalProvider
from turnstate.session import scaffold

from ..local_provider.test_messages import DARK, REMEMBERED, SHOWN

SYSTEM = "You play beacon_grid. Answer with one line ACTION: <action>."
ITEMS = DeepSeekChatAdapter.transcript
ACTIONS = ("ACTION1", "ACTION2", "ACTION3", "ACTION4", "ACTION5", "ACTION6", "RESET")
ACTION_TOOLS = scaffold.action_tools(ACTIONS)


def connect(provider: LocalProvider, *, stream: bool = False) -> DeepSeekChatAdapter:
    settings = RequestSettings("deepseek-reasoner", 256, stream=stream, output_limit_param="max_tokens")
    return DeepSeekChatAdapter.connect(Endpoint(provider.base_url, "test-key", is_local=True), settings)


@pytest.fixture(params=[False, True], ids=["plain", "stream"])
def stream(request) -> bool:
    return request.param


def test_an_action_tool_call_keeps_its_reasoning_and_the_turn_replays_whole_with_its_result(stream):
    with LocalProvider() as provider:
        adapter = connect(provider, stream=stream)
        opening = ITEMS.user_items([SHOWN])
        reply = adapter.call(ModelRequest(SYSTEM, tuple(opening), tools=ACTION_TOOLS))
        assert isinstance(reply, ModelResponse)
        (answer,) = ITEMS.reply_items(reply)
        (call,) = reply.tool_calls
        result = ITEMS.tool_result_items([ToolResult(call.id, call.name, DARK)])
        later = adapter.call(ModelRequest(SYSTEM, (*opening, answer, *result), tools=ACTION_TOOLS))
        _, second_body = provider.request_log
    assert call.name in ACTIONS and answer["reasoning_content"] and answer["tool_calls"][0]["id"] == call.id
    assert second_body["messages"][2:4] == [answer, *result]  # replayed exactly as received
    # The frame came back as the call's result; the model acts on it, remembering the beacon.
    assert isinstance(later, ModelResponse) and later.tool_calls[0].name in ACTIONS and REMEMBERED in later.text


@pytest.mark.parametrize("key", ["tools", "tool_choice", "temperature_"])
def test_request_options_are_refused(key):
    (problem,) = DeepSeekChatAdapter.check_options({key: 1}, "continuous_conversation", "harness_summary")
    assert problem.path == key and problem.fix == "remove it"
