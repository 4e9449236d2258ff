"""`prune(runs_dir, older_than)`: delete the stores of the runs whose last checkpoint is older than that:
the run folders in `runs_dir`, and those a sweep's folder holds further down (PRUNE_DEPTH)."""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Final

from turnstate.durable.checkpoints.protocol import CheckpointError
from turnstate.durable.checkpoints.sqlite import APPLICATION_ID, SQLITE_MAGIC, _locked
from turnstate.durable.layout import CHECKPOINT_FILE


def prune(runs_dir: Path | str, older_than: timedelta, *, now: float | None = None) -> list[Path]:
    """Delete the checkpoint store (database, -wal and -shm files) of each run folder in `runs_dir`
    whose last checkpoint was written more than `older_than` ago, and return the files deleted. The
    runs' other artifacts stay. Left alone: a store another process holds open to write, a file of
    that name that is not a checkpoint store, and links."""
    if older_than <= timedelta(0):
        raise ValueError(f"older_than must be a positive time, not {older_than}")
    runs = Path(runs_dir)
    if not runs.is_dir():
        raise CheckpointError(f"{runs}: no folder of runs here")
    cutoff = (time.time() if now is None else now) - older_than.total_seconds()
    deleted: list[Path] = []
    for folder in run_folders(runs):
        database = folder / CHECKPOINT_FILE
        files = [database.with_name(database.name + suffix) for suffix in ("-wal", "-shm")] + [database]
        times = [info.st_mtime for info in map(_lstat, files) if info is not None and stat.S_ISREG(info.st_mode)]
        database_info = _lstat(database)
        if database_info is None or not stat.S_ISREG(database_info.st_mode) or max(times) > cutoff:
            continue
        if not _is_store_file(database):
            continue
        try:
            lock = _locked(database)
        except CheckpointError:
            continue  # in use
        try:
            for path in files:  # the WAL first: an interrupted prune leaves a database the next one finds
                try:
                    path.unlink()
                except FileNotFoundError:
                    continue
                deleted.append(path)
        finally:
            os.close(lock)
    return deleted


PRUNE_DEPTH: Final = 3  # runs/<run>/, and a sweep's sweeps/<id>/runs/<key>/<run>/ from sweeps/<id>/


def run_folders(folder: Path, depth: int = PRUNE_DEPTH) -> Iterator[Path]:
    """The folders below `folder`, `depth` levels down at most, in name order, never through a link:
    a run's folder, or a sweep's, whose runs are further down."""
    if depth == 0:
        return
    try:
        entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            yield Path(entry.path)
            yield from run_folders(Path(entry.path), depth - 1)


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


def _is_store_file(path: Path) -> bool:
    """Whether `path` is a checkpoint store by its header, or an empty file (one created and killed
    before its first transaction; until SQLite folds the WAL back in, the header may be there alone)."""
    with open(path, "rb") as file:
        header = file.read(100)
    if not header:
        return True
    return header[:16] == SQLITE_MAGIC and int.from_bytes(header[68:72], "big") == APPLICATION_ID
