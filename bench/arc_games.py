"""Every strategy and compaction variant playing the public ARC-AGI-3 preview games (ls20, ft09) on
the embedded local provider's recording model (client.local.recording), through the official
toolkit: per variant and game, the outcome, levels, turns, compactions, peak request tokens, tokens
in / cached / out and wall.

    python bench/arc_games.py [--arc ../shared/arc-agi-3] [--games ls20 ft09] [--variants NAME ...]

Needs Python 3.12 with the arc extra (as .ci/arc installs it) and the games and recordings in
that folder (never copied into the project)."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from turnstate.session.runner import Runner

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from tests.environments.arc_preview import RECORDINGS, VARIANTS, arc_profile  # noqa: E402 - the tests' own table


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arc", type=Path, default=REPO.parent / "shared" / "arc-agi-3")
    parser.add_argument("--games", nargs="+", default=list(RECORDINGS))
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS))
    arguments = parser.parse_args()
    if not arguments.arc.is_dir():
        print(f"no ARC-AGI-3 games in {arguments.arc}: pass --arc", file=sys.stderr)
        return 2
    print(
        "| variant | game | outcome | levels | turns | compactions | peak request tokens | in / cached / out | wall |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as out:
        for variant in arguments.variants:
            for game in arguments.games:
                started = time.perf_counter()
                result = Runner(arc_profile(variant, game, arguments.arc), out_dir=Path(out)).run()
                wall = time.perf_counter() - started
                calls = [json.loads(line) for line in (result.artifacts / "calls.jsonl").read_text().splitlines()]
                peak = max((call["usage"]["input_tokens"] for call in calls), default=0)
                usage = result.usage
                outcome = result.outcome + (f" ({result.failure})" if result.failure else "")
                print(
                    f"| {variant} | {game} | {outcome} | {result.levels_won} | {result.turns} | {result.compactions} | "
                    f"{peak} | {usage.input_tokens} / {usage.cached_input_tokens} / {usage.output_tokens} | {wall:.1f} s |",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
