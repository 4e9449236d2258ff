"""What the shared rate limit does to a sweep (issue 36): the eight-run sweep of
tests/harness/test_rate_limit.py (the default profile, one level each, eight pool processes) against
one local provider enforcing its REQUESTS_PER_MINUTE, with the limit shared (client.rate_limit at the
same rate) and without it. For each: the wall time, the 429s the provider sent, the runs' retries, the
seconds they waited on the limit, and their wins. Median of `--repeat`. It needs the test extra.

    python bench/rate_limit.py [--repeat N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root, for its tests

from tests.conftest import SERVED_KEY_VARIABLE  # noqa: E402
from tests.harness.test_rate_limit import REQUESTS_PER_MINUTE, eight_runs  # noqa: E402
from turnstate.adapters.rate_buckets import Rate  # noqa: E402
from turnstate.local_provider.server import LocalProvider  # noqa: E402


def sweep(folder: Path, limited: bool) -> dict[str, float]:
    with LocalProvider(rate=Rate(requests_per_minute=REQUESTS_PER_MINUTE)) as provider:
        started = time.perf_counter()
        rows = eight_runs(folder, provider.openai_base_url, limited)
        return {
            "wall s": time.perf_counter() - started,
            "429s": provider.refused_over_rate,
            "retries": sum(row["retries"] for row in rows),
            "waited s": sum(row["rate_limit_seconds"] for row in rows),
            "wins": sum(row["outcome"] == "win" for row in rows),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    repeat = parser.parse_args().repeat
    os.environ.setdefault(SERVED_KEY_VARIABLE, "sk-bench")  # before the pool's forkserver starts
    print(f"8 runs, {REQUESTS_PER_MINUTE} requests a minute enforced; median of {repeat}")
    for limited in (True, False):
        figures: dict[str, list[float]] = {}
        for _ in range(repeat):
            with tempfile.TemporaryDirectory() as folder:
                for name, value in sweep(Path(folder), limited).items():
                    figures.setdefault(name, []).append(value)
        said = ", ".join(f"{name} {statistics.median(values):.2f}" for name, values in figures.items())
        print(f"{'shared limit' if limited else 'no limit':13} {said}")


if __name__ == "__main__":
    main()
