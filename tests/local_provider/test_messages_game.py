"""Whole games of beacon_grid over the Anthropic Messages wire, through the real anthropic SDK.

The policy notes a level's beacon only in the signed thinking of the turn that saw it, so the game is
won only by a client that replays that thinking (or the compaction block that replaced it)
faithfully; a lossy client loses a level whose beacon is not the guessed door A.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import anthropic
import pytest

from turnstate.environments import GameState, make_environment
from turnstate.local_provider.server import LocalProvider

from .test_messages import COMPACT, MAX_TOKENS, MODEL, SYSTEM, THINKING, Turn, client_for, replayed, text_of, user
from .test_policy import LOST_MEMORY_SEEDS

MAX_STEPS = 300
ACTION_LINE = re.compile(r"^ACTION: (\S+)$", re.MULTILINE)
SEEDS = LOST_MEMORY_SEEDS[:2]


def play(
    client: anthropic.Anthropic, seed: int, *, compact_every: int | None = None, keep_thinking: bool = True
) -> tuple[GameState, int]:
    """Play one game; (its final state, how many compactions it made). With `compact_every`, the
    answered history is replaced by one compaction block every that many turns."""
    env = make_environment("beacon_grid", seed)
    frame = env.reset()
    history: list[Turn] = []
    compactions = 0
    for _ in range(MAX_STEPS):
        if frame.state is not GameState.NOT_FINISHED:
            break
        sent = [*history, user(frame.text)]
        reply = client.messages.create(
            model=MODEL,
            max_tokens=MAX_TOKENS,
            system=SYSTEM,
            thinking=THINKING,
            messages=sent,  # type: ignore[arg-type]
            extra_headers={"anthropic-beta": COMPACT} if compactions else None,  # a compaction block is replayed
        )
        match = ACTION_LINE.search(text_of(reply))
        assert reply.stop_reason == "end_turn" and match is not None, text_of(reply)
        answer = replayed(reply)
        if not keep_thinking:
            answer = {"role": "assistant", "content": [block for block in answer["content"] if block["type"] == "text"]}
        history = [*sent, answer]
        if compact_every is not None and len(history) >= 2 * compact_every:
            compacted = client.beta.messages.create(
                model=MODEL,
                max_tokens=MAX_TOKENS,
                system=SYSTEM,
                messages=history,  # type: ignore[arg-type]
                betas=[COMPACT],
                extra_body={"compaction": {"type": "summarize"}},
            )
            assert compacted.stop_reason == "compaction"
            history, compactions = [replayed(compacted)], compactions + 1
        frame = env.step(match.group(1))
    return frame.state, compactions


@pytest.fixture
def client() -> Iterator[anthropic.Anthropic]:
    with LocalProvider() as provider, client_for(provider) as sdk_client:
        yield sdk_client


@pytest.mark.parametrize("seed", SEEDS)
def test_a_faithful_replay_wins(client: anthropic.Anthropic, seed: int) -> None:
    assert play(client, seed)[0] is GameState.WIN


@pytest.mark.parametrize("seed", SEEDS)
def test_compacting_every_few_turns_keeps_the_game_winnable(client: anthropic.Anthropic, seed: int) -> None:
    state, compactions = play(client, seed, compact_every=4)
    assert state is GameState.WIN and compactions >= 2


def test_a_replay_that_drops_thinking_is_accepted_and_loses(client: anthropic.Anthropic) -> None:
    """Thinking may be left out of finished turns (the service requires it only in an open tool loop),
    so the game goes on; but the beacon was noted only in the dropped thinking."""
    state, _ = play(client, SEEDS[0], keep_thinking=False)
    assert state is GameState.GAME_OVER
