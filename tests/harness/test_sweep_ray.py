"""The Ray engine (turnstate/sweeps/ray_engine.py) on real runs against the embedded local provider: a local
Ray started once for the module (`ray.init(num_cpus=2)`), the pool test's four runs, a run whose
worker is SIGKILLed mid-way retried and resumed without replaying an action, Ctrl-C leaving no run
playing, and a hard-killed driver leaving no process behind. Skipped without Ray."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ray = pytest.importorskip(
    "ray", reason="Ray is not installed (pip install -e '.[ray]' in turnstate's checkout): the Ray engine is not tested"
)

from turnstate.adapters.rate_buckets import Rate  # noqa: E402
from turnstate.local_provider.server import LocalProvider  # noqa: E402
from turnstate.session.profile import PROFILES_DIR  # noqa: E402
from turnstate.sweeps import ray_engine as sweep_ray  # noqa: E402
from turnstate.sweeps.engines import run_sweep  # noqa: E402
from turnstate.sweeps.plan import load_sweep, run_folder  # noqa: E402
from turnstate.sweeps.ray_engine import RayEngine, RayEngineError  # noqa: E402

from .test_cli import invoke  # noqa: E402
from .test_rate_limit import REQUESTS_PER_MINUTE, assert_within_the_limit, eight_runs  # noqa: E402
from .test_sweep import sweep_file  # noqa: E402

TWO_LONG_RUNS = """
id: long
profiles: [local-manual-rolling]
environments:
  - name: beacon_grid
    options: {levels: 12}
    seeds: [0, 1]
budget: {in_flight: 2}
"""  # about 1.2 s each here (90 of its 120 actions): a kill or a Ctrl-C at step 2 finds both playing


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """A local Ray for the module (4-8 s to start here); its address, for a driver in another process."""
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


def _holders(path: Path) -> set[int]:
    """The processes that have `path` open (a run's checkpoint store is open while the run plays)."""
    found = set()
    for fd_dir in Path("/proc").glob("[0-9]*/fd"):
        try:
            if any(os.readlink(link) == str(path) for link in fd_dir.iterdir()):
                found.add(int(fd_dir.parent.name))
        except OSError:
            continue
    return found


def _wait_for(found: object, what: str, within: float = 60) -> None:
    deadline = time.monotonic() + within
    while not found():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"{what} never happened"
        time.sleep(0.02)


def test_ray_plays_the_four_runs_and_writes_the_results(tmp_path, cluster):
    plan = load_sweep(sweep_file(tmp_path))
    rows = run_sweep(plan, tmp_path / "out", RayEngine(cluster))
    assert [row["outcome"] for row in rows] == ["win"] * 4
    lines = [json.loads(line) for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    assert lines == rows
    for row in rows:
        meta = json.loads((tmp_path / "out" / row["run_dir"] / "run_meta.json").read_text())
        assert (row["turns"], row["tokens_in"], row["resumes"]) == (meta["turns"], meta["usage"]["input_tokens"], 0)
    assert not (tmp_path / "out" / sweep_ray.HEARTBEAT).exists()  # the driver's heartbeat ends with it
    assert ray.is_initialized()  # a caller's own connection is kept


def test_a_run_whose_worker_is_killed_mid_way_is_retried_and_resumes_without_performing_an_action_twice(
    tmp_path, cluster, capsys
):
    plan = load_sweep(sweep_file(tmp_path, text=TWO_LONG_RUNS))
    out, target = tmp_path / "out", plan.runs[0]  # manual_rolling: exact when resumed keyless
    done: list[list[dict[str, object]]] = []
    driver = threading.Thread(target=lambda: done.append(run_sweep(plan, out, RayEngine(cluster))))
    driver.start()
    _wait_for(lambda: list(out.glob(f"runs/{target.key}/*/step_000002.json")), "the target's step 2")
    run_dir = run_folder(out / "runs", target.key)
    assert run_dir is not None
    (worker,) = _holders(run_dir / "checkpoints.sqlite3")
    assert worker != os.getpid()
    os.kill(worker, signal.SIGKILL)
    driver.join(timeout=120)
    rows = {row["key"]: row for row in done[0]}
    assert rows[target.key]["outcome"] == "win" and rows[target.key]["resumes"] == 1
    assert rows[target.key]["run_id"] == run_dir.name  # the same run, gone on
    keys = [json.loads(line)["key"] for line in (run_dir / "side_effects.jsonl").read_text().splitlines()]
    assert len(keys) == len(set(keys)) == rows[target.key]["turns"]
    assert all(row["outcome"] == "win" for row in rows.values()), [
        (row["outcome"], row.get("error")) for row in rows.values()
    ]
    printed = capsys.readouterr()
    assert "worker died" not in printed.out + printed.err  # the raylet's message is not printed


def test_a_sweep_on_postgresql_resumes_a_killed_workers_run_on_another_worker_from_the_database(
    tmp_path, cluster, postgres_url
):
    """The sweep's `checkpoints:` names the database; the worker holding the target's lease (its holder
    names the pid) is SIGKILLed; Ray retries the task on another worker, which takes the lease and
    resumes from the database, performing no action twice."""
    import psycopg

    text = TWO_LONG_RUNS + f"checkpoints: {postgres_url}\n"
    plan = load_sweep(sweep_file(tmp_path, text=text))
    out, target = tmp_path / "out", plan.runs[0]
    done: list[list[dict[str, object]]] = []
    driver = threading.Thread(target=lambda: done.append(run_sweep(plan, out, RayEngine(cluster))))
    driver.start()
    _wait_for(lambda: list(out.glob(f"runs/{target.key}/*/step_000002.json")), "the target's step 2")
    run_dir = run_folder(out / "runs", target.key)
    assert run_dir is not None and not (run_dir / "checkpoints.sqlite3").exists()
    run = json.loads((run_dir / "checkpoints.json").read_text())["run"]

    def lease() -> tuple[int, int]:
        with psycopg.connect(postgres_url, autocommit=True) as database:
            row = database.execute("SELECT token, holder FROM turnstate_leases WHERE run = %s", (run,)).fetchone()
        assert row is not None
        return int(row[0]), int(row[1].rsplit(" pid ", 1)[1])

    token, worker = lease()
    assert worker != os.getpid()
    os.kill(worker, signal.SIGKILL)
    driver.join(timeout=120)
    rows = {row["key"]: row for row in done[0]}
    assert rows[target.key]["outcome"] == "win" and rows[target.key]["resumes"] == 1
    retaken, retrier = lease()
    assert retaken == token + 1 and retrier != worker  # another worker took the run's lease
    keys = [json.loads(line)["key"] for line in (run_dir / "side_effects.jsonl").read_text().splitlines()]
    assert len(keys) == len(set(keys)) == rows[target.key]["turns"]
    with psycopg.connect(postgres_url, autocommit=True) as database:
        (count,) = database.execute("SELECT count(*) FROM turnstate_checkpoints WHERE run = %s", (run,)).fetchone()
    assert count == rows[target.key]["turns"]
    assert all(row["outcome"] == "win" for row in rows.values()), [
        (row["outcome"], row.get("error")) for row in rows.values()
    ]


TWO_LONGER_RUNS = TWO_LONG_RUNS.replace("[local-manual-rolling]", "[longer.yaml]").replace("levels: 12", "levels: 60")
"""About five times as long, and each run's third call answered 429 with a Retry-After of 5 s, which
it waits out: under a loaded suite two 1.2 s runs had both won before the Ctrl-C reached them, and
so had two 2.8 s runs (the /proc scan before the Ctrl-C took that long), but a run waiting is still
playing when it comes."""
HELD_AT_ITS_THIRD_CALL = "  local:\n    faults: [{at: 3, kind: rate_limit, retry_after_seconds: 5}]\n"


def _started_sweep(tmp_path: Path, address: str) -> tuple[subprocess.Popen[str], Path]:
    """`turnstate sweep --ray ADDRESS` in a session of its own, once its first runs are playing."""
    shipped = (PROFILES_DIR / "local-manual-rolling.yaml").read_text()
    longer = shipped.replace("max_actions: 120", "max_actions: 600").replace(
        "  base_url: local\n", "  base_url: local\n" + HELD_AT_ITS_THIRD_CALL
    )
    assert HELD_AT_ITS_THIRD_CALL in longer
    (tmp_path / "longer.yaml").write_text(longer)
    path = sweep_file(tmp_path, text=TWO_LONGER_RUNS)
    out = tmp_path / "out"
    driver = subprocess.Popen(
        [sys.executable, "-m", "turnstate.cli", "sweep", str(path), "--out", str(out), "--ray", address],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    _wait_for(lambda: driver.poll() is not None or list(out.glob("runs/*/*/step_000002.json")), "a step 2")
    assert driver.poll() is None, driver.communicate()
    return driver, out


def _all_gone(started: dict[int, tuple[int, str]]) -> bool:
    now = sweep_ray._processes()
    return not any(now.get(pid, (0, ""))[1] == start for pid, (_, start) in started.items())


def _started_processes(driver: subprocess.Popen[str]) -> dict[int, tuple[int, str]]:
    """Every process the driver started, directly or not: its local Ray's among them."""
    processes = sweep_ray._processes()
    started = {pid: processes[pid] for pid in sweep_ray._descendants(processes, driver.pid)}
    assert any(b"raylet" in Path(f"/proc/{pid}/cmdline").read_bytes() for pid in started)
    return started


def test_ctrl_c_on_a_local_ray_interrupts_the_runs_which_record_their_end_and_leaves_no_process(tmp_path):
    driver, out = _started_sweep(tmp_path, "local")
    started = _started_processes(driver)
    os.killpg(driver.pid, signal.SIGINT)  # a terminal's Ctrl-C: the driver's whole group, Ray's processes too
    _, stderr = driver.communicate(timeout=60)
    assert driver.returncode == 130 and "interrupted; run it again" in stderr and "Traceback" not in stderr
    outcomes = [json.loads(path.read_text())["outcome"] for path in out.glob("runs/*/*/run_meta.json")]
    assert "interrupted" in outcomes and set(outcomes) <= {"interrupted", "win"}  # none left `running`
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(row["outcome"] for row in rows if row["run_dir"]) == sorted(outcomes)
    assert {row["outcome"] for row in rows if not row["run_dir"]} <= {"not_started"}  # a task cancelled unstarted
    _wait_for(lambda: _all_gone(started), "the end of every process the driver started", within=15)


def test_a_hard_killed_driver_of_a_local_ray_leaves_no_process_behind(tmp_path):
    driver, _ = _started_sweep(tmp_path, "local")
    started = _started_processes(driver)
    driver.kill()
    driver.communicate()
    _wait_for(lambda: _all_gone(started), "the end of every process the driver started", within=15)  # agents: 60 s


@pytest.fixture
def quick_watchdog(monkeypatch):
    """The watchdog's times shortened (a second driver beat, a second of quiet is a driver gone)."""
    monkeypatch.setattr(sweep_ray, "WATCHDOG_SECONDS", 0.05)
    monkeypatch.setattr(sweep_ray, "HEARTBEAT_SECONDS", 0.1)
    monkeypatch.setattr(sweep_ray, "DRIVER_GONE_SECONDS", 0.5)


@pytest.mark.parametrize("heartbeat", ["mine stop\n", "another 3\n", "mine 1\n"], ids=["stop", "replaced", "quiet"])
def test_a_runs_watchdog_interrupts_it_when_its_driver_stops_it_is_replaced_or_goes_quiet(
    tmp_path, quick_watchdog, heartbeat
):
    path = tmp_path / sweep_ray.HEARTBEAT
    path.write_text(heartbeat)  # never rewritten: a driver gone quiet, whatever it said last
    watchdog = sweep_ray._Watchdog(path, "mine")
    try:
        with pytest.raises(KeyboardInterrupt):
            time.sleep(5)
    finally:
        watchdog.close()


def test_a_runs_watchdog_leaves_it_alone_while_its_driver_beats(tmp_path, quick_watchdog):
    beat = sweep_ray._Heartbeat(tmp_path / sweep_ray.HEARTBEAT)
    watchdog = sweep_ray._Watchdog(beat.path, beat.token)
    time.sleep(1.2)  # an interrupt would raise here
    watchdog.close()
    beat.close()
    assert not beat.path.exists()


def test_a_cluster_that_does_not_answer_is_one_clear_error(monkeypatch):
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    with pytest.raises(
        RayEngineError, match=r"cannot connect to the Ray cluster at 127\.0\.0\.1:1 \(.*nothing answers"
    ):
        RayEngine("127.0.0.1:1")


def test_the_cli_names_a_missing_ray_with_the_install_fix(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # what importing a Ray that is not installed raises
    path = sweep_file(tmp_path, text="id: x\nprofiles: [local-manual-rolling]\nengine: ray\n")
    result = invoke("sweep", str(path), "--out", str(tmp_path / "out"))
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.stderr.strip() == (
        "error: the Ray engine needs Ray, which is not installed; fix: pip install -e '.[ray]' in turnstate's checkout"
    )


def test_eight_runs_on_ray_workers_share_the_rate_limit_and_draw_no_429(tmp_path, cluster):
    """The pool's eight-run test (test_rate_limit.py) on Ray: the workers of one host take from the same
    locked buckets the pool's processes do."""
    with LocalProvider(rate=Rate(requests_per_minute=REQUESTS_PER_MINUTE)) as provider:
        rows = eight_runs(tmp_path, provider.openai_base_url, True, lambda plan: RayEngine(cluster))
        assert_within_the_limit(tmp_path, rows, provider)
