"""corridor: a third-party environment the tests install on the fly as the distribution
`turnstate-corridor`, registered through turnstate's `turnstate.environments` entry-point group.

Each level is a one-row corridor: the player `@` starts at the west end, doors A and B wait at the
east end, and the level's beacon (drawn from the seed) shows in every frame. Entering the beacon opens
the next level, or wins after the last; the other door is GAME_OVER until RESET. Its frames use
beacon_grid's layout of lines, which the embedded local provider's model reads, but it is written
against the protocol's types alone, as a package of someone else's would be.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

from turnstate.environments import RESET, EnvironmentConfigError, Frame, GameState, Receipt

LEFT, RIGHT, ENTER = "ACTION3", "ACTION4", "ACTION5"
FLOOR_CELLS = 5
DOORS = "AB"
MAX_LEVELS = 20


class Corridor:
    name = "corridor"
    actions = (LEFT, RIGHT, ENTER, RESET)

    def __init__(self, seed: int, levels: int) -> None:
        self.seed, self.levels = seed, levels
        self._frame: Frame | None = None
        self._receipts: list[Receipt] = []
        self._level, self._position, self._state = 1, 0, GameState.NOT_FINISHED

    def reset(self) -> Frame:
        self._receipts = []
        self._level = 1
        self._restart()
        return self._show()

    def observe(self) -> Frame:
        if self._frame is None:
            raise RuntimeError("corridor: call reset() first")
        return self._frame

    def step(self, action: str) -> Frame:
        allowed = {GameState.NOT_FINISHED: self.actions, GameState.GAME_OVER: (RESET,), GameState.WIN: ()}
        if self._frame is None or action not in allowed[self._state]:
            raise ValueError(f"corridor: {action!r} is not allowed now")
        self._receipts.append(Receipt(len(self._receipts) + 1, action, self._apply(action)))
        return self._show()

    def receipts(self, since: int = 0) -> tuple[Receipt, ...]:
        return tuple(self._receipts[since:])

    def _apply(self, action: str) -> str:
        if action == RESET:
            self._restart()
            return f"level {self._level} restarted"
        if action in (LEFT, RIGHT):
            target = self._position + (1 if action == RIGHT else -1)
            if not 0 <= target < FLOOR_CELLS + len(DOORS):
                return "nothing"
            self._position = target
            return "player moved"
        door = self._door()
        if door is None:
            return "nothing"
        if door != self._beacon():
            self._state = GameState.GAME_OVER
            return f"wrong door {door} entered: game over"
        if self._level == self.levels:
            self._state = GameState.WIN
            return "game won"
        self._level += 1
        self._restart()
        return f"level {self._level} reached"

    def _restart(self) -> None:
        self._position, self._state = 0, GameState.NOT_FINISHED

    def _beacon(self) -> str:
        return random.Random(f"corridor:{self.seed}:{self._level}").choice(DOORS)

    def _door(self) -> str | None:
        return DOORS[self._position - FLOOR_CELLS] if self._position >= FLOOR_CELLS else None

    def _show(self) -> Frame:
        cells = "." * FLOOR_CELLS + DOORS
        row = cells[: self._position] + "@" + cells[self._position + 1 :]
        wall = "#" * (len(cells) + 2)
        door = self._door()
        text = "\n".join(
            [
                f"LEVEL {self._level}/{self.levels} | STATE {self._state.value}",
                f"BEACON (level {self._level}): {self._beacon()}",
                wall,
                f"#{row}#",
                wall,
                f"STANDING ON: {'floor' if door is None else f'door {door}'}",
                "ACTIONS ACTION3 left, ACTION4 right, ACTION5 enter door, RESET restart level",
            ]
        )
        self._frame = Frame(text, self._state, self._level, self.levels)
        return self._frame


def make(seed: int, options: Mapping[str, object]) -> Corridor:
    """The entry point's factory: (seed, options), as turnstate calls it."""
    unknown = sorted(set(options) - {"levels"})
    if unknown:
        raise EnvironmentConfigError(f"corridor has no option {unknown[0]!r}; allowed options: levels")
    levels = options.get("levels", 2)
    if not isinstance(levels, int) or isinstance(levels, bool) or not 1 <= levels <= MAX_LEVELS:
        raise EnvironmentConfigError(f"corridor option 'levels' must be an integer from 1 to {MAX_LEVELS}")
    return Corridor(seed, levels)


def broken(seed: int, options: Mapping[str, object]) -> Corridor:
    """A factory with a bug, as a third party's may have one."""
    raise KeyError("corridor map\nnot found")


def not_an_environment(seed: int, options: Mapping[str, object]) -> object:
    """A factory that returns something that is not an environment."""
    return {"seed": seed}
