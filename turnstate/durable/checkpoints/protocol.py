"""The checkpoint store's protocol: what a run knows of where its checkpoints are kept, and the values it
commits and reads back (the package's rules say what each must keep)."""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, Final, Protocol, runtime_checkable

from turnstate.strategies.state import SCHEMA_VERSION, RuntimeState


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
    """Where a run's checkpoints are kept: everything a session and a resume use of a store, and all
    that tests/durable/test_store_conformance.py holds every store to. Two backends share the rules
    (records.RecordStore): SQLite in the run folder (sqlite.py) and PostgreSQL for runs spread over
    many machines (postgres.py); stores.py says which holds a run's."""

    @property
    def meta(self) -> CheckpointMeta:
        """The meta the next commit's state belongs to."""
        ...

    @property
    def switched_from(self) -> CheckpointMeta | None:
        """The meta this open switched away from (an accepted difference, rule 5), until the next commit."""
        ...

    @property
    def encrypts_continuation(self) -> bool:
        """Whether the continuation layer is sealed at rest (rule 6)."""
        ...

    def commit(self, checkpoint: Checkpoint) -> int:
        """Write `checkpoint` whole or not at all (rule 2) and return its number."""
        ...

    def latest(self) -> RestoredCheckpoint | None:
        """The newest checkpoint, rebuilt exactly (rule 4); None when the store holds none."""
        ...

    def close(self) -> None:
        """Release the store (and a writer's lock, rule 9)."""
        ...
