"""What every checkpoint store does alike, whatever database holds it: a commit encoded whole before
anything is written (rules 2, 3, 11, 12), the meta checks of an open (rule 5), the continuation sealed
and opened (rule 6), and the newest checkpoint rebuilt from the rows a backend reads (rule 4).

A backend (sqlite.py, postgres.py) is a subclass that opens its database, then calls `_open`, and
gives the few members below that touch it: it writes one commit's rows in one transaction and reads a
checkpoint's rows in one read transaction. The rows are the same in every backend."""

from __future__ import annotations

import os
import time
from collections.abc import Collection, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Self

import orjson

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
from turnstate.strategies.state import RuntimeState

ContinuationRow = tuple[int, int, int, bytes, int]  # (checkpoint, snapshot, grown bytes, sealed record, lifted)


@dataclass(frozen=True)
class CommitRows:
    """One commit's rows, encoded: a backend writes them all in one transaction, or none."""

    sequence: int
    at: float  # the commit's time (seconds since the epoch): what retention reads
    cursor: bytes
    facts: bytes | None
    projection: ProjectionMark
    continuation: ContinuationRow | None
    switched_to: bytes | None  # the meta this commit's state belongs to, when it is a switch's (rule 5)
    images: tuple[tuple[int, str, bytes], ...]  # (number, SHA-256, PNG) of each image new to the store (rule 12)


@dataclass(frozen=True)
class CheckpointRows:
    """A checkpoint's rows as a backend read them in one read transaction."""

    sequence: int
    projection: ProjectionMark
    layers: Sequence[tuple[bytes, bytes | None]]  # (cursor, facts) of every checkpoint up to it, in order
    continuation: Sequence[ContinuationRow]  # from the last snapshot up to it; empty: none kept (or not read)
    metas: Sequence[tuple[int, bytes]]  # (first checkpoint, meta JSON), in order


class RecordStore:
    """A checkpoint store's rules over a backend's rows (see the package's rules). `where` names the
    store in every message: a file, or a database and a run."""

    where: str | Path

    def __init__(
        self, meta: CheckpointMeta | None, accept: Collection[str], key: str | None, continuation: bool
    ) -> None:
        refused = set(accept) - SWITCHABLE
        if refused:
            raise ValueError(f"a resume may accept another {', '.join(sorted(SWITCHABLE))}, not {sorted(refused)}")
        self._writer = meta is not None
        self._reads_continuation = continuation or meta is not None
        self._cipher: _Cipher | None = None
        self._previous: RuntimeState | None = None  # the last state committed or rebuilt: what a delta extends
        self._chain = _Chain()
        self._cursors, self._facts = _Deflated(), _Deflated()  # the last record of each layer (rule 11)
        self._pending_meta: CheckpointMeta | None = None  # a switch, recorded with the next commit
        self._images: dict[str, int] = {}  # the images the store holds: SHA-256 -> number (rule 12)
        self._metas: list[tuple[int, CheckpointMeta]] = []
        self._sequence = 0
        self._key = ChosenKey(key, "the key given", given=True) if key is not None else chosen_key(create=self._writer)
        if self._key.key is not None:
            _checked_key(self._key.key)  # before anything is made

    # -- what a backend gives ---------------------------------------------------------------------

    def _is_empty(self) -> bool:
        """Whether the store was never initialized (a database, or a run, with no store in it yet)."""
        raise NotImplementedError

    def _create(self, identity: Sequence[tuple[str, bytes]], meta: bytes) -> None:
        """Initialize the store in one transaction: its `store` rows (identity, encryption) and first meta."""
        raise NotImplementedError

    def _identity(self) -> dict[str, bytes]:
        """The store's `store` rows."""
        raise NotImplementedError

    def _meta_rows(self) -> Sequence[tuple[int, bytes]]:
        """(first checkpoint, meta JSON) of every meta the store records, in order."""
        raise NotImplementedError

    def _newest(self) -> int:
        """The newest checkpoint's number, 0 for none."""
        raise NotImplementedError

    def _write(self, rows: CommitRows) -> None:
        """Write `rows` in one transaction; CheckpointError, with nothing written, when the database refuses."""
        raise NotImplementedError

    def _read(self, continuation: bool) -> CheckpointRows | None:
        """The newest checkpoint's rows in one read transaction (the continuation's if `continuation`);
        None when the store holds none."""
        raise NotImplementedError

    def _image_numbers(self) -> dict[str, int]:
        """The images the store holds: SHA-256 -> number."""
        raise NotImplementedError

    def _stored_image(self, number: int) -> tuple[str, bytes] | None:
        """(SHA-256, PNG) of the store's image `number`, None when it holds none."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- opening ------------------------------------------------------------------------------------

    def _open(self, meta: CheckpointMeta | None, accept: Collection[str], numbered_after: int) -> None:
        """After the backend connected: initialize the store or unlock it, read its metas and its
        newest number, and check `meta` against the stored one (rule 5)."""
        if self._is_empty():
            if meta is None:
                raise DamagedStore(f"{self.where}: the checkpoint store was never initialized")
            self._cipher, identity = new_cipher(os.urandom(16), self._key)
            self._create(identity, orjson.dumps(asdict(meta)))
        elif self._reads_continuation:
            self._cipher = unlocked(self.where, self._identity(), self._key, self._writer)
        self._metas = _metas(self.where, self._meta_rows())
        self._sequence = self._newest()
        if self._writer:
            self._images = self._image_numbers()
        if numbered_after and self._sequence == 0:  # rule 10: a store made anew for a run
            self._sequence = numbered_after
        stored = self._metas[-1][1]
        if meta is not None and meta != stored:
            differences = stored.differences(meta, accept)
            if differences:
                raise CheckpointError(
                    f"{self.where}: the checkpoints belong to another configuration: {'; '.join(differences)}"
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
        if not self._writer:
            raise CheckpointError(f"{self.where}: opened to read (no meta given); open it with a meta to commit")
        state, meta = checkpoint.state, self.meta
        if state is not None and (state.adapter_id, state.strategy) != (meta.adapter_id, meta.strategy):
            raise CheckpointError(
                f"{self.where}: the state belongs to adapter {state.adapter_id} with strategy {state.strategy}, "
                f"the store's checkpoints to {meta.adapter_id} with {meta.strategy}"
            )
        sequence = self.sequence + 1
        cursor = _encoded_object(checkpoint.cursor, "the cursor")
        facts = _encoded_records(checkpoint.facts, "fact")
        images: dict[str, tuple[int, bytes]] = {}  # what this commit adds: SHA-256 -> (number, PNG)
        row, body = (
            (None, b"")  # nothing to add to the continuation
            if state is None or state is self._previous
            else self._continuation_row(sequence, state, images)
        )
        self._write(
            CommitRows(
                sequence=sequence,
                at=time.time(),
                cursor=self._cursors.packed(cursor),
                facts=None if facts is None else self._facts.packed(facts),
                projection=checkpoint.projection,
                continuation=row,
                switched_to=None if self._pending_meta is None else orjson.dumps(asdict(self._pending_meta)),
                images=tuple((number, digest, png) for digest, (number, png) in images.items()),
            )
        )
        if self._pending_meta is not None:
            self._metas.append((sequence, self._pending_meta))
            self._pending_meta = None
        self._cursors.advance(cursor)
        if facts is not None:
            self._facts.advance(facts)
        if row is not None:
            self._chain.add(bool(row[1]), row[2], body)
        self._images.update((digest, number) for digest, (number, _) in images.items())
        self._sequence = sequence
        if state is not None:
            self._previous = state
        return sequence

    def latest(self) -> RestoredCheckpoint | None:
        """The newest checkpoint, rebuilt (rule 4); None when the store holds none. After it, a commit
        of a state that extends the rebuilt one writes a delta. Its reads are one read transaction: a
        reader sees the newest checkpoint whole while a writer goes on committing."""
        rows = self._read(self._reads_continuation)
        if rows is None:
            return None
        facts: list[dict[str, Any]] = []
        cursors, added = _Deflated(), _Deflated()
        path = self.where  # a file, or a database and a run: named in every message as it is
        cursor = b""
        for packed_cursor, packed_facts in rows.layers:
            cursors.advance(cursor := inflated(path, cursors, packed_cursor, "cursor"))
            if packed_facts is not None:
                added.advance(plain_facts := inflated(path, added, packed_facts, "facts"))
                facts.extend(decoded(path, plain_facts, "facts"))
        state, chain = (
            rebuilt_state(path, rows.continuation, self._unsealed, self._stored_image)
            if rows.continuation
            else (None, _Chain())
        )
        metas = _metas(self.where, rows.metas)
        restored = RestoredCheckpoint(
            sequence=rows.sequence,
            meta=[meta for since, meta in metas if since <= rows.sequence][-1],
            cursor=decoded(path, cursor, "cursor"),
            state=state,
            facts=tuple(facts),
            projection=rows.projection,
        )
        if self._writer:
            self._cursors, self._facts = cursors, added
            if self._pending_meta is None:
                self._previous, self._chain = state, chain
        return restored

    # -- records ------------------------------------------------------------------------------------

    def _continuation_row(
        self, sequence: int, state: RuntimeState, images: dict[str, tuple[int, bytes]]
    ) -> tuple[ContinuationRow, bytes]:
        """(the row, the body before compression and sealing): a delta when rule 3 allows one, else a
        snapshot; the images it lifts that the store lacks numbered into `images` (rule 12)."""

        def number_of(digest: str, png: bytes) -> int:
            if digest in self._images:
                return self._images[digest]
            if digest not in images:
                images[digest] = (len(self._images) + len(images) + 1, png)
            return images[digest][0]

        delta = None if self._previous is None else continuation_delta(self._previous, state)
        if delta is not None:
            delta = lifted(delta, number_of)
            body = _encode(delta)
            grown = len(body) - len(_encode({name: value for name, value in delta.items() if name != "append"}))
            if not self._chain.wants_snapshot(grown, len(body) - grown):
                return (sequence, 0, grown, self._sealed(body, sequence, snapshot=False), 1), body
            images.clear()
        body = _encode(lifted(snapshot_of(state), number_of))
        return (sequence, 1, len(body), self._sealed(body, sequence, snapshot=True), 1), body

    def _sealed(self, body: bytes, sequence: int, snapshot: bool) -> bytes:
        record = self._chain.deflated.packed(body, alone=snapshot)
        return record if self._cipher is None else self._cipher.seal(record, _record_place(sequence, snapshot))

    def _unsealed(self, blob: bytes, sequence: int, snapshot: bool) -> bytes:
        return blob if self._cipher is None else opened(self.where, self._cipher, blob, sequence, snapshot)


def _metas(where: str | Path, rows: Sequence[tuple[int, bytes]]) -> list[tuple[int, CheckpointMeta]]:
    try:
        metas = [(since, CheckpointMeta(**_decode(bytes(body)))) for since, body in rows]
    except (ValueError, TypeError) as error:
        raise DamagedStore(f"{where}: the store's meta cannot be read ({error}): it is corrupt") from None
    if not metas:
        raise DamagedStore(f"{where}: the store records no meta: it is corrupt")
    return metas
