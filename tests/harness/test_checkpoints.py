"""The checkpoint store (turnstate/durable/checkpoints/): four layers kept apart, the continuation as deltas
and snapshots rebuilt exactly, meta compatibility, encryption at rest, owner-only files, kills inside
a transaction, corrupt and foreign files, one writer, retention."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import signal
import sqlite3
import stat
import subprocess
import sys
import textwrap
import time
import zlib
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from turnstate import Session, load_profile
from turnstate.durable.checkpoints import (
    KEY_FILE,
    KEY_VARIABLE,
    LAYOUT_VERSION,
    OPT_OUT,
    Checkpoint,
    CheckpointError,
    CheckpointMeta,
    CheckpointStore,
    DamagedStore,
    ProjectionMark,
    SQLiteCheckpointStore,
    prune,
)
from turnstate.durable.checkpoints.codec import _Deflated
from turnstate.durable.layout import CHECKPOINT_FILE
from turnstate.environments import make_environment
from turnstate.environments.frame_image import frame_to_png
from turnstate.session.profile import PROFILES_DIR
from turnstate.strategies.state import RuntimeState, TurnSpan

META = CheckpointMeta("openai.responses.v1", "1.0.0", "continuous_conversation", "digest-1")
KEY = "a-test-key-of-enough-characters"
SECRET = "OPAQUE-REASONING-7f3a"  # only ever in the continuation layer


@pytest.fixture(autouse=True)
def no_key(monkeypatch):
    """Plain stores unless a test gives a key: the default key file is tested on its own, below."""
    monkeypatch.setenv(KEY_VARIABLE, OPT_OUT)


@pytest.fixture
def folder(tmp_path) -> Path:
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    return run


def empty_state(meta: CheckpointMeta = META) -> RuntimeState:
    return RuntimeState(adapter_id=meta.adapter_id, strategy=meta.strategy, payload={"items": []})


def grown(state: RuntimeState, turn: int, items: int = 2) -> RuntimeState:
    """`state` with one more accepted turn of `items` items, as an adapter's commit appends them."""
    new = [{"role": "user", "content": f"observation {turn}"}, {"type": "reasoning", "encrypted_content": SECRET}]
    new += [{"role": "assistant", "content": f"reply {turn}"}] * (items - 2)
    old = state.payload["items"]
    return state.replace(
        payload={**state.payload, "items": old + new},
        turns=(*state.turns, TurnSpan(start=len(old), end=len(old) + items)),
        completed_context_tokens=100 + turn,
    )


def trimmed(state: RuntimeState, turns: int) -> RuntimeState:
    """`state` without its oldest `turns` turns, as manual_rolling's trim drops them."""
    cut = state.turns[turns].start
    return state.replace(
        payload={**state.payload, "items": state.payload["items"][cut:]},
        turns=tuple(TurnSpan(start=span.start - cut, end=span.end - cut) for span in state.turns[turns:]),
    )


def checkpoint(state: RuntimeState, step: int) -> Checkpoint:
    return Checkpoint(
        cursor={"step": step, "level": 1, "usage": {"input_tokens": 10 * step}},
        state=state,
        facts=[{"kind": "action", "step": step, "action": "ACTION1"}],
        projection=ProjectionMark(3 * step, hashlib.sha256(b"log through step %d" % step).digest()),
    )


def reopened(path: Path, **options: Any) -> Any:
    with SQLiteCheckpointStore(path, **options) as store:
        return store.latest()


def continuation_rows(path: Path) -> list[tuple[int, int]]:
    """(snapshot, bytes) per continuation record, in order."""
    with sqlite3.connect(path) as database:
        return database.execute("SELECT snapshot, length(body) FROM continuation ORDER BY seq").fetchall()


# -- the four layers, rebuilt ------------------------------------------------------------------------


def test_the_sqlite_store_implements_the_store_protocol(folder):
    with SQLiteCheckpointStore(folder / CHECKPOINT_FILE, META) as store:
        assert isinstance(store, CheckpointStore)


def test_latest_gives_the_newest_cursor_and_projection_mark_and_every_fact_in_commit_order(folder):
    path = folder / CHECKPOINT_FILE
    state = empty_state()
    with SQLiteCheckpointStore(path, META) as store:
        assert store.latest() is None
        for step in range(1, 4):
            state = grown(state, step)
            assert store.commit(checkpoint(state, step)) == step
    restored = reopened(path)
    assert restored.sequence == 3
    assert restored.meta == META
    assert restored.cursor == {"step": 3, "level": 1, "usage": {"input_tokens": 30}}
    assert [fact["step"] for fact in restored.facts] == [1, 2, 3]
    assert restored.projection == ProjectionMark(9, hashlib.sha256(b"log through step 3").digest())


def test_the_continuation_is_a_table_of_its_own_and_the_other_layers_columns_of_each_checkpoint(folder):
    path = folder / CHECKPOINT_FILE
    with SQLiteCheckpointStore(path, META) as store:
        store.commit(checkpoint(grown(empty_state(), 1), 1))
        store.commit(Checkpoint({"step": 2}, store.latest().state))
    with sqlite3.connect(path) as database:
        rows = database.execute("SELECT cursor, facts, events_through FROM checkpoints ORDER BY seq").fetchall()
        (continuation,) = database.execute("SELECT body FROM continuation").fetchone()
    assert [json.loads(cursor)["step"] for cursor in inflated_chain([cursor for cursor, _, _ in rows])] == [1, 2]
    assert json.loads(inflated_chain([rows[0][1]])[0]) == [{"kind": "action", "step": 1, "action": "ACTION1"}]
    assert rows[0][2] == 3  # the projection is the event log's, which the checkpoint marks
    assert rows[1][1:] == (None, 0)  # a checkpoint that added no fact, and marks no event
    snapshot = json.loads(inflated_chain([continuation])[0])
    assert snapshot["payload"]["items"][0] == {"role": "user", "content": "observation 1"}


def inflated_chain(records: list[bytes]) -> list[bytes]:
    """A layer's records read as rule 11 writes them: raw DEFLATE, each with the one before as its dictionary."""
    plain: list[bytes] = []
    for record in records:
        unpacker = zlib.decompressobj(-15, zdict=plain[-1] if plain else b"")
        plain.append(unpacker.decompress(record) + unpacker.flush())
    return plain


def inflated_as_far_as_it_goes(record: bytes) -> bytes:
    unpacker = zlib.decompressobj(-15)
    try:
        return unpacker.decompress(record)
    except zlib.error:
        return b""


def test_each_record_is_deflated_against_the_one_before_it_so_what_a_turn_repeats_costs_a_few_bytes(folder):
    path = folder / CHECKPOINT_FILE
    cursor = {"step": 0, "turn": 0, "accepted_actions": 0, "failed_attempts": 0, "machine_state": "Accepted"}
    with SQLiteCheckpointStore(path, META) as store:
        for step in range(1, 21):
            store.commit(Checkpoint({**cursor, "step": step, "turn": step}, None, [{"kind": "action", "step": step}]))
        assert store.latest().cursor == {**cursor, "step": 20, "turn": 20}
    with sqlite3.connect(path) as database:
        rows = database.execute("SELECT cursor, facts FROM checkpoints ORDER BY seq").fetchall()
    cursors = inflated_chain([packed for packed, _ in rows])
    assert [json.loads(plain)["step"] for plain in cursors] == list(range(1, 21))
    assert [json.loads(plain)[0]["step"] for plain in inflated_chain([packed for _, packed in rows])] == list(
        range(1, 21)
    )
    assert all(len(packed) < len(plain) / 3 for (packed, _), plain in zip(rows[1:], cursors[1:], strict=True))


def test_a_writer_that_did_not_call_latest_packs_its_first_records_alone_and_they_read_back(folder):
    path = folder / CHECKPOINT_FILE
    state = grown(empty_state(), 1)
    with SQLiteCheckpointStore(path, META) as store:
        store.commit(checkpoint(state, 1))
    with SQLiteCheckpointStore(path, META) as store:  # reopened to write, and committed to at once
        store.commit(checkpoint(grown(state, 2), 2))
    restored = reopened(path)
    assert restored.cursor == {"step": 2, "level": 1, "usage": {"input_tokens": 20}}
    assert [fact["step"] for fact in restored.facts] == [1, 2]
    assert restored.state == grown(state, 2)
    assert [snapshot for snapshot, _ in continuation_rows(path)] == [1, 1]


def test_a_record_that_does_not_inflate_is_damage_named_by_its_layer(folder):
    path = folder / CHECKPOINT_FILE
    with SQLiteCheckpointStore(path, META) as store:
        store.commit(checkpoint(grown(empty_state(), 1), 1))
    with sqlite3.connect(path) as database:
        database.execute("UPDATE checkpoints SET cursor = ? WHERE seq = 1", (b"{not deflate",))
    with pytest.raises(DamagedStore, match="a record of the cursor does not inflate"):
        reopened(path)


OPERATIONS = st.sampled_from(
    ["grow", "grow", "grow", "trim", "compact", "pending", "tools", "set_key", "drop_key", "image", "image"]
)


def frame_png(frame: int) -> bytes:
    """A small real PNG per frame number (a run shows some frames again)."""
    return frame_to_png([[frame % 16, 1], [2, 3]], scale=2)


def image_turn(turn: int) -> list[dict[str, Any]]:
    """A turn's items showing a frame in each wire's shape of an image, beside strings that only look
    like one: a reference's mark, a PNG's base64 cut short of canonical, a data URL of another type."""
    data = base64.b64encode(frame_png(turn % 3)).decode()
    return [
        {"type": "input_image", "image_url": f"data:image/png;base64,{data}", "detail": "auto"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}},
        {"type": "image", "data": data, "mime_type": "image/png"},
        {
            "role": "user",
            "content": [f"\ue000png:{'0' * 64}", "\ue000\ue000", data + "=", data[:-4] + "\n" + data[-4:]],
        },
        {"role": "user", "content": f"data:image/jpeg;base64,{data}"},
    ]


def apply(state: RuntimeState, operation: str, turn: int) -> RuntimeState:
    """One change of the kinds strategies make: a turn, a trim, a compaction, an input buffered, a tool
    round's envelope, a payload value set or dropped."""
    if operation == "trim" and len(state.turns) > 1:
        return trimmed(state, 1)
    if operation == "compact":
        return state.replace(
            payload={**state.payload, "items": [{"type": "compaction", "encrypted_content": f"{SECRET}-{turn}"}]},
            turns=(TurnSpan(start=0, end=1),),
        )
    if operation == "pending":
        return state.with_pending(f"frame {turn}")
    if operation == "tools":
        return state.replace(unanswered=(f"call_{turn}",), unread_turn=not state.unread_turn)
    if operation == "set_key":
        return state.replace(payload={"cursor": {"turn": turn}, **state.payload})  # a new key, first
    if operation == "drop_key":
        return state.replace(payload={"items": state.payload["items"]})
    if operation == "image":
        old = state.payload["items"]
        new = image_turn(turn)
        return state.replace(
            payload={**state.payload, "items": old + new},
            turns=(*state.turns, TurnSpan(start=len(old), end=len(old) + len(new))),
        )
    return grown(state, turn, items=2 + turn % 3)


@settings(derandomize=True, max_examples=40, deadline=None)
@given(st.lists(OPERATIONS, min_size=1, max_size=40))
def test_every_state_a_walk_of_grows_trims_compactions_and_envelope_changes_commits_comes_back_exactly(
    tmp_path_factory, operations
):
    folder = tmp_path_factory.mktemp("walk")
    folder.chmod(0o700)
    path = folder / CHECKPOINT_FILE
    state = empty_state()
    with SQLiteCheckpointStore(path, META) as store:
        for turn, operation in enumerate(operations, start=1):
            state = apply(state, operation, turn)
            store.commit(checkpoint(state, turn))
            if turn % 7 == 0:  # a resume in the middle: the next commit extends the rebuilt state
                store.close()
                store = SQLiteCheckpointStore(path, META)
                rebuilt = store.latest().state
                assert rebuilt == state and rebuilt.to_json() == state.to_json()
                state = rebuilt
    rebuilt = reopened(path).state
    assert rebuilt == state
    assert rebuilt.to_json() == state.to_json()


def test_a_growing_state_is_one_snapshot_then_deltas_of_what_each_turn_appended(folder):
    path = folder / CHECKPOINT_FILE
    state = empty_state()
    with SQLiteCheckpointStore(path, META) as store:
        for turn in range(1, 601):
            state = grown(state, turn)
            store.commit(checkpoint(state, turn))
    rows = continuation_rows(path)
    assert [snapshot for snapshot, _ in rows] == [1] + [0] * 599
    first, last = sum(size for _, size in rows[1:201]), sum(size for _, size in rows[-200:])
    assert last <= 1.2 * first  # the 600th turn's delta is no larger than the 2nd's: bytes grow linearly
    assert len(state.to_json()) > 100 * rows[-1][1]


def test_a_trim_or_a_compaction_writes_a_snapshot_and_the_next_turn_a_delta_again(folder):
    path = folder / CHECKPOINT_FILE
    state = empty_state()
    with SQLiteCheckpointStore(path, META) as store:
        for turn in range(1, 5):
            state = grown(state, turn)
            store.commit(checkpoint(state, turn))
        store.commit(checkpoint(trimmed(state, 2), 5))
        store.commit(checkpoint(grown(trimmed(state, 2), 6), 6))
        store.commit(checkpoint(apply(state, "compact", 7), 7))
        store.commit(checkpoint(grown(apply(state, "compact", 7), 8), 8))
    assert [snapshot for snapshot, _ in continuation_rows(path)] == [1, 0, 0, 0, 1, 0, 1, 0]


def test_a_chain_that_rewrites_more_than_it_grows_gets_a_snapshot_so_a_rebuild_reads_at_most_twice_the_state(folder):
    path = folder / CHECKPOINT_FILE
    state = empty_state().replace(payload={"items": [], "note": "x" * 500})
    with SQLiteCheckpointStore(path, META) as store:
        for turn in range(1, 41):
            state = state.replace(payload={**state.payload, "note": f"{turn:03d}" + "x" * 497})
            store.commit(checkpoint(state, turn))
    rows = continuation_rows(path)
    snapshots = [index for index, (snapshot, _) in enumerate(rows) if snapshot]
    assert len(snapshots) >= 10  # the note, rewritten whole every turn, is soon larger than the state
    assert all(later - earlier <= 3 for earlier, later in zip(snapshots, snapshots[1:], strict=False))
    assert reopened(path).state == state


def test_committing_the_same_state_again_adds_no_continuation_record(folder):
    path = folder / CHECKPOINT_FILE
    state = grown(empty_state(), 1)
    with SQLiteCheckpointStore(path, META) as store:
        store.commit(checkpoint(state, 1))
        store.commit(Checkpoint({"step": 1, "receipt": True}, state, facts=[{"kind": "receipt", "step": 1}]))
    assert len(continuation_rows(path)) == 1
    restored = reopened(path)
    assert restored.cursor == {"step": 1, "receipt": True}
    assert restored.state == state
    assert [fact["kind"] for fact in restored.facts] == ["action", "receipt"]


def test_integers_past_64_bits_and_lone_surrogates_in_a_state_come_back_exactly(folder):
    path = folder / CHECKPOINT_FILE
    state = grown(empty_state(), 1)
    odd_item = {"n": 2**80, "text": "a\ud800b"}
    odd = state.replace(
        payload={"items": [*state.payload["items"], odd_item]}, turns=(*state.turns, TurnSpan(start=2, end=3))
    )
    with SQLiteCheckpointStore(path, META) as store:
        store.commit(checkpoint(state, 1))
        store.commit(checkpoint(odd, 2))  # a delta with them
        assert reopened(path).state == odd
        store.commit(
            checkpoint(state.replace(payload={"items": [{"n": -(2**70)}]}, turns=(TurnSpan(start=0, end=1),)), 3)
        )
    with SQLiteCheckpointStore(path, META) as store:
        store.commit(checkpoint(odd, 4))  # a snapshot with them
    restored = reopened(path)
    assert [snapshot for snapshot, _ in continuation_rows(path)] == [1, 0, 1, 1]
    assert restored.state == odd
    assert restored.state.payload["items"][-1] == odd_item


@pytest.mark.parametrize(
    "profile_name", ["local-openai-continuous", "local-manual-rolling", "local-anthropic-continuous"]
)
def test_the_states_a_real_session_accepts_come_back_exactly_from_the_store(folder, profile_name):
    """A local profile's own states (its adapter's items, opaque reasoning, its trims and compactions),
    through the real SDK against the local provider."""
    profile = load_profile(PROFILES_DIR / f"{profile_name}.yaml")
    game = make_environment(profile.environment.name, profile.environment.seed, profile.environment.options)
    meta = CheckpointMeta(profile.runtime.adapter_id, "1", profile.runtime.strategy, profile.id)
    path = folder / CHECKPOINT_FILE
    frame = game.reset()
    with Session(profile, actions=game.actions) as session, SQLiteCheckpointStore(path, meta) as store:
        for step in range(1, 61):
            turn = session.observe(frame.text)
            while turn.problem is not None:
                turn = session.reject(turn.problem)
            session.accept(turn.action)
            store.commit(checkpoint(session.accepted_state, step))
            frame = game.step(turn.action)
            if frame.state == "WIN":
                break
            if frame.state == "GAME_OVER":
                session.buffer(frame.text)
                frame = game.step("RESET")
        accepted = session.accepted_state
    rows = continuation_rows(path)
    assert sum(1 - snapshot for snapshot, _ in rows) > 0  # deltas were written
    restored = reopened(path)
    assert restored.state == accepted
    assert restored.state.to_json() == accepted.to_json()


# -- bad input ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"facts": ["not an object"]}, "fact 0 must be a JSON object"),
        ({"facts": [{}, {"at": {1, 2}}]}, "fact 1 is not JSON"),
        ({"cursor": {"when": object()}}, "the cursor is not JSON"),
    ],
)
def test_an_input_the_store_cannot_hold_raises_naming_it_and_writes_nothing(folder, changes, named):
    path = folder / CHECKPOINT_FILE
    state = grown(empty_state(), 1)
    with SQLiteCheckpointStore(path, META) as store:
        store.commit(checkpoint(state, 1))
        bad = {**checkpoint(grown(state, 2), 2).__dict__, **changes}
        with pytest.raises(CheckpointError, match=named):
            store.commit(Checkpoint(**bad))
        assert store.sequence == 1
        store.commit(checkpoint(grown(state, 2), 2))  # and the store goes on from the state it holds
    assert reopened(path).state == grown(state, 2)


def test_a_state_of_another_adapter_than_the_stores_is_refused(folder):
    other = CheckpointMeta("anthropic.messages.v1", "1.0.0", "continuous_conversation", "digest-1")
    with SQLiteCheckpointStore(folder / CHECKPOINT_FILE, META) as store:
        with pytest.raises(CheckpointError, match="belongs to adapter anthropic.messages.v1"):
            store.commit(checkpoint(empty_state(other), 1))


def test_a_store_opened_to_read_cannot_commit(folder):
    path = folder / CHECKPOINT_FILE
    SQLiteCheckpointStore(path, META).close()
    with SQLiteCheckpointStore(path) as store, pytest.raises(CheckpointError, match="opened to read"):
        store.commit(checkpoint(empty_state(), 1))


# -- meta --------------------------------------------------------------------------------------------


def test_opening_with_another_adapter_is_refused_naming_exactly_what_differs(folder):
    path = folder / CHECKPOINT_FILE
    SQLiteCheckpointStore(path, META).close()
    other = CheckpointMeta("anthropic.messages.v1", "1.0.0", "continuous_conversation", "digest-2")
    with pytest.raises(CheckpointError) as refused:
        SQLiteCheckpointStore(path, other)
    message = str(refused.value)
    assert str(path) in message
    assert "adapter_id: was openai.responses.v1, now anthropic.messages.v1" in message
    assert "profile_digest: was digest-1, now digest-2" in message
    assert "strategy" not in message and "adapter_version" not in message


def test_an_accepted_switch_is_recorded_with_the_next_commit_which_is_a_snapshot(folder):
    path = folder / CHECKPOINT_FILE
    state = grown(empty_state(), 1)
    with SQLiteCheckpointStore(path, META) as store:
        store.commit(checkpoint(state, 1))
    other = CheckpointMeta("anthropic.messages.v1", "2.0.0", "continuous_conversation", "digest-2")
    accept = {"adapter_id", "adapter_version", "profile_digest"}
    with SQLiteCheckpointStore(path, other, accept=accept) as store:
        assert store.switched_from == META
        assert store.latest().meta == META  # the newest checkpoint is still the old adapter's
        switched = grown(empty_state(other), 2)
        store.commit(checkpoint(switched, 2))
        assert store.switched_from is None
    assert reopened(path).meta == other
    assert reopened(path).state == switched
    assert [snapshot for snapshot, _ in continuation_rows(path)] == [1, 1]
    SQLiteCheckpointStore(path, other).close()  # the switched store now opens as the new adapter's
    with pytest.raises(CheckpointError, match="adapter_id: was anthropic.messages.v1, now openai.responses.v1"):
        SQLiteCheckpointStore(path, META)


def test_a_switch_opened_but_never_committed_leaves_the_store_the_old_adapters(folder):
    path = folder / CHECKPOINT_FILE
    with SQLiteCheckpointStore(path, META) as store:
        store.commit(checkpoint(grown(empty_state(), 1), 1))
    other = CheckpointMeta("anthropic.messages.v1", "1.0.0", "continuous_conversation", "digest-1")
    SQLiteCheckpointStore(path, other, accept={"adapter_id"}).close()
    SQLiteCheckpointStore(path, META).close()


def test_a_resume_cannot_accept_another_schema_version(folder):
    with pytest.raises(ValueError, match="schema_version"):
        SQLiteCheckpointStore(folder / CHECKPOINT_FILE, META, accept={"schema_version"})


def test_a_store_of_another_layout_is_refused_naming_both(folder):
    path = folder / CHECKPOINT_FILE
    SQLiteCheckpointStore(path, META).close()
    with sqlite3.connect(path) as database:
        database.execute("PRAGMA user_version = 9")
    with pytest.raises(
        CheckpointError, match=f"layout 9, and this turnstate reads layouts 3 to {LAYOUT_VERSION}; fix: resume"
    ):
        SQLiteCheckpointStore(path, META)


def noisy_frame(frame: int) -> bytes:
    """A PNG that does not compress away: 16 x 16 cells of 16 colours, drawn from `frame`."""
    cells = [[(frame * 7919 + row * 104729 + column * 31) % 65537 % 16 for column in range(16)] for row in range(16)]
    return frame_to_png(cells, scale=1)


def imaged(state: RuntimeState, frame: int) -> RuntimeState:
    """`state` with one more turn showing `frame` as Messages and Responses do (two shapes, one image)."""
    data = base64.b64encode(noisy_frame(frame)).decode()
    new = [
        {
            "role": "user",
            "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}],
        },
        {"type": "input_image", "image_url": f"data:image/png;base64,{data}"},
    ]
    old = state.payload["items"]
    return state.replace(
        payload={**state.payload, "items": old + new}, turns=(*state.turns, TurnSpan(start=len(old), end=len(old) + 2))
    )


def image_run(path: Path) -> RuntimeState:
    """40 turns showing four frames ten times each, in two shapes each time, a snapshot every other
    turn (a trim: the window's frames all over again); the last state."""
    state = empty_state()
    with SQLiteCheckpointStore(path, META) as store:
        for turn in range(1, 41):
            state = imaged(state, turn % 4)
            if turn % 2 == 0:
                state = trimmed(state, 1)
            store.commit(checkpoint(state, turn))
    return state


def test_the_store_keeps_each_image_once_and_its_records_name_it_by_digest(tmp_path, monkeypatch):
    stores = {}
    for name in ("lifting", "inline"):
        (tmp_path / name).mkdir(mode=0o700)
        stores[name] = tmp_path / name / CHECKPOINT_FILE
    state = image_run(stores["lifting"])
    with monkeypatch.context() as inline:
        inline.setattr("turnstate.durable.checkpoints.records.lifted", lambda value, images: value)
        assert image_run(stores["inline"]) == state

    with sqlite3.connect(stores["lifting"]) as database:
        images = dict(database.execute("SELECT digest, png FROM images").fetchall())
    assert images == {hashlib.sha256(noisy_frame(frame)).hexdigest(): noisy_frame(frame) for frame in range(4)}
    lifting, inline = plain_continuation(stores["lifting"]), plain_continuation(stores["inline"])
    assert all(b"iVBORw0KGgo" in record for record in inline)  # each record shows its turns' frames...
    assert not any(b"iVBORw0KGgo" in record for record in lifting)  # ...or names them
    assert all("\ue000png:".encode() in record for record in lifting)
    assert not any(digest.encode() in record for record in lifting for digest in images)  # a number, not the digest
    assert sum(map(len, lifting)) < sum(map(len, inline)) / 2
    assert reopened(stores["lifting"]).state == state


def plain_continuation(path: Path) -> list[bytes]:
    """The continuation's records as their plain JSON, inflated in order (rule 11)."""
    records, layer = [], _Deflated()
    with sqlite3.connect(path) as database:
        for snapshot, body in database.execute("SELECT snapshot, body FROM continuation ORDER BY seq"):
            records.append(plain := layer.unpacked(body, alone=bool(snapshot)))
            layer.advance(plain)
    return records


def test_an_image_missing_from_the_store_or_altered_is_damage_named(folder):
    path = folder / CHECKPOINT_FILE
    with SQLiteCheckpointStore(path, META) as store:
        store.commit(checkpoint(imaged(empty_state(), 1), 1))
    digest = hashlib.sha256(noisy_frame(1)).hexdigest()
    with sqlite3.connect(path) as database:
        database.execute("UPDATE images SET png = ?", (noisy_frame(2),))
    with pytest.raises(DamagedStore, match=rf"image 1 \({digest}\) is altered"):
        reopened(path)
    with sqlite3.connect(path) as database:
        database.execute("DELETE FROM images")
    with pytest.raises(DamagedStore, match="image 1 is missing"):
        reopened(path)


def as_layout_3(path: Path) -> None:
    """The store at `path` as turnstate wrote it before rule 12 (no lifted images, no images table)."""
    with sqlite3.connect(path) as database:
        assert database.execute("SELECT count(*) FROM images").fetchone() == (0,)
        database.execute("DROP TABLE images")
        database.execute("ALTER TABLE continuation DROP COLUMN lifted")
        database.execute("PRAGMA user_version = 3")


def test_a_layout_3_store_is_read_as_it_is_and_migrated_by_the_writer_that_opens_it(folder, monkeypatch):
    path = folder / CHECKPOINT_FILE
    monkeypatch.setattr("turnstate.durable.checkpoints.records.lifted", lambda value, images: value)  # the old writer
    state = empty_state()
    with SQLiteCheckpointStore(path, META) as store:
        for turn in range(1, 4):
            store.commit(checkpoint(state := imaged(state, turn), turn))
    monkeypatch.undo()
    monkeypatch.setenv(KEY_VARIABLE, OPT_OUT)
    as_layout_3(path)
    assert reopened(path).state == state  # a reader reads it as it is, and changes nothing
    with sqlite3.connect(path) as database:
        assert database.execute("PRAGMA user_version").fetchone() == (3,)
    with SQLiteCheckpointStore(path, META) as store:
        assert store.latest().state == state
        for turn in range(4, 7):
            store.commit(checkpoint(state := imaged(state, turn), turn))
    with sqlite3.connect(path) as database:
        assert database.execute("PRAGMA user_version").fetchone() == (LAYOUT_VERSION,)
        assert database.execute("SELECT seq, lifted FROM continuation ORDER BY seq").fetchall() == [
            (1, 0),
            (2, 0),
            (3, 0),
            (4, 1),
            (5, 1),
            (6, 1),
        ]
        assert database.execute("SELECT count(*) FROM images").fetchone() == (3,)
    assert reopened(path).state == state


# -- encryption --------------------------------------------------------------------------------------


def encrypted_store_with_two_turns(path: Path, monkeypatch) -> RuntimeState:
    monkeypatch.setenv(KEY_VARIABLE, KEY)
    state = grown(empty_state(), 1)
    with SQLiteCheckpointStore(path, META) as store:
        store.commit(checkpoint(state, 1))
        state = grown(state, 2)
        store.commit(checkpoint(state, 2))
    return state


def test_an_encrypted_continuation_comes_back_exactly_and_is_never_on_disk_in_the_clear(folder, monkeypatch):
    path = folder / CHECKPOINT_FILE
    state = encrypted_store_with_two_turns(path, monkeypatch)
    assert SECRET.encode() not in b"".join(file.read_bytes() for file in folder.iterdir())
    assert reopened(path).state == state
    with sqlite3.connect(path) as database:  # sealed, not only deflated (rule 11): inflating finds no secret
        records = [record for (record,) in database.execute("SELECT body FROM continuation")]
    assert all(SECRET.encode() not in inflated_as_far_as_it_goes(record) for record in records)
    with sqlite3.connect(path) as database:  # the other layers are plain (deflated: rule 11)
        facts = [packed for (packed,) in database.execute("SELECT facts FROM checkpoints ORDER BY seq")]
    assert b"ACTION1" in inflated_chain(facts)[1]


def test_an_encrypted_store_opened_without_the_key_names_the_variable(folder, monkeypatch):
    path = folder / CHECKPOINT_FILE
    encrypted_store_with_two_turns(path, monkeypatch)
    monkeypatch.setenv(KEY_VARIABLE, OPT_OUT)
    for options in ({"meta": META}, {}):
        with pytest.raises(
            CheckpointError, match=f"encrypted, and .* holds no key; set {KEY_VARIABLE} to the key the run"
        ):
            SQLiteCheckpointStore(path, **options)


def test_an_encrypted_store_opened_with_another_key_is_refused_at_open(folder, monkeypatch):
    path = folder / CHECKPOINT_FILE
    encrypted_store_with_two_turns(path, monkeypatch)
    monkeypatch.setenv(KEY_VARIABLE, KEY + "-but-another")
    with pytest.raises(CheckpointError, match=f"{KEY_VARIABLE} does not hold the key this store was written with"):
        SQLiteCheckpointStore(path, META)


def test_the_same_key_gives_each_store_its_own_salt(tmp_path, monkeypatch):
    salts = []
    for name in ("one", "two"):
        folder = tmp_path / name
        folder.mkdir(mode=0o700)
        encrypted_store_with_two_turns(folder / CHECKPOINT_FILE, monkeypatch)
        with sqlite3.connect(folder / CHECKPOINT_FILE) as database:
            salts.append(database.execute("SELECT value FROM store WHERE name = 'salt'").fetchone())
    assert salts[0] != salts[1]


@pytest.mark.parametrize("damage", ["flip a byte", "swap two records"])
def test_an_altered_continuation_record_fails_authentication(folder, monkeypatch, damage):
    path = folder / CHECKPOINT_FILE
    encrypted_store_with_two_turns(path, monkeypatch)
    with sqlite3.connect(path) as database:
        rows = database.execute("SELECT seq, body FROM continuation ORDER BY seq").fetchall()
        if damage == "flip a byte":
            body = bytearray(rows[-1][1])
            body[-5] ^= 0x01
            database.execute("UPDATE continuation SET body = ? WHERE seq = ?", (bytes(body), rows[-1][0]))
        else:  # a valid record of this store, moved to the other's place
            database.execute("UPDATE continuation SET body = ?, snapshot = 0 WHERE seq = ?", (rows[0][1], rows[1][0]))
    with pytest.raises(CheckpointError, match="fails authentication"):
        reopened(path)


def test_a_plain_store_is_refused_to_a_writer_when_the_key_is_set(folder, monkeypatch):
    path = folder / CHECKPOINT_FILE
    SQLiteCheckpointStore(path, META).close()
    monkeypatch.setenv(KEY_VARIABLE, KEY)
    with pytest.raises(CheckpointError, match=f"written without encryption, but {KEY_VARIABLE} is set"):
        SQLiteCheckpointStore(path, META)
    SQLiteCheckpointStore(path).close()  # reading it is harmless


@pytest.mark.parametrize("key", ["", "short"])
def test_a_key_too_short_is_refused_with_how_to_make_one(folder, monkeypatch, key):
    monkeypatch.setenv(KEY_VARIABLE, key)
    with pytest.raises(CheckpointError, match="at least 16 characters.*secrets.token_urlsafe"):
        SQLiteCheckpointStore(folder / CHECKPOINT_FILE, META)
    assert not (folder / CHECKPOINT_FILE).exists()


# -- permissions -------------------------------------------------------------------------------------


def test_the_database_and_its_wal_files_are_owner_only_under_a_permissive_umask(folder):
    path = folder / CHECKPOINT_FILE
    previous = os.umask(0)
    try:
        with SQLiteCheckpointStore(path, META) as store:
            store.commit(checkpoint(grown(empty_state(), 1), 1))
            files = sorted(folder.iterdir())
            modes = {file.name: file.stat().st_mode & 0o777 for file in files}
    finally:
        os.umask(previous)
    assert modes == {CHECKPOINT_FILE: 0o600, f"{CHECKPOINT_FILE}-wal": 0o600, f"{CHECKPOINT_FILE}-shm": 0o600}


def test_a_folder_others_may_enter_is_refused_with_the_fix(folder):
    folder.chmod(0o755)
    with pytest.raises(CheckpointError, match=f"must be owner-only \\(0700\\), and it is 0755.*chmod 700 {folder}"):
        SQLiteCheckpointStore(folder / CHECKPOINT_FILE, META)
    assert not (folder / CHECKPOINT_FILE).exists()


def test_a_database_others_may_read_is_refused_with_the_fix(folder):
    path = folder / CHECKPOINT_FILE
    SQLiteCheckpointStore(path, META).close()
    path.chmod(0o644)
    with pytest.raises(CheckpointError, match=f"must be owner-only \\(0600\\).*chmod 600 {path}"):
        SQLiteCheckpointStore(path, META)


def test_a_link_in_the_databases_place_is_refused(folder, tmp_path):
    target = tmp_path / "elsewhere.sqlite3"
    target.write_bytes(b"")
    (folder / CHECKPOINT_FILE).symlink_to(target)
    with pytest.raises(CheckpointError, match="not a regular file"):
        SQLiteCheckpointStore(folder / CHECKPOINT_FILE, META)


# -- robustness --------------------------------------------------------------------------------------

CHILD = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    from turnstate.durable.checkpoints import Checkpoint, CheckpointMeta, SQLiteCheckpointStore
    from turnstate.strategies.state import RuntimeState, TurnSpan

    path, where, size = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    meta = CheckpointMeta("openai.responses.v1", "1.0.0", "continuous_conversation", "digest-1")
    store = SQLiteCheckpointStore(path, meta)
    state = RuntimeState(adapter_id=meta.adapter_id, strategy=meta.strategy, payload={"items": []})

    def grown(state, turn):
        items = [*state.payload["items"], {"role": "user", "content": f"{turn}:" + os.urandom(size // 2).hex()}]
        return state.replace(payload={"items": items}, turns=(*state.turns, TurnSpan(start=turn, end=turn + 1)))

    for turn in range(5):
        state = grown(state, turn)
        store.commit(Checkpoint({"step": turn + 1}, state, facts=[{"step": turn + 1}]))
    (path.parent / "committed.json").write_text(state.to_json())
    if where == "inside the transaction":
        from turnstate.durable.checkpoints import sqlite as backend
        statements = backend._statements
        def killed(*arguments):  # the commit's rows written, then a kill before its COMMIT
            store._open_connection().create_function("die", 0, lambda: os.kill(os.getpid(), signal.SIGKILL))
            return [*statements(*arguments), ("SELECT die()", ())]
        backend._statements = killed
        store.commit(Checkpoint({"step": 6}, grown(state, 5).replace(payload={"items": [{"big": os.urandom(size * 25).hex()}]}, turns=()), facts=[{"step": 6}]))
    else:
        os.kill(os.getpid(), signal.SIGKILL)
    """
)


@pytest.mark.parametrize("size", [100, 200_000], ids=["small", "spilled to the WAL"])
def test_a_kill_inside_a_transaction_leaves_the_previous_checkpoint_intact(folder, size):
    """The large commit is past SQLite's page cache (2 MB), so its pages reach the WAL uncommitted."""
    path = folder / CHECKPOINT_FILE
    child = subprocess.run([sys.executable, "-c", CHILD, str(path), "inside the transaction", str(size)], timeout=60)
    assert child.returncode == -signal.SIGKILL
    if (
        size > 100
    ):  # the WAL holds the killed transaction's pages (random hex: about 5 MB deflated), past the committed ones
        assert (folder / f"{CHECKPOINT_FILE}-wal").stat().st_size > 3_000_000
    restored = reopened(path, meta=META)
    assert restored.sequence == 5
    assert restored.cursor == {"step": 5}
    assert [fact["step"] for fact in restored.facts] == [1, 2, 3, 4, 5]
    assert restored.state.to_json() == (folder / "committed.json").read_text()


def test_a_commit_that_returned_survives_a_kill_of_the_process(folder):
    path = folder / CHECKPOINT_FILE
    child = subprocess.run([sys.executable, "-c", CHILD, str(path), "after the commit", "100"], timeout=60)
    assert child.returncode == -signal.SIGKILL
    assert (folder / f"{CHECKPOINT_FILE}-wal").exists()  # the commits are in the WAL, not folded back
    restored = reopened(path)
    assert restored.sequence == 5
    assert restored.state.to_json() == (folder / "committed.json").read_text()


@pytest.mark.parametrize(
    "content",
    [b"not a database at all, " * 200, b"SQLite format 3\x00" + b"\xff" * 4000],
    ids=["text", "a damaged header"],
)
def test_a_corrupt_file_is_a_checkpoint_error_naming_it(folder, content):
    path = folder / CHECKPOINT_FILE
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
    path.write_bytes(content)
    for options in ({"meta": META}, {}):
        with pytest.raises(CheckpointError, match=str(path)):
            SQLiteCheckpointStore(path, **options)


def test_a_truncated_store_is_a_checkpoint_error_naming_it(folder):
    path = folder / CHECKPOINT_FILE
    state = empty_state()
    with SQLiteCheckpointStore(path, META) as store:
        for turn in range(1, 200):
            state = grown(state, turn)
            store.commit(checkpoint(state, turn))
    content = path.read_bytes()
    path.write_bytes(content[: len(content) // 2])
    with pytest.raises(CheckpointError, match=str(path)):
        reopened(path)


def test_a_foreign_sqlite_database_is_refused_as_not_a_checkpoint_store(folder):
    path = folder / CHECKPOINT_FILE
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
    with sqlite3.connect(path) as database:
        database.execute("CREATE TABLE notes (text TEXT)")
    with pytest.raises(CheckpointError, match=f"{path}: this is an SQLite database, but not a turnstate checkpoint"):
        SQLiteCheckpointStore(path, META)


def test_an_empty_file_left_by_a_killed_creation_is_initialized_by_the_next_writer(folder):
    path = folder / CHECKPOINT_FILE
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
    with pytest.raises(CheckpointError, match="never initialized"):
        SQLiteCheckpointStore(path)
    with SQLiteCheckpointStore(path, META) as store:
        assert store.latest() is None
        store.commit(checkpoint(grown(empty_state(), 1), 1))
    assert reopened(path).sequence == 1


def test_a_missing_store_is_an_error_to_a_reader_and_to_a_writer_that_may_not_create_it(folder):
    for options in ({}, {"meta": META, "create": False}):
        with pytest.raises(CheckpointError, match="there is no checkpoint store here"):
            SQLiteCheckpointStore(folder / CHECKPOINT_FILE, **options)


def test_a_second_writer_is_refused_while_the_first_holds_the_store_and_a_reader_is_not(folder):
    path = folder / CHECKPOINT_FILE
    with SQLiteCheckpointStore(path, META) as store:
        store.commit(checkpoint(grown(empty_state(), 1), 1))
        with pytest.raises(CheckpointError, match="another process has this checkpoint store open to write"):
            SQLiteCheckpointStore(path, META)
        assert reopened(path).sequence == 1
    SQLiteCheckpointStore(path, META).close()


def test_a_reader_open_beside_the_writer_rebuilds_the_newest_checkpoint_whole(folder):
    path = folder / CHECKPOINT_FILE
    state = grown(empty_state(), 1)
    with SQLiteCheckpointStore(path, META) as writer:
        writer.commit(checkpoint(state, 1))
        with SQLiteCheckpointStore(path) as reader:
            assert reader.latest().sequence == 1
            state = grown(state, 2)
            writer.commit(checkpoint(state, 2))
            restored = reader.latest()
    assert (restored.sequence, restored.state, len(restored.facts)) == (2, state, 2)


# -- retention ---------------------------------------------------------------------------------------


def run_with_store(runs: Path, name: str, age: timedelta) -> Path:
    folder = runs / name
    folder.mkdir(mode=0o700)
    (folder / "run_meta.json").write_text("{}")
    path = folder / CHECKPOINT_FILE
    with SQLiteCheckpointStore(path, META) as store:
        store.commit(checkpoint(grown(empty_state(), 1), 1))
    then = time.time() - age.total_seconds()
    os.utime(path, (then, then))
    return path


def test_prune_deletes_the_stores_of_runs_older_than_the_limit_and_nothing_else(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    old = run_with_store(runs, "old", timedelta(days=40))
    recent = run_with_store(runs, "recent", timedelta(days=2))
    foreign = runs / "foreign" / CHECKPOINT_FILE
    foreign.parent.mkdir()
    foreign.write_text("someone else's file of that name")
    os.utime(foreign, (0, 0))
    (runs / "loose-file").write_text("")
    assert prune(runs, timedelta(days=30)) == [old]
    assert not old.exists() and (old.parent / "run_meta.json").exists()
    assert recent.exists() and foreign.exists()


def test_prune_deletes_a_killed_runs_wal_and_shm_files_with_its_database(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    folder = runs / "killed"
    folder.mkdir(mode=0o700)
    child = subprocess.run([sys.executable, "-c", CHILD, str(folder / CHECKPOINT_FILE), "after", "100"], timeout=60)
    assert child.returncode == -signal.SIGKILL
    files = [folder / f"{CHECKPOINT_FILE}{suffix}" for suffix in ("-wal", "-shm", "")]
    for file in files:
        os.utime(file, (0, 0))
    assert prune(runs, timedelta(days=1)) == files
    assert sorted(path.name for path in folder.iterdir()) == ["committed.json"]


def test_prune_leaves_a_store_another_process_holds_open(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    path = run_with_store(runs, "live", timedelta(days=40))
    with SQLiteCheckpointStore(path, META):
        os.utime(path, (0, 0))
        os.utime(f"{path}-wal", (0, 0))
        os.utime(f"{path}-shm", (0, 0))
        assert prune(runs, timedelta(days=1)) == []
    assert path.exists()


def test_prune_refuses_a_missing_folder_and_a_limit_that_is_not_positive(tmp_path):
    with pytest.raises(CheckpointError, match="no folder of runs here"):
        prune(tmp_path / "missing", timedelta(days=1))
    with pytest.raises(ValueError, match="positive"):
        prune(tmp_path, timedelta(0))


# -- the default key: the user's key file (rule 6) ---------------------------------------------------


@pytest.fixture
def state_home(tmp_path, monkeypatch) -> Path:
    """No TURNSTATE_CHECKPOINT_KEY and a state folder of the test's own."""
    monkeypatch.delenv(KEY_VARIABLE)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return tmp_path / "state" / "turnstate"


def test_with_no_variable_set_a_new_store_is_sealed_with_a_key_file_made_owner_only_on_first_use(folder, state_home):
    path = folder / CHECKPOINT_FILE
    state = grown(empty_state(), 1)
    with SQLiteCheckpointStore(path, META) as store:
        assert store.encrypts_continuation
        store.commit(checkpoint(state, 1))
    key_file = state_home / KEY_FILE
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600 and len(key_file.read_text().strip()) >= 32
    assert SECRET.encode() not in b"".join(file.read_bytes() for file in folder.iterdir())
    with sqlite3.connect(path) as database:  # a random key needs no scrypt: HKDF derives it
        (kdf,) = database.execute("SELECT value FROM store WHERE name = 'kdf'").fetchone()
    assert json.loads(kdf) == {"name": "hkdf-sha256"}
    assert reopened(path).state == state  # the next open reads the same file
    other = folder / "other.sqlite3"
    with SQLiteCheckpointStore(other, META) as store:
        store.commit(checkpoint(state, 1))
    assert reopened(other).state == state  # the same key file, the same key


def test_a_store_written_opted_out_resumes_plain_under_the_key_file(folder, state_home, monkeypatch):
    path = folder / CHECKPOINT_FILE
    monkeypatch.setenv(KEY_VARIABLE, OPT_OUT)
    with SQLiteCheckpointStore(path, META) as store:
        assert not store.encrypts_continuation
        store.commit(checkpoint(grown(empty_state(), 1), 1))
    monkeypatch.delenv(KEY_VARIABLE)
    with SQLiteCheckpointStore(path, META, create=False) as store:  # a default key: no refusal
        assert not store.encrypts_continuation and store.latest().sequence == 1


def test_a_key_file_others_may_read_is_refused_naming_the_fix(folder, state_home):
    with SQLiteCheckpointStore(folder / CHECKPOINT_FILE, META):
        pass
    key_file = state_home / KEY_FILE
    key_file.chmod(0o644)
    with pytest.raises(CheckpointError, match=f"{key_file}: the checkpoint key file must be owner-only .* chmod 600"):
        SQLiteCheckpointStore(folder / "other.sqlite3", META)
