"""The check every table test makes of one row: what a machine does with one event after others."""

from __future__ import annotations

import enum
from collections.abc import Sequence

from turnstate.machine.engine import Event, LiveMachine


def check_row(
    machine: LiveMachine, before: Sequence[Event], event: Event, dest: enum.Enum | str, effect_types: list[type]
) -> None:
    """Fire `before`, then `event`: the machine must rest in `dest` (a state, or a nested state's path
    such as "Compacting_Requesting") and have asked for effects of exactly `effect_types`, in order."""
    for earlier in before:
        machine.fire(earlier)
    effects = machine.fire(event)
    assert machine.path == (dest.name if isinstance(dest, enum.Enum) else dest)
    assert [type(effect) for effect in effects] == effect_types
