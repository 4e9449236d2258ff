"""The compaction sweep on both environments (sweeps/compaction-arc.yaml: 3 local profiles x beacon_grid
and the ARC-AGI-3 game `cued` x 2 seeds), on the process pool and on a local Ray: killed outright
mid-way (the driver and its runs), then run again, it ends every run and writes the results and the
report. Needs the arc extra (and the ray extra for Ray); .ci/arc runs it."""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from turnstate.reports.folder import write_report
from turnstate.sweeps.engines import Engine, PoolEngine, run_sweep
from turnstate.sweeps.plan import Plan, load_sweep

from ..arc_extra import TOOLKIT

SWEEP = Path(__file__).resolve().parents[2] / "sweeps" / "compaction-arc.yaml"
KEY = "sweep-test-key-0123456789abcdef"  # exact resumes: the encrypted reasoning is kept, sealed

pytestmark = pytest.mark.skipif(
    not TOOLKIT,
    reason="the ARC-AGI-3 toolkit is not installed (Python 3.12+ and pip install -e '.[arc]' in turnstate's checkout)",
)


RAY = importlib.util.find_spec("ray") is not None
ENGINES = [
    "pool",
    pytest.param(
        "ray",
        marks=pytest.mark.skipif(
            not RAY, reason="Ray is not installed (pip install -e '.[ray]' in turnstate's checkout)"
        ),
    ),
]


def _marked(mark: str) -> set[int]:
    """The processes whose environment holds `mark` (the driver's descendants, wherever Ray put them)."""
    found = set()
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and mark.encode() in (entry / "environ").read_bytes():
                found.add(int(entry.name))
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return found


def _crash(mark: str, within: float = 15) -> None:
    """The machine's crash: SIGKILL every process of the sweep at once, the driver, the pool's or Ray's
    workers (each Ray worker is in a process group of its own, and lives on until it notices its
    raylet gone: long enough, on a loaded machine, to record its run's end)."""
    deadline = time.monotonic() + within
    while alive := _marked(mark):
        assert time.monotonic() < deadline, f"still running after the kill: {sorted(alive)}"
        for pid in alive:
            try:
                os.kill(pid, signal.SIGSTOP)  # first stop them all, so none records anything meanwhile
            except ProcessLookupError:
                continue
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
        time.sleep(0.1)


def engine_for(name: str, plan: Plan) -> Engine:
    if name == "pool":
        return PoolEngine(plan.adapter_ids)
    from turnstate.sweeps.ray_engine import RayEngine

    return RayEngine("local", plan.sweep.budget.in_flight)


@pytest.mark.parametrize("engine", ENGINES)
def test_the_sweep_on_both_environments_resumes_the_runs_a_crash_killed(tmp_path, monkeypatch, engine):
    """On the pool, and on a local Ray (`--ray local`) started by the command and by the second sweep."""
    monkeypatch.setenv("TURNSTATE_CHECKPOINT_KEY", KEY)
    out = tmp_path / "sweep"
    chosen = ["--ray", "local"] if engine == "ray" else []
    mark = f"TURNSTATE_TEST_CRASH_MARK={uuid.uuid4().hex}"
    driver = subprocess.Popen(
        [sys.executable, "-m", "turnstate.cli", "sweep", str(SWEEP), "--out", str(out), *chosen],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, mark.partition("=")[0]: mark.partition("=")[2]},
    )
    deadline = time.monotonic() + 120
    while len(list(out.glob("runs/*/*/step_000004.json"))) < 2:
        assert driver.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    _crash(mark)
    driver.wait()
    killed = [
        path.parent
        for path in out.glob("runs/*/*/run_meta.json")
        if json.loads(path.read_text())["outcome"] == "running"
    ]
    assert killed

    plan = load_sweep(SWEEP)
    rows = run_sweep(plan, out, engine_for(engine, plan))
    outcomes = {(row["profile"], row["environment"]): set() for row in rows}
    for row in rows:
        outcomes[row["profile"], row["environment"]].add(row["outcome"])
    assert all(found == {"win"} for (profile, game), found in outcomes.items() if game == "beacon_grid")
    assert outcomes["local-openai-continuous", "arc_agi3"] == {"win"}
    assert outcomes["local-openai-uncompacted", "arc_agi3"] == {"failed_closed"}  # its window overflows
    resumed = {row["run_dir"] for row in rows if row["resumes"] == 1}
    assert resumed == {str(path.relative_to(out)) for path in killed}  # the same runs went on
    with (out / "results.csv").open() as table:
        assert len(list(csv.DictReader(table))) == 12
    summary = json.loads((out / "summary.json").read_text())
    (difference,) = [item for item in summary["comparisons"] if item["a"] == "local-openai-continuous"]
    assert difference["difference"] == 0.5 and difference["low"] < 0.5 < difference["high"]
    assert write_report(out) == out / "report.html"
