"""The checkpoint store over a long run: what a commit costs a turn, how the bytes grow, how long a
resume's rebuild takes (turnstate/durable/checkpoints/).

Plays a long beacon_grid game from a local profile through the Session API (as the README's loop
does), against a local provider in a process of its own (`turnstate serve`: in this process its
thread would take the interpreter's lock in the middle of commits, which a remote provider never
does), and after every accepted turn commits a checkpoint of
what the session holds: the accepted RuntimeState, a cursor, the action as a fact and its receipt,
and the event log's mark (the projection is events.jsonl's: the store keeps where it reaches). The states are the ones a real run
carries (the adapter's items, its encrypted reasoning, the trims and compactions of its strategy).
Each turn commits to two stores, a plain one and an encrypted one (TURNSTATE_CHECKPOINT_KEY set), in
alternating order, timing each commit alone. At the marks, a copy of each store is taken with
SQLite's backup (not timed): its size is the checkpoint bytes at that turn, and `latest()` on it is
the rebuild a resume does there (the median of REBUILDS).

Goals (issue 22): commit <= 0.3 ms per turn at the median; the last 1000 turns' bytes <= 1.2x the
first 1000's; `latest()` <= 1 s at 1000 and 3000 turns, growing at most linearly.

    python bench/checkpoints.py [PROFILE] [--turns N] [--regime wide|window] [--full] [--json]

"wide" (the default) carries the whole history (the state only grows, the case deltas are for);
"window" plays the profile's own window and compaction (trims and compactions: snapshots). --full
adds a third store with synchronous=FULL (a sync per commit: what power-loss durability costs).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from long_run import WIDE_WINDOW, long_profile, serving  # beside this script

from turnstate import Session, load_profile
from turnstate.adapters.contract import Endpoint, ProviderAdapter
from turnstate.adapters.registry import descriptor_for
from turnstate.durable.checkpoints import (
    KEY_VARIABLE,
    OPT_OUT,
    Checkpoint,
    CheckpointMeta,
    ProjectionMark,
    SQLiteCheckpointStore,
)
from turnstate.durable.layout import CHECKPOINT_FILE
from turnstate.environments import make_environment
from turnstate.session.endpoint import LOCAL_API_KEY
from turnstate.session.profile import DEFAULT_PROFILE

MARKS = (100, 1000, 2000, 3000)
REBUILDS = 3
BENCH_KEY = "bench-only-key-0123456789abcdef"  # a key of the documented form, for the encrypted store


@dataclass
class StoreFigures:
    name: str
    commit_ms: list[float] = field(default_factory=list)
    bytes_at: dict[int, int] = field(default_factory=dict)  # turn -> the database's size there
    latest_s: dict[int, float] = field(default_factory=dict)  # turn -> latest()'s median time there
    snapshots: int = 0
    deltas: int = 0


class Measured:
    """One store under measurement: its commits timed, copies taken at the marks."""

    def __init__(
        self, name: str, folder: Path, meta: CheckpointMeta, key: str | None, synchronous: Literal["NORMAL", "FULL"]
    ) -> None:
        self.folder, self.key = folder, key
        folder.mkdir(mode=0o700)
        os.environ[KEY_VARIABLE] = OPT_OUT  # `key` alone decides: never the default key file
        self.store = SQLiteCheckpointStore(folder / CHECKPOINT_FILE, meta, key=key, synchronous=synchronous)
        self.figures = StoreFigures(name)
        self.copies: dict[int, Path] = {}

    def commit(self, checkpoint: Checkpoint) -> None:
        started = time.perf_counter()
        self.store.commit(checkpoint)
        self.figures.commit_ms.append((time.perf_counter() - started) * 1000)

    def copy_at(self, turn: int) -> None:
        """A consistent copy of the store as it is now (the WAL's commits included), in a folder of its own."""
        folder = self.folder.with_name(f"{self.folder.name}-{turn}")
        folder.mkdir(mode=0o700)
        target = folder / CHECKPOINT_FILE
        os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        with sqlite3.connect(self.store.path) as source, sqlite3.connect(target) as copy:
            source.backup(copy)
        self.figures.bytes_at[turn] = target.stat().st_size
        self.copies[turn] = target

    def rebuild_times(self) -> None:
        for turn, path in self.copies.items():
            times = []
            for _ in range(REBUILDS):
                with SQLiteCheckpointStore(path, key=self.key) as store:
                    started = time.perf_counter()
                    store.latest()
                    times.append(time.perf_counter() - started)
            self.figures.latest_s[turn] = statistics.median(times)
        with sqlite3.connect(self.store.path) as database:
            counts = dict(database.execute("SELECT snapshot, count(*) FROM continuation GROUP BY snapshot"))
        self.figures.snapshots, self.figures.deltas = counts.get(1, 0), counts.get(0, 0)


def played_checkpoints(
    profile_path: str, turns: int, regime: str, provider_process: bool = True
) -> Iterator[tuple[int, Checkpoint] | dict[str, Any]]:
    """The checkpoints a long game from `profile_path` commits, one per accepted turn, as (step,
    checkpoint); last, the run's figures."""
    profile = long_profile(load_profile(profile_path), turns, regime)
    window = WIDE_WINDOW if regime == "wide" else (profile.client.local and profile.client.local.context_window)
    game = make_environment(profile.environment.name, profile.environment.seed, profile.environment.options)
    frame = game.reset()
    retries = 0
    started = time.perf_counter()
    with ExitStack() as stack:
        base_url, _ = stack.enter_context(serving(window or 8192, provider_process))

        def connect(_: Endpoint) -> ProviderAdapter:
            adapter_class = descriptor_for(profile.runtime.adapter_id).load()
            return adapter_class.connect(Endpoint(base_url, LOCAL_API_KEY, is_local=True), profile.request_settings())

        session = stack.enter_context(Session(profile, actions=game.actions, adapter_factory=connect))
        while frame.state == "NOT_FINISHED" and session.accepted_actions < turns:
            observation = frame.text
            turn = session.observe(observation)
            while turn.problem is not None:
                retries += 1
                turn = session.reject(turn.problem)
            session.accept(turn.action)
            frame = game.step(turn.action)
            step = session.accepted_actions
            state = session.accepted_state
            yield (
                step,
                Checkpoint(
                    cursor={
                        "step": step,
                        "turn": len(state.turns),
                        "retries": retries,
                        "level": frame.level,
                        "pending": list(state.pending),
                        "machine_state": "Accepted",
                        "compaction_cursor": {"items": state.item_count},
                        "usage": asdict(turn.usage),
                    },
                    state=state,
                    facts=[
                        {"kind": "action", "step": step, "action": turn.action},
                        {"kind": "receipt", "step": step, "level": frame.level, "state": str(frame.state)},
                    ],
                    projection=ProjectionMark(3 * step, hashlib.sha256(observation.encode()).digest()),
                ),
            )
            if frame.state == "GAME_OVER":
                session.buffer(frame.text)
                frame = game.step("RESET")
        final = session.accepted_state
        yield {
            "profile": profile.id,
            "adapter_id": profile.runtime.adapter_id,
            "strategy": profile.runtime.strategy,
            "regime": regime,
            "turns": session.accepted_actions,
            "outcome": str(frame.state),
            "state_bytes": len(final.to_json()),
            "items": final.item_count,
            "wall_s": time.perf_counter() - started,
        }


def play(
    profile_path: str, turns: int, regime: str, full: bool, folder: Path, provider_process: bool = True
) -> tuple[dict[str, Any], list[Measured]]:
    profile = load_profile(profile_path)
    meta = CheckpointMeta(profile.runtime.adapter_id, "bench", profile.runtime.strategy, "bench")
    stores = [Measured("plain", folder / "plain", meta, None, "NORMAL")]
    stores.append(Measured("encrypted", folder / "encrypted", meta, BENCH_KEY, "NORMAL"))
    if full:
        stores.append(Measured("plain, synchronous=FULL", folder / "full", meta, None, "FULL"))
    run: dict[str, Any] = {}
    try:
        for played in played_checkpoints(profile_path, turns, regime, provider_process):
            if isinstance(played, dict):
                run = played
                continue
            step, checkpoint = played
            for measured in stores if step % 2 else reversed(stores):
                measured.commit(checkpoint)
            if step in MARKS:
                for measured in stores:
                    measured.copy_at(step)
    finally:
        for measured in stores:
            measured.store.close()
    for measured in stores:
        measured.rebuild_times()
    return run, stores


def report(run: dict[str, Any], stores: list[Measured]) -> None:
    print(
        f"{run['profile']} {run['regime']}: {run['turns']} turns ({run['outcome']}), last state "
        f"{run['state_bytes'] / 1e6:.2f} MB serialized, {run['items']} items, {run['wall_s']:.0f} s"
    )
    for measured in stores:
        figures = measured.figures
        commits = sorted(figures.commit_ms)
        p99 = commits[min(len(commits) - 1, int(0.99 * len(commits)))]
        print(f"  {figures.name}: {figures.snapshots} snapshots, {figures.deltas} deltas")
        print(
            f"    commit per turn: median {statistics.median(commits):.3f} ms (last 1000 turns: "
            f"{statistics.median(figures.commit_ms[-1000:]):.3f}), mean {statistics.mean(commits):.3f} ms, "
            f"p99 {p99:.3f} ms (goal: median <= 0.3)"
        )
        sizes = ", ".join(f"{turn}: {size / 1e6:.3f} MB" for turn, size in figures.bytes_at.items())
        print(f"    bytes at {sizes}")
        at = figures.bytes_at
        if 3000 in at and 2000 in at and 1000 in at:
            first, last = at[1000], at[3000] - at[2000]
            print(
                f"    last 1000 turns / first 1000: {last / 1e6:.3f} / {first / 1e6:.3f} MB = {last / first:.2f} (goal <= 1.2)"
            )
        times = ", ".join(f"{turn}: {seconds * 1000:.1f} ms" for turn, seconds in figures.latest_s.items())
        print(f"    latest() at {times} (goal <= 1 s, at most linear)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("profile", nargs="?", default=str(DEFAULT_PROFILE))
    parser.add_argument("--turns", type=int, default=3000)
    parser.add_argument("--regime", choices=["window", "wide"], default="wide")
    parser.add_argument("--full", action="store_true", help="also a store with synchronous=FULL")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        run, stores = play(args.profile, args.turns, args.regime, args.full, Path(folder))
    if args.json:
        print(json.dumps({"run": run, "stores": [asdict(measured.figures) for measured in stores]}))
    else:
        report(run, stores)


if __name__ == "__main__":
    main()
