"""A switched run killed right after its first checkpoint under the new profile (issue 30).

`turnstate resume RUN --profile OTHER` rebuilds the run's state for OTHER; the first commit after it
records OTHER's configuration in the checkpoint store and seals OTHER's continuation. A kill right
there leaves a run that is OTHER's, with one switch in run_meta.json: a plain `turnstate resume`
must go on with OTHER from that checkpoint, its continuation restored (with no TURNSTATE_CHECKPOINT_KEY
set: the key file in the session's XDG_STATE_HOME), and end exactly as the switched run does
uninterrupted: the same outcome, steps, calls and tokens, the same actions performed once each."""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

from turnstate.adapters.contract import Usage
from turnstate.durable.checkpoints import KEY_VARIABLE
from turnstate.session.profile import DEFAULT_PROFILE, PROFILES_DIR, Profile, load_profile
from turnstate.session.run_profile import run_profile, switched_profile
from turnstate.session.runner import Runner
from turnstate.session.session import Point

from .test_resume import accepted_replies, invoke, journaled, killed_run, same_tokens
from .test_run import read_meta, read_steps

COMMITS: tuple[Point, ...] = ("after_commit", "after_compaction_commit")
TARGET = "local-anthropic-continuous"  # its continuation (signed thinking) is sealed at each checkpoint


def killed_switch(profile: Profile, run_dir: Path) -> None:
    """The switch to `profile` played in a forked child until its first commit, where the child
    SIGKILLs itself (test_resume.killed_run, for a switch rather than a run)."""
    pid = os.fork()
    if pid == 0:  # the child: never returns to pytest

        def stop_at(reached: Point) -> None:
            if reached in COMMITS:
                os.kill(os.getpid(), signal.SIGKILL)

        try:
            Runner(profile, run_dir.parent, on_point=stop_at).resume(run_dir, switch=True)
        finally:
            os._exit(3)  # the point never came
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, "the switch never committed"


def ending(run_dir: Path) -> dict:
    meta = read_meta(run_dir)
    keys = ("outcome", "levels_won", "turns", "accepted_actions", "failed_attempts", "compactions", "provider_calls")
    return {key: meta[key] for key in keys}


def test_a_switched_run_killed_after_its_first_checkpoint_resumes_to_the_uninterrupted_switchs_ending(
    tmp_path, monkeypatch
):
    monkeypatch.delenv(KEY_VARIABLE, raising=False)
    run_dir = killed_run(load_profile(DEFAULT_PROFILE), tmp_path / "runs", "after_commit", 5)
    copy = Path(shutil.copytree(run_dir, tmp_path / "copy" / run_dir.name))  # the same run, killed the same way

    switched = invoke("resume", str(run_dir), "--profile", TARGET, "--json")  # uninterrupted
    assert switched.exit_code == 0, switched.output
    profile, _ = switched_profile(run_profile(copy), load_profile(PROFILES_DIR / f"{TARGET}.yaml"))
    killed_switch(profile, copy)
    meta = read_meta(copy)  # the kill left the run OTHER's, still running
    assert meta["outcome"] == "running" and meta["settings"] == profile.model_dump(mode="json")
    resumed = invoke("resume", str(copy), "--json")  # as a user would: no --profile
    assert resumed.exit_code == 0, resumed.output

    assert ending(copy) == ending(run_dir) and ending(copy)["outcome"] == "win"
    first, again = read_meta(copy)["resumes"]
    assert first["switched"] == read_meta(run_dir)["resumes"][0]["switched"]
    assert (again["checkpoint"], again["continuation"], again["switched"]) == (6, "restored", None)
    assert again["lost_calls"] == 0 and again["cut_events"] == 0
    assert journaled(copy) == journaled(run_dir)  # each action once, in the same order
    assert accepted_replies(copy) == accepted_replies(run_dir)  # the same play, turn by turn
    lost = set(first["lost_records"]) | set(again["lost_records"])  # step records the kills took
    steps = {step["step"]: (step["action"], step["messages_sent"]) for step in read_steps(run_dir)}
    assert {step["step"]: (step["action"], step["messages_sent"]) for step in read_steps(copy)} == {
        number: step for number, step in steps.items() if number not in lost
    }
    usage, expected = (Usage.from_dict(read_meta(folder)["usage"]) for folder in (copy, run_dir))
    assert same_tokens(usage, expected)
