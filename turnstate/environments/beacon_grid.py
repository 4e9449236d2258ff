"""beacon_grid: a small ARC-like grid game whose one hard part is remembering.

Rules it keeps:
- Each level is a walled grid with the player `@` and three doors `A`, `B`, `C`; exactly one door,
  the level's beacon, is correct. Layout and beacon are drawn from
  `random.Random(f"{seed}:{level}")`, so a seed always gives the same game.
- Every door is reachable from the start and at least MIN_DOOR_DISTANCE moves away from it.
- The beacon letter is shown only in the first frame of a level in a game (the frame returned by
  `reset()` for level 1, or by the step that wins the previous level). Every later frame of that
  level, including frames after a RESET, shows `dark`: an agent that does not carry the letter
  forward has to guess.
- ACTION1..4 move up/down/left/right (into a wall: stay put); ACTION5 enters the door under the
  player (on floor: nothing happens); ACTION6 waits; RESET puts the player back at the level's
  start.
- Entering the beacon opens the next level, or wins after the last one. Entering another door is
  GAME_OVER; from there only RESET is allowed, which restarts the same level. After WIN no step is
  allowed; `reset()` starts a new game.
- An action the state does not allow raises ValueError and changes nothing. Every applied action
  leaves a Receipt saying what it changed; `observe()` returns the current frame again, so it never
  spends a beacon. (levels.py keeps these lifecycle rules for both built-in games.)
- `render` says how a frame shows its grid: `text` (rows of symbols), `image` (the grid drawn as a
  PNG, `scale` px a cell, in the ARC-AGI-3 palette: GRID_COLOURS; in the text, the image's legend line
  where the rows were) or `both` (the rows, then the legend line, and the image). Everything else
  in the frame is text either way.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass

from turnstate.adapters.images import ImagePart
from turnstate.environments.frame_image import DEFAULT_SCALE, MAX_SCALE, MIN_SCALE, ImageLegend
from turnstate.environments.levels import RENDER, ChoiceOption, IntOption, LevelGame, validate_options
from turnstate.environments.protocol import RESET, GameState

Cell = tuple[int, int]  # (row, column)

ACTIONS: tuple[str, ...] = (
    "ACTION1",
    "ACTION2",
    "ACTION3",
    "ACTION4",
    "ACTION5",
    "ACTION6",
    "RESET",
)
MOVES: dict[str, Cell] = {
    "ACTION1": (-1, 0),
    "ACTION2": (1, 0),
    "ACTION3": (0, -1),
    "ACTION4": (0, 1),
}
ENTER = "ACTION5"
WAIT = "ACTION6"
NOTHING = "nothing"

DOORS = ("A", "B", "C")
WALL, FLOOR, PLAYER = "#", ".", "@"
MIN_DOOR_DISTANCE = 5
INTERIOR_CELLS_PER_WALL = 7
MAX_LAYOUT_ATTEMPTS = 10_000
DARK = "dark"

LEGEND_LINE = "LEGEND @ you, # wall, . floor, A B C doors"
ACTIONS_LINE = (
    "ACTIONS ACTION1 up, ACTION2 down, ACTION3 left, ACTION4 right, ACTION5 enter door, "
    "ACTION6 wait, RESET restart level"
)


OPTIONS: dict[str, IntOption | ChoiceOption] = {
    "levels": IntOption(default=3, low=1, high=1000),  # up to 1000 levels: runs of thousands of turns
    "width": IntOption(default=9, low=7, high=15),
    "height": IntOption(default=7, low=5, high=11),
    "render": RENDER,
    "scale": IntOption(default=DEFAULT_SCALE, low=MIN_SCALE, high=MAX_SCALE),
}
GRID_COLOURS: dict[int, str] = {0: FLOOR, 5: WALL, 9: PLAYER, 8: "A", 14: "B", 11: "C"}
"""A drawn grid's palette colour for each symbol: white floor, black walls, blue you, doors red A, green B, yellow C."""


@dataclass(frozen=True)
class Layout:
    """One level's fixed board; the player's position lives in the game, not here."""

    width: int
    height: int
    walls: frozenset[Cell]
    start: Cell
    doors: dict[str, Cell]  # door letter -> cell
    beacon: str

    def door_at(self, cell: Cell) -> str | None:
        for letter, door_cell in self.doors.items():
            if door_cell == cell:
                return letter
        return None


def walk_distances(start: Cell, walls: frozenset[Cell]) -> dict[Cell, int]:
    """Moves from `start` to every reachable cell (doors are walkable)."""
    distances = {start: 0}
    queue = deque([start])
    while queue:
        row, column = queue.popleft()
        for d_row, d_column in MOVES.values():
            neighbour = (row + d_row, column + d_column)
            if neighbour not in walls and neighbour not in distances:
                distances[neighbour] = distances[(row, column)] + 1
                queue.append(neighbour)
    return distances


def draw_layout(seed: int, level: int, width: int, height: int) -> Layout:
    """The level's board, re-drawn until three door cells lie far enough from the start."""
    rng = random.Random(f"{seed}:{level}")
    border = {
        (row, column)
        for row in range(height)
        for column in range(width)
        if row in (0, height - 1) or column in (0, width - 1)
    }
    interior = sorted({(row, column) for row in range(height) for column in range(width)} - border)
    wall_count = len(interior) // INTERIOR_CELLS_PER_WALL
    for _ in range(MAX_LAYOUT_ATTEMPTS):
        walls = frozenset(border | set(rng.sample(interior, wall_count)))
        start = rng.choice([cell for cell in interior if cell not in walls])
        distances = walk_distances(start, walls)
        far_cells = sorted(cell for cell, moves in distances.items() if moves >= MIN_DOOR_DISTANCE)
        if len(far_cells) >= len(DOORS):
            doors = dict(zip(DOORS, rng.sample(far_cells, len(DOORS)), strict=True))
            return Layout(width, height, walls, start, doors, beacon=rng.choice(DOORS))
    raise RuntimeError(f"beacon_grid: no layout found for seed {seed} level {level}")


class BeaconGrid(LevelGame[None]):
    """The game; one instance is one seeded game that `reset()` can restart from level 1."""

    name = "beacon_grid"
    actions = ACTIONS

    _layout: Layout
    _player: Cell
    _wrong_door: str | None

    def __init__(
        self, seed: int, levels: int, width: int, height: int, render: str = "text", scale: int = DEFAULT_SCALE
    ) -> None:
        self.seed = seed
        self.levels = levels
        self.width = width
        self.height = height
        self.render = render
        self.legend = ImageLegend(width, height, scale, GRID_COLOURS)

    @classmethod
    def from_options(cls, seed: int, options: Mapping[str, object]) -> BeaconGrid:
        return cls(seed, **validate_options(options, cls.name, OPTIONS))

    def _parse(self, action: str) -> tuple[str, None]:
        if action not in ACTIONS:
            raise ValueError(f"unknown action {action!r}; allowed actions: {', '.join(ACTIONS)}")
        return action, None

    def _apply(self, name: str, argument: None) -> str:
        if name == RESET:
            return self._restart()
        if name in MOVES:
            return "player moved" if self._move(MOVES[name]) else NOTHING
        if name == ENTER:
            return self._enter_door()
        return NOTHING  # WAIT

    def _draw_level(self) -> None:
        self._layout = draw_layout(self.seed, self._level, self.width, self.height)

    def _restart_level(self) -> None:
        super()._restart_level()
        self._player = self._layout.start
        self._wrong_door = None

    def _move(self, delta: Cell) -> bool:
        target = (self._player[0] + delta[0], self._player[1] + delta[1])
        if target in self._layout.walls:
            return False
        self._player = target
        return True

    def _enter_door(self) -> str:
        door = self._layout.door_at(self._player)
        if door is None:
            return NOTHING
        if door != self._layout.beacon:
            self._state = GameState.GAME_OVER
            self._wrong_door = door
            return f"wrong door {door} entered: game over"
        return self._level_won()

    def _render(self, first_frame_of_level: bool) -> str:
        """The view, the model's text included (the environment renders; see protocol.py)."""
        beacon = self._layout.beacon if first_frame_of_level else DARK
        door = self._layout.door_at(self._player)
        lines = [
            f"LEVEL {self._level}/{self.levels} | STATE {self._state.value}",
            f"BEACON (level {self._level}): {beacon}",
            *self._grid_view(),
            f"STANDING ON: {'floor' if door is None else f'door {door}'}",
        ]
        if self._wrong_door is not None:
            lines.append(f"YOU ENTERED DOOR {self._wrong_door}: WRONG DOOR")
        lines += [LEGEND_LINE, ACTIONS_LINE]
        return "\n".join(lines)

    def _rendered(self, first_frame_of_level: bool) -> tuple[str, tuple[ImagePart, ...]]:
        images = (self.legend.draw(self._grid_rows()),) if self.render != "text" else ()
        return self._render(first_frame_of_level), images

    def _grid_view(self) -> list[str]:
        """The grid as the frame's text shows it: its rows, the image's legend line, or both (`render`)."""
        rows = self._grid_rows() if self.render != "image" else []
        return rows if self.render == "text" else [*rows, self.legend.line()]

    def _grid_rows(self) -> list[str]:
        rows = []
        for row in range(self.height):
            rows.append("".join(self._symbol((row, column)) for column in range(self.width)))
        return rows

    def _symbol(self, cell: Cell) -> str:
        if cell == self._player:
            return PLAYER
        if cell in self._layout.walls:
            return WALL
        return self._layout.door_at(cell) or FLOOR
