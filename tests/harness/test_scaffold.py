"""The task scaffold: the model is told to act through the one channel its adapter's parser accepts."""

from __future__ import annotations

import pytest

from turnstate.adapters.registry import ADAPTERS
from turnstate.harness import scaffold

ACTIONS = ("ACTION1", "ACTION2")


@pytest.mark.parametrize("adapter_id", sorted(ADAPTERS))
def test_the_system_prompt_asks_for_the_action_through_the_adapters_own_channel(adapter_id):
    tool = ADAPTERS[adapter_id].load().action_tool
    prompt = scaffold.system_prompt(ACTIONS, tool)
    assert "ACTION1, ACTION2" in prompt
    if tool is None:
        assert "'ACTION: <name>'" in prompt
    else:  # a text ACTION line would be rejected: the prompt must never ask for one
        assert f"calling the {tool} tool exactly once" in prompt and "ACTION:" not in prompt


def test_deepseek_acts_through_its_submit_action_tool():
    assert ADAPTERS["deepseek.chat_completions.v1"].load().action_tool == "submit_action"


@pytest.mark.parametrize(
    ("text", "tool_actions", "expected"),
    [
        ("ACTION: ACTION1", None, scaffold.ParsedAction("ACTION1")),
        ("ACTION: ACTION1", (), scaffold.ParsedAction(None, "the reply made no call of the action tool")),
        ("", ("ACTION2",), scaffold.ParsedAction("ACTION2")),
        ("", ("ACTION9",), scaffold.ParsedAction(None, "unknown action 'ACTION9'")),
    ],
    ids=["a text line", "a text line where a tool call was asked for", "a tool call", "a tool call of no action"],
)
def test_an_action_is_read_from_the_channel_the_prompt_named(text, tool_actions, expected):
    assert scaffold.parse_action(text, ACTIONS, tool_actions) == expected
