"""The task scaffold the runner owns: what the model is told, and how an action is read back.

Strategies never see these rules; they only carry whatever text the scaffold renders.

A model acts in one of two ways, the profile's `agent.action_mode`:
- text: one line `ACTION: <name> [values]` in its reply;
- tools: exactly one call of an action tool (each action is a function tool named as the action,
  with the JSON Schema of its arguments).
An action with arguments is its name followed by the argument values in the order of its schema's
`properties`, space-separated (`MARK 3 5`), whichever way it was given: that text is what the
environment steps. Either way the reply may also call the read-only tools it is offered; a reply with
calls and no action is a tool round, answered before the model is asked again, and in text mode an
action is never read from a reply that made calls (the calls come first: their results may change
what the model would do).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from turnstate.adapters.contract import ToolCall, ToolSpec

ActionMode = Literal["text", "tools"]

_ACTION_LINE = re.compile(r"^ACTION:[ \t]*(\S.*?)[ \t]*$", re.MULTILINE)
NO_PARAMETERS: Mapping[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}


def action_tools(actions: Sequence[str | ToolSpec]) -> tuple[ToolSpec, ...]:
    """Every action as a tool: a ToolSpec as given, a bare name as a tool without parameters."""
    return tuple(
        action if isinstance(action, ToolSpec) else ToolSpec(action, f"Take the action {action}.", NO_PARAMETERS)
        for action in actions
    )


def system_prompt(actions: Sequence[ToolSpec], mode: ActionMode = "text", tools: Sequence[ToolSpec] = ()) -> str:
    """What the model is told, the way to act included (the one way `parse_reply` accepts in `mode`),
    and the read-only tools it may call first."""
    if mode == "tools":
        shown = "Each user message or action result shows the latest frame"
        how = f"act by calling exactly one of the action tools, once: {', '.join(spec.name for spec in actions)}."
    else:
        shown = "Each user message shows the latest frame"
        names = ", ".join(" ".join([spec.name, *(f"<{name}>" for name in _properties(spec))]) for spec in actions)
        how = f"answer with exactly one line of the form 'ACTION: <name>', where <name> is one of: {names}."
    looking = (
        f" Before acting you may call these tools to look things up: {', '.join(spec.name for spec in tools)}."
        if tools
        else ""
    )
    return (
        "You are an agent playing a turn-based grid game. "
        f"{shown} of the game as text (sometimes several frames, oldest first).{looking} Think briefly, then {how}"
    )


@dataclass(frozen=True)
class ParsedReply:
    """What a reply did: its action (as the environment steps it), or why it has none; the call that
    named the action in tools mode; and whether it is a tool round (calls to answer, no action)."""

    action: str | None
    problem: str | None = None
    action_call: ToolCall | None = None

    @property
    def is_tool_round(self) -> bool:
        return self.action is None and self.problem is None


def parse_reply(
    text: str,
    calls: Sequence[ToolCall],
    actions: Sequence[ToolSpec],
    tools: Collection[str] = (),
    mode: ActionMode = "text",
) -> ParsedReply:
    """Read a reply's action through the one way `mode` allows (module docstring); `tools` are the
    names of the read-only tools offered. A call of a tool that was not offered, two actions, an
    action the space does not hold or arguments its schema refuses are problems (the reply is
    rejected); calls of read-only tools alone are a tool round."""
    by_name = {spec.name: spec for spec in actions}
    offered = {*tools, *(by_name if mode == "tools" else ())}
    for call in calls:
        if call.name not in offered:
            return ParsedReply(None, f"the reply calls {call.name!r}, which is not an offered tool")
    if mode == "tools":
        acting = [call for call in calls if call.name in by_name]
        if len(acting) > 1:
            return ParsedReply(None, f"the reply calls {len(acting)} action tools; exactly one is allowed")
        if not acting:
            return ParsedReply(None, None if calls else "the reply called no action tool")
        try:
            return ParsedReply(action_text(by_name[acting[0].name], acting[0].arguments), action_call=acting[0])
        except ValueError as refused:
            return ParsedReply(None, str(refused))
    if calls:
        return ParsedReply(None)  # a tool round: its results come first
    lines = _ACTION_LINE.findall(text)
    if not lines:
        return ParsedReply(None, "the reply has no 'ACTION: <name>' line")
    if len(lines) > 1:
        return ParsedReply(None, f"the reply names {len(lines)} actions; exactly one is allowed")
    name, *values = lines[0].split()
    if name not in by_name:
        return ParsedReply(None, f"unknown action {name!r}")
    spec = by_name[name]
    names = list(_properties(spec))
    if len(values) != len(names):
        return ParsedReply(None, f"action {name} takes {len(names)} values ({' '.join(names) or 'none'})")
    try:
        return ParsedReply(action_text(spec, dict(zip(names, map(_value, values), strict=True))))
    except ValueError as refused:
        return ParsedReply(None, str(refused))


def action_text(spec: ToolSpec, arguments: Mapping[str, object]) -> str:
    """The action as the environment steps it: the name, then each argument's value in the order of
    the schema's properties. Raises ValueError naming what the schema refuses (a missing or unknown
    argument, a value of the wrong type or out of range): the subset of JSON Schema action tools use."""
    properties = _properties(spec)
    unknown = sorted(set(arguments) - set(properties))
    if unknown:
        raise ValueError(f"action {spec.name} has no argument {unknown[0]!r}")
    values = []
    for name, schema in properties.items():
        if name not in arguments:
            raise ValueError(f"action {spec.name} needs its argument {name!r}")
        values.append(str(_checked(spec.name, name, schema, arguments[name])))
    return " ".join([spec.name, *values])


def _checked(action: str, name: str, schema: Mapping[str, Any], value: object) -> object:
    kind = schema.get("type")
    where = f"action {action} argument {name!r}"
    if kind == "integer" and (isinstance(value, bool) or not isinstance(value, int)):
        raise ValueError(f"{where} must be an integer, got {value!r}")
    if kind == "string" and not isinstance(value, str):
        raise ValueError(f"{where} must be a string, got {value!r}")
    if isinstance(value, str) and (not value or value.split() != [value]):
        raise ValueError(f"{where} must be one word, got {value!r}")  # the action text is space-separated
    if "enum" in schema and value not in schema["enum"]:
        raise ValueError(f"{where} must be one of {schema['enum']}, got {value!r}")
    low, high = schema.get("minimum"), schema.get("maximum")
    if isinstance(value, int) and (low is not None and value < low or high is not None and value > high):
        raise ValueError(f"{where} must be from {low} to {high}, got {value}")
    return value


def _properties(spec: ToolSpec) -> Mapping[str, Mapping[str, Any]]:
    properties = spec.parameters.get("properties")
    return properties if isinstance(properties, Mapping) else {}


def _value(text: str) -> object:
    """An ACTION line's value as its argument: an integer where it reads as one, else the word."""
    try:
        return int(text)
    except ValueError:
        return text


GRAMMAR_CHOICES = 256  # the most values an argument's grammar lists one by one (an integer range, an enum)
THOUGHT_CHARS = 120  # what a thinking grammar lets the model think before its action line (a token each, at worst)


def action_grammar(actions: Sequence[ToolSpec], thinking: bool = False) -> str:
    """A GBNF grammar (llama.cpp's `grammar` request field) whose every sentence is a reply
    `parse_reply` accepts in text mode: `ACTION: <name> [values]`, each value one its schema allows,
    after `<think>...</think>` (at most THOUGHT_CHARS characters, no `<`) when `thinking`, which a
    server's reasoning parser then returns apart. Raises ValueError naming an argument whose schema
    a grammar cannot list (a type other than integer, string enum or boolean, or more than
    GRAMMAR_CHOICES values)."""
    lines = [
        'root ::= "<think>" thought "</think>\\n" "ACTION: " action' if thinking else 'root ::= "ACTION: " action',
        "action ::= " + " | ".join(_spec_sentence(spec) for spec in actions),
    ]
    if thinking:
        lines.append(f"thought ::= [^<]{{0,{THOUGHT_CHARS}}}")
    return "\n".join(lines) + "\n"


def _spec_sentence(spec: ToolSpec) -> str:
    values = [_choices(spec.name, name, schema) for name, schema in _properties(spec).items()]
    return "(" + " ".join([_gbnf_literal(spec.name), *(f'" " ({value})' for value in values)]) + ")"


def _choices(action: str, name: str, schema: Mapping[str, Any]) -> str:
    where = f"action {action} argument {name!r}"
    if "enum" in schema:
        choices = [str(value) for value in schema["enum"]]
    elif (
        schema.get("type") == "integer"
        and isinstance(schema.get("minimum"), int)
        and isinstance(schema.get("maximum"), int)
    ):
        choices = [str(value) for value in range(schema["minimum"], schema["maximum"] + 1)]
    elif schema.get("type") == "boolean":
        raise ValueError(f"{where} is a boolean, which an ACTION line cannot write")
    else:
        raise ValueError(
            f"{where}: a grammar lists an argument's values, and its schema gives no enum or integer range"
        )
    if not choices or len(choices) > GRAMMAR_CHOICES:
        raise ValueError(f"{where} has {len(choices)} values; a grammar lists 1 to {GRAMMAR_CHOICES}")
    return " | ".join(_gbnf_literal(choice) for choice in choices)


def _gbnf_literal(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
