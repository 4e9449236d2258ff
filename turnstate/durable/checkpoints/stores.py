"""Which store holds a run's checkpoints: the one place a run folder is turned into a CheckpointStore,
so that the session and a resume know the store only through its protocol.

Rules:
1. A new run keeps its checkpoints where STORE_VARIABLE (TURNSTATE_CHECKPOINTS) says: unset, empty
   or `sqlite`, in the SQLite database in its folder (CHECKPOINT_FILE, sqlite.py); a
   `postgresql://` URL, in that database (postgres.py), under a run key of its own. `turnstate run`,
   `resume` and `sweep` set it from `--checkpoints`, and a sweep from its `checkpoints:`.
2. A run folder whose checkpoints are in PostgreSQL holds CHECKPOINT_POINTER, written before the
   store is made: the URL without its password and the run's key. It is how a resume, on any host,
   finds them: the run folder, not the setting of the day, says where its checkpoints are.
3. A setting that names another place than the run's own (another database, or PostgreSQL for a run
   kept in SQLite, or the reverse) is refused, naming both: a resume never starts a store afresh
   somewhere else. A password is taken from the setting's URL when it names the run's database (the
   same user, host, port and database), else from PGPASSWORD or ~/.pgpass.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit

import orjson

from turnstate.durable.checkpoints import postgres
from turnstate.durable.checkpoints.protocol import CheckpointError, CheckpointMeta, CheckpointStore
from turnstate.durable.checkpoints.prune import prune as prune_files
from turnstate.durable.checkpoints.prune import run_folders
from turnstate.durable.checkpoints.sqlite import SQLiteCheckpointStore
from turnstate.durable.checkpoints.sqlite import set_aside as set_aside_file
from turnstate.durable.layout import CHECKPOINT_FILE, CHECKPOINT_POINTER
from turnstate.durable.writer import write_first

STORE_VARIABLE: Final = "TURNSTATE_CHECKPOINTS"
SQLITE: Final = "sqlite"


def chosen_store(setting: str | None = None) -> str | None:
    """The PostgreSQL URL new runs keep their checkpoints in (`setting`, else STORE_VARIABLE's value),
    None for SQLite in the run folder; CheckpointError for a value that is neither."""
    value = (os.environ.get(STORE_VARIABLE, "") if setting is None else setting).strip()
    if value in ("", SQLITE):
        return None
    if postgres.is_postgres_url(value):
        return value
    raise CheckpointError(
        f"{STORE_VARIABLE} must be `sqlite` or a postgresql://user@host:port/database URL, not "
        f"{postgres.shown(value)!r}"
    )


@dataclass(frozen=True)
class _Pointer:
    """CHECKPOINT_POINTER's content (rule 2)."""

    url: str  # without its password
    run: str


def _read_pointer(run_dir: Path) -> _Pointer | None:
    path = run_dir / CHECKPOINT_POINTER
    try:
        body = orjson.loads(path.read_bytes())
        return _Pointer(url=str(body["url"]), run=str(body["run"]))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise CheckpointError(
            f"{path}: cannot be read ({error}); it names the database this run's checkpoints are in"
        ) from None


def _same_database(a: str, b: str) -> bool:
    first, second = urlsplit(a), urlsplit(b)
    return (first.username, first.hostname, first.port, first.path) == (
        second.username,
        second.hostname,
        second.port,
        second.path,
    )


def _with_password(url: str, chosen: str | None) -> str:
    """The URL to connect to the run's database `url` with: the setting's, when it names that
    database (its password with it), else `url` itself (libpq takes PGPASSWORD or ~/.pgpass)."""
    return chosen if chosen is not None and _same_database(chosen, url) else url


def _run_store_place(run_dir: Path, may_create: bool) -> tuple[str, str] | None:
    """(URL, run key) when the run's checkpoints are in PostgreSQL, None for SQLite (rules 1-3)."""
    chosen = chosen_store()
    pointer = _read_pointer(run_dir)
    if pointer is not None:
        if chosen is not None and not _same_database(chosen, pointer.url):
            raise CheckpointError(
                f"{run_dir}: this run's checkpoints are in {pointer.url}, and {STORE_VARIABLE} names "
                f"{postgres.shown(chosen)}; fix: unset it (or give the run's database) to resume the run"
            )
        return _with_password(pointer.url, chosen), pointer.run
    if chosen is None:
        return None
    if (run_dir / CHECKPOINT_FILE).exists():
        raise CheckpointError(
            f"{run_dir}: this run's checkpoints are in {run_dir / CHECKPOINT_FILE}, and {STORE_VARIABLE} names "
            f"{postgres.shown(chosen)}; fix: unset {STORE_VARIABLE} to resume the run where it was started"
        )
    if not may_create:
        return None  # no store anywhere: SQLite's open says so
    return chosen, _made_pointer(
        run_dir, _Pointer(postgres.shown(chosen), f"{run_dir.name}-{uuid.uuid4().hex[:12]}")
    ).run


def _made_pointer(run_dir: Path, pointer: _Pointer) -> _Pointer:
    """`pointer` written whole (only one writer's is ever there), or the one another process wrote first."""
    if write_first(run_dir / CHECKPOINT_POINTER, orjson.dumps({"url": pointer.url, "run": pointer.run})):
        return pointer
    found = _read_pointer(run_dir)
    assert found is not None
    return found


def open_run_store(
    run_dir: Path,
    meta: CheckpointMeta | None = None,
    *,
    accept: Collection[str] = (),
    create: bool = True,
    numbered_after: int = 0,
    continuation: bool = True,
) -> CheckpointStore:
    """The run's store, opened to write with `meta` (made if `create`, refusing another configuration
    unless `accept` names the field: rule 5) or to read without one (`continuation=False`: no key
    needed, no state rebuilt). `numbered_after`: a store made anew numbers its checkpoints on (rule 10)."""
    place = _run_store_place(run_dir, may_create=create and meta is not None)
    if place is None:
        return SQLiteCheckpointStore(
            run_dir / CHECKPOINT_FILE,
            meta,
            accept=accept,
            create=create,
            numbered_after=numbered_after,
            continuation=continuation,
        )
    url, run = place
    return postgres.PostgresCheckpointStore(
        url, run, meta, accept=accept, create=create, numbered_after=numbered_after, continuation=continuation
    )


@dataclass
class Pruned:
    """What `prune_runs` did: the run folders whose checkpoints it deleted, what it deleted (files, or
    a database's rows of a run), and the databases it could not reach, each named with why."""

    run_dirs: list[Path] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def prune_runs(runs_dir: Path, older_than: timedelta) -> Pruned:
    """Delete the checkpoints of the runs in `runs_dir` (and a sweep's further down) whose last
    checkpoint is older than `older_than`, wherever each run keeps them: its SQLite store's files
    (prune.py), or its rows in the database its CHECKPOINT_POINTER names. A run a writer holds is
    left alone; a database that cannot be reached, or a pointer that cannot be read, is a problem
    named in the result, and the other runs are pruned all the same."""
    pruned = Pruned()
    for path in prune_files(runs_dir, older_than):
        pruned.deleted.append(str(path))
        if path.name == CHECKPOINT_FILE:
            pruned.run_dirs.append(path.parent)
    by_database: dict[str, dict[str, Path]] = {}  # url -> run key -> its folder
    for folder in run_folders(runs_dir):
        try:
            pointer = _read_pointer(folder)
        except CheckpointError as error:
            pruned.problems.append(str(error))
            continue
        if pointer is not None:
            by_database.setdefault(pointer.url, {})[pointer.run] = folder
    chosen = chosen_store()
    for url, runs in by_database.items():
        try:
            deleted = postgres.prune(_with_password(url, chosen), older_than, runs)
        except CheckpointError as error:
            pruned.problems.append(f"{error}; the checkpoints of {len(runs)} run(s) there were not pruned")
            continue
        pruned.run_dirs += [runs[run] for run in deleted]
        pruned.deleted += [f"{url} run {run}" for run in deleted]
    return pruned


def set_aside_run_store(run_dir: Path) -> str:
    """Rule 10: the run's damaged store moved aside under its writer's lock; the name it has now."""
    place = _run_store_place(run_dir, may_create=False)
    if place is None:
        return set_aside_file(run_dir / CHECKPOINT_FILE).name
    return postgres.set_aside(*place)
