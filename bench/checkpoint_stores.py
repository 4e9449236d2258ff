"""The checkpoint store on SQLite against PostgreSQL (issue 35): what a commit costs a turn, how long a
resume's open and rebuild take at the run's end, and eight runs committing at once.

The checkpoints are a real run's: a long beacon_grid game from the default profile through the
Session API (bench/checkpoints.py's `played_checkpoints`: the accepted RuntimeState, a cursor, the
action and its receipt, the event log's mark), collected first, then committed to each store, so both
stores write the same records and the game's own time is not counted. Both stores seal the
continuation (a key given, as the key file does by default). SQLite is in a run folder with its
defaults (WAL, synchronous=NORMAL); PostgreSQL is a throwaway server (tests/postgres_server.py) with
fsync on, over its unix socket, every commit with synchronous_commit on (the store sets it).

    PYTHONPATH=. python bench/checkpoint_stores.py [--turns 1000] [--writers 8] [--json]

Needs the postgres extra (psycopg) and Debian's postgresql.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from checkpoints import BENCH_KEY, played_checkpoints  # noqa: E402 (beside this script)

from tests.postgres_server import throwaway_server, unavailable  # noqa: E402
from turnstate.durable.checkpoints import KEY_VARIABLE, OPT_OUT, Checkpoint, CheckpointMeta, CheckpointStore  # noqa: E402
from turnstate.durable.checkpoints.postgres import PostgresCheckpointStore  # noqa: E402
from turnstate.durable.checkpoints.sqlite import SQLiteCheckpointStore  # noqa: E402
from turnstate.durable.layout import CHECKPOINT_FILE  # noqa: E402
from turnstate.session.profile import DEFAULT_PROFILE  # noqa: E402

REBUILDS = 3
Opener = Callable[[str, CheckpointMeta | None], CheckpointStore]  # (run, meta) -> the run's store


def percentile(values: Sequence[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def committed(open_store: Opener, run: str, meta: CheckpointMeta, checkpoints: Sequence[Checkpoint]) -> list[float]:
    """Each checkpoint committed to `run`'s new store, in order: the ms each took."""
    times = []
    store = open_store(run, meta)
    try:
        for checkpoint in checkpoints:
            started = time.perf_counter()
            store.commit(checkpoint)
            times.append((time.perf_counter() - started) * 1000)
    finally:
        store.close()
    return times


def resume_seconds(open_store: Opener, run: str, meta: CheckpointMeta) -> float:
    """A resume's part of the store: open it to write and rebuild the newest checkpoint (the median of REBUILDS)."""
    times = []
    for _ in range(REBUILDS):
        started = time.perf_counter()
        store = open_store(run, meta)
        try:
            store.latest()
        finally:
            store.close()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def at_once(
    open_store: Opener, writers: int, meta: CheckpointMeta, checkpoints: Sequence[Checkpoint]
) -> dict[str, float]:
    """`writers` forked processes, each committing every checkpoint to a run of its own, started together."""
    read_end, write_end = os.pipe()
    go_read, go_write = os.pipe()
    children = []
    for number in range(writers):
        pid = os.fork()
        if pid == 0:
            os.close(read_end)
            os.read(go_read, 1)
            times = committed(open_store, f"concurrent-{number}", meta, checkpoints)
            os.write(write_end, (json.dumps(times) + "\n").encode())
            os._exit(0)
        children.append(pid)
    os.close(write_end)
    started = time.perf_counter()
    os.write(go_write, b"x" * writers)
    with os.fdopen(read_end) as results:
        lists = [json.loads(line) for line in results]
    wall = time.perf_counter() - started
    for pid in children:
        os.waitpid(pid, 0)
    every = [value for times in lists for value in times]
    return {
        "writers": writers,
        "commits": len(every),
        "wall_s": wall,
        "commits_per_s": len(every) / wall,
        "median_ms": statistics.median(every),
        "p95_ms": percentile(every, 0.95),
    }


def measure(
    name: str, open_store: Opener, meta: CheckpointMeta, checkpoints: Sequence[Checkpoint], writers: int
) -> dict[str, Any]:
    times = committed(open_store, "alone", meta, checkpoints)
    return {
        "store": name,
        "commit_median_ms": statistics.median(times),
        "commit_p95_ms": percentile(times, 0.95),
        "commit_mean_ms": statistics.fmean(times),
        "resume_s": resume_seconds(open_store, "alone", meta),
        "at_once": at_once(open_store, writers, meta, checkpoints),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args()
    problem = unavailable()
    if problem is not None:
        sys.exit(f"no PostgreSQL server can start here: {problem}")
    os.environ[KEY_VARIABLE] = OPT_OUT  # the key below alone decides
    collected = list(played_checkpoints(str(DEFAULT_PROFILE), options.turns, "wide"))
    run = collected.pop()
    assert isinstance(run, dict)
    checkpoints = [checkpoint for _, checkpoint in collected]  # type: ignore[misc]
    meta = CheckpointMeta(run["adapter_id"], "bench", run["strategy"], "bench")
    figures = []
    with tempfile.TemporaryDirectory() as temporary:
        root = Path(temporary)

        def sqlite_store(run_name: str, meta: CheckpointMeta | None) -> CheckpointStore:
            folder = root / run_name
            folder.mkdir(mode=0o700, exist_ok=True)
            return SQLiteCheckpointStore(folder / CHECKPOINT_FILE, meta, key=BENCH_KEY)

        figures.append(measure("sqlite", sqlite_store, meta, checkpoints, options.writers))
        with throwaway_server(fsync=True) as server:

            def postgres_store(run_name: str, meta: CheckpointMeta | None) -> CheckpointStore:
                return PostgresCheckpointStore(server.socket_url, run_name, meta, key=BENCH_KEY)

            figures.append(measure("postgres", postgres_store, meta, checkpoints, options.writers))
    if options.json:
        print(json.dumps({"run": run, "stores": figures}, indent=2))
        return
    print(f"{run['profile']}: {run['turns']} turns, last state {run['state_bytes'] / 1e6:.2f} MB serialized")
    for item in figures:
        together = item["at_once"]
        print(
            f"  {item['store']}: commit median {item['commit_median_ms']:.2f} ms, p95 {item['commit_p95_ms']:.2f} ms, "
            f"mean {item['commit_mean_ms']:.2f} ms; resume at {run['turns']} turns {item['resume_s'] * 1000:.0f} ms; "
            f"{together['writers']} at once: {together['commits_per_s']:.0f} commits/s, "
            f"median {together['median_ms']:.2f} ms, p95 {together['p95_ms']:.2f} ms"
        )


if __name__ == "__main__":
    main()
