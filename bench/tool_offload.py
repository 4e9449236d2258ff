"""Tools over long runs: what the stale tool-result offload saves, and what tools cost the harness.

1. Offload. A long catalog_hunt game (every level: a read_catalog round whose page is 3,000-5,000
   characters, then the MARK) played by continuous_conversation over OpenAI Responses, with no
   compaction and a window wide enough for the whole history, once with the offload off and once
   on (the seed's defaults: keep 3 results per tool, save at least 2,000 characters). Per turn, from
   the step records: the input tokens the provider reported and the share of them it reported
   cached (the local provider's model of OpenAI's prompt caching). Goal: by the last 100 turns the
   offload cuts input tokens per turn by 3x or more, and the cached share stays at least 0.85 (a
   pointer replaces a result once, which breaks the prefix there once, no more).
2. Harness time. The same beacon_grid game played by the same profile (manual_rolling over Chat
   Completions) with `agent.action_mode: text` and `tools`, alternating, the median of PAIRS pairs:
   the harness's time per turn (wall less the provider calls). Goal: tools within 1.3x of text.

    python bench/tool_offload.py [--levels N] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path
from typing import Any

from turnstate.session.profile import PROFILES_DIR, Profile, load_profile
from turnstate.session.runner import Runner

LEVELS = 150  # two turns a level: 300 turns
WINDOW = 1_000_000  # tokens: no trimming, no compaction, no overflow
LAST = 100  # the turns the goals read
PAIRS = 3
BEACON_LEVELS = 40  # about 7 turns a level


def changed(name: str, **sections: dict[str, Any]) -> Profile:
    data = load_profile(PROFILES_DIR / f"{name}.yaml").model_dump(mode="json", exclude_none=True)
    for section, changes in sections.items():
        data[section] = {**(data.get(section) or {}), **changes}
    return Profile.model_validate(data)


def steps(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(path.read_text()) for path in sorted(run_dir.glob("step_*.json"))]


def offload_run(levels: int, offload: bool) -> dict[str, Any]:
    profile = changed(
        "local-openai-harness-summary",
        environment={"name": "catalog_hunt", "seed": 7, "options": {"levels": levels, "pages": 500}},
        agent={"max_actions": 10 * levels, "max_context_length": WINDOW},
        runtime={"compaction": {"strategy": "none"}, **({"tool_result_offload": {}} if offload else {})},
        client={"local": {"context_window": WINDOW}},
    )
    with tempfile.TemporaryDirectory() as folder:
        result = Runner(profile, Path(folder)).run()
        usage = [step["usage"] for step in steps(result.artifacts)]
        stored = len(list((result.artifacts / "tool_results").glob("*.txt"))) if offload else 0
    inputs = [entry["input_tokens"] for entry in usage]
    cached = [entry["cached_input_tokens"] for entry in usage]
    last_inputs, last_cached = inputs[-LAST:], cached[-LAST:]
    return {
        "outcome": result.outcome,
        "turns": len(usage),
        "stored_results": stored,
        "input_per_turn_last": sum(last_inputs) / len(last_inputs),
        "cached_share_last": sum(last_cached) / max(1, sum(last_inputs)),
        "cached_share_all": sum(cached) / max(1, sum(inputs)),
    }


def harness_ms_per_turn(mode: str) -> float:
    profile = changed(
        "local-manual-rolling",
        environment={"name": "beacon_grid", "seed": 3, "options": {"levels": BEACON_LEVELS}},
        agent={"max_actions": 10 * 7 * BEACON_LEVELS, "action_mode": mode},
    )
    with tempfile.TemporaryDirectory() as folder:
        result = Runner(profile, Path(folder)).run()
    assert result.outcome == "win", result.failure
    return 1000 * (result.wall_seconds - result.provider_seconds) / result.turns


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--levels", type=int, default=LEVELS)
    parser.add_argument("--json", action="store_true")
    arguments = parser.parse_args()
    off, on = offload_run(arguments.levels, False), offload_run(arguments.levels, True)
    pairs = [(harness_ms_per_turn("text"), harness_ms_per_turn("tools")) for _ in range(PAIRS)]
    text = statistics.median(pair[0] for pair in pairs)
    tools = statistics.median(pair[1] for pair in pairs)
    figures = {
        "offload_off": off,
        "offload_on": on,
        "input_cut_last": off["input_per_turn_last"] / on["input_per_turn_last"],
        "harness_ms_text": text,
        "harness_ms_tools": tools,
        "tools_over_text": tools / text,
        "pairs": pairs,
    }
    if arguments.json:
        print(json.dumps(figures))
        return
    for name in ("offload_off", "offload_on"):
        run = figures[name]
        print(
            f"{name}: {run['outcome']} in {run['turns']} turns; input per turn, last {LAST}: "
            f"{run['input_per_turn_last']:.0f}; cached share last {LAST} {run['cached_share_last']:.3f}, "
            f"all {run['cached_share_all']:.3f}; results stored {run['stored_results']}"
        )
    print(f"offload cuts input per turn (last {LAST}) by {figures['input_cut_last']:.2f}x (goal >= 3)")
    print(
        f"harness ms per turn, beacon_grid: text {text:.2f}, tools {tools:.2f} = {figures['tools_over_text']:.2f}x "
        f"(goal <= 1.3); pairs {[(round(a, 2), round(b, 2)) for a, b in pairs]}"
    )


if __name__ == "__main__":
    main()
