"""What the shared rate limit does to a sweep (issue 36): eight runs of the default profile (one
level each) in eight processes against one local provider enforcing REQUESTS_PER_MINUTE, with the
limit shared (client.rate_limit at the same rate) and without it. For each: the wall time, the 429s
the provider sent, the runs' retries, and the seconds they waited on the limit. Median of `--repeat`.

    python bench/rate_limit.py [--repeat N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import yaml

from turnstate.adapters.rate_buckets import Rate
from turnstate.local_provider.server import LocalProvider
from turnstate.session.profile import PROFILES_DIR
from turnstate.sweeps.engines import PoolEngine, run_sweep
from turnstate.sweeps.plan import load_sweep

REQUESTS_PER_MINUTE = 600
KEY_VARIABLE = "TURNSTATE_BENCH_KEY"
SWEEP = """
id: limited
profiles: [limited.yaml]
environments:
  - name: beacon_grid
    options: {levels: 1}
    seeds: [0, 1, 2, 3, 4, 5, 6, 7]
budget: {in_flight: 8}
"""


def sweep(folder: Path, limited: bool) -> dict[str, float]:
    with LocalProvider(rate=Rate(requests_per_minute=REQUESTS_PER_MINUTE)) as provider:
        profile = yaml.safe_load((PROFILES_DIR / "local-manual-rolling.yaml").read_text())
        profile["client"] = {"base_url": provider.openai_base_url, "api_key_env": KEY_VARIABLE}
        if limited:
            profile["client"]["rate_limit"] = {"requests_per_minute": REQUESTS_PER_MINUTE}
        (folder / "limited.yaml").write_text(yaml.safe_dump(profile))
        (folder / "sweep.yaml").write_text(SWEEP)
        plan = load_sweep(folder / "sweep.yaml")
        started = time.perf_counter()
        rows = run_sweep(plan, folder / "out", PoolEngine(plan.adapter_ids))
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
    os.environ.setdefault(KEY_VARIABLE, "sk-bench")
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
