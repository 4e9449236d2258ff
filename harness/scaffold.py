"""The task scaffold the runner owns: what the model is told, and how an action is read back.

Strategies never see these rules; they only carry whatever text the scaffold renders.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

_ACTION_LINE = re.compile(r"^ACTION:\s*(\S+)\s*$", re.MULTILINE)


def system_prompt(actions: Sequence[str], action_tool: str | None = None) -> str:
    """What the model is told, the way to act included: through the adapter's action channel (its
    `action_tool`, or an ACTION line), since `parse_action` accepts that channel alone."""
    how = (
        f"act by calling the {action_tool} tool exactly once, with its action argument set to one of"
        if action_tool is not None
        else "answer with exactly one line of the form 'ACTION: <name>', where <name> is one of"
    )
    return (
        "You are an agent playing a turn-based grid game. Each user message shows the latest frame "
        "of the game as text (sometimes several frames, oldest first). Think briefly, then "
        f"{how}: {', '.join(actions)}."
    )


@dataclass(frozen=True)
class ParsedAction:
    action: str | None
    problem: str | None = None


def parse_action(text: str, allowed: Sequence[str], tool_actions: Sequence[str] | None = None) -> ParsedAction:
    """Exactly one 'ACTION: <name>' line naming an allowed action, or, for an adapter that asks for the
    action through a tool, exactly one call of it naming one; anything else is rejected."""
    if tool_actions is not None:
        return _one_allowed(list(tool_actions), allowed, "the reply made no call of the action tool")
    return _one_allowed(_ACTION_LINE.findall(text), allowed, "the reply has no 'ACTION: <name>' line")


def _one_allowed(names: list[str], allowed: Sequence[str], none_given: str) -> ParsedAction:
    if not names:
        return ParsedAction(None, none_given)
    if len(names) > 1:
        return ParsedAction(None, f"the reply names {len(names)} actions; exactly one is allowed")
    if names[0] not in allowed:
        return ParsedAction(None, f"unknown action {names[0]!r}")
    return ParsedAction(names[0])
