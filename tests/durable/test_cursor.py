"""A checkpoint's cursor is a typed, versioned value (durable/cursor.py): written with its version,
read back whole, a cursor written before the version was kept read as version 1, and a later
version refused by a resume in one line naming the fix, before anything is cut or played."""

from __future__ import annotations

import json

import pytest

from tests.harness.test_resume import killed_run
from turnstate.adapters.contract import Usage
from turnstate.cli import main
from turnstate.durable.checkpoints import Checkpoint, open_run_store
from turnstate.durable.cursor import Cursor, CursorError, RunCounts
from turnstate.durable.layout import EVENTS
from turnstate.session.profile import DEFAULT_PROFILE, load_profile

CURSOR = Cursor(
    RunCounts(
        step=7, turn=8, accepted_actions=6, failed_attempts=2, tool_rounds=1, levels_won=1, summaries=1, compactions=2
    ),
    machine_state="CompactionScheduled",
    window_turns=5,
    usage=Usage(input_tokens=1200, cached_input_tokens=800, output_tokens=90),
    provider_calls=11,
)


def test_a_cursor_is_written_with_its_version_and_read_back_whole():
    record = CURSOR.to_record()
    assert record["version"] == Cursor.VERSION == 1 and record["step"] == 7 and record["turn"] == 8
    assert Cursor.from_record(json.loads(json.dumps(record))) == CURSOR


def test_a_cursor_written_before_the_version_was_kept_is_read_as_version_1():
    record = {key: value for key, value in CURSOR.to_record().items() if key != "version"}
    assert Cursor.from_record(record) == CURSOR


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"version": 2}, "the checkpoint's cursor is version 2, and this turnstate reads version 1; fix: resume"),
        ({"step": "seven"}, "the checkpoint's cursor cannot be read (ValueError"),
        ({"usage": None}, "the checkpoint's cursor cannot be read ("),
    ],
)
def test_a_cursor_of_a_later_version_or_with_a_bad_field_is_refused_naming_it(change, said):
    with pytest.raises(CursorError, match=said.replace("(", r"\(")):
        Cursor.from_record({**CURSOR.to_record(), **change})


def test_a_resume_of_a_checkpoint_whose_cursor_is_of_a_later_version_is_one_line_and_cuts_nothing(
    tmp_path, capsys, monkeypatch
):
    run_dir = killed_run(load_profile(DEFAULT_PROFILE), tmp_path / "runs", "after_commit", 3)
    reader = open_run_store(run_dir)
    restored = reader.latest()
    meta = reader.meta
    reader.close()
    assert restored is not None and Cursor.from_record(restored.cursor).counts.step == 3
    store = open_run_store(run_dir, meta)  # a later turnstate's checkpoint on top
    store.commit(Checkpoint({**restored.cursor, "version": 2}, restored.state, (), restored.projection))
    store.close()
    log = (run_dir / EVENTS).read_bytes()
    with pytest.raises(SystemExit) as exited:
        main(["resume", str(run_dir)])
    assert exited.value.code == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "Traceback" not in error
    assert "cursor is version 2, and this turnstate reads version 1; fix: resume the run with the turnstate" in error
    assert (run_dir / EVENTS).read_bytes() == log  # refused before the log was cut to the checkpoint
