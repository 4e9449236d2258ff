"""Durable runs (issue 22): every accepted turn is a checkpoint in the run folder's store before its
action is performed, with the accepted reply as a durable fact, the cursor, the events logged since
the last checkpoint and the accepted state; a run killed at any moment keeps every turn it accepted."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import orjson
import yaml

from turnstate.durable.checkpoints import KEY_VARIABLE, OPT_OUT, SQLiteCheckpointStore
from turnstate.durable.events import check_events, read_events
from turnstate.durable.layout import CHECKPOINT_FILE, EVENTS
from turnstate.durable.resume import checkpointed_events
from turnstate.session.profile import DEFAULT_PROFILE, PROFILES_DIR, load_profile
from turnstate.session.runner import Runner

from .test_run import read_steps, with_changes


def restored(run_dir: Path):
    store = SQLiteCheckpointStore(run_dir / CHECKPOINT_FILE)
    try:
        return store.latest()
    finally:
        store.close()


def test_every_accepted_turn_is_a_checkpoint_that_rebuilds_the_sealed_accepted_state_exactly(tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_VARIABLE, "a key of the test, long enough")
    profile = with_changes(
        load_profile(PROFILES_DIR / "local-openai-harness-summary.yaml"),
        environment={"name": "catalog_hunt", "seed": 3, "options": {"levels": 2}},
    )
    result = Runner(profile, tmp_path).run()
    assert result.outcome == "win", result.failure
    latest = restored(result.artifacts)
    steps = read_steps(result.artifacts)
    assert latest.sequence == len(steps) == latest.cursor["step"]
    assert latest.state == result.accepted_state  # encrypted reasoning and all
    accepted = [fact for fact in latest.facts if fact["kind"] == "accepted"]
    assert [(fact["step"], fact["action"]) for fact in accepted] == [(s["step"], s["action"]) for s in steps]
    assert [call["name"] for fact in accepted for call in fact["tool_calls"]] == ["read_catalog"] * 2
    receipts = [fact["key"] for fact in latest.facts if fact["kind"] == "receipt"]
    assert (
        receipts == [f"step {fact['step']}" for fact in accepted if fact["action"]][:-1]
    )  # the last one's is not due yet
    logged = [orjson.loads(orjson.dumps(event)) for _, event in read_events(result.artifacts / EVENTS).events]
    # The projection is the log, all but the last checkpoint's own event (which follows its commit):
    assert checkpointed_events(result.artifacts, latest.projection) == logged[:-1]
    assert latest.cursor["usage"]["total_tokens"] <= result.usage.total_tokens
    assert stat.S_IMODE(result.artifacts.stat().st_mode) == 0o700
    assert stat.S_IMODE((result.artifacts / CHECKPOINT_FILE).stat().st_mode) == 0o600


def test_a_run_killed_mid_game_keeps_every_turn_it_accepted_and_a_sound_event_log(tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_VARIABLE, "a key of the test, long enough")  # the run's, and the reader's
    data = load_profile(DEFAULT_PROFILE).model_dump(mode="json", exclude_none=True)
    data["environment"] = {"name": "beacon_grid", "seed": 5, "options": {"levels": 200}}
    data["agent"]["max_actions"] = 5000
    profile_path = tmp_path / "long.yaml"
    profile_path.write_text(yaml.safe_dump(data))
    runs = tmp_path / "runs"
    command = [sys.executable, "-m", "turnstate.cli", "run", str(profile_path), "--out", str(runs)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=os.environ.copy())
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(list(runs.glob("*/step_*.json"))) < 30:
            time.sleep(0.05)
        os.kill(process.pid, signal.SIGKILL)
    finally:
        process.wait()
    (run_dir,) = runs.iterdir()
    written = len(list(run_dir.glob("step_*.json")))
    assert written >= 30
    latest = restored(run_dir)
    # A step's record is written by a thread after its checkpoint: the store is never behind the records.
    assert latest.cursor["step"] >= written and latest.sequence == latest.cursor["step"]
    assert [fact["step"] for fact in latest.facts if fact["kind"] == "accepted"] == list(range(1, latest.sequence + 1))
    assert latest.state.validate_for(data["runtime"]["adapter_id"], "manual_rolling").turns  # a window of turns
    assert check_events(run_dir / EVENTS) == []  # a kill tears at most its last line, which readers skip


def test_opted_out_of_the_key_the_checkpoints_keep_no_continuation_and_no_opaque_value(tmp_path, monkeypatch):
    """The provider's opaque state is never at rest in plain text; the other layers are kept."""
    monkeypatch.setenv(KEY_VARIABLE, OPT_OUT)
    result = Runner(load_profile(PROFILES_DIR / "local-openai-continuous.yaml"), tmp_path).run()
    assert result.outcome == "win", result.failure
    latest = restored(result.artifacts)
    assert latest.state is None and latest.sequence == latest.cursor["step"] == result.accepted_actions
    sealed = [item["encrypted_content"] for item in result.accepted_state.items if "encrypted_content" in item]
    assert sealed  # the run carried opaque reasoning ...
    stored = (result.artifacts / CHECKPOINT_FILE).read_bytes()
    assert not any(value.encode() in stored for value in sealed)  # ... which the store never holds


def test_a_ctrl_c_held_while_the_opening_run_meta_is_written_ends_the_run_interrupted_not_running(
    tmp_path, monkeypatch
):
    """The opening's run_meta.json ("running") is written with Ctrl-C held; one that arrived meanwhile
    lands as the opening returns, and the run must still record how it ended (a sweep's Ctrl-C on Ray
    left a run `running` so)."""
    from turnstate.session.run_meta import RunMeta

    written = RunMeta.write

    def write_and_press_ctrl_c(self, *args, **kwargs):
        written(self, *args, **kwargs)
        if kwargs.get("outcome") == "running":
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(RunMeta, "write", write_and_press_ctrl_c)
    runner = Runner(load_profile(DEFAULT_PROFILE), tmp_path)
    try:
        runner.run()
    except KeyboardInterrupt:
        pass
    else:
        raise AssertionError("the Ctrl-C was lost")
    (run_dir,) = tmp_path.iterdir()
    assert orjson.loads((run_dir / "run_meta.json").read_bytes())["outcome"] == "interrupted"
