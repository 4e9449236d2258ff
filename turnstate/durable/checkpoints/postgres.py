"""The checkpoint store in a PostgreSQL database (psycopg 3: `pip install -e '.[postgres]'` in
turnstate's checkout): the runs of many hosts in one database, each run's rows under its run key.

Rules (beside the package's, which hold here as for SQLite):
1. Tables. The package's layers, one table each, every row keyed by (run, ...), made by the first
   store to open the database, under a transaction-level advisory lock so that two first opens do not
   race; `turnstate_schema` holds their version (SCHEMA_VERSION). A database of a newer schema is
   refused, naming both versions; an older one is migrated by a writer's open (package rule 13).
2. A commit is one transaction at REPEATABLE READ, as every read is, so a reader sees a checkpoint
   whole while a writer goes on, with synchronous_commit on whatever the server's default: a commit
   has reached the server's WAL on disk when `commit` returns (a server set to synchronous_commit=off
   loses the last commits when it stops at once, which the tests showed). Records are bytea, the
   sealed continuation as it is sealed.
3. One writer per run, across hosts: a writer holds a session-level advisory lock on its run's key for
   as long as its connection lives (the server lets it go when the connection ends: a killed worker
   frees its run at once) and takes the run's lease: a row whose fencing token goes up by one at every
   take, naming its holder (host and pid). A second writer finds the lock taken and is refused, naming
   the holder. Every commit checks, in its transaction, that the lease still holds this writer's
   token: a writer whose connection was lost and whose run another writer took since can never commit
   again (refused, naming who holds the run now).
4. A connection lost mid-run (the server restarted, a network's hiccup) is taken again, with backoff,
   for up to RECONNECT_SECONDS: the lock and the lease are taken again only if nobody took the run
   meanwhile (the token is still this writer's), and a commit whose COMMIT's answer was lost is looked
   up before it is written again, so it is written once. Past that, the commit fails with a
   CheckpointError and the run fails closed with its last checkpoint intact. A server that stops
   answering (hung, or a network that drops packets without a reset) is a lost connection once a
   statement has waited ANSWER_SECONDS for its answer: the connection is closed and taken again as
   above, never waited on for ever. The lost connection's session may still hold the run's lock on
   the server; each session asks the server to probe its client (KEEPALIVES), so it ends within
   about 20 s, and taking the run again waits for that within RECONNECT_SECONDS.
5. URLs. `postgresql://user[:password]@host[:port]/database`, as libpq reads them (also
   `postgres://`); a password may come from the URL, PGPASSWORD or ~/.pgpass. A URL is never written
   or printed with its password (`shown`).
"""

from __future__ import annotations

import hashlib
import os
import socket
import time
from collections.abc import Collection, Iterator, Sequence
from contextlib import closing, contextmanager
from datetime import timedelta
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit, urlunsplit

from turnstate.durable.checkpoints.protocol import CheckpointError, CheckpointMeta, DamagedStore, ProjectionMark
from turnstate.durable.checkpoints.records import CheckpointRows, CommitRows, ContinuationRow, RecordStore
from turnstate.durable.layout import damaged_suffix

if TYPE_CHECKING:
    import psycopg

SCHEMA_VERSION: Final = 1
MIGRATIONS: Final[dict[int, tuple[str, ...]]] = {}  # version -> the statements that make it the next
SCHEMA_LOCK: Final = 0x7473636B_00000000  # the advisory lock key the schema is made under ("tsck")
RECONNECT_SECONDS: Final = 30.0
CONNECT_SECONDS: Final = 10
ANSWER_SECONDS: Final = 30.0  # the longest a statement waits for the server's answer (rule 4)
# The server's probes of a quiet client over TCP (each session's own settings): a client whose network
# went away is found gone within about 11 s + 3 x 3 s, not the system's two hours, and its session's
# lock on the run let go (rule 4).
KEEPALIVES: Final = {"tcp_keepalives_idle": 11, "tcp_keepalives_interval": 3, "tcp_keepalives_count": 3}
SCHEMES: Final = ("postgresql", "postgres")

_TABLES: Final = (
    "CREATE TABLE turnstate_schema (version integer NOT NULL)",
    "CREATE TABLE turnstate_store (run text, name text, value bytea NOT NULL, PRIMARY KEY (run, name))",
    "CREATE TABLE turnstate_meta (run text, since bigint, body bytea NOT NULL, PRIMARY KEY (run, since))",
    """CREATE TABLE turnstate_checkpoints (
        run text, seq bigint, at double precision NOT NULL, cursor bytea NOT NULL, facts bytea,
        events_through bigint NOT NULL, events_digest bytea NOT NULL, PRIMARY KEY (run, seq))""",
    """CREATE TABLE turnstate_continuation (
        run text, seq bigint, snapshot smallint NOT NULL, grown bigint NOT NULL, body bytea NOT NULL,
        lifted smallint NOT NULL, PRIMARY KEY (run, seq))""",
    "CREATE INDEX turnstate_snapshots ON turnstate_continuation (run, seq) WHERE snapshot = 1",
    """CREATE TABLE turnstate_images (
        run text, n bigint, digest text NOT NULL, png bytea NOT NULL, PRIMARY KEY (run, n), UNIQUE (run, digest))""",
    "CREATE TABLE turnstate_leases (run text PRIMARY KEY, token bigint NOT NULL, holder text NOT NULL)",
)
RUN_TABLES: Final = ("store", "meta", "checkpoints", "continuation", "images", "leases")  # turnstate_<name>


def is_postgres_url(text: str) -> bool:
    return urlsplit(text).scheme in SCHEMES


def shown(url: str) -> str:
    """`url` without its password: what may be written in a run folder or printed."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    user = f"{parts.username}@" if parts.username else ""
    port = f":{parts.port}" if parts.port else ""
    return urlunsplit(parts._replace(netloc=f"{user}{host}{port}"))


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        raise CheckpointError(
            "checkpoints in PostgreSQL need psycopg: pip install -e '.[postgres]' in turnstate's checkout"
        ) from None
    return psycopg


@cache
def _answering(psycopg: Any) -> Any:
    """psycopg's Connection whose every wait for the server ends after ANSWER_SECONDS (rule 4): a
    statement's wait has no deadline of its own, and libpq's socket options cannot tell a hung server
    from a slow one (its kernel still acknowledges every packet). The seam is Connection.wait, which
    every statement's round trip goes through (psycopg 3.3, pinned)."""

    class AnsweringConnection(psycopg.Connection):
        def wait(self, gen: Any, *args: Any, **options: Any) -> Any:
            if options.get("timeout") is None and len(args) < 2:
                options["timeout"] = ANSWER_SECONDS
            try:
                return super().wait(gen, *args, **options)
            except psycopg.errors._WaitTimeout:  # the connection is mid-exchange: only closing it is safe
                self.pgconn.finish()
                raise psycopg.OperationalError(f"the database did not answer within {ANSWER_SECONDS:.0f} s") from None

    return AnsweringConnection


def _lock_key(run: str) -> int:
    """The run's advisory lock key: 64 bits of its name's SHA-256, as PostgreSQL's signed bigint."""
    return int.from_bytes(hashlib.sha256(run.encode()).digest()[:8], "big", signed=True)


def connected(url: str) -> psycopg.Connection[Any]:
    """A connection to `url`, its schema made or checked (rule 1); CheckpointError saying why not."""
    psycopg = _psycopg()
    try:
        connection = _answering(psycopg).connect(url, autocommit=True, connect_timeout=CONNECT_SECONDS)
    except psycopg.Error as error:
        raise _NotConnected(f"{shown(url)}: cannot connect to the checkpoint database: {_reason(error)}") from None
    try:
        connection.execute("SET synchronous_commit = on")  # rule 2: whatever the server's default says
        for setting, value in KEEPALIVES.items():  # rule 4: a session whose client is gone ends, and frees its run
            connection.execute(f"SET {setting} = {value}")
        _check_schema(connection, url)  # at READ COMMITTED: it must see what a first open made while it waited
        connection.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
    except BaseException:
        connection.close()
        raise
    return connection


def _check_schema(connection: psycopg.Connection[Any], url: str) -> None:
    with connection.transaction():
        connection.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
        (exists,) = connection.execute("SELECT to_regclass('turnstate_schema') IS NOT NULL").fetchone() or (False,)
        if not exists:
            for statement in _TABLES:
                connection.execute(statement)
            connection.execute("INSERT INTO turnstate_schema VALUES (%s)", (SCHEMA_VERSION,))
            return
        row = connection.execute("SELECT max(version) FROM turnstate_schema").fetchone()
        version = row[0] if row else None
        if version == SCHEMA_VERSION:
            return
        if version is None or version not in MIGRATIONS:
            raise CheckpointError(
                f"{shown(url)}: the checkpoint database has schema {version}, and this turnstate reads schema "
                f"{SCHEMA_VERSION}; fix: use the turnstate that wrote it, or another database"
            )
        while version != SCHEMA_VERSION:
            for statement in MIGRATIONS[version]:
                connection.execute(statement)
            version += 1
            connection.execute("UPDATE turnstate_schema SET version = %s", (version,))


def _reason(error: Exception) -> str:
    """A driver's error as one line, without the connection string it may quote."""
    text = " ".join(str(error).split())
    return text or type(error).__name__


class PostgresCheckpointStore(RecordStore):
    """The checkpoints of run `run` in the database at `url` (see the module's rules). Opened as
    SQLiteCheckpointStore is: to write with a meta, to read without one."""

    def __init__(
        self,
        url: str,
        run: str,
        meta: CheckpointMeta | None = None,
        *,
        accept: Collection[str] = (),
        key: str | None = None,
        create: bool = True,
        continuation: bool = True,
        numbered_after: int = 0,
    ) -> None:
        self.url, self.run = url, run
        self.where = f"{shown(url)} (run {run})"
        self._connection: psycopg.Connection[Any] | None = None
        self._token = 0  # this writer's lease (rule 3)
        super().__init__(meta, accept, key, continuation)
        self._connection = connected(url)
        try:
            if self._writer:
                self._take_lease(self._connection)
            if (meta is None or not create) and self._is_empty():
                raise DamagedStore(f"{self.where}: there is no checkpoint store here")
            self._run_query(lambda: self._open(meta, accept, numbered_after))
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Close the connection: the server lets the run's lock go with it."""
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    # -- the lease (rule 3) -------------------------------------------------------------------------

    def _take_lease(self, connection: psycopg.Connection[Any], token: int | None = None) -> None:
        """Lock the run and take its lease: a new token, or (a connection taken again) `token` again if
        the lease still holds it."""
        _lock_run(connection, self.where, self.run)
        holder = f"{socket.gethostname()} pid {os.getpid()}"
        with connection.transaction():
            if token is None:
                row = connection.execute(
                    "INSERT INTO turnstate_leases VALUES (%s, 1, %s) ON CONFLICT (run) DO UPDATE "
                    "SET token = turnstate_leases.token + 1, holder = excluded.holder RETURNING token",
                    (self.run, holder),
                ).fetchone()
                assert row is not None
                self._token = int(row[0])
            elif self._lease_token(connection) != token:
                raise self._lost_lease(connection)

    def _lease_token(self, connection: psycopg.Connection[Any]) -> int | None:
        row = connection.execute("SELECT token FROM turnstate_leases WHERE run = %s FOR UPDATE", (self.run,)).fetchone()
        return None if row is None else int(row[0])

    def _lost_lease(self, connection: psycopg.Connection[Any]) -> CheckpointError:
        return CheckpointError(
            f"{self.where}: this writer lost the run's lease (now {_holder(connection, self.run)}): another "
            "process resumed the run, so this one may not commit; it stops here"
        )

    # -- the backend's rows (records.RecordStore) ---------------------------------------------------

    def _is_empty(self) -> bool:
        row = self._db().execute("SELECT count(*) FROM turnstate_store WHERE run = %s", (self.run,)).fetchone()
        return row is None or row[0] == 0

    def _create(self, identity: Sequence[tuple[str, bytes]], meta: bytes) -> None:
        connection = self._db()
        with connection.transaction():
            connection.cursor().executemany(
                "INSERT INTO turnstate_store VALUES (%s, %s, %s)", [(self.run, name, value) for name, value in identity]
            )
            connection.execute("INSERT INTO turnstate_meta VALUES (%s, 1, %s)", (self.run, meta))

    def _identity(self) -> dict[str, bytes]:
        rows = self._db().execute("SELECT name, value FROM turnstate_store WHERE run = %s", (self.run,)).fetchall()
        return {name: bytes(value) for name, value in rows}

    def _meta_rows(self) -> list[tuple[int, bytes]]:
        return (
            self._db()
            .execute("SELECT since, body FROM turnstate_meta WHERE run = %s ORDER BY since", (self.run,))
            .fetchall()
        )

    def _newest(self) -> int:
        row = (
            self._db()
            .execute("SELECT coalesce(max(seq), 0) FROM turnstate_checkpoints WHERE run = %s", (self.run,))
            .fetchone()
        )
        return int(row[0]) if row else 0

    def _write(self, rows: CommitRows) -> None:
        psycopg = _psycopg()
        deadline = time.monotonic() + RECONNECT_SECONDS
        while True:
            try:
                self._written(self._db(), rows)
                return
            except psycopg.OperationalError as error:
                if self._connection is not None and not self._connection.closed:
                    raise CheckpointError(
                        f"{self.where}: checkpoint {rows.sequence} was not written: {_reason(error)}"
                    ) from None
                self._reconnect(deadline, f"checkpoint {rows.sequence} was not written: {_reason(error)}")
                if self._committed(rows.sequence):  # its COMMIT went through, its answer was lost (rule 4)
                    return
            except psycopg.Error as error:
                raise CheckpointError(
                    f"{self.where}: checkpoint {rows.sequence} was not written: {_reason(error)}"
                ) from None

    def _written(self, connection: psycopg.Connection[Any], rows: CommitRows) -> None:
        with connection.transaction(), connection.cursor() as cursor:
            if self._lease_token(connection) != self._token:
                raise self._lost_lease(connection)
            run = self.run
            if rows.images:
                cursor.executemany(
                    "INSERT INTO turnstate_images VALUES (%s, %s, %s, %s)",
                    [(run, number, digest, png) for number, digest, png in rows.images],
                )
            if rows.switched_to is not None:
                cursor.execute("INSERT INTO turnstate_meta VALUES (%s, %s, %s)", (run, rows.sequence, rows.switched_to))
            cursor.execute(
                "INSERT INTO turnstate_checkpoints VALUES (%s, %s, %s, %s, %s, %s, %s)",
                (run, rows.sequence, rows.at, rows.cursor, rows.facts, rows.projection.through, rows.projection.digest),
            )
            if rows.continuation is not None:
                cursor.execute(
                    "INSERT INTO turnstate_continuation VALUES (%s, %s, %s, %s, %s, %s)", (run, *rows.continuation)
                )

    def _committed(self, sequence: int) -> bool:
        row = (
            self._db()
            .execute("SELECT 1 FROM turnstate_checkpoints WHERE run = %s AND seq = %s", (self.run, sequence))
            .fetchone()
        )
        return row is not None

    def _reconnect(self, deadline: float, what: str) -> None:
        """Rule 4: a new connection, the run locked again under this writer's token, or CheckpointError.
        The run's lock may still be held by the lost connection's session, which the server ends only
        once it finds its client gone (the keepalives `connected` sets): that is waited for too."""
        self.close()
        pause = 0.1
        while True:
            try:
                connection = connected(self.url)
                try:
                    if self._writer:
                        self._take_lease(connection, self._token)
                except BaseException:
                    connection.close()
                    raise
            except (_NotConnected, RunHeld) as error:  # a lease another writer took is never retried
                if time.monotonic() + pause > deadline:
                    gone = (
                        "the database did not come back" if isinstance(error, _NotConnected) else "the run stayed held"
                    )
                    raise CheckpointError(
                        f"{self.where}: {what}; {gone} within {RECONNECT_SECONDS:.0f} s ({error})"
                    ) from None
                time.sleep(pause)
                pause = min(pause * 2, 2.0)
                continue
            self._connection = connection
            return

    def _read(self, continuation: bool) -> CheckpointRows | None:
        return self._run_query(lambda: self._read_rows(continuation))

    def _read_rows(self, continuation: bool) -> CheckpointRows | None:
        connection, run = self._db(), self.run
        with connection.transaction():
            sequence = self._newest()
            if sequence == 0:
                return None
            row = connection.execute(
                "SELECT events_through, events_digest FROM turnstate_checkpoints WHERE run = %s AND seq = %s",
                (run, sequence),
            ).fetchone()
            assert row is not None
            layers = connection.execute(
                "SELECT cursor, facts FROM turnstate_checkpoints WHERE run = %s AND seq <= %s ORDER BY seq",
                (run, sequence),
            ).fetchall()
            return CheckpointRows(
                sequence=sequence,
                projection=ProjectionMark(int(row[0]), bytes(row[1])),
                layers=[(bytes(cursor), None if facts is None else bytes(facts)) for cursor, facts in layers],
                continuation=self._continuation_rows(connection, sequence) if continuation else (),
                metas=self._meta_rows(),
            )

    def _continuation_rows(self, connection: psycopg.Connection[Any], newest: int) -> list[ContinuationRow]:
        row = connection.execute(
            "SELECT max(seq) FILTER (WHERE snapshot = 1), count(*) FROM turnstate_continuation "
            "WHERE run = %s AND seq <= %s",
            (self.run, newest),
        ).fetchone()
        if row is None or not row[1]:
            return []
        rows = connection.execute(
            "SELECT seq, snapshot, grown, body, lifted FROM turnstate_continuation "
            "WHERE run = %s AND seq BETWEEN %s AND %s ORDER BY seq",
            (self.run, row[0] or 0, newest),
        ).fetchall()
        return [
            (int(seq), int(snapshot), int(grown), bytes(body), int(lifted))
            for seq, snapshot, grown, body, lifted in rows
        ]

    def _image_numbers(self) -> dict[str, int]:
        rows = self._db().execute("SELECT digest, n FROM turnstate_images WHERE run = %s", (self.run,)).fetchall()
        return {str(digest): int(number) for digest, number in rows}

    def _stored_image(self, number: int) -> tuple[str, bytes] | None:
        def read() -> tuple[str, bytes] | None:
            row = (
                self._db()
                .execute("SELECT digest, png FROM turnstate_images WHERE run = %s AND n = %s", (self.run, number))
                .fetchone()
            )
            return None if row is None else (str(row[0]), bytes(row[1]))

        return self._run_query(read)

    def _run_query(self, query: Any) -> Any:
        """`query()`, a database error turned into a CheckpointError naming the store."""
        psycopg = _psycopg()
        try:
            return query()
        except psycopg.Error as error:
            raise CheckpointError(f"{self.where}: the checkpoints cannot be read: {_reason(error)}") from None

    def _db(self) -> psycopg.Connection[Any]:
        if self._connection is None:
            raise CheckpointError(f"{self.where}: the checkpoint store is closed")
        return self._connection


class RunHeld(CheckpointError):
    """The run's advisory lock is held by another session (rule 3)."""


class _NotConnected(CheckpointError):
    """No connection could be made (rule 4 retries it)."""


def _lock_run(connection: psycopg.Connection[Any], where: str | Path, run: str) -> None:
    """Take `run`'s advisory lock on `connection` (rule 3), or RunHeld naming its holder."""
    (locked,) = connection.execute("SELECT pg_try_advisory_lock(%s)", (_lock_key(run),)).fetchone() or (False,)
    if not locked:
        raise RunHeld(
            f"{where}: another process has this checkpoint store open to write ({_holder(connection, run)}); "
            "wait for it to end"
        )


def _holder(connection: psycopg.Connection[Any], run: str) -> str:
    row = connection.execute("SELECT holder FROM turnstate_leases WHERE run = %s", (run,)).fetchone()
    return f"held by {row[0]}" if row else "its holder is not recorded"


@contextmanager
def _locked_run(url: str, run: str) -> Iterator[psycopg.Connection[Any]]:
    """A connection holding `run`'s advisory lock (rule 3) for the block; CheckpointError when a writer has it."""
    connection = connected(url)
    try:
        _lock_run(connection, f"{shown(url)} (run {run})", run)
        yield connection
    finally:
        connection.close()


def set_aside(url: str, run: str) -> str:
    """Package rule 10: the run's rows moved, in one transaction under its lock, to a run key that says
    they are damaged; that key."""
    aside = run + damaged_suffix()
    with _locked_run(url, run) as connection, connection.transaction():
        for table in RUN_TABLES:
            connection.execute(f"UPDATE turnstate_{table} SET run = %s WHERE run = %s", (aside, run))
    return aside


def prune(url: str, older_than: timedelta, runs: Collection[str] | None = None) -> list[str]:
    """Delete the checkpoints of each run (of `runs`, or all) whose last checkpoint is older than
    `older_than`, leaving those a writer holds; the runs deleted."""
    if older_than <= timedelta(0):
        raise ValueError(f"older_than must be a positive time, not {older_than}")
    cutoff = time.time() - older_than.total_seconds()
    with closing(connected(url)) as connection:
        stale = [
            str(run)
            for run, newest in connection.execute("SELECT run, max(at) FROM turnstate_checkpoints GROUP BY run")
            if newest < cutoff and (runs is None or run in runs)
        ]
    deleted = []
    for run in stale:
        try:
            with _locked_run(url, run) as connection, connection.transaction():
                for table in RUN_TABLES:
                    connection.execute(f"DELETE FROM turnstate_{table} WHERE run = %s", (run,))
        except CheckpointError:
            continue
        deleted.append(run)
    return deleted
