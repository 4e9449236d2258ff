"""Records that old code wrote (issue 35): a corpus of killed runs' folders, each with the state a user's
machine kept beside it, and the first request the code that wrote them sent when it resumed them.

An entry is `old_records/<written>/<case>/`:
- `records.tar.xz`: `run/`, the run folder as a run SIGKILLed at a named point left it (its
  checkpoints, events, journals and step records), its SQLite WAL checkpointed into the database
  (what a kill leaves there, in a quarter of the bytes); and `state/`, the user's state folder of
  that run ($XDG_STATE_HOME: the checkpoint key file, the embedded local provider's service, which
  holds its keys and stored conversations);
- `records-postgresql.tar.xz`: the same case played with its checkpoints in PostgreSQL: `runs/` and
  `state/` as above (the run folder's checkpoints.json names the database), and `checkpoints.sql`,
  pg_dump's script of that database's tables (schema and rows), which a test restores in a database
  of its own and points the run folder at;
- `next_request.json`, `next_request-postgresql.json`: the bytes of the first model request a resume
  of each sent (its body, exactly: the two differ only where the provider named things at random,
  as a previous_response_id);
- `entry.json`: the case, the request's path, and the record formats the writing code used.

tests/durable/test_old_records.py resumes every entry with today's code and requires the same bytes.
An entry is never rewritten: a format change gets a migration (the old entries still resume), and a
deliberate change of what a resume sends gets new entries beside the old, which are then retired
together with the code that read them. Write a new set with

    .venv/bin/python -m tests.durable.old_records tests/durable/old_records/<today>
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import tarfile
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2

from tests.harness.test_resume import killed_run
from tests.harness.test_run import with_changes
from tests.postgres_server import binary, new_database, throwaway_server
from turnstate.durable import events
from turnstate.durable.checkpoints import KEY_VARIABLE, postgres, sqlite
from turnstate.durable.checkpoints.stores import STORE_VARIABLE
from turnstate.durable.layout import CHECKPOINT_FILE, CHECKPOINT_POINTER
from turnstate.durable.state_home import STATE_VARIABLE
from turnstate.session.profile import PROFILES_DIR, Profile, load_profile
from turnstate.session.run_profile import run_profile
from turnstate.session.runner import Runner
from turnstate.session.session import Point

CORPUS = Path(__file__).with_name("old_records")
RECORDS = "records.tar.xz"
POSTGRES_RECORDS = "records-postgresql.tar.xz"
FORMATS = {  # what the writing code's records were, kept with each entry
    "events": events.FORMAT,
    "checkpoints_sqlite_layout": sqlite.LAYOUT_VERSION,
    "checkpoints_postgres_schema": postgres.SCHEMA_VERSION,
}
CATALOG_HUNT = {"name": "catalog_hunt", "seed": 4, "options": {}}  # a game played by calling tools


@dataclass(frozen=True)
class Case:
    """A run killed the `count`th time it reached `point`: `profile` (a shipped one) with `changes`."""

    profile: str
    point: Point = "after_commit"
    count: int = 3
    changes: dict[str, dict[str, Any]] = field(default_factory=dict)

    def loaded(self) -> Profile:
        return with_changes(load_profile(PROFILES_DIR / f"{self.profile}.yaml"), **self.changes)


_COMPACTED = ("local-anthropic-continuous", "local-openai-continuous", "local-xai-continuous")
_SUMMARIZED = ("local-openai-harness-summary", "local-gemini-harness-summary", "local-deepseek-continuous")
_PLAIN = ("local-manual-rolling", "local-openai-previous-response-id", "local-open-source-continuous")

CASES: dict[str, Case] = {
    # every adapter and strategy, mid-game, as shipped
    **{name.removeprefix("local-"): Case(name) for name in (*_PLAIN, *_COMPACTED, *_SUMMARIZED)},
    # just after a compaction committed: provider-native, or a harness summary installed
    **{f"{name.removeprefix('local-')}-compacted": Case(name, "after_compaction_commit", 1) for name in _COMPACTED},
    **{f"{name.removeprefix('local-')}-summarized": Case(name, "after_compaction_commit", 1) for name in _SUMMARIZED},
    # a game whose clue must be read with a tool, the calls and results in the conversation
    **{
        f"{name.removeprefix('local-')}-tools": Case(name, "after_commit", 2, {"environment": CATALOG_HUNT})
        for name in (*_PLAIN, *_COMPACTED, *_SUMMARIZED)
    },
}


@contextmanager
def environment(**variables: str | None) -> Iterator[None]:
    """The process's environment with `variables` set (None: unset), as it was afterwards."""
    before = {name: os.environ.get(name) for name in variables}
    try:
        _set(variables)
        yield
    finally:
        _set(before)


def _set(variables: dict[str, str | None]) -> None:
    for name, value in variables.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def killed(case: Case, runs: Path, state: Path, checkpoints: str | None = None) -> Path:
    """The run folder `case` left in `runs`, its state folder `state` (its checkpoints in the
    PostgreSQL database `checkpoints`, if given), played in a forked child that SIGKILLs itself at
    the case's point (test_resume's killed_run)."""
    with environment(**{STATE_VARIABLE: str(state), KEY_VARIABLE: None, STORE_VARIABLE: checkpoints}):
        return killed_run(case.loaded(), runs, case.point, case.count)


@dataclass(frozen=True)
class Request:
    path: str
    body: bytes


def first_request_of_resume(entry: Path, scratch: Path, server: str | None = None) -> tuple[Request, str]:
    """The first model request a resume of `entry`'s records (unpacked in `scratch`) sends, as its
    SDK put it on the wire, and how the resumed run ended. With `server` (a PostgreSQL server's admin
    URL), the records kept in PostgreSQL, restored in a new database there."""
    with tarfile.open(entry / (RECORDS if server is None else POSTGRES_RECORDS)) as records:
        records.extractall(scratch, filter="tar")  # "data" would drop the folders' 0700
    state, (run_dir,) = scratch / "state", (scratch / "runs").iterdir()
    checkpoints = None
    if server is not None:  # the run's database is at another place now: the run folder is told so
        checkpoints = new_database(server, f"resume_{uuid.uuid4().hex[:12]}")
        restore = [binary("psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", checkpoints, "-f", "checkpoints.sql"]
        subprocess.run(restore, cwd=scratch, check=True, capture_output=True)
        pointer = json.loads((run_dir / CHECKPOINT_POINTER).read_bytes())
        (run_dir / CHECKPOINT_POINTER).write_text(json.dumps(pointer | {"url": postgres.shown(checkpoints)}))
    sent: list[Request] = []
    send = httpx2.Client.send

    def recorded(client: httpx2.Client, request: httpx2.Request, **options: Any) -> httpx2.Response:
        sent.append(Request(request.url.path, request.read()))
        return send(client, request, **options)

    httpx2.Client.send = recorded  # type: ignore[method-assign]
    try:
        with environment(**{STATE_VARIABLE: str(state), KEY_VARIABLE: None, STORE_VARIABLE: checkpoints}):
            result = Runner(run_profile(run_dir), run_dir.parent).resume(run_dir)
    finally:
        httpx2.Client.send = send  # type: ignore[method-assign]
    if not sent:
        raise AssertionError(f"{entry}: the resume sent no request ({result.outcome}: {result.failure})")
    return sent[0], result.outcome


def write_entry(name: str, case: Case, into: Path, server: str) -> None:
    """Play `case` on each store, keep what the kills left in `into`, and resume copies of them twice
    each (in this process), keeping the request all four resumes sent first; they must agree, or the
    entry would test nothing."""
    into.mkdir(parents=True)
    with tempfile.TemporaryDirectory() as scratch:
        run_dir = killed(case, Path(scratch) / "runs", Path(scratch) / "state")
        with closing(sqlite3.connect(run_dir / CHECKPOINT_FILE)) as store:
            store.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        for leftover in ("-wal", "-shm"):
            (run_dir / (CHECKPOINT_FILE + leftover)).unlink(missing_ok=True)
        packed(into / RECORDS, Path(scratch))
    with tempfile.TemporaryDirectory() as scratch:
        database = new_database(server, f"corpus_{uuid.uuid4().hex[:12]}")
        killed(case, Path(scratch) / "runs", Path(scratch) / "state", database)
        dump = [binary("pg_dump"), "--no-owner", "--no-privileges", "-f", "checkpoints.sql", "-d", database]
        subprocess.run(dump, cwd=scratch, check=True, capture_output=True)
        packed(into / POSTGRES_RECORDS, Path(scratch), "checkpoints.sql")
    resumed = []
    for store in (None, server):
        with tempfile.TemporaryDirectory() as scratch, tempfile.TemporaryDirectory() as again:
            first, second = (first_request_of_resume(into, Path(folder), store) for folder in (scratch, again))
        if first != second:
            raise RuntimeError(f"{name}: two resumes of the same records sent different requests")
        (into / next_request_name(store)).write_bytes(first[0].body)
        resumed.append(first)
    (request, outcome), (postgres_request, postgres_outcome) = resumed
    if (request.path, outcome) != (postgres_request.path, postgres_outcome):
        raise RuntimeError(f"{name}: the resumes from SQLite and from PostgreSQL went differently")
    entry = {"case": name, "profile": case.profile, "point": case.point, "count": case.count}
    entry |= {"changes": case.changes, "request_path": request.path, "resumed_outcome": outcome, "formats": FORMATS}
    (into / "entry.json").write_text(json.dumps(entry, indent=2) + "\n")


def next_request_name(server: str | None) -> str:
    """The file of the request a resume from SQLite (`server` None) or from PostgreSQL sent first."""
    return "next_request.json" if server is None else "next_request-postgresql.json"


def packed(archive: Path, folder: Path, *also: str) -> None:
    with tarfile.open(archive, "w:xz") as records:
        for name in ("runs", "state", *also):
            records.add(folder / name, name)


def main(folder: str, *names: str) -> None:
    into = Path(folder)
    with throwaway_server() as server:
        for name in names or CASES:
            write_entry(name, CASES[name], into / name, server.url)
        print(name, sum(path.stat().st_size for path in (into / name).iterdir()), "bytes")


if __name__ == "__main__":
    main(*sys.argv[1:])
