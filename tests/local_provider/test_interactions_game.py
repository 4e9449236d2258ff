"""Whole games of beacon_grid over the Gemini Interactions wire, through the real google-genai SDK.

The policy notes a level's beacon only in the thought of the turn that saw it, sealed in that
thought step's signature, so the game is won only by a client that replays its thought steps
faithfully (with store=false, every step of every turn) or continues the stored interaction by its
id; a lossy client, one that drops whole turns or only their thought steps (taken, as Gemini takes a
text without its thought), loses a level whose beacon is not the guessed door A.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from google import genai

from turnstate.environments import GameState, make_environment
from turnstate.local_provider.server import LocalProvider

from .test_interactions import MODEL, SUMMARIES, SYSTEM, Step, accumulated, ask, client_for, replayed, text_of, user
from .test_interactions_functions import ACTIONS, result
from .test_policy import LOST_MEMORY_SEEDS

MAX_STEPS = 300
ACTION_LINE = re.compile(r"^ACTION: (\S+)$", re.MULTILINE)
SEEDS = LOST_MEMORY_SEEDS[:2]

Keep = Callable[[list[Step]], list[Step]]


def everything(history: list[Step]) -> list[Step]:
    return history


def without_thoughts(history: list[Step]) -> list[Step]:
    return [step for step in history if step["type"] != "thought"]


def latest_turn_only(history: list[Step]) -> list[Step]:
    """The last user input and the model's answer to it: whole earlier turns dropped."""
    last_user = max(index for index, step in enumerate(history) if step["type"] == "user_input")
    return history[last_user:]


def answered(client: genai.Client, sent: list[Step], stream: bool) -> tuple[list[Step], str]:
    """(the model's steps for this turn, its visible text), from a plain reply or a rebuilt stream."""
    if stream:
        steps = accumulated(list(ask(client, sent, stream=True)))
    else:
        reply = ask(client, sent)
        assert reply.status == "completed", reply
        steps = replayed(reply)
    text = "".join(part["text"] for step in steps if step["type"] == "model_output" for part in step["content"])
    return steps, text


def play(client: genai.Client, seed: int, keep: Keep = everything, **params: Any) -> GameState:
    """Play one game, sending the kept history and the new frame each turn; its final state."""
    env = make_environment("beacon_grid", seed)
    frame = env.reset()
    history: list[Step] = []
    for _ in range(MAX_STEPS):
        if frame.state is not GameState.NOT_FINISHED:
            break
        sent = [*history, user(frame.text)]
        steps, text = answered(client, sent, **params)
        match = ACTION_LINE.search(text)
        assert match is not None, text
        history = keep([*sent, *steps])
        frame = env.step(match.group(1))
    return frame.state


@pytest.fixture
def client() -> Iterator[genai.Client]:
    with LocalProvider() as provider, client_for(provider) as sdk_client:
        yield sdk_client


@pytest.mark.parametrize("seed", SEEDS)
def test_a_faithful_replay_wins(client: genai.Client, seed: int) -> None:
    assert play(client, seed, stream=False) is GameState.WIN


def test_a_faithful_replay_of_streamed_replies_wins(client: genai.Client) -> None:
    assert play(client, SEEDS[0], stream=True) is GameState.WIN


@pytest.mark.parametrize("seed", SEEDS)
def test_a_replay_that_drops_thought_steps_loses(client: genai.Client, seed: int) -> None:
    assert play(client, seed, without_thoughts, stream=False) is GameState.GAME_OVER


@pytest.mark.parametrize("seed", SEEDS)
def test_a_replay_that_keeps_only_the_latest_turn_loses(client: genai.Client, seed: int) -> None:
    assert play(client, seed, latest_turn_only, stream=False) is GameState.GAME_OVER


def play_stored(client: genai.Client, seed: int) -> GameState:
    """Play one game sending only each new frame, continuing the previous interaction by its id (store unset)."""
    env = make_environment("beacon_grid", seed)
    frame = env.reset()
    previous: dict[str, str] = {}
    for _ in range(MAX_STEPS):
        if frame.state is not GameState.NOT_FINISHED:
            break
        reply = client.interactions.create(
            model=MODEL, input=frame.text, system_instruction=SYSTEM, generation_config=SUMMARIES, **previous
        )
        match = ACTION_LINE.search(text_of(reply))
        assert match is not None, reply
        previous = {"previous_interaction_id": str(reply.id)}
        frame = env.step(match.group(1))
    return frame.state


def play_through_the_tool(client: genai.Client, seed: int) -> GameState:
    """Play one game acting by the model's calls of the actions offered as tools: each next frame is
    the call's result."""
    env = make_environment("beacon_grid", seed)
    frame = env.reset()
    history: list[Step] = [user(frame.text)]
    for _ in range(MAX_STEPS):
        if frame.state is not GameState.NOT_FINISHED:
            break
        reply = ask(client, history, tools=ACTIONS)
        assert reply.status == "requires_action", reply
        call = replayed(reply)[-1]
        frame = env.step(call["name"])
        history = [*history, *replayed(reply), result(call, frame.text)]
    return frame.state


@pytest.mark.parametrize("seed", SEEDS)
def test_a_game_continued_by_previous_interaction_id_wins(client: genai.Client, seed: int) -> None:
    assert play_stored(client, seed) is GameState.WIN


def test_a_game_played_through_the_actions_as_tools_with_a_faithful_replay_wins(client: genai.Client) -> None:
    assert play_through_the_tool(client, SEEDS[0]) is GameState.WIN
