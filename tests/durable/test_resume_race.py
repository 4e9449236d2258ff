"""Two processes resume the same run at once, again and again, and either is SIGKILLed at a random
moment (at least 200 kills a store): the one writer per run (SQLite's lock, PostgreSQL's lease) keeps
them from interleaving, so the run ends as its uninterrupted play does: no action performed twice, no
accepted turn lost, each provider call's usage counted once. On both stores."""

from __future__ import annotations

import json
import os
import random
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.harness.test_resume import accepted_replies, journaled, same_tokens
from turnstate.adapters.contract import Usage
from turnstate.durable.checkpoints import KEY_VARIABLE, OPT_OUT, CheckpointError, open_run_store
from turnstate.durable.checkpoints.stores import STORE_VARIABLE
from turnstate.durable.events import check_events
from turnstate.durable.layout import CALLS, EVENTS, RUN_META
from turnstate.local_provider.server import LocalProvider
from turnstate.session.profile import DEFAULT_PROFILE, Profile, load_profile
from turnstate.session.run_profile import run_profile
from turnstate.session.runner import Runner

KILLS = 200
REFUSED = 4  # a child's exit status when its open was refused: another process holds the run


def long_profile(folder: Path, base_url: str) -> Profile:
    """The default profile on a long game, against the local provider at `base_url` as a remote
    provider is reached (a run's own embedded provider would lock its service folder first: the
    race would be decided there, before the store)."""
    data = load_profile(DEFAULT_PROFILE).model_dump(mode="json", exclude_none=True)
    data["environment"]["options"]["levels"] = 200  # 60 ended after 164 kills on a loaded machine
    data["agent"]["max_actions"] = 8000
    data["client"] = {"base_url": base_url, "api_key_env": "TURNSTATE_RACE_KEY"}
    path = folder / "long.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_profile(path)


def forked(play: object, errors: Path) -> int:
    """`play()` in a forked child that never returns to pytest: exit 0 when it ended, REFUSED when
    the run's one writer was another process, 1 for any other failure (written to errors/<pid>)."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            play()  # type: ignore[operator]
            code = 0
        except CheckpointError as error:
            code = REFUSED if "open to write" in str(error) else 1
            if code == 1:
                (errors / str(os.getpid())).write_text(str(error))
        except BaseException as error:
            (errors / str(os.getpid())).write_text(f"{type(error).__name__}: {error}")
        finally:
            os._exit(code)
    return pid


def reaped(pid: int) -> int | None:
    """The child's exit status, or None if it was killed."""
    _, status = os.waitpid(pid, 0)
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else None


@pytest.fixture(params=["sqlite", "postgres"])
def store(request, monkeypatch) -> str:
    monkeypatch.setenv(KEY_VARIABLE, OPT_OUT)  # exact when rebuilt from the projection
    if request.param == "postgres":
        monkeypatch.setenv(STORE_VARIABLE, request.getfixturevalue("postgres_url"))
    else:
        monkeypatch.delenv(STORE_VARIABLE, raising=False)
    return str(request.param)


@pytest.fixture
def provider(monkeypatch) -> Iterator[str]:
    """A local provider serving in this process's thread, which the forked runs call over HTTP."""
    monkeypatch.setenv("TURNSTATE_RACE_KEY", "race-key")
    with LocalProvider() as served:
        yield served.openai_base_url


def test_two_processes_resuming_one_run_under_random_sigkills_perform_nothing_twice_and_lose_nothing(
    tmp_path, store, provider
):
    profile = long_profile(tmp_path, provider)
    baseline = Runner(profile, tmp_path / "baseline").run()
    assert baseline.outcome == "win", baseline.failure
    runs = tmp_path / "runs"
    runs.mkdir(mode=0o700)
    chance = random.Random(os.getpid())
    errors = tmp_path / "errors"
    errors.mkdir()
    first = forked(lambda: Runner(profile, runs).run(), errors)
    while not list(runs.glob("*/step_000002.json")):
        time.sleep(0.001)
    os.kill(first, signal.SIGKILL)
    reaped(first)
    (run_dir,) = runs.iterdir()

    def resume() -> None:
        Runner(run_profile(run_dir), runs).resume(run_dir)

    kills = ended = refused = 0
    while kills < KILLS and not ended:
        pair = [forked(resume, errors), forked(resume, errors)]
        chance.shuffle(pair)
        for pid in pair:
            time.sleep(chance.uniform(0, 0.08))
            try:
                os.kill(pid, signal.SIGKILL)
                kills += 1
            except ProcessLookupError:
                pass
        statuses = [reaped(pid) for pid in pair]
        refused += statuses.count(REFUSED)
        ended += statuses.count(0)
        assert 1 not in statuses, [path.read_text() for path in errors.iterdir()]
    assert kills >= KILLS, f"the run ended after {kills} kills"
    assert refused, "the two never met"
    finished = Runner(run_profile(run_dir), runs).resume(run_dir)

    meta = json.loads((run_dir / RUN_META).read_text())
    assert (finished.outcome, finished.accepted_actions, finished.levels_won) == (
        baseline.outcome,
        baseline.accepted_actions,
        baseline.levels_won,
    )
    assert journaled(run_dir) == journaled(baseline.artifacts)  # each action once, in the same order
    assert accepted_replies(run_dir) == accepted_replies(baseline.artifacts)  # no accepted turn lost
    with open_run_store(run_dir) as reader:
        latest = reader.latest()
    steps = [fact["step"] for fact in latest.facts if fact["kind"] == "accepted"]
    assert steps == list(range(1, len(steps) + 1))
    assert check_events(run_dir / EVENTS) == []
    calls = [json.loads(line) for line in (run_dir / CALLS).read_text().splitlines()]
    assert meta["provider_calls"] == len(calls)  # each call counted once
    lost = sum((Usage.from_dict(resume["lost_usage"]) for resume in meta["resumes"]), Usage())
    assert same_tokens(finished.usage, baseline.usage + lost), f"{store}: {len(meta['resumes'])} resumes"
