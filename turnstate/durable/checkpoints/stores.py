"""Which store holds a run's checkpoints: the one place a run folder is turned into a CheckpointStore,
so that the session and a resume know the store only through its protocol. Today it is always the
SQLite database in the run folder (sqlite.py); a store chosen by a URL would be opened here."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from turnstate.durable.checkpoints.protocol import CheckpointMeta, CheckpointStore
from turnstate.durable.checkpoints.sqlite import SQLiteCheckpointStore, set_aside
from turnstate.durable.layout import CHECKPOINT_FILE


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
    return SQLiteCheckpointStore(
        run_dir / CHECKPOINT_FILE,
        meta,
        accept=accept,
        create=create,
        numbered_after=numbered_after,
        continuation=continuation,
    )


def set_aside_run_store(run_dir: Path) -> Path:
    """Rule 10: the run's damaged store moved aside under its writer's lock; where it went."""
    return set_aside(run_dir / CHECKPOINT_FILE)
