"""Exactly-once side effects: an environment whose applied actions are journaled under a key.

A run that dies between performing an action and recording its receipt must not perform it again
when it resumes, nor lose it. The harness cannot know by itself whether the action happened; only the
world it acted on can say. A real side effect's world keeps its own record (a payment provider's
idempotency keys, a mail server's message ids); an environment that lives in the run's process keeps
none that outlives it, so this journal is that record: `side_effects.jsonl` in the run folder, one
line per applied action, written as the action is applied, by the environment's side and never by
the harness's checkpoints.

Rules:
1. An action is performed under a key (its intent: the accepted step it comes from). `perform` asks
   the journal first: an applied key is settled, not performed again, and returns the frame it led
   to; any other is applied, and journaled once it applied (a refused action changed nothing and is
   not journaled, so it is refused again, the same way).
2. The journal is the world: `reopen` rebuilds the environment by resetting it and applying the
   journaled actions in order, never by calling the model, so the rebuilt game is the one the run
   played, including an action whose receipt the kill took. Environments are deterministic in their
   seed and actions (environments/protocol.py), so the replayed frames are the frames it saw.
3. A line is whole or not at all: a torn last line (a kill mid-write) is cut off, so that action
   was not applied, which the rebuilt world agrees with, since the process that applied it died.
4. The journal and the checkpoints agree, or nothing is played. A settled key is settled only for
   the action journaled under it: asked for another action, `perform` raises JournalError (the
   journal is not this run's, or the checkpoints were rolled back). A key journaled twice, and an
   action the checkpoints' receipts record as applied that the journal lacks (a deleted or cut
   journal: the rebuilt game would start over while the model goes on), are JournalErrors at
   `reopen`, naming the line or the keys and the fix.

5. An environment that keeps its own record (a RecordingEnvironment: arc_agi3's toolkit recording)
   is stepped with the reasoning of the reply that chose the action, and the journal keeps that
   reasoning beside the action, so the rebuilt game's record says again what the run's said.

Keys are `step N` for the action of accepted step N and `step N reset` for the reset after it
(`action_key`, `reset_key`): `journaled_step` reads the step back, which a resume compares with its
last checkpoint's (turnstate/durable/resume.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from turnstate.durable.jsonl import AppendedLines, whole_lines
from turnstate.durable.layout import JOURNAL
from turnstate.environments.protocol import Environment, Frame, RecordingEnvironment

REFUSED = "The environment refused the action"  # how the model reads a refused action: never journaled (rule 1)
_KEY = re.compile(r"step (\d+)( reset)?")


def action_key(step: int) -> str:
    """The key of accepted step `step`'s action."""
    return f"step {step}"


def reset_key(step: int) -> str:
    """The key of the reset that follows step `step`'s action (it ended a game)."""
    return f"step {step} reset"


def journaled_step(key: str) -> int | None:
    """The accepted step a key comes from (None: a key no runner writes)."""
    match = _KEY.fullmatch(key)
    return None if match is None else int(match.group(1))


@dataclass(frozen=True)
class Journaled:
    """One journaled action, and the reasoning it was stepped with (rule 5; None: none given)."""

    action: str
    reasoning: str | None = None


class JournalError(Exception):
    """A journal that cannot be read or does not replay on its environment; the message names it."""


class JournaledEnvironment:
    """`environment`, its actions performed under keys and journaled at `path` (rules above)."""

    def __init__(self, environment: Environment, path: Path) -> None:
        self.environment = environment
        self.path = path
        self._settled: dict[str, tuple[str, Frame]] = {}  # keys applied before a resume: action, frame
        self._applied: set[str] = set()
        self._journal = AppendedLines(path)

    @classmethod
    def reopen(
        cls, environment: Environment, path: Path, applied: Collection[str] = ()
    ) -> tuple[JournaledEnvironment, Frame]:
        """Rule 2: the environment reset and every journaled action applied again, and the frame the
        last one led to (the reset frame when none). `applied` are the keys the checkpoints' receipts
        record as applied: each must be journaled (rule 4)."""
        entries = read_journal(path)
        missing = [key for key in applied if key not in entries]
        if missing:
            shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
            state = f"holds {len(entries)} actions" if path.exists() else "is missing"
            raise JournalError(
                f"{path}: the checkpoints record {len(missing)} actions applied that the journal lacks ({shown}); "
                f"it {state}, so the game cannot be rebuilt where the run left it; fix: restore {JOURNAL} "
                "from a backup of the run folder, or start the run again"
            )
        frame = environment.reset()
        journaled = cls(environment, path)
        for number, (key, entry) in enumerate(entries.items(), 1):
            try:
                frame = journaled._step(entry)
            except ValueError as refused:
                raise JournalError(f"{path}: line {number} ({entry.action!r}) does not replay: {refused}") from None
            journaled._settled[key] = (entry.action, frame)
            journaled._applied.add(key)
        return journaled, frame

    def perform(self, key: str, action: str, reasoning: str | None = None) -> tuple[Frame, bool]:
        """Rule 1: the frame `action` led to, and whether it was settled (applied before a resume)
        rather than applied now. Raises ValueError, changing nothing, when the game refuses it.
        `reasoning` is the reply's readable reasoning, for an environment that records it (rule 5)."""
        if key in self._settled:
            journaled, frame = self._settled[key]
            if journaled != action:
                raise JournalError(
                    f"{self.path}: {key} journaled {journaled!r}, and the checkpoints ask it to perform {action!r}: "
                    "the journal is not this run's or the checkpoints were rolled back; fix: restore the run folder "
                    "whole from one backup"
                )
            del self._settled[key]
            return frame, True
        if key in self._applied:
            raise RuntimeError(f"{key} was applied already: it cannot be performed twice")
        entry = Journaled(action, reasoning if isinstance(self.environment, RecordingEnvironment) else None)
        frame = self._step(entry)
        self._journal.write(
            {"key": key, "action": action, **({"reasoning": entry.reasoning} if entry.reasoning else {})}
        )
        self._applied.add(key)
        return frame, False

    def _step(self, entry: Journaled) -> Frame:
        if isinstance(self.environment, RecordingEnvironment):
            return self.environment.step_explained(entry.action, entry.reasoning)
        return self.environment.step(entry.action)

    def close(self) -> None:
        self._journal.close()


def read_journal(path: Path, *, cut: bool = True) -> dict[str, Journaled]:
    """Rule 3: the journal's whole lines, key to action (and its reasoning) in the file's order (a torn last line cut
    off the file unless `cut` is False); a key journaled twice is a JournalError (rule 4)."""
    try:
        content = whole_lines(path)[0] if cut else path.read_bytes()
    except FileNotFoundError:
        return {}
    entries: dict[str, Journaled] = {}
    lines = content.split(b"\n")[:-1]  # after the last newline: nothing, or a torn line
    for number, line in enumerate(lines, 1):
        try:
            entry = json.loads(line)
            key, action, reasoning = str(entry["key"]), str(entry["action"]), entry.get("reasoning")
            if reasoning is not None and not isinstance(reasoning, str):
                raise TypeError
        except (ValueError, KeyError, TypeError, AttributeError):
            raise JournalError(f"{path}: line {number} is not a journaled action") from None
        if key in entries:
            first = list(entries).index(key) + 1
            raise JournalError(
                f"{path}: line {number} journals {key!r} again (first at line {first}): an action is applied once, "
                "so the journal was altered; fix: remove the repeated line, or restore the journal from a backup"
            )
        entries[key] = Journaled(action, reasoning)
    return entries
