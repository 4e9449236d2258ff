"""Strategy machines, one module each; this package maps a profile's `runtime.state` to its module."""

from __future__ import annotations

from typing import TYPE_CHECKING

from turnstate.machine.engine import LiveMachine, MachineModel, MachineSpec
from turnstate.strategies import manual_rolling

if TYPE_CHECKING:
    from turnstate.machine.config import Profile

# Every machine turnstate declares: what `turnstate diagrams` draws and the coverage gate checks.
MACHINES: dict[str, MachineSpec] = {spec.name: spec for spec in (manual_rolling.SPEC,)}

# The class whose methods implement each machine's named guards and actions.
MODELS: dict[str, type[MachineModel]] = {manual_rolling.SPEC.name: manual_rolling.ManualRolling}

_STARTERS = {manual_rolling.STRATEGY: manual_rolling.start_from_profile}


def start_strategy(profile: Profile, system_prompt: str) -> LiveMachine:
    """A live machine for the profile's strategy, resting in its initial state on a fresh state."""
    return _STARTERS[profile.runtime.state](profile, system_prompt)
