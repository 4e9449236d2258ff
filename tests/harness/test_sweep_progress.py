"""A sweep's live progress (turnstate/sweeps/progress.py): what the driver says of its runs, and what
their folders say while they play (the steps recorded, the rate-limit marker their pacing writes),
counted as a terminal shows them; on clocks the test moves."""

from __future__ import annotations

from pathlib import Path

import pytest

from turnstate.durable.layout import RATE_LIMIT_WAIT, RUN_META, step_name
from turnstate.sweeps.plan import PlannedRun
from turnstate.sweeps.progress import SweepProgress, progress_lines

WALL = 1_800_000_000.0  # the wall clock's now, in Unix seconds


def planned(key: str, max_actions: int = 10) -> PlannedRun:
    return PlannedRun(key, {"agent": {"max_actions": max_actions}}, "p", "beacon_grid", "beacon_grid", 0, 1)


def playing(runs_root: Path, key: str, steps: int, waiting_until: float | None = None) -> Path:
    """A run folder as a run playing leaves it: its run_meta.json, `steps` step records, and the
    rate-limit marker if it waits."""
    run_dir = runs_root / key / f"p-20261207-000000-{len(key):06x}"
    run_dir.mkdir(parents=True)
    (run_dir / RUN_META).write_text('{"outcome": "running"}')
    for step in range(1, steps + 1):
        (run_dir / step_name(step)).write_text("{}")
    if waiting_until is not None:
        (run_dir / RATE_LIMIT_WAIT).write_text(f"{waiting_until:.3f}\n")
    return run_dir


@pytest.fixture
def clock() -> list[float]:
    return [100.0]


@pytest.fixture
def progress(tmp_path, clock) -> SweepProgress:
    runs = [planned(key) for key in ("a", "b", "c", "d", "e")]
    return SweepProgress(runs, tmp_path, in_flight=2, clock=lambda: clock[0], wall_clock=lambda: WALL)


def test_running_runs_say_their_steps_and_whether_they_wait_on_the_limit_now(progress, tmp_path, clock):
    progress.skipped(["a"])
    for key in ("b", "c", "d"):
        progress.started(planned(key))
    playing(tmp_path, "b", steps=3)
    playing(tmp_path, "c", steps=1, waiting_until=WALL + 0.4)
    playing(tmp_path, "d", steps=2, waiting_until=WALL - 5)  # a killed run's marker: its time has gone by
    clock[0] += 4
    snapshot = progress.snapshot()
    assert (snapshot.total, snapshot.skipped, snapshot.done, snapshot.failed, snapshot.queued) == (5, 1, 0, 0, 1)
    assert [(run.key, run.steps, run.waiting_on_limit) for run in snapshot.running] == [
        ("b", 3, False),
        ("c", 1, True),
        ("d", 2, False),
    ]
    assert snapshot.waiting_on_limit == 1 and snapshot.seconds == 4 and snapshot.seconds_left is None
    assert progress_lines(snapshot, "sweep s") == [
        "sweep s: 5 runs: 0 done, 0 failed, 3 running (1 waiting on the rate limit), 1 queued, 1 skipped",
        "4 s so far, time left unknown until a run ends",
        "  b: step 3/10, playing, 4 s",
        "  c: step 1/10, waiting on the rate limit, 4 s",
        "  d: step 2/10, playing, 4 s",
    ]


def test_time_left_is_the_ended_runs_mean_for_what_is_left_in_flight_at_a_time(progress, tmp_path, clock):
    progress.started(planned("a"))
    progress.started(planned("b"))
    clock[0] += 10
    progress.ended({"key": "a", "outcome": "win"})  # it took 10 s
    progress.started(planned("c"))
    clock[0] += 4  # b has played 14 s (past the mean: nothing more counted), c 4 s
    progress.ended({"key": "b", "outcome": "failed_closed"})  # 14 s: the mean is 12
    snapshot = progress.snapshot()
    assert (snapshot.done, snapshot.failed, len(snapshot.running), snapshot.queued) == (1, 1, 1, 2)
    assert snapshot.seconds_left == pytest.approx(((12 - 4) + 2 * 12) / 2)  # c's 8 s and two runs of 12, two at a time
    assert progress_lines(snapshot, "s")[1] == "14 s so far, about 16 s left"


def test_a_run_not_yet_in_its_folder_or_whose_folder_is_not_one_says_no_steps(progress, tmp_path):
    progress.started(planned("a"))
    (tmp_path / "b").write_text("not a folder")  # the view still draws
    progress.started(planned("b"))
    assert [(run.key, run.steps, run.waiting_on_limit) for run in progress.snapshot().running] == [
        ("a", 0, False),
        ("b", 0, False),
    ]
