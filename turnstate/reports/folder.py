"""`turnstate report FOLDER`: a run's or a sweep's results on one self-contained HTML page,
FOLDER/report.html (turnstate/reports/page.py says what self-contained means here).

A run folder is reported by turnstate/reports/run.py. A sweep folder (what `turnstate sweep` writes)
holds:
- sweep.json: the sweep's definition; its `name` or `id` titles the page (else the folder's name).
- results.jsonl: one JSON object a line, one line a planned run. Each needs `profile` and `outcome`
  ("win", "max_actions", "failed_closed", "not_started", "error", ...); the rest is shown where
  present: run_id (null for a run that never started; `key` names it then), environment, game,
  seed, repetition, levels, turns, tokens_in, tokens_cached, tokens_out, cost, retries, compactions,
  wall_seconds, rate_limit_seconds (waited on the shared rate limit), resumes (numbers, or null), error, and run_dir, the run's folder relative to the
  sweep's.
- summary.json: a list of per-profile objects, each with `profile`, `runs` (those that ended) and
  `wins`, and where present `success_rate` (null when no run ended), `success_low` and
  `success_high` (a 95% interval across seeds), `planned`, `mean_cost` and `mean_turns`. The with/without-compaction comparisons, each `{a, b, difference}`
  with `low` and `high` where present, may be a `comparisons` list in any of those objects, or
  summary.json may be an object `{"profiles": [...], "comparisons": [...]}`. Without summary.json
  (a sweep stopped before writing it) the page derives runs, wins and means from the results, and
  says it has no intervals.
A line or key that is not so is a ReportError naming the file (and line, and key).

The sweep's page links each run to its own page, and writes the pages of the runs whose page is
missing or older than their run_meta.json, so one command reports the sweep and all its runs."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from html import escape
from pathlib import Path, PurePosixPath
from typing import Any

from turnstate.durable.layout import REPORT, RESULTS, RUN_META, SUMMARY, SWEEP_RECORD
from turnstate.reports.page import (
    ReportError,
    link,
    note,
    outcome,
    page,
    read_json,
    read_lines,
    section,
    table,
    write_page,
)
from turnstate.reports.plots import BLUE, GREEN, ORANGE, interval_bars, number, strips
from turnstate.reports.run import is_run, write_run_report
from turnstate.sweeps.plan import NUMERIC_RESULT_COLUMNS

__all__ = ["REPORT", "ReportError", "write_report"]

FIX = "restore the file as `turnstate sweep` wrote it"
RESULT_REQUIRED = ("profile", "outcome")
RESULT_NUMBERS = NUMERIC_RESULT_COLUMNS  # turnstate/sweeps/plan.py writes them
PROFILE_REQUIRED = ("profile", "runs", "wins")
PROFILE_NUMBERS = ("planned", "runs", "wins", "success_rate", "success_low", "success_high", "mean_cost", "mean_turns")
NOT_STARTED = "not_started"  # a planned run the sweep never started (its cost cap)
COMPARISON_REQUIRED = ("a", "b", "difference")
COMPARISON_NUMBERS = ("difference", "low", "high")


def write_report(folder: Path) -> Path:
    """Write the report of the run or sweep in `folder`; return its path. ReportError if `folder`
    is neither, or holds a file the report cannot read."""
    if not folder.is_dir():
        raise ReportError(f"{folder}: not a folder; fix: pass a run folder or a sweep folder")
    if (folder / SWEEP_RECORD).is_file() or (folder / RESULTS).is_file():
        return write_sweep_report(folder)
    if is_run(folder):
        return write_run_report(folder)
    runs = sorted(path.name for path in folder.iterdir() if path.is_dir() and is_run(path))
    held = f" (it holds {len(runs)} run folder{'s' * (len(runs) > 1)}, as {runs[0]}: pass one)" if runs else ""
    raise ReportError(
        f"{folder}: neither a run folder (no {RUN_META} or step records) nor a sweep folder (no {SWEEP_RECORD} or "
        f"{RESULTS}){held}; fix: pass a folder `turnstate run` or `turnstate sweep` wrote"
    )


@dataclass
class Sweep:
    folder: Path
    name: str
    definition: Any
    results: list[dict[str, Any]]
    profiles: list[dict[str, Any]]
    comparisons: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)
    by_environment: list[dict[str, Any]] = field(default_factory=list)  # per profile and environment


def write_sweep_report(folder: Path) -> Path:
    sweep = read_sweep(folder)
    links = _run_reports(sweep)
    return write_page(folder, sweep_page(sweep, links))


def read_sweep(folder: Path) -> Sweep:
    definition = read_json(folder / SWEEP_RECORD, FIX) if (folder / SWEEP_RECORD).is_file() else None
    name = (definition.get("name") or definition.get("id")) if isinstance(definition, dict) else None
    results_path = folder / RESULTS
    results = [
        _checked(entry, results_path, f"line {number}", RESULT_REQUIRED, RESULT_NUMBERS)
        for number, entry in read_lines(results_path, "run the sweep (`turnstate sweep`) to write it")
    ]
    sweep = Sweep(folder, str(name) if name else folder.name, definition, results, [], [])
    if definition is None:
        sweep.notes.append(f"no {SWEEP_RECORD}: the sweep's definition is unknown")
    if (folder / SUMMARY).is_file():
        sweep.profiles, sweep.comparisons, sweep.by_environment = _summary(folder / SUMMARY)
    else:
        sweep.profiles = _derived_summary(results)
        sweep.notes.append(
            f"no {SUMMARY} (a sweep stopped before it wrote one?): figures derived from {RESULTS}, without intervals"
        )
    return sweep


def _summary(path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """The per-profile entries, the comparisons (over all environments, then in each) and the entries
    per profile and environment of a summary.json."""
    data = read_json(path, FIX)
    objects = data.get("profiles") if isinstance(data, dict) else data
    if not isinstance(objects, list):
        raise ReportError(f"{path}: not a list of per-profile objects; fix: {FIX}")
    profiles = [
        _checked(entry, path, f"item {index}", PROFILE_REQUIRED, PROFILE_NUMBERS) for index, entry in enumerate(objects)
    ]
    listed = [(f"item {index}.comparisons", entry.get("comparisons")) for index, entry in enumerate(profiles)]
    for key in ("comparisons", "comparisons_by_environment"):
        listed.append((key, data.get(key) if isinstance(data, dict) else None))
    comparisons = []
    for where, found in listed:
        if found is None:
            continue
        if not isinstance(found, list):
            raise ReportError(f"{path}: {where} is not a list of comparisons; fix: {FIX}")
        comparisons += [
            _checked(entry, path, f"{where}.{index}", COMPARISON_REQUIRED, COMPARISON_NUMBERS)
            for index, entry in enumerate(found)
        ]
    per_environment = data.get("by_environment") if isinstance(data, dict) else None
    if per_environment is not None and not isinstance(per_environment, list):
        raise ReportError(f"{path}: by_environment is not a list of per-profile objects; fix: {FIX}")
    by_environment = [
        _checked(entry, path, f"by_environment.{index}", (*PROFILE_REQUIRED, "environment"), PROFILE_NUMBERS)
        for index, entry in enumerate(per_environment or ())
    ]
    return profiles, comparisons, by_environment


def _checked(entry: Any, path: Path, where: str, required: Sequence[str], numbers: Sequence[str]) -> dict[str, Any]:
    """`entry` if it is an object with the `required` keys and numbers (or null) under `numbers`.
    NaN and infinities (a mean of nothing) are read as null: shown as unknown, never plotted."""
    if not isinstance(entry, dict):
        raise ReportError(f"{path}: {where} is not a JSON object; fix: {FIX}")
    for key in numbers:
        value = entry.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise ReportError(f"{path}: {where}: {key} is {json.dumps(value)}, not a number; fix: {FIX}")
    entry = {key: None if key in numbers and not math.isfinite(value or 0) else value for key, value in entry.items()}
    missing = [key for key in required if entry.get(key) is None]
    if missing:
        raise ReportError(f"{path}: {where} has no {', '.join(missing)} (needs {', '.join(required)}); fix: {FIX}")
    return entry


def _derived_summary(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    summary = []
    for profile, runs in _by_profile(results).items():
        started = [run for run in runs if run["outcome"] != NOT_STARTED]
        wins = sum(run["outcome"] == "win" for run in started)
        summary.append(
            {
                "profile": profile,
                "planned": len(runs),
                "runs": len(started),
                "wins": wins,
                "success_rate": wins / len(started) if started else None,
                "mean_cost": _mean(run.get("cost") for run in started),
                "mean_turns": _mean(run.get("turns") for run in started),
            }
        )
    return summary


def _by_profile(results: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = {}
    for run in results:
        grouped.setdefault(str(run["profile"]), []).append(run)
    return grouped


def _mean(values: Iterable[Any]) -> float | None:
    known = [value for value in values if value is not None]
    return sum(known) / len(known) if known else None


def run_name(run: dict[str, Any]) -> str:
    """What the page calls a run: its id, or its key in the sweep before it started."""
    return str(run.get("run_id") or run.get("key") or "(unnamed run)")


def _run_reports(sweep: Sweep) -> dict[int, str]:
    """Each run's page, written where missing or older than its run_meta.json: the run's line (its
    index in the results) -> its link from the sweep's page. A run whose page cannot be written is
    noted, not fatal to the sweep's."""
    links = {}
    for index, run in enumerate(sweep.results):
        given = run.get("run_dir")
        if not isinstance(given, str) or not given:
            continue
        relative = PurePosixPath(given)
        if relative.is_absolute() or ".." in relative.parts:
            sweep.notes.append(f"run {run_name(run)}: run_dir {given} is not inside the sweep folder; not linked")
            continue
        folder = sweep.folder / relative
        if not folder.is_dir() or not is_run(folder):
            sweep.notes.append(f"run {run_name(run)}: no run folder at {given}")
            continue
        try:
            if _stale(folder):
                write_run_report(folder)
        except ReportError as error:
            sweep.notes.append(f"run {run_name(run)}: its report was not written: {error}")
            continue
        links[index] = str(relative / REPORT)
    return links


def _stale(folder: Path) -> bool:
    try:
        written = (folder / REPORT).stat().st_mtime
    except FileNotFoundError:
        return True
    meta = folder / RUN_META
    return not meta.is_file() or meta.stat().st_mtime >= written


# The page.


def sweep_page(sweep: Sweep, links: dict[int, str]) -> str:
    grouped = _by_profile(sweep.results)
    environments = {str(run.get("environment")) for run in sweep.results if run.get("environment") is not None}
    counts = {"run": len(sweep.results), "profile": len(grouped), "environment": len(environments)}
    subtitle = " · ".join(f"{count} {what}{'s' * (count != 1)}" for what, count in counts.items())
    sections = [
        section(
            "Profiles compared",
            _profiles_table(sweep.profiles, grouped),
            *map(note, sweep.notes),
            section_id="profiles",
        ),
        section("Per profile", *_profile_plots(sweep.profiles, grouped), section_id="plots"),
        *(
            [section("By environment", _environments_table(sweep.by_environment), section_id="environments")]
            if sweep.by_environment
            else []
        ),
        section("With and without compaction", *_comparisons(sweep.comparisons), section_id="comparisons"),
        section("Runs", _runs_table(sweep.results, links), section_id="runs"),
    ]
    if sweep.definition is not None:
        definition = escape(json.dumps(sweep.definition, indent=2, ensure_ascii=False))
        folded = f"<details><summary>{SWEEP_RECORD}</summary><pre>{definition}</pre></details>"
        sections.append(section("Sweep definition", folded, section_id="definition"))
    return page(f"turnstate sweep {sweep.name}", subtitle, sections)


def _interval(entry: dict[str, Any], low: str, high: str) -> tuple[float, float] | None:
    return (entry[low], entry[high]) if entry.get(low) is not None and entry.get(high) is not None else None


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


def _profiles_table(profiles: list[dict[str, Any]], grouped: dict[str, list[dict[str, Any]]]) -> str:
    rows = []
    for entry in profiles:
        runs = grouped.get(str(entry["profile"]), [])
        interval = _interval(entry, "success_low", "success_high")
        rows.append(
            (
                entry["profile"],
                entry.get("planned"),
                entry["runs"],
                entry["wins"],
                _percent(entry.get("success_rate")),
                _interval_text_percent(interval),
                _format(entry.get("mean_turns"), "{:.1f}"),
                _format(entry.get("mean_cost"), "${:.4f}"),
                *(
                    _format(_mean(run.get(key) for run in runs), "{:,.0f}")
                    for key in ("tokens_in", "tokens_cached", "tokens_out")
                ),
                sum(run.get("retries") or 0 for run in runs),
                _format(_mean(run.get("compactions") for run in runs), "{:.1f}"),
            )
        )
    header = (
        "profile",
        "planned",
        "runs ended",
        "wins",
        "success",
        "95% interval",
        "mean turns",
        "mean cost",
        "mean tokens in",
        "cached",
        "out",
        "retries",
        "mean compactions",
    )
    return table(header, rows, numeric=range(1, len(header)), wide=True)


def _format(value: Any, pattern: str) -> str | None:
    return None if value is None else pattern.format(value)


def _profile_plots(profiles: list[dict[str, Any]], grouped: dict[str, list[dict[str, Any]]]) -> list[str]:
    if not profiles:
        return [note("no profiles in the summary")]
    names = [str(entry["profile"]) for entry in profiles]
    success = interval_bars(
        "plot-success",
        "success rate per profile, with its 95% interval across seeds",
        names,
        [entry.get("success_rate") for entry in profiles],
        [_interval(entry, "success_low", "success_high") for entry in profiles],
        axis_label="success rate (wins / runs); whiskers: 95% interval across seeds",
    )

    def per_run(key: str) -> list[list[float]]:
        return [[run[key] for run in grouped.get(name, []) if run.get(key) is not None] for name in names]

    def strip(svg_id: str, what: str, key: str, show: Callable[[float], str], colour: str) -> str:
        return strips(
            svg_id,
            f"{what} per run, per profile",
            names,
            per_run(key),
            show=show,
            axis_label=f"{what} per run (dots), mean (tick)",
            colour=colour,
        )

    return [
        "<h3>Success rate</h3>",
        success,
        "<h3>Input tokens</h3>",
        strip("plot-tokens", "input tokens", "tokens_in", number, BLUE),
        "<h3>Cost</h3>",
        strip("plot-cost", "cost estimate (configured prices)", "cost", lambda value: f"${value:.3g}", GREEN),
        "<h3>Turns</h3>",
        strip("plot-turns", "turns", "turns", number, ORANGE),
    ]


def _points(value: float) -> str:
    return f"{value * 100:+.0f} pp"


def _comparisons(comparisons: list[dict[str, Any]]) -> list[str]:
    if not comparisons:
        return [note("no comparisons in the summary (the sweep ran no profile pair with and without compaction)")]
    on = [str(entry.get("environment") or "all") for entry in comparisons]
    labels = [
        f"{entry['a']} − {entry['b']}" + (f" ({where})" if len(set(on)) > 1 else "")
        for entry, where in zip(comparisons, on, strict=True)
    ]
    rows = [
        (entry["a"], entry["b"], where, _points(entry["difference"]), _interval_text(_interval(entry, "low", "high")))
        for entry, where in zip(comparisons, on, strict=True)
    ]
    plot = interval_bars(
        "plot-comparisons",
        "difference in success rate, with its interval",
        labels,
        [entry["difference"] for entry in comparisons],
        [_interval(entry, "low", "high") for entry in comparisons],
        domain=(-1.0, 1.0),
        show=_points,
        bars=False,
        axis_label="difference in success rate, a − b (percentage points); whiskers: its interval",
    )
    about = "Success of a minus success of b on the same games and seeds; an interval that holds 0 shows no difference."
    return [note(about), table(("a", "b", "on", "difference", "interval"), rows, numeric=(3, 4)), plot]


def _environments_table(entries: list[dict[str, Any]]) -> str:
    rows = [
        (
            entry["environment"],
            entry["profile"],
            entry["runs"],
            entry["wins"],
            _percent(entry.get("success_rate")),
            _interval_text_percent(_interval(entry, "success_low", "success_high")),
            _format(entry.get("mean_turns"), "{:.1f}"),
            _format(entry.get("mean_cost"), "${:.4f}"),
        )
        for entry in entries
    ]
    header = ("environment", "profile", "runs ended", "wins", "success", "95% interval", "mean turns", "mean cost")
    return table(header, rows, numeric=(2, 3, 4, 5, 6, 7))


def _interval_text_percent(interval: tuple[float, float] | None) -> str | None:
    return f"{_percent(interval[0])} – {_percent(interval[1])}" if interval else None


def _interval_text(interval: tuple[float, float] | None) -> str | None:
    return f"{_points(interval[0])} – {_points(interval[1])}" if interval else None


def _runs_table(results: list[dict[str, Any]], links: dict[int, str]) -> str:
    """One row a run, its name linking to its page; a column no run has a value in is left out."""
    columns: dict[str, Callable[[dict[str, Any]], Any]] = {
        "profile": lambda run: run["profile"],
        "environment": lambda run: run.get("environment"),
        "game": lambda run: run.get("game"),
        "seed": lambda run: run.get("seed"),
        "rep": lambda run: run.get("repetition"),
        "outcome": lambda run: outcome(str(run["outcome"])),
        "levels": lambda run: run.get("levels"),
        "turns": lambda run: run.get("turns"),
        "tokens in": lambda run: _format(run.get("tokens_in"), "{:,}"),
        "cached": lambda run: _format(run.get("tokens_cached"), "{:,}"),
        "out": lambda run: _format(run.get("tokens_out"), "{:,}"),
        "cost": lambda run: _format(run.get("cost"), "${:.4f}"),
        "retries": lambda run: run.get("retries"),
        "compactions": lambda run: run.get("compactions"),
        "wall s": lambda run: _format(run.get("wall_seconds"), "{:.1f}"),
        "rate limit s": lambda run: _format(run.get("rate_limit_seconds") or None, "{:.1f}"),
        "resumes": lambda run: run.get("resumes"),
        "error": lambda run: run.get("error"),
    }
    names = [
        link(links[index], run_name(run)) if index in links else run_name(run) for index, run in enumerate(results)
    ]
    cells = {"run": names, **{name: [cell(run) for run in results] for name, cell in columns.items()}}
    if cells["game"] == cells["environment"]:  # an environment of one game (the built-in ones) names it twice
        del cells["game"]
    shown = [name for name, values in cells.items() if any(value is not None for value in values)]
    numeric = [
        index
        for index, name in enumerate(shown)
        if name not in ("run", "profile", "environment", "game", "outcome", "error")
    ]
    rows = [[cells[name][index] for name in shown] for index in range(len(results))]
    return table(shown, rows, numeric=numeric, wide=True)
