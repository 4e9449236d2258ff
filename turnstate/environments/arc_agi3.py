"""arc_agi3: real ARC-AGI-3 games, played through the official toolkit (`arc-agi` with `arcengine`).

The toolkit is an optional extra (`pip install -e '.[arc]' in turnstate's checkout`, Python 3.12 or later, as the
toolkit requires); it is imported only when a profile names arc_agi3, so the base install (3.11, no
toolkit) never needs it, and a profile that names it without the extra is refused at validation
naming the install.

Rules it keeps:
- Options (`environment.options`): `game_id`, the game to play (an ARC id such as `ls20` or
  `ls20-1234abcd`: the toolkit plays the latest version of a bare id); `environments_dir`, the
  folder the toolkit scans for each game's `metadata.json` and game file (default: the two games
  this package ships, arc_games/); `mode`, `offline` (default) or `online`; `animation_frames`, how
  many of an action's animation frames the frame text shows (1, the default: the state alone; up to 16);
  `render`, how a frame shows its grid: `text` (the default: the hex rows below), `image` (the grid
  drawn as a PNG, `scale` px a cell, default 8: 512 x 512 px, in the toolkit's own palette, with the
  image's legend line where the rows were: environments/frame_image.py) or `both` (the rows, then the
  legend line and the image); each animation frame shown is drawn the same way.
- Offline is the toolkit's `OperationMode.OFFLINE`: no network at all. A game file is Python the
  toolkit executes, so `environments_dir` must be a local folder that exists: a URL is refused, and
  nothing is ever downloaded. Profile validation builds the game once, so a game id the folder does
  not hold, or a game file that fails to load, is named there with the file, the option and the fix.
- Online (`mode: online`) plays on the ARC-AGI-3 server with the key in ARC_API_KEY (refused at
  validation when it is unset; `environments_dir` does not apply; ARC_BASE_URL, the toolkit's own
  variable, names another server, such as the toolkit's `Arcade.listen_and_serve`). Importing the
  toolkit reads a `.env` file in the current folder into the process environment (its own
  behaviour), and its OPERATION_MODE=competition would take an offline game online, so that is
  refused offline.
- Competition (`mode: competition`) is online play as the toolkit's COMPETITION operation mode has it:
  one scorecard, opened in competition mode, on which the game is made once, and RESET restarts the
  level only (never the game); the server refuses to show the scorecard until it is closed, so
  `scorecard()` closes it, at the end of the run. Hence a competition run cannot be resumed (its
  replay would make the game again on a second scorecard: `resume_refusal` says so) nor played in
  a sweep (a run each, each its own scorecard), and `reset()` plays once.
- A frame is 64 x 64 cells of colours 0-15; an action may return several animation frames, of which
  the last is the state, and the frame text shows that one (with `animation_frames`, the ones
  before it too, each under an `ANIMATION FRAME i/n` line ahead of the frame's header). It is written one hex digit per cell
  (0-9, a-f), 64 rows of 64 characters, row y=0 at the top, column x=0 at the left: one character
  per cell is the most compact lossless text (no separators to pay for), a cell's coordinates are
  its column and row in the text, as ACTION6 takes them, and a colour is one digit, never two.
- Actions are RESET, ACTION1-5 and ACTION7, and ACTION6 with a cell: `ACTION6 x y`, x and y integers
  0-63 (malformed or out of range: ValueError naming the problem, nothing changes). A game declares
  which of ACTION1-7 it takes (`available_actions`), and the others are refused; RESET always plays,
  as the toolkit has it: it restarts the level, or the whole game on a level's first frame. The
  frame lists the available actions with their conventional meanings (each game decides).
- States are the toolkit's NOT_FINISHED, WIN and GAME_OVER; the level is levels_completed + 1 (the
  last once WIN) out of win_levels. After GAME_OVER only RESET is allowed (the runner steps it and
  buffers the GAME_OVER frame for the model, as with beacon_grid); after WIN nothing is, until
  `reset()`, which starts a new play of the game (a new play on the same scorecard).
- `observe()` returns the current frame again, changing nothing; every applied action leaves a
  Receipt; `scorecard()` is the toolkit's scorecard of the plays so far, kept small (scores,
  levels, actions, resets per play), which the runner writes into run_meta.json.
- Recorded (a RecordingEnvironment): a run has the toolkit write its own JSONL recording of each
  play into the run folder (`record_into`; the toolkit's layout, <scorecard>/<game>-<play>.jsonl:
  every frame, action and state, as its replays read it), each action with the readable reasoning
  of the reply that chose it as `{"text": ...}`, cut to the toolkit's 16 KB bound (never opaque state).
  A resumed run replays its journal into a new recording, so the newest is the whole play.
- In the tools action mode the actions are function tools (ACTION6 with integer x and y, 0-63), and
  a frame comes back as the action call's result; there are no read-only tools.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import logging
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from turnstate.adapters.images import ImagePart
from turnstate.environments.catalog_hunt import integer_property, tool_schema
from turnstate.environments.frame_image import DEFAULT_SCALE, MAX_SCALE, MIN_SCALE, ImageLegend
from turnstate.environments.levels import RENDER, IntOption, Played
from turnstate.environments.protocol import CUT as REASONING_CUT
from turnstate.environments.protocol import (
    RESET,
    EnvironmentConfigError,
    EnvironmentFault,
    Frame,
    GameState,
    Receipt,
    ToolRefused,
    ToolSpec,
)

SHIPPED_GAMES = Path(__file__).resolve().parent / "arc_games"
SIDE = 64  # the toolkit's frames are SIDE x SIDE cells
HEX = "0123456789abcdef"
CLICK = "ACTION6"
ACTIONS: tuple[str, ...] = (RESET, "ACTION1", "ACTION2", "ACTION3", "ACTION4", "ACTION5", CLICK, "ACTION7")
# What ARC-AGI-3's documentation says each action usually means; each game decides.
CONVENTION = {
    RESET: "restart the level (on a level's first frame, the game)",
    "ACTION1": "up",
    "ACTION2": "down",
    "ACTION3": "left",
    "ACTION4": "right",
    "ACTION5": "interact",
    CLICK: "click the cell at column x, row y",
    "ACTION7": "undo",
}
MODES = ("offline", "online", "competition")
ONLINE_MODES = ("online", "competition")  # played on the ARC-AGI-3 server
# What the scorecard keeps of each play (the toolkit's EnvironmentScore... run fields).
PLAY_KEYS = ("state", "levels_completed", "actions", "resets", "score", "level_actions", "level_baseline_actions")
OPTIONS = ("game_id", "environments_dir", "mode", "animation_frames", "render", "scale")
SCALE = IntOption(default=DEFAULT_SCALE, low=MIN_SCALE, high=MAX_SCALE)
MAX_ANIMATION_FRAMES = 16  # the most animation frames a frame text may show (the ARC harness shows up to 7)
GAME_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
COORDINATE = re.compile(r"[0-9]+")
API_KEY = "ARC_API_KEY"
INSTALL = "pip install -e '.[arc]' in turnstate's checkout"
TOOLKIT_LOGGER = "turnstate.arc_agi3.toolkit"
GRID_SHOWN = {  # what the GRID line says of the grid under it, by `render`
    "text": "one hex digit per cell, its colour 0-f",
    "image": "drawn in the image the IMAGE line describes, a square of each cell's colour 0-f",
    "both": "one hex digit per cell, its colour 0-f, then drawn in the image the IMAGE line describes",
}


@dataclass(frozen=True)
class Toolkit:
    """The toolkit's two modules, imported on first use (typed Any: the base install lacks them)."""

    arc_agi: Any
    arcengine: Any


def missing_toolkit() -> str | None:
    """What this install lacks to play ARC-AGI-3 games (None: nothing), found without importing it."""
    if sys.version_info >= (3, 12) and all(importlib.util.find_spec(name) for name in ("arc_agi", "arcengine")):
        return None
    return f"the arc extra (Python 3.12 or later): {INSTALL}"


def load_toolkit() -> Toolkit:
    """The toolkit, or an EnvironmentConfigError naming the Python it needs and the install."""
    if sys.version_info < (3, 12):
        raise EnvironmentConfigError(
            "arc_agi3 plays ARC-AGI-3 games through the official toolkit (arc-agi with arcengine), which needs "
            f"Python 3.12 or later; this is Python {sys.version_info.major}.{sys.version_info.minor}",
            "name",
            f"run turnstate on Python 3.12 or later with the arc extra: {INSTALL}",
        )
    try:
        toolkit = Toolkit(importlib.import_module("arc_agi"), importlib.import_module("arcengine"))
    except ImportError as error:
        raise EnvironmentConfigError(
            f"arc_agi3 needs the ARC-AGI-3 toolkit (arc-agi with arcengine), which is not installed: {error}",
            "name",
            f"install the arc extra (Python 3.12 or later): {INSTALL}",
        ) from None
    # Its scorecard module prints INFO lines to stdout from its own handler: a run's terminal is the harness's.
    logging.getLogger("arc_agi.scorecard").setLevel(logging.WARNING)
    return toolkit


class ToolkitLog(logging.Handler):
    """What the toolkit logs about a game (it logs a failure and returns None rather than raising),
    kept so an error can say why; and nothing of it printed."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(" ".join(record.getMessage().split())[:300])

    def last(self) -> str:
        return self.since(len(self.messages) - 1)

    def since(self, start: int) -> str:
        """The messages logged from number `start` on, in order, as one line."""
        return "; ".join(self.messages[max(start, 0) :]) or "the toolkit logged no reason"


@dataclass(frozen=True)
class ArcOptions:
    game_id: str
    environments_dir: Path | None  # None online (ONLINE_MODES)
    mode: str
    animation_frames: int = 1  # of an action's animation frames, how many the frame text shows (the last ones)
    render: str = RENDER.default  # text | image | both: how a frame shows its grid
    scale: int = DEFAULT_SCALE  # px a cell of a drawn grid


def parse_options(options: Mapping[str, object]) -> ArcOptions:
    """The options, checked before the toolkit is touched; each error names its option and fix."""
    unknown = sorted(set(map(str, options)) - set(OPTIONS))
    if unknown:
        raise EnvironmentConfigError(f"arc_agi3 has no option {unknown[0]!r}; allowed options: {', '.join(OPTIONS)}")
    game_id = options.get("game_id")
    if not isinstance(game_id, str) or not GAME_ID.fullmatch(game_id):
        raise EnvironmentConfigError(
            f"arc_agi3 option 'game_id' must be an ARC-AGI-3 game id (letters, digits, '-', '_', '.'), got {game_id!r}",
            "options.game_id",
            "name the game to play, e.g. game_id: move (a game shipped with turnstate) or ls20",
        )
    mode = options.get("mode", "offline")
    if mode not in MODES:
        raise EnvironmentConfigError(
            f"arc_agi3 option 'mode' must be offline, online or competition, got {mode!r}",
            "options.mode",
            "use offline (game files in environments_dir), online (the ARC-AGI-3 server, ARC_API_KEY) or "
            "competition (online, one scorecard, as the toolkit's COMPETITION mode)",
        )
    if mode in ONLINE_MODES:
        if "environments_dir" in options:
            raise EnvironmentConfigError(
                f"arc_agi3 option 'environments_dir' is for offline games; mode {mode} plays on the ARC-AGI-3 server",
                "options.environments_dir",
                "remove environments_dir, or use mode: offline",
            )
        if not os.environ.get(API_KEY):
            raise EnvironmentConfigError(
                f"arc_agi3 mode {mode} needs an ARC-AGI-3 API key in {API_KEY}, which is not set",
                "options.mode",
                f"export {API_KEY}=<your key>, or use mode: offline",
            )
        return ArcOptions(game_id, None, str(mode), *shown(options))
    return ArcOptions(game_id, local_folder(options.get("environments_dir")), "offline", *shown(options))


def shown(options: Mapping[str, object]) -> tuple[int, str, int]:
    """How a frame is shown: (animation_frames, render, scale), each checked, its key and fix named."""
    render, scale = options.get("render", RENDER.default), options.get("scale", SCALE.default)
    problem = RENDER.problem(render)
    if problem is not None:
        raise EnvironmentConfigError(
            f"arc_agi3 option 'render' {problem}, got {render!r}",
            "options.render",
            "use text (hex rows), image (the grid drawn as a PNG) or both",
        )
    problem = SCALE.problem(scale)
    if problem is not None:
        raise EnvironmentConfigError(
            f"arc_agi3 option 'scale' {problem}, got {scale!r}",
            "options.scale",
            f"draw a cell {DEFAULT_SCALE} px a side (the default: a 64 x 64 frame at 512 x 512 px), or from "
            f"{MIN_SCALE} to {MAX_SCALE}",
        )
    return animation_frames(options), str(render), cast(int, scale)  # checked above


def animation_frames(options: Mapping[str, object]) -> int:
    shown = options.get("animation_frames", 1)
    if isinstance(shown, bool) or not isinstance(shown, int) or not 1 <= shown <= MAX_ANIMATION_FRAMES:
        raise EnvironmentConfigError(
            f"arc_agi3 option 'animation_frames' must be a whole number from 1 to {MAX_ANIMATION_FRAMES}, got {shown!r}",
            "options.animation_frames",
            "show 1 (the state alone, the default) or up to 7 frames of an action's animation, as the ARC harness does",
        )
    return shown


def local_folder(value: object) -> Path:
    """`environments_dir` as an existing local folder (relative to the current folder); default the
    shipped games. Never a URL: the toolkit executes the game files it finds there."""
    if value is None:
        return SHIPPED_GAMES
    fix = "point environments_dir at a local folder of game files you trust (each game's metadata.json and .py)"
    if not isinstance(value, str) or not value.strip():
        raise EnvironmentConfigError(
            f"arc_agi3 option 'environments_dir' must be a folder path, got {value!r}", "options.environments_dir", fix
        )
    if "://" in value or value.lower().startswith(("http:", "https:", "file:", "ftp:", "www.")):
        raise EnvironmentConfigError(
            f"arc_agi3 option 'environments_dir' is a URL ({value!r}); game files are Python the toolkit executes, "
            "so they are only ever read from a local folder, never downloaded",
            "options.environments_dir",
            fix,
        )
    folder = Path(value).expanduser().resolve()
    if not folder.is_dir():
        raise EnvironmentConfigError(
            f"arc_agi3 option 'environments_dir': {folder} is not a folder", "options.environments_dir", fix
        )
    return folder


def game_of(game_id: str) -> str:
    """The game a toolkit id names, whatever its version: ids are <game>-<version> (`ls20-cb3b57cc`)."""
    return game_id.split("-", 1)[0]


def same_game(recorded: str, played: str) -> bool:
    """Whether two ids name the same game, whatever version (`ls20-e6affcdb` and `ls20-cb3b57cc`; `ls20`)."""
    return game_of(recorded) == game_of(played)


def parse_action(action: str) -> tuple[str, dict[str, int]]:
    """An action's name and its data (ACTION6's cell); ValueError naming what is wrong with the text."""
    if not isinstance(action, str):
        raise ValueError(f"an action is text such as 'ACTION1' or 'ACTION6 12 40', got {type(action).__name__}")
    name, *values = action.split(" ")
    if name not in ACTIONS:
        raise ValueError(f"unknown action {action!r}; the actions are {', '.join(ACTIONS[:-2])}, ACTION6 x y, ACTION7")
    if name != CLICK:
        if values:
            raise ValueError(f"{name} takes no values, got {action!r}")
        return name, {}
    if len(values) != 2:
        raise ValueError(
            f"ACTION6 takes two integers, x (the column) then y (the row), each 0-{SIDE - 1}, one space apart "
            f"as in 'ACTION6 12 40'; got {action!r}"
        )
    cell = {}
    for axis, value in zip("xy", values, strict=True):
        if COORDINATE.fullmatch(value) is None or not 0 <= int(value) < SIDE:
            raise ValueError(f"ACTION6's {axis} must be an integer from 0 to {SIDE - 1}, got {value!r}")
        cell[axis] = int(value)
    return name, cell


def action_tools(convention: Mapping[str, str]) -> tuple[ToolSpec, ...]:
    """The actions as tools, ACTION6 with x and y in the order `ACTION6 x y` writes them."""
    cell = {
        "x": integer_property("the column, 0 at the left", 0, SIDE - 1),
        "y": integer_property("the row, 0 at the top", 0, SIDE - 1),
    }
    return tuple(
        ToolSpec(
            name,
            f"ARC-AGI-3 {name}: by convention, {convention[name]} (each game decides).",
            tool_schema(cell if name == CLICK else {}),
        )
        for name in ACTIONS
    )


def toolkit_reasoning(text: str | None, limit: int) -> dict[str, str] | None:
    """Readable reasoning as the toolkit keeps it beside an action, `{"text": ...}`, cut (and marked
    cut) until its JSON is at most `limit` bytes, the toolkit's bound (MAX_REASONING_BYTES)."""
    if text is None:
        return None
    kept, marker = text, ""
    while len(json.dumps({"text": kept + marker}, separators=(",", ":")).encode("utf-8")) > limit:
        kept, marker = kept[: len(kept) * 3 // 4], REASONING_CUT
    return {"text": kept + marker}


def grid_rows(grid: Any) -> list[str]:
    """A frame's cells as text rows, one hex digit per cell (see the module docstring)."""
    rows: list[str] = []
    for row in grid.tolist():
        if any(not 0 <= value < len(HEX) for value in row):
            raise RuntimeError(f"arc_agi3: the game drew a colour outside 0-15 in row {len(rows)}")
        rows.append("".join(HEX[value] for value in row))
    return rows


class ArcAgi3(Played):
    """One ARC-AGI-3 game through the toolkit; `reset()` starts a new play of it."""

    name = "arc_agi3"
    actions = ACTIONS

    def __init__(self, seed: int, options: ArcOptions) -> None:
        self.seed = seed
        self.game_id = options.game_id
        self.mode = options.mode
        self.animation_frames = options.animation_frames
        self.render = options.render
        self.scale = options.scale
        self.environments_dir = options.environments_dir
        # competition resets levels only (the toolkit's ONLY_RESET_LEVELS), so RESET never restarts the game
        self.convention = CONVENTION | ({RESET: "restart the level"} if self.mode == "competition" else {})
        self.action_tools = action_tools(self.convention)
        self.tools: tuple[ToolSpec, ...] = ()
        self.toolkit = load_toolkit()
        self.log = ToolkitLog()
        # A logger of this game's own, outside logging's registry (which keeps every logger it names
        # for good): the toolkit logs to it, and only this game's ToolkitLog hears it.
        self.logger = logging.Logger(TOOLKIT_LOGGER, logging.WARNING)
        self.logger.addHandler(self.log)
        self._arcade: Any = None
        self._wrapper: Any = None
        self._unplayed: Any = None  # the wrapper validation built, played by the first reset()
        self._current: Frame | None = None
        self._data: Any = None  # the toolkit's last FrameDataRaw
        self._grid: Any = None  # the last frame shown (a step may return no frame)
        self._receipts: list[Receipt] = []
        self._recordings: Path | None = None  # where the toolkit records each play (record_into)
        self._closed_card: dict[str, Any] | None = None  # competition: the scorecard as closing it gave it
        self.resume_refusal = (
            "a competition run cannot be resumed: the toolkit makes each game once on its one competition "
            "scorecard, and a resume would make it again on another"
            if self.mode == "competition"
            else None
        )
        if self.mode == "offline":
            self._unplayed = self._make()  # the game is loaded (and its file executed) at validation

    @classmethod
    def from_options(cls, seed: int, options: Mapping[str, object]) -> ArcAgi3:
        return cls(seed, parse_options(options))

    def call_tool(self, name: str, arguments: Mapping[str, object]) -> str:
        kind = f"{name!r} is an action, step it" if name in ACTIONS else f"unknown tool {name!r}"
        raise ToolRefused(f"{kind}; arc_agi3 has no read-only tools")

    def reset(self) -> Frame:
        if self.mode == "competition" and self._wrapper is not None:
            raise EnvironmentFault(
                f"arc_agi3: game {self.game_id} was played already on this competition scorecard, which makes "
                "each game once; fix: play it again in a new run"
            )
        self._wrapper, self._unplayed = self._unplayed or self._make(), None
        self._receipts = []
        self._grid = None
        return self._show(self._wrapper.observation_space)

    def record_into(self, folder: Path) -> None:
        """Have the toolkit record each play from here on into `folder` (module docstring)."""
        self._recordings = folder
        self._arcade = self._unplayed = None  # validation's game records nowhere: the next play opens one that does

    def step(self, action: str) -> Frame:
        return self.step_explained(action, None)

    def step_explained(self, action: str, reasoning: str | None) -> Frame:
        if self._current is None:
            raise RuntimeError(f"{self.name}: call reset() before step()")
        name, cell = parse_action(action)
        allowed = self._allowed()
        if name not in allowed:
            listed = ", ".join(a for a in ACTIONS if a in allowed) or "none (call reset())"
            raise ValueError(
                f"action {action!r} is not allowed in state {self._current.state.value} of game {self.game_id}; "
                f"allowed actions: {listed}"
            )
        before = self._data
        kept = toolkit_reasoning(reasoning, self.toolkit.arcengine.enums.MAX_REASONING_BYTES)
        data = self._wrapper.step(self.toolkit.arcengine.GameAction[name], data=cell, reasoning=kept)
        if data is None:
            raise EnvironmentFault(
                f"arc_agi3: game {self.game_id} ({self._game_file()}) failed to play {action}: {self.log.last()}; "
                "fix: mend the game's file, then resume the run (its accepted turns are kept)"
            )
        changed = self._changed(name, before, data)
        self._receipts.append(Receipt(len(self._receipts) + 1, action, changed))
        return self._show(data)

    def _game_file(self) -> str:
        """Where the game being played was loaded from, as the toolkit's metadata says."""
        info = getattr(self._wrapper, "info", None)
        folder, name = getattr(info, "local_dir", None), getattr(info, "class_name", None)
        return f"{folder}/{str(name).lower()}.py" if folder and name else "the ARC-AGI-3 server"

    def level_baselines(self) -> tuple[int, ...]:
        """The human baseline actions of each level, as the game's metadata.json gives them (empty
        when it gives none)."""
        info = getattr(self._wrapper or self._unplayed, "info", None)
        given = getattr(info, "baseline_actions", None) or ()
        return tuple(int(actions) for actions in given)

    def scorecard(self) -> dict[str, Any]:
        """The toolkit's scorecard of this game's plays, kept small: its score and totals, and per
        play the state, levels completed, actions, resets, score, and per level its actions and the
        human baseline's (as the leaderboard reads them)."""
        dumped = self._closed_card if self.mode == "competition" else self._card()
        if dumped is None and self.mode == "competition":
            dumped = self._closed_card = self._card(close=True)
        if not dumped:
            return {}
        plays = [
            {key: run.get(key) for key in PLAY_KEYS}
            for environment in dumped.get("environments", [])
            if same_game(str(environment.get("id")), self.game_id)  # a closed competition card lists every game
            for run in environment.get("runs", [])
        ]
        totals = ("score", "total_levels_completed", "total_levels", "total_actions")
        return {"game_id": self.game_id, "mode": self.mode, **{key: dumped.get(key) for key in totals}, "plays": plays}

    def _card(self, close: bool = False) -> dict[str, Any] | None:
        """The toolkit's scorecard as JSON (None before a play): closed first, when `close`."""
        if self._arcade is None:
            return None
        card = self._arcade.close_scorecard() if close else self._arcade.get_scorecard()
        return None if card is None else card.model_dump(mode="json")

    def _make(self) -> Any:
        """A new play of the game from the toolkit (its wrapper, reset to level 1)."""
        if self._arcade is None:
            self._arcade = self._open_arcade()
        if self.mode == "offline":
            self._check_listed()
        logged = len(self.log.messages)
        wrapper = self._arcade.make(self.game_id, seed=self.seed, save_recording=self._recordings is not None)
        if wrapper is None or wrapper.observation_space is None:
            online = self.mode in ONLINE_MODES
            where = "the ARC-AGI-3 server" if online else f"{self.environments_dir}"
            raise EnvironmentConfigError(
                f"arc_agi3 game {self.game_id!r} from {where} could not be loaded: {self.log.since(logged)}",
                "options.game_id" if online else "options.environments_dir",
                "check the game's files (metadata.json's class_name and the game's .py file, which the toolkit "
                "executes)"
                if self.mode == "offline"
                else f"check the game id and {API_KEY}",
            )
        return wrapper

    def _open_arcade(self) -> Any:
        arc_agi = self.toolkit.arc_agi
        recorded = {} if self._recordings is None else {"recordings_dir": str(self._recordings)}
        if self.mode in ONLINE_MODES:
            return arc_agi.Arcade(
                arc_api_key=os.environ.get(API_KEY, ""),
                operation_mode=arc_agi.OperationMode(self.mode),
                logger=self.logger,
                **recorded,
            )
        if os.environ.get("OPERATION_MODE", "").strip().lower() == "competition":
            raise EnvironmentConfigError(
                "OPERATION_MODE=competition is set (in the environment or a .env file in the current folder), "
                "which makes the ARC-AGI-3 toolkit go online instead of playing offline",
                "options.mode",
                "unset OPERATION_MODE (or remove it from .env), or use mode: online",
            )
        return arc_agi.Arcade(
            operation_mode=arc_agi.OperationMode.OFFLINE,
            environments_dir=str(self.environments_dir),
            logger=self.logger,
            **recorded,
        )

    def _check_listed(self) -> None:
        listed = sorted({info.game_id for info in self._arcade.get_environments()})
        if not any(same_game(game, self.game_id) for game in listed):
            holds = ", ".join(listed) or "no game (no readable metadata.json)"
            raise EnvironmentConfigError(
                f"arc_agi3 option 'game_id': {self.environments_dir} holds no game {self.game_id!r}; it holds {holds}",
                "options.game_id",
                "name a game whose metadata.json is under environments_dir, or point environments_dir at its folder",
            )

    def _allowed(self) -> frozenset[str]:
        assert self._current is not None
        return self._allowed_after(self._current.state, self._data)

    def _changed(self, name: str, before: Any, after: Any) -> str:
        """What an applied action did, in a few words, for its receipt."""
        state = after.state.value
        if state == GameState.WIN.value:
            return "game won"
        if state == GameState.GAME_OVER.value:
            return "game over"
        if name == RESET:
            return "game restarted at level 1" if after.full_reset else "level restarted"
        if after.levels_completed > before.levels_completed:
            return f"level {after.levels_completed + 1} reached"
        if after.frame and (self._grid is None or (after.frame[-1] != self._grid).any()):
            return "grid changed"
        return "nothing"

    def _show(self, data: Any) -> Frame:
        """The frame of the toolkit's answer: its last animation frame, rendered (module docstring)."""
        self._data = data
        if data.frame:
            self._grid = data.frame[-1]
        if self._grid is None:
            raise RuntimeError(f"arc_agi3: game {self.game_id} returned no frame")
        state = GameState(data.state.value) if data.state.value in GameState.__members__ else GameState.NOT_FINISHED
        levels = max(int(data.win_levels), 1)
        level = levels if state is GameState.WIN else min(int(data.levels_completed) + 1, levels)
        rows = grid_rows(self._grid)
        images: list[ImagePart] = []
        available = [name for name in ACTIONS if name in self._allowed_after(state, data)]
        shown = ", ".join(f"{name} x y" if name == CLICK else name for name in available) or "none"
        # Of the animation, the frames before the last that the option shows, oldest first, ahead of
        # the frame's header (so what follows the header is the state, as it is without them).
        earlier = list(data.frame[-self.animation_frames : -1]) if self.animation_frames > 1 else []
        first = len(data.frame) - len(earlier)
        lines = [
            *(
                line
                for number, grid in enumerate(earlier, first)
                for line in (
                    f"ANIMATION FRAME {number}/{len(data.frame)} (before the state below)",
                    *self._grid_view(grid_rows(grid), images),
                )
            ),
            f"ARC LEVEL {level}/{levels} | STATE {state.value}",
            f"GAME {self.game_id} | LEVELS COMPLETED {data.levels_completed}/{data.win_levels} | "
            f"FRAMES {len(data.frame)} (an action's animation; "
            + (f"frames {first}-{len(data.frame) - 1} above, the last below)" if earlier else "the last is shown)"),
            f"GRID {len(rows[0]) if rows else 0}x{len(rows)}: {GRID_SHOWN[self.render]}; "
            "x is the column from the left, y the row from the top, both from 0",
            *self._grid_view(rows, images),
            f"ACTIONS {shown}",
            "(by convention "
            + "; ".join(f"{name} {self.convention[name]}" for name in available)
            + "; each game decides)",
        ]
        self._current = Frame("\n".join(lines), state, level, levels, tuple(images))
        return self._current

    def _grid_view(self, rows: list[str], images: list[ImagePart]) -> list[str]:
        """A grid's lines in the frame text as `render` shows it (the module docstring); a drawn grid's
        image is appended to `images`, in the order of its legend line in the text."""
        if self.render == "text":
            return rows
        legend = ImageLegend(
            len(rows[0]), len(rows), self.scale, {HEX.index(digit): digit for digit in set("".join(rows))}
        )
        images.append(legend.draw(rows))
        return [*rows, legend.line()] if self.render == "both" else [legend.line()]

    def _allowed_after(self, state: GameState, data: Any) -> frozenset[str]:
        """The actions a frame in `state` allows: the game's available ones and RESET while playing."""
        if state is GameState.WIN:
            return frozenset()
        if state is GameState.GAME_OVER:
            return frozenset({RESET})
        return frozenset({RESET, *(f"ACTION{number}" for number in (data.available_actions or ()))})
