"""The checkpoint store: every accepted turn made durable, in the four layers of a checkpoint, kept apart.

A run that dies must be able to go on from its last accepted turn. Restoring state is not replaying
history: a checkpoint keeps the facts apart from the representations of them (the seed's "checkpoint
layers"), and only the first three layers are needed to resume correctly; the fourth is an
optimization, never the sole basis of recovery.

Rules:
1. Layers. A checkpoint holds the durable facts (accepted actions, tool side effects and their
   receipts, user constraints: append-only JSON objects the caller gives and the store never
   interprets), the workflow cursor (one JSON object per checkpoint, written whole, so the caller keeps
   it small and puts what grows in the facts), the conversation projection and the model-specific
   continuation (the RuntimeState). Each is kept apart: the continuation in a table of its own, the
   cursor and the facts it added (a JSON array) in one row per checkpoint, so that a commit writes two
   rows, not one per record: each table a commit touches is another page written to the WAL. The
   projection (append-only normalized events) is the run's events.jsonl, stored once: a checkpoint
   keeps where it reaches in that log (the last event's number) and the SHA-256 of the log's bytes
   through it, so a resume reads the projection from the log and knows it for the one committed; a
   log cut or altered under a checkpoint is refused, never read as history (turnstate/durable/resume.py). A copy
   of the events in the store was the run folder's largest duplicate (224 KB of a 300-turn run's 1.5 MB).
2. One transaction per `commit`: a checkpoint is in the store whole or not at all. Everything a commit
   writes is encoded before the transaction begins, so a bad input raises with nothing written. A
   commit of one row (no continuation, no new meta: every commit of a keyless run) is one INSERT,
   which SQLite runs as a transaction of its own; BEGIN and COMMIT around it would cost the commit
   two more statements and a second take of the database's locks.
3. Continuation deltas. The RuntimeState is stored as a delta from the previous checkpoint's state
   when it extends that state (each list in its payload, `items` above all, keeps the old list as its
   prefix, and the turn spans likewise): the appended elements, and the payload values and envelope
   fields that changed, whole. It is a snapshot when it does not extend it (a trim, a compaction, a
   model switch rebuilt it), when there is no previous state in memory (the first commit after an
   open that did not call `latest`), and when the chain since the last snapshot holds more replaced
   bytes (values and fields written again whole) than the state it rebuilds (the snapshot plus what
   was appended since): then rebuilding reads at most about twice the state, and each snapshot is paid
   for by at least as many bytes of deltas before it, so the bytes stay linear in the run.
   Why not a snapshot every N checkpoints: a state that only grows (a wide window, no compaction) is
   O(turns) bytes, so snapshots every N turns would write O(turns^2 / N) bytes, the square this store
   exists to avoid; a chain of appends is already as cheap to rebuild as a snapshot of its end state.
   In a real run the snapshots come from trims and compactions, at the window's size.
4. `latest()` rebuilds the newest checkpoint exactly: the RuntimeState equal to the one committed, and
   its JSON identical; all facts, in order; the cursor; the projection's mark. A record that cannot be read (not
   JSON, a chain that does not start at a snapshot, a continuation that fails authentication) is a
   CheckpointError naming the file, never a traceback and never a silently fresh state.
5. Meta. A store records its CheckpointMeta (the RuntimeState's schema version, the adapter id and
   version, the strategy and the profile's digest) when it is created. A writer opening an existing
   store passes its own meta, and every difference refuses the open, named ("adapter_id: was
   openai.responses.v1, now anthropic.messages.v1"), unless the caller accepts that field (`accept`,
   the seam a model switch uses): the new meta is then recorded with the next commit, which is a
   snapshot (the new adapter's state does not extend the old one's). The store's own table layout is
   SQLite's `user_version`, and its `application_id` tells a checkpoint store from any other database.
6. Encryption at rest, of the continuation layer (the provider's opaque state: encrypted reasoning,
   signatures, compaction items), by default, so that a resume is exact by default: without the
   continuation a resume rebuilds the state from the projection, and a reasoning model forgets what
   only its sealed reasoning held (a keyless continuous_conversation run SIGKILLed after 30 steps and
   resumed lost a 12-level game it wins uninterrupted in 86 actions). The key (`chosen_key`):
   TURNSTATE_CHECKPOINT_KEY when it is set (a cluster sets the same value on every host, so a run
   resumes wherever it is retried); else the user's key file, KEY_FILE in the state folder
   (turnstate/durable/state_home.py, beside the local provider's services), 32 random bytes made owner-only on
   first use; `TURNSTATE_CHECKPOINT_KEY=off` opts out (the continuation is not kept). Key format: any
   string of at least MIN_KEY_CHARS characters, used as its UTF-8 bytes (generate one with
   `python -c "import secrets; print(secrets.token_urlsafe(32))"`); scrypt (n=2^15, r=8, p=1, about
   0.2 s per open) with a random per-database salt derives the AES-256-GCM key from a key given, so a
   passphrase is slow to guess and the same variable gives every store its own key; the key file's
   random bytes need no stretching, so HKDF-SHA256 with the salt derives it (microseconds a run). Each record has a fresh random
   96-bit nonce, and its associated data binds it to its store, its checkpoint and its kind, so a
   record moved to another row fails as a tampered one. A check record written at creation tells a
   wrong key at open. An encrypted store opened without the key, or with another, and a plain store
   opened to write with the variable set (its user expects encryption), are CheckpointErrors saying
   what to do; a plain store opened with the key file's key is resumed plain (it was started keyless
   or opted out). The facts, the cursor and
   the projection are plain, like the run's artifacts, under the same owner-only permissions.
7. Permissions. The database is created owner-only (0600) with O_CREAT | O_EXCL before SQLite opens
   it, so there is no moment it is readable by others; SQLite gives its -wal and -shm files the
   database's mode. The folder must be owned by the user and owner-only (0700), checked at every
   open: in a folder others may write, they could plant a -wal file that SQLite would replay into the
   store. An existing database must be a regular file, owned by the user, with no group or other bits.
8. Durability: WAL with synchronous=NORMAL. A commit has reached the WAL file in the operating
   system's cache when `commit` returns, so it survives a kill of the process at any point; a power
   loss or an operating system crash may lose the commits since the last WAL checkpoint (SQLite syncs
   at each one, every 1000 pages by default, a few hundred commits) but never corrupts the store or
   leaves half a commit: the store comes back at an earlier checkpoint, and a side effect performed
   after a lost commit has lost its intent too. Where that matters (real money, real mail),
   `synchronous="FULL"` syncs every commit (bench/checkpoints.py measures what it costs).
9. One writer. A store opened to write (with a meta) holds an exclusive advisory lock on its database
   until `close`: a second run or resume of the same run is refused rather than allowed to interleave
   its turns. A store opened to read (no meta) takes no lock and cannot commit.
10. A damaged store is set aside, never repaired in place: `set_aside` moves it (with its -wal and
   -shm) to a name that says so, under its writer's lock, and a new store made for the same run
   (`numbered_after`, what a resume from the run's records passes) numbers its first checkpoint
   after the ones the run's event log records, so the log's checkpoint events stay in order.
11. Compression. Each record of the cursor, the facts and the continuation is stored as raw DEFLATE
   with the plain bytes of the record before it in its layer as the preset dictionary (a snapshot
   stands alone), and sealed after that (ciphertext does not compress): what a turn repeats of the
   last (the cursor's names and most of its counts, a frame that changed in a few cells) costs a few
   bytes. `latest()` reads every cursor and facts record (about 50 bytes each) and the continuation
   from its snapshot, in order, so each record's dictionary is at hand. A writer that did not call
   it packs its first records alone, as it snapshots the state: a record packed with no dictionary
   inflates the same with any. At 1000 turns of a growing history, the store's three layers
   went from 1038 KB to 125 KB. A record that does not inflate is damage (DamagedStore).

`prune(runs_dir, older_than)` deletes the stores of the runs whose last checkpoint is older than that:
the run folders in `runs_dir`, and those a sweep's folder holds further down (PRUNE_DEPTH).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import secrets
import sqlite3
import stat
import time
import zlib
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, Final, Literal, Protocol, runtime_checkable

import orjson
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt
from pydantic import ValidationError

from turnstate.adapters.private_files import private_problem
from turnstate.durable.layout import CHECKPOINT_FILE, damaged_name
from turnstate.durable.state_home import state_home
from turnstate.strategies.state import SCHEMA_VERSION, RuntimeState, TurnSpan

KEY_VARIABLE: Final = "TURNSTATE_CHECKPOINT_KEY"
OPT_OUT: Final = "off"  # TURNSTATE_CHECKPOINT_KEY=off: the continuation is not kept
KEY_FILE: Final = "checkpoint.key"  # in the state folder: the default key, made on first use
MIN_KEY_CHARS: Final = 16
LAYOUT_VERSION: Final = 3  # the tables below; SQLite's user_version (2: the projection is a mark into
# events.jsonl; 3: records compressed, rule 11)
APPLICATION_ID: Final = 0x7473636B  # "tsck": SQLite's application_id, at offset 68 of the file
SQLITE_MAGIC: Final = b"SQLite format 3\x00"
_SCRYPT: Final = {"n": 2**15, "r": 8, "p": 1}
_KEY_CHECK: Final = b"turnstate checkpoint key check"
_NONCE_BYTES: Final = 12
_DEFLATE_LEVEL: Final = 6
_DICTIONARY_BYTES: Final = 32 * 1024  # DEFLATE's window: a dictionary's bytes before its last 32 KiB are never used
_ENVELOPE: Final = ("pending", "unanswered", "unread_turn", "completed_context_tokens")
_IDENTITY: Final = ("schema_version", "adapter_id", "strategy")  # a change of one is a new state: a snapshot

_TABLES: Final = """
CREATE TABLE store (name TEXT PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID;
CREATE TABLE meta (since INTEGER PRIMARY KEY, body BLOB NOT NULL);
CREATE TABLE checkpoints (
    seq INTEGER PRIMARY KEY, at REAL NOT NULL, cursor BLOB NOT NULL, facts BLOB,
    events_through INTEGER NOT NULL, events_digest BLOB NOT NULL
);
CREATE TABLE continuation (
    seq INTEGER PRIMARY KEY, snapshot INTEGER NOT NULL, grown INTEGER NOT NULL, body BLOB NOT NULL
);
CREATE INDEX continuation_snapshots ON continuation (seq) WHERE snapshot = 1;
"""


class CheckpointError(Exception):
    """A checkpoint store that cannot be opened, written or read as asked; the message names the file
    and what to do."""


class DamagedStore(CheckpointError):
    """A store that cannot be read whole: missing, never initialized, truncated, corrupt or altered.
    What a resume from the run's records (rule 10) may set aside; every other CheckpointError (a
    wrong key, another configuration, another writer) is a mistake to fix, not damage."""


@dataclass(frozen=True)
class CheckpointMeta:
    """What a store's checkpoints belong to. A resume with another value of a field is refused unless
    the caller accepts that field (rule 5)."""

    adapter_id: str
    adapter_version: str
    strategy: str
    profile_digest: str
    # The SHA-256 of the session's system prompt, fixed within a session as its model is: a resume
    # under another one is refused, a switch may change it. Empty: a store written before it was kept.
    system_prompt_digest: str = ""
    schema_version: int = SCHEMA_VERSION  # the RuntimeState's

    def differences(self, now: CheckpointMeta, accept: Collection[str] = ()) -> list[str]:
        """Each field whose value differs in `now` and is not accepted: "field: was X, now Y"."""
        return [
            f"{name}: was {getattr(self, name)}, now {getattr(now, name)}"
            for name in (f.name for f in fields(self))
            if name not in accept and getattr(self, name) != getattr(now, name)
        ]


SWITCHABLE: Final = frozenset({"adapter_id", "adapter_version", "strategy", "profile_digest", "system_prompt_digest"})


@dataclass(frozen=True)
class ProjectionMark:
    """How far into the run's event log a checkpoint's projection reaches (rule 1): the last event's
    number, and the SHA-256 of the log's bytes through that event's line."""

    through: int = 0  # 0: no event yet
    digest: bytes = hashlib.sha256().digest()  # of no bytes


@dataclass(frozen=True)
class Checkpoint:
    """What one commit adds: the cursor, the state and the projection's mark as they are now, and the
    facts recorded since the previous commit (not all of them: that layer is append-only)."""

    cursor: Mapping[str, Any]
    state: RuntimeState | None  # None: the continuation is not kept (the caller's policy)
    facts: Sequence[Mapping[str, Any]] = ()
    projection: ProjectionMark = ProjectionMark()


@dataclass(frozen=True)
class RestoredCheckpoint:
    """The newest checkpoint, rebuilt: every fact the store holds, in order, and the projection's mark."""

    sequence: int  # the newest checkpoint's number, from 1
    meta: CheckpointMeta  # the meta its state belongs to
    cursor: dict[str, Any]
    state: RuntimeState | None  # None: no checkpoint up to it kept a continuation
    facts: tuple[dict[str, Any], ...]
    projection: ProjectionMark


@runtime_checkable
class CheckpointStore(Protocol):
    """Where a run's checkpoints are kept. SQLite in the run folder is the one backend; a server
    database for runs spread over many machines would implement the same four calls (PostgreSQL: a
    transaction per commit as here, an advisory lock per run for the one writer, bytea for the sealed
    records, and one database to back up instead of a file per run)."""

    @property
    def meta(self) -> CheckpointMeta: ...

    def commit(self, checkpoint: Checkpoint) -> int: ...

    def latest(self) -> RestoredCheckpoint | None: ...

    def close(self) -> None: ...


@dataclass
class _Deflated:
    """One layer's records as raw DEFLATE, each with the record before it as its dictionary (rule 11).
    `previous` is the plain bytes of the layer's last record: `packed` and `unpacked` do not move it,
    `advance` does, once the record is committed or read."""

    previous: bytes = b""

    def packed(self, plain: bytes, alone: bool = False) -> bytes:
        packer = zlib.compressobj(_DEFLATE_LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS, zdict=b"" if alone else self.previous)
        return packer.compress(plain) + packer.flush()

    def unpacked(self, blob: bytes, alone: bool = False) -> bytes:
        """The plain bytes; raises zlib.error for a record that does not inflate whole."""
        unpacker = zlib.decompressobj(-zlib.MAX_WBITS, zdict=b"" if alone else self.previous)
        plain = unpacker.decompress(blob) + unpacker.flush()
        if not unpacker.eof or unpacker.unused_data:
            raise zlib.error("the record is cut or has bytes past its end")
        return plain

    def advance(self, plain: bytes) -> None:
        self.previous = plain[-_DICTIONARY_BYTES:]


@dataclass
class _Chain:
    """The continuation rows since the last snapshot, by size (what rule 3's snapshot choice reads),
    and the last one's plain bytes (the next one's dictionary, rule 11)."""

    snapshot: int = 0  # bytes of the last snapshot
    grown: int = 0  # bytes of elements appended since
    replaced: int = 0  # bytes of values and fields written again whole since
    deflated: _Deflated = field(default_factory=_Deflated)

    def wants_snapshot(self, grown: int, replaced: int) -> bool:
        return self.replaced + replaced > self.snapshot + self.grown + grown

    def add(self, snapshot: bool, grown: int, body: bytes) -> None:
        size = len(body)
        if snapshot:
            self.snapshot, self.grown, self.replaced = size, 0, 0
        else:
            self.grown, self.replaced = self.grown + grown, self.replaced + size - grown
        self.deflated.advance(body)


@dataclass
class _Cipher:
    """AES-256-GCM with this store's derived key; the associated data binds a record to its place."""

    store_id: bytes
    aead: AESGCM = field(repr=False)

    def seal(self, data: bytes, where: bytes) -> bytes:
        nonce = os.urandom(_NONCE_BYTES)
        return nonce + self.aead.encrypt(nonce, data, self.store_id + where)

    def open(self, blob: bytes, where: bytes) -> bytes:
        return self.aead.decrypt(blob[:_NONCE_BYTES], blob[_NONCE_BYTES:], self.store_id + where)


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
        self._key = ChosenKey(key, "the key given", given=True) if key is not None else chosen_key(create=self._writer)
        key = self._key.key
        if key is not None:
            _checked_key(key)  # before anything is made
        try:
            _check_folder(self.path.parent)
            self._connection = self._connect(meta is not None and create)
            self._cipher = self._initialized(meta, key) if self._is_empty() else self._unlocked(key)
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
        row, body = (
            (None, b"")  # nothing to add to the continuation
            if state is None or state is self._previous
            else self._continuation_row(sequence, state)
        )
        packed_facts = None if facts is None else self._facts.packed(facts)
        statements = self._statements(sequence, self._cursors.packed(cursor), packed_facts, checkpoint.projection, row)
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
                    cursors.advance(cursor := self._inflated(cursors, packed_cursor, "cursor"))
                    if packed_facts is not None:
                        added.advance(plain_facts := self._inflated(added, packed_facts, "facts"))
                        facts.extend(self._decoded(plain_facts, "facts"))
                state, chain = (
                    self._rebuilt_state(connection, sequence) if self._reads_continuation else (None, _Chain())
                )
                metas = self._read_metas()
        except sqlite3.DatabaseError as error:
            raise DamagedStore(f"{self.path}: the checkpoints cannot be read: {error}") from None
        restored = RestoredCheckpoint(
            sequence=sequence,
            meta=[meta for since, meta in metas if since <= sequence][-1],
            cursor=self._decoded(cursor, "cursor"),
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

    def _statements(
        self,
        sequence: int,
        cursor: bytes,
        facts: bytes | None,
        projection: ProjectionMark,
        continuation: tuple[int, int, int, bytes] | None,
    ) -> list[tuple[str, tuple[object, ...]]]:
        """One checkpoint's rows, as the statements that write them."""
        statements: list[tuple[str, tuple[object, ...]]] = []
        if self._pending_meta is not None:
            statements.append(("INSERT INTO meta VALUES (?, ?)", (sequence, orjson.dumps(asdict(self._pending_meta)))))
        statements.append(
            (
                "INSERT INTO checkpoints VALUES (?, ?, ?, ?, ?, ?)",
                (sequence, time.time(), cursor, facts, projection.through, projection.digest),
            )
        )
        if continuation is not None:
            statements.append(("INSERT INTO continuation VALUES (?, ?, ?, ?)", continuation))
        return statements

    def _continuation_row(self, sequence: int, state: RuntimeState) -> tuple[tuple[int, int, int, bytes], bytes]:
        """((sequence, snapshot, grown bytes, record), the body before compression and sealing): a delta
        when rule 3 allows one, else a snapshot."""
        delta = None if self._previous is None else continuation_delta(self._previous, state)
        if delta is not None:
            body = _encode(delta)
            grown = len(body) - len(_encode({name: value for name, value in delta.items() if name != "append"}))
            if not self._chain.wants_snapshot(grown, len(body) - grown):
                return (sequence, 0, grown, self._sealed(body, sequence, snapshot=False)), body
        body = _encode(snapshot_of(state))
        return (sequence, 1, len(body), self._sealed(body, sequence, snapshot=True)), body

    def _sealed(self, body: bytes, sequence: int, snapshot: bool) -> bytes:
        record = self._chain.deflated.packed(body, alone=snapshot)
        return record if self._cipher is None else self._cipher.seal(record, _record_place(sequence, snapshot))

    # -- reading ------------------------------------------------------------------------------------

    def _rebuilt_state(self, connection: sqlite3.Connection, newest: int) -> tuple[RuntimeState | None, _Chain]:
        """The state of checkpoint `newest`, from the last snapshot up to it and the deltas after that
        snapshot, and that chain's sizes; None when no checkpoint up to it kept a continuation."""
        (start,) = connection.execute(
            "SELECT max(seq) FROM continuation WHERE snapshot = 1 AND seq <= ?", (newest,)
        ).fetchone()
        (kept,) = connection.execute("SELECT count(*) FROM continuation WHERE seq <= ?", (newest,)).fetchone()
        if not kept:
            return None, _Chain()
        rows = connection.execute(
            "SELECT seq, snapshot, grown, body FROM continuation WHERE seq BETWEEN ? AND ? ORDER BY seq",
            (start or 0, newest),
        ).fetchall()
        if not rows or not rows[0][1]:
            raise DamagedStore(f"{self.path}: the continuation does not start at a snapshot: the store is corrupt")
        state: dict[str, Any] = {}
        chain = _Chain()
        for sequence, snapshot, grown, blob in rows:
            packed = self._unsealed(blob, sequence, bool(snapshot))
            body = self._inflated(chain.deflated, packed, "continuation", alone=bool(snapshot))
            record = self._decoded(body, "continuation")
            try:
                state = record if snapshot else apply_delta(state, record)
            except (KeyError, TypeError, AttributeError):
                raise DamagedStore(
                    f"{self.path}: continuation record {sequence} does not apply: the store is corrupt"
                ) from None
            chain.add(bool(snapshot), grown, body)
        try:
            turns = [TurnSpan(start=first, end=end) for first, end in state["turns"]]
            return RuntimeState.model_validate({**state, "turns": turns}), chain
        except (ValidationError, KeyError, TypeError, ValueError) as error:
            raise DamagedStore(f"{self.path}: the continuation does not rebuild a valid state: {error}") from None

    def _unsealed(self, blob: bytes, sequence: int, snapshot: bool) -> bytes:
        if self._cipher is None:
            return blob
        try:
            return self._cipher.open(blob, _record_place(sequence, snapshot))
        except InvalidTag:
            raise DamagedStore(
                f"{self.path}: continuation record {sequence} fails authentication: it was altered or damaged "
                "after it was written, so the continuation cannot be trusted"
            ) from None

    def _inflated(self, deflated: _Deflated, record: bytes, layer: str, alone: bool = False) -> bytes:
        """A record's plain bytes, inflated with its layer's dictionary (rule 11)."""
        try:
            return deflated.unpacked(record, alone)
        except zlib.error as error:
            raise DamagedStore(
                f"{self.path}: a record of the {layer} does not inflate ({error}): the store is corrupt"
            ) from None

    def _decoded(self, blob: bytes, layer: str) -> Any:
        try:
            return _decode(blob)
        except (ValueError, TypeError):
            raise DamagedStore(f"{self.path}: a record of the {layer} is not JSON: the store is corrupt") from None

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
            raise CheckpointError(
                f"{self.path}: the checkpoint store has layout {layout}, and this turnstate reads layout "
                f"{LAYOUT_VERSION}; fix: resume the run with the turnstate that started it"
            )
        return connection

    def _is_empty(self) -> bool:
        """A database with no tables: a store created and killed before its first transaction ended."""
        (tables,) = self._open_connection().execute("SELECT count(*) FROM sqlite_master").fetchone()
        return tables == 0

    def _initialized(self, meta: CheckpointMeta | None, key: str | None) -> _Cipher | None:
        """Create the tables, the store's identity, its encryption and its meta in one transaction: a
        store is whole or an empty database, which the next writer initializes."""
        if meta is None:
            raise DamagedStore(f"{self.path}: the checkpoint store was never initialized (an empty database)")
        store_id = os.urandom(16)
        rows: list[tuple[str, bytes]] = [("id", store_id), ("cipher", b"none")]
        cipher = None
        if key is not None:
            salt = os.urandom(16)
            parameters: dict[str, Any] = {"name": "scrypt", **_SCRYPT} if self._key.given else {"name": "hkdf-sha256"}
            cipher = _Cipher(store_id, AESGCM(_derived(_checked_key(key), salt, parameters)))
            rows = [
                ("id", store_id),
                ("cipher", _CIPHER.encode()),
                ("kdf", orjson.dumps(parameters)),
                ("salt", salt),
                ("key_check", cipher.seal(_KEY_CHECK, b"key check")),
            ]
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

    def _unlocked(self, key: str | None) -> _Cipher | None:
        """The cipher an existing store's continuation is sealed with, checked against its key check
        record, or None for a plain store (rule 6)."""
        if not self._reads_continuation:
            return None
        store = dict(self._open_connection().execute("SELECT name, value FROM store").fetchall())
        if store.get("cipher") == b"none":
            if key is not None and self._writer and self._key.given:
                raise CheckpointError(
                    f"{self.path}: the store was written without encryption, but {KEY_VARIABLE} is set: unset it "
                    "to resume this run (its continuation stays unencrypted), or start a new run to have it encrypted"
                )
            return None
        if store.get("cipher") != _CIPHER.encode():
            raise DamagedStore(f"{self.path}: the store's encryption is not one this turnstate knows: it is corrupt")
        if key is None:
            raise CheckpointError(
                f"{self.path}: the continuation is encrypted, and {self._key.where} holds no key; set {KEY_VARIABLE} "
                f"to the key the run was started with (the variable's, or {KEY_FILE} of the machine it started on)"
            )
        try:
            parameters = orjson.loads(store["kdf"])
            if parameters["name"] == "scrypt" and not 2**10 <= parameters["n"] <= 2**20:
                raise ValueError
            cipher = _Cipher(store["id"], AESGCM(_derived(_checked_key(key), store["salt"], parameters)))
        except (KeyError, ValueError, TypeError):
            raise DamagedStore(
                f"{self.path}: the store's encryption parameters cannot be read: it is corrupt"
            ) from None
        try:
            cipher.open(store["key_check"], b"key check")
        except (InvalidTag, KeyError):
            raise CheckpointError(
                f"{self.path}: {self._key.where} does not hold the key this store was written with; set "
                f"{KEY_VARIABLE} to that key (the variable's, or {KEY_FILE} of the machine the run started on)"
            ) from None
        return cipher

    def _open_connection(self) -> sqlite3.Connection:
        if self._connection is None:
            raise CheckpointError(f"{self.path}: the checkpoint store is closed")
        return self._connection


_LAYERS: Final = "SELECT cursor, facts FROM checkpoints WHERE seq <= ? ORDER BY seq"
_CIPHER: Final = "aes-256-gcm"
_MISSING: Final = object()


# -- the continuation's records (rule 3) ------------------------------------------------------------


def snapshot_of(state: RuntimeState) -> dict[str, Any]:
    """The whole state as one record: its fields, the turn spans as [start, end] pairs."""
    return {
        "schema_version": state.schema_version,
        "adapter_id": state.adapter_id,
        "strategy": state.strategy,
        "payload": state.payload,
        "turns": [(span.start, span.end) for span in state.turns],
        "pending": state.pending,
        "unanswered": state.unanswered,
        "unread_turn": state.unread_turn,
        "completed_context_tokens": state.completed_context_tokens,
    }


def continuation_delta(previous: RuntimeState, state: RuntimeState) -> dict[str, Any] | None:
    """What `state` adds to `previous`, or None when it does not extend it (a snapshot is due).

    The delta holds "append" (per payload list, the elements after the old list, which the new one
    keeps as its prefix), "set" (payload values that are not the same objects as before, whole),
    "drop" (payload keys gone), "order" (the payload's keys, when their order changed), "turns" (the
    spans appended) and the envelope fields that changed. A prefix is compared with ==, which is fast
    on shared objects: an old element replaced by an equal one of another JSON type (1 by 1.0) would
    go unseen, and no adapter does that."""
    if any(getattr(state, name) != getattr(previous, name) for name in _IDENTITY):
        return None
    turns = _appended(previous.turns, state.turns)
    if turns is None:
        return None
    delta: dict[str, Any] = {}
    appended: dict[str, Sequence[Any]] = {}
    changed: dict[str, Any] = {}
    before = previous.payload
    for key, value in state.payload.items():
        old = before.get(key, _MISSING)
        if value is old:
            continue
        if isinstance(value, list) and isinstance(old, list):
            extra = _appended(old, value)
            if extra is None:
                return None
            if extra:
                appended[key] = extra
        else:
            changed[key] = value
    if appended:
        delta["append"] = appended
    if changed:
        delta["set"] = changed
    dropped = [key for key in before if key not in state.payload]
    if dropped:
        delta["drop"] = dropped
    if list(state.payload) != list(before):
        delta["order"] = list(state.payload)
    if turns:
        delta["turns"] = [(span.start, span.end) for span in turns]
    for name in _ENVELOPE:
        if getattr(state, name) != getattr(previous, name):
            delta[name] = getattr(state, name)
    return delta


def apply_delta(state: dict[str, Any], delta: dict[str, Any]) -> dict[str, Any]:
    """`state` (a decoded record, changed in place) with `delta` applied: the inverse of continuation_delta."""
    payload = state["payload"]
    for key in delta.get("drop", ()):
        del payload[key]
    payload.update(delta.get("set", {}))
    for key, elements in delta.get("append", {}).items():
        payload[key].extend(elements)
    if "order" in delta:
        state["payload"] = {key: payload[key] for key in delta["order"]}
    state["turns"].extend(delta.get("turns", ()))
    for name in _ENVELOPE:
        if name in delta:
            state[name] = delta[name]
    return state


def _appended(old: Sequence[Any], new: Sequence[Any]) -> Sequence[Any] | None:
    """The elements `new` adds after `old`, or None when `new` does not keep `old` as its prefix."""
    if new is old:
        return new[:0]
    if len(new) < len(old) or new[: len(old)] != old:
        return None
    return new[len(old) :]


# -- encoding ---------------------------------------------------------------------------------------


def _encode(value: Any) -> bytes:
    """Compact JSON. orjson refuses integers past 64 bits and lone surrogates, which a provider's reply
    may hold; those documents go to the standard encoder, ASCII-only, behind a leading space (still
    JSON), so that `_decode` reads them back with the decoder that keeps their integers exact."""
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError:
        text = json.dumps(value, ensure_ascii=True, allow_nan=False, separators=(",", ":"), default=_fields)
        return b" " + text.encode()


def _fields(value: Any) -> dict[str, Any]:
    """A dataclass record as the standard encoder needs it (orjson encodes one as it is, alike)."""
    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


def _decode(blob: bytes) -> Any:
    return json.loads(blob) if blob[:1] == b" " else orjson.loads(blob)


def _encoded_records(records: Sequence[object], what: str) -> bytes | None:
    """A commit's facts as one JSON array, None when there are none."""
    if not records:
        return None
    objects = [_json_object(record, f"{what} {index}") for index, record in enumerate(records)]
    try:
        return _encode(objects)
    except (TypeError, ValueError):
        for index, record in enumerate(objects):
            _encoded_object(record, f"{what} {index}")  # raises, naming the record
        raise


def _encoded_object(value: Any, what: str) -> bytes:
    try:
        return _encode(_json_object(value, what))
    except (TypeError, ValueError) as error:
        raise CheckpointError(f"{what} is not JSON: {error}") from None


def _json_object(value: Any, what: str) -> Any:
    """A record as the encoder takes it: a dict, a mapping copied to one, or a dataclass instance,
    which orjson encodes as the object of its fields without the copy `asdict` would make."""
    if isinstance(value, dict) or (is_dataclass(value) and not isinstance(value, type)):
        return value
    if isinstance(value, Mapping):
        return dict(value)
    raise CheckpointError(f"{what} must be a JSON object, not {type(value).__name__}")


def _record_place(sequence: int, snapshot: bool) -> bytes:
    """A continuation record's associated data, beside the store's id: its checkpoint and its kind."""
    return sequence.to_bytes(8, "big") + (b"snapshot" if snapshot else b"delta")


# -- keys, permissions, locks -----------------------------------------------------------------------


def _checked_key(key: str) -> bytes:
    if len(key) < MIN_KEY_CHARS:
        raise CheckpointError(
            f"{KEY_VARIABLE} must hold at least {MIN_KEY_CHARS} characters (it holds {len(key)}); generate a key "
            'with: python -c "import secrets; print(secrets.token_urlsafe(32))", or unset it for no encryption'
        )
    return key.encode("utf-8", "surrogatepass")


def _derived(key: bytes, salt: bytes, parameters: Mapping[str, Any]) -> bytes:
    """The AES-256 key, by the store's recorded derivation (rule 6)."""
    if parameters["name"] == "hkdf-sha256":
        return HKDF(algorithm=hashes.SHA256(), length=32, salt=salt, info=b"turnstate checkpoints").derive(key)
    if parameters["name"] != "scrypt":
        raise ValueError(f"unknown key derivation {parameters['name']!r}")
    return Scrypt(salt=salt, length=32, n=parameters["n"], r=parameters["r"], p=parameters["p"]).derive(key)


@dataclass(frozen=True)
class ChosenKey:
    """The key a store is opened with (rule 6), where it came from, and whether it was given (by the
    caller or TURNSTATE_CHECKPOINT_KEY): a given key may be a passphrase, so it is stretched with
    scrypt, and its user expects encryption; the key file's is random, and a default."""

    key: str | None
    where: str  # for messages: what holds the key
    given: bool


def key_file() -> Path:
    return state_home() / KEY_FILE


def chosen_key(*, create: bool) -> ChosenKey:
    """TURNSTATE_CHECKPOINT_KEY if it is set (None for `off`), else the user's key file, made first
    if `create` (a writer) and it is missing (rule 6)."""
    value = os.environ.get(KEY_VARIABLE)
    if value == OPT_OUT:
        return ChosenKey(None, f"{KEY_VARIABLE}={OPT_OUT}", given=True)
    if value is not None:
        return ChosenKey(value, KEY_VARIABLE, given=True)
    path = key_file()
    return ChosenKey(_key_from_file(path, create), str(path), given=False)


def _key_from_file(path: Path, create: bool) -> str | None:
    """The key `path` holds (None when it is missing and not `create`d), checked owner-only. Made
    whole or not at all: written to a temporary file, then linked to its name, which fails if another
    process made it first (then its key is read)."""
    try:
        return _read_key_file(path)
    except FileNotFoundError:
        if not create:
            return None
    folder = path.parent
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = os.stat(folder)
    if info.st_uid != os.geteuid() or info.st_mode & 0o022:  # others could swap the key file for theirs
        raise CheckpointError(f"{folder}: the checkpoint key's folder must be yours and writable by you alone")
    temporary = folder / f".{path.name}.{os.getpid()}.tmp"
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        os.write(descriptor, secrets.token_urlsafe(32).encode() + b"\n")
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
    try:
        os.link(temporary, path)
    except FileExistsError:
        pass  # another run made it first: its key is the one
    finally:
        temporary.unlink()
    return _read_key_file(path)


def _read_key_file(path: Path) -> str:
    info = os.lstat(path)
    problem = private_problem(path, info, folder=False)
    if problem is not None:
        raise CheckpointError(f"{path}: the checkpoint key file {problem}")
    key = path.read_text().strip()
    if len(key) < MIN_KEY_CHARS:
        raise CheckpointError(
            f"{path}: the checkpoint key file holds no key of {MIN_KEY_CHARS} characters or more; fix: delete it "
            f"(a new one is made; runs it sealed then need {KEY_VARIABLE} set to their key)"
        )
    return key


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


# -- retention --------------------------------------------------------------------------------------


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
    for folder in _run_folders(runs, PRUNE_DEPTH):
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


def _run_folders(folder: Path, depth: int) -> Iterator[Path]:
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
            yield from _run_folders(Path(entry.path), depth - 1)


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
