"""What `turnstate export --inspect` costs (issue 36): a 300-turn run of the default profile on the
embedded local provider, then its export as an Inspect log (.eval and .json), each a new process, and
the files' sizes. The figures are the median of `--repeat` exports. It needs the inspect extra.

    python bench/inspect_export.py [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUN = ["run", "--set", "agent.max_actions=300", "--set", "environment.options.levels=60", "--json"]


def timed(arguments: list[str]) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "turnstate.cli", *arguments], capture_output=True, text=True, check=True
    )
    return time.perf_counter() - started, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    repeat = parser.parse_args().repeat
    with tempfile.TemporaryDirectory() as out:
        run_dir = Path(json.loads(timed([*RUN, "--out", out])[1])["run_folder"])
        steps = len(list(run_dir.glob("step_*.json")))
        print(f"{steps} steps; median of {repeat} exports, each a new process")
        for suffix in (".eval", ".json"):
            path = Path(out, f"run{suffix}")
            seconds = statistics.median(
                timed(["export", str(run_dir), "--inspect", str(path)])[0] for _ in range(repeat)
            )
            print(f"{suffix:6} {seconds:6.2f} s  {path.stat().st_size / 1e6:6.2f} MB")
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import inspect_ai.log"], check=True)
        print(f"importing inspect_ai.log alone: {time.perf_counter() - started:.2f} s")


if __name__ == "__main__":
    main()
