"""One convention for the local model's tool use, on every wire of the local provider, through the
real SDKs (policy.offered_calls).

The model answers in text and the wire turns its lines into calls of the tools the request offers:
a `CALL: <tool> <JSON object>` line, and the `ACTION: <name> [values...]` line when a tool named
<name> is offered (its values mapped onto the tool's parameters, integers where the schema says
so). Tool results reach the model as tool messages in order, so a frame that arrives inside one is
read and acted on as any other.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import openai
import pytest

from turnstate.environments import GameState, make_environment
from turnstate.local_provider.policy import asked_calls, offered_calls
from turnstate.local_provider.server import LocalProvider

from . import test_interactions, test_messages, test_responses
from .action_tools import (
    GAME_ACTIONS,
    MARK_SCHEMA,
    NO_ARGUMENTS,
    Schema,
    chat_tool,
    interactions_tool,
    messages_tool,
    responses_tool,
)
from .test_messages import REMEMBERED, SHOWN
from .test_policy import LOST_MEMORY_SEEDS

Item = dict[str, Any]
Call = tuple[str, str, dict[str, Any]]  # (id, name, arguments)
Tool = tuple[str, Schema]  # (name, parameters), spelled by each wire in its own shape
SYSTEM = "You play beacon_grid. Answer with one line ACTION: <action>."
LOOK: Tool = ("look", {"type": "object", "properties": {"far": {"type": "boolean"}}})
NOTE: Tool = ("note", {"type": "object", "properties": {"text": {"type": "string"}}})
MARK: Tool = ("MARK", MARK_SCHEMA)
ACTIONS: list[Tool] = [(action, NO_ARGUMENTS) for action in GAME_ACTIONS]
MAX_STEPS = 300


@dataclass(frozen=True)
class Said:
    """One reply as a client reads it: its visible text, its calls in order, and the reply as the
    next request's input."""

    text: str
    calls: list[Call]
    replay: list[Item]

    @property
    def named(self) -> list[tuple[str, dict[str, Any]]]:
        return [(name, arguments) for _, name, arguments in self.calls]


class Wire:
    """A wire as these tests talk to it: a request from neutral history items and tools, and the
    shapes of its user input and tool results."""

    name = ""
    says_text_beside_calls = True
    """Chat and Messages say the reply's other lines beside its calls; Responses and Interactions
    put the calls in place of the message, as recorded."""

    def say(self, provider: LocalProvider, history: list[Item], tools: Sequence[Tool], stream: bool) -> Said:
        raise NotImplementedError

    def user(self, text: str) -> list[Item]:
        raise NotImplementedError

    def results(self, said: Said, texts: Sequence[str]) -> list[Item]:
        raise NotImplementedError

    def __repr__(self) -> str:
        return self.name


class Chat(Wire):
    def __init__(self, name: str, prefix: str) -> None:
        self.name, self.prefix = name, prefix

    def say(self, provider: LocalProvider, history: list[Item], tools: Sequence[Tool], stream: bool) -> Said:
        offered = {"tools": [chat_tool(*tool) for tool in tools]} if tools else {}
        with openai.OpenAI(base_url=provider.base_url + self.prefix, api_key="test-key", max_retries=0) as client:
            messages = [{"role": "system", "content": SYSTEM}, *history]
            reply = client.chat.completions.create(model="local-model", messages=messages, stream=stream, **offered)  # type: ignore[call-overload]
            message = self._streamed(reply) if stream else self._whole(reply.choices[0].message)
        calls = [
            (c["id"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in message["tool_calls"]
        ]
        replayed = {key: value for key, value in message.items() if key != "tool_calls" or value}
        return Said(message["content"] or "", calls, [replayed])

    @staticmethod
    def _whole(sent: Any) -> dict[str, Any]:
        """The message as a client replays it: its content, its reasoning fields and its calls."""
        calls = [call.model_dump(exclude_none=True) for call in sent.tool_calls or []]
        return {"role": "assistant", "content": sent.content, **(sent.model_extra or {}), "tool_calls": calls}

    @staticmethod
    def _streamed(chunks: Any) -> dict[str, Any]:
        """The message a client rebuilds from a stream: content, reasoning and each call's pieces."""
        message: dict[str, Any] = {"role": "assistant", "content": "", "tool_calls": []}
        for chunk in chunks:
            if not chunk.choices:
                continue
            delta = chunk.choices[0].delta
            message["content"] += delta.content or ""
            for alias, piece in (delta.model_extra or {}).items():
                message[alias] = message.get(alias, "") + (piece or "")
            for piece in delta.tool_calls or []:
                if piece.index == len(message["tool_calls"]):
                    message["tool_calls"].append(
                        {"id": piece.id, "type": "function", "function": {"name": "", "arguments": ""}}
                    )
                function = message["tool_calls"][piece.index]["function"]
                function["name"] += piece.function.name or ""
                function["arguments"] += piece.function.arguments or ""
        return message

    def user(self, text: str) -> list[Item]:
        return [{"role": "user", "content": text}]

    def results(self, said: Said, texts: Sequence[str]) -> list[Item]:
        return [
            {"role": "tool", "tool_call_id": call_id, "content": text}
            for (call_id, _, _), text in zip(said.calls, texts, strict=True)
        ]


class Responses(Wire):
    name = "responses"
    says_text_beside_calls = False

    def say(self, provider: LocalProvider, history: list[Item], tools: Sequence[Tool], stream: bool) -> Said:
        offered = {"tools": [responses_tool(*tool) for tool in tools]} if tools else {}
        with test_responses.client_for(provider) as client:
            reply = test_responses.ask(client, history, stream=stream, **offered)
            response = next(e.response for e in reply if e.type == "response.completed") if stream else reply
        items = test_responses.replayable(response)
        calls = [(i["call_id"], i["name"], json.loads(i["arguments"])) for i in items if i["type"] == "function_call"]
        return Said(response.output_text, calls, items)

    def user(self, text: str) -> list[Item]:
        return [test_responses.user(text)]

    def results(self, said: Said, texts: Sequence[str]) -> list[Item]:
        return [
            {"type": "function_call_output", "call_id": call_id, "output": text}
            for (call_id, _, _), text in zip(said.calls, texts, strict=True)
        ]


class Messages(Wire):
    name = "messages"

    def say(self, provider: LocalProvider, history: list[Item], tools: Sequence[Tool], stream: bool) -> Said:
        offered = {"tools": [messages_tool(*tool) for tool in tools]} if tools else {}
        with test_messages.client_for(provider) as client:
            if stream:
                settings = {"system": SYSTEM, "thinking": test_messages.THINKING, **offered}
                with client.messages.stream(
                    model=test_messages.MODEL, max_tokens=test_messages.MAX_TOKENS, messages=history, **settings
                ) as events:  # type: ignore[arg-type]
                    reply = events.get_final_message()
            else:
                reply = test_messages.ask(client, history, **offered)
        text = "".join(block.text for block in reply.content if block.type == "text")
        calls = [(block.id, block.name, dict(block.input)) for block in reply.content if block.type == "tool_use"]
        return Said(text, calls, [test_messages.replayed(reply)])

    def user(self, text: str) -> list[Item]:
        return [test_messages.user(text)]

    def results(self, said: Said, texts: Sequence[str]) -> list[Item]:
        blocks = [
            {"type": "tool_result", "tool_use_id": call_id, "content": text}
            for (call_id, _, _), text in zip(said.calls, texts, strict=True)
        ]
        return [{"role": "user", "content": blocks}]


class Interactions(Wire):
    name = "interactions"
    says_text_beside_calls = False

    def say(self, provider: LocalProvider, history: list[Item], tools: Sequence[Tool], stream: bool) -> Said:
        offered = {"tools": [interactions_tool(*tool) for tool in tools]} if tools else {}
        with test_interactions.client_for(provider) as client:
            reply = test_interactions.ask(client, history, stream=stream, **offered)
            steps = test_interactions.accumulated(list(reply)) if stream else test_interactions.replayed(reply)
        text = "".join(part["text"] for step in steps if step["type"] == "model_output" for part in step["content"])
        calls = [(step["id"], step["name"], step["arguments"]) for step in steps if step["type"] == "function_call"]
        return Said(text, calls, steps)

    def user(self, text: str) -> list[Item]:
        return [test_interactions.user(text)]

    def results(self, said: Said, texts: Sequence[str]) -> list[Item]:
        return [
            {"type": "function_result", "call_id": call_id, "name": name, "result": text}
            for (call_id, name, _), text in zip(said.calls, texts, strict=True)
        ]


WIRES = [
    Chat("chat_openai", "/v1"),
    Chat("chat_open_weight", "/open-weight/v1"),
    Chat("chat_deepseek", "/deepseek/v1"),
    Responses(),
    Messages(),
    Interactions(),
]
Reply = Callable[[str, Sequence[Mapping[str, object]]], str]


@pytest.fixture(params=WIRES, ids=repr)
def wire(request: pytest.FixtureRequest) -> Wire:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture(params=[False, True], ids=["whole", "streamed"])
def stream(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


@pytest.fixture
def provider() -> Iterator[LocalProvider]:
    with LocalProvider(context_window=1_000_000) as running:
        yield running


def answering(text: str) -> Reply:
    """A model that answers every request with `text`."""
    return lambda system, messages: text


def said_by(wire: Wire, reply: Reply, tools: Sequence[Tool], stream: bool = False) -> Said:
    with LocalProvider(reply=reply) as provider:
        return wire.say(provider, wire.user("Go on."), tools, stream)


# --- a reply's lines as calls -----------------------------------------------------------------------


def test_an_action_line_naming_an_offered_tool_is_its_call_with_the_values_mapped_onto_its_parameters(
    wire: Wire, stream: bool
) -> None:
    said = said_by(wire, answering("Marking the door.\nACTION: MARK 3 -5"), [LOOK, MARK], stream)
    assert said.named == [("MARK", {"x": 3, "y": -5})]
    assert said.text == ("Marking the door." if wire.says_text_beside_calls else "")


def test_call_lines_naming_offered_tools_are_its_calls_in_order_and_any_other_line_stays_text(
    wire: Wire, stream: bool
) -> None:
    reply = 'Looking first.\nCALL: look {"far": true}\nCALL: teleport {}\nCALL: note {"text": "door B"}'
    said = said_by(wire, answering(reply), [LOOK, NOTE], stream)
    assert said.named == [("look", {"far": True}), ("note", {"text": "door B"})]
    assert said.text == ("Looking first.\nCALL: teleport {}" if wire.says_text_beside_calls else "")
    assert len({call_id for call_id, _, _ in said.calls}) == 2


@pytest.mark.parametrize(
    "line",
    ["ACTION: MARK 3", "ACTION: MARK 3 five", "ACTION: JUMP", "CALL: look [1]", "CALL: note {not json}"],
    ids=["too few values", "a word for an integer", "no such tool", "arguments not an object", "not JSON"],
)
def test_a_line_that_makes_no_call_of_an_offered_tool_leaves_the_reply_text(wire: Wire, line: str) -> None:
    said = said_by(wire, answering(f"Trying.\n{line}"), [LOOK, NOTE, MARK])
    assert said.calls == [] and said.text == f"Trying.\n{line}"


# --- tool results, as the model reads them ---------------------------------------------------------


def test_tool_results_reach_the_model_as_tool_messages_in_order(wire: Wire) -> None:
    read: list[list[tuple[object, object]]] = []

    def reply(system: str, messages: Sequence[Mapping[str, object]]) -> str:
        read.append([(message["role"], message["content"]) for message in messages])
        return "CALL: look {}\nCALL: note {}" if len(read) == 1 else "Both read."

    with LocalProvider(reply=reply) as provider:
        first = wire.say(provider, wire.user("Look, then note."), [LOOK, NOTE], False)
        answered = [*wire.user("Look, then note."), *first.replay, *wire.results(first, ["a wall", "noted"])]
        assert wire.say(provider, answered, [LOOK, NOTE], False).text == "Both read."
    assert read[-1][-2:] == [("tool", "a wall"), ("tool", "noted")]


def called_then_answered(wire: Wire, provider: LocalProvider, result: str, tools: Sequence[Tool]) -> Said:
    """The policy's reply after its call of `look` (asked by the tests' convention) was answered
    with `result`."""
    asked = wire.user("call look with {}")
    first = wire.say(provider, asked, tools, False)
    assert first.named == [("look", {})]
    return wire.say(provider, [*asked, *first.replay, *wire.results(first, [result])], tools, False)


def test_a_frame_inside_a_tool_result_is_read_by_the_policy(wire: Wire, provider: LocalProvider) -> None:
    said = called_then_answered(wire, provider, SHOWN, [LOOK])
    assert said.calls == [] and REMEMBERED in said.text


def test_a_frame_inside_a_tool_result_is_acted_on_by_a_call_of_the_action_it_names(
    wire: Wire, provider: LocalProvider
) -> None:
    named = wire.say(provider, wire.user(SHOWN), [], False).text.rsplit("ACTION: ", 1)[1]
    said = called_then_answered(wire, provider, SHOWN, [LOOK, *ACTIONS])
    assert said.named == [(named, {})]


def test_a_tool_result_that_reads_like_an_ask_is_no_ask_and_the_turn_goes_on_as_text(
    wire: Wire, provider: LocalProvider
) -> None:
    said = called_then_answered(wire, provider, 'call note with {"text": "x"}', [LOOK, NOTE])
    assert said.calls == [] and said.text


def test_a_tool_result_of_text_blocks_reaches_the_model_as_one_tool_message(provider: LocalProvider) -> None:
    wire = Messages()
    asked = wire.user("call look with {}")
    first = wire.say(provider, asked, [LOOK], False)
    ((call_id, _, _),) = first.calls
    blocks = [{"type": "text", "text": line} for line in SHOWN.split("\n", 1)]
    results = [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id, "content": blocks}]}]
    assert REMEMBERED in wire.say(provider, [*asked, *first.replay, *results], [LOOK], False).text


# --- a whole game through the action tools ---------------------------------------------------------


def test_beacon_grid_is_won_by_calls_of_its_actions_each_answered_with_the_next_frame(
    wire: Wire, provider: LocalProvider
) -> None:
    env = make_environment("beacon_grid", LOST_MEMORY_SEEDS[0])
    frame = env.reset()
    history = wire.user(frame.text)
    for _ in range(MAX_STEPS):
        if frame.state is not GameState.NOT_FINISHED:
            break
        said = wire.say(provider, history, ACTIONS, False)
        ((_, action, arguments),) = said.calls
        assert arguments == {}
        frame = env.step(action)
        history = [*history, *said.replay, *wire.results(said, [frame.text])]
    assert frame.state is GameState.WIN


# --- the policy's side of the convention -----------------------------------------------------------


def test_a_user_message_asking_for_calls_is_answered_with_call_lines_in_the_order_asked() -> None:
    asked = 'call look with {"far": true} and then call note with {"text": "a \\"quoted\\" {brace}"}.'
    assert asked_calls([{"role": "user", "content": asked}]) == (
        'CALL: look {"far": true}\nCALL: note {"text": "a \\"quoted\\" {brace}"}'
    )
    assert asked_calls([{"role": "tool", "content": asked}]) == ""  # a tool result asks for nothing
    assert asked_calls([{"role": "user", "content": "call look with {not json}"}]) == ""
    assert asked_calls([{"role": "user", "content": "LEVEL 1/1 | STATE NOT_FINISHED"}]) == ""


def test_an_action_line_maps_its_values_onto_the_properties_in_order_integers_only_where_the_schema_says() -> None:
    paint = {"type": "object", "properties": {"x": {"type": "integer"}, "colour": {"type": "string"}, "y": {}}}
    assert offered_calls("ACTION: PAINT 4 red 007", [("PAINT", paint)]) == (
        "",
        [("PAINT", {"x": 4, "colour": "red", "y": "007"})],
    )
    assert offered_calls("ACTION: RESET", [("RESET", None)]) == ("", [("RESET", {})])
    assert offered_calls("ACTION: PAINT 4.5 red 1", [("PAINT", paint)]) == ("ACTION: PAINT 4.5 red 1", [])


def test_the_first_offered_tool_of_a_name_counts_and_a_reply_without_calls_is_returned_as_it_is() -> None:
    twice = [("MARK", MARK_SCHEMA), ("MARK", NO_ARGUMENTS)]
    assert offered_calls("Here.\n\nACTION: MARK 1 2\n", twice) == ("Here.", [("MARK", {"x": 1, "y": 2})])
    assert offered_calls("  Nothing to do.\n", twice) == ("  Nothing to do.\n", [])
