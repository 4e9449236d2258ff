"""The run folder's and the sweep folder's layout: every name either holds, spelled here once.

A run folder (runs/<run-id>/) is what a run leaves and what a resume, `show`, `events`, the report
and a sweep read back; people copy and share it, so nothing secret is kept in it (the checkpoint key
and the local provider's services live in the user's state folder, durable/state_home.py). Each
name's module owns what the file holds; this module owns only where it is.

A sweep folder (sweeps/<sweep-id>/) holds the sweep's record, its results and one run folder per
planned run under runs/<key>/.
"""

from __future__ import annotations

import os
import re
import secrets
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Final

# -- a run folder ---------------------------------------------------------------------------------
RUN_META: Final = "run_meta.json"  # the run's settings, outcome and totals, rewritten as it goes
EVENTS: Final = "events.jsonl"  # the normalized conversation log (durable/events.py)
CALLS: Final = "calls.jsonl"  # the usage journal, a line per provider call (durable/accounting.py)
JOURNAL: Final = "side_effects.jsonl"  # the action journal (durable/side_effects.py)
TRANSITIONS: Final = "transitions.jsonl"  # every fired transition of the run's machines
CHECKPOINT_FILE: Final = "checkpoints.sqlite3"  # the checkpoint store (durable/checkpoints/)
CHECKPOINT_POINTER: Final = "checkpoints.json"  # where they are instead, when in PostgreSQL (checkpoints/stores.py)
FAILED_TURN: Final = "failed_turn.json"  # the attempts of the turn that failed closed, named in run_meta.json
RATE_LIMIT_WAIT: Final = ".waiting_on_rate_limit"  # while a call waits on client.rate_limit: until when (Unix seconds)
SUMMARY_INPUT: Final = "summary_input.json"  # the latest harness summary call's input, written before the call
TOOL_RESULTS: Final = "tool_results"  # offloaded tool results, a file per ref (durable/tool_results.py)
IMAGES: Final = "input_images"  # the images the run's inputs showed, a file per digest (durable/images.py)
ENVIRONMENT_RECORDINGS: Final = "environment_recordings"
"""An environment's own record of its plays (RecordingEnvironment: arc_agi3 writes the toolkit's
JSONL recordings there, <scorecard>/<game>-<play>.jsonl)."""
REPORT: Final = "report.html"  # a run's or a sweep's page, in the folder it reports on

APPENDED_FILES: Final = (EVENTS, JOURNAL, CALLS, TRANSITIONS)  # a run's append-only JSON-lines files

STEP_FILE: Final = re.compile(r"step_(\d{6,})\.json")  # a name step_name gives; its group the step
STEP_GLOB: Final = "step_*.json"


def step_name(index: int) -> str:
    """A step record's file name, padded so that a plain sort is the steps' order (up to a million)."""
    return f"step_{index:06d}.json"


def recorded_steps(run_dir: Path) -> list[int]:
    """The steps whose record `run_dir` holds, in order (one listing; OSError if it cannot be read)."""
    return sorted(int(match[1]) for name in os.listdir(run_dir) if (match := STEP_FILE.fullmatch(name)))


def image_name(digest: str) -> str:
    """An image's file in IMAGES: its PNG bytes under their sha256, so each is kept once."""
    return f"{digest}.png"


def compaction_name(number: int) -> str:
    """The record of the run's `number`th committed harness summary."""
    return f"compaction_{number:03d}.json"


def damaged_name(path: Path) -> Path:
    """Where a damaged checkpoint store is set aside (checkpoints rule 10): `<name>.damaged-<UTC time>`."""
    return path.with_name(path.name + damaged_suffix())


def damaged_suffix() -> str:
    """What a damaged store's name is given when it is set aside: `.damaged-<UTC time>`."""
    return f".damaged-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"


# -- names ----------------------------------------------------------------------------------------
ID_PATTERN: Final = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"
"""A profile's or a sweep's id: a folder name (runs/<id>-..., sweeps/<id>) that starts with a letter or
digit, so never `.` or `..`, which would name the folder above, nor a hidden one."""

RUN_ID_SUFFIX: Final = r"-[0-9]{8}-[0-9]{6}-[0-9a-f]{6}"  # what new_run_id puts after the profile's id
RUN_ID: Final = re.compile(ID_PATTERN.strip("^$") + RUN_ID_SUFFIX)  # new_run_id's names


def new_run_id(profile_id: str) -> str:
    """A new run's id and folder name: the profile's id, the UTC time and 24 random bits."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    return f"{profile_id}-{stamp}-{secrets.token_hex(3)}"


# -- a sweep folder -------------------------------------------------------------------------------
RUNS_ROOT: Final = Path("runs")  # `turnstate run`'s default folder of run folders
SWEEPS_ROOT: Final = Path("sweeps")  # `turnstate sweep`'s default folder of sweep folders
SWEEP_RUNS: Final = "runs"  # a sweep folder's run folders, runs/<key>/<run-id>/
SWEEP_RECORD: Final = "sweep.json"  # the sweep's definition as it was played
RESULTS: Final = "results.jsonl"  # a line per planned run
RESULTS_TABLE: Final = "results.csv"  # the same rows as a table
SUMMARY: Final = "summary.json"  # per profile and per game, with intervals and comparisons
SWEEP_LOCK: Final = "sweep.lock"  # the one driver's lock
