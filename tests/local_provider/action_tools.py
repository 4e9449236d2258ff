"""Tools the local provider's tests offer, written once and spelled in each wire's shape.

An environment's actions are offered as function tools named as the actions (the harness's tools
mode): beacon_grid's take no arguments; MARK stands for an action with coordinates, its integer x
and y mapped from the values of an `ACTION: MARK x y` line.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from turnstate.environments import make_environment

Schema = Mapping[str, Any]
NO_ARGUMENTS: Schema = {"type": "object", "properties": {}}
GAME_ACTIONS: tuple[str, ...] = make_environment("beacon_grid", 1).actions
MARK_SCHEMA: Schema = {
    "type": "object",
    "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
    "required": ["x", "y"],
}


def chat_tool(name: str, schema: Schema = NO_ARGUMENTS) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": f"Do {name}.", "parameters": schema}}


def responses_tool(name: str, schema: Schema = NO_ARGUMENTS) -> dict[str, Any]:
    return {"type": "function", "name": name, "description": f"Do {name}.", "parameters": schema}


def messages_tool(name: str, schema: Schema = NO_ARGUMENTS) -> dict[str, Any]:
    return {"name": name, "description": f"Do {name}.", "input_schema": schema}


interactions_tool = responses_tool  # the Interactions API's function tool has the Responses shape


def game_tools(shape: Any) -> list[dict[str, Any]]:
    """beacon_grid's actions, each a tool without arguments, in `shape` (one of the functions above)."""
    return [shape(action) for action in GAME_ACTIONS]
