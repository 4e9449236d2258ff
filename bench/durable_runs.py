"""Durable runs in a real run (issue 22): what checkpoints and the journals cost a turn, the wall over
the floor with them on, how long a resume takes, and how the checkpoint bytes grow.

bench/checkpoints.py measures the store alone; this script measures it where it works, in long
beacon_grid runs of a local profile (the default: local-manual-rolling) played by the Runner, as
`turnstate run` plays them, against the embedded local provider. Each part runs in a process of its
own, keyless (TURNSTATE_CHECKPOINT_KEY unset: the cursor, facts and events; a resume rebuilds the
state from the projection) and with a key (the accepted state sealed too; a resume restores it):

1. cost: one long run whose durability switches every BLOCK turns through the ARMS: everything on;
   the session's `_checkpoint` made a no-op; the side-effect journal's write (`perform` steps the
   game only); the usage journal's line (calls.jsonl); all three. A turn's harness time is its wall
   less its provider calls (as bench/long_run.py has it), so the arms, interleaved along one run,
   see the same history and the same minutes of the machine; what an arm costs a turn is the
   median of the turns with everything on less the median of the turns with it off, run by run,
   and the median (and range) of that over the runs. The direct time of `_checkpoint`
   in the turns with it on, and of the store's commit in it, are printed beside it: what the
   difference holds beyond them is the work they move or slow elsewhere in the turn. Against the
   embedded provider (a thread of the run, as `turnstate run` has it) and one in a process of its
   own (`turnstate serve`, as a remote provider is: no thread of it takes the interpreter's lock
   when a commit's SQLite call lets it go). The no-ops are this bench's alone (monkeypatched here):
   the library has no switch to run without durability.
2. wall: bench/long_run.py's measurement (turnstate's wall over the floor's, alternating every 50
   turns), run after run with everything on and with all three off, PAIRS pairs, the median of each;
   compared with the figures bench/README.md reported before checkpoints (window 1.24, wide 1.29).
3. resume: a run of N accepted turns, SIGKILLed by on_point right after its Nth checkpoint (before
   its action) in a forked child, then `Runner(profile, out).resume(run_dir)` on fresh copies of the
   folder it left: the time to the `after_resume` point (the session ready: store opened, state
   restored or rebuilt, ledger and cursor set) and to the first provider call (the game rebuilt
   from its journal, the last accepted action performed). The first resume in a process ("cold":
   lazy imports, the SDK client's first build) and the median of RESUMES after it ("warm").
4. bytes: in the longest of those runs, the store's size on disk (the database plus its -wal file)
   and its pages (what a copy of it holds: the -wal file keeps its largest size once SQLite
   checkpoints it, so the disk figure is not linear by construction) at 100 turns and at each third.

Figures are printed (or JSON with --json, for bench/run.py), never asserted:

    python bench/durable_runs.py [PROFILE] [--quick] [--json]

--quick plays 200-turn runs once (resumes at 100 and 200 turns), to check the script: about half a
minute. The full run takes about thirteen minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from array import array
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from long_run import RUNS, WARM_TURNS, WIDE_WINDOW, TimedAdapter, long_profile, measure, serving  # beside this script

from turnstate.adapters.contract import Endpoint, ProviderAdapter
from turnstate.durable.accounting import UsageJournal
from turnstate.durable.checkpoints import KEY_VARIABLE, OPT_OUT, Checkpoint, SQLiteCheckpointStore
from turnstate.durable.cursor import AcceptedReply
from turnstate.durable.layout import CHECKPOINT_FILE
from turnstate.durable.side_effects import JournaledEnvironment
from turnstate.environments.protocol import Frame
from turnstate.session.endpoint import LOCAL_API_KEY
from turnstate.session.profile import DEFAULT_PROFILE, Profile, load_profile
from turnstate.session.runner import Runner, freeze_startup_objects
from turnstate.session.session import Point, Session
from turnstate.strategies import STRATEGIES

HERE = Path(__file__).resolve().parent
BENCH_KEY = "bench-only-key-0123456789abcdef"  # a key of the documented form
BLOCK = 20  # turns an arm of the cost run lasts before the next one's turn
PAIRS = 3  # wall over the floor: runs with everything on, each followed by one with it off
RESUMES = 3  # warm resumes at each length, on fresh copies of the killed run; the median is reported
TODAY = {"window": 1.24, "wide": 1.29}  # wall over the floor in runs/, bench/README.md (2026-11-30)
WALL_SLACK = 0.05  # the goal: no worse than today's plus this
PROVIDERS = ("embedded", "process")  # the session's own local provider (a thread of the run), or `turnstate serve`
COST_GOAL_MS, RESUME_GOAL_S, BYTES_GOAL = 0.3, 1.0, 1.2


# -- the no-ops: durability switched off in this process only ------------------------------------


def _no_checkpoint(session: Session, accepted: AcceptedReply) -> None:
    """No checkpoint: the facts it would have taken are dropped, so nothing piles up for the next one."""
    if session.durable is not None:
        session.durable._facts = []


def _unjournaled(
    world: JournaledEnvironment, key: str, action: str, reasoning: str | None = None
) -> tuple[Frame, bool]:
    """The action performed, no journal line written."""
    return world.environment.step(action), False


def _unrecorded(journal: UsageJournal, number: int, kind: str, usage: Any) -> None:
    """No calls.jsonl line."""


PARTS: dict[str, tuple[Any, str, Callable[..., Any]]] = {
    "checkpoint": (Session, "_checkpoint", _no_checkpoint),
    "side-effect journal": (JournaledEnvironment, "perform", _unjournaled),
    "usage journal": (UsageJournal, "record", _unrecorded),
}
ORIGINALS = {name: getattr(owner, attribute) for name, (owner, attribute, _) in PARTS.items()}
ARMS: dict[str, tuple[str, ...]] = {  # arm -> the parts it switches off
    "on": (),
    "no checkpoint": ("checkpoint",),
    "no side-effect journal": ("side-effect journal",),
    "no usage journal": ("usage journal",),
    "none": tuple(PARTS),
}


def switch_off(parts: tuple[str, ...]) -> None:
    """Every part in `parts` a no-op, every other its own method again."""
    for name, (owner, attribute, no_op) in PARTS.items():
        setattr(owner, attribute, no_op if name in parts else ORIGINALS[name])


def keyed(key: bool) -> None:
    os.environ[KEY_VARIABLE] = BENCH_KEY if key else OPT_OUT  # keyless: opted out of the default key file


def load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


# -- 1. cost per turn --------------------------------------------------------------------------------


@dataclass
class CostRun:
    regime: str
    key: bool
    provider_process: bool
    turns: int
    outcome: str
    harness_ms: dict[str, list[float]]  # arm -> its turns' harness time (the first WARM_TURNS left out)
    checkpoint_ms: list[float]  # `_checkpoint`'s own time, in the turns that made one
    commit_ms: list[float]  # of it, the store's `commit` (the rest: the events as dicts, the cursor, its event)
    load: list[str] = field(default_factory=list)


def cost_run(profile: Profile, turns: int, regime: str, key: bool, provider_process: bool) -> CostRun:
    """One run, its arms interleaved every BLOCK turns (module docstring, 1), against the embedded
    provider or, with `provider_process`, one in a process of its own."""
    keyed(key)
    run_profile = long_profile(profile, turns, regime)
    window = WIDE_WINDOW if regime == "wide" else (run_profile.client.local and run_profile.client.local.context_window)
    adapters: list[TimedAdapter] = []
    arms = list(ARMS)
    harness: dict[str, list[float]] = {arm: [] for arm in arms}
    checkpoint_ms, commit_ms = array("d"), array("d")
    timed_checkpoint, store_commit = ORIGINALS["checkpoint"], SQLiteCheckpointStore.commit

    def checkpoint(session: Session, accepted: AcceptedReply) -> None:
        started = time.perf_counter()
        timed_checkpoint(session, accepted)
        checkpoint_ms.append((time.perf_counter() - started) * 1000)

    def commit(store: SQLiteCheckpointStore, made: Checkpoint) -> int:
        started = time.perf_counter()
        try:
            return store_commit(store, made)
        finally:
            commit_ms.append((time.perf_counter() - started) * 1000)

    ORIGINALS["checkpoint"] = checkpoint
    SQLiteCheckpointStore.commit = commit  # type: ignore[method-assign]
    turn = calls_before = 0
    turn_started = time.perf_counter()

    def on_step(_: Any) -> None:
        nonlocal turn, calls_before, turn_started
        ended = time.perf_counter()
        calls = adapters[0].seconds
        if turn >= WARM_TURNS:
            arm = arms[(turn // BLOCK) % len(arms)]
            harness[arm].append((ended - turn_started - sum(calls[calls_before:])) * 1000)
        calls_before = len(calls)
        turn += 1
        switch_off(ARMS[arms[(turn // BLOCK) % len(arms)]])
        turn_started = time.perf_counter()

    loads = [load()]
    RUNS.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        # The provider process's URL, or None: the session's own (embedded) provider.
        served = stack.enter_context(serving(window or 8192, True))[0] if provider_process else None

        def factory(endpoint: Endpoint) -> ProviderAdapter:
            adapter_class = Runner(run_profile, Path()).descriptor.load()
            where = endpoint if served is None else Endpoint(served, LOCAL_API_KEY, is_local=True)
            timed = TimedAdapter(adapter_class.connect(where, run_profile.request_settings()), False)
            adapters.append(timed)
            return timed  # type: ignore[return-value]

        switch_off(ARMS[arms[0]])
        out = stack.enter_context(tempfile.TemporaryDirectory(dir=RUNS))
        stack.callback(switch_off, ())
        stack.callback(ORIGINALS.__setitem__, "checkpoint", timed_checkpoint)
        stack.callback(setattr, SQLiteCheckpointStore, "commit", store_commit)
        result = Runner(run_profile, Path(out), adapter_factory=factory, on_step=on_step).run()
    loads.append(load())
    return CostRun(
        regime,
        key,
        provider_process,
        result.turns,
        result.outcome,
        harness,
        list(checkpoint_ms),
        list(commit_ms),
        loads,
    )


def arm_costs(harness_ms: dict[str, list[float]]) -> dict[str, float]:
    """What each part costs a turn: the median with everything on less the median with it off."""
    on = statistics.median(harness_ms["on"])
    return {arm: on - statistics.median(times) for arm, times in harness_ms.items() if arm != "on"}


# -- 2. wall over the floor ------------------------------------------------------------------------


def wall_run(profile: Profile, turns: int, regime: str, off: bool) -> dict[str, Any]:
    keyed(False)  # the default: no key
    switch_off(ARMS["none"] if off else ())
    run = measure(profile, turns, regime)
    assert run.floor_wall_seconds is not None
    return {
        "regime": regime,
        "off": off,
        "turns": run.turns,
        "wall_s": run.wall_seconds,
        "floor_s": run.floor_wall_seconds,
        "load": load(),
    }


# -- 3. resume and 4. bytes ---------------------------------------------------------------------


class FirstCall(Exception):
    """Raised at the resumed run's first provider call: the resume is over, the bench stops it there."""


def store_bytes(run_dir: Path) -> tuple[int, int]:
    """(the database and its -wal file on disk, the database's pages: what a copy of it holds)."""
    database = run_dir / CHECKPOINT_FILE
    disk = sum(path.stat().st_size for path in (database, database.with_name(database.name + "-wal")) if path.exists())
    with sqlite3.connect(database) as reader:
        (pages,) = reader.execute("PRAGMA page_count").fetchone()
        (size,) = reader.execute("PRAGMA page_size").fetchone()
    reader.close()
    return disk, pages * size


def killed_run(profile: Profile, out: Path, turns: int, marks: tuple[int, ...]) -> tuple[Path, dict[int, list[int]]]:
    """The run played in a forked child and SIGKILLed right after its `turns`th checkpoint, and the
    store's bytes at each of `marks` (read there, in the child)."""
    out.mkdir(mode=0o700, parents=True)
    sizes = out.with_name(out.name + ".bytes.json")
    pid = os.fork()
    if pid == 0:  # the child: never returns
        try:
            commits = 0
            at: dict[int, tuple[int, int]] = {}
            runner = Runner(profile, out, on_point=lambda point: stop_at(point))

            def stop_at(point: Point) -> None:
                nonlocal commits
                if point not in ("after_commit", "after_compaction_commit"):
                    return
                commits += 1
                if commits in marks:
                    assert runner.run_dir is not None
                    at[commits] = store_bytes(runner.run_dir)
                if commits == turns:
                    sizes.write_text(json.dumps(at))
                    os.kill(os.getpid(), signal.SIGKILL)

            runner.run()
        finally:
            os._exit(3)  # the point never came
    _, status = os.waitpid(pid, 0)
    if not (os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL):
        raise SystemExit(f"the run ended before its {turns}th checkpoint")
    (run_dir,) = out.iterdir()
    return run_dir, {int(turn): pair for turn, pair in json.loads(sizes.read_text()).items()}


@dataclass
class Timed:
    """Where one resume's time went (seconds)."""

    ready_s: float  # Runner(...).resume(run_dir) called -> the after_resume point
    first_call_s: float  # -> the first provider call
    open_s: float  # of them, opening the checkpoint store (with a key: scrypt's key derivation)
    latest_s: float  # reading the newest checkpoint: its facts, events and continuation
    rebuild_s: float  # rebuilding the state from the projection (keyless)
    game_s: float  # rebuilding the game from its side-effect journal


def put(owner: Any, attribute: str, value: Any) -> None:
    """setattr, past a frozen dataclass's guard (a strategy is a frozen record of functions)."""
    (setattr if isinstance(owner, type) else object.__setattr__)(owner, attribute, value)


@contextmanager
def timers(spent: dict[str, float]) -> Iterator[None]:
    """The resume's stages timed, by wrapping what does each (this process only)."""
    wrapped: list[tuple[Any, str, Any]] = []

    def wrap(owner: Any, attribute: str, stage: str) -> None:
        original = owner.__dict__[attribute]
        function = original.__func__ if isinstance(original, classmethod) else original

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                spent[stage] = spent.get(stage, 0.0) + time.perf_counter() - started

        put(owner, attribute, classmethod(timed) if isinstance(original, classmethod) else timed)
        wrapped.append((owner, attribute, original))

    wrap(SQLiteCheckpointStore, "__init__", "open")
    wrap(SQLiteCheckpointStore, "latest", "latest")
    wrap(JournaledEnvironment, "reopen", "game")
    for strategy in STRATEGIES.values():
        wrap(strategy, "rebuild", "rebuild")
    try:
        yield
    finally:
        for owner, attribute, original in reversed(wrapped):
            put(owner, attribute, original)


def timed_resume(profile: Profile, run_dir: Path) -> Timed:
    """One resume of `run_dir`, stopped at its first provider call."""
    marks: dict[str, float] = {}
    spent: dict[str, float] = {}

    def at(point: Point) -> None:
        if point == "after_resume":
            marks["ready"] = time.perf_counter()
        elif point in ("before_provider_call", "during_compaction"):
            marks["first_call"] = time.perf_counter()
            raise FirstCall

    with timers(spent):
        started = time.perf_counter()
        try:
            Runner(profile, run_dir.parent, on_point=at).resume(run_dir)
        except FirstCall:
            pass
    return Timed(
        ready_s=marks["ready"] - started,
        first_call_s=marks["first_call"] - started,
        open_s=spent.get("open", 0.0),
        latest_s=spent.get("latest", 0.0),
        rebuild_s=spent.get("rebuild", 0.0),
        game_s=spent.get("game", 0.0),
    )


def resume_part(profile: Profile, lengths: tuple[int, ...], key: bool, folder: Path) -> dict[str, Any]:
    """Every length's killed run (forked children, before this process starts a thread), then its
    resumes: the first cold, RESUMES more warm, each on a fresh copy of the folder the kill left."""
    keyed(key)
    longest = max(lengths)
    run_profile = long_profile(profile, longest + 100, "window")  # it goes on past every kill
    marks = tuple(sorted({100, longest // 3, 2 * longest // 3, longest}))
    killed = {n: killed_run(run_profile, folder / f"killed-{n}", n, marks) for n in lengths}
    resumes: dict[int, list[dict[str, float]]] = {}
    for n, (run_dir, _) in killed.items():
        trials = []
        for trial in range(1 + RESUMES):
            copy = folder / f"resume-{n}-{trial}" / run_dir.name
            shutil.copytree(run_dir, copy)
            trials.append(asdict(timed_resume(run_profile, copy)))
            shutil.rmtree(copy.parent)
        resumes[n] = trials
    return {
        "key": key,
        "resumes": {str(n): trials for n, trials in resumes.items()},
        "bytes": {str(turn): pair for turn, pair in killed[longest][1].items()},
    }


# -- the parts, each in a process of its own ----------------------------------------------------------


def part(name: str, *arguments: object) -> Any:
    """This script's `name` part in a fresh process; its JSON."""
    command = [sys.executable, str(Path(__file__).resolve()), "--part", name, *map(str, arguments)]
    print(f"  {name} {' '.join(map(str, arguments))} (load {load()})", file=sys.stderr, flush=True)
    done = subprocess.run(command, capture_output=True, text=True, cwd=HERE.parent)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr}")
    return json.loads(done.stdout)


def run_part(args: argparse.Namespace) -> Any:
    profile = load_profile(args.profile)
    freeze_startup_objects()  # as `turnstate run` does
    if args.part == "cost":
        return asdict(cost_run(profile, args.turns, args.regime, args.key, args.provider_process))
    if args.part == "wall":
        return wall_run(profile, args.turns, args.regime, args.off)
    with tempfile.TemporaryDirectory() as folder:
        return resume_part(profile, tuple(args.lengths), args.key, Path(folder))


@dataclass
class Figures:
    cost: list[dict[str, Any]] = field(default_factory=list)
    wall: list[dict[str, Any]] = field(default_factory=list)
    resume: list[dict[str, Any]] = field(default_factory=list)
    load: list[str] = field(default_factory=list)


def measure_all(profile: str, quick: bool) -> Figures:
    """Every part's runs, each in a process of its own; --quick plays short ones, once, and leaves out
    the provider process and the arms of the wall with durability off."""
    turns, reps = (200, 1) if quick else (1000, 3)
    lengths = (100, 200) if quick else (1000, 3000)
    figures = Figures(load=[load()])
    for regime in ("window",) if quick else ("window", "wide"):
        for where in PROVIDERS[:1] if quick else PROVIDERS:
            for rep in range(reps):
                for key in (False, True) if rep % 2 == 0 else (True, False):
                    flags = [*(["--key"] if key else []), *(["--provider-process"] if where == "process" else [])]
                    figures.cost.append(part("cost", profile, "--turns", turns, "--regime", regime, *flags))
    for key in (False, True):
        flag = ["--key"] if key else []
        figures.resume.append(part("resume", profile, "--lengths", *lengths, *flag))
    for regime in ("window", "wide"):
        for pair in range(1 if quick else PAIRS):
            for off in (False,) if quick else (False, True) if pair % 2 == 0 else (True, False):
                flag = ["--off"] if off else []
                figures.wall.append(part("wall", profile, "--turns", turns, "--regime", regime, *flag))
    figures.load.append(load())
    return figures


# -- the figures -------------------------------------------------------------------------------------


def cost_figures(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each arm's cost per turn, the median over the runs (and its range); the direct time of
    `_checkpoint` and of the store's commit in it, over every turn that made one."""
    per_run = [arm_costs(run["harness_ms"]) for run in runs]
    checkpoints = sorted(ms for run in runs for ms in run["checkpoint_ms"])
    return {
        "turns": runs[0]["turns"],
        "runs": len(runs),
        "on_ms": statistics.median(statistics.median(run["harness_ms"]["on"]) for run in runs),
        "arms_ms": {arm: statistics.median(each[arm] for each in per_run) for arm in per_run[0]},
        "arms_range_ms": {
            arm: [min(each[arm] for each in per_run), max(each[arm] for each in per_run)] for arm in per_run[0]
        },
        "checkpoint_direct_ms": statistics.median(checkpoints),
        "checkpoint_direct_p99_ms": checkpoints[int(0.99 * len(checkpoints))],
        "commit_direct_ms": statistics.median(ms for run in runs for ms in run["commit_ms"]),
        "load": [run["load"] for run in runs],
    }


def summary(figures: Figures) -> dict[str, Any]:
    """The medians and ratios the table reports, from the raw figures."""
    cost: dict[str, Any] = {}
    for regime in ("window", "wide"):
        for where in PROVIDERS:
            for key in (False, True):
                runs = [
                    run
                    for run in figures.cost
                    if (run["regime"], run["provider_process"], run["key"]) == (regime, where == "process", key)
                ]
                if runs:
                    cost[f"{regime}, {where} provider, {'key' if key else 'keyless'}"] = cost_figures(runs)
    wall: dict[str, Any] = {}
    for regime in ("window", "wide"):
        for off in (False, True):
            ratios = sorted(
                run["wall_s"] / run["floor_s"] for run in figures.wall if run["regime"] == regime and run["off"] == off
            )
            if ratios:
                wall[f"{regime} {'off' if off else 'on'}"] = {"median": statistics.median(ratios), "ratios": ratios}
    resume: dict[str, Any] = {}
    for each in figures.resume:
        mode = "key" if each["key"] else "keyless"
        for n, trials in each["resumes"].items():
            warm = trials[1:]
            resume[f"{mode} {n}"] = {
                "cold": trials[0],
                "warm": {stage: statistics.median(trial[stage] for trial in warm) for stage in warm[0]},
            }
        at = {int(turn): pair for turn, pair in each["bytes"].items()}
        last = max(at)
        first, second = at[last // 3], at[2 * last // 3]  # the first third's end, the second's
        resume[f"{mode} bytes"] = {
            "at": at,
            "disk_ratio": (at[last][0] - second[0]) / first[0],
            "pages_ratio": (at[last][1] - second[1]) / first[1],
        }
    wall_turns = figures.wall[0]["turns"] if figures.wall else 0
    return {"cost": cost, "wall": wall, "wall_turns": wall_turns, "resume": resume, "load": figures.load}


def arm_cost(cost: dict[str, Any], arm: str) -> str:
    """An arm's cost per turn, and its range over the runs."""
    low, high = cost["arms_range_ms"][arm]
    return f"{cost['arms_ms'][arm]:.3f}" + (f" ({low:.3f} to {high:.3f})" if cost["runs"] > 1 else "")


def table(result: dict[str, Any]) -> list[tuple[str, str, str, bool | None]]:
    """(figure, measured, goal, met) rows, as bench/run.py prints them."""
    rows: list[tuple[str, str, str, bool | None]] = []
    for name, cost in result["cost"].items():
        arms = cost["arms_ms"]
        arm = partial(arm_cost, cost)
        rows.append(
            (
                f"checkpoint per turn, {name}, {cost['turns']} turns: with less without, median of {cost['runs']} "
                "runs (range); direct median (p99), of it the store's commit; harness per turn, everything on",
                f"{arm('no checkpoint')} ms; {cost['checkpoint_direct_ms']:.3f} ({cost['checkpoint_direct_p99_ms']:.3f}), "
                f"{cost['commit_direct_ms']:.3f} ms; {cost['on_ms']:.2f} ms",
                f"<= {COST_GOAL_MS} ms",
                arms["no checkpoint"] <= COST_GOAL_MS,
            )
        )
        rows.append(
            (
                f"journals per turn, {name}: side effects; usage; checkpoint and both journals",
                f"{arm('no side-effect journal')}; {arm('no usage journal')}; {arm('none')} ms",
                "-",
                None,
            )
        )
    for regime in ("window", "wide"):
        on, off = result["wall"].get(f"{regime} on"), result["wall"].get(f"{regime} off")
        if on is None:
            continue
        measured = f"{on['median']:.2f} ({', '.join(f'{ratio:.2f}' for ratio in on['ratios'])})"
        if off is not None:
            measured += f"; {off['median']:.2f} ({', '.join(f'{ratio:.2f}' for ratio in off['ratios'])})"
        rows.append(
            (
                f"manual_rolling {regime}, {result['wall_turns']} turns: turnstate wall / floor wall, median, "
                "everything on; all three off",
                measured,
                f"<= {TODAY[regime] + WALL_SLACK:.2f} (today {TODAY[regime]})",
                on["median"] <= TODAY[regime] + WALL_SLACK,
            )
        )
    resume = result["resume"]
    for mode in ("keyless", "key"):
        lengths = sorted(int(n) for name in resume for first, n in [name.split()] if first == mode and n.isdigit())
        if not lengths:
            continue
        warm = [resume[f"{mode} {n}"]["warm"] for n in lengths]
        cold = [resume[f"{mode} {n}"]["cold"] for n in lengths]
        ns = " / ".join(map(str, lengths))
        growth = warm[-1]["first_call_s"] / warm[0]["first_call_s"]
        linear = lengths[-1] / lengths[0]
        rows.append(
            (
                f"resume at {ns} turns, {mode}: to after_resume; to the first call (warm, cold)",
                " / ".join(f"{each['ready_s']:.3f}" for each in warm)
                + " s; "
                + " / ".join(
                    f"{w['first_call_s']:.3f} ({c['first_call_s']:.3f})" for w, c in zip(warm, cold, strict=True)
                )
                + f" s; growth {growth:.2f}x for {linear:.0f}x turns",
                f"<= {RESUME_GOAL_S} s, at most linear",
                max(each["first_call_s"] for each in cold) <= RESUME_GOAL_S and growth <= linear,
            )
        )
        rows.append(
            (
                f"resume at {ns} turns, {mode}: store open / latest() / rebuild / game (warm)",
                "; ".join(
                    f"{each['open_s']:.3f} / {each['latest_s']:.3f} / {each['rebuild_s']:.3f} / {each['game_s']:.3f}"
                    for each in warm
                )
                + " s",
                "-",
                None,
            )
        )
        sizes = resume[f"{mode} bytes"]
        at = {int(turn): pair for turn, pair in sizes["at"].items()}  # JSON's keys are strings
        turns = " / ".join(map(str, sorted(at)))
        rows.append(
            (
                f"checkpoint bytes at {turns} turns, {mode}: on disk (pages); last third / first third",
                " / ".join(f"{at[turn][0] / 1e6:.2f} ({at[turn][1] / 1e6:.2f})" for turn in sorted(at))
                + f" MB; {sizes['disk_ratio']:.2f} ({sizes['pages_ratio']:.2f})",
                f"<= {BYTES_GOAL}",
                sizes["disk_ratio"] <= BYTES_GOAL,
            )
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("profile", nargs="?", default=str(DEFAULT_PROFILE))
    parser.add_argument("--quick", action="store_true", help="short runs, one repetition, to check the script")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    parser.add_argument("--part", choices=["cost", "wall", "resume"], help=argparse.SUPPRESS)
    parser.add_argument("--turns", type=int, default=1000, help=argparse.SUPPRESS)
    parser.add_argument("--regime", choices=["window", "wide"], default="window", help=argparse.SUPPRESS)
    parser.add_argument("--key", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--off", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--provider-process", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--lengths", type=int, nargs="+", default=[1000, 3000], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.part:
        print(json.dumps(run_part(args)))
        return
    started = time.perf_counter()
    # The killed runs' embedded provider services (turnstate/session/endpoint.py local_service_dir) go in a
    # folder of the bench's own, which the parts' processes inherit, never the user's state folder.
    with tempfile.TemporaryDirectory(prefix="turnstate-bench-state-") as state_home:
        os.environ["XDG_STATE_HOME"] = state_home
        result = summary(measure_all(args.profile, args.quick))
    result["minutes"] = (time.perf_counter() - started) / 60
    if args.json:
        print(json.dumps(result))
        return
    print(f"load average (1, 5, 15 min) at the start: {result['load'][0]}; at the end: {result['load'][-1]}")
    print("| figure | measured | goal | met |")
    print("|---|---|---|---|")
    for figure, measured, goal, met in table(result):
        print(f"| {figure} | {measured} | {goal} | {'-' if met is None else ('yes' if met else 'no')} |")


if __name__ == "__main__":
    main()
