"""The artifact writer: the one place a run's JSON files are written, each redacted (durable/redaction.py).

A kill must not tear what was accepted: every JSON file is written whole (a temporary file in the
same folder, flushed and fsynced, then renamed over the target, the folder fsynced; a step record's
rename reaches the disk with the folder's next fsync, which the next other file's write makes, so a
step costs one fsync and run_meta.json still never counts a record a power loss could take), and the
transition log is flushed before each step record is handed to be written, so after a kill it is
never behind the step files. Step records are written on a thread of their own while the next turn
runs; any other file (run_meta.json above all) is written only once every step before it is, so a
run_meta.json never counts a step whose record is not on disk. The log is fsynced when the run
closes: each step record carries its own transitions, so if the machine itself loses power, the
fsynced step records are the record.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from turnstate.durable.jsonl import open_counted
from turnstate.durable.layout import TRANSITIONS, step_name
from turnstate.durable.redaction import Redactor
from turnstate.durable.transition_log import TransitionLines


class ArtifactWriter:
    """Writes one run's artifacts. Step records, one per turn, are written by a thread of their own
    while the run goes on (creating, fsyncing and renaming a file costs more than the rest of a
    turn's harness work); every other file waits for the steps before it, so nothing is ever written
    out of order, and an error writing a step is raised by the next write or by close."""

    def __init__(self, root: Path, run_id: str, redactor: Redactor | None = None, *, existing: bool = False) -> None:
        """Make <root>/<run_id>/, or with `existing` go on writing that folder (a resumed run)."""
        self.path = Path(root) / run_id
        if existing and not self.path.is_dir():
            raise FileNotFoundError(f"{self.path}: there is no run folder here")
        # Owner-only: it holds the checkpoint store, whose continuation may hold opaque provider state.
        self.path.mkdir(mode=0o700, parents=True, exist_ok=existing)
        self.redactor = redactor or Redactor()
        self._transitions, self._transition_lines = open_counted(self.path / TRANSITIONS)
        self._steps = ThreadPoolExecutor(max_workers=1, thread_name_prefix="turnstate-steps")  # in order
        self._pending: deque[Future[None]] = deque()

    def write_json(self, name: str, data: Any, *, reserve: bool = False) -> Path:
        """Write `name` whole or not at all (after every step record before it is on disk).

        With `reserve` (run_meta.json, which must say how a run ended even when the disk filled up
        under it), the file keeps room for its next write: its JSON is padded with trailing spaces
        (still JSON) to RESERVE_BYTES past the next multiple of them, and when the disk is too full
        for the temporary file, the new record overwrites the old one in place, within that room."""
        unwritten_step: OSError | None = None
        try:
            self.wait_for_steps()
        except OSError as error:  # a step record the disk had no room for: raised once run_meta.json is written
            if not reserve or error.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            unwritten_step = error
        target = self.path / name
        content = self._render(data, indent=True)
        if not reserve:
            self._write_whole(target, content)
            return target
        padded = content.ljust((len(content) // RESERVE_BYTES + 2) * RESERVE_BYTES, b" ")
        try:
            self._write_whole(target, padded)
        except OSError as error:
            if error.errno not in (errno.ENOSPC, errno.EDQUOT) or not _overwritten_in_place(target, content):
                raise
        if unwritten_step is not None:
            raise unwritten_step
        return target

    def write_step(self, index: int, record: dict[str, Any]) -> Path:
        """Render the step record now and write it on the steps' thread."""
        self._raise_failed_step()
        self._transitions.flush()  # to the OS, which a killed process cannot take back
        target = self.path / step_name(index)
        # Not indented: a step record is read through `turnstate show`, and indenting was 23% of its bytes.
        content = self._render(record)
        self._pending.append(self._steps.submit(self._write_whole, target, content, sync_folder=False))
        return target

    def wait_for_steps(self) -> None:
        """Block until every step record handed over is written; raise the first error doing so."""
        while self._pending:
            self._pending.popleft().result()

    def log_transition(self, record: dict[str, Any]) -> None:
        self._transitions.write(self._render(record))
        self._transition_lines += 1

    def last_transitions(self, count: int) -> TransitionLines:
        """Where the last `count` transitions logged are in transitions.jsonl."""
        return TransitionLines(self._transition_lines - count + 1, count)

    def sync_transitions(self) -> None:
        """Push every logged transition to disk, so the log is never behind the files written after it."""
        self._transitions.flush()
        os.fsync(self._transitions.fileno())

    def close(self) -> None:
        try:
            self.wait_for_steps()
        finally:
            self._steps.shutdown(wait=True)
            if not self._transitions.closed:
                self.sync_transitions()
                self._transitions.close()

    def _raise_failed_step(self) -> None:
        while self._pending and self._pending[0].done():
            self._pending.popleft().result()

    def _write_whole(self, target: Path, content: bytes, sync_folder: bool = True) -> None:
        """Temp file, fsync, rename over the target, fsync the folder (unless not `sync_folder`: a
        step record's, which the next other file's write syncs): whole or not at all. Plain descriptor
        calls, so the steps' thread runs next to no Python between its system calls."""
        temporary = target.with_name(f".{target.name}.tmp")
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
        try:
            unwritten = memoryview(content)
            while unwritten:
                unwritten = unwritten[os.write(descriptor, unwritten) :]
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        os.replace(temporary, target)
        if sync_folder:
            _fsync_directory(self.path)

    def _render(self, data: Any, indent: bool = False) -> bytes:
        return self.redactor.render(data, indent=indent)


RESERVE_BYTES = 4096  # a page of most file systems: room run_meta.json keeps for its next write


def _overwritten_in_place(target: Path, content: bytes) -> bool:
    """`content` written over `target`'s own bytes (padded with spaces to its size, so no block is
    added), if it fits; whether it was. Not whole-or-nothing: for a disk too full for anything else."""
    temporary = target.with_name(f".{target.name}.tmp")
    temporary.unlink(missing_ok=True)  # what the failed write left
    try:
        size = target.stat().st_size
    except FileNotFoundError:
        return False
    if len(content) > size:
        return False
    descriptor = os.open(target, os.O_WRONLY)
    try:
        unwritten = memoryview(content.ljust(size, b" "))
        while unwritten:
            unwritten = unwritten[os.write(descriptor, unwritten) :]
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
    return True


def write_once(target: Path, content: bytes) -> None:
    """A content-addressed file (a tool result's, an image's): a temporary file in the same folder,
    fsynced, then renamed to `target`; an existing `target` is never rewritten, since its name is its
    content's digest and it already holds these bytes."""
    if target.exists():
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    with open(temporary, "wb") as file:
        file.write(content)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, target)


def write_exported(target: Path, write: Callable[[Path], object]) -> None:
    """An exported file (`turnstate export`'s) whole or not at all: `write` writes it to a file beside
    `target` with `target`'s suffix, which is then renamed over it. The folder must exist. An OSError
    (a folder missing or unwritable, a full disk) leaves neither file and names `target`'s folder."""
    partial = target.with_name(f".{target.stem}.partial{target.suffix}")
    if not target.parent.is_dir():
        raise FileNotFoundError(errno.ENOENT, "no such folder", str(target.parent))
    try:
        write(partial)
        os.replace(partial, target)
    except OSError:
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)
        raise


def write_first(target: Path, content: bytes) -> bool:
    """`target` made whole, owner-only, unless another process made it first: `content` in a temporary
    file of its own, fsynced, then linked to `target`, which fails if it exists (the other's file is
    then the one). Whether `content` is what `target` holds now."""
    temporary = target.with_name(f".{target.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        try:
            os.write(descriptor, content)
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        os.link(temporary, target)
    except FileExistsError:
        return False
    finally:
        temporary.unlink(missing_ok=True)
    return True


def _fsync_directory(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
