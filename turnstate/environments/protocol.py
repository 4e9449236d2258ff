"""What an environment is to turnstate: the few calls a loop needs, typed, and nothing game-specific.

A loop (the runner, or a caller's own) resets a game, reads its current frame, names one of its
actions, steps it and records what each step did; everything else (rules, options, layout) stays in
the game's own module. Third-party environments implement this protocol in their own package and
register a factory for it (registry.py); they import these types and nothing else of turnstate.

Rendering for the model belongs to the environment: a Frame's `text` is the whole of what a model
reads, written by the environment when the frame is made. It cannot be a pure function of a later
state, since what a frame shows may depend on when it is shown (beacon_grid shows a level's beacon
in that level's first frame only), so the protocol has no separate render call.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Protocol, runtime_checkable

from turnstate.adapters.contract import Input, ToolSpec, UserInput
from turnstate.adapters.images import ImagePart

__all__ = [
    "RESET",
    "Environment",
    "Frame",
    "GameState",
    "Receipt",
    "RecordingEnvironment",
    "ToolEnvironment",
    "ToolRefused",
    "ToolSpec",
]


class GameState(str, Enum):
    NOT_FINISHED = "NOT_FINISHED"
    WIN = "WIN"
    GAME_OVER = "GAME_OVER"


RESET = "RESET"
"""The action a loop steps after a GAME_OVER frame to play on (the runner does, once it has buffered
that frame for the model), so an environment whose frames can be GAME_OVER accepts it then."""


@dataclass(frozen=True)
class Frame:
    """What the agent is shown after reset or a step: `text`, and the `images` it shows (checked
    PNGs, drawn with their legend in the text: environments/frame_image.py), which is all a model
    ever sees of it."""

    text: str
    state: GameState
    level: int  # 1-based: the level being played, or the last one once WIN
    levels: int  # total levels: the runner reports progress as levels won
    images: tuple[ImagePart, ...] = ()

    @property
    def input(self) -> Input:
        """The frame as a model input: its text, or a UserInput when it shows images."""
        return UserInput(self.text, self.images) if self.images else self.text


@dataclass(frozen=True)
class Receipt:
    """One applied action's side effect, as a fact a caller can record and replay to a person: the
    frame shows where the game is, the receipt what this action did to get there (a level reached,
    a wrong door, nothing). Only an applied action has one; a refused action changed nothing."""

    step: int  # 1-based: the actions applied since reset(), this one included
    action: str
    changed: str  # in a few words: "player moved", "level 2 reached", "nothing"


class Environment(Protocol):
    name: str
    actions: tuple[str, ...]
    """The action space: every action name a model may answer with, as the system prompt lists them;
    the state may allow fewer at a time (step says which)."""
    # An environment may also say why a run on it cannot be resumed (`resume_refusal`, a sentence;
    # arc_agi3's competition mode): the runner refuses a resume with it before anything opens, and a
    # sweep (which resumes the runs a kill stops) refuses to plan the environment.

    def reset(self) -> Frame:
        """Start (or restart) the whole game at level 1; its receipts start again from step 1."""
        ...

    def observe(self) -> Frame:
        """The current frame again, changing nothing: for a loop that resumes or lost the frame.
        Raises RuntimeError before reset()."""
        ...

    def step(self, action: str) -> Frame:
        """Apply one action and return the new frame; an action the current state does not allow
        raises ValueError and changes nothing, receipts included."""
        ...

    def receipts(self, since: int = 0) -> tuple[Receipt, ...]:
        """The receipts of the actions applied since reset() after step `since`, oldest first: a loop
        that records each step asks for `since=step - 1`, and never copies the whole game's again."""
        ...


class ToolRefused(ValueError):
    """A tool call an environment cannot answer (an unknown tool, arguments its schema refuses); the
    message says why and is what the model reads, as an error result."""


@runtime_checkable
class ToolEnvironment(Environment, Protocol):
    """An environment the model can also use through function tools.

    `action_tools` are its actions as tools, one per action name, each with the JSON Schema of its
    arguments (an action with coordinates has x and y parameters). An action with arguments is
    stepped as its name followed by the argument values, in the order of the schema's `properties`,
    separated by spaces (`MARK 3 5`); the same text is what an `ACTION:` line names.

    `tools` are read-only tools beside the actions (look up a page, a past record): `call_tool`
    answers one call with the text the model reads and never changes the game or its receipts; it
    raises ToolRefused for a call it cannot answer."""

    action_tools: tuple[ToolSpec, ...]
    tools: tuple[ToolSpec, ...]

    def call_tool(self, name: str, arguments: Mapping[str, object]) -> str: ...


@runtime_checkable
class RecordingEnvironment(Environment, Protocol):
    """An environment that keeps its own record of a play, with why each action was chosen
    (arc_agi3: the ARC-AGI-3 toolkit's JSONL recording, which its replays read).

    `record_into(folder)` is called once, before the first reset(), with the folder in the run folder
    its record goes into. `step_explained` steps as `step` does, with the readable reasoning of the
    reply that chose the action (its reasoning summary, thinking text or reasoning_content, redacted
    and at most REASONING_CHARS characters; never the provider's opaque state; None when the reply
    gave none, or for the RESET a loop steps after GAME_OVER), which the record keeps beside it."""

    def record_into(self, folder: Path) -> None: ...

    def step_explained(self, action: str, reasoning: str | None) -> Frame: ...


REASONING_CHARS = 4000
"""The most of a reply's readable reasoning a loop hands `step_explained` (the rest is cut, and the
text says so): enough for why, and small beside a frame in the environment's record."""
CUT = " [cut]"


def readable_reasoning(text: str | None) -> str | None:
    """A reply's readable reasoning as a loop hands it to `step_explained`: stripped, None when
    empty, and cut to REASONING_CHARS characters, the cut marked."""
    text = (text or "").strip()
    if not text:
        return None
    return text if len(text) <= REASONING_CHARS else text[: REASONING_CHARS - len(CUT)] + CUT


class EnvironmentFault(RuntimeError):
    """The game itself failed while being played (its own code raised, or it returned no frame): not
    a bug of the harness, and not the model's doing. The message names the game's file and the fix;
    the accepted turns are kept, so a resume goes on once the game is mended."""


class EnvironmentConfigError(ValueError):
    """An environment a profile cannot have (an unregistered or path-like name, a package that fails
    to load) or an invalid option; raised before any play. `key` is the profile key under
    `environment` it concerns and `fix` what to do, so profile validation can name both."""

    def __init__(
        self,
        problem: str,
        key: str = "options",
        fix: str = "see the environment's options in its documentation (docs/profiles.md for beacon_grid)",
    ) -> None:
        super().__init__(problem)
        self.key, self.fix = key, fix


EnvironmentFactory = Callable[[int, Mapping[str, object]], Environment]
"""How an environment is built: (seed, options) -> a game; the same arguments give the same game.
It validates the options (raising EnvironmentConfigError) and is cheap, since profile validation
calls it once before any run."""
