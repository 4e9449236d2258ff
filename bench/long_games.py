"""Long games: does every local compaction profile win a 400-level game, and at what cost.

Each profile below plays one beacon_grid game of --levels levels (environment.options.levels) with
agent.max_actions raised to ACTIONS_PER_LEVEL a level (a level takes about 7), against the embedded
local provider, as `turnstate run` plays it; the profile is otherwise unchanged, so every run
compacts many times over at the profile's own trigger. Printed per profile: the outcome and levels
won, turns, compactions committed, tokens in / cached / out, wall time, and the accepted history at
the end (items, how many of them user messages, and the last accepted action's completed context
against the profile's context budget), which says where a run that does not win stopped and why.
Figures are printed (or JSON with --json), never asserted:

    python bench/long_games.py [--levels 400] [--context-length N] [--json] [PROFILE_ID ...]

--context-length sets agent.max_context_length and the local provider's window (client.local.
context_window) together, to measure how far a run whose history grows gets in a larger window.

The harness-summary profiles compact by the model's summary (OpenAI Responses, Gemini Interactions,
DeepSeek and open-weight Chat Completions); local-openai-continuous by inline native compaction;
local-xai-continuous and local-anthropic-continuous by a compaction call of their own.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from turnstate.session.profile import PROFILES_DIR, Profile, load_profile
from turnstate.session.runner import Runner, freeze_startup_objects

PROFILES = (
    "local-openai-harness-summary",
    "local-gemini-harness-summary",
    "local-deepseek-continuous",
    "local-open-source-continuous",
    "local-openai-continuous",
    "local-xai-continuous",
    "local-anthropic-continuous",
)
ACTIONS_PER_LEVEL = 20  # about 7 a level, with room for resets: a run ends by its outcome, not by this cap
RUNS = Path("runs")  # where `turnstate run` writes; each run's artifacts are removed once read


@dataclass
class LongGame:
    profile: str
    compaction: str
    outcome: str
    failure: str | None
    levels: int
    levels_won: int
    turns: int
    compactions: int
    input_tokens: int
    cached_tokens: int
    output_tokens: int
    wall_seconds: float
    history_items: int  # the accepted history at the end
    user_messages: int  # of them, user messages (a compacted window may keep them)
    completed_context: int  # the last accepted action's input plus output tokens, as reported
    context_budget: int  # agent.max_context_length


def long_game(profile: Profile, levels: int, context_length: int | None) -> Profile:
    data = profile.model_dump()
    data["environment"]["options"] = {**(data["environment"]["options"] or {}), "levels": levels}
    data["agent"]["max_actions"] = ACTIONS_PER_LEVEL * levels
    if context_length is not None:
        data["agent"]["max_context_length"] = context_length
        data["client"]["local"] = {**(data["client"].get("local") or {}), "context_window": context_length}
    return Profile.model_validate(data)


def play(profile_id: str, levels: int, context_length: int | None = None) -> LongGame:
    profile = long_game(load_profile(PROFILES_DIR / f"{profile_id}.yaml"), levels, context_length)
    RUNS.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=RUNS) as out:
        runner = Runner(profile, Path(out))
        result = runner.run()
    state = result.accepted_state
    readable = runner.descriptor.load().transcript.readable(state.items)
    compaction = profile.runtime.compaction
    return LongGame(
        profile=profile_id,
        compaction=compaction.strategy if compaction.strategy != "native" else f"native ({by_call_or_inline(runner)})",
        outcome=result.outcome,
        failure=result.failure,
        levels=levels,
        levels_won=result.levels_won,
        turns=result.turns,
        compactions=result.compactions,
        input_tokens=result.usage.input_tokens,
        cached_tokens=result.usage.cached_input_tokens,
        output_tokens=result.usage.output_tokens,
        wall_seconds=result.wall_seconds,
        history_items=state.item_count,
        user_messages=sum(1 for message in readable if message["role"] == "user"),
        completed_context=state.completed_context_tokens,
        context_budget=profile.agent.max_context_length,
    )


def by_call_or_inline(runner: Runner) -> str:
    return "inline" if runner.descriptor.load().native_compaction == "inline" else "by call"


def table(games: list[LongGame]) -> str:
    lines = [
        "| profile | compaction | outcome | levels won | turns | compactions | tokens in / cached / out | wall | "
        "history at the end: items, user messages, completed context / budget |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for game in games:
        outcome = game.outcome if game.failure is None else f"{game.outcome} ({game.failure})"
        lines.append(
            f"| {game.profile} | {game.compaction} | {outcome} | {game.levels_won}/{game.levels} | {game.turns:,} | "
            f"{game.compactions:,} | {game.input_tokens:,} / {game.cached_tokens:,} / {game.output_tokens:,} | "
            f"{game.wall_seconds:.1f} s | {game.history_items:,}, {game.user_messages:,}, "
            f"{game.completed_context:,} / {game.context_budget:,} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("profiles", nargs="*", default=list(PROFILES), metavar="PROFILE_ID")
    parser.add_argument("--levels", type=int, default=400)
    parser.add_argument("--context-length", type=int, help="the context budget and the local window, in tokens")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON list")
    args = parser.parse_args()
    freeze_startup_objects()  # as `turnstate run` does
    games = [play(profile_id, args.levels, args.context_length) for profile_id in args.profiles]
    print(json.dumps([asdict(game) for game in games]) if args.json else table(games))


if __name__ == "__main__":
    main()
