"""The reports in a real browser: Debian's chromium, headless, loads a run's page (from a real
`turnstate run` on the local provider) and a sweep's page (from real runs), logs no console message,
and has the plots and the diagram in its DOM.

How a console error is caught: `--enable-logging=stderr --v=0` makes chromium log every console
message of the page to stderr as `...:CONSOLE...] "text", source: URL (line)`. The reports hold no
script, so any console message at all is the browser reporting a fault (a script error, or an SVG
attribute it could not parse, such as a NaN coordinate); the first two tests prove that both reach
the check. Skipped, with a message, where no chromium is installed (apt-get install -y chromium)."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from turnstate.reports.folder import write_report
from turnstate.session.profile import load_profile, resolve_profile
from turnstate.session.runner import Runner

CHROMIUM = next((found for name in ("chromium", "chromium-browser") if (found := shutil.which(name))), None)
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="no chromium on PATH (apt-get install -y chromium): the reports are not checked in a browser",
)
CONSOLE = re.compile(r":CONSOLE[:(]")  # chromium's log line of a console message


@dataclass
class Loaded:
    dom: str  # the document as the browser parsed it (--dump-dom)
    console: list[str]  # its console messages, as chromium logged them

    def ids(self) -> set[str]:
        return set(re.findall(r'<svg[^>]*\sid="([^"]+)"', self.dom))


def load(page: Path, profile: Path) -> Loaded:
    """`page` loaded in headless chromium (a throwaway profile folder; no sandbox, which root cannot have)."""
    assert CHROMIUM is not None
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}"]
    command += ["--enable-logging=stderr", "--v=0", "--dump-dom", page.as_uri()]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    return Loaded(done.stdout, [line for line in done.stderr.splitlines() if CONSOLE.search(line)])


@pytest.mark.parametrize(
    "body, message",
    [
        ("<script>notAFunction();</script>", "Uncaught ReferenceError: notAFunction is not defined"),
        ('<svg><rect x="1" y="1" width="NaN" height="4"/></svg>', 'attribute width: Expected length, "NaN"'),
    ],
    ids=["a script error", "an svg attribute error"],
)
def test_the_console_check_catches_a_pages_error(tmp_path, body, message):
    page = tmp_path / "broken.html"
    page.write_text(f"<!DOCTYPE html><html><body><p>broken</p>{body}</body></html>")
    (line,) = load(page, tmp_path / "profile").console
    assert message in line


@dataclass
class Runs:
    sweep: Path  # a sweep folder, the runs' folders under its runs/
    default: Path  # the default profile's run, by `turnstate run`
    printed: str  # what `turnstate run` printed
    summary: Path  # local-openai-harness-summary's run, by the Runner in this process


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    """Two real runs on the local provider, at once: `turnstate run` (the default profile) in a
    process of its own, and the harness-summary profile by the Runner here, as a sweep runs them."""
    sweep = tmp_path_factory.mktemp("sweep")
    command = [sys.executable, "-m", "turnstate.cli", "run", "--out", str(sweep / "runs")]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as cli:
        summary = run(sweep / "runs", "local-openai-harness-summary")
        printed, errors = cli.communicate(timeout=60)
    assert cli.returncode == 0, errors
    (default,) = [folder for folder in (sweep / "runs").iterdir() if folder != summary]
    return Runs(sweep, default, printed, summary)


def test_a_run_report_loads_in_a_browser_without_console_errors_with_its_plots_and_diagram(runs, tmp_path):
    page = runs.default / "report.html"
    assert runs.printed.strip().splitlines()[-1] == f"report: {page}"  # turnstate run wrote it, and said where
    loaded = load(page, tmp_path / "profile")
    assert loaded.console == []
    assert {"plot-tokens", "plot-output", "diagram-manual_rolling"} <= loaded.ids()
    assert "ObservationArrived" in loaded.dom  # the machine's rows, with this run's counts
    assert "(transition counts of one run)" in loaded.dom


def test_a_sweep_report_loads_in_a_browser_without_console_errors_with_its_plots_and_run_links(runs, tmp_path):
    assemble_sweep(runs.sweep, [runs.default, runs.summary])
    loaded = load(write_report(runs.sweep), tmp_path / "profile")
    assert loaded.console == []
    assert {"plot-success", "plot-tokens", "plot-cost", "plot-turns", "plot-comparisons"} <= loaded.ids()
    for run_dir in (runs.default, runs.summary):
        assert f'href="runs/{run_dir.name}/report.html"' in loaded.dom
        assert (run_dir / "report.html").is_file()


def run(out: Path, profile: str) -> Path:
    """A real run of the shipped `profile` on the local provider, as `turnstate run` plays it; its folder."""
    result = Runner(load_profile(resolve_profile(Path(profile))), out).run()
    assert result.artifacts is not None
    return result.artifacts


def assemble_sweep(sweep: Path, runs: list[Path]) -> None:
    """A sweep folder as `turnstate sweep` writes it (turnstate/reports/folder.py's schema), from the runs' run_meta.json."""
    results = [result_line(sweep, run_dir) for run_dir in runs]
    (sweep / "sweep.json").write_text(
        json.dumps({"name": "browser-check", "profiles": sorted({r["profile"] for r in results})})
    )
    (sweep / "results.jsonl").write_text("".join(json.dumps(result) + "\n" for result in results))
    summary = []
    for profile in dict.fromkeys(result["profile"] for result in results):
        mine = [result for result in results if result["profile"] == profile]
        wins = sum(result["outcome"] == "win" for result in mine)
        low, high = wilson(wins, len(mine))
        summary.append(
            {
                "profile": profile,
                "runs": len(mine),
                "wins": wins,
                "success_rate": wins / len(mine),
                "success_low": low,
                "success_high": high,
                "mean_cost": sum(result["cost"] for result in mine) / len(mine),
                "mean_turns": sum(result["turns"] for result in mine) / len(mine),
            }
        )
    a, b = summary[-1], summary[0]
    difference = a["success_rate"] - b["success_rate"]
    comparison = {
        "a": a["profile"],
        "b": b["profile"],
        "difference": difference,
        "low": difference - 0.4,
        "high": min(difference + 0.4, 1),
    }
    (sweep / "summary.json").write_text(json.dumps({"profiles": summary, "comparisons": [comparison]}))


def result_line(sweep: Path, run_dir: Path) -> dict[str, Any]:
    meta = json.loads((run_dir / "run_meta.json").read_text())
    usage = meta["usage"]
    return {
        "run_id": run_dir.name,
        "profile": meta["config_id"],
        "environment": meta["settings"]["environment"]["name"],
        "game": meta["settings"]["environment"]["name"],
        "seed": meta["settings"]["environment"]["seed"],
        "repetition": 0,
        "outcome": meta["outcome"],
        "levels": meta["levels_won"],
        "turns": meta["turns"],
        "tokens_in": usage["input_tokens"],
        "tokens_cached": usage["cached_input_tokens"],
        "tokens_out": usage["output_tokens"],
        "cost": meta["cost_estimate"],
        "retries": meta["failed_attempts"],
        "compactions": meta["compactions"],
        "wall_seconds": meta["wall_seconds"],
        "run_dir": os.path.relpath(run_dir, sweep),
    }


def wilson(wins: int, runs: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a success rate."""
    rate = wins / runs
    centre = (rate + z * z / (2 * runs)) / (1 + z * z / runs)
    half = z * math.sqrt(rate * (1 - rate) / runs + z * z / (4 * runs * runs)) / (1 + z * z / runs)
    return max(0.0, centre - half), min(1.0, centre + half)
