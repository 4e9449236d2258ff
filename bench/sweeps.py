"""Sweep throughput (issue 23): runs per minute of `turnstate sweep` with the process pool at 1 and 2
runs in flight, and Ray local mode's wall against the pool's for the same runs.

The runs: RUNS runs of local-manual-rolling on beacon_grid (LEVELS levels, max_actions raised so every
seed wins; seeds 0..RUNS-1), each about 1.5 s here, so a run's own work dominates what an engine adds
per run. Each sweep plays into a fresh folder (nothing skipped), through `run_sweep` as the command
does:

1. pool at 1 in flight, then at 2: the wall of the whole sweep; the speed-up from 1 to 2 (goal >=
   1.7x on 2 cores). The forkserver (which imports turnstate and the SDKs once, a sweep's start-up)
   is started before and timed apart: it is one per process, so only the first sweep would pay it.
2. Ray local mode (`ray.init(num_cpus=2)`, its start-up timed apart and excluded), 2 in flight: a
   first sweep (Ray's workers start and import turnstate as its first runs begin) and a second on
   the same Ray (workers warm); each against the pool's wall at 2 (goal <= 1.15x). A pool run is a
   fresh fork of the server, a Ray run a reused worker: what a run imports lazily, a pool run
   imports each time.

The pool and Ray alternate ROUNDS times, Ray shut down while the pool plays (its idle processes
take CPU); each figure is the median over the rounds. Printed (or JSON
with --json), never asserted; note the machine's load beside the figures (`uptime`):

    python bench/sweeps.py [--runs 20] [--levels 16] [--rounds 2] [--json]

About 3 minutes on 2 cores with the defaults; `--runs 6 --rounds 1` checks the script in ~40 s.
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing
import os
import statistics
import tempfile
import time
from pathlib import Path

import yaml

from turnstate.session.profile import resolve_profile
from turnstate.sweeps.engines import PoolEngine, run_sweep
from turnstate.sweeps.plan import load_sweep


def sweep_files(folder: Path, runs: int, levels: int) -> dict[int, Path]:
    """The bench's sweep at 1 and at 2 in flight, and the profile it plays (max_actions raised)."""
    profile = yaml.safe_load(resolve_profile("local-manual-rolling").read_text())
    profile["id"] = "bench-manual-rolling"
    profile["agent"]["max_actions"] = 100 * levels
    (folder / "profile.yaml").write_text(yaml.safe_dump(profile))
    files = {}
    for in_flight in (1, 2):
        sweep = {
            "id": f"bench{in_flight}",
            "profiles": ["profile.yaml"],
            "environments": [{"name": "beacon_grid", "options": {"levels": levels}, "seeds": list(range(runs))}],
            "budget": {"in_flight": in_flight},
        }
        files[in_flight] = folder / f"sweep{in_flight}.yaml"
        files[in_flight].write_text(yaml.safe_dump(sweep))
    return files


def timed_sweep(path: Path, out: Path, engine: object) -> tuple[float, float]:
    """The sweep's wall (s) and its runs' mean wall (s, from their run_meta.json); every run must win."""
    plan = load_sweep(path)
    start = time.perf_counter()
    rows = run_sweep(plan, out, engine)  # type: ignore[arg-type]
    wall = time.perf_counter() - start
    lost = [row["key"] for row in rows if row["outcome"] != "win"]
    if lost:
        raise SystemExit(f"runs did not win: {lost}")
    return wall, statistics.fmean(float(row["wall_seconds"]) for row in rows)


def measure(runs: int, levels: int, rounds: int) -> dict[str, object]:
    import ray

    from turnstate.sweeps.ray_engine import RayEngine

    figures: dict[str, list[float]] = {}

    def note(name: str, value: float) -> None:
        figures.setdefault(name, []).append(value)

    with tempfile.TemporaryDirectory(prefix="turnstate-bench-sweeps-") as temporary:
        folder = Path(temporary)
        files = sweep_files(folder, runs, levels)
        plan = load_sweep(files[2])
        start = time.perf_counter()
        PoolEngine(plan.adapter_ids)  # sets what the forkserver imports once
        warm_up = multiprocessing.get_context("forkserver").Process(target=time.sleep, args=(0,))
        warm_up.start()  # forked once the server has imported all that
        warm_up.join()
        note("pool_start", time.perf_counter() - start)
        for number in range(rounds):
            # The pool's sweeps with no Ray up: a local Ray's processes (raylet, GCS, idle workers) take
            # CPU even when no task runs, which the pool's figures must not pay.
            for in_flight in (1, 2):
                wall, per_run = timed_sweep(
                    files[in_flight], folder / f"pool{in_flight}.{number}", PoolEngine(plan.adapter_ids)
                )
                note(f"pool{in_flight}_wall", wall)
                note(f"pool{in_flight}_run", per_run)
            start = time.perf_counter()
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
            note("ray_start", time.perf_counter() - start)
            for label in ("ray_first", "ray_warm"):  # the first sweep starts Ray's workers
                wall, per_run = timed_sweep(files[2], folder / f"{label}.{number}", RayEngine("local", 2))
                note(f"{label}_wall", wall)
                note(f"{label}_run", per_run)
            ray.shutdown()
    median = {name: statistics.median(values) for name, values in figures.items()}
    return {
        "runs": runs,
        "levels": levels,
        "rounds": rounds,
        "cores": os.cpu_count(),
        "load_average": os.getloadavg(),
        **{f"{name}_seconds": value for name, value in median.items()},
        **{
            f"{name}_per_minute": runs / median[f"{name}_wall"] * 60
            for name in ("pool1", "pool2", "ray_first", "ray_warm")
        },
        "pool_speedup_1_to_2": median["pool1_wall"] / median["pool2_wall"],
        "ray_first_over_pool2": median["ray_first_wall"] / median["pool2_wall"],
        "ray_warm_over_pool2": median["ray_warm_wall"] / median["pool2_wall"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--levels", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    figures = measure(args.runs, args.levels, args.rounds)
    if args.json:
        print(json.dumps(figures))
        return
    load = ", ".join(f"{value:.2f}" for value in figures["load_average"])  # type: ignore[attr-defined]
    print(
        f"{figures['runs']} runs of {figures['levels']} levels, median of {figures['rounds']} rounds, "
        f"{figures['cores']} cores, load average at the end {load}"
    )
    for name, label in (
        ("pool1", "pool, 1 in flight"),
        ("pool2", "pool, 2 in flight"),
        ("ray_first", "Ray local, 2 in flight, first sweep"),
        ("ray_warm", "Ray local, 2 in flight, warm workers"),
    ):
        print(
            f"{label:40} {figures[f'{name}_wall_seconds']:6.1f} s  {figures[f'{name}_per_minute']:6.1f} runs/min  "
            f"(a run {figures[f'{name}_run_seconds']:.2f} s)"
        )
    print(f"pool speed-up from 1 to 2 in flight: {figures['pool_speedup_1_to_2']:.2f}x (goal >= 1.7x)")
    print(
        f"Ray over the pool at 2: first sweep {figures['ray_first_over_pool2']:.2f}x, warm "
        f"{figures['ray_warm_over_pool2']:.2f}x (goal <= 1.15x); start-ups excluded: Ray "
        f"{figures['ray_start_seconds']:.1f} s, the pool's forkserver {figures['pool_start_seconds']:.1f} s"
    )


if __name__ == "__main__":
    main()
