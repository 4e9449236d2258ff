"""What a live trace costs a run (issue 36): a 300-turn run of the default profile on the embedded
local provider, untraced and traced live to Arize Phoenix (tools/phoenix.py), each a new process;
and how long `turnstate export --otlp` takes on the run it left. The figures are the median of
`--repeat` runs. It needs the otel extra and Phoenix installed (`python tools/phoenix.py install`).

    python bench/traces.py [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))

from phoenix import running_phoenix  # noqa: E402  (tools/phoenix.py)

RUN = ["run", "--set", "agent.max_actions=300", "--set", "environment.options.levels=60", "--json"]


def timed(arguments: list[str], environment: dict[str, str]) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "turnstate.cli", *arguments], env=environment, capture_output=True, text=True, check=True
    )
    return time.perf_counter() - started, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    repeat = parser.parse_args().repeat
    plain = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    with tempfile.TemporaryDirectory() as out, running_phoenix() as phoenix:
        traced = plain | {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": phoenix.traces_url}
        figures: dict[str, list[float]] = {"untraced run": [], "traced run": [], "export": []}
        for _ in range(repeat):
            figures["untraced run"].append(timed([*RUN, "--out", out], plain)[0])
            seconds, stdout = timed([*RUN, "--out", out], traced)
            figures["traced run"].append(seconds)
            run_dir = json.loads(stdout)["run_folder"]
            figures["export"].append(timed(["export", run_dir, "--otlp", f"{out}/trace.json"], plain)[0])
        spans = len(json.loads(Path(f"{out}/trace.json").read_text())["resourceSpans"][0]["scopeSpans"][0]["spans"])
    print(f"300 turns, {spans} spans; median of {repeat}, each a new process")
    for name, values in figures.items():
        print(f"{name:14} {statistics.median(values):6.2f} s")


if __name__ == "__main__":
    main()
