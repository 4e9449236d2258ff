"""The checks of a profile that span its sections and reach outside them: a request.extra_body field an
adapter sets itself, an action grammar where no server takes one, an environment's options and
baselines (the environment is built once), and a recording of another game. Each refusal is a
Contradiction naming the key, the problem and the fix."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from turnstate.session.settings_file import Contradiction


class EnvironmentSection(Protocol):
    """What the checks read of a profile's `environment` section (profile.EnvironmentConfig)."""

    name: str
    seed: int
    options: dict[str, Any]


def check_extra_body(extra: Mapping[str, Any], body_fields: Mapping[str, str] | None, adapter_id: str) -> None:
    """request.extra_body adds fields beside the adapter's, never over them, and only where the API takes any."""
    if not extra:
        return
    if body_fields is None:
        raise Contradiction("request.extra_body", f"adapter {adapter_id!r} sends no extra body fields", "remove it")
    for name in extra:
        if name in body_fields:
            raise Contradiction(
                f"request.extra_body.{name}",
                f"{adapter_id} sets {name!r} itself, from {body_fields[name]}",
                f"remove it from request.extra_body; set it through {body_fields[name]}",
            )


def check_action_grammar(
    grammar: str | None, action_mode: str, extra_body: Mapping[str, Any], grammar_field: str | None, adapter_id: str
) -> None:
    """request.action_grammar needs a wire that carries a grammar, text actions, and its field free."""
    if grammar is None:
        return
    if grammar_field is None:
        raise Contradiction(
            "request.action_grammar",
            f"adapter {adapter_id!r} sends no grammar (no server of its API takes one)",
            "remove it, or use a Chat Completions or Responses adapter against llama-server",
        )
    if action_mode != "text":
        raise Contradiction(
            "request.action_grammar", "a grammar shapes ACTION lines, and agent.action_mode is tools", "remove one"
        )
    if grammar_field in extra_body:
        raise Contradiction(
            f"request.extra_body.{grammar_field}",
            f"request.action_grammar sets {grammar_field!r} itself",
            "remove one of the two",
        )


def check_images(environment: EnvironmentSection, takes_images: bool, adapter_id: str) -> None:
    """Frames drawn as images (environment.options.render image or both) need an adapter whose API
    takes images, as a user input or, with agent.action_mode tools, in the action's tool result."""
    render = environment.options.get("render", "text")
    if render != "text" and not takes_images:
        raise Contradiction(
            "environment.options.render",
            f"render {render!r} sends frames as images, and the API of adapter {adapter_id!r} takes none",
            "use render: text, or an adapter whose API takes images (OpenAI, Anthropic, Gemini, xAI)",
        )


def check_environment(environment: EnvironmentSection, multiplier: float | None) -> None:
    """Build the environment once, so an unregistered or path-like id, a package that fails to load
    or a bad option is named here, under the key it concerns, before any run starts; and, for a
    per-level budget, check that the game gives its levels' baselines."""
    from turnstate.environments import EnvironmentConfigError, make_environment

    try:
        built = make_environment(environment.name, environment.seed, environment.options)
    except EnvironmentConfigError as error:
        raise Contradiction(f"environment.{error.key}", str(error), error.fix) from None
    if multiplier is None:
        return
    baselines = getattr(built, "level_baselines", None)
    if not callable(baselines):
        raise Contradiction(
            "agent.max_actions_baseline_multiplier",
            f"environment {environment.name} gives no human baseline per level (ARC-AGI-3 games' metadata.json does)",
            "remove it, or play an arc_agi3 game",
        )
    if not baselines():
        raise Contradiction(
            "agent.max_actions_baseline_multiplier",
            f"game {environment.options.get('game_id')}'s metadata.json gives no baseline_actions",
            "add baseline_actions (the human baseline per level) to the game's metadata.json, or remove it",
        )


def check_recording(recording: str, environment: EnvironmentSection) -> None:
    """A recording the local model can play: readable, well formed, and of the game being played."""
    game_id = environment.options.get("game_id")
    if environment.name != "arc_agi3" or not isinstance(game_id, str):
        raise Contradiction(
            RECORDING_KEY,
            f"a recording plays an ARC-AGI-3 game, and environment.name is {environment.name}",
            "use environment.name: arc_agi3 with the recording's game_id, or remove the recording",
        )
    recorded_actions(recording, game_id)


RECORDING_KEY = "client.local.recording"


def recorded_actions(recording: str, game_id: str) -> tuple[str, ...]:
    """The moves the local model plays in game `game_id` from `client.local.recording`: a recording
    file's, or of a folder of recordings (its *.jsonl files, each read), the one of that game (so a
    sweep over games names one folder). A ValueError naming the problem and, as `fix`, what to do."""
    from turnstate.environments.arc_agi3 import game_of, same_game
    from turnstate.local_provider.recording_policy import RecordingError, read_recording

    path = Path(recording).expanduser()
    fix = "point it at a recording of the game (the toolkit's JSONL, one recorded action a line), or a folder of them"
    files = sorted(path.glob("*.jsonl")) if path.is_dir() else [path]
    if not files:
        raise Contradiction(RECORDING_KEY, f"{path}: a folder that holds no recording (*.jsonl)", fix)
    try:
        read = [(file, *read_recording(file)) for file in files]
    except RecordingError as error:
        raise Contradiction(RECORDING_KEY, str(error), fix) from None
    chosen = [(file, actions) for file, recorded, actions in read if same_game(recorded, game_id)]
    if len(chosen) == 1:
        return chosen[0][1]
    if chosen:
        names = ", ".join(file.name for file, _ in chosen)
        raise Contradiction(
            RECORDING_KEY,
            f"{path} holds {len(chosen)} recordings of game {game_id} ({names}), and the model plays one",
            "keep one recording of each game in the folder",
        )
    if path.is_dir():
        games = ", ".join(sorted({recorded for _, recorded, _ in read}))
        raise Contradiction(
            RECORDING_KEY,
            f"{path} holds recordings of {games}, none of game {game_id} (environment.options.game_id)",
            f"add a recording of {game_id} to the folder, or play one of its games",
        )
    recorded = read[0][1]
    raise Contradiction(
        RECORDING_KEY,
        f"{recording} records game {recorded}, and environment.options.game_id is {game_id}",
        f"play game_id: {game_of(recorded)}, or name a recording of {game_id}",
    )
