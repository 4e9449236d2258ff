"""What every checkpoint store must do, held through its protocol alone (CheckpointStore, and the
run-level open, set-aside and prune a backend gives): the package's rules that hold for any store.

Each backend is a small class below that opens its store for a run and ages it for retention; the
tests never reach past it into a file or a table. Two backends: SQLite in the run folder, and
PostgreSQL (a throwaway server for the session: tests/postgres_server.py; skipped, saying why, where
none can start). What only SQLite has (its WAL, its files'
permissions, a kill inside its transaction, its layout version) stays in tests/harness/test_checkpoints.py."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.harness.test_checkpoints import KEY, META, OPERATIONS, apply, checkpoint, empty_state, grown
from turnstate.durable.checkpoints import (
    KEY_VARIABLE,
    OPT_OUT,
    SWITCHABLE,
    Checkpoint,
    CheckpointError,
    CheckpointMeta,
    CheckpointStore,
    open_run_store,
    postgres,
    prune,
    set_aside_run_store,
)
from turnstate.durable.checkpoints.stores import STORE_VARIABLE
from turnstate.durable.layout import CHECKPOINT_FILE, CHECKPOINT_POINTER


class SQLiteBackend:
    """The SQLite store in each run's folder; runs are folders of `root`."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def run(self, name: str = "run") -> Path:
        folder = self.root / name
        folder.mkdir(mode=0o700)
        return folder

    def open(self, run: Path, meta: CheckpointMeta | None = None, **options: Any) -> CheckpointStore:
        return open_run_store(run, meta, **options)

    def set_aside(self, run: Path) -> None:
        set_aside_run_store(run)

    def age(self, run: Path, by: timedelta) -> None:
        """Make the run's last checkpoint `by` old."""
        then = os.stat(run / CHECKPOINT_FILE).st_mtime - by.total_seconds()
        for path in run.glob(f"{CHECKPOINT_FILE}*"):
            os.utime(path, (then, then))

    def prune(self, older_than: timedelta) -> set[str]:
        """The runs whose store retention deleted."""
        return {path.parent.name for path in prune(self.root, older_than) if path.name == CHECKPOINT_FILE}

    def holds_store(self, run: Path) -> bool:
        return (run / CHECKPOINT_FILE).exists()


class PostgresBackend(SQLiteBackend):
    """The PostgreSQL store (one throwaway server for the session): the runs' folders in `root`, each
    pointing at its rows in the database, chosen as a user chooses it (TURNSTATE_CHECKPOINTS)."""

    def __init__(self, root: Path, url: str) -> None:
        super().__init__(root)
        self.url = url

    @contextmanager
    def _chosen(self) -> Iterator[None]:
        before = os.environ.get(STORE_VARIABLE)
        os.environ[STORE_VARIABLE] = self.url
        try:
            yield
        finally:
            if before is None:
                del os.environ[STORE_VARIABLE]
            else:
                os.environ[STORE_VARIABLE] = before

    def open(self, run: Path, meta: CheckpointMeta | None = None, **options: Any) -> CheckpointStore:
        with self._chosen():
            return open_run_store(run, meta, **options)

    def set_aside(self, run: Path) -> None:
        with self._chosen():
            set_aside_run_store(run)

    def key(self, run: Path) -> str:
        return str(json.loads((run / CHECKPOINT_POINTER).read_text())["run"])

    def age(self, run: Path, by: timedelta) -> None:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as database:
            database.execute(
                "UPDATE turnstate_checkpoints SET at = at - %s WHERE run = %s", (by.total_seconds(), self.key(run))
            )

    def prune(self, older_than: timedelta) -> set[str]:
        runs = {
            self.key(folder): folder.name for folder in self.root.iterdir() if (folder / CHECKPOINT_POINTER).exists()
        }
        return {runs[key] for key in postgres.prune(self.url, older_than, runs)}

    def holds_store(self, run: Path) -> bool:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as database:
            row = database.execute(
                "SELECT count(*) FROM turnstate_checkpoints WHERE run = %s", (self.key(run),)
            ).fetchone()
        return bool(row and row[0])


BACKENDS = {"sqlite": SQLiteBackend, "postgres": PostgresBackend}


def made_backend(name: str, root: Path, request: pytest.FixtureRequest) -> Any:
    if name == "postgres":
        return PostgresBackend(root, request.getfixturevalue("postgres_url"))
    return SQLiteBackend(root)


@pytest.fixture(params=sorted(BACKENDS))
def backend(request, tmp_path) -> Any:
    return made_backend(request.param, tmp_path, request)


def committed(backend: Any, run: Path, states: int) -> Any:
    """A store of `run` holding `states` grown turns, closed; the last state."""
    state = empty_state()
    store = backend.open(run, META)
    try:
        for turn in range(1, states + 1):
            state = grown(state, turn)
            assert store.commit(checkpoint(state, turn)) == turn
    finally:
        store.close()
    return state


def test_a_store_is_a_checkpoint_store_and_a_new_one_holds_no_checkpoint(backend):
    store = backend.open(backend.run(), META)
    assert isinstance(store, CheckpointStore)
    assert store.latest() is None and store.meta == META and store.switched_from is None
    store.close()


def test_checkpoints_are_numbered_in_commit_order_and_latest_gives_the_newest_with_every_fact(backend):
    run = backend.run()
    state = committed(backend, run, 3)
    reader = backend.open(run)
    restored = reader.latest()
    reader.close()
    assert restored is not None and restored.sequence == 3
    assert (
        restored.cursor == dict(checkpoint(state, 3).cursor) and restored.projection == checkpoint(state, 3).projection
    )
    assert [fact["step"] for fact in restored.facts] == [1, 2, 3]
    assert restored.state == state and restored.meta == META


def test_a_commit_the_store_cannot_hold_writes_nothing_and_numbering_goes_on(backend):
    run = backend.run()
    store = backend.open(run, META)
    state = grown(empty_state(), 1)
    store.commit(checkpoint(state, 1))
    with pytest.raises(CheckpointError):
        store.commit(Checkpoint(cursor={"not json": object()}, state=grown(state, 2)))
    assert store.latest().sequence == 1
    assert store.commit(checkpoint(grown(state, 2), 2)) == 2
    store.close()


@pytest.mark.parametrize("name", sorted(BACKENDS))
def test_every_state_a_walk_of_grows_trims_and_compactions_commits_comes_back_exactly_across_reopens(
    name, request, tmp_path_factory
):
    backend = made_backend(name, tmp_path_factory.mktemp(name), request)

    @settings(derandomize=True, max_examples=25, deadline=None)
    @given(operations=st.lists(OPERATIONS, min_size=1, max_size=30))
    def walk(operations):
        run = backend.run(uuid.uuid4().hex)
        state = empty_state()
        store = backend.open(run, META)
        for turn, operation in enumerate(operations, start=1):
            state = apply(state, operation, turn)
            store.commit(checkpoint(state, turn))
            if turn % 5 == 0:  # a resume in the middle: the next commit extends the rebuilt state
                store.close()
                store = backend.open(run, META)
                state = store.latest().state
        store.close()
        reader = backend.open(run)
        rebuilt = reader.latest().state
        reader.close()
        assert rebuilt == state and rebuilt.to_json() == state.to_json()

    walk()


def test_with_a_key_the_continuation_is_sealed_and_another_key_is_refused_at_open(backend, monkeypatch):
    monkeypatch.setenv(KEY_VARIABLE, KEY)
    run = backend.run()
    state = committed(backend, run, 2)
    store = backend.open(run, META)
    assert store.encrypts_continuation and store.latest().state == state
    store.close()
    monkeypatch.setenv(KEY_VARIABLE, "another-key-of-enough-characters")
    with pytest.raises(CheckpointError, match="does not hold the key this store was written with"):
        backend.open(run, META)
    monkeypatch.setenv(KEY_VARIABLE, OPT_OUT)
    plain = backend.open(backend.run("plain"), META)
    assert not plain.encrypts_continuation
    plain.close()


def test_one_writer_at_a_time_and_a_reader_beside_it_sees_the_newest_checkpoint_whole(backend):
    run = backend.run()
    writer = backend.open(run, META)
    state = grown(empty_state(), 1)
    writer.commit(checkpoint(state, 1))
    with pytest.raises(CheckpointError, match="another process has this checkpoint store open to write"):
        backend.open(run, META)
    reader = backend.open(run)
    assert reader.latest().sequence == 1
    state = grown(state, 2)
    writer.commit(checkpoint(state, 2))
    restored = reader.latest()
    assert (restored.sequence, restored.state, len(restored.facts)) == (2, state, 2)
    reader.close()
    writer.close()
    backend.open(run, META).close()  # the lock went with the writer


def test_another_configuration_is_refused_unless_accepted_and_a_switch_is_recorded_with_the_next_commit(backend):
    run = backend.run()
    committed(backend, run, 1)
    other = CheckpointMeta("anthropic.messages.v1", "1.0.0", "continuous_conversation", "digest-2")
    with pytest.raises(CheckpointError, match="adapter_id: was openai.responses.v1, now anthropic.messages.v1"):
        backend.open(run, other)
    store = backend.open(run, other, accept=SWITCHABLE)
    assert store.switched_from == META and store.meta == other
    store.commit(checkpoint(grown(empty_state(other), 2), 2))
    assert store.switched_from is None and store.latest().meta == other
    store.close()


def test_a_store_set_aside_leaves_the_run_a_new_one_numbered_on(backend):
    run = backend.run()
    committed(backend, run, 3)
    backend.set_aside(run)
    store = backend.open(run, META, numbered_after=3)
    assert store.latest() is None
    assert store.commit(checkpoint(grown(empty_state(), 4), 4)) == 4
    store.close()


def test_retention_deletes_the_stores_whose_last_checkpoint_is_older_and_leaves_one_a_writer_holds(backend):
    old, recent, held = backend.run("old"), backend.run("recent"), backend.run("held")
    for run in (old, recent, held):
        committed(backend, run, 1)
    backend.age(old, timedelta(days=40))
    backend.age(held, timedelta(days=40))
    writer = backend.open(held, META)
    try:
        assert backend.prune(timedelta(days=30)) == {"old"}
    finally:
        writer.close()
    assert not backend.holds_store(old) and backend.holds_store(recent) and backend.holds_store(held)
