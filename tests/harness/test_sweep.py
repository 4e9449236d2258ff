"""Sweeps (turnstate/sweeps/plan.py, turnstate/sweeps/engines.py): the plan and its errors, the statistics, and
the process pool playing real runs on the embedded local provider: results, resume, the cost cap,
Ctrl-C and a hard-killed driver leaving no process behind."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from turnstate.session.profile import Profile, resolve_profile
from turnstate.sweeps.engines import PoolEngine, _driving, run_sweep
from turnstate.sweeps.plan import (
    RESULT_COLUMNS,
    SweepError,
    load_sweep,
    newcombe,
    run_folder,
    summarize,
    wilson,
)

from .test_resume import invoke, killed_run

FOUR_RUNS = """
id: four
profiles: [local-manual-rolling, {second}]
environments:
  - name: beacon_grid
    options: {{levels: 2}}
    seeds: [0, 1]
budget: {{in_flight: 2{cap}}}
"""


def sweep_file(
    folder: Path, second: str = "local-openai-harness-summary", cap: str = "", text: str | None = None
) -> Path:
    path = folder / "sweep.yaml"
    path.write_text(text if text is not None else FOUR_RUNS.format(second=second, cap=cap))
    return path


# -- the plan ----------------------------------------------------------------------------------------


def test_a_sweep_plans_profiles_by_environments_by_seeds_by_repetitions(tmp_path):
    text = FOUR_RUNS.format(second="local-openai-continuous", cap="") + "repetitions: 2\n"
    plan = load_sweep(sweep_file(tmp_path, text=text))
    assert len(plan.runs) == 2 * 2 * 2
    keys = [planned.key for planned in plan.runs]
    assert len(set(keys)) == len(keys)
    assert "local-manual-rolling.beacon_grid.s1.r2" in keys
    seeded = {(planned.profile_id, planned.seed) for planned in plan.runs}
    assert ("local-openai-continuous", 1) in seeded
    assert all(planned.profile["environment"]["options"] == {"levels": 2} for planned in plan.runs)
    assert plan.adapter_ids == ["openai.chat_completions.v1", "openai.responses.v1"]


def test_profiles_that_differ_only_in_compaction_are_compared_by_default(tmp_path):
    control = tmp_path / "control.yaml"
    summary = resolve_profile("local-openai-harness-summary").read_text()
    control.write_text(
        summary.replace("id: local-openai-harness-summary", "id: control")
        .replace("strategy: harness_summary", "strategy: none")
        .replace("    trigger_tokens: 1500\n", "")
    )
    text = "id: pairs\nprofiles: [local-openai-harness-summary, control.yaml, local-openai-continuous]\n"
    plan = load_sweep(sweep_file(tmp_path, text=text))
    assert plan.comparisons == (("local-openai-harness-summary", "control"),)


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("id: x\nprofiles: [local-manual-rolling]\nbudgett: {}\n", "budgett: unknown key"),
        ("id: x\nprofiles: []\n", "profiles: "),
        ("id: x\nprofiles: [no-such-profile]\n", "profiles.0 (no-such-profile)"),
        ("id: x\nprofiles: [local-manual-rolling, local-manual-rolling]\n", "named twice"),
        ("id: x\nprofiles: [local-manual-rolling]\ncompare: [{a: local-manual-rolling, b: other}]\n", "compare.0.b"),
        ("id: x\nprofiles: [local-manual-rolling]\nbudget: {in_flight: 0}\n", "budget.in_flight"),
        ("id: x\nprofiles: [local-manual-rolling]\nenvironments: [{name: no_such_game}]\n", "environments.0"),
        ("id: ..\nprofiles: [local-manual-rolling]\n", "id: String should match pattern"),  # the folder above
        (
            "id: x\nruntime: {strategy: manual_rolling}\nagent: {}\n",
            "this is a profile (it has `runtime:`); fix: run it with `turnstate run",
        ),
    ],
)
def test_a_bad_sweep_file_is_one_error_naming_the_file_and_the_key(tmp_path, text, named):
    path = sweep_file(tmp_path, text=text)
    with pytest.raises(SweepError) as raised:
        load_sweep(path)
    assert str(path) in str(raised.value) and named in str(raised.value)


def test_bad_bytes_in_a_sweep_file_are_named_as_a_profiles_are(tmp_path):
    path = tmp_path / "sweep.yaml"
    path.write_bytes(b"id: x\nprofiles: [\xff]\n")
    with pytest.raises(SweepError, match=r"not UTF-8 text: byte 0xff"):
        load_sweep(path)


def test_the_cli_names_a_bad_sweep_without_a_traceback(tmp_path):
    path = sweep_file(tmp_path, text="id: x\nprofiles: [local-manual-rolling]\nengine: slurm\n")
    done = subprocess.run([sys.executable, "-m", "turnstate.cli", "sweep", str(path)], capture_output=True, text=True)
    assert done.returncode == 1 and "engine" in done.stderr and "Traceback" not in done.stderr


# -- the statistics -----------------------------------------------------------------------------------


def test_wilsons_interval_stays_in_the_unit_range_and_is_not_degenerate_at_the_ends():
    assert wilson(0, 0) == (None, None)
    low, high = wilson(2, 2)
    assert high == 1.0 and low == pytest.approx(0.3424, abs=1e-4)  # Wilson's own tables
    low, high = wilson(0, 10)
    assert low == 0.0 and high == pytest.approx(0.2775, abs=1e-4)
    low, high = wilson(5, 10)
    assert (low, high) == (pytest.approx(0.2366, abs=1e-4), pytest.approx(0.7634, abs=1e-4))


def test_newcombes_interval_for_a_difference_of_two_proportions():
    difference, low, high = newcombe(56, 70, 48, 80)  # Newcombe (1998), table II, example (a)
    assert difference == pytest.approx(0.2)
    assert (low, high) == (pytest.approx(0.0524, abs=1e-4), pytest.approx(0.3339, abs=1e-4))


def test_the_summary_of_several_environments_gives_each_profile_and_comparison_per_environment_too():
    def row(profile, environment, outcome):
        return {
            "profile": profile,
            "environment": environment,
            "outcome": outcome,
            "cost": 0.01,
            "turns": 10,
            "levels": 1,
            "tokens_in": 100,
            "tokens_out": 10,
        }

    rows = [row("a", "grid", "win"), row("b", "grid", "win"), row("a", "arc", "win"), row("b", "arc", "failed_closed")]
    summary = summarize(rows, [("a", "b")])
    assert [(entry["profile"], entry["wins"], entry["runs"]) for entry in summary["profiles"]] == [
        ("a", 2, 2),
        ("b", 1, 2),
    ]
    assert [(entry["environment"], entry["profile"], entry["success_rate"]) for entry in summary["by_environment"]] == [
        ("grid", "a", 1.0),
        ("grid", "b", 1.0),
        ("arc", "a", 1.0),
        ("arc", "b", 0.0),
    ]
    assert [(entry["environment"], entry["difference"]) for entry in summary["comparisons_by_environment"]] == [
        ("grid", 0.0),
        ("arc", 1.0),
    ]
    assert summary["comparisons"][0]["difference"] == 0.5
    assert "by_environment" not in summarize(rows[:2], [("a", "b")])  # one environment: nothing to split


# -- the pool, on real runs -----------------------------------------------------------------------------


def test_the_pool_plays_four_runs_and_writes_the_results_and_summary(tmp_path):
    plan = load_sweep(sweep_file(tmp_path))
    rows = run_sweep(plan, tmp_path / "out", PoolEngine(plan.adapter_ids))
    assert len(rows) == 4 and {row["outcome"] for row in rows} == {"win"}
    out = tmp_path / "out"
    with (out / "results.csv").open() as table:
        read = list(csv.DictReader(table))
    assert tuple(read[0]) == RESULT_COLUMNS and len(read) == 4
    lines = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert lines == rows
    for row in rows:
        meta = json.loads((out / row["run_dir"] / "run_meta.json").read_text())
        assert (row["turns"], row["tokens_in"], row["cost"]) == (
            meta["turns"],
            meta["usage"]["input_tokens"],
            meta["cost_estimate"],
        )
    summary = json.loads((out / "summary.json").read_text())
    assert [entry["wins"] for entry in summary["profiles"]] == [2, 2]
    assert summary["profiles"][0]["success_low"] == pytest.approx(wilson(2, 2)[0])


def test_a_sweep_run_again_skips_ended_runs_and_resumes_a_killed_one_from_its_checkpoint(tmp_path):
    plan = load_sweep(sweep_file(tmp_path, second="local-openai-continuous"))
    out = tmp_path / "out"
    killed, first = plan.runs[0], plan.runs[1]  # manual_rolling: exact when resumed keyless
    run_sweep(replace(plan, runs=(first,)), out, PoolEngine(plan.adapter_ids))
    ended = run_folder(out / "runs", first.key)
    assert ended is not None
    before = (ended / "run_meta.json").read_bytes()
    killed_dir = killed_run(Profile.model_validate(killed.profile), out / "runs" / killed.key, "after_commit", 3)
    assert json.loads((killed_dir / "run_meta.json").read_text())["outcome"] == "running"
    again = invoke("sweep", str(tmp_path / "sweep.yaml"), "--out", str(out))
    assert again.exit_code == 0, again.output
    said = again.stdout.splitlines()
    assert said[1:3] == [f"  skips 1 (they ended): {first.key}", f"  resumes 1 (they did not end): {killed.key}"]
    assert said[-2].startswith(f"sweep {plan.sweep.id}: 4 runs: 3 done, 0 failed, 0 running, 0 queued, 1 skipped, in ")
    assert not any("so far" in line for line in said)  # not a terminal: the lines alone, no live view
    rows = {row["key"]: row for row in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    assert (ended / "run_meta.json").read_bytes() == before  # skipped, not played again
    assert rows[killed.key]["outcome"] == "win" and rows[killed.key]["resumes"] == 1
    assert rows[killed.key]["run_id"] == killed_dir.name  # the same run, gone on
    assert all(row["outcome"] == "win" for row in rows.values())


def test_a_run_folder_a_kill_left_before_its_first_run_meta_is_not_left_beside_the_run_made_again(tmp_path):
    plan = load_sweep(sweep_file(tmp_path))
    out = tmp_path / "out"
    planned = plan.runs[0]
    orphan = out / "runs" / planned.key / f"{planned.profile_id}-20260101-000000-dead00"
    orphan.mkdir(parents=True)
    (orphan / "checkpoints.sqlite3").write_bytes(b"")  # created, then killed before run_meta.json
    damaged = out / "runs" / planned.key / f"{planned.profile_id}-20260101-000000-beef00"
    damaged.mkdir()
    (damaged / "step_000001.json").write_text("{}")  # an accepted turn, its run_meta.json lost: not an orphan
    rows = run_sweep(replace(plan, runs=(planned,)), out, PoolEngine(plan.adapter_ids))
    assert rows[0]["outcome"] == "win"
    folders = sorted(folder.name for folder in (out / "runs" / planned.key).iterdir())
    assert folders == sorted([rows[0]["run_id"], damaged.name])  # the orphan gone, the damaged run kept


def test_the_cost_cap_stops_new_runs_and_the_summary_counts_only_ended_ones(tmp_path):
    plan = load_sweep(sweep_file(tmp_path, cap=", cost_cap: 0.0001"))
    rows = run_sweep(plan, tmp_path / "out", PoolEngine(plan.adapter_ids), in_flight=1)
    assert [row["outcome"] for row in rows] == ["win", "not_started", "not_started", "not_started"]
    assert sorted(path.name for path in (tmp_path / "out" / "runs").iterdir()) == [rows[0]["key"]]
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert [(entry["planned"], entry["runs"]) for entry in summary["profiles"]] == [(2, 1), (2, 0)]


def test_a_second_driver_on_the_same_folder_is_refused_while_the_first_runs(tmp_path):
    plan = load_sweep(sweep_file(tmp_path))
    out = tmp_path / "out"
    with _driving(_made(out)):
        with pytest.raises(SweepError, match="another turnstate sweep is running on this folder"):
            run_sweep(plan, out, PoolEngine(plan.adapter_ids))
    assert not (out / "runs").exists()  # nothing was started


def _made(folder: Path) -> Path:
    folder.mkdir()
    return folder


# -- stopping: no process left behind -------------------------------------------------------------------

SLOW_RUNS = """
id: slow
profiles: [local-manual-rolling]
environments:
  - name: beacon_grid
    options: {levels: 10}
    seeds: [0, 1, 2, 3]
budget: {in_flight: 2}
"""


def _started_sweep(tmp_path: Path) -> tuple[subprocess.Popen[str], Path]:
    """`turnstate sweep` in a process group of its own, once its first runs are playing."""
    path = sweep_file(tmp_path, text=SLOW_RUNS)
    out = tmp_path / "out"
    driver = subprocess.Popen(
        [sys.executable, "-m", "turnstate.cli", "sweep", str(path), "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while not list(out.glob("runs/*/*/step_000002.json")):
        assert driver.poll() is None and time.monotonic() < deadline, driver.communicate()
        time.sleep(0.05)
    return driver, out


def _group_is_gone(group: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def test_ctrl_c_stops_the_runs_which_record_their_end_and_a_second_sweep_finishes_them(tmp_path):
    driver, out = _started_sweep(tmp_path)
    os.killpg(driver.pid, signal.SIGINT)  # what a terminal's Ctrl-C sends: the whole foreground group
    _, stderr = driver.communicate(timeout=60)
    assert driver.returncode == 130 and "interrupted; run it again" in stderr and "Traceback" not in stderr
    assert _group_is_gone(driver.pid, within=10)
    outcomes = [json.loads(path.read_text())["outcome"] for path in out.glob("runs/*/*/run_meta.json")]
    assert "interrupted" in outcomes and "running" not in outcomes
    plan = load_sweep(tmp_path / "sweep.yaml")
    rows = run_sweep(plan, out, PoolEngine(plan.adapter_ids))
    assert {row["outcome"] for row in rows} == {"win"} and any(row["resumes"] for row in rows)


def test_a_hard_killed_driver_leaves_no_run_playing(tmp_path):
    driver, _ = _started_sweep(tmp_path)
    driver.kill()
    driver.wait()
    assert _group_is_gone(driver.pid, within=15)
