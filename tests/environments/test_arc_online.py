"""arc_agi3 online and in competition mode against the ARC-AGI-3 toolkit's own server
(`Arcade.listen_and_serve`: its REST API, serving the preview games of ../shared/arc-agi-3 over real
HTTP on 127.0.0.1), through which the toolkit's remote wrapper plays exactly as it plays on
three.arcprize.org (ARC_BASE_URL, the toolkit's variable, names the server). What only the real server
shows (its rate limits, how the leaderboard scores a closed competition card) is untested here.

They need the arc extra and ../shared/arc-agi-3, and skip, saying so, without them (.ci/arc runs them)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.environments.arc_preview import ARC, LEVELS, RECORDED_ACTIONS, arc_profile
from tests.harness.test_resume import killed_run
from turnstate.session.profile import Profile
from turnstate.session.runner import Runner
from turnstate.session.session import RunResult
from turnstate.sweeps.plan import SweepError, load_sweep

from ..arc_extra import TOOLKIT

pytestmark = [
    pytest.mark.skipif(
        not TOOLKIT,
        reason="the ARC-AGI-3 toolkit is not installed (Python 3.12+ and pip install -e '.[arc]' in turnstate's checkout); .ci/arc runs these",
    ),
    pytest.mark.skipif(not ARC.is_dir(), reason=f"the ARC-AGI-3 preview games are not in {ARC} (CI has them)"),
]
KEY = "arc-test-key-0123456789abcdef"
SERVE = """
import sys, arc_agi
arcade = arc_agi.Arcade(operation_mode=arc_agi.OperationMode.OFFLINE, environments_dir=sys.argv[1])
arcade.listen_and_serve(host="127.0.0.1", port=int(sys.argv[2]), competition_mode=sys.argv[3] == "competition")
"""


def toolkit_server(folder: Path, mode: str) -> Iterator[str]:
    """The toolkit's server of the preview games, in `mode` (online or competition), until the test ends."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = (folder / f"server-{mode}.log").open("wb")
    games = str(ARC / "environment_files")
    server = subprocess.Popen([sys.executable, "-c", SERVE, games, str(port), mode], stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{url}/api/games", timeout=2) as answer:
                    assert answer.status == 200
                    break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, (
                    folder / f"server-{mode}.log"
                ).read_text()
                time.sleep(0.2)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=10)
        log.close()


@pytest.fixture
def online(tmp_path, monkeypatch) -> Iterator[str]:
    yield from served(tmp_path, monkeypatch, "online")


@pytest.fixture
def competition(tmp_path, monkeypatch) -> Iterator[str]:
    yield from served(tmp_path, monkeypatch, "competition")


def served(folder: Path, monkeypatch: pytest.MonkeyPatch, mode: str) -> Iterator[str]:
    for url in toolkit_server(folder, mode):
        monkeypatch.setenv("ARC_BASE_URL", url)
        monkeypatch.setenv("ARC_API_KEY", KEY)
        yield url


def played_in(mode: str) -> Profile:
    data = arc_profile("manual_rolling.chat", "ft09").model_dump(mode="json")
    data["environment"]["options"] = {"game_id": "ft09", "mode": mode}
    return Profile.model_validate(data)


def scorecard_of(run_dir: Path) -> dict:
    return json.loads((run_dir / "run_meta.json").read_text())["environment_scorecard"]


def won(mode: str, out: Path) -> RunResult:
    """ft09 played in `mode` to its win with the recording's moves."""
    result = Runner(played_in(mode), out).run()
    assert (result.outcome, result.levels_won, result.accepted_actions) == ("win", 6, 164), result.failure
    return result


def test_online_play_on_the_toolkits_server_wins_and_a_killed_run_resumes_to_the_same_scorecard(online, tmp_path):
    whole = won("online", tmp_path / "whole")
    card = scorecard_of(whole.artifacts)
    assert card["mode"] == "online" and card["plays"][-1]["state"] == "WIN"
    assert card["plays"][-1]["levels_completed"] == LEVELS["ft09"]
    run_dir = killed_run(played_in("online"), tmp_path / "killed", "after_commit", 60)
    resumed = Runner(played_in("online"), run_dir.parent).resume(run_dir)  # the journal replayed on a new card
    assert (resumed.outcome, resumed.accepted_actions) == ("win", RECORDED_ACTIONS["ft09"])
    assert scorecard_of(run_dir)["plays"][-1] == card["plays"][-1]
    for path in [*whole.artifacts.rglob("*"), *run_dir.rglob("*")]:  # the API key is in no artifact
        assert not path.is_file() or KEY.encode() not in path.read_bytes(), path


def test_competition_plays_one_card_resets_levels_only_and_refuses_a_resume_and_a_sweep(competition, tmp_path):
    result = won("competition", tmp_path / "runs")
    card = scorecard_of(result.artifacts)
    # One play: the recording's opening RESET, on the game's first frame, restarts nothing in competition
    # (offline it starts a second play); the card was closed to be read.
    (play,) = card["plays"]
    assert (card["mode"], play["state"], play["levels_completed"]) == ("competition", "WIN", LEVELS["ft09"])
    shown = (result.artifacts / "events.jsonl").read_text()  # every frame the model read
    assert "(by convention RESET restart the level;" in shown and "on a level's first frame, the game" not in shown

    resumed = subprocess.run(
        [sys.executable, "-m", "turnstate.cli", "resume", str(result.artifacts)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert resumed.returncode != 0 and "Traceback" not in resumed.stderr
    assert "a competition run cannot be resumed" in resumed.stderr and "fix: start the run again" in resumed.stderr

    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        yaml.safe_dump(
            {
                "id": "competition",
                "profiles": ["local-manual-rolling"],
                "environments": [{"name": "arc_agi3", "options": {"game_id": "ft09", "mode": "competition"}}],
            }
        )
    )
    with pytest.raises(SweepError) as refused:
        load_sweep(sweep)
    said = str(refused.value)
    assert f"{sweep}: environments.0: a competition run cannot be resumed" in said
    assert "fix: play it with `turnstate run`" in said
