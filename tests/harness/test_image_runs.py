"""Frames as images (issue 34) through the session and the runner: an image input is checked before
anything is sent, reaches the provider in its wire's image part, is kept once in the run folder and
named by digest everywhere else, waits in the accepted state as JSON, and a run on image frames wins
and resumes as a text run does, on every adapter whose API takes images."""

from __future__ import annotations

import json

import orjson
import pytest

from turnstate import DEFAULT_PROFILE, RuntimeState, Session, load_profile
from turnstate.adapters.contract import UserInput
from turnstate.adapters.images import ImageError, ImagePart
from turnstate.durable.artifacts import sent_messages
from turnstate.durable.checkpoints import KEY_VARIABLE, OPT_OUT
from turnstate.durable.checkpoints.codec import snapshot_of
from turnstate.durable.layout import EVENTS, IMAGES, image_name
from turnstate.environments import make_environment
from turnstate.environments.frame_image import frame_to_png
from turnstate.session.profile import PROFILES_DIR
from turnstate.session.run_profile import run_profile
from turnstate.session.runner import Runner
from turnstate.strategies.state import PendingInput

from .test_resume import assert_resumed_as_uninterrupted, invoke, journaled, killed_run
from .test_run import with_changes

PROFILE = load_profile(DEFAULT_PROFILE)
IMAGE_FRAMES = {"options": {"render": "image"}}
PNG_HEAD = "iVBORw0KGgo"  # the base64 of the PNG signature: an image's bytes inline start so

IMAGE_PROFILES = [  # every adapter whose API takes images, each streamed as it ships (all but previous_response_id)
    "local-manual-rolling.yaml",  # Chat Completions
    "local-open-source-continuous.yaml",  # Chat Completions, the open-weight server
    "local-openai-continuous.yaml",  # Responses
    "local-openai-previous-response-id.yaml",  # Responses, not streamed
    "local-xai-continuous.yaml",  # xAI Responses
    "local-anthropic-continuous.yaml",  # Messages
    "local-gemini-harness-summary.yaml",  # Interactions
]


# An image frame costs more than its rows as text (OpenAI bills a high-detail tile at 255 tokens); two
# profiles size their window to text frames, and get one sized to image frames here: manual_rolling's
# trim to the low-water mark would otherwise drop the turn holding the notes, and previous_response_id's
# stored chain, which no trim reaches, would outgrow 8000 tokens before the third level.
IMAGE_WINDOWS = {"local-manual-rolling.yaml": 1600, "local-openai-previous-response-id.yaml": 16000}


def image_game(**options: object):
    return make_environment("beacon_grid", 1, {"render": "image", **options})


def test_an_image_frame_is_sent_kept_once_in_the_run_folder_and_named_by_digest_everywhere_else(tmp_path):
    game = image_game()
    frame = game.reset()
    (image,) = frame.images
    with Session(PROFILE, actions=game.actions, out_dir=tmp_path) as session:
        first = session.observe(frame.input)
        assert first.action in game.actions  # the model read the grid from the image
        session.accept(first.action)
        session.observe(frame.input)  # the same picture again
        session.accept()
    run_dir = session.run_dir
    assert [path.name for path in (run_dir / IMAGES).iterdir()] == [image_name(image.digest)]
    assert (run_dir / IMAGES / image_name(image.digest)).read_bytes() == image.data
    inputs = [json.loads(line) for line in (run_dir / EVENTS).read_text().splitlines()]
    shown = [event["images"] for event in inputs if event["kind"] == "user_input"]
    assert shown == [[image.digest], [image.digest]]
    step = (run_dir / "step_000001.json").read_text()  # the 800-token window then holds only the latest turn
    assert f"[image sha256:{image.digest}]" in step
    for path in run_dir.rglob("*"):
        if path.is_file() and path.parent.name != IMAGES and path.suffix != ".sqlite3":
            assert PNG_HEAD not in path.read_text(errors="replace"), path.name


def test_the_model_plays_an_image_frame_as_it_plays_the_same_frame_as_text():
    with (
        Session(PROFILE, actions=image_game().actions) as by_text,
        Session(PROFILE, actions=image_game().actions) as by_image,
    ):
        text_turn = by_text.observe(make_environment("beacon_grid", 1).reset().input)
        image_turn = by_image.observe(image_game().reset().input)
    assert image_turn.action == text_turn.action and image_turn.text == text_turn.text


def test_an_input_that_waits_with_its_images_survives_the_state_as_json_and_a_checkpoint_snapshot():
    frame = image_game().reset()
    with Session(PROFILE, actions=image_game().actions) as session:
        session.buffer(frame.input)
        state = session.accepted_state
    (waiting,) = state.pending
    assert isinstance(waiting, PendingInput) and waiting.images == (frame.images[0].base64,)
    assert RuntimeState.from_json(state.to_json()) == state
    as_encoded = orjson.loads(orjson.dumps(snapshot_of(state)))  # as the checkpoint codec encodes it
    assert RuntimeState.model_validate(as_encoded) == state
    assert state.pending_inputs == [frame.input]


def test_images_are_refused_before_any_call_where_the_adapter_takes_none_and_a_non_image_is_named():
    deepseek = load_profile(PROFILES_DIR / "local-deepseek-continuous.yaml")
    frame = image_game().reset()
    with Session(deepseek, actions=image_game().actions) as session:
        with pytest.raises(ImageError, match="sends no images .*; fix: send text, or use an adapter"):
            session.observe(frame.input)
        assert session.ledger.calls == 0 and session.accepted_state.pending == ()
    with pytest.raises(TypeError, match=r"images\[0\] is a bytes, not an ImagePart; fix: wrap the PNG bytes"):
        UserInput("a frame", (frame_to_png([[0]]),))  # type: ignore[arg-type]


@pytest.mark.parametrize("name", IMAGE_PROFILES)
def test_every_adapter_that_takes_images_wins_beacon_grid_from_image_frames(tmp_path, name):
    profile = with_changes(load_profile(PROFILES_DIR / name), environment=IMAGE_FRAMES)
    if name in IMAGE_WINDOWS:
        window = IMAGE_WINDOWS[name]
        profile = with_changes(
            profile, agent={"max_context_length": window}, client={"local": {"context_window": max(window, 8192)}}
        )
    result = Runner(profile, tmp_path).run()
    assert (result.outcome, result.levels_won) == ("win", 3), result.failure
    images = list((result.artifacts / IMAGES).iterdir())
    assert images and all(ImagePart(path.read_bytes()).digest + ".png" == path.name for path in images)


# With agent.action_mode tools every reply is a function call, which the Responses service never compacts
# inline (local_provider/responses.py, openai/openai-python#3075): the chain grows until a window of
# 16000 tokens holds all three levels' image turns.
TOOLS_IMAGE_WINDOWS = {**IMAGE_WINDOWS, "local-openai-continuous.yaml": 16000}


@pytest.mark.parametrize("name", IMAGE_PROFILES)
def test_every_adapter_that_takes_images_wins_beacon_grid_when_each_frame_is_the_action_tools_result(tmp_path, name):
    """In tools mode the next frame is the action call's ToolResult, its image in the wire's tool-result
    shape (Chat Completions, whose tool messages take text only: in a user message after them); the
    tool_result events name the image by digest, and no record outside input_images/ holds its bytes."""
    changes = {"environment": IMAGE_FRAMES, "agent": {"action_mode": "tools"}}
    if name in TOOLS_IMAGE_WINDOWS:
        window = TOOLS_IMAGE_WINDOWS[name]
        changes["agent"]["max_context_length"] = window
        changes["client"] = {"local": {"context_window": max(window, 8192)}}
    result = Runner(with_changes(load_profile(PROFILES_DIR / name), **changes), tmp_path).run()
    assert (result.outcome, result.levels_won) == ("win", 3), result.failure
    events = [json.loads(line) for line in (result.artifacts / EVENTS).read_text().splitlines()]
    shown = [event["images"] for event in events if event["kind"] == "tool_result"]
    kept = {path.name for path in (result.artifacts / IMAGES).iterdir()}
    assert shown and all(len(images) == 1 and image_name(images[0]) in kept for images in shown)
    for path in result.artifacts.rglob("*"):
        if path.is_file() and path.parent.name != IMAGES and path.suffix != ".sqlite3":
            assert PNG_HEAD not in path.read_text(errors="replace"), path.name


def test_an_image_run_killed_after_a_commit_resumes_to_the_uninterrupted_runs_ending(tmp_path, monkeypatch):
    monkeypatch.delenv("TURNSTATE_CHECKPOINT_KEY", raising=False)
    profile = with_changes(
        PROFILE, environment=IMAGE_FRAMES, agent={"max_context_length": IMAGE_WINDOWS[DEFAULT_PROFILE.name]}
    )
    baseline = Runner(profile, tmp_path / "baseline").run()
    run_dir = killed_run(profile, tmp_path / "runs", "after_commit", 4)
    resumed = Runner(run_profile(run_dir), run_dir.parent).resume(run_dir)
    assert_resumed_as_uninterrupted(resumed, baseline, journaled(baseline.artifacts))


def test_a_switch_of_an_image_run_to_an_adapter_whose_api_takes_no_images_is_refused_naming_the_fix(tmp_path):
    """A switch plays the run's game, frames as images included: an adapter that takes none cannot play it."""
    profile = with_changes(
        PROFILE, environment=IMAGE_FRAMES, agent={"max_context_length": IMAGE_WINDOWS[DEFAULT_PROFILE.name]}
    )
    run_dir = killed_run(profile, tmp_path / "runs", "after_commit", 3)
    switched = invoke("resume", str(run_dir), "--profile", "local-deepseek-continuous")
    assert switched.exit_code == 1, switched.output
    assert switched.stderr.strip() == (
        "error: cannot switch: profile 'local-deepseek-continuous' playing the run's game: environment.options.render: "
        "render 'image' sends frames as images, and the API of adapter 'deepseek.chat_completions.v1' takes none; "
        "fix: use render: text, or an adapter whose API takes images (OpenAI, Anthropic, Gemini, xAI)"
    )
    assert Runner(run_profile(run_dir), run_dir.parent).resume(run_dir).outcome == "win"  # nothing was lost


def test_a_keyless_resume_of_an_image_run_rebuilds_its_past_turns_with_their_images(tmp_path, monkeypatch):
    """Without the continuation the state is rebuilt from the projection, whose events name each image
    by digest: every past frame goes back with its picture, read from input_images/, not as a legend
    line pointing at nothing."""
    monkeypatch.setenv(KEY_VARIABLE, OPT_OUT)
    profile = with_changes(
        PROFILE, environment=IMAGE_FRAMES, agent={"max_context_length": IMAGE_WINDOWS[DEFAULT_PROFILE.name]}
    )
    run_dir = killed_run(profile, tmp_path / "runs", "after_commit", 4)
    resumed = invoke("resume", str(run_dir))
    assert resumed.exit_code == 0, resumed.output
    (resume,) = json.loads((run_dir / "run_meta.json").read_text())["resumes"]
    assert resume["continuation"] == "rebuilt from the projection"
    _, *history = sent_messages(run_dir, resume["step"] + 1)
    frames = [message["content"] for message in history if "IMAGE: " in message["content"]]
    assert len(frames) >= 2  # a past turn's frame, and the frame the resumed turn opens on
    assert all("[image sha256:" in frame for frame in frames), frames
    assert json.loads((run_dir / "run_meta.json").read_text())["outcome"] == "win"


def test_a_keyless_resume_whose_past_image_is_lost_exits_1_naming_the_file_and_then_goes_on_once_it_is_back(
    tmp_path, monkeypatch
):
    monkeypatch.setenv(KEY_VARIABLE, OPT_OUT)
    profile = with_changes(
        PROFILE, environment=IMAGE_FRAMES, agent={"max_context_length": IMAGE_WINDOWS[DEFAULT_PROFILE.name]}
    )
    run_dir = killed_run(profile, tmp_path / "runs", "after_commit", 4)
    first = next(event for event in journaled_events(run_dir) if event.get("images"))["images"][0]
    kept = run_dir / IMAGES / image_name(first)
    saved = kept.read_bytes()
    kept.unlink()
    refused = invoke("resume", str(run_dir))
    assert refused.exit_code == 1 and "Traceback" not in refused.output
    assert f"an image a past turn showed is lost: {kept}" in refused.stderr
    assert f"fix: restore {IMAGES}/ from a copy of the run folder" in refused.stderr
    kept.write_bytes(saved[:-8])  # back, but cut: not the image its name says
    assert invoke("resume", str(run_dir)).exit_code == 1
    kept.write_bytes(saved)
    assert invoke("resume", str(run_dir)).exit_code == 0
    assert json.loads((run_dir / "run_meta.json").read_text())["outcome"] == "win"


def journaled_events(run_dir):
    return [json.loads(line) for line in (run_dir / EVENTS).read_text().splitlines()]


def test_a_switch_of_an_image_run_to_another_api_that_takes_images_sends_the_past_frames_images_in_its_shape(
    tmp_path,
):
    profile = with_changes(
        PROFILE, environment=IMAGE_FRAMES, agent={"max_context_length": IMAGE_WINDOWS[DEFAULT_PROFILE.name]}
    )
    run_dir = killed_run(profile, tmp_path / "runs", "after_commit", 4)
    switched = invoke("resume", str(run_dir), "--profile", "local-anthropic-continuous")
    assert switched.exit_code == 0, switched.output
    (resume,) = json.loads((run_dir / "run_meta.json").read_text())["resumes"]
    assert resume["switched"]["to"]["adapter_id"] == "anthropic.messages.v1"
    history = sent_messages(run_dir, resume["step"] + 1)
    frames = [message["content"] for message in history if "IMAGE: " in message["content"]]
    assert len(frames) >= 2 and all("[image sha256:" in frame for frame in frames), frames
    assert json.loads((run_dir / "run_meta.json").read_text())["outcome"] == "win"
