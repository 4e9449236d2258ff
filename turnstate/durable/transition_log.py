"""The run's transition log (transitions.jsonl): a line per fired transition of the run's machines,
which a step record points into by line number rather than copying (`TransitionLines`; artifacts'
`step_transitions` reads them back), and which the report and `turnstate diagrams --run` count
(`read_transition_log`)."""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from turnstate.durable.layout import TRANSITIONS

TRANSITION_KEYS = ("machine", "source", "trigger", "dest")


class TransitionLogError(ValueError):
    """A run's transitions.jsonl is missing, unreadable or not a run's log; the message says which line."""


@dataclass(frozen=True)
class TransitionLines:
    """Lines of transitions.jsonl: the `count` from line `first` (numbered from 1) on."""

    first: int
    count: int


def read_transition_log(log: Path, declared: Collection[str]) -> tuple[list[dict[str, str]], list[str]]:
    """A run's transition records and warnings about them, or TransitionLogError.

    A kill can leave the last record half-written, so a torn last line is skipped with a warning;
    anywhere else, a line that is not a transition record means the file is not a run's log."""
    try:
        lines = log.read_bytes().split(b"\n")
    except FileNotFoundError:
        raise TransitionLogError(f"{log}: missing; fix: pass a run folder that `turnstate run` wrote") from None
    except OSError as error:
        raise TransitionLogError(f"{log}: cannot read it ({error.strerror})") from None
    torn_tail = lines[-1] != b""  # a complete log ends with a newline
    records, warnings = [], []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            if torn_tail and number == len(lines):
                warnings.append(f"{log}: line {number} is a half-written last record (a killed run); skipped")
                continue
            raise TransitionLogError(
                f"{log}: line {number} is not JSON; fix: pass the {TRANSITIONS} of a run"
            ) from None
        if not isinstance(record, dict) or not all(isinstance(record.get(key), str) for key in TRANSITION_KEYS):
            needed = ", ".join(TRANSITION_KEYS)
            raise TransitionLogError(f"{log}: line {number} is not a transition record (needs {needed} as text)")
        if record["machine"] not in declared:
            names = ", ".join(declared)
            raise TransitionLogError(
                f"{log}: line {number} names machine {record['machine']!r}, which is not declared (declared: {names})"
            )
        records.append(record)
    if not records:
        raise TransitionLogError(f"{log}: no transitions recorded; nothing to draw")
    return records, warnings
