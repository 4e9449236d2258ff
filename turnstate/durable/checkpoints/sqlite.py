"""The checkpoint store in one SQLite database in the run folder: the rules of the package, kept with
SQLite's WAL, locks and permissions (rules 2, 7, 8, 9, 10)."""

from __future__ import annotations

import fcntl
import os
import sqlite3
import time
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any, Final, Literal

import orjson

from turnstate.adapters.private_files import private_problem
from turnstate.durable.checkpoints.cipher import (
    ChosenKey,
    _checked_key,
    _Cipher,
    chosen_key,
    new_cipher,
    opened,
    unlocked,
)
from turnstate.durable.checkpoints.codec import (
    _Chain,
    _decode,
    _Deflated,
    _encode,
    _encoded_object,
    _encoded_records,
    _record_place,
    continuation_delta,
    decoded,
    inflated,
    rebuilt_state,
    snapshot_of,
)
from turnstate.durable.checkpoints.lifted import lifted
from turnstate.durable.checkpoints.protocol import (
    SWITCHABLE,
    Checkpoint,
    CheckpointError,
    CheckpointMeta,
    DamagedStore,
    ProjectionMark,
    RestoredCheckpoint,
)
from turnstate.durable.layout import damaged_name
from turnstate.strategies.state import RuntimeState

LAYOUT_VERSION: Final = 4  # the tables below; SQLite's user_version (2: the projection is a mark into
# events.jsonl; 3: records compressed, rule 11; 4: each image once, rule 12)
MIGRATIONS: Final = {  # layout -> the statements that make it the next, run by a writer's open (rule 13)
    3: (
        "ALTER TABLE continuation ADD COLUMN lifted INTEGER NOT NULL DEFAULT 0",
        "CREATE TABLE images (digest TEXT PRIMARY KEY, png BLOB NOT NULL) WITHOUT ROWID",
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
CREATE TABLE images (digest TEXT PRIMARY KEY, png BLOB NOT NULL) WITHOUT ROWID;
CREATE INDEX continuation_snapshots ON continuation (seq) WHERE snapshot = 1;
"""


class SQLiteCheckpointStore:
    """The checkpoint store in one SQLite database (see the module's rules).

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
        self.path = Path(path)
        self._reads_continuation = continuation or meta is not None
        refused = set(accept) - SWITCHABLE
        if refused:
            raise ValueError(f"a resume may accept another {', '.join(sorted(SWITCHABLE))}, not {sorted(refused)}")
        if synchronous not in ("NORMAL", "FULL"):
            raise ValueError(f"synchronous must be NORMAL or FULL, not {synchronous!r}")
        self._writer = meta is not None
        self._lock: int | None = None
        self._connection: sqlite3.Connection | None = None
        self._cipher: _Cipher | None = None
        self._previous: RuntimeState | None = None  # the last state committed or rebuilt: what a delta extends
        self._chain = _Chain()
        self._cursors, self._facts = _Deflated(), _Deflated()  # the last record of each layer (rule 11)
        self._pending_meta: CheckpointMeta | None = None  # a switch, recorded with the next commit
        self._layout = LAYOUT_VERSION
        self._images: set[str] = set()  # the digests of the images this open knows the store holds (rule 12)
        self._key = ChosenKey(key, "the key given", given=True) if key is not None else chosen_key(create=self._writer)
        key = self._key.key
        if key is not None:
            _checked_key(key)  # before anything is made
        try:
            _check_folder(self.path.parent)
            self._connection = self._connect(meta is not None and create)
            self._cipher = self._initialized(meta) if self._is_empty() else self._unlocked()
            if self._writer:  # after the tables, so the database file's own header names the store (prune reads it)
                self._connection.execute("PRAGMA journal_mode = WAL")
            self._connection.execute(f"PRAGMA synchronous = {synchronous}")  # rule 8
            self._metas = self._read_metas()
            (self._sequence,) = self._connection.execute("SELECT coalesce(max(seq), 0) FROM checkpoints").fetchone()
            if numbered_after and self._sequence == 0:  # rule 10: a store made anew for a run
                self._sequence = numbered_after
        except sqlite3.DatabaseError as error:
            self.close()
            raise DamagedStore(f"{self.path}: not a readable checkpoint store ({error})") from None
        except BaseException:
            self.close()
            raise
        stored = self._metas[-1][1]
        if meta is not None and meta != stored:
            differences = stored.differences(meta, accept)
            if differences:
                self.close()
                raise CheckpointError(
                    f"{self.path}: the checkpoints belong to another configuration: {'; '.join(differences)}"
                )
            self._pending_meta = meta

    # -- the protocol -------------------------------------------------------------------------------

    @property
    def meta(self) -> CheckpointMeta:
        """The meta the next commit's state belongs to."""
        return self._pending_meta or self._metas[-1][1]

    @property
    def switched_from(self) -> CheckpointMeta | None:
        """The meta this open switched away from (an accepted difference), until the next commit."""
        return self._metas[-1][1] if self._pending_meta is not None else None

    @property
    def encrypts_continuation(self) -> bool:
        """Whether the continuation layer is sealed at rest (the store was made with a key)."""
        return self._cipher is not None

    @property
    def sequence(self) -> int:
        """The newest checkpoint's number: as of the open, or of this store's last commit (a reader's
        `latest()` reads the newest there is)."""
        return int(self._sequence)

    def commit(self, checkpoint: Checkpoint) -> int:
        """Write `checkpoint` in one transaction (rule 2) and return its number. Raises CheckpointError,
        with nothing written, for an input the store cannot hold or a write the database refuses."""
        connection = self._open_connection()
        if not self._writer:
            raise CheckpointError(f"{self.path}: opened to read (no meta given); open it with a meta to commit")
        state, meta = checkpoint.state, self.meta
        if state is not None and (state.adapter_id, state.strategy) != (meta.adapter_id, meta.strategy):
            raise CheckpointError(
                f"{self.path}: the state belongs to adapter {state.adapter_id} with strategy {state.strategy}, "
                f"the store's checkpoints to {meta.adapter_id} with {meta.strategy}"
            )
        sequence = self.sequence + 1
        cursor = _encoded_object(checkpoint.cursor, "the cursor")
        facts = _encoded_records(checkpoint.facts, "fact")
        images: dict[str, bytes] = {}
        row, body = (
            (None, b"")  # nothing to add to the continuation
            if state is None or state is self._previous
            else self._continuation_row(sequence, state, images)
        )
        packed_facts = None if facts is None else self._facts.packed(facts)
        statements = _statements(
            sequence, self._cursors.packed(cursor), packed_facts, checkpoint.projection, row, self._pending_meta
        )
        statements[:0] = [
            ("INSERT OR IGNORE INTO images VALUES (?, ?)", (digest, png))
            for digest, png in images.items()
            if digest not in self._images
        ]
        try:
            if len(statements) == 1:  # the usual commit (keyless, no switch): SQLite makes one statement atomic
                connection.execute(*statements[0])
            else:
                with _transaction(connection):
                    for statement in statements:
                        connection.execute(*statement)
        except sqlite3.Error as error:
            raise CheckpointError(f"{self.path}: checkpoint {sequence} was not written: {error}") from None
        if self._pending_meta is not None:
            self._metas.append((sequence, self._pending_meta))
            self._pending_meta = None
        self._cursors.advance(cursor)
        if facts is not None:
            self._facts.advance(facts)
        if row is not None:
            self._chain.add(bool(row[1]), row[2], body)
        self._images.update(images.keys())
        self._sequence = sequence
        if state is not None:
            self._previous = state
        return sequence

    def latest(self) -> RestoredCheckpoint | None:
        """The newest checkpoint, rebuilt (rule 4); None when the store holds none. After it, a commit
        of a state that extends the rebuilt one writes a delta. Its reads are one read transaction: a
        reader sees the newest checkpoint whole while a writer goes on committing."""
        connection = self._open_connection()
        facts: list[dict[str, Any]] = []
        cursors, added = _Deflated(), _Deflated()
        try:
            with _transaction(connection, "BEGIN"):
                (sequence,) = connection.execute("SELECT coalesce(max(seq), 0) FROM checkpoints").fetchone()
                if sequence == 0:
                    return None
                through, digest = connection.execute(
                    "SELECT events_through, events_digest FROM checkpoints WHERE seq = ?", (sequence,)
                ).fetchone()
                for packed_cursor, packed_facts in connection.execute(_LAYERS, (sequence,)):
                    cursors.advance(cursor := inflated(self.path, cursors, packed_cursor, "cursor"))
                    if packed_facts is not None:
                        added.advance(plain_facts := inflated(self.path, added, packed_facts, "facts"))
                        facts.extend(decoded(self.path, plain_facts, "facts"))
                state, chain = (
                    self._rebuilt_state(connection, sequence) if self._reads_continuation else (None, _Chain())
                )
                metas = self._read_metas()
        except sqlite3.DatabaseError as error:
            raise DamagedStore(f"{self.path}: the checkpoints cannot be read: {error}") from None
        restored = RestoredCheckpoint(
            sequence=sequence,
            meta=[meta for since, meta in metas if since <= sequence][-1],
            cursor=decoded(self.path, cursor, "cursor"),
            state=state,
            facts=tuple(facts),
            projection=ProjectionMark(through, digest),
        )
        if self._writer:
            self._cursors, self._facts = cursors, added
            if self._pending_meta is None:
                self._previous, self._chain = state, chain
        return restored

    def close(self) -> None:
        """Close the database (SQLite folds the WAL back into it) and release the writer's lock."""
        if self._connection is not None:
            self._connection.close()
            self._connection = None
        if self._lock is not None:  # after the connection: closing it drops this process's POSIX locks
            os.close(self._lock)
            self._lock = None

    def __enter__(self) -> SQLiteCheckpointStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- writing ------------------------------------------------------------------------------------

    def _continuation_row(
        self, sequence: int, state: RuntimeState, images: dict[str, bytes]
    ) -> tuple[tuple[int, int, int, bytes, int], bytes]:
        """((sequence, snapshot, grown bytes, record, lifted), the body before compression and sealing):
        a delta when rule 3 allows one, else a snapshot; the images it lifts added to `images` (rule 12)."""
        delta = None if self._previous is None else continuation_delta(self._previous, state)
        if delta is not None:
            delta = lifted(delta, images)
            body = _encode(delta)
            grown = len(body) - len(_encode({name: value for name, value in delta.items() if name != "append"}))
            if not self._chain.wants_snapshot(grown, len(body) - grown):
                return (sequence, 0, grown, self._sealed(body, sequence, snapshot=False), 1), body
            images.clear()
        body = _encode(lifted(snapshot_of(state), images))
        return (sequence, 1, len(body), self._sealed(body, sequence, snapshot=True), 1), body

    def _sealed(self, body: bytes, sequence: int, snapshot: bool) -> bytes:
        record = self._chain.deflated.packed(body, alone=snapshot)
        return record if self._cipher is None else self._cipher.seal(record, _record_place(sequence, snapshot))

    # -- reading ------------------------------------------------------------------------------------

    def _rebuilt_state(self, connection: sqlite3.Connection, newest: int) -> tuple[RuntimeState | None, _Chain]:
        """The state of checkpoint `newest` and its chain's sizes (codec.rebuilt_state)."""
        (start,) = connection.execute(
            "SELECT max(seq) FROM continuation WHERE snapshot = 1 AND seq <= ?", (newest,)
        ).fetchone()
        (kept,) = connection.execute("SELECT count(*) FROM continuation WHERE seq <= ?", (newest,)).fetchone()
        if not kept:
            return None, _Chain()
        lifted = "lifted" if self._layout > 3 else "0"
        rows = connection.execute(
            f"SELECT seq, snapshot, grown, body, {lifted} FROM continuation WHERE seq BETWEEN ? AND ? ORDER BY seq",
            (start or 0, newest),
        ).fetchall()
        return rebuilt_state(self.path, rows, self._unsealed, lambda digest: self._image(connection, digest))

    def _image(self, connection: sqlite3.Connection, digest: str) -> bytes | None:
        """The PNG stored under `digest` (rule 12), None when the store lacks it."""
        found = connection.execute("SELECT png FROM images WHERE digest = ?", (digest,)).fetchone()
        if found is not None:
            self._images.add(digest)
        return None if found is None else bytes(found[0])

    def _unsealed(self, blob: bytes, sequence: int, snapshot: bool) -> bytes:
        return blob if self._cipher is None else opened(self.path, self._cipher, blob, sequence, snapshot)

    def _read_metas(self) -> list[tuple[int, CheckpointMeta]]:
        rows = self._open_connection().execute("SELECT since, body FROM meta ORDER BY since").fetchall()
        try:
            metas = [(since, CheckpointMeta(**_decode(body))) for since, body in rows]
        except (ValueError, TypeError) as error:
            raise DamagedStore(f"{self.path}: the store's meta cannot be read ({error}): it is corrupt") from None
        if not metas:
            raise DamagedStore(f"{self.path}: the store records no meta: it is corrupt")
        return metas

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

    def _is_empty(self) -> bool:
        """A database with no tables: a store created and killed before its first transaction ended."""
        (tables,) = self._open_connection().execute("SELECT count(*) FROM sqlite_master").fetchone()
        return tables == 0

    def _initialized(self, meta: CheckpointMeta | None) -> _Cipher | None:
        """Create the tables, the store's identity, its encryption and its meta in one transaction: a
        store is whole or an empty database, which the next writer initializes."""
        if meta is None:
            raise DamagedStore(f"{self.path}: the checkpoint store was never initialized (an empty database)")
        cipher, rows = new_cipher(os.urandom(16), self._key)
        connection = self._open_connection()
        with _transaction(connection):
            for statement in _TABLES.split(";"):
                if statement.strip():
                    connection.execute(statement)
            connection.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            connection.execute(f"PRAGMA user_version = {LAYOUT_VERSION}")
            connection.executemany("INSERT INTO store VALUES (?, ?)", rows)
            connection.execute("INSERT INTO meta VALUES (1, ?)", (orjson.dumps(asdict(meta)),))
        return cipher

    def _unlocked(self) -> _Cipher | None:
        """The cipher an existing store's continuation is sealed with, or None for a plain store."""
        if not self._reads_continuation:
            return None
        store = dict(self._open_connection().execute("SELECT name, value FROM store").fetchall())
        return unlocked(self.path, store, self._key, self._writer)

    def _open_connection(self) -> sqlite3.Connection:
        if self._connection is None:
            raise CheckpointError(f"{self.path}: the checkpoint store is closed")
        return self._connection


_LAYERS: Final = "SELECT cursor, facts FROM checkpoints WHERE seq <= ? ORDER BY seq"


def _statements(
    sequence: int,
    cursor: bytes,
    facts: bytes | None,
    projection: ProjectionMark,
    continuation: tuple[int, int, int, bytes, int] | None,
    switched_to: CheckpointMeta | None,
) -> list[tuple[str, tuple[object, ...]]]:
    """One checkpoint's rows, as the statements that write them: its meta first when it is a switch's."""
    statements: list[tuple[str, tuple[object, ...]]] = []
    if switched_to is not None:
        statements.append(("INSERT INTO meta VALUES (?, ?)", (sequence, orjson.dumps(asdict(switched_to)))))
    statements.append(
        (
            "INSERT INTO checkpoints VALUES (?, ?, ?, ?, ?, ?)",
            (sequence, time.time(), cursor, facts, projection.through, projection.digest),
        )
    )
    if continuation is not None:
        statements.append(("INSERT INTO continuation VALUES (?, ?, ?, ?, ?)", continuation))
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
