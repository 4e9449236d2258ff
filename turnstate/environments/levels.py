"""The lifecycle the built-in games share: levels played in order, a secret shown once, receipts.

beacon_grid and catalog_hunt are the same game around different boards, so the rules below live here
once and each game's module keeps only its own options, board, action text and frame text:
- `reset()` starts level 1 with no receipts; `step()` and `observe()` before it raise RuntimeError
  naming the game, and `receipts()` is empty.
- An action the current state does not allow raises ValueError and changes nothing: NOT_FINISHED
  allows every action, GAME_OVER only RESET (which restarts the level), WIN none (a dead end that
  only `reset()` leaves).
- Every applied action leaves a Receipt of what it changed, numbered from 1 since `reset()`.
- Reaching a level's goal opens the next level, or wins after the last one.
- A frame is made once per reset or step and `observe()` returns it again: what a frame shows may
  depend on when it is shown (a level's secret is in its first frame only), so it is never remade.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from turnstate.adapters.images import ImagePart
from turnstate.environments.protocol import RESET, EnvironmentConfigError, Frame, GameState, Receipt

Argument = TypeVar("Argument")
"""What an action carries beside its name once its text is parsed (catalog_hunt: MARK's cell)."""


@dataclass(frozen=True)
class IntOption:
    default: int
    low: int
    high: int

    def problem(self, value: object) -> str | None:
        if not isinstance(value, int) or isinstance(value, bool) or not self.low <= value <= self.high:
            return f"must be an integer from {self.low} to {self.high}"
        return None


@dataclass(frozen=True)
class ChoiceOption:
    default: str
    choices: tuple[str, ...]

    def problem(self, value: object) -> str | None:
        return None if value in self.choices else f"must be one of {', '.join(self.choices)}"


RENDER = ChoiceOption(default="text", choices=("text", "image", "both"))
"""How a game shows its frames: as text, as an image (the grid drawn, its legend in the text), or both."""


def validate_options(
    options: Mapping[str, object], game: str, specs: Mapping[str, IntOption | ChoiceOption]
) -> dict[str, Any]:
    """Every option with its default filled in (each checked by its spec, so of its type); a bad one
    is named before any play starts."""
    unknown = sorted(set(options) - set(specs))
    if unknown:
        allowed = ", ".join(sorted(specs))
        raise EnvironmentConfigError(f"{game} has no option {unknown[0]!r}; allowed options: {allowed}")
    values = {}
    for name, spec in specs.items():
        value = options.get(name, spec.default)
        problem = spec.problem(value)
        if problem is not None:
            raise EnvironmentConfigError(f"{game} option {name!r} {problem}, got {value!r}")
        values[name] = value
    return values


class Played:
    """What a built-in game keeps of its play, and how `observe` and `receipts` read it: the current
    frame (set by reset(); step() and observe() refuse to run before it) and the receipts of the
    actions applied since."""

    name: str
    _current: Frame | None = None
    _receipts: list[Receipt]

    def observe(self) -> Frame:
        if self._current is None:
            raise RuntimeError(f"{self.name}: call reset() before observe()")
        return self._current

    def receipts(self, since: int = 0) -> tuple[Receipt, ...]:
        if since < 0:
            raise ValueError(f"since counts applied actions and cannot be negative, got {since}")
        return tuple(self._receipts[since:]) if self._current is not None else ()


class LevelGame(Played, ABC, Generic[Argument]):
    """One seeded game that `reset()` can restart from level 1; a subclass is one game's rules."""

    actions: tuple[str, ...]
    levels: int

    _level: int
    _state: GameState
    _first_frame_of_level: bool

    def reset(self) -> Frame:
        self._receipts = []
        self._enter_level(1)
        return self._show()

    def step(self, action: str) -> Frame:
        if self._current is None:
            raise RuntimeError(f"{self.name}: call reset() before step()")
        name, argument = self._parse(action)
        allowed = self._allowed_actions()
        if name not in allowed:
            allowed_text = ", ".join(a for a in self.actions if a in allowed) or "none (call reset())"
            raise ValueError(
                f"action {action!r} is not allowed in state {self._state.value}; allowed actions: {allowed_text}"
            )
        self._receipts.append(Receipt(len(self._receipts) + 1, action, self._apply(name, argument)))
        return self._show()

    def _allowed_actions(self) -> frozenset[str]:
        return {
            GameState.NOT_FINISHED: frozenset(self.actions),
            GameState.GAME_OVER: frozenset({RESET}),
            GameState.WIN: frozenset(),  # dead end: only reset() starts a new game
        }[self._state]

    def _restart(self) -> str:
        """RESET: the level again from its start; the receipt's text."""
        self._restart_level()
        return f"level {self._level} restarted"

    def _level_won(self) -> str:
        """The level's goal reached: the next level, or the win after the last; the receipt's text."""
        if self._level == self.levels:
            self._state = GameState.WIN
            return "game won"
        self._enter_level(self._level + 1)
        return f"level {self._level} reached"

    def _enter_level(self, level: int) -> None:
        self._level = level
        self._draw_level()
        self._first_frame_of_level = True
        self._restart_level()

    def _restart_level(self) -> None:
        """Play the level from its start; a game that keeps more per attempt extends this."""
        self._state = GameState.NOT_FINISHED

    def _show(self) -> Frame:
        text, images = self._rendered(self._first_frame_of_level)
        self._current = Frame(text, self._state, self._level, self.levels, images)
        self._first_frame_of_level = False
        return self._current

    def _rendered(self, first_frame_of_level: bool) -> tuple[str, tuple[ImagePart, ...]]:
        """The frame's text and images: the text `_render` gives, by default, and no image."""
        return self._render(first_frame_of_level), ()

    @abstractmethod
    def _parse(self, action: str) -> tuple[str, Argument]:
        """The action's name and argument; ValueError, changing nothing, for text that is no action."""

    @abstractmethod
    def _apply(self, name: str, argument: Argument) -> str:
        """Change the game by an allowed action; what changed, for its receipt."""

    @abstractmethod
    def _draw_level(self) -> None:
        """Set up the board of `self._level`."""

    @abstractmethod
    def _render(self, first_frame_of_level: bool) -> str:
        """The current frame's text; the level's secret is shown only when `first_frame_of_level`."""
