"""The cached share of input tokens over long runs whose window forces trimming or compaction.

Each scenario plays TURNS accepted actions of a long beacon_grid game with an 8,000- and a
32,000-token budget (both large enough for the local provider's model of OpenAI's caching rule to
apply: from 1,024 tokens, in blocks of 128; compaction starts at 3/4 of the budget). It prints the share of all input tokens the provider reported cached, and the
share over the action requests that kept the previous request's prefix (read from the step records:
a request that follows its predecessor without dropping anything), and how often the prefix moved:
trims for manual_rolling, compactions for continuous conversation. For a harness summary it prints
the summary requests' own cached share, which is where the fork and the independent form differ.

Beside the kept-prefix share it prints that share's ceiling: what those requests would report if
every token of the request before them were cached, under the caching rule (rounded down to 128,
nothing below 1,024). What no cache can serve is each turn's new input and the previous reply, so
the ceiling is set by the budget and the game, and the gap to it is what the harness loses.

    python bench/cache_share.py [--turns N] [--json]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from turnstate.local_provider.openai_words import PROMPT_CACHING  # every scenario's wire is OpenAI's
from turnstate.session.profile import PROFILES_DIR, Profile, load_profile
from turnstate.session.runner import Runner

BUDGETS = (8_000, 32_000)
TRIGGER = "trigger"  # in a scenario's changes: compaction starts at 3/4 of the budget


@dataclass(frozen=True)
class Scenario:
    name: str
    profile: str
    changes: dict[str, Any]


SCENARIOS = (
    Scenario("manual_rolling, low-water mark 0.75", "local-manual-rolling", {"agent": {"trim_low_water": 0.75}}),
    Scenario("manual_rolling, trimmed every turn (1.0)", "local-manual-rolling", {"agent": {"trim_low_water": 1.0}}),
    Scenario(
        "continuous, native inline compaction",
        "local-openai-continuous",
        {"request": {"options": {"context_management": [{"type": "compaction", "compact_threshold": TRIGGER}]}}},
    ),
    Scenario(
        "continuous, harness summary, fork",
        "local-openai-harness-summary",
        {"runtime": {"compaction": {"trigger_tokens": TRIGGER, "fork": True, "summary_max_output_tokens": 1024}}},
    ),
    Scenario(
        "continuous, harness summary, independent",
        "local-openai-harness-summary",
        {"runtime": {"compaction": {"trigger_tokens": TRIGGER, "fork": False, "summary_max_output_tokens": 1024}}},
    ),
)


@dataclass
class Share:
    scenario: str
    budget: int
    outcome: str
    turns: int
    input_tokens: int
    cached_tokens: int
    share: float
    kept_prefix_share: float  # over action requests that kept their predecessor's prefix
    kept_prefix_ceiling: float  # the same, if all of each predecessor's input were served cached
    prefix_moves: int  # trims or compactions: action requests that did not keep it
    summary_share: float | None  # a harness summary's requests' own cached share


def scenario_profile(scenario: Scenario, budget: int, turns: int) -> Profile:
    data = load_profile(PROFILES_DIR / f"{scenario.profile}.yaml").model_dump()
    data["environment"]["options"] = {"levels": 1000}
    data["agent"].update({"max_actions": turns, "max_context_length": budget})
    data["client"]["local"] = {**(data["client"].get("local") or {}), "context_window": budget}
    changes = json.loads(json.dumps(scenario.changes).replace(f'"{TRIGGER}"', str(budget * 3 // 4)))
    for section, values in changes.items():
        for key, value in values.items():
            current = data[section].get(key)
            data[section][key] = {**current, **value} if isinstance(current, dict) else value
    return Profile.model_validate(data)


def measure(scenario: Scenario, budget: int, turns: int) -> Share:
    with tempfile.TemporaryDirectory() as out:
        result = Runner(scenario_profile(scenario, budget, turns), Path(out)).run()
        steps = [json.loads(path.read_text()) for path in sorted(result.artifacts.glob("step_*.json"))]
    kept_input = kept_cached = kept_best = moves = summary_input = summary_cached = 0
    previous_input = 0  # the action request's input tokens at the step before
    for step in steps:
        compaction = (step.get("compaction") or {}).get("usage") or {"input_tokens": 0, "cached_input_tokens": 0}
        summary_input += compaction["input_tokens"]
        summary_cached += compaction["cached_input_tokens"]
        request = step["request"]
        action_input = step["usage"]["input_tokens"] - compaction["input_tokens"]
        if request["after_step"] is not None and request["dropped"] == 0:
            kept_input += action_input
            kept_cached += step["usage"]["cached_input_tokens"] - compaction["cached_input_tokens"]
            kept_best += PROMPT_CACHING.reported(previous_input)
        elif request["after_step"] is not None or step["step"] > 1:
            moves += 1
        previous_input = action_input
    usage = result.usage
    return Share(
        scenario=scenario.name,
        budget=budget,
        outcome=result.outcome,
        turns=result.turns,
        input_tokens=usage.input_tokens,
        cached_tokens=usage.cached_input_tokens,
        share=usage.cached_input_tokens / usage.input_tokens,
        kept_prefix_share=kept_cached / kept_input if kept_input else 0.0,
        kept_prefix_ceiling=kept_best / kept_input if kept_input else 0.0,
        prefix_moves=moves,
        summary_share=summary_cached / summary_input if summary_input else None,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    shares = [measure(scenario, budget, args.turns) for budget in BUDGETS for scenario in SCENARIOS]
    if args.json:
        print(json.dumps([asdict(share) for share in shares]))
        return
    print(
        f"{'scenario':<44} {'budget':>6} {'outcome':<12} {'turns':>5} {'share':>6} {'kept':>6} {'ceiling':>7} "
        f"{'moves':>5} {'summary':>7}"
    )
    for share in shares:
        summary = f"{share.summary_share:.3f}" if share.summary_share is not None else "-"
        print(
            f"{share.scenario:<44} {share.budget:>6} {share.outcome:<12} {share.turns:>5} {share.share:>6.3f} "
            f"{share.kept_prefix_share:>6.3f} {share.kept_prefix_ceiling:>7.3f} {share.prefix_moves:>5} {summary:>7}"
        )


if __name__ == "__main__":
    main()
