"""Whole games of beacon_grid over the Responses wire, through the real openai SDK.

The policy notes a level's beacon only in the reasoning of the turn that saw it, so the game is won
only by a client that replays that reasoning (or the compaction that replaced it) faithfully; a
lossy client loses a level whose beacon is not the guessed door A. The seeds are the ones where
that guess fails some level.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import openai
import pytest
from openai.types.responses import Response

from turnstate.environments import Frame, GameState, make_environment
from turnstate.local_provider.server import LocalProvider

from .test_policy import LOST_MEMORY_SEEDS
from .test_responses import ENCRYPTED, MODEL, SYSTEM, Item, client_for, replayable, replayable_compaction, user

MAX_STEPS = 300
ACTION_LINE = re.compile(r"^ACTION: (\S+)$", re.MULTILINE)
SEEDS = LOST_MEMORY_SEEDS[:2]

Replay = Callable[[list[Item], Response], list[Item]]
"""(this turn's input, its response) -> the history the next turn starts from."""


def faithful(sent: list[Item], response: Response) -> list[Item]:
    """Every input and output item, then only the latest compaction item and everything after it."""
    history = [*sent, *replayable(response)]
    compactions = [index for index, item in enumerate(history) if item.get("type") == "compaction"]
    return history[compactions[-1] :] if compactions else history


def visible_text_only(sent: list[Item], response: Response) -> list[Item]:
    """A Chat-style client: frames and the visible replies, no reasoning."""
    return [*sent, {"role": "assistant", "content": response.output_text}]


def without_compaction_items(sent: list[Item], response: Response) -> list[Item]:
    return [item for item in faithful(sent, response) if item.get("type") != "compaction"]


class Game:
    """One game, played to its end (won, lost, or out of steps), one model request per frame."""

    def __init__(self, seed: int) -> None:
        self._env = make_environment("beacon_grid", seed)
        self.frames: list[Frame] = [self._env.reset()]
        self.responses: list[Response] = []

    @property
    def over(self) -> bool:
        return self.frames[-1].state is not GameState.NOT_FINISHED or len(self.frames) > MAX_STEPS

    def answer(self, response: Response) -> None:
        assert response.status == "completed", response.status
        self.responses.append(response)
        match = ACTION_LINE.search(response.output_text)
        assert match is not None, response.output_text
        self.frames.append(self._env.step(match.group(1)))

    @property
    def won(self) -> bool:
        return self.frames[-1].state is GameState.WIN

    def input_tokens(self) -> list[int]:
        return [response.usage.input_tokens for response in self.responses]


def play_stateless(client: openai.OpenAI, seed: int, replay: Replay, **params: Any) -> Game:
    game = Game(seed)
    history: list[Item] = []
    while not game.over:
        sent = [*history, user(game.frames[-1].text)]
        response = client.responses.create(
            model=MODEL, input=sent, store=False, include=ENCRYPTED, instructions=SYSTEM, **params
        )
        game.answer(response)
        history = replay(sent, response)
    return game


@pytest.fixture
def client() -> Iterator[openai.OpenAI]:
    with LocalProvider() as provider, client_for(provider) as sdk_client:
        yield sdk_client


@pytest.mark.parametrize("seed", SEEDS)
def test_a_faithful_stateless_replay_wins(client: openai.OpenAI, seed: int) -> None:
    assert play_stateless(client, seed, faithful).won


@pytest.mark.parametrize("seed", SEEDS)
def test_replaying_only_the_visible_text_loses(client: openai.OpenAI, seed: int) -> None:
    game = play_stateless(client, seed, visible_text_only)

    assert game.frames[-1].state is GameState.GAME_OVER
    assert "YOU ENTERED DOOR A: WRONG DOOR" in game.frames[-1].text


@pytest.mark.parametrize("seed", SEEDS)
def test_a_stored_chain_of_previous_response_ids_wins(client: openai.OpenAI, seed: int) -> None:
    game = Game(seed)
    previous: str | None = None
    while not game.over:
        response = client.responses.create(
            model=MODEL, input=[user(game.frames[-1].text)], previous_response_id=previous, instructions=SYSTEM
        )
        game.answer(response)
        previous = response.id

    assert game.won


COMPACT_AT = [{"type": "compaction", "compact_threshold": 500}]


@pytest.mark.parametrize("seed", SEEDS)
def test_inline_compaction_keeps_the_game_winnable_and_the_input_bounded(client: openai.OpenAI, seed: int) -> None:
    game = play_stateless(client, seed, faithful, context_management=COMPACT_AT)

    compactions = sum(1 for response in game.responses if response.output[-1].type == "compaction")
    assert game.won
    assert compactions >= 3
    assert max(game.input_tokens()) < 500 + 300  # one turn's growth past the threshold, at most


@pytest.mark.parametrize("seed", SEEDS)
def test_dropping_the_compaction_items_loses(client: openai.OpenAI, seed: int) -> None:
    game = play_stateless(client, seed, without_compaction_items, context_management=COMPACT_AT)

    assert game.frames[-1].state is GameState.GAME_OVER


def compacted_every(turns: int, client: openai.OpenAI, *, keep: Callable[[list[Item]], list[Item]] = list) -> Replay:
    """An xAI-style client: every `turns` turns, /responses/compact replaces the answered history
    with its output (the kept user messages, then one compaction item), of which it keeps `keep`."""

    def replay(sent: list[Item], response: Response) -> list[Item]:
        history = [*sent, *replayable(response)]
        if sum(1 for item in history if item.get("type") == "reasoning") < turns:
            return history
        return keep(replayable_compaction(client.responses.compact(model=MODEL, input=history).output))

    return replay


def only_the_compaction_item(window: list[Item]) -> list[Item]:
    """A client that keeps "the latest compaction item and everything after it" of a compact output."""
    return window[-1:]


@pytest.mark.parametrize("seed", SEEDS)
def test_compacting_through_the_compact_endpoint_keeps_the_game_winnable(client: openai.OpenAI, seed: int) -> None:
    game = play_stateless(client, seed, compacted_every(4, client))

    assert game.won
    # bounded by the kept frames: the compactions replace every reasoning item and reply
    assert max(game.input_tokens()) < 2500


@pytest.mark.parametrize("seed", SEEDS)
def test_dropping_the_kept_messages_of_a_compact_output_loses(client: openai.OpenAI, seed: int) -> None:
    """The compaction item stands for what it replaced, not for the kept frames: without them a
    level's beacon is forgotten once its frame was compacted."""
    game = play_stateless(client, seed, compacted_every(4, client, keep=only_the_compaction_item))

    assert game.frames[-1].state is GameState.GAME_OVER
