"""arc_agi3: real ARC-AGI-3 games through the official toolkit, offline, on turnstate's own two games.

The toolkit is the `arc` extra (Python 3.12+): without it these tests skip, saying so, except the one
that checks the refusal a profile then gets; .ci/arc runs them in a 3.12 virtual environment."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable

import pytest

from turnstate.adapters.images import decode_png
from turnstate.durable.layout import EVENTS, IMAGES, JOURNAL, image_name
from turnstate.environments import EnvironmentConfigError, GameState, make_environment
from turnstate.environments.arc_agi3 import SHIPPED_GAMES, ArcAgi3
from turnstate.environments.frame_image import PALETTE, ImageLegend
from turnstate.environments.protocol import Frame, ToolEnvironment
from turnstate.local_provider.arc_policy import arc_reply, arc_summary, next_action
from turnstate.local_provider.policy import reply, summarize, think
from turnstate.local_provider.vision import seen_text
from turnstate.session.profile import PROFILES_DIR, load_profile, parse_profile
from turnstate.session.runner import Runner
from turnstate.session.settings_file import ProfileError

from ..arc_extra import TOOLKIT
from ..harness.test_image_runs import IMAGE_PROFILES
from ..harness.test_run import read_steps, with_changes

toolkit = pytest.mark.skipif(
    not TOOLKIT,
    reason="the ARC-AGI-3 toolkit is not installed (Python 3.12+ and pip install -e '.[arc]' in turnstate's checkout); .ci/arc runs these",
)
ARC_PROFILE = PROFILES_DIR / "local-arc.yaml"
NOTES_SYSTEM = "Play. End every reply with one line that starts with 'NOTES:'."
PLAIN_SYSTEM = "Play. Answer with one line ACTION: <action>."
ACTION_LINE = re.compile(r"^ACTION: (.+)$", re.MULTILINE)
MAX_STEPS = 60

Window = Callable[[list[tuple[str, str]]], list[tuple[str, str]]]


def game(game_id: str, seed: int = 0) -> ArcAgi3:
    environment = make_environment("arc_agi3", seed, {"game_id": game_id})
    assert isinstance(environment, ArcAgi3)
    return environment


def rows_of(frame: Frame) -> list[str]:
    lines = frame.text.splitlines()
    start = next(number for number, line in enumerate(lines) if line.startswith("GRID ")) + 1
    return lines[start : start + 64]


def action_in(answer: str) -> str:
    return ACTION_LINE.findall(answer)[-1]


def play(game_id: str, window: Window, system: str) -> list[Frame]:
    """The chat model playing from `window(exchanges)` and the latest frame, until the game ends."""
    environment = game(game_id)
    frames = [environment.reset()]
    exchanges: list[tuple[str, str]] = []
    while frames[-1].state is GameState.NOT_FINISHED and len(frames) <= MAX_STEPS:
        messages = [
            {"role": role, "content": text}
            for pair in window(exchanges)
            for role, text in zip(("user", "assistant"), pair, strict=True)
        ]
        answer = reply(system, [*messages, {"role": "user", "content": frames[-1].text}])
        exchanges.append((frames[-1].text, answer))
        frames.append(environment.step(action_in(answer)))
    return frames


def last_exchange(exchanges: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return exchanges[-1:]


def test_without_the_toolkit_a_profile_naming_arc_agi3_is_refused_naming_python_3_12_and_the_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "arc_agi", None)  # an import of it fails, as on an install without the extra
    text = ARC_PROFILE.read_text()
    with pytest.raises(ProfileError) as caught:
        parse_profile(text, source="profiles/local-arc.yaml")
    message = str(caught.value)
    assert message.startswith("profiles/local-arc.yaml: environment.name: arc_agi3 ")
    assert (
        "Python 3.12" in message
        and "pip install -e '.[arc]' in turnstate's checkout" in message
        and "Traceback" not in message
    )


@pytest.mark.parametrize(
    ("options", "key", "named"),
    [
        ({"game_id": "move", "environments_dir": "https://example.org/games"}, "options.environments_dir", "is a URL"),
        ({"game_id": "move", "environments_dir": "/nonexistent/games"}, "options.environments_dir", "is not a folder"),
        ({"game_id": "../move"}, "options.game_id", "must be an ARC-AGI-3 game id"),
        ({}, "options.game_id", "must be an ARC-AGI-3 game id"),
        ({"game_id": "move", "mode": "remote"}, "options.mode", "must be offline, online or competition"),
        ({"game_id": "move", "colour": "red"}, "options", "has no option 'colour'"),
        ({"game_id": "move", "render": "pixels"}, "options.render", "must be one of text, image, both, got 'pixels'"),
        ({"game_id": "move", "render": "image", "scale": 33}, "options.scale", "must be an integer from 1 to 32"),
    ],
)
def test_a_bad_option_is_named_with_its_key_before_the_toolkit_is_touched(options, key, named):
    with pytest.raises(EnvironmentConfigError, match=re.escape(named)) as caught:
        make_environment("arc_agi3", 0, options)
    assert caught.value.key == key and caught.value.fix


@pytest.mark.parametrize("mode", ["online", "competition"])
def test_online_and_competition_need_arc_api_key_and_take_no_environments_dir(mode, monkeypatch):
    monkeypatch.delenv("ARC_API_KEY", raising=False)
    with pytest.raises(
        EnvironmentConfigError, match=f"mode {mode} needs an ARC-AGI-3 API key in ARC_API_KEY"
    ) as caught:
        make_environment("arc_agi3", 0, {"game_id": "ls20", "mode": mode})
    assert caught.value.fix.startswith("export ARC_API_KEY=")
    with pytest.raises(EnvironmentConfigError, match=f"'environments_dir' is for offline games; mode {mode} plays"):
        make_environment("arc_agi3", 0, {"game_id": "ls20", "mode": mode, "environments_dir": "."})


@toolkit
def test_a_game_the_folder_lacks_is_named_with_what_it_holds(tmp_path):
    with pytest.raises(EnvironmentConfigError, match="holds no game 'ls20'; it holds cued, move") as caught:
        make_environment("arc_agi3", 0, {"game_id": "ls20"})
    assert caught.value.key == "options.game_id"


@toolkit
def test_a_game_file_that_fails_to_load_is_named_at_validation_with_the_toolkits_reason(tmp_path):
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "metadata.json").write_text(json.dumps({"game_id": "brok", "class_name": "Brok"}))
    (folder / "brok.py").write_text("raise RuntimeError('this game is broken')\n")
    text = ARC_PROFILE.read_text().replace("game_id: cued", f"game_id: brok\n    environments_dir: {tmp_path}")
    with pytest.raises(ProfileError) as caught:
        parse_profile(text, source="p.yaml")
    message = str(caught.value)
    assert message.startswith("p.yaml: environment.options.environments_dir: arc_agi3 game 'brok' from ")
    assert "this game is broken" in message and "fix: check the game's files" in message


@toolkit
def test_a_per_level_budget_on_a_game_whose_metadata_gives_no_baselines_is_refused_naming_the_fix(tmp_path):
    source = SHIPPED_GAMES / "move"
    folder = tmp_path / "move"
    shutil.copytree(source, folder)
    metadata = json.loads((folder / "metadata.json").read_text())
    del metadata["baseline_actions"]
    (folder / "metadata.json").write_text(json.dumps(metadata))
    text = ARC_PROFILE.read_text().replace("game_id: cued", f"game_id: move\n    environments_dir: {tmp_path}")
    text = text.replace("max_actions: 60", "max_actions: 60\n  max_actions_baseline_multiplier: 5.0")
    with pytest.raises(ProfileError) as caught:
        parse_profile(text, source="p.yaml")
    message = str(caught.value)
    assert (
        "p.yaml: agent.max_actions_baseline_multiplier: game move's metadata.json gives no baseline_actions" in message
    )
    assert "fix: add baseline_actions" in message


@toolkit
def test_a_frame_is_64_rows_of_64_hex_digits_under_its_header_and_the_available_actions():
    frame = game("move").reset()
    lines = frame.text.splitlines()
    assert lines[0] == "ARC LEVEL 1/2 | STATE NOT_FINISHED"
    assert (frame.state, frame.level, frame.levels) == (GameState.NOT_FINISHED, 1, 2)
    rows = rows_of(frame)
    assert len(rows) == 64 and all(re.fullmatch(r"[0-9a-f]{64}", row) for row in rows)
    assert sum(row.count("9") for row in rows) == 64 and sum(row.count("3") for row in rows) == 64  # 8 x 8 blocks
    assert "ACTIONS RESET, ACTION1, ACTION2, ACTION3, ACTION4, ACTION6 x y" in frame.text


@toolkit
def test_the_actions_are_tools_and_action6_takes_integer_x_and_y_from_0_to_63():
    environment = game("move")
    assert isinstance(environment, ToolEnvironment) and environment.tools == ()
    click = {spec.name: spec for spec in environment.action_tools}["ACTION6"]
    assert click.parameters["required"] == ["x", "y"]
    assert [(p["minimum"], p["maximum"]) for p in click.parameters["properties"].values()] == [(0, 63), (0, 63)]


@toolkit
@pytest.mark.parametrize(
    ("action", "problem"),
    [
        ("ACTION6", "ACTION6 takes two integers, x (the column) then y (the row)"),
        ("ACTION6 3", "ACTION6 takes two integers"),
        ("ACTION6 64 0", "ACTION6's x must be an integer from 0 to 63, got '64'"),
        ("ACTION6 0 -1", "ACTION6's y must be an integer from 0 to 63, got '-1'"),
        ("ACTION6 a b", "ACTION6's x must be an integer"),
        ("ACTION1 3", "ACTION1 takes no values"),
        ("ACTION9", "unknown action 'ACTION9'"),
        ("ACTION5", "action 'ACTION5' is not allowed in state NOT_FINISHED of game move"),
    ],
)
def test_a_malformed_or_unavailable_action_is_refused_naming_the_problem_and_changes_nothing(action, problem):
    environment = game("move")
    first = environment.reset()
    with pytest.raises(ValueError, match=re.escape(problem)):
        environment.step(action)
    assert environment.observe() == first and environment.receipts() == ()


@toolkit
def test_a_click_on_the_cell_next_to_the_player_steps_there_and_leaves_a_receipt():
    environment = game("move")
    rows = rows_of(environment.reset())
    y, x = next((y, row.index("9")) for y, row in enumerate(rows) if "9" in row)
    target = (x + 8, y) if x + 8 < 64 and rows[y][x + 8] == "0" else (x - 8, y)
    frame = environment.step(f"ACTION6 {target[0]} {target[1]}")
    assert rows_of(frame)[target[1]][target[0]] == "9"
    assert environment.receipts()[-1].changed in ("grid changed", "level 2 reached")


@toolkit
def test_game_over_allows_only_reset_which_restarts_the_level_with_the_cue_dark():
    environment = game("cued")
    frame = environment.reset()
    cue = rows_of(frame)[0][0]
    wrong = "c" if cue == "e" else "e"
    while frame.state is GameState.NOT_FINISHED:
        frame = environment.step(next_action(rows_of(frame), wrong))
    assert frame.state is GameState.GAME_OVER and environment.receipts()[-1].changed == "game over"
    with pytest.raises(ValueError, match="allowed actions: RESET"):
        environment.step("ACTION1")
    restarted = environment.step("RESET")
    assert (restarted.state, restarted.level) == (GameState.NOT_FINISHED, 1)
    assert rows_of(restarted)[0] == "5" * 64  # the bar is dark: the cue was shown once
    assert environment.receipts()[-1].changed == "level restarted"


@toolkit
def test_the_simple_game_is_won_from_the_latest_frame_alone():
    frames = play("move", last_exchange, PLAIN_SYSTEM)
    assert (frames[-1].state, frames[-1].level) == (GameState.WIN, 2)


@toolkit
def test_the_memory_game_is_lost_when_the_cue_is_not_kept_and_won_when_notes_keep_it():
    lost = play("cued", last_exchange, PLAIN_SYSTEM)[-1]
    assert lost.state is GameState.GAME_OVER
    won = play("cued", last_exchange, NOTES_SYSTEM)[-1]
    assert (won.state, won.level) == (GameState.WIN, 2)


def play_thinking(remember: bool) -> tuple[list[Frame], list[str]]:
    """The reasoning model, each turn only the latest frame, reading back its thoughts if `remember`."""
    environment = game("cued")
    frames, thoughts = [environment.reset()], []
    while frames[-1].state is GameState.NOT_FINISHED and len(frames) <= MAX_STEPS:
        thought, answer = think(
            NOTES_SYSTEM, [{"role": "user", "content": frames[-1].text}], thoughts if remember else []
        )
        assert "NOTES" not in answer
        thoughts.append(thought)
        frames.append(environment.step(action_in(answer)))
    return frames, thoughts


@toolkit
def test_the_reasoning_model_notes_the_cue_in_its_thought_and_wins_only_when_its_thoughts_are_replayed():
    frames, thoughts = play_thinking(remember=True)
    assert frames[-1].state is GameState.WIN
    assert thoughts[0] == f"NOTES: arc level 1 cue {rows_of(frames[0])[0][0]}"
    assert thoughts[1] == "Level 1: following the cue I noted."
    assert play_thinking(remember=False)[0][-1].state is GameState.GAME_OVER


@toolkit
def test_a_summary_keeps_the_cue_of_the_level_being_played_and_other_games_frames_are_left_alone():
    frame = game("cued").reset()
    cue = rows_of(frame)[0][0]
    assert summarize([frame.text]) == arc_summary([frame.text]) == f"NOTES: arc level 1 cue {cue}"
    assert arc_reply(PLAIN_SYSTEM, [{"role": "user", "content": "LEVEL 1/3 | STATE NOT_FINISHED\n#@A#"}]) is None
    assert arc_reply(PLAIN_SYSTEM, [{"role": "user", "content": frame.text}]) is not None


def run_arc(tmp_path, **changes: dict):
    return Runner(with_changes(load_profile(ARC_PROFILE), **changes), tmp_path).run()


@toolkit
def test_after_game_over_the_runner_resets_and_replays_the_game_over_frame_first(tmp_path):
    result = run_arc(
        tmp_path, agent={"max_context_length": 2500, "max_actions": 12}
    )  # too small a window to keep notes
    assert result.outcome == "max_actions" and result.levels_won == 0
    journal = [json.loads(line) for line in (result.artifacts / JOURNAL).read_text().splitlines()]
    reset = next(number for number, entry in enumerate(journal) if entry["action"] == "RESET")
    assert journal[reset]["key"].endswith(" reset")
    step = int(journal[reset]["key"].split()[1])
    sent = read_steps(result.artifacts)[step]["messages_sent"]  # the next request
    latest = [message["content"] for message in sent if message["role"] == "user"][-1]
    over, restarted = (
        latest.index("ARC LEVEL 1/2 | STATE GAME_OVER"),
        latest.index("ARC LEVEL 1/2 | STATE NOT_FINISHED"),
    )
    assert over < restarted  # the GAME_OVER frame first, then the frame RESET led to


@toolkit
def test_acting_through_tools_the_frames_come_back_as_tool_results_and_the_game_is_won(tmp_path):
    result = run_arc(tmp_path, agent={"action_mode": "tools"})
    assert (result.outcome, result.levels_won) == ("win", 2), result.failure
    steps = read_steps(result.artifacts)
    assert all(step["tool_calls"][0]["name"] == step["action"] for step in steps)
    results = [m for m in steps[-1]["messages_sent"] if m["role"] == "tool"]
    assert results and results[-1]["content"].startswith("ARC LEVEL")


@toolkit
def test_turnstate_run_of_the_arc_profile_wins_on_the_local_provider_and_records_the_scorecard(tmp_path):
    command = [sys.executable, "-m", "turnstate.cli", "run", str(ARC_PROFILE), "--out", str(tmp_path)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "INFO" not in done.stdout  # the toolkit's own logging stays out of the terminal
    (run_dir,) = [path for path in tmp_path.iterdir() if path.is_dir()]
    meta = json.loads((run_dir / "run_meta.json").read_text())
    assert (meta["outcome"], meta["levels_won"]) == ("win", 2)
    scorecard = meta["environment_scorecard"]
    assert (scorecard["game_id"], scorecard["total_levels_completed"], scorecard["total_levels"]) == ("cued", 2, 2)
    assert scorecard["plays"] == [scorecard["plays"][0]] and scorecard["plays"][0]["state"] == "WIN"
    assert scorecard["total_actions"] == meta["accepted_actions"]
    assert not (tmp_path / "recordings").exists()


@toolkit
def test_a_game_that_raises_mid_play_ends_the_run_in_one_line_naming_its_file_and_a_resume_goes_on_once_mended(
    tmp_path,
):
    folder = tmp_path / "games" / "move"
    shutil.copytree(SHIPPED_GAMES / "move", folder)
    game_file = folder / "move.py"
    mended = game_file.read_text()
    broken = (
        "    def step(self):\n        if self.action.id.value == 1:\n            raise RuntimeError('the game broke')\n"
    )
    game_file.write_text(mended.replace("    def step(self):\n", broken, 1))
    profile = tmp_path / "p.yaml"
    profile.write_text(
        ARC_PROFILE.read_text().replace("game_id: cued", f"game_id: move\n    environments_dir: {folder.parent}")
    )
    cli = [sys.executable, "-m", "turnstate.cli"]
    done = subprocess.run(
        [*cli, "run", str(profile), "--out", str(tmp_path / "runs")], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr
    (said,) = [line for line in done.stderr.splitlines() if line.strip()]
    assert f"game move ({folder}/move.py) failed to play ACTION1" in said and "the game broke" in said
    assert "fix: mend the game's file, then resume the run" in said
    (run_dir,) = (tmp_path / "runs").iterdir()
    game_file.write_text(mended)
    resumed = subprocess.run([*cli, "resume", str(run_dir)], capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    meta = json.loads((run_dir / "run_meta.json").read_text())
    assert (meta["outcome"], meta["levels_won"]) == ("win", 2)


def test_reasoning_goes_to_the_toolkit_cut_to_its_byte_bound_and_marked_cut():
    from turnstate.environments.arc_agi3 import toolkit_reasoning
    from turnstate.environments.protocol import REASONING_CHARS, readable_reasoning

    assert toolkit_reasoning(None, 16384) is None
    assert toolkit_reasoning("the door is north", 16384) == {"text": "the door is north"}
    wide = readable_reasoning("门" * (REASONING_CHARS + 10))  # each \\uXXXX-escaped: 6 JSON bytes a character
    assert wide is not None and len(wide) == REASONING_CHARS and wide.endswith(" [cut]")
    kept = toolkit_reasoning(wide, 16384)
    assert kept is not None and kept["text"].endswith(" [cut]") and kept["text"].count("[cut]") == 1
    assert 12000 < len(json.dumps(kept, separators=(",", ":")).encode()) <= 16384
    assert readable_reasoning("  \n ") is None


# -- frames as images (issue 34) --------------------------------------------------------------------
# Every adapter whose API takes images (tests/harness/test_image_runs.py), Chat Completions as the ARC
# profile ships it (the default profile's 800-token window holds no 64 x 64 frame, image or text).
ARC_IMAGE_PROFILES = ["local-arc.yaml", *(name for name in IMAGE_PROFILES if name != "local-manual-rolling.yaml")]


@toolkit
@pytest.mark.parametrize("render", ["image", "both"])
def test_a_frame_drawn_as_an_image_is_the_grid_its_legend_line_reads_back_in_the_toolkits_palette(render):
    text_frame = game("cued").reset()
    frame = make_environment("arc_agi3", 0, {"game_id": "cued", "render": render, "scale": 4}).reset()
    (image,) = frame.images
    (legend_line,) = [line for line in frame.text.splitlines() if line.startswith("IMAGE: ")]
    legend = ImageLegend.parse(legend_line)
    assert legend is not None and (legend.columns, legend.rows, legend.scale) == (64, 64, 4)
    assert legend.read(image) == rows_of(text_frame)  # the picture is the grid, cell for cell
    assert decode_png(image.data).rows[0][0] == PALETTE[int(rows_of(text_frame)[0][0], 16)]
    assert (rows_of(frame) == rows_of(text_frame)) is (render == "both")  # the rows stay beside the image
    grid = "\n".join(rows_of(text_frame))  # the local provider's model sees it once per rendering
    assert seen_text([frame.text, image]).count(grid) == (2 if render == "both" else 1)


@toolkit
@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "not-streamed"])
@pytest.mark.parametrize("name", ARC_IMAGE_PROFILES)
def test_every_adapter_that_takes_images_wins_the_memory_game_from_image_frames(tmp_path, name, stream):
    arc = load_profile(ARC_PROFILE).environment.model_dump(mode="json")
    environment = {**arc, "options": {**arc["options"], "render": "image"}}
    profile = with_changes(load_profile(PROFILES_DIR / name), environment=environment, request={"stream": stream})
    result = Runner(profile, tmp_path).run()
    assert (result.outcome, result.levels_won) == ("win", 2), result.failure
    events = [json.loads(line) for line in (result.artifacts / EVENTS).read_text().splitlines()]
    shown = {digest for event in events if event["kind"] == "user_input" for digest in event["images"]}
    assert {path.name for path in (result.artifacts / IMAGES).iterdir()} == {image_name(d) for d in shown}


@toolkit
@pytest.mark.parametrize(
    "name",
    [
        "local-open-source-continuous.yaml",  # Chat Completions: the image in a user message after the tool message
        "local-openai-previous-response-id.yaml",  # Responses: function_call_output parts
        "local-anthropic-continuous.yaml",  # Messages: the tool_result block's content
        "local-gemini-harness-summary.yaml",  # Interactions: the function_result's contents
    ],
)
def test_each_wire_wins_the_memory_game_when_each_image_frame_is_the_action_tools_result(tmp_path, name):
    arc = load_profile(ARC_PROFILE).environment.model_dump(mode="json")
    environment = {**arc, "options": {**arc["options"], "render": "image"}}
    profile = with_changes(load_profile(PROFILES_DIR / name), environment=environment, agent={"action_mode": "tools"})
    result = Runner(profile, tmp_path).run()
    assert (result.outcome, result.levels_won) == ("win", 2), result.failure
    events = [json.loads(line) for line in (result.artifacts / EVENTS).read_text().splitlines()]
    results = [event["images"] for event in events if event["kind"] == "tool_result"]
    assert results and all(len(images) == 1 for images in results)  # every action's result showed its frame
    shown = {digest for event in events if event["kind"] in ("user_input", "tool_result") for digest in event["images"]}
    assert {path.name for path in (result.artifacts / IMAGES).iterdir()} == {image_name(d) for d in shown}
