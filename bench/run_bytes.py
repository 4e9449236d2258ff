"""What a run folder holds (issue 30, "each fact stored once"): the bytes of each of its files at the
end of a growing-history run, the checkpoints included.

Plays local-manual-rolling ("wide": the whole history kept, no compaction, as bench/long_run.py's
wide regime) for each number of turns, with the default checkpoint key (the continuation sealed,
as a plain `turnstate run` keeps it) and opted out (TURNSTATE_CHECKPOINT_KEY=off: no continuation),
each in a process of its own, and prints the bytes by file (step records together). Figures are
printed (or JSON with --json), never asserted. Goals: 1.2 MB at 300 turns, 2.5 MB at 1000.

    python bench/run_bytes.py [--turns 300 1000] [--json]     # about 30 seconds
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from long_run import long_profile  # beside this script

from turnstate.durable.checkpoints import KEY_VARIABLE, OPT_OUT
from turnstate.session.profile import DEFAULT_PROFILE, load_profile
from turnstate.session.runner import Runner

GOALS_MB = {300: 1.2, 1000: 2.5}


def folder_bytes(run_dir: Path) -> dict[str, int]:
    """Bytes by file, the step and compaction records each summed under their prefix."""
    sizes: collections.Counter[str] = collections.Counter()
    for path in run_dir.iterdir():
        name = path.name
        kind = name.split("_")[0] + "_*.json" if name.startswith(("step_", "compaction_")) else name
        sizes[kind] += path.stat().st_size
    return dict(sizes.most_common())


def play(turns: int) -> dict[str, int]:
    with tempfile.TemporaryDirectory() as out:
        result = Runner(long_profile(load_profile(DEFAULT_PROFILE), turns, "wide"), Path(out)).run()
        return folder_bytes(result.artifacts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, nargs="+", default=[300, 1000])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # a child's run: print its JSON
    arguments = parser.parse_args()
    if arguments.one:
        print(json.dumps(play(arguments.one)))
        return
    figures = []
    for turns in arguments.turns:
        for keyed in (True, False):
            environment = {name: value for name, value in os.environ.items() if name != KEY_VARIABLE}
            if not keyed:
                environment[KEY_VARIABLE] = OPT_OUT
            child = [sys.executable, __file__, "--one", str(turns)]
            sizes = json.loads(subprocess.run(child, env=environment, check=True, capture_output=True).stdout)
            figures.append({"turns": turns, "continuation": keyed, "bytes": sizes, "total": sum(sizes.values())})
    if arguments.json:
        print(json.dumps(figures))
        return
    for figure in figures:
        kept = "key (continuation sealed)" if figure["continuation"] else "opted out (no continuation)"
        goal = GOALS_MB.get(figure["turns"])
        print(
            f"{figure['turns']} turns, {kept}: {figure['total'] / 1e6:.2f} MB" + (f" (goal {goal} MB)" if goal else "")
        )
        for name, size in figure["bytes"].items():
            print(f"  {name:24} {size / 1e3:8.1f} kB")


if __name__ == "__main__":
    main()
