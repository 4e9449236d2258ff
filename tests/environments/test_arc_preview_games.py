"""The public ARC-AGI-3 preview games (ls20: 7 levels in 489 recorded actions, ft09: 6 in 164, with
ACTION6 cells) played through the official toolkit on the local provider's recording model, which
knows the winning moves but where it is in them only from the state each strategy carries
(local_provider/recording_policy.py): every strategy and compaction variant wins both games, a
strategy that loses its state loses the game, and a killed run resumes to the same scorecard.

They read ../shared/arc-agi-3 where it is (never copied) and skip, saying so, without it or without
the toolkit (the arc extra, Python 3.12: .ci/arc runs them)."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.environments.arc_preview import ARC, LEVELS, RECORDED_ACTIONS, RECORDINGS, VARIANTS, arc_profile
from tests.harness.test_resume import killed_run
from tests.rewritten_requests import rewriting
from turnstate.adapters.chat_completions import ChatCompletionsAdapter
from turnstate.adapters.open_source_chat import OpenSourceChatAdapter
from turnstate.environments import EnvironmentConfigError, make_environment
from turnstate.local_provider.recording_policy import read_recording
from turnstate.session.profile import parse_profile
from turnstate.session.runner import Runner
from turnstate.session.settings_file import ProfileError

from ..arc_extra import TOOLKIT

pytestmark = [
    pytest.mark.skipif(
        not TOOLKIT,
        reason="the ARC-AGI-3 toolkit is not installed (Python 3.12+ and pip install -e '.[arc]' in turnstate's checkout); .ci/arc runs these",
    ),
    pytest.mark.skipif(not ARC.is_dir(), reason=f"the ARC-AGI-3 preview games are not in {ARC} (CI has them)"),
]
WINNING = [variant for variant in VARIANTS if variant != "continuous.none.responses"]
COMPACTING = [variant for variant in WINNING if not variant.startswith(("manual_rolling", "previous_response_id"))]


def levels_of(result: Any) -> dict[str, Any]:
    return levels_of_run(result.artifacts)


def levels_of_run(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "run_meta.json").read_text())["environment_scorecard"]


def cli(*arguments: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "turnstate.cli", *arguments]
    return subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=cwd)


def human_baselines(game: str) -> list[int]:
    """The game's metadata.json `baseline_actions`, as the toolkit's layout keeps it."""
    (metadata,) = (ARC / "environment_files" / game).glob("*/metadata.json")
    return json.loads(metadata.read_text())["baseline_actions"]


@pytest.mark.parametrize("game", sorted(LEVELS))
@pytest.mark.parametrize("variant", WINNING)
def test_every_variant_wins_both_games_through_turnstate_run_with_the_recordings_actions(variant, game, tmp_path):
    profile = tmp_path / f"{game}.yaml"
    profile.write_text(yaml.safe_dump(arc_profile(variant, game).model_dump(mode="json")))
    done = cli("run", str(profile), "--out", str(tmp_path / "runs"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    meta = json.loads((run_dir / "run_meta.json").read_text())
    assert (meta["outcome"], meta["levels_won"], meta["accepted_actions"]) == (
        "win",
        LEVELS[game],
        RECORDED_ACTIONS[game],
    )
    assert meta["failed_attempts"] == 0
    scorecard = meta["environment_scorecard"]
    won = scorecard["plays"][-1]  # a RESET on a game's first frame starts a new play on the toolkit's card
    assert (won["state"], won["levels_completed"], scorecard["total_levels_completed"]) == ("WIN",) + (
        LEVELS[game],
    ) * 2
    assert won["level_baseline_actions"] == human_baselines(game)
    if variant in COMPACTING:  # compacted many times over the game: the place survived each compaction
        assert meta["compactions"] >= RECORDED_ACTIONS[game] // 12
    if variant != "continuous.native_inline.responses":
        return
    # per level, the actions used against the baseline, as `turnstate show` and the run report say it
    per_level = ", ".join(
        f"{n}: {used}/{base}"
        for n, (used, base) in enumerate(zip(won["level_actions"], won["level_baseline_actions"], strict=True), 1)
    )
    for command in (["show", str(run_dir), "--step", "1"], ["report", str(run_dir)]):
        shown = cli(*command)
        assert shown.returncode == 0, shown.stderr
        page = shown.stdout if command[0] == "show" else (run_dir / "report.html").read_text()
        assert f"per level, actions/baseline: {per_level}" in page


@pytest.mark.parametrize("variant", WINNING)
def test_every_variant_wins_ft09_from_its_frames_drawn_as_images(variant, tmp_path):
    """The real game's frames as PNGs (issue 34): each variant replays, trims and compacts the image
    turns and keeps its place. A frame is 400-500 estimated tokens as an image against 1,150 as text,
    so the image run compacts less often."""
    data = arc_profile(variant, "ft09").model_dump(mode="json")
    data["environment"]["options"]["render"] = "image"
    result = Runner(parse_profile(yaml.safe_dump(data), source="ft09-image.yaml"), tmp_path).run()
    assert (result.outcome, result.levels_won, result.accepted_actions) == ("win", 6, RECORDED_ACTIONS["ft09"])
    assert result.failed_attempts == 0
    if variant in COMPACTING:
        assert result.compactions >= 1, "the place survived no compaction"


def test_continuous_conversation_without_compaction_fails_closed_when_the_game_outgrows_the_window(tmp_path):
    result = Runner(arc_profile("continuous.none.responses", "ft09"), tmp_path).run()
    assert result.outcome == "failed_closed" and result.failure is not None and "context overflow" in result.failure
    assert result.levels_won < LEVELS["ft09"]


def forgetting(adapter: type, forget: Any, settings: Any) -> Any:
    """An adapter factory whose requests lose part of the strategy's carried state (`forget(items)`),
    as a harness that dropped it would send them."""
    forgetful = rewriting(adapter, lambda _, items: forget(items))
    return lambda endpoint: forgetful.connect(endpoint, settings)


def without_notes(items: Any) -> list[Any]:
    return [
        {**item, "content": "\n".join(line for line in item["content"].splitlines() if not line.startswith("NOTES:"))}
        if item.get("role") == "assistant" and isinstance(item.get("content"), str)
        else item
        for item in items
    ]


def without_reasoning(items: Any) -> list[Any]:
    """The replayed answers without their reasoning (an open-weight server takes them so)."""
    return [
        {key: value for key, value in item.items() if key not in ("reasoning_content", "reasoning")} for item in items
    ]


@pytest.mark.parametrize(
    ("variant", "adapter", "forget"),
    [
        ("manual_rolling.chat", ChatCompletionsAdapter, without_notes),
        ("continuous.harness_summary.open_weight", OpenSourceChatAdapter, without_reasoning),
    ],
    ids=["manual_rolling without its notes", "continuous without its reasoning"],
)
def test_a_strategy_that_loses_its_state_loses_its_place_and_the_game(variant, adapter, forget, tmp_path):
    profile = arc_profile(variant, "ft09", max_actions=RECORDED_ACTIONS["ft09"] + 40)  # room to win
    factory = forgetting(adapter, forget, profile.request_settings())
    result = Runner(profile, tmp_path, adapter_factory=factory).run()
    assert (result.outcome, result.levels_won) == ("max_actions", 0)
    events = [json.loads(line) for line in (result.artifacts / "events.jsonl").read_text().splitlines()]
    played = {event["action"] for event in events if event["kind"] == "assistant_message"}
    first = json.loads((ARC / "recordings" / RECORDINGS["ft09"]).read_text().splitlines()[0])
    assert played == {"RESET"} and first["data"]["action_input"]["id"] == 0  # back at move 1, every turn


@pytest.mark.parametrize(
    ("variant", "game", "turn"),
    [("manual_rolling.chat", "ft09", 97), ("continuous.native_inline.responses", "ls20", 311)],
)
def test_a_run_killed_mid_game_resumes_to_the_uninterrupted_runs_scorecard(variant, game, turn, tmp_path):
    profile = arc_profile(variant, game)
    whole = Runner(profile, tmp_path / "whole").run()
    run_dir = killed_run(profile, tmp_path / "killed", "after_commit", turn)
    resumed = Runner(profile, run_dir.parent).resume(run_dir)
    assert (resumed.outcome, resumed.levels_won, resumed.accepted_actions) == (
        "win",
        LEVELS[game],
        RECORDED_ACTIONS[game],
    )
    cards = [levels_of(result) for result in (whole, resumed)]
    assert cards[0] == cards[1]
    # The toolkit's own recording: the resumed process replayed the journal into a new one, so its
    # newest is the whole play, which the toolkit replays to the state the run ended in.
    recordings = sorted(
        (run_dir / "environment_recordings").glob("*/*.jsonl"), key=lambda path: toolkit_lines(path)[0]["timestamp"]
    )
    assert len(recordings) == 2 and recordings[-1].name.startswith(game)
    lines = toolkit_lines(recordings[-1])
    assert len(lines) == 1 + RECORDED_ACTIONS[game]  # the play's reset, then every accepted action
    assert replayed_through_toolkit(lines) == final_state(lines[-1]["data"])
    assert final_state(lines[-1]["data"])[:2] == ("WIN", LEVELS[game])
    explained = [line["data"]["action_input"]["reasoning"] for line in lines[1:]]
    if variant.startswith("continuous"):  # the Responses wire's reasoning summary, beside each action
        assert all(reason and reason["text"] for reason in explained), explained[:3]
        assert "encrypted" not in recordings[-1].read_text()


def toolkit_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def final_state(data: dict[str, Any]) -> tuple[str, int, list[Any]]:
    return data["state"], data["levels_completed"], data["frame"][-1]


def replayed_through_toolkit(lines: list[dict[str, Any]]) -> tuple[str, int, list[Any]]:
    """A toolkit recording's actions stepped again on a fresh game of the toolkit's: the state it ends in."""
    import arc_agi
    from arcengine import GameAction

    arcade = arc_agi.Arcade(
        operation_mode=arc_agi.OperationMode.OFFLINE, environments_dir=str(ARC / "environment_files")
    )
    game = arcade.make(lines[0]["data"]["game_id"], seed=0)
    for line in lines[1:]:
        action = line["data"]["action_input"]
        data = game.step(GameAction[action["id"]], data=action["data"])
    return data.state.name, data.levels_completed, data.frame[-1].tolist()


def problems(text: str) -> str:
    with pytest.raises(ProfileError) as caught:
        parse_profile(text, source="p.yaml")
    return str(caught.value)


def test_a_recording_of_another_game_or_a_bad_line_is_named_with_the_file_and_the_fix(tmp_path):
    data = arc_profile("manual_rolling.chat", "ft09").model_dump(mode="json")
    data["client"]["local"]["recording"] = str(ARC / "recordings" / "ls20-cb3b57cc.jsonl")
    said = problems(yaml.safe_dump(data))
    assert "p.yaml: client.local.recording: " in said and "records game ls20-e6affcdb" in said
    assert "game_id is ft09" in said and "fix: play game_id: ls20" in said
    broken = tmp_path / "broken.jsonl"
    lines = (ARC / "recordings" / "ft09-9ab2447a.jsonl").read_text().splitlines()
    broken.write_text(
        "\n".join([*lines[:3], '{"data": {"action_input": {"id": 6, "data": {"game_id": "ft09", "x": 70, "y": 1}}}}'])
    )
    data["client"]["local"]["recording"] = str(broken)
    said = problems(yaml.safe_dump(data))
    assert f"{broken}, line 4: ACTION6 needs integer x and y from 0 to 63, got x=70" in said and "Traceback" not in said
    data["client"]["local"]["recording"] = str(tmp_path / "absent.jsonl")
    assert "absent.jsonl: cannot be read (No such file or directory)" in problems(yaml.safe_dump(data))

    folder = tmp_path / "recordings"  # a folder: the recording of the profile's game, exactly one
    folder.mkdir()
    data["client"]["local"]["recording"] = str(folder)
    assert f"{folder}: a folder that holds no recording (*.jsonl)" in problems(yaml.safe_dump(data))
    (folder / "ls20.jsonl").write_bytes((ARC / "recordings" / RECORDINGS["ls20"]).read_bytes())
    said = problems(yaml.safe_dump(data))
    assert f"{folder} holds recordings of ls20-e6affcdb, none of game ft09" in said
    assert "fix: add a recording of ft09 to the folder, or play one of its games" in said
    for name in ("a.jsonl", "b.jsonl"):
        (folder / name).write_bytes((ARC / "recordings" / RECORDINGS["ft09"]).read_bytes())
    assert f"{folder} holds 2 recordings of game ft09 (a.jsonl, b.jsonl)" in problems(yaml.safe_dump(data))
    (folder / "b.jsonl").unlink()
    parse_profile(yaml.safe_dump(data), source="p.yaml")  # one of each game: the run plays ft09's


def test_a_level_that_spends_its_baseline_budget_unfinished_ends_the_run_and_a_resume_keeps_its_count(tmp_path):
    """At 1x the human baseline, ls20's first level (29 moves after the recording's opening RESET,
    which counts) runs out one move short; at the harness's 5x the recording wins."""
    assert (
        Runner(arc_profile("manual_rolling.chat", "ls20", max_actions_baseline_multiplier=5.0), tmp_path / "5x")
        .run()
        .outcome
        == "win"
    )
    tight = arc_profile("manual_rolling.chat", "ls20", max_actions_baseline_multiplier=1.0)
    ended = Runner(tight, tmp_path / "1x").run()
    assert (ended.outcome, ended.levels_won, ended.accepted_actions) == ("level_budget", 0, 29)
    assert json.loads((ended.artifacts / "run_meta.json").read_text())["outcome"] == "level_budget"
    run_dir = killed_run(tight, tmp_path / "killed", "after_commit", 20)
    resumed = Runner(tight, run_dir.parent).resume(run_dir)
    assert (resumed.outcome, resumed.accepted_actions) == ("level_budget", 29)  # not 20 + a fresh 29


def test_animation_frames_are_shown_ahead_of_the_state_up_to_the_configured_number():
    """ls20's recorded play has 9 actions whose animation has 2 frames: with animation_frames 7 their
    first frame comes ahead of the header, and what follows the header is the state, as without."""
    options = {"game_id": "ls20", "environments_dir": str(ARC / "environment_files")}
    plain, animated = (make_environment("arc_agi3", 0, options | shown) for shown in ({}, {"animation_frames": 7}))
    plain.reset(), animated.reset()
    shown = 0
    for action in read_recording(ARC / "recordings" / RECORDINGS["ls20"])[1]:
        state, frame = plain.step(action).text, animated.step(action).text
        assert frame.endswith(state.split("\n", 2)[2])  # the header's FRAMES line differs, the state does not
        if frame.startswith("ANIMATION FRAME 1/2 (before the state below)\n"):
            shown += 1
            rows = frame.splitlines()[1:65]
            assert all(len(row) == 64 for row in rows) and frame.splitlines()[65].startswith("ARC LEVEL ")
    assert shown == 9
    with pytest.raises(EnvironmentConfigError, match="'animation_frames' must be a whole number from 1 to 16, got 0"):
        make_environment("arc_agi3", 0, options | {"animation_frames": 0})


def test_a_sweep_of_both_games_by_every_variant_by_two_seeds_killed_twice_ends_each_game_with_one_scorecard(
    tmp_path,
):
    """Every winning variant (the three strategies and their compactions) x ls20 and ft09 x seeds 0
    and 1: killed outright (the driver and its runs) while ls20 is played, run again and killed while
    ft09 is, then run to its end, every run wins, and every run of a game, uninterrupted or resumed,
    ends with the same scorecard (the same recorded moves through the same game)."""
    names = []
    for variant in WINNING:
        data = arc_profile(variant, "ft09").model_dump(mode="json")
        data["client"]["local"]["recording"] = str(ARC / "recordings")  # the folder: each run plays its game's
        names.append(f"{data['id']}.yaml")
        (tmp_path / names[-1]).write_text(yaml.safe_dump(data))
    games = str(ARC / "environment_files")
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        yaml.safe_dump(
            {
                "id": "arc-preview",
                "profiles": names,
                "environments": [
                    {"name": "arc_agi3", "options": {"game_id": game, "environments_dir": games}, "seeds": [0, 1]}
                    for game in ("ls20", "ft09")
                ],
            }
        )
    )
    out = tmp_path / "out"
    for label, step in (("arc_agi31", 200), ("arc_agi32", 60)):  # the sweep's labels of ls20 and ft09
        killed_sweep(sweep, out, f"runs/*.{label}.*/*/step_{step:06d}.json")
    done = cli("sweep", str(sweep), "--out", str(out))
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(rows) == len(WINNING) * 2 * 2 and {row["outcome"] for row in rows} == {"win"}
    compacting = {arc_profile(variant, "ft09").id for variant in COMPACTING}
    assert all(
        row["compactions"] >= RECORDED_ACTIONS[row["game"]] // 12 for row in rows if row["profile"] in compacting
    )
    for game in LEVELS:
        played = [row for row in rows if row["game"] == game]
        cards = {json.dumps(levels_of_run(out / row["run_dir"]), sort_keys=True) for row in played}
        assert len(cards) == 1, game  # one scorecard, however each run got there
        assert {row["resumes"] for row in played} >= {0, 1}  # some uninterrupted, some resumed
        assert {row["levels"] for row in played} == {LEVELS[game]}
    with (out / "results.csv").open() as table:
        ft09 = next(row for row in csv.DictReader(table) if row["game"] == "ft09")
    assert ft09["level_baseline_actions"] == "15 7 15 16 21 17"  # metadata.json's, as the leaderboard reads it
    summary = json.loads((out / "summary.json").read_text())
    by_game = {(entry["profile"], entry["game"]): entry for entry in summary["by_game"]}
    assert len(by_game) == len(WINNING) * 2 and all(
        (entry["runs"], entry["wins"]) == (2, 2) for entry in by_game.values()
    )
    assert {tuple(entry["mean_level_actions"]) for (_, game), entry in by_game.items() if game == "ft09"} == {
        tuple(float(count) for count in ft09["level_actions"].split())
    }


def killed_sweep(sweep: Path, out: Path, reached: str) -> None:
    """`turnstate sweep` on `sweep`, killed with its runs (the machine's crash) once two files match `reached`."""
    driver = subprocess.Popen(
        [sys.executable, "-m", "turnstate.cli", "sweep", str(sweep), "--out", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 600
    while len(list(out.glob(reached))) < 2:
        assert driver.poll() is None and time.monotonic() < deadline, f"the sweep ended before {reached}"
        time.sleep(0.05)
    os.killpg(driver.pid, signal.SIGKILL)
    driver.wait()
