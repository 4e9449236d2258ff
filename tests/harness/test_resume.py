"""Resume (issue 22): a run killed at any named point of a turn goes on from its last checkpoint and
ends as the uninterrupted run with the same seed does: the same outcome and actions, no side effect
performed twice, no accepted turn lost, every provider call's usage counted exactly once.

Each kill is a real SIGKILL of a forked child playing the run (no finally block, no run_meta.json
written at the end); the resume is played here, as `turnstate resume` plays it."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from functools import cache
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from turnstate.adapters.contract import Usage
from turnstate.cli import main
from turnstate.durable.artifacts import sent_messages
from turnstate.durable.checkpoints import KEY_VARIABLE, OPT_OUT, CheckpointError, SQLiteCheckpointStore
from turnstate.durable.events import check_events, read_events
from turnstate.durable.layout import CALLS, CHECKPOINT_FILE, EVENTS, JOURNAL
from turnstate.durable.resume import ResumeError
from turnstate.session.endpoint import local_service_dir
from turnstate.session.profile import DEFAULT_PROFILE, PROFILES_DIR, Profile, load_profile
from turnstate.session.run_profile import run_profile
from turnstate.session.runner import Runner, RunResult
from turnstate.session.session import Point

from .test_run import with_changes

KEY = "a key of the resume tests, long enough"

VARIANTS = {  # every strategy and compaction variant, and the action as a tool call (DeepSeek)
    "manual_rolling": "local-manual-rolling.yaml",
    "previous_response_id": "local-openai-previous-response-id.yaml",
    "native_inline": "local-openai-continuous.yaml",
    "native_call": "local-anthropic-continuous.yaml",
    "harness_summary": "local-openai-harness-summary.yaml",
    "action_tools": "local-deepseek-continuous.yaml",
}
TURN_POINTS: tuple[Point, ...] = ("before_provider_call", "after_reply", "after_commit", "after_side_effect")
COMPACTION_POINTS: tuple[Point, ...] = ("during_compaction", "after_compaction_commit")
CASES = [
    *[(variant, point) for variant in VARIANTS for point in TURN_POINTS],
    *[(variant, point) for variant in ("native_call", "harness_summary") for point in COMPACTION_POINTS],
    ("native_inline", "after_compaction_commit"),
]


@pytest.fixture(autouse=True)
def no_variable_set(monkeypatch):
    """As a user runs: no TURNSTATE_CHECKPOINT_KEY, so the continuation is sealed with the key file
    (made in the session's XDG_STATE_HOME), and a resume restores it exactly."""
    monkeypatch.delenv(KEY_VARIABLE, raising=False)


@cache
def uninterrupted(variant: str) -> tuple[RunResult, list[str]]:
    """The variant's run played through, and its side effects' keys, in order."""
    os.environ.pop(KEY_VARIABLE, None)
    out = Path(os.environ["TURNSTATE_TEST_BASELINES"]) / variant
    result = Runner(load_profile(PROFILES_DIR / VARIANTS[variant]), out).run()
    assert result.outcome == "win", result.failure
    return result, journaled(result.artifacts)


def journaled(run_dir: Path) -> list[str]:
    return [json.loads(line)["key"] for line in (run_dir / JOURNAL).read_text().splitlines()]


@pytest.fixture(scope="session", autouse=True)
def baselines(tmp_path_factory):
    os.environ["TURNSTATE_TEST_BASELINES"] = str(tmp_path_factory.mktemp("baselines"))


def killed_run(profile: Profile, out: Path, point: Point, count: int) -> Path:
    """The run played in a forked child until the `count`th time it reaches `point`, where the
    child SIGKILLs itself; the run folder it left."""
    out.mkdir(mode=0o700, parents=True)
    pid = os.fork()
    if pid == 0:  # the child: never returns to pytest
        hits = 0

        def stop_at(reached: Point) -> None:
            nonlocal hits
            hits += reached == point
            if hits == count:
                os.kill(os.getpid(), signal.SIGKILL)

        try:
            Runner(profile, out, on_point=stop_at).run()
        finally:
            os._exit(3)  # the point never came
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, f"{point} #{count} was never reached"
    (run_dir,) = out.iterdir()
    return run_dir


def assert_resumed_as_uninterrupted(resumed: RunResult, baseline: RunResult, baseline_keys: list[str]) -> None:
    """Same ending, nothing performed twice, nothing accepted lost, every call counted once."""
    run_dir = resumed.artifacts
    meta = json.loads((run_dir / "run_meta.json").read_text())
    (resume,) = meta["resumes"]
    assert (resumed.outcome, resumed.accepted_actions, resumed.levels_won) == (
        baseline.outcome,
        baseline.accepted_actions,
        baseline.levels_won,
    )
    assert journaled(run_dir) == baseline_keys  # each action and reset once, in the same order
    store = SQLiteCheckpointStore(run_dir / CHECKPOINT_FILE)
    try:
        latest = store.latest()
    finally:
        store.close()
    steps = [fact["step"] for fact in latest.facts if fact["kind"] == "accepted"]
    assert steps == list(range(1, len(steps) + 1))  # every accepted turn, once
    assert check_events(run_dir / EVENTS) == []
    lost = Usage.from_dict(resume["lost_usage"])
    assert meta["provider_calls"] == baseline_calls(baseline) + resume["lost_calls"]
    assert same_tokens(resumed.usage, baseline.usage + lost)
    assert accepted_replies(run_dir) == accepted_replies(baseline.artifacts)  # the same play, turn by turn


def accepted_replies(run_dir: Path) -> list[tuple[str, str | None]]:
    """Each accepted reply's text and action, in order, as the event log holds them."""
    logged = [event for _, event in read_events(run_dir / EVENTS).events]
    return [
        (event.text, event.action)
        for event in logged
        if event.kind == "assistant_message" and event.status == "accepted"
    ]


def same_tokens(usage: Usage, expected: Usage) -> bool:
    """The same input, output and reasoning tokens. Cache reads and writes may differ: a provider's
    prompt cache lasts minutes and the local provider's its process, so a resumed run's first request
    after the kill reads less from it (never more)."""
    counts = ("input_tokens", "output_tokens", "reasoning_tokens")
    same = all(getattr(usage, name) == getattr(expected, name) for name in counts)
    return same and usage.cached_input_tokens <= expected.cached_input_tokens


def baseline_calls(result: RunResult) -> int:
    return json.loads((result.artifacts / "run_meta.json").read_text())["provider_calls"]


@pytest.mark.parametrize(("variant", "point"), CASES, ids=[f"{v}-{p}" for v, p in CASES])
def test_a_run_killed_at_each_named_point_resumes_to_the_uninterrupted_runs_ending(tmp_path, variant, point):
    baseline, keys = uninterrupted(variant)
    count = 1 if point in COMPACTION_POINTS else 4
    run_dir = killed_run(load_profile(PROFILES_DIR / VARIANTS[variant]), tmp_path / "runs", point, count)
    resumed = Runner(run_profile(run_dir), run_dir.parent).resume(run_dir)
    assert_resumed_as_uninterrupted(resumed, baseline, keys)


def test_a_long_reasoning_run_sigkilled_mid_game_with_no_variable_set_resumes_to_the_uninterrupted_win(tmp_path):
    """Issue 30's case: a 12-level continuous_conversation game whose beacons only the sealed reasoning
    remembers, SIGKILLed after 30 accepted turns. Keyless (before the key file), the resume forgot
    them and ran out its 400 actions; with the key file by default, it restores the continuation."""
    profile = with_changes(
        load_profile(PROFILES_DIR / VARIANTS["native_inline"]),
        environment={"options": {"levels": 12}},
        agent={"max_actions": 400},
    )
    baseline = Runner(profile, tmp_path / "baseline").run()
    assert baseline.outcome == "win", baseline.failure
    run_dir = killed_run(profile, tmp_path / "runs", "after_commit", 30)
    resumed = Runner(run_profile(run_dir), run_dir.parent).resume(run_dir)
    (resume,) = json.loads((run_dir / "run_meta.json").read_text())["resumes"]
    assert resume["continuation"] == "restored" and resume["checkpoint"] >= 30  # compactions commit too
    assert_resumed_as_uninterrupted(resumed, baseline, journaled(baseline.artifacts))


# -- the command line -------------------------------------------------------------------------------


def invoke(*args: str):
    return CliRunner().invoke(main, list(args))


def long_default_profile(folder: Path, levels: int) -> Path:
    data = load_profile(DEFAULT_PROFILE).model_dump(mode="json", exclude_none=True)
    data["environment"]["options"]["levels"] = levels
    data["agent"]["max_actions"] = 1000
    path = folder / "long.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_turnstate_run_sigkilled_at_a_random_turn_and_resumed_ends_with_the_uninterrupted_runs_outcome_and_totals(
    tmp_path, monkeypatch
):
    """Opted out of the key: the continuation is not kept, and the window is rebuilt exactly from the projection."""
    monkeypatch.setenv(KEY_VARIABLE, OPT_OUT)
    profile = long_default_profile(tmp_path, levels=8)
    baseline = Runner(load_profile(profile), tmp_path / "baseline").run()
    kill_after = random.Random(os.getpid()).randrange(3, baseline.accepted_actions - 3)
    runs = tmp_path / "runs"
    command = [sys.executable, "-m", "turnstate.cli", "run", str(profile), "--out", str(runs), "--json"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while process.poll() is None and len(list(runs.glob("*/step_*.json"))) < kill_after:
            time.sleep(0.005)
        process.send_signal(signal.SIGKILL)
    finally:
        process.wait()
    (run_dir,) = runs.iterdir()
    resumed = invoke("resume", str(run_dir), "--json")
    assert resumed.exit_code == 0, resumed.output
    assert "rebuilt from the conversation's plain texts: with TURNSTATE_CHECKPOINT_KEY=off" in resumed.stderr
    meta = json.loads(resumed.stdout)
    (resume,) = meta["resumes"]
    assert resume["continuation"] == "rebuilt from the projection" and resume["dropped_turns"] == 0
    assert (meta["outcome"], meta["accepted_actions"], meta["levels_won"]) == ("win", baseline.accepted_actions, 8)
    lost = Usage.from_dict(resume["lost_usage"])
    assert Usage.from_dict(meta["usage"]) == baseline.usage + lost, f"killed after {kill_after} steps"
    assert meta["provider_calls"] == baseline_calls(baseline) + resume["lost_calls"]
    assert journaled(run_dir) == journaled(baseline.artifacts)
    assert check_events(run_dir / EVENTS) == []


def test_resuming_a_run_that_ended_is_refused_naming_its_outcome(tmp_path):
    result = Runner(load_profile(DEFAULT_PROFILE), tmp_path).run()
    resumed = invoke("resume", str(result.artifacts))
    assert resumed.exit_code == 1
    assert f"{result.artifacts}: the run ended (win); there is nothing to resume" in resumed.output


def test_resuming_a_folder_that_is_not_a_run_names_the_missing_record(tmp_path):
    resumed = invoke("resume", str(tmp_path / "nothing"))
    assert resumed.exit_code == 1 and "run_meta.json: missing; fix: pass the folder of a run" in resumed.output


def test_resuming_an_encrypted_run_without_its_key_is_a_clear_error_not_a_fresh_continuation(tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_VARIABLE, KEY)  # a cluster's key, which this host's key file does not hold
    profile = load_profile(PROFILES_DIR / VARIANTS["native_inline"])
    run_dir = killed_run(profile, tmp_path / "runs", "after_commit", 2)
    for unset in (OPT_OUT, None):
        if unset is None:
            monkeypatch.delenv(KEY_VARIABLE)  # the key file's key instead
        else:
            monkeypatch.setenv(KEY_VARIABLE, unset)
        resumed = invoke("resume", str(run_dir))
        assert resumed.exit_code == 1 and KEY_VARIABLE in resumed.output and "Traceback" not in resumed.output
    monkeypatch.setenv(KEY_VARIABLE, "another key, long enough too")
    resumed = invoke("resume", str(run_dir))
    assert resumed.exit_code == 1 and KEY_VARIABLE in resumed.output and "Traceback" not in resumed.output


def test_prune_deletes_the_checkpoints_of_runs_older_than_asked_and_keeps_their_records(tmp_path):
    runs = tmp_path / "runs"
    old, new = (killed_run(load_profile(DEFAULT_PROFILE), runs / name, "after_commit", 2) for name in ("old", "new"))
    month_ago = time.time() - 31 * 86400
    for path in old.glob(CHECKPOINT_FILE + "*"):
        os.utime(path, (month_ago, month_ago))
    for folder in (old, new):  # both runs in one folder of runs
        folder.rename(runs / folder.name)
    assert local_service_dir(old.name).is_dir()  # a local run's provider kept its service while it could resume
    pruned = invoke("prune", str(runs), "--older-than", "30d", "--json")
    assert pruned.exit_code == 0, pruned.output
    deleted = [Path(path) for path in json.loads(pruned.output)["deleted"]]
    assert {path.parent for path in deleted} == {runs / old.name} and runs / old.name / CHECKPOINT_FILE in deleted
    assert not local_service_dir(old.name).exists()  # the run's provider state goes with its checkpoints
    assert (runs / new.name / CHECKPOINT_FILE).exists() and (runs / old.name / EVENTS).exists()
    resumed = invoke("resume", str(runs / old.name))
    assert resumed.exit_code == 1 and "there is no checkpoint store here" in resumed.output


def test_prune_of_a_sweeps_folder_reaches_its_runs_and_says_the_time_as_given(tmp_path):
    sweep = tmp_path / "sweeps" / "long"  # a sweep writes sweeps/<id>/runs/<key>/<run-id>/
    run = killed_run(
        load_profile(DEFAULT_PROFILE), sweep / "runs" / "local-manual-rolling-beacon_grid-s0-r0", "after_commit", 2
    )
    month_ago = time.time() - 31 * 86400
    for path in run.glob(CHECKPOINT_FILE + "*"):
        os.utime(path, (month_ago, month_ago))
    pruned = invoke("prune", str(sweep), "--older-than", "30d")
    assert pruned.exit_code == 0, pruned.output
    assert pruned.output.splitlines()[0] == f"deleted the checkpoints of 1 run older than 30 days in {sweep}"
    assert not (run / CHECKPOINT_FILE).exists() and (run / EVENTS).exists()


@pytest.mark.parametrize("given", ["30", "0d", "3w", "-1h"])
def test_prune_refuses_a_time_it_cannot_read(tmp_path, given):
    pruned = invoke("prune", str(tmp_path), "--older-than", given)
    assert pruned.exit_code == 2 and "give a positive number and a unit: 30d, 12h, 90m or 3600s" in pruned.output


# -- model switch -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "to",
    ["local-anthropic-continuous.yaml", "local-manual-rolling.yaml"],
)
def test_a_switch_mid_level_rebuilds_from_the_projection_keeps_the_hidden_fact_and_the_run_wins(tmp_path, to):
    """From a Responses continuous run, killed after its third turn (the level's beacon was shown at the
    first and only then), to Anthropic, or to manual_rolling over Chat Completions."""
    source = load_profile(PROFILES_DIR / VARIANTS["native_inline"])
    run_dir = killed_run(source, tmp_path / "runs", "after_commit", 3)
    target = load_profile(PROFILES_DIR / to)
    resumed = Runner(target, run_dir.parent).resume(run_dir, switch=True)
    assert resumed.outcome == "win", resumed.failure
    meta = json.loads((run_dir / "run_meta.json").read_text())
    (resume,) = meta["resumes"]
    switched = resume["switched"]
    assert switched["from"]["adapter_id"] == "openai.responses.v1"
    assert switched["to"]["adapter_id"] == target.runtime.adapter_id
    assert switched["to"]["strategy"] == target.runtime.strategy
    assert resume["continuation"] == "rebuilt from the projection" and resume["step"] == 3
    assert "the continuation" in switched["dropped"]
    first_after = json.dumps(sent_messages(run_dir, 4))  # the switched adapter's first request
    assert "BEACON (level 1)" in first_after  # the hidden fact, from the projection
    assert "encrypted_content" not in first_after
    keys = journaled(run_dir)
    assert len(keys) == len(set(keys)) and keys[:3] == ["step 1", "step 2", "step 3"]  # none performed twice
    assert check_events(run_dir / EVENTS) == []
    store = SQLiteCheckpointStore(run_dir / CHECKPOINT_FILE)
    try:
        assert store.meta.adapter_id == target.runtime.adapter_id  # recorded with the first commit after it
    finally:
        store.close()


def test_a_renamed_run_folder_resumes_on_its_providers_service_which_is_keyed_by_the_run_id(tmp_path):
    """previous_response_id's handles live in the local provider's service: keyed by the folder's
    name, a renamed run lost them and failed; keyed by the run id run_meta.json keeps, it wins."""
    baseline, keys = uninterrupted("previous_response_id")
    run_dir = killed_run(
        load_profile(PROFILES_DIR / VARIANTS["previous_response_id"]), tmp_path / "runs", "after_commit", 4
    )
    renamed = run_dir.rename(run_dir.with_name("renamed"))
    resumed = Runner(run_profile(renamed), renamed.parent).resume(renamed)
    assert (
        resumed.run_id == run_dir.name and json.loads((renamed / "run_meta.json").read_text())["run_id"] == run_dir.name
    )
    assert (resumed.outcome, resumed.accepted_actions) == (baseline.outcome, baseline.accepted_actions)
    assert journaled(renamed) == keys


def test_a_switch_to_another_game_is_refused_naming_the_fix(tmp_path):
    run_dir = killed_run(load_profile(DEFAULT_PROFILE), tmp_path / "runs", "after_commit", 2)
    other = with_changes(
        load_profile(DEFAULT_PROFILE), environment={"name": "beacon_grid", "seed": 9, "options": {"levels": 3}}
    )
    with pytest.raises(ResumeError, match="not the game; fix: give the profile the run's environment section"):
        Runner(other, run_dir.parent).resume(run_dir, switch=True)


def test_the_readmes_switch_to_a_shipped_profile_plays_the_runs_game_and_says_so(tmp_path):
    """`turnstate resume RUN --profile local-anthropic-continuous`: the shipped profile's environment
    section is another game's (3 levels), so the switch plays the run's (8) and says it does."""
    profile = with_changes(
        load_profile(DEFAULT_PROFILE), environment={"options": {"levels": 8}}, agent={"max_actions": 500}
    )
    run_dir = killed_run(profile, tmp_path / "runs", "after_commit", 5)
    resumed = invoke("resume", str(run_dir), "--profile", "local-anthropic-continuous", "--json")
    assert resumed.exit_code == 0, resumed.output
    assert resumed.stderr.splitlines()[0] == (
        'note: the switch plays the run\'s game (beacon_grid, seed 0, options {"levels": 8}), '
        'not the profile\'s (beacon_grid, seed 0, options {"levels": 3})'
    )
    meta = json.loads(resumed.stdout)
    assert (meta["outcome"], meta["levels_won"]) == ("win", 8)
    assert meta["resumes"][0]["switched"]["to"]["adapter_id"] == "anthropic.messages.v1"


def test_a_switched_runs_report_and_diagrams_draw_each_strategy_it_played(tmp_path):
    run_dir = killed_run(load_profile(DEFAULT_PROFILE), tmp_path / "runs", "after_commit", 5)
    resumed = invoke("resume", str(run_dir), "--profile", "local-anthropic-continuous")
    assert resumed.exit_code == 0 and "warning: no report" not in resumed.stderr, resumed.stderr
    page = (run_dir / "report.html").read_text()
    assert 'id="diagram-manual_rolling"' in page and 'id="diagram-continuous_conversation-native_call"' in page
    drawn = invoke("diagrams", "--run", str(run_dir), "--out", str(tmp_path / "drawn"))
    assert drawn.exit_code == 0, drawn.stderr
    assert sorted(path.name for path in (tmp_path / "drawn").glob("*.svg")) == [
        "continuous_conversation.native_call.svg",
        "manual_rolling.svg",
    ]


def test_a_switch_whose_action_budget_is_already_spent_is_refused_naming_both_numbers(tmp_path):
    run_dir = killed_run(load_profile(DEFAULT_PROFILE), tmp_path / "runs", "after_commit", 6)
    small = with_changes(load_profile(PROFILES_DIR / VARIANTS["native_call"]), agent={"max_actions": 5})
    path = tmp_path / "small.yaml"
    path.write_text(yaml.safe_dump(small.model_dump(mode="json", exclude_none=True)))
    steps, meta = sorted(run_dir.glob("step_*.json")), (run_dir / "run_meta.json").read_bytes()
    resumed = invoke("resume", str(run_dir), "--profile", str(path))
    assert resumed.exit_code == 1
    assert resumed.stderr.splitlines()[-1] == (
        f"error: {run_dir}: the switch's agent.max_actions 5 is spent: the run has accepted 6 actions; "
        "fix: give the profile a max_actions above 6"
    )
    assert sorted(run_dir.glob("step_*.json")) == steps and (run_dir / "run_meta.json").read_bytes() == meta


def test_a_resume_under_another_profile_without_a_switch_is_refused_naming_what_differs(tmp_path):
    run_dir = killed_run(load_profile(DEFAULT_PROFILE), tmp_path / "runs", "after_commit", 2)
    other = load_profile(PROFILES_DIR / "local-anthropic-continuous.yaml")
    with pytest.raises(CheckpointError, match="adapter_id: was openai.chat_completions.v1, now anthropic.messages.v1"):
        Runner(other, run_dir.parent).resume(run_dir)


def test_a_keyless_resume_writes_the_last_replys_calls_as_text_and_reads_their_results_as_input(tmp_path, monkeypatch):
    """A projection cannot carry the signature Anthropic (thinking on) and Gemini demand on an open
    tool loop's calls, so a rebuilt state ends with the killed turn's calls as text: here DeepSeek's
    action call, whose frame then comes as the next input; the calls and results stay paired in the log."""
    monkeypatch.setenv(KEY_VARIABLE, OPT_OUT)
    profile = load_profile(PROFILES_DIR / VARIANTS["action_tools"])
    run_dir = killed_run(profile, tmp_path / "runs", "after_commit", 4)
    resumed = Runner(run_profile(run_dir), run_dir.parent).resume(run_dir)
    assert resumed.outcome == "win", resumed.failure
    first_after = sent_messages(run_dir, 5)
    (last_reply,) = [message for message in first_after if message["role"] == "assistant"][-1:]
    assert "ACTION: " in last_reply["content"]
    assert "LEVEL 1/3" in first_after[-1]["content"] and first_after[-1]["role"] == "user"
    assert check_events(run_dir / EVENTS) == []
    keys = journaled(run_dir)  # the reasoning that held the beacon is not in the projection: play may differ
    assert len(keys) == len(set(keys)) and keys[:4] == uninterrupted("action_tools")[1][:4]


@pytest.mark.parametrize("journal", [JOURNAL, CALLS])
def test_a_resume_names_a_journal_line_it_cannot_read_and_plays_nothing(tmp_path, journal):
    run_dir = killed_run(load_profile(DEFAULT_PROFILE), tmp_path / "runs", "after_commit", 3)
    with (run_dir / journal).open("ab") as file:
        file.write(b"not a line of it\n")
    steps = sorted(run_dir.glob("step_*.json"))
    resumed = invoke("resume", str(run_dir))
    assert resumed.exit_code == 1 and "Traceback" not in resumed.output
    assert f"{run_dir / journal}: line " in resumed.output
    assert sorted(run_dir.glob("step_*.json")) == steps  # no turn was played
