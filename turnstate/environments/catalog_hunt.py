"""catalog_hunt: a board game played through tools, whose clue points into a large read-only catalog.

Rules it keeps:
- Each level's target is one cell of a WIDTH x HEIGHT board (x the column, y the row, 0-based). The
  level's clue names a catalog page and an entry on it (`catalog page P entry E`); that entry gives
  the target cell. Clue and catalog are drawn from `random.Random(f"{seed}:{level}")` and
  `random.Random(f"{seed}:page:{page}")`, so a seed (with the same options) always gives the same game.
- The catalog is fixed for the game (not per level): `pages` pages, each 3000-5000 characters headed
  `CATALOG PAGE P`, with 8-16 entries `ENTRY e: cell x=X y=Y` among filler text. The read-only tool
  `read_catalog(page)` answers a page's text. It never changes the game or its receipts, and it
  refuses (ToolRefused) an unknown tool and any argument its JSON Schema refuses: a missing, extra,
  non-integer or out-of-range one. An integral number such as 3.0 is an integer, as JSON Schema says.
- The clue is shown only in the first frame of a level in a game (the frame returned by `reset()`
  for level 1, or by the step that wins the previous level); every later frame of that level,
  including frames after a RESET, shows `dark`. Pages are large, so a window fills fast and drops the
  clue's frame: an agent that does not carry the clue forward has to guess.
- `MARK x y` marks a cell: the target opens the next level, or wins after the last one; any other
  cell is GAME_OVER, from which only RESET is allowed, which restarts the same level (clue dark).
  WAIT does nothing. After WIN no step is allowed; `reset()` starts a new game.
- An action is its name and then its argument values, space-separated, exactly (`MARK 3 5`, `WAIT`),
  as the protocol writes an action with arguments. Malformed text (`MARK`, `MARK a b`, `MARK 99 0`,
  `WAIT 1`) and an action the state does not allow raise ValueError naming the problem and change
  nothing. Every applied action leaves a Receipt; `observe()` returns the current frame again, so it
  never spends a clue. (levels.py keeps these lifecycle rules for both built-in games.)
- Frames start `CATALOG LEVEL n/m | STATE ...`, never `LEVEL n/m | STATE ...`, so no reader of
  beacon_grid frames mistakes one for the other.
"""

from __future__ import annotations

import functools
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass

from turnstate.environments.levels import IntOption, LevelGame, validate_options
from turnstate.environments.protocol import RESET, GameState, ToolRefused, ToolSpec

Cell = tuple[int, int]  # (x, y): column, row

WIDTH = HEIGHT = 8
MARK, WAIT = "MARK", "WAIT"
ACTIONS: tuple[str, ...] = (MARK, WAIT, RESET)
READ_CATALOG = "read_catalog"
PAGE_ARGUMENT = "page"
NOTHING = "nothing"
DARK = "dark"

OPTIONS: dict[str, IntOption] = {
    "levels": IntOption(default=3, low=1, high=1000),
    "pages": IntOption(default=40, low=5, high=500),
}

ENTRIES_PER_PAGE = (8, 16)
# A page is drawn this long and filled up to it a word at a time, falling short by less than a word
# per entry: always 3000-5000 characters.
PAGE_CHARS = (3300, 5000)
LINE_CHARS = 76
FILLER_WORDS = (
    "acquired bequest binding bookplate catchword colophon condition donor edition endpaper engraved "
    "erratum fair folio foxed gathering gilt index ledger leaf margin marbled octavo provenance quarto "
    "quire rebacked recto register annotated shelf signature spine stamp verso vellum watermark worn"
).split()

ACTIONS_LINE = (
    "ACTIONS MARK x y mark the cell at column x, row y as the level's target; WAIT do nothing; RESET restart the level"
)
BOARD_LINE = f"BOARD {WIDTH} x {HEIGHT}: x is the column 0-{WIDTH - 1}, y the row 0-{HEIGHT - 1}"
COORDINATE = re.compile(r"-?[0-9]+")


@dataclass(frozen=True)
class CatalogPage:
    number: int
    cells: tuple[Cell, ...]  # entry e (1-based) gives cells[e - 1]
    text: str


@functools.lru_cache(maxsize=128)
def draw_page(seed: int, page: int) -> CatalogPage:
    """One catalog page: its entries' cells and its text, the same for every level of a game."""
    rng = random.Random(f"{seed}:page:{page}")
    cells = tuple((rng.randrange(WIDTH), rng.randrange(HEIGHT)) for _ in range(rng.randint(*ENTRIES_PER_PAGE)))
    header = f"CATALOG PAGE {page}"
    entries = [f"ENTRY {entry}: cell x={x} y={y}" for entry, (x, y) in enumerate(cells, 1)]
    fixed = len(header) + sum(len(line) + 1 for line in entries)
    per_entry = (rng.randint(*PAGE_CHARS) - fixed) // len(entries)
    lines = [header]
    for entry in entries:
        lines += [entry, *filler(rng, per_entry)]
    return CatalogPage(page, cells, "\n".join(lines))


def filler(rng: random.Random, chars: int) -> list[str]:
    """Lines of catalogue prose, at most `chars` characters with their newlines, short by less than a
    word; lower-case words only, so no line reads as an entry or a page header."""
    lines: list[str] = []
    line = ""
    used = 0
    while True:
        word = rng.choice(FILLER_WORDS)
        extra = len(word) + 1  # the space before it, or the newline before a new line
        if used + extra > chars:
            break
        if line and len(line) + extra > LINE_CHARS:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
        used += extra
    return [*lines, line] if line else lines


@dataclass(frozen=True)
class Clue:
    page: int
    entry: int


def draw_clue(seed: int, level: int, pages: int) -> Clue:
    rng = random.Random(f"{seed}:{level}")
    page = rng.randint(1, pages)
    return Clue(page, rng.randint(1, len(draw_page(seed, page).cells)))


def tool_schema(properties: Mapping[str, Mapping[str, object]]) -> dict[str, object]:
    """A tool's parameters: exactly `properties`, every one required (no parameters: an empty object)."""
    schema: dict[str, object] = {"type": "object", "properties": {k: dict(v) for k, v in properties.items()}}
    if properties:
        schema["required"] = list(properties)
    schema["additionalProperties"] = False
    return schema


def integer_property(description: str, low: int, high: int) -> dict[str, object]:
    return {"type": "integer", "minimum": low, "maximum": high, "description": description}


def action_tools() -> tuple[ToolSpec, ...]:
    """The actions as tools, with MARK's x and y in the order `MARK x y` writes them."""
    return (
        ToolSpec(
            MARK,
            "Mark the cell at column x, row y as the level's target: the right cell opens the next level "
            "(or wins the game), a wrong one is game over.",
            tool_schema(
                {
                    "x": integer_property("the column, 0 at the left", 0, WIDTH - 1),
                    "y": integer_property("the row, 0 at the top", 0, HEIGHT - 1),
                }
            ),
        ),
        ToolSpec(WAIT, "Do nothing this turn.", tool_schema({})),
        ToolSpec(
            RESET, "Restart the level (after a wrong mark, the only action left); its clue stays dark.", tool_schema({})
        ),
    )


class CatalogHunt(LevelGame[Cell | None]):
    """The game; one instance is one seeded game that `reset()` can restart from level 1."""

    name = "catalog_hunt"
    actions = ACTIONS

    _clue: Clue
    _wrong_mark: Cell | None

    def __init__(self, seed: int, levels: int, pages: int) -> None:
        self.seed = seed
        self.levels = levels
        self.pages = pages
        self.action_tools = action_tools()
        self.tools = (
            ToolSpec(
                READ_CATALOG,
                "Read one page of the catalog; read-only, it changes nothing. The entry the level's clue "
                "names, on the page it names, gives the level's target cell.",
                tool_schema({PAGE_ARGUMENT: integer_property("the page number", 1, pages)}),
            ),
        )

    @classmethod
    def from_options(cls, seed: int, options: Mapping[str, object]) -> CatalogHunt:
        return cls(seed, **validate_options(options, cls.name, OPTIONS))

    def call_tool(self, name: str, arguments: Mapping[str, object]) -> str:
        if name != READ_CATALOG:
            kind = f"{name!r} is an action, step it" if name in ACTIONS else f"unknown tool {name!r}"
            raise ToolRefused(f"{kind}; the read-only tools are: {READ_CATALOG}")
        return draw_page(self.seed, self._page_argument(arguments)).text

    def _page_argument(self, arguments: Mapping[str, object]) -> int:
        wanted = f"{READ_CATALOG} takes one argument, {PAGE_ARGUMENT!r}: an integer from 1 to {self.pages}"
        if not isinstance(arguments, Mapping):
            raise ToolRefused(f"{wanted}, as a JSON object; got {type(arguments).__name__}")
        extra = sorted(map(str, set(arguments) - {PAGE_ARGUMENT}))
        if extra:
            raise ToolRefused(f"{wanted}; unexpected argument {extra[0]!r}")
        if PAGE_ARGUMENT not in arguments:
            raise ToolRefused(f"{wanted}; it is missing")
        value = arguments[PAGE_ARGUMENT]
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= self.pages:
            raise ToolRefused(f"{wanted}; got {value!r}")
        return value

    def _parse(self, action: str) -> tuple[str, Cell | None]:
        return parse_action(action)

    def _apply(self, name: str, cell: Cell | None) -> str:
        if name == RESET:
            return self._restart()
        if cell is None:
            return NOTHING  # WAIT
        if cell != self._target():
            self._state = GameState.GAME_OVER
            self._wrong_mark = cell
            return f"wrong cell x={cell[0]} y={cell[1]} marked: game over"
        return self._level_won()

    def _target(self) -> Cell:
        return draw_page(self.seed, self._clue.page).cells[self._clue.entry - 1]

    def _draw_level(self) -> None:
        self._clue = draw_clue(self.seed, self._level, self.pages)

    def _restart_level(self) -> None:
        super()._restart_level()
        self._wrong_mark = None

    def _render(self, first_frame_of_level: bool) -> str:
        """The view (the environment renders; see protocol.py)."""
        clue = f"catalog page {self._clue.page} entry {self._clue.entry}" if first_frame_of_level else DARK
        lines = [
            f"CATALOG LEVEL {self._level}/{self.levels} | STATE {self._state.value}",
            f"CLUE (level {self._level}): {clue}",
        ]
        if self._wrong_mark is not None:
            lines.append(f"YOU MARKED x={self._wrong_mark[0]} y={self._wrong_mark[1]}: WRONG CELL")
        lines += [
            BOARD_LINE,
            ACTIONS_LINE,
            f"TOOLS {READ_CATALOG} page: read catalog page 1-{self.pages} (read-only); "
            "the entry the clue names gives the level's cell",
        ]
        return "\n".join(lines)


def parse_action(action: str) -> tuple[str, Cell | None]:
    """An action's name and, for MARK, its cell; ValueError naming what is wrong with the text."""
    if not isinstance(action, str):
        raise ValueError(f"an action is text such as 'MARK 3 5', got {type(action).__name__}")
    name, *values = action.split(" ")
    if name not in ACTIONS:
        raise ValueError(f"unknown action {action!r}; allowed actions: MARK x y, WAIT, RESET")
    if name != MARK:
        if values:
            raise ValueError(f"{name} takes no arguments, got {action!r}")
        return name, None
    if len(values) != 2:
        raise ValueError(
            f"MARK takes two integers, x (the column) then y (the row), one space apart as in 'MARK 3 5'; "
            f"got {action!r}"
        )
    x, y = (coordinate(axis, value, size) for axis, value, size in zip("xy", values, (WIDTH, HEIGHT), strict=True))
    return name, (x, y)


def coordinate(axis: str, value: str, size: int) -> int:
    if COORDINATE.fullmatch(value) is None or not 0 <= int(value) < size:
        raise ValueError(f"MARK's {axis} must be an integer from 0 to {size - 1}, got {value!r}")
    return int(value)
