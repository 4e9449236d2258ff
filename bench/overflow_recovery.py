"""Overflow recovery: how many summary requests a forced deep recovery makes after N accepted turns.

A harness-summary run plays N turns in a window that never fills; then the local provider answers
the next action request, and every summary request after it, with a context overflow. The machine
summarizes (the action-overflow lane), and each overflowing summary halves the turns it summarizes
(OverflowRecovery) until only the oldest turn is left, which fails closed with the accepted state
intact. The figure is the number of summary requests, against its bound ceil(log2 N) + 2.

    python bench/overflow_recovery.py [--turns 10 100 1000] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
from pathlib import Path

from turnstate.session.profile import PROFILES_DIR, Profile, load_profile
from turnstate.session.runner import Runner

PROFILE = PROFILES_DIR / "local-open-source-continuous.yaml"  # harness summaries over Chat Completions
WIDE = 10_000_000


def deep_recovery_profile(turns: int) -> Profile:
    data = load_profile(PROFILE).model_dump()
    data["environment"]["options"] = {"levels": 1000}
    data["agent"].update({"max_actions": turns + 1, "max_context_length": WIDE})
    data["runtime"]["compaction"]["trigger_tokens"] = WIDE // 2  # never reached: only overflows summarize
    overflows = range(turns + 1, turns + 1 + math.ceil(math.log2(max(turns, 2))) + 8)
    data["client"]["local"] = {
        "context_window": WIDE,
        "faults": [{"at": ordinal, "kind": "context_overflow"} for ordinal in overflows],
    }
    return Profile.model_validate(data)


def summary_requests(turns: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as out:
        result = Runner(deep_recovery_profile(turns), Path(out)).run()
        failed = json.loads((result.artifacts / "failed_turn.json").read_text())
    summaries = [attempt for attempt in failed["attempts"] if attempt.get("summary_input")]
    return {
        "turns": result.accepted_actions,
        "outcome": result.outcome,
        "summary_requests": len(summaries),
        "bound": math.ceil(math.log2(turns)) + 2,
        "summarized_turns": [attempt["summary_input"]["summarized_turns"] for attempt in summaries],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    figures = [summary_requests(turns) for turns in args.turns]
    if args.json:
        print(json.dumps(figures))
        return
    for figure in figures:
        print(
            f"{figure['turns']} turns ({figure['outcome']}): {figure['summary_requests']} summary requests "
            f"(bound {figure['bound']}), summarizing {figure['summarized_turns']} turns"
        )


if __name__ == "__main__":
    main()
