"""The task scaffold: the model is told to act the one way the profile's action mode reads, and a
reply's action, tool round or problem is read back by the same rules."""

from __future__ import annotations

import pytest

from turnstate.adapters.contract import ToolCall, ToolSpec
from turnstate.adapters.registry import ADAPTERS
from turnstate.session import scaffold
from turnstate.session.scaffold import ParsedReply

MARK = ToolSpec(
    "MARK",
    "Mark a cell.",
    {
        "type": "object",
        "properties": {"x": {"type": "integer", "minimum": 0, "maximum": 7}, "y": {"type": "integer"}},
        "required": ["x", "y"],
        "additionalProperties": False,
    },
)
ACTIONS = (*scaffold.action_tools(["WAIT", "RESET"]), MARK)
LOOKUP = "read_catalog"


def call(name: str, **arguments) -> ToolCall:
    return ToolCall(f"id-{name}", name, arguments)


def test_the_text_prompt_asks_for_an_action_line_naming_each_actions_values():
    prompt = scaffold.system_prompt(ACTIONS, "text")
    assert "'ACTION: <name>'" in prompt and "WAIT, RESET, MARK <x> <y>." in prompt


def test_the_tools_prompt_asks_for_one_action_call_and_never_for_an_action_line():
    prompt = scaffold.system_prompt(ACTIONS, "tools", [ToolSpec(LOOKUP, "Read a page.", {})])
    assert "calling exactly one of the action tools, once: WAIT, RESET, MARK." in prompt
    assert "ACTION:" not in prompt and f"you may call these tools to look things up: {LOOKUP}." in prompt


def test_the_text_prompt_without_tools_is_the_one_every_profile_ran_with_before_tools():
    """Against: a changed default prompt, which would change every text-mode run's requests."""
    assert scaffold.system_prompt(scaffold.action_tools(["ACTION1", "ACTION2"])) == (
        "You are an agent playing a turn-based grid game. Each user message shows the latest frame of the "
        "game as text (sometimes several frames, oldest first). Think briefly, then answer with exactly "
        "one line of the form 'ACTION: <name>', where <name> is one of: ACTION1, ACTION2."
    )


def test_only_deepseek_must_act_through_tools():
    assert {adapter_id for adapter_id, entry in ADAPTERS.items() if entry.load().acts_through_tools} == {
        "deepseek.chat_completions.v1"
    }


# fmt: off
TEXT_CASES = {
    "an action line": ("ACTION: WAIT", (), ParsedReply("WAIT")),
    "an action line with values": ("ACTION: MARK 3 5", (), ParsedReply("MARK 3 5")),
    "no action line": ("I wait.", (), ParsedReply(None, "the reply has no 'ACTION: <name>' line")),
    "two action lines": ("ACTION: WAIT\nACTION: RESET", (), ParsedReply(None, "the reply names 2 actions; exactly one is allowed")),
    "an unknown action": ("ACTION: JUMP", (), ParsedReply(None, "unknown action 'JUMP'")),
    "too few values": ("ACTION: MARK 3", (), ParsedReply(None, "action MARK takes 2 values (x y)")),
    "a value out of range": ("ACTION: MARK 9 5", (), ParsedReply(None, "action MARK argument 'x' must be from 0 to 7, got 9")),
    "a word for an integer": ("ACTION: MARK a 5", (), ParsedReply(None, "action MARK argument 'x' must be an integer, got 'a'")),
    "a read-only call is a tool round, its action line unread": ("ACTION: WAIT", (call(LOOKUP, page=1),), ParsedReply(None)),
    "a call of an action tool in text mode": ("", (call("WAIT"),), ParsedReply(None, "the reply calls 'WAIT', which is not an offered tool")),
}
TOOLS_CASES = {
    "an action call": ((call("WAIT"),), ParsedReply("WAIT", action_call=call("WAIT"))),
    "an action call with arguments": ((call("MARK", x=3, y=5),), ParsedReply("MARK 3 5", action_call=call("MARK", x=3, y=5))),
    "a read-only call, then an action call": ((call(LOOKUP, page=1), call("WAIT")), ParsedReply("WAIT", action_call=call("WAIT"))),
    "read-only calls alone are a tool round": ((call(LOOKUP, page=1), call(LOOKUP, page=2)), ParsedReply(None)),
    "no call": ((), ParsedReply(None, "the reply called no action tool")),
    "two action calls": ((call("WAIT"), call("RESET")), ParsedReply(None, "the reply calls 2 action tools; exactly one is allowed")),
    "a tool not offered": ((call("shell", cmd="ls"),), ParsedReply(None, "the reply calls 'shell', which is not an offered tool")),
    "a missing argument": ((call("MARK", x=3),), ParsedReply(None, "action MARK needs its argument 'y'")),
    "an unknown argument": ((call("MARK", x=3, y=5, z=1),), ParsedReply(None, "action MARK has no argument 'z'")),
    "a bool for an integer": ((call("MARK", x=True, y=5),), ParsedReply(None, "action MARK argument 'x' must be an integer, got True")),
}
# fmt: on


@pytest.mark.parametrize(("text", "calls", "expected"), TEXT_CASES.values(), ids=TEXT_CASES.keys())
def test_text_mode_reads_one_action_line_unless_the_reply_called_tools(text, calls, expected):
    assert scaffold.parse_reply(text, calls, ACTIONS, [LOOKUP], "text") == expected


@pytest.mark.parametrize(("calls", "expected"), TOOLS_CASES.values(), ids=TOOLS_CASES.keys())
def test_tools_mode_reads_exactly_one_action_call_and_never_an_action_line(calls, expected):
    assert scaffold.parse_reply("ACTION: RESET", calls, ACTIONS, [LOOKUP], "tools") == expected


def test_a_tool_round_is_neither_an_action_nor_a_problem():
    assert ParsedReply(None).is_tool_round and not ParsedReply("WAIT").is_tool_round
    assert not ParsedReply(None, "no action").is_tool_round
