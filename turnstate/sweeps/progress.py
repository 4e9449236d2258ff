"""A sweep as it goes, for a live view on a terminal (`turnstate sweep`): how many of its runs were
skipped (they had ended before), are done, failed, are running (and of those, how many wait on the
shared rate limit now), are queued, and about how long the rest will take.

The driver tells `SweepProgress` when it starts a run and when one ends; a view reads `snapshot()`
from another thread, which adds what each running run's folder says: its steps so far and whether
it waits on `client.rate_limit` (the marker its pacing writes, session/rate_limit.py). So the view
works for every engine whose runs write to the sweep's folder: the pool's processes and Ray's workers.

Time left is an estimate from the runs that ended in this sweep: each running run is taken to need
their mean time in all, each queued one as much again, `in_flight` at a time. Before any has ended,
it is unknown."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from turnstate.durable.layout import RATE_LIMIT_WAIT, STEP_FILE, SWEEP_RUNS
from turnstate.session.durable_run import ENDED
from turnstate.sweeps.plan import ENDED_OUTCOMES, Plan, PlannedRun, run_folder


@dataclass(frozen=True)
class RunningRun:
    key: str
    steps: int  # recorded so far
    max_actions: int
    seconds: float  # since this sweep started it
    waiting_on_limit: bool


@dataclass(frozen=True)
class Snapshot:
    total: int
    skipped: int
    done: int  # ended in this sweep with a run's own ending (ENDED)
    failed: int  # ended in this sweep otherwise (failed closed, crashed, an error, interrupted)
    running: tuple[RunningRun, ...]
    queued: int
    seconds: float
    seconds_left: float | None  # None: no run has ended yet to estimate from

    @property
    def waiting_on_limit(self) -> int:
        return sum(run.waiting_on_limit for run in self.running)


class SweepProgress:
    """What a sweep's driver has done so far (the module docstring); thread-safe."""

    def __init__(
        self,
        runs: Iterable[PlannedRun],
        runs_root: Path,
        in_flight: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._runs = {planned.key: planned for planned in runs}
        self.runs_root, self.in_flight = runs_root, in_flight
        self._clock, self._wall_clock = clock, wall_clock
        self._lock = threading.Lock()
        self._began = clock()
        self._skipped: set[str] = set()
        self._started: dict[str, float] = {}
        self._ended: dict[str, tuple[str, float]] = {}  # key -> (outcome, seconds it took)

    @classmethod
    def of(cls, plan: Plan, sweep_dir: Path, in_flight: int | None = None) -> SweepProgress:
        """The progress of `plan` played on `sweep_dir`, `in_flight` runs at once (default: its budget's)."""
        return cls(plan.runs, sweep_dir / SWEEP_RUNS, in_flight or plan.sweep.budget.in_flight)

    def skipped(self, keys: Iterable[str]) -> None:
        """Runs that had ended before this sweep began: it does not play them."""
        with self._lock:
            self._skipped.update(keys)

    def started(self, planned: PlannedRun) -> None:
        with self._lock:
            self._started[planned.key] = self._clock()

    def ended(self, row: Mapping[str, Any]) -> None:
        """A run's results row, as the driver recorded it."""
        key = str(row["key"])
        with self._lock:
            began = self._started.pop(key, self._clock())
            self._ended[key] = (str(row["outcome"]), self._clock() - began)

    def snapshot(self) -> Snapshot:
        with self._lock:
            started, ended, skipped = dict(self._started), dict(self._ended), len(self._skipped)
        now, wall = self._clock(), self._wall_clock()
        running = tuple(self._running(key, now - began, wall) for key, began in started.items())
        queued = len(self._runs) - skipped - len(ended) - len(running)
        took = [seconds for _, seconds in ended.values()]
        left = None
        if took:
            mean = sum(took) / len(took)
            work = sum(max(mean - run.seconds, 0.0) for run in running) + queued * mean
            left = work / max(1, min(self.in_flight, len(running) + queued))
        done = sum(outcome in ENDED for outcome, _ in ended.values())
        return Snapshot(len(self._runs), skipped, done, len(ended) - done, running, queued, now - self._began, left)

    def _running(self, key: str, seconds: float, wall: float) -> RunningRun:
        try:
            run_dir = run_folder(self.runs_root, key)
        except OSError:  # the folder went away under the view: it says what it can
            run_dir = None
        max_actions = int(((self._runs[key].profile.get("agent") or {}).get("max_actions")) or 0)
        if run_dir is None:
            return RunningRun(key, 0, max_actions, seconds, False)
        return RunningRun(key, _steps(run_dir), max_actions, seconds, _waits(run_dir, wall))


def skipped_keys(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    """The keys of the rows whose run had ended (a sweep's resume skips them)."""
    return [str(row["key"]) for row in rows if row["outcome"] in ENDED_OUTCOMES]


def _steps(run_dir: Path) -> int:
    try:
        with os.scandir(run_dir) as entries:
            return sum(1 for entry in entries if STEP_FILE.fullmatch(entry.name))
    except OSError:
        return 0


def _waits(run_dir: Path, now: float) -> bool:
    """Whether the run's marker says it waits on the rate limit now (a marker past its time does not)."""
    try:
        until = float((run_dir / RATE_LIMIT_WAIT).read_text())
    except (OSError, ValueError):
        return False
    return until > now


def progress_lines(snapshot: Snapshot, title: str) -> list[str]:
    """The snapshot as a terminal shows it while the sweep goes: its counts, its time so far and left,
    then a line per running run."""
    lines = [f"{title}: {counts(snapshot)}", f"{_duration(snapshot.seconds)} so far, {_left(snapshot)}"]
    for run in sorted(snapshot.running, key=lambda run: run.key):
        doing = "waiting on the rate limit" if run.waiting_on_limit else "playing"
        of = f"/{run.max_actions}" if run.max_actions else ""
        lines.append(f"  {run.key}: step {run.steps}{of}, {doing}, {_duration(run.seconds)}")
    return lines


def counts(snapshot: Snapshot) -> str:
    """How many runs are where: "8 runs: 3 done, 1 failed, 2 running (1 waiting on the rate limit), ..."."""
    waiting = f" ({snapshot.waiting_on_limit} waiting on the rate limit)" if snapshot.waiting_on_limit else ""
    parts = [
        f"{snapshot.done} done",
        f"{snapshot.failed} failed",
        f"{len(snapshot.running)} running{waiting}",
        f"{snapshot.queued} queued",
        *([f"{snapshot.skipped} skipped"] if snapshot.skipped else []),
    ]
    return f"{snapshot.total} runs: {', '.join(parts)}"


def _left(snapshot: Snapshot) -> str:
    if snapshot.seconds_left is None:
        return "time left unknown until a run ends"
    if snapshot.seconds_left < 1:
        return "about to end" if snapshot.running else "nothing left"
    return f"about {_duration(snapshot.seconds_left)} left"


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"
