"""The checkpoint store in one SQLite database in the run folder: the rules of the package, kept with
SQLite's WAL, locks and permissions (rules 2, 7, 8, 9, 10)."""

from __future__ import annotations

import fcntl
import os
import sqlite3
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Final, Literal

from turnstate.adapters.private_files import private_problem
from turnstate.durable.checkpoints.protocol import CheckpointError, CheckpointMeta, DamagedStore, ProjectionMark
from turnstate.durable.checkpoints.records import CheckpointRows, CommitRows, ContinuationRow, RecordStore
from turnstate.durable.layout import damaged_name

LAYOUT_VERSION: Final = 4  # the tables below; SQLite's user_version (2: the projection is a mark into
# events.jsonl; 3: records compressed, rule 11; 4: each image once, rule 12)
MIGRATIONS: Final = {  # layout -> the statements that make it the next, run by a writer's open (rule 13)
    3: (
        "ALTER TABLE continuation ADD COLUMN lifted INTEGER NOT NULL DEFAULT 0",
        "CREATE TABLE images (n INTEGER PRIMARY KEY, digest TEXT NOT NULL UNIQUE, png BLOB NOT NULL)",
    ),
}
APPLICATION_ID: Final = 0x7473636B  # "tsck": SQLite's application_id, at offset 68 of the file


SQLITE_MAGIC: Final = b"SQLite format 3\x00"


_TABLES: Final = """
CREATE TABLE store (name TEXT PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID;
CREATE TABLE meta (since INTEGER PRIMARY KEY, body BLOB NOT NULL);
CREATE TABLE checkpoints (
    seq INTEGER PRIMARY KEY, at REAL NOT NULL, cursor BLOB NOT NULL, facts BLOB,
    events_through INTEGER NOT NULL, events_digest BLOB NOT NULL
);
CREATE TABLE continuation (
    seq INTEGER PRIMARY KEY, snapshot INTEGER NOT NULL, grown INTEGER NOT NULL, body BLOB NOT NULL,
    lifted INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE images (n INTEGER PRIMARY KEY, digest TEXT NOT NULL UNIQUE, png BLOB NOT NULL);
CREATE INDEX continuation_snapshots ON continuation (seq) WHERE snapshot = 1;
"""


class SQLiteCheckpointStore(RecordStore):
    """The checkpoint store in one SQLite database (see the package's rules).

    `SQLiteCheckpointStore(path, meta)` opens the store to write: it creates it with `meta` (unless
    `create` is False) or opens the existing one, refusing it if its meta differs from `meta` in a field
    `accept` does not name. `SQLiteCheckpointStore(path)` opens an existing store to read. `key` is the
    encryption key; None reads TURNSTATE_CHECKPOINT_KEY. A reader opened with `continuation=False` reads
    the other layers only (`latest()` rebuilds no state), so it needs no key: what checks a run's
    records against its checkpoints opens it so."""

    def __init__(
        self,
        path: Path | str,
        meta: CheckpointMeta | None = None,
        *,
        accept: Collection[str] = (),
        key: str | None = None,
        create: bool = True,
        synchronous: Literal["NORMAL", "FULL"] = "NORMAL",
        continuation: bool = True,
        numbered_after: int = 0,
    ) -> None:
        self.path = self.where = Path(path)
        if synchronous not in ("NORMAL", "FULL"):
            raise ValueError(f"synchronous must be NORMAL or FULL, not {synchronous!r}")
        self._lock: int | None = None
        self._connection: sqlite3.Connection | None = None
        self._layout = LAYOUT_VERSION
        super().__init__(meta, accept, key, continuation)
        try:
            _check_folder(self.path.parent)
            self._connection = self._connect(meta is not None and create)
            self._connection.execute(f"PRAGMA synchronous = {synchronous}")  # rule 8
            self._open(meta, accept, numbered_after)
            if self._writer:  # after the tables, so the database file's own header names the store (prune reads it)
                self._connection.execute("PRAGMA journal_mode = WAL")
        except sqlite3.DatabaseError as error:
            self.close()
            raise DamagedStore(f"{self.path}: not a readable checkpoint store ({error})") from None
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Close the database (SQLite folds the WAL back into it) and release the writer's lock."""
        if self._connection is not None:
            self._connection.close()
            self._connection = None
        if self._lock is not None:  # after the connection: closing it drops this process's POSIX locks
            os.close(self._lock)
            self._lock = None

    # -- the backend's rows (records.RecordStore) ---------------------------------------------------

    def _is_empty(self) -> bool:
        """A database with no tables: a store created and killed before its first transaction ended."""
        (tables,) = self._open_connection().execute("SELECT count(*) FROM sqlite_master").fetchone()
        return bool(tables == 0)

    def _create(self, identity: Sequence[tuple[str, bytes]], meta: bytes) -> None:
        """The tables, the store's identity, its encryption and its meta in one transaction: a store is
        whole or an empty database, which the next writer initializes."""
        connection = self._open_connection()
        with _transaction(connection):
            for statement in _TABLES.split(";"):
                if statement.strip():
                    connection.execute(statement)
            connection.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            connection.execute(f"PRAGMA user_version = {LAYOUT_VERSION}")
            connection.executemany("INSERT INTO store VALUES (?, ?)", identity)
            connection.execute("INSERT INTO meta VALUES (1, ?)", (meta,))

    def _identity(self) -> dict[str, bytes]:
        return dict(self._open_connection().execute("SELECT name, value FROM store").fetchall())

    def _meta_rows(self) -> list[tuple[int, bytes]]:
        return self._open_connection().execute("SELECT since, body FROM meta ORDER BY since").fetchall()

    def _newest(self) -> int:
        (sequence,) = self._open_connection().execute("SELECT coalesce(max(seq), 0) FROM checkpoints").fetchone()
        return int(sequence)

    def _write(self, rows: CommitRows) -> None:
        connection = self._open_connection()
        statements = _statements(rows)
        try:
            if len(statements) == 1:  # the usual commit (keyless, no switch): SQLite makes one statement atomic
                connection.execute(*statements[0])
            else:
                with _transaction(connection):
                    for statement in statements:
                        connection.execute(*statement)
        except sqlite3.Error as error:
            raise CheckpointError(f"{self.path}: checkpoint {rows.sequence} was not written: {error}") from None

    def _read(self, continuation: bool) -> CheckpointRows | None:
        connection = self._open_connection()
        try:
            with _transaction(connection, "BEGIN"):
                sequence = self._newest()
                if sequence == 0:
                    return None
                through, digest = connection.execute(
                    "SELECT events_through, events_digest FROM checkpoints WHERE seq = ?", (sequence,)
                ).fetchone()
                return CheckpointRows(
                    sequence=sequence,
                    projection=ProjectionMark(through, digest),
                    layers=connection.execute(_LAYERS, (sequence,)).fetchall(),
                    continuation=self._continuation_rows(connection, sequence) if continuation else (),
                    metas=self._meta_rows(),
                )
        except sqlite3.DatabaseError as error:
            raise DamagedStore(f"{self.path}: the checkpoints cannot be read: {error}") from None

    def _continuation_rows(self, connection: sqlite3.Connection, newest: int) -> list[ContinuationRow]:
        """The continuation rows from the last snapshot up to checkpoint `newest`."""
        (start,) = connection.execute(
            "SELECT max(seq) FROM continuation WHERE snapshot = 1 AND seq <= ?", (newest,)
        ).fetchone()
        (kept,) = connection.execute("SELECT count(*) FROM continuation WHERE seq <= ?", (newest,)).fetchone()
        if not kept:
            return []
        lifted = "lifted" if self._layout > 3 else "0"
        return connection.execute(
            f"SELECT seq, snapshot, grown, body, {lifted} FROM continuation WHERE seq BETWEEN ? AND ? ORDER BY seq",
            (start or 0, newest),
        ).fetchall()

    def _image_numbers(self) -> dict[str, int]:
        if self._layout < 4:
            return {}
        return dict(self._open_connection().execute("SELECT digest, n FROM images").fetchall())

    def _stored_image(self, number: int) -> tuple[str, bytes] | None:
        try:
            found = self._open_connection().execute("SELECT digest, png FROM images WHERE n = ?", (number,)).fetchone()
        except sqlite3.DatabaseError as error:
            raise DamagedStore(f"{self.path}: the checkpoints cannot be read: {error}") from None
        return None if found is None else (str(found[0]), bytes(found[1]))

    # -- opening ------------------------------------------------------------------------------------

    def _connect(self, may_create: bool) -> sqlite3.Connection:
        """The database, created owner-only if it is missing and `may_create`, checked if it exists
        (rule 7), and locked for a writer (rule 9)."""
        try:
            _check_file(self.path, os.lstat(self.path))
        except FileNotFoundError:
            if not may_create:
                raise DamagedStore(f"{self.path}: there is no checkpoint store here") from None
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
        if self._writer:
            self._lock = _locked(self.path)
        connection = sqlite3.connect(self.path, isolation_level=None)
        self._connection = connection
        (layout,) = connection.execute("PRAGMA user_version").fetchone()
        (application,) = connection.execute("PRAGMA application_id").fetchone()
        if application != APPLICATION_ID and not self._is_empty():
            raise CheckpointError(f"{self.path}: this is an SQLite database, but not a turnstate checkpoint store")
        if application == APPLICATION_ID and layout != LAYOUT_VERSION:
            if layout not in MIGRATIONS:
                raise CheckpointError(
                    f"{self.path}: the checkpoint store has layout {layout}, and this turnstate reads layouts "
                    f"{min(MIGRATIONS)} to {LAYOUT_VERSION}; fix: resume the run with the turnstate that started it"
                )
            self._layout = self._migrated(connection, layout) if self._writer else layout
        return connection

    def _migrated(self, connection: sqlite3.Connection, layout: int) -> int:
        """Rule 13: the store brought from `layout` to this turnstate's, one transaction per step."""
        while layout != LAYOUT_VERSION:
            with _transaction(connection):
                for statement in MIGRATIONS[layout]:
                    connection.execute(statement)
                layout += 1
                connection.execute(f"PRAGMA user_version = {layout}")
        return layout

    def _open_connection(self) -> sqlite3.Connection:
        if self._connection is None:
            raise CheckpointError(f"{self.path}: the checkpoint store is closed")
        return self._connection


_LAYERS: Final = "SELECT cursor, facts FROM checkpoints WHERE seq <= ? ORDER BY seq"


def _statements(rows: CommitRows) -> list[tuple[str, tuple[object, ...]]]:
    """One commit's rows, as the statements that write them: new images and a switch's meta first."""
    statements: list[tuple[str, tuple[object, ...]]] = [
        ("INSERT INTO images VALUES (?, ?, ?)", image) for image in rows.images
    ]
    if rows.switched_to is not None:
        statements.append(("INSERT INTO meta VALUES (?, ?)", (rows.sequence, rows.switched_to)))
    statements.append(
        (
            "INSERT INTO checkpoints VALUES (?, ?, ?, ?, ?, ?)",
            (rows.sequence, rows.at, rows.cursor, rows.facts, rows.projection.through, rows.projection.digest),
        )
    )
    if rows.continuation is not None:
        statements.append(("INSERT INTO continuation VALUES (?, ?, ?, ?, ?)", rows.continuation))
    return statements


def _check_folder(folder: Path) -> None:
    try:
        info = os.stat(folder)
    except FileNotFoundError:
        raise CheckpointError(f"{folder}: the folder for the checkpoints does not exist") from None
    problem = private_problem(folder, info, folder=True)
    if problem is not None:  # others could plant files that SQLite would read
        raise CheckpointError(f"{folder}: the checkpoints' folder {problem}")


def _check_file(path: Path, info: os.stat_result) -> None:
    problem = private_problem(path, info, folder=False)
    if problem is not None:
        raise CheckpointError(f"{path}: the checkpoint store {problem}")


def set_aside(path: Path) -> Path:
    """Rule 10: the store at `path` moved, with its -wal and -shm files, to `<name>.damaged-<UTC time>`
    under its writer's lock (CheckpointError while another process has it open to write); the path
    it was moved to."""
    aside = damaged_name(path)
    lock = _locked(path) if path.exists() else None
    try:
        for suffix in ("", "-wal", "-shm"):
            try:
                os.rename(f"{path}{suffix}", f"{aside}{suffix}")
            except FileNotFoundError:
                continue
    finally:
        if lock is not None:
            os.close(lock)
    return aside


def _locked(path: Path) -> int:
    """A descriptor of `path` holding an exclusive advisory lock (flock, apart from SQLite's own POSIX
    locks), or CheckpointError when another process holds it."""
    descriptor = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(descriptor)
        raise CheckpointError(
            f"{path}: another process has this checkpoint store open to write (a run or a resume of it is still "
            "going); wait for it to end"
        ) from None
    return descriptor


@contextmanager
def _transaction(connection: sqlite3.Connection, begin: str = "BEGIN IMMEDIATE") -> Iterator[None]:
    """A transaction: IMMEDIATE takes the write lock at once (a commit), a plain BEGIN reads."""
    connection.execute(begin)
    try:
        yield
    except BaseException:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")
