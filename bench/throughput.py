"""Throughput: concurrent `turnstate run` processes against one local provider.

The benchmark serves one local provider from its own process and starts RUNS runs of the default
profile (pointed at that provider), CONCURRENCY at a time, each a `turnstate run` process. It prints
runs per minute, and the provider's share of all the CPU time spent (its process's against the
runs'), which says whether the provider is the bottleneck.

    python bench/throughput.py [--runs 16] [--concurrency 8] [--levels 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

from turnstate.local_provider.server import LocalProvider
from turnstate.session.profile import DEFAULT_PROFILE, load_profile

KEY_VARIABLE = "TURNSTATE_BENCH_KEY"


def turnstate_command() -> list[str]:
    found = shutil.which("turnstate")
    return [found] if found else [sys.executable, "-m", "turnstate.cli"]


def measure(runs: int, concurrency: int, levels: int) -> dict[str, float]:
    with LocalProvider(request_log_size=0) as provider, tempfile.TemporaryDirectory() as work:
        data = load_profile(DEFAULT_PROFILE).model_dump(exclude_none=True)
        data["environment"]["options"] = {"levels": levels}
        data["client"] = {"base_url": provider.openai_base_url, "api_key_env": KEY_VARIABLE}
        profile = Path(work) / "throughput.yaml"
        profile.write_text(yaml.safe_dump(data))
        environment = {**os.environ, KEY_VARIABLE: "sk-bench"}

        def one_run(index: int) -> int:
            out = Path(work) / f"runs-{index}"
            command = [*turnstate_command(), "run", str(profile), "--out", str(out)]
            return subprocess.run(command, env=environment, capture_output=True, check=False).returncode

        before = resource.getrusage(resource.RUSAGE_SELF)
        started = time.perf_counter()
        with ThreadPoolExecutor(concurrency) as pool:
            codes = list(pool.map(one_run, range(runs)))
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    provider_cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    runs_cpu = children.ru_utime + children.ru_stime
    return {
        "runs": runs,
        "concurrency": concurrency,
        "failed_runs": sum(1 for code in codes if code != 0),
        "wall_seconds": wall,
        "runs_per_minute": runs / wall * 60,
        "provider_cpu_seconds": provider_cpu,
        "runs_cpu_seconds": runs_cpu,
        "provider_cpu_share": provider_cpu / (provider_cpu + runs_cpu),
        "cores": os.cpu_count() or 1,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=16)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--levels", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    figures = measure(args.runs, args.concurrency, args.levels)
    if args.json:
        print(json.dumps(figures))
        return
    print(
        f"{figures['runs']} runs, {figures['concurrency']} at a time on {figures['cores']} cores "
        f"({figures['failed_runs']} failed): {figures['runs_per_minute']:.1f} runs per minute"
    )
    print(
        f"CPU: provider {figures['provider_cpu_seconds']:.1f} s, runs {figures['runs_cpu_seconds']:.1f} s "
        f"(provider share {figures['provider_cpu_share']:.3f})"
    )


if __name__ == "__main__":
    main()
