"""The cached-token share of input over long runs of a profile: the longest games beacon_grid has.

Each run plays all 9 levels on the largest grid (15 x 11), up to --max-actions accepted actions, for
several seeds, and prints turns, levels won, input and cached tokens and the cached share. Caching
follows the local provider's model of OpenAI's rule (from 1,024 tokens, in blocks of 128), so the
share says how stable each strategy keeps its prompt prefix.

    python bench/cached_share.py [PROFILE ...] [--seeds N] [--max-actions N]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from turnstate.harness.profile import DEFAULT_PROFILE, Profile, load_profile
from turnstate.harness.runner import Runner


def long_game(profile: Profile, seed: int, max_actions: int) -> Profile:
    data = profile.model_dump()
    data["environment"] = {**data["environment"], "seed": seed, "options": {"levels": 9, "width": 15, "height": 11}}
    data["agent"] = {**data["agent"], "max_actions": max_actions}
    return Profile.model_validate(data)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("profiles", nargs="*", default=[str(DEFAULT_PROFILE)])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--max-actions", type=int, default=100)
    args = parser.parse_args()
    print(
        f"{'profile':<36} {'seed':>4} {'outcome':<14} {'turns':>5} {'levels':>6} {'input':>8} {'cached':>8} {'share':>6}"
    )
    with tempfile.TemporaryDirectory() as out:
        for path in args.profiles:
            profile = load_profile(path)
            for seed in range(args.seeds):
                result = Runner(long_game(profile, seed, args.max_actions), Path(out)).run()
                usage = result.usage
                share = usage.cached_input_tokens / usage.input_tokens if usage.input_tokens else 0.0
                print(
                    f"{profile.id:<36} {seed:>4} {result.outcome:<14} {result.turns:>5} {result.levels_won:>6} "
                    f"{usage.input_tokens:>8} {usage.cached_input_tokens:>8} {share:>6.3f}"
                )


if __name__ == "__main__":
    main()
