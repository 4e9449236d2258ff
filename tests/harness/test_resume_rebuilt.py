"""A resume that rebuilds the accepted state from the projection (the continuation opted out, or a
switch) keeps what the run's harness summaries kept, and says on the console what it did."""

from __future__ import annotations

import json

import pytest

from tests.harness.test_resume import VARIANTS, invoke, killed_run
from turnstate.durable.artifacts import sent_messages, step_transitions
from turnstate.durable.checkpoints import KEY_VARIABLE, OPT_OUT
from turnstate.durable.resume import committed_summary, resume_notes
from turnstate.session.profile import PROFILES_DIR, load_profile
from turnstate.strategies.summary import BRIDGE


@pytest.fixture
def keyless(monkeypatch):
    monkeypatch.setenv(KEY_VARIABLE, OPT_OUT)


def test_a_keyless_resume_after_a_harness_summary_starts_from_that_summary_and_says_so(tmp_path, keyless):
    """Without the continuation, the window is rebuilt as the summary left it: the summary's bridge,
    then the turns after it; not every turn of the run cut to fit, which loses what the summary kept."""
    profile = load_profile(PROFILES_DIR / VARIANTS["harness_summary"])
    run_dir = killed_run(profile, tmp_path / "runs", "after_compaction_commit", 1)
    resumed = invoke("resume", str(run_dir))
    assert resumed.exit_code == 0, resumed.output
    (resume,) = json.loads((run_dir / "run_meta.json").read_text())["resumes"]
    assert resume["continuation"] == "rebuilt from the projection" and resume["from_summary"] == 1
    assert "starts from the run's summary 1 (compaction_001.json)" in resumed.output
    assert "TURNSTATE_CHECKPOINT_KEY=off" in resumed.output
    summary = committed_summary(run_dir, 1)
    assert summary is not None and summary.step == resume["step"]  # the kill came right after its commit
    bridge = summary.bridge
    assert bridge.startswith(BRIDGE.split("{summary}")[0])
    system, *history = sent_messages(run_dir, resume["step"] + 1)
    assert system["role"] == "system" and history[0]["role"] == "user"
    assert history[0]["content"].startswith(bridge)  # it opens the rebuilt history
    # only the summary and the turns the window held after it: level 1's frames, which the summary
    # replaced (it was made in level 2), are not sent again
    assert not [message for message in history if "LEVEL 1/3" in message["content"]]
    assert json.loads((run_dir / "run_meta.json").read_text())["outcome"] == "win"


def test_the_resume_notes_name_a_rebuild_what_it_left_out_and_a_start_over():
    rebuilt = {"continuation": "rebuilt from the projection", "dropped_turns": 4, "from_summary": None}
    (note,) = resume_notes({**rebuilt, "switched": {"from": {}, "to": {}}})
    assert "a switch drops the provider's opaque state" in note
    assert "the 4 oldest turns did not fit the context budget and were left out" in note
    (note,) = resume_notes({**rebuilt, "dropped_turns": 0, "switched": None, "torn_lines": []})
    assert "TURNSTATE_CHECKPOINT_KEY=off" in note and "left out" not in note
    assert resume_notes({"continuation": "restored", "torn_lines": ["events.jsonl"]}) == [
        "cut a torn last line (a kill mid-write) off events.jsonl"
    ]
    (note,) = resume_notes({"continuation": "none (no turn was accepted: the run starts again)"})
    assert "the run started again from its first step" in note


def test_after_a_resume_each_step_record_still_names_the_lines_of_its_own_transitions(tmp_path):
    """The writer counts the log's lines when it reopens it, so the resumed steps' pointers land on
    their own transitions, after any the interrupted turn left in the log."""
    run_dir = killed_run(load_profile(PROFILES_DIR / VARIANTS["harness_summary"]), tmp_path / "runs", "after_reply", 12)
    assert invoke("resume", str(run_dir)).exit_code == 0
    spans = []
    for path in sorted(run_dir.glob("step_*.json")):
        record = json.loads(path.read_text())
        fired = step_transitions(run_dir, record)
        assert fired[-1]["trigger"] == "ActionAccepted", path.name
        spans.append((record["transitions"]["first"], record["transitions"]["count"]))
    assert all(first + count <= after for (first, count), (after, _) in zip(spans, spans[1:], strict=False))
    assert len(spans) > 12  # steps played after the resume are among them
