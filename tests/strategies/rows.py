"""The check every table test makes of one row: what a machine does with one event after others."""

from __future__ import annotations

import enum
from collections.abc import Sequence

from turnstate.machine import coverage
from turnstate.machine.engine import Event, LiveMachine
from turnstate.strategies.events import FailClosed


def check_row(
    machine: LiveMachine, before: Sequence[Event], event: Event, dest: enum.Enum | str, effect_types: list[type]
) -> None:
    """Fire `before`, then `event`: the machine must rest in `dest` (a state, or a nested state's path
    such as "Compacting_Summarizing") and have asked for effects of exactly `effect_types`, in order;
    and the actions of the row that fired must have done what their names say (`ACTION_EFFECTS`).
    The row then counts as asserted for the coverage gate."""
    for earlier in before:
        machine.fire(earlier)
    retries_before = _retries_used(machine)
    fired_before = len(machine.fired)
    effects = machine.fire(event)
    assert machine.path == (dest.name if isinstance(dest, enum.Enum) else dest)
    assert [type(effect) for effect in effects] == effect_types
    # The event's row, and the parent's Done row when it finished a nested machine: checked together.
    taken = machine.fired[fired_before:]
    fired = taken[-1]
    actions = [action for each in taken for action in each.row.transition.actions]
    retries_after = _retries_used(machine)
    if retries_before is not None and retries_after is not None:  # the turn is still open
        spent = retries_after - retries_before
        assert spent == ("spend_retry" in actions), f"{fired}: spend_retry in {actions}, but {spent} retries spent"
    if "discard_provisional" in actions and machine.model.turn is not None:
        assert machine.model.turn.provisional is None, f"{fired}: the rejected reply is still held"
    if "fail_closed" in actions:
        assert machine.model.turn is None and isinstance(effects[-1], FailClosed), f"{fired}: the turn is not closed"
    for each in taken:
        coverage.asserted(each)


def _retries_used(machine: LiveMachine) -> int | None:
    turn = getattr(machine.model, "turn", None)
    return None if turn is None else turn.retries.used
