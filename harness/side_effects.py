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
"""

from __future__ import annotations

import json
from pathlib import Path

from turnstate.harness.environments.protocol import Environment, Frame
from turnstate.harness.jsonl import AppendedLines, whole_lines

JOURNAL = "side_effects.jsonl"


class JournalError(Exception):
    """A journal that cannot be read or does not replay on its environment; the message names it."""


class JournaledEnvironment:
    """`environment`, its actions performed under keys and journaled at `path` (rules above)."""

    def __init__(self, environment: Environment, path: Path) -> None:
        self.environment = environment
        self.path = path
        self._settled: dict[str, Frame] = {}  # keys applied before a resume, with the frame each led to
        self._applied: set[str] = set()
        self._journal = AppendedLines(path)

    @classmethod
    def reopen(cls, environment: Environment, path: Path) -> tuple[JournaledEnvironment, Frame]:
        """Rule 2: the environment reset and every journaled action applied again, and the frame the
        last one led to (the reset frame when none)."""
        frame = environment.reset()
        entries = _read_journal(path)
        journaled = cls(environment, path)
        for number, (key, action) in enumerate(entries, 1):
            try:
                frame = environment.step(action)
            except ValueError as refused:
                raise JournalError(f"{path}: line {number} ({action!r}) does not replay: {refused}") from None
            journaled._settled[key] = frame
            journaled._applied.add(key)
        return journaled, frame

    def perform(self, key: str, action: str) -> tuple[Frame, bool]:
        """Rule 1: the frame `action` led to, and whether it was settled (applied before a resume)
        rather than applied now. Raises ValueError, changing nothing, when the game refuses it."""
        if key in self._settled:
            return self._settled.pop(key), True
        if key in self._applied:
            raise RuntimeError(f"{key} was applied already: it cannot be performed twice")
        frame = self.environment.step(action)
        self._journal.write({"key": key, "action": action})
        self._applied.add(key)
        return frame, False

    def close(self) -> None:
        self._journal.close()


def _read_journal(path: Path) -> list[tuple[str, str]]:
    """Rule 3: the journal's whole lines, a torn last line cut off."""
    entries = []
    for number, line in enumerate(whole_lines(path)[0].splitlines(), 1):
        try:
            entry = json.loads(line)
            entries.append((str(entry["key"]), str(entry["action"])))
        except (ValueError, KeyError, TypeError):
            raise JournalError(f"{path}: line {number} is not a journaled action") from None
    return entries
