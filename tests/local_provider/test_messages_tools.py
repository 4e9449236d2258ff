"""Function tools on the local provider's Anthropic Messages wire, through the real anthropic SDK.

The model calls the tools it is offered when the current turn asks ("call TOOL with ARGS", the tests'
convention) or, offered the game's actions as tools, to act; the wire holds calls and results to Anthropic's
pairing rules with the service's own 400s (messages_conversation.py, rule 5).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

from turnstate.local_provider.server import LocalProvider

from .action_tools import game_tools, messages_tool
from .test_messages import DARK, SHOWN, Turn, ask, client_for, refused, replayed, user

LOOK = {"name": "look", "description": "Look around.", "input_schema": {"type": "object"}}
MOVE = {"name": "move", "description": "Move.", "input_schema": {"type": "object", "properties": {"to": {}}}}
ACTIONS = game_tools(messages_tool)
ASK_TWO = 'call look with {"far": true} and call move with {"to": "door C"}'


@pytest.fixture
def client() -> Iterator[anthropic.Anthropic]:
    with LocalProvider() as provider, client_for(provider) as sdk_client:
        yield sdk_client


def streamed(client: anthropic.Anthropic, messages: list[Turn], **params: Any) -> Any:
    with client.messages.stream(
        model="claude-sonnet-4-6", max_tokens=2048, system="s", messages=messages, **params
    ) as stream:  # type: ignore[arg-type]
        return stream.get_final_message()


def calls_of(reply: Any) -> list[tuple[str, str, dict[str, Any]]]:
    return [(block.type, block.name, block.input) for block in reply.content if block.type == "tool_use"]


def result(call_id: str, content: str = "seen", **fields: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": content, **fields}


def test_the_model_makes_the_calls_the_input_asks_for_in_order_after_its_thinking(client) -> None:
    reply = ask(client, [user(ASK_TWO)], tools=[LOOK, MOVE])
    kinds = [block.type for block in reply.content]
    assert reply.stop_reason == "tool_use" and kinds[0] == "thinking" and kinds[-2:] == ["tool_use", "tool_use"]
    assert calls_of(reply) == [("tool_use", "look", {"far": True}), ("tool_use", "move", {"to": "door C"})]
    ids = [block.id for block in reply.content if block.type == "tool_use"]
    assert len(set(ids)) == 2 and all(call_id.startswith("toolu_") for call_id in ids)


def test_a_streamed_reply_accumulates_the_same_calls(client) -> None:
    reply = streamed(client, [user(ASK_TWO)], tools=[LOOK, MOVE])
    assert reply.stop_reason == "tool_use"
    assert calls_of(reply) == [("tool_use", "look", {"far": True}), ("tool_use", "move", {"to": "door C"})]


def test_a_line_naming_no_offered_tool_stays_text_and_ends_the_turn(client) -> None:
    assert ask(client, [user(SHOWN)], tools=[LOOK]).stop_reason == "end_turn"  # its ACTION line names no tool
    for asked, tools in (('call look with {"far": true}', []), ('call jump with {"far": true}', [LOOK])):
        reply = ask(client, [user(asked)], tools=tools)
        assert reply.stop_reason == "end_turn" and not calls_of(reply)
        assert [block.text for block in reply.content if block.type == "text"] == [
            asked.replace("call ", "CALL: ").replace(" with ", " ")
        ]


def test_offered_the_actions_as_tools_the_model_acts_by_calling_the_one_its_action_line_names(client) -> None:
    said = "".join(block.text for block in ask(client, [user(SHOWN)]).content if block.type == "text")
    reply = ask(client, [user(SHOWN)], tools=ACTIONS)
    assert reply.stop_reason == "tool_use"
    assert calls_of(reply) == [("tool_use", said.rsplit("ACTION: ", 1)[1], {})]
    assert [block.text for block in reply.content if block.type == "text"] == [said.rsplit("\nACTION: ", 1)[0]]


def calling(client: anthropic.Anthropic) -> tuple[list[Turn], list[str]]:
    """A conversation that ends with a reply making two calls, and their ids."""
    reply = ask(client, [user(ASK_TWO)], tools=[LOOK, MOVE])
    ids = [block.id for block in reply.content if block.type == "tool_use"]
    return [user(ASK_TWO), replayed(reply)], ids


def test_results_first_in_the_next_message_are_accepted_and_the_model_reads_them(client) -> None:
    history, (first, second) = calling(client)
    answered = {"role": "user", "content": [result(first, SHOWN), result(second, "moved", is_error=True)]}
    reply = ask(client, [*history, answered, user("and now?")], tools=[LOOK, MOVE])
    assert reply.stop_reason == "end_turn"
    assert "heading for door C (beacon seen)" in "".join(b.text for b in reply.content if b.type == "text")


def test_a_call_without_its_result_right_after_is_the_services_400(client) -> None:
    history, (first, second) = calling(client)
    cases = [
        [*history, {"role": "user", "content": [result(first)]}],  # one of two answered
        [*history, user(DARK)],  # answered by text
        [*history, {"role": "user", "content": [{"type": "text", "text": "x"}, result(first), result(second)]}],
        history,  # the calls end the request
    ]
    expected = [second, f"{first}, {second}", f"{first}, {second}", f"{first}, {second}"]
    for messages, missing in zip(cases, expected, strict=True):
        with pytest.raises(anthropic.BadRequestError) as raised:
            ask(client, messages, tools=[LOOK, MOVE])
        assert raised.value.status_code == 400
        assert refused(raised) == (
            f"messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: {missing}. "
            "Each `tool_use` block must have a corresponding `tool_result` block in the next message."
        )


def test_a_result_without_its_call_is_the_services_400(client) -> None:
    history, (first, second) = calling(client)
    stray = {"role": "user", "content": [result(first), result(second), result("toolu_other")]}
    with pytest.raises(anthropic.BadRequestError) as raised:
        ask(client, [*history, stray], tools=[LOOK, MOVE])
    assert refused(raised) == (
        "messages.2.content.2: unexpected `tool_use_id` found in `tool_result` blocks: toolu_other. "
        "Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
    )
    with pytest.raises(anthropic.BadRequestError) as raised:
        ask(client, [{"role": "user", "content": [result(first)]}], tools=[LOOK, MOVE])
    assert refused(raised).startswith("messages.0.content.0: unexpected `tool_use_id` found in `tool_result` blocks")


def test_a_second_result_for_one_call_is_the_services_400(client) -> None:
    history, (first, second) = calling(client)
    twice = {"role": "user", "content": [result(first), result(second), result(first)]}
    with pytest.raises(anthropic.BadRequestError) as raised:
        ask(client, [*history, twice], tools=[LOOK, MOVE])
    assert refused(raised) == (
        f"messages.2.content.2: each tool_use must have a single result. Found multiple `tool_result` blocks with id: "
        f"{first}"
    )


@pytest.mark.parametrize(
    ("block", "message"),
    [
        ({"type": "tool_use", "id": "toolu_1", "name": "look", "input": "{}"}, "tool_use.input: Input should be"),
        ({"type": "tool_use", "id": "toolu_1", "name": "look"}, "tool_use.input: Field required"),
        ({"type": "tool_use", "name": "look", "input": {}}, "tool_use.id: Field required"),
    ],
    ids=["input not an object", "no input", "no id"],
)
def test_a_malformed_call_is_a_400_naming_its_field(client, block: dict[str, Any], message: str) -> None:
    messages = [user(DARK), {"role": "assistant", "content": [block]}, {"role": "user", "content": [result("toolu_1")]}]
    with pytest.raises(anthropic.BadRequestError) as raised:
        ask(client, messages, tools=[LOOK], thinking={"type": "disabled"})
    assert message in refused(raised)


def test_the_calls_are_in_the_usage_the_reply_bills(client) -> None:
    off = {"type": "disabled"}
    plain = ask(client, [user("call look with {}")], tools=[LOOK], thinking=off)
    heavy = ask(client, [user("call look with " + json.dumps({"x": "y" * 400}))], tools=[LOOK], thinking=off)
    assert heavy.usage.output_tokens > plain.usage.output_tokens + 90
