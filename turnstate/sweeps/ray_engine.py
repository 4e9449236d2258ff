"""The Ray engine of a sweep (`engine: ray`, `turnstate sweep --ray ADDRESS`): each run a Ray task.

Rules:
1. Where: ADDRESS `local` starts a Ray of our own on this machine, with as many CPUs as the runs in
   flight; any other address goes to `ray.init(address=...)` (`auto`: the cluster this machine
   belongs to, `HOST:PORT`: its head). A caller that already called `ray.init` keeps its connection,
   and the engine never shuts it down. Ray comes with `pip install -e '.[ray]' in turnstate's checkout`.
2. A run is a task calling `sweep.play(planned, runs_root)` in a worker process (workers are reused:
   turnstate and the SDKs are imported once per worker, not per run). The runs' folders must be on a
   filesystem every node of the cluster shares (the sweep folder, `--out`): the task writes the run
   there, and the driver reads its run_meta.json for the results.
3. A task whose worker dies (killed, out of memory, its node lost) is retried by Ray (MAX_RETRIES); the
   retry's `play` resumes the run from its checkpoint, so an accepted action is never replayed (the
   game's side effects are journaled: side_effects.py).
4. An exception the run raises is caught in the task and returned as the row's one-line error: Ray
   prints nothing (a task that raised would have its traceback printed on the driver's stderr), and
   the driver reads every result, so no "unhandled error" is printed either. The raylet's own
   messages (a worker died, the task will be retried: ids and colour codes) are printed on the
   driver's stdout whatever `log_to_driver` says (measured); the engine turns that printing off while
   it runs (`ray._private.worker._worker_logs_enabled`, the switch Ray's debugger uses); the row's
   `resumes` says a run was retried.
5. Ctrl-C (`stop`): the heartbeat file says `stop`, whose watchdog (rule 6) interrupts each run with a
   real SIGINT (it wakes a blocked read or sleep, which `ray.cancel`'s simulated interrupt does not),
   the run records `interrupted` as `turnstate run` does, and the next sweep resumes it. `ray.cancel`
   drops the tasks not yet started; a run still going after STOP_SECONDS is force-cancelled (its
   worker killed; its checkpoint holds what it accepted).
6. A driver that is gone (hard-killed) leaves no run playing: the driver rewrites a heartbeat file in
   the sweep folder every HEARTBEAT_SECONDS (`TOKEN COUNT`; TOKEN is this driver's), and each task
   runs a watchdog thread that interrupts its run (rule 5) once the file says `stop`, names another
   driver, or has not changed for DRIVER_GONE_SECONDS. A file, not the driver's pid (a task on another
   host cannot see it) nor a Ray actor (Ray's own cleanup of a dead driver is what this guards): the
   shared filesystem is already required (rule 2). It is written in place, not renamed, because NFS's
   close-to-open consistency makes a reader's open see the last write, where a renamed file can be
   looked up through a name cached for up to a minute. (Ray 2.60 also kills a dead driver's tasks
   within a second or two when the cluster sees the driver go; the watchdog does not depend on it.)
7. A hard-killed driver's local Ray leaves nothing behind. Measured with Ray 2.60: `ray.init(num_cpus=N)`
   starts GCS, raylet and their helpers as the driver's children, in its process group, and they
   die with it (fate-shared), but the raylet's DashboardAgent and RuntimeEnvAgent outlive a
   SIGKILLed driver by about a minute (they report the raylet's death to the dead GCS, with a 60 s
   timeout). So once a local Ray has started, a reaper process (`python -m turnstate.sweeps.ray_engine
   PID:START...`) is given every process the driver gained during `ray.init` (pid and start time, so
   a reused pid is never taken for one) and the read end of a pipe from the driver; at EOF (the
   driver closed it after `ray.shutdown()`, or died) it kills those still there. Ray's workers (each
   in a process group of its own) exit with their raylet. Ray's processes ignore a terminal's Ctrl-C
   (measured), so the driver can still cancel its tasks; the reaper is in a session of its own. Local Ray keeps
   Ray's defaults (token authentication on). Linux only (it reads /proc); elsewhere no reaper.
"""

from __future__ import annotations

import importlib
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from turnstate.session.interrupts import interruptible
from turnstate.sweeps.engines import STOP_SECONDS, one_line, played
from turnstate.sweeps.plan import PlannedRun

DEFAULT_ADDRESS = "auto"  # `engine: ray` without `ray_address`: the "an existing cluster"
INSTALL_FIX = "fix: pip install -e '.[ray]' in turnstate's checkout"
HEARTBEAT = "ray-driver.heartbeat"  # in the sweep folder
HEARTBEAT_SECONDS = 1.0
DRIVER_GONE_SECONDS = 10.0
WATCHDOG_SECONDS = 0.5
MAX_RETRIES = 3
CONNECT_SECONDS = 10.0


class RayEngineError(Exception):
    """Ray cannot be used as asked; the one-line message says why and the fix."""


def _ray() -> ModuleType:
    try:
        return importlib.import_module("ray")  # by name: mypy and the base install need no Ray
    except ImportError:
        raise RayEngineError(f"the Ray engine needs Ray, which is not installed; {INSTALL_FIX}") from None


def _ray_prints(enabled: bool) -> bool:
    """Turn the driver's printing of Ray's worker and raylet lines on or off (rule 4); what it was."""
    worker = vars(importlib.import_module("ray._private.worker"))
    was = bool(worker.get("_worker_logs_enabled", True))
    worker["_worker_logs_enabled"] = enabled
    return was


def _check_reachable(address: str) -> None:
    """A HOST:PORT that accepts no connection within CONNECT_SECONDS raises ConnectionError: Ray's own
    connect to a GCS that is not there retries for many minutes (measured: 20 attempts of a client that
    blocks past 60 s each), saying nothing a person can act on. `auto` and other forms are Ray's."""
    host, colon, port = address.rpartition(":")
    if not colon or not port.isdigit() or "/" in host:
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_SECONDS).close()
    except OSError as error:
        raise ConnectionError(f"nothing answers at {address} ({error.strerror or error})") from None


class RayEngine:
    """Each run a Ray task on the cluster at `address` (module docstring); `num_cpus` sizes a local Ray."""

    def __init__(self, address: str = "local", num_cpus: int = 2) -> None:
        ray = self._ray = _ray()
        self._local: _LocalRay | None = None
        self._connected = False
        self._heartbeat: _Heartbeat | None = None
        if not ray.is_initialized():
            try:
                if address == "local":
                    self._local = _LocalRay(ray, num_cpus)
                else:
                    _check_reachable(address)
                    ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR)
            except Exception as error:  # noqa: BLE001 - ConnectionError, ValueError, RuntimeError, Ray's own
                what = "start a local Ray" if address == "local" else f"connect to the Ray cluster at {address}"
                raise RayEngineError(
                    f"cannot {what} ({one_line(error)}); fix: start the cluster (`ray start --head`) and pass "
                    "its address (HOST:PORT, or `auto` on one of its nodes), or `local`"
                ) from None
            self._connected = True
        self._task = ray.remote(max_retries=MAX_RETRIES, num_cpus=1)(_play_task)
        self._printed = _ray_prints(False)  # rule 4

    def start(self, planned: PlannedRun, runs_root: Path) -> object:
        if self._heartbeat is None:
            self._heartbeat = _Heartbeat(runs_root.parent / HEARTBEAT)
        return self._task.remote(planned, str(runs_root), str(self._heartbeat.path), self._heartbeat.token)

    def wait(self, handles: Sequence[object]) -> tuple[object, str | None]:
        (ready, *_), _ = self._ray.wait(list(handles), num_returns=1)
        return ready, self._result(ready)

    def _result(self, ref: Any) -> str | None:
        """The task's one-line error or None; Ray's own failure (worker died past its retries, task
        cancelled) as one line too."""
        try:
            return self._ray.get(ref)
        except Exception as error:  # noqa: BLE001 - ray.exceptions.RayError and kin: the row's error
            return one_line(error)

    def stop(self, handles: Sequence[object]) -> None:
        refs = list(handles)
        if self._heartbeat is not None:
            self._heartbeat.stop_runs()
        for ref in refs:
            self._ray.cancel(ref)  # a task not yet started never starts
        _, going = self._ray.wait(refs, num_returns=len(refs), timeout=STOP_SECONDS)
        for ref in going:
            self._ray.cancel(ref, force=True)
        for ref in refs:
            self._result(ref)  # read, so Ray prints no "unhandled error" for it

    def close(self) -> None:
        _ray_prints(self._printed)
        if self._heartbeat is not None:
            self._heartbeat.close()
            self._heartbeat = None
        if self._connected:
            self._ray.shutdown()
            self._connected = False
        if self._local is not None:
            self._local.close()
            self._local = None


# -- the driver's heartbeat and the task's watchdog (rule 6) ------------------------------------------


class _Heartbeat:
    """The driver's side: `TOKEN COUNT` rewritten every HEARTBEAT_SECONDS, `TOKEN stop` to stop the runs."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.token = uuid.uuid4().hex
        self._stopping = False
        self._closed = threading.Event()
        path.parent.mkdir(parents=True, exist_ok=True)
        self._beat(0)
        self._thread = threading.Thread(target=self._keep, daemon=True, name="turnstate-ray-heartbeat")
        self._thread.start()

    def _beat(self, count: int) -> None:
        self.path.write_text(f"{self.token} {'stop' if self._stopping else count}\n")

    def _keep(self) -> None:
        count = 0
        while not self._closed.wait(HEARTBEAT_SECONDS):
            count += 1
            try:
                self._beat(count)
            except OSError:  # a beat lost to a passing fault (a full disk, a share's hiccup): the next one
                continue

    def stop_runs(self) -> None:
        self._stopping = True
        self._beat(0)

    def close(self) -> None:
        self._closed.set()
        self._thread.join()
        self.path.unlink(missing_ok=True)


def _driver_gone(seen: str | None, token: str) -> bool:
    """Whether the heartbeat's text says this task's driver stops its runs or was replaced."""
    fields = (seen or "").split()
    return len(fields) == 2 and (fields[0] != token or fields[1] == "stop")


class _Watchdog:
    """The task's side: interrupts the run (SIGINT to this process, once) when its driver is gone."""

    def __init__(self, path: Path, token: str) -> None:
        self._path, self._token = path, token
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._watch, daemon=True, name="turnstate-ray-watchdog")
        self._thread.start()

    def _read(self) -> str | None:
        try:
            return self._path.read_text()
        except OSError:
            return None

    def _watch(self) -> None:
        last, changed = self._read(), time.monotonic()
        while not self._done.wait(WATCHDOG_SECONDS):
            seen = self._read()
            if seen != last:
                last, changed = seen, time.monotonic()
            if _driver_gone(seen, self._token) or time.monotonic() - changed > DRIVER_GONE_SECONDS:
                with self._lock:
                    if not self._done.is_set():
                        os.kill(os.getpid(), signal.SIGINT)
                return

    def close(self) -> None:
        """After this, the watchdog sends nothing: the worker goes on to other tasks."""
        with self._lock:
            self._done.set()


def _play_task(planned: PlannedRun, runs_root: str, heartbeat: str, token: str) -> str | None:
    """A run in a Ray worker: None, or its one-line error (rule 4). SIGINT (the watchdog's, or
    ray.cancel's) ends the run as Ctrl-C ends `turnstate run`; a second one is ignored while the run
    records its end. The worker's own SIGINT handler is back once the task ends."""
    try:
        with interruptible(signal.SIGINT):
            watchdog = _Watchdog(Path(heartbeat), token)
            try:
                return played(planned, Path(runs_root))
            finally:
                watchdog.close()
    except KeyboardInterrupt:  # the watchdog's signal, landing as the run ended
        return "interrupted"


# -- a local Ray of our own (rule 7) ------------------------------------------------------------------


def _processes() -> dict[int, tuple[int, str]]:
    """Every process on this machine: pid -> (its parent, its start time in ticks since boot), from /proc."""
    found = {}
    for entry in Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
            found[int(entry.name)] = (int(fields[1]), fields[19])
        except (ValueError, OSError, IndexError):
            continue
    return found


def _descendants(processes: dict[int, tuple[int, str]], root: int) -> set[int]:
    """`root`'s descendants among `processes`."""
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in processes.items():
        children.setdefault(parent, []).append(pid)
    found, waiting = set(), [root]
    while waiting:
        for child in children.get(waiting.pop(), ()):
            found.add(child)
            waiting.append(child)
    return found


class _LocalRay:
    """A Ray started here by `ray.init`, with a reaper for what it leaves when the driver dies (rule 7)."""

    def __init__(self, ray: ModuleType, num_cpus: int) -> None:
        linux = Path("/proc/self/stat").is_file()
        before = _descendants(_processes(), os.getpid()) if linux else set()
        ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
        self._reaper: subprocess.Popen[bytes] | None = None
        if linux:
            processes = _processes()
            started = [f"{pid}:{processes[pid][1]}" for pid in _descendants(processes, os.getpid()) - before]
            self._reaper = subprocess.Popen(
                [sys.executable, "-m", "turnstate.sweeps.ray_engine", *started],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # a terminal's Ctrl-C or hang-up is for the driver, not for it
            )

    def close(self) -> None:
        """After `ray.shutdown()`: the reaper takes what is left and ends."""
        if self._reaper is not None:
            assert self._reaper.stdin is not None
            self._reaper.stdin.close()
            self._reaper.wait()


def _reap(started: Sequence[str]) -> None:
    """The reaper: wait for the driver's pipe to close, then SIGKILL each of `started` (PID:START)
    that is still the process it was."""
    sys.stdin.buffer.read()
    now = {pid: start for pid, (_, start) in _processes().items()}
    for item in started:
        pid, _, start = item.partition(":")
        if now.get(int(pid)) == start:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass


if __name__ == "__main__":
    _reap(sys.argv[1:])
