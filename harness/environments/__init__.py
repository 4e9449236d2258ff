"""The games an agent plays, behind one small protocol.

The harness only needs to reset a game, step it with an action name and read back a text frame, so
that is all the protocol asks; everything game-specific (options, rules, rendering) stays in the
game's own module. Environments are built by name from a profile through `make_environment`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Protocol


class GameState(str, Enum):
    NOT_FINISHED = "NOT_FINISHED"
    WIN = "WIN"
    GAME_OVER = "GAME_OVER"


@dataclass(frozen=True)
class Frame:
    """What the agent is shown after reset or a step; `text` is all a model ever sees."""

    text: str
    state: GameState
    level: int  # 1-based current level
    levels: int  # total levels


class Environment(Protocol):
    name: str
    actions: tuple[str, ...]

    def reset(self) -> Frame:
        """Start (or restart) the whole game at level 1."""
        ...

    def step(self, action: str) -> Frame:
        """Apply one action; an action the current state does not allow raises ValueError."""
        ...


class EnvironmentConfigError(ValueError):
    """An unknown environment name, or an unknown or invalid option; raised before any play."""


EnvironmentFactory = Callable[[int, Mapping[str, object]], Environment]

# Imported after the shared types above, which the game modules import from this package.
from turnstate.harness.environments.beacon_grid import BeaconGrid  # noqa: E402

ENVIRONMENTS: dict[str, EnvironmentFactory] = {
    BeaconGrid.name: BeaconGrid.from_options,
}


def make_environment(name: str, seed: int, options: Mapping[str, object] | None = None) -> Environment:
    """Build the named environment; the same name, seed and options always give the same game."""
    factory = ENVIRONMENTS.get(name)
    if factory is None:
        allowed = ", ".join(sorted(ENVIRONMENTS))
        raise EnvironmentConfigError(f"unknown environment {name!r}; allowed environments: {allowed}")
    return factory(seed, options or {})
