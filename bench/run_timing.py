"""Time runs of a profile: wall time, turns, and harness time per turn excluding provider time.

Provider time is the time spent inside adapter.call (SDK + HTTP + the local provider's work); the
rest of a run's wall time is the harness: machines, request building, trimming, parsing, artifacts.

    python bench/run_timing.py [PROFILE] [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from turnstate.session.profile import DEFAULT_PROFILE, load_profile
from turnstate.session.runner import Runner


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("profile", nargs="?", default=str(DEFAULT_PROFILE))
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    profile = load_profile(args.profile)
    walls, harness_per_turn, provider_per_turn = [], [], []
    with tempfile.TemporaryDirectory() as out:
        Runner(profile, Path(out)).run()  # warm-up: imports, first connection
        for _ in range(args.repeat):
            result = Runner(profile, Path(out)).run()
            walls.append(result.wall_seconds)
            turns = result.turns
            harness_per_turn.append((result.wall_seconds - result.provider_seconds) / turns)
            provider_per_turn.append(result.provider_seconds / turns)
    print(
        f"profile {profile.id}: {args.repeat} runs, outcome {result.outcome}, {result.turns} turns, {result.usage.input_tokens} input tokens"
    )
    print(
        f"run wall time      median {statistics.median(walls) * 1000:.1f} ms  (min {min(walls) * 1000:.1f}, max {max(walls) * 1000:.1f})"
    )
    print(f"harness per turn   median {statistics.median(harness_per_turn) * 1000:.2f} ms  (excluding provider time)")
    print(
        f"provider per turn  median {statistics.median(provider_per_turn) * 1000:.2f} ms  (SDK + HTTP + local provider)"
    )


if __name__ == "__main__":
    main()
