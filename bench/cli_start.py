"""How long the command line takes to answer (issue 36: `turnstate --help` under half a second), and
how long `turnstate run` takes from its process's start to its first model request, and which SDKs
the process has loaded by then (a run loads only its adapter's).

Each command is a new process, as a user's shell starts it; the figures are the median and the
slowest of `--repeat` runs.

    python bench/cli_start.py [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time

FIRST_REQUEST = """
import sys, time, tempfile
from pathlib import Path
from turnstate.session.profile import load_profile, resolve_profile
from turnstate.session.runner import Runner

class First(Exception):
    pass

def at(point):
    if point == "before_provider_call":
        raise First

try:
    Runner(load_profile(resolve_profile(sys.argv[1])), Path(tempfile.mkdtemp()), on_point=at).run()
except First:
    sdks = [name for name in ("openai", "anthropic", "google.genai") if name in sys.modules]
    print(time.time(), ",".join(sdks))
"""

PROFILES = ("local-manual-rolling", "local-anthropic-continuous", "local-gemini-harness-summary")


def timed(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    return time.perf_counter() - started


def first_request(profile: str) -> tuple[float, str]:
    started = time.time()
    printed = subprocess.run([sys.executable, "-c", FIRST_REQUEST, profile], check=True, capture_output=True, text=True)
    at, sdks = printed.stdout.split()
    return float(at) - started, sdks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    turnstate = [sys.executable, "-m", "turnstate.cli"]
    with tempfile.TemporaryDirectory():
        for name, command in (
            ("turnstate --help", [*turnstate, "--help"]),
            ("turnstate run -h", [*turnstate, "run", "-h"]),
        ):
            times = [timed(command) for _ in range(args.repeat)]
            print(f"{name:<40} median {statistics.median(times) * 1000:6.0f} ms   slowest {max(times) * 1000:6.0f} ms")
        for profile in PROFILES:
            results = [first_request(profile) for _ in range(max(3, args.repeat // 4))]
            times = [seconds for seconds, _ in results]
            print(
                f"first request, {profile:<25} median {statistics.median(times) * 1000:6.0f} ms   "
                f"slowest {max(times) * 1000:6.0f} ms   SDKs loaded: {results[0][1]}"
            )


if __name__ == "__main__":
    main()
