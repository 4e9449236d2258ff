"""How a sweep's runs are carried out: the driver (`run_sweep`) and its engines.

The driver keeps the budget (at most `in_flight` runs at once; no new run once the recorded cost
reaches the cap), records each run's row as it ends and writes the results whole each time. An engine
only starts a run and says when one has ended:

- `PoolEngine` (the default; nothing to install): one process per run, forked from a server process
  that imported turnstate once (multiprocessing's forkserver, so a run starts in milliseconds, not
  the second and more that importing the SDKs takes, and no process forks from the driver's
  threads). A run's process stops when the driver is gone (a watchdog thread looks every
  WATCHDOG_SECONDS), so a hard-killed driver leaves no run playing on; Ctrl-C reaches the runs
  (one process group) and each records its end as `interrupted`, which the next `turnstate sweep`
  resumes from its checkpoint; a run still going after STOP_SECONDS is killed (its checkpoint holds).
- `RayEngine` (ray_engine.py): each run a Ray task on an existing cluster.

A run that fails outside the run's own handling (its process killed, an error the runner raises) is a
row with outcome `error` and a one-line message; the sweep goes on with the others.
"""

from __future__ import annotations

import fcntl
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any, Protocol

from turnstate.durable.layout import SWEEP_LOCK, SWEEP_RUNS
from turnstate.session.interrupts import interruptible, raise_pending
from turnstate.sweeps.plan import (
    ENDED_OUTCOMES,
    Plan,
    PlannedRun,
    SweepError,
    play,
    result_row,
    write_results,
    write_sweep_record,
)
from turnstate.sweeps.progress import SweepProgress, skipped_keys

WATCHDOG_SECONDS = 0.5
STOP_SECONDS = 10.0
PRELOADED = ("turnstate.session.runner", "turnstate.cli", "turnstate.sweeps.engines")


def preloaded_modules(adapter_ids: Iterable[str]) -> list[str]:
    """What the server process imports once for every run: the harness and the adapters' modules
    the runs use, with their SDKs (anthropic's alone takes seconds to import; a sweep that does not
    use it should not wait for it)."""
    from turnstate.adapters.registry import descriptor_for

    adapters = sorted({descriptor_for(name).implementation.partition(":")[0] for name in adapter_ids})
    return [*PRELOADED, *adapters, "turnstate.sweeps.fork"]  # the last: it freezes what came before


class Engine(Protocol):
    """Starts runs and reports their ends; the driver holds the budget."""

    def start(self, planned: PlannedRun, runs_root: Path) -> object:
        """Start playing `planned`; a handle for `wait`."""
        ...

    def wait(self, handles: Sequence[object]) -> tuple[object, str | None]:
        """Block until one of `handles` has ended: (that handle, None, or what went wrong)."""
        ...

    def stop(self, handles: Sequence[object]) -> None:
        """Stop the runs of `handles` (Ctrl-C): each records its end if it can, none plays on."""
        ...

    def close(self) -> None: ...


def run_sweep(
    plan: Plan,
    sweep_dir: Path,
    engine: Engine,
    *,
    in_flight: int | None = None,
    on_row: Callable[[Mapping[str, Any]], None] | None = None,
    progress: SweepProgress | None = None,
) -> list[dict[str, Any]]:
    """Play the plan's runs that have not ended, within its budget, and write the results; the rows.
    One driver at a time on a folder: a second is a SweepError (it would start the same runs).
    `progress` is told each run it skips, starts and ends, for a live view."""
    sweep_dir.mkdir(parents=True, exist_ok=True)
    try:
        with _driving(sweep_dir), interruptible():  # no handlers of its own: a swallowed Ctrl-C is kept
            return _drive(plan, sweep_dir, engine, in_flight, on_row, progress or SweepProgress.of(plan, sweep_dir))
    finally:
        engine.close()  # also when the folder is another driver's: a Ray this engine started stops


@contextmanager
def _driving(sweep_dir: Path) -> Iterator[None]:
    """The folder's lock (an flock: the kernel releases it when a driver dies)."""
    descriptor = os.open(sweep_dir / SWEEP_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(descriptor)
        raise SweepError(
            f"{sweep_dir}: another turnstate sweep is running on this folder; fix: wait for it, or stop it "
            "(Ctrl-C) and run this one again to go on where it stopped"
        ) from None
    try:
        yield
    finally:
        os.close(descriptor)


def _drive(
    plan: Plan,
    sweep_dir: Path,
    engine: Engine,
    in_flight: int | None,
    on_row: Callable[[Mapping[str, Any]], None] | None,
    progress: SweepProgress,
) -> list[dict[str, Any]]:
    runs_root = sweep_dir / SWEEP_RUNS
    write_sweep_record(sweep_dir, plan)
    rows = {planned.key: result_row(planned, runs_root, sweep_dir) for planned in plan.runs}
    progress.skipped(skipped_keys(rows.values()))
    waiting = deque(planned for planned in plan.runs if rows[planned.key]["outcome"] not in ENDED_OUTCOMES)
    limit = in_flight or plan.sweep.budget.in_flight
    cap = plan.sweep.budget.cost_cap
    playing: dict[object, PlannedRun] = {}

    def record(planned: PlannedRun, error: str | None = None) -> None:
        rows[planned.key] = result_row(planned, runs_root, sweep_dir, error)
        write_results(sweep_dir, list(rows.values()), plan.comparisons)
        progress.ended(rows[planned.key])
        if on_row is not None:
            on_row(rows[planned.key])

    write_results(sweep_dir, list(rows.values()), plan.comparisons)
    try:
        while waiting or playing:
            while waiting and len(playing) < limit and (cap is None or _spent(rows.values()) < cap):
                planned = waiting.popleft()
                playing[engine.start(planned, runs_root)] = planned
                progress.started(planned)
            if not playing:
                break  # the cost cap: what is still waiting does not start
            handle, error = engine.wait(list(playing))
            record(playing.pop(handle), error)
            raise_pending()
    except KeyboardInterrupt:
        engine.stop(list(playing))
        for planned in playing.values():
            rows[planned.key] = result_row(planned, runs_root, sweep_dir)
        write_results(sweep_dir, list(rows.values()), plan.comparisons)
        raise
    return list(rows.values())


def _spent(rows: Any) -> float:
    return sum(float(row["cost"]) for row in rows)


# -- the process pool ------------------------------------------------------------------------------


class PoolEngine:
    """One process per run, forked from a server process with turnstate imported (module docstring)."""

    def __init__(self, adapter_ids: Iterable[str] = ()) -> None:
        self._context = multiprocessing.get_context("forkserver")
        self._context.set_forkserver_preload(preloaded_modules(adapter_ids))
        self._processes: dict[object, tuple[BaseProcess, Connection]] = {}

    def start(self, planned: PlannedRun, runs_root: Path) -> object:
        receiving, sending = self._context.Pipe(duplex=False)
        process = self._context.Process(
            target=_play_in_process, args=(planned, runs_root, sending, os.getpid()), name=f"turnstate-{planned.key}"
        )
        process.start()
        sending.close()
        self._processes[process.sentinel] = (process, receiving)
        return process.sentinel

    def wait(self, handles: Sequence[object]) -> tuple[object, str | None]:
        ready = multiprocessing.connection.wait(list(handles))  # type: ignore[arg-type]
        handle = ready[0]
        process, receiving = self._processes.pop(handle)
        process.join()
        try:
            message = receiving.recv() if receiving.poll() else None
        except EOFError:  # it died before it could say
            message = None
        receiving.close()
        if message is None and process.exitcode != 0:
            message = f"the run's process ended with exit code {process.exitcode}"
        return handle, message

    def stop(self, handles: Sequence[object]) -> None:
        processes = [self._processes[handle][0] for handle in handles if handle in self._processes]
        for process in processes:
            if process.is_alive() and process.pid is not None:
                os.kill(process.pid, signal.SIGTERM)  # the run records `interrupted`
        deadline = time.monotonic() + STOP_SECONDS
        for process in processes:
            process.join(max(0.0, deadline - time.monotonic()))
            if process.is_alive():
                process.kill()  # its checkpoint holds what it accepted
                process.join()

    def close(self) -> None:
        self.stop(list(self._processes))
        for _, receiving in self._processes.values():
            receiving.close()
        self._processes.clear()


def _play_in_process(planned: PlannedRun, runs_root: Path, report: Connection, driver: int) -> None:
    """A run's process: play it, send back None or a one-line error, exit. SIGTERM and Ctrl-C end the
    run as `turnstate run` ends it (run_meta.json says interrupted); the watchdog ends it when the
    driver is gone."""
    threading.Thread(target=_watch_driver, args=(driver,), daemon=True, name="turnstate-watchdog").start()
    with interruptible(signal.SIGTERM):
        message = played(planned, runs_root)
    report.send(message)
    report.close()
    sys.exit(0 if message is None else 1)


def played(planned: PlannedRun, runs_root: Path) -> str | None:
    """`play` in an engine's process: None, "interrupted" (Ctrl-C, or a signal raised as it), or the
    one-line error of any failure, which is the run's row and never a traceback."""
    try:
        play(planned, runs_root)
    except KeyboardInterrupt:
        return "interrupted"
    except Exception as error:  # noqa: BLE001 - any failure is this run's row
        return one_line(error)
    return None


def one_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0] if lines else ''}".rstrip(": ")


def _watch_driver(driver: int) -> None:
    while True:
        time.sleep(WATCHDOG_SECONDS)
        try:
            os.kill(driver, 0)
        except ProcessLookupError:
            os.kill(os.getpid(), signal.SIGTERM)
            return
