"""Sweeps: profiles x environments (games, seeds) x repetitions, run as ordinary runs.

A sweep file (YAML, read with the profile's rules: unknown keys, wrong types and bad bytes are named
with the file, key and fix) names the profiles (paths relative to the sweep file, or shipped names),
the environments with their seeds, the repetitions, a budget (runs in flight, a total cost cap in the
profiles' configured prices) and the engine. Each planned run is an ordinary run (its own folder under
`SWEEP_DIR/runs/<key>/`, its own checkpoints), so everything a run guarantees holds for a sweep's:
a kill costs at most a turn, and `turnstate resume` works on any of them.

The sweep folder:
- `sweep.json`: the sweep as validated, with the file it came from;
- `results.jsonl` and `results.csv`: one row per planned run (RESULT_COLUMNS), written again whole
  (temporary file, then rename) each time a run ends, so a kill leaves the last whole table;
- `summary.json`: per profile (and, with several environments, per profile and environment; for
  games that keep a scorecard, per profile and game with the mean actions per level beside the
  human baselines), its
  runs, wins and success rate with a 95% interval across the seeds
  (Wilson's score interval: it stays inside [0, 1] and is not degenerate at 0 or n wins, which the
  normal approximation is, with the few seeds a sweep has), mean cost, turns and tokens; and the
  comparisons (`compare:`, or every pair of profiles that differ only in compaction): the
  difference in success rate and its 95% interval (Newcombe's hybrid score interval, built from the
  two Wilson intervals).

Resuming a sweep (`turnstate sweep SWEEP.yaml` again on the same folder): a run that ended (win,
max_actions, failed_closed) is skipped, its row read from its run_meta.json; a run that did not end
(killed, interrupted: run_meta says running or interrupted) resumes from its checkpoint; a run that
never started starts. The cost cap counts every ended run's cost, skipped ones included: no new run
starts once it is reached (the runs in flight finish), and the runs it kept from starting are rows
with outcome `not_started`.

Engines (engines.py): a local process pool, one process per run (the default: nothing to
install), or Ray tasks on an existing cluster (`engine: ray` or `--ray ADDRESS`).
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import io
import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError

from turnstate.durable.checkpoints import CheckpointError
from turnstate.durable.checkpoints.stores import STORE_VARIABLE, chosen_store
from turnstate.durable.layout import (
    ID_PATTERN,
    RESULTS,
    RESULTS_TABLE,
    RUN_META,
    SUMMARY,
    SWEEP_RECORD,
    SWEEP_RUNS,
    SWEEPS_ROOT,
)
from turnstate.durable.resume import run_meta
from turnstate.environments import make_environment
from turnstate.session.durable_run import ENDED
from turnstate.session.profile import Profile, load_profile, resolve_profile
from turnstate.session.profile_sections import EnvironmentConfig, Section
from turnstate.session.settings_file import ProfileError, load_settings, validation_problems

ENDED_OUTCOMES = (*ENDED, "failed_closed")  # a sweep's resume skips these runs
NOT_STARTED = "not_started"  # a run the cost cap kept from starting
NUMERIC_RESULT_COLUMNS = (
    "seed",
    "repetition",
    "levels",
    "turns",
    "tokens_in",
    "tokens_cached",
    "tokens_out",
    "cost",
    "retries",
    "compactions",
    "wall_seconds",
    "rate_limit_seconds",
    "resumes",
)
# A game that keeps a scorecard (arc_agi3): its score (game_score), and per level of its last play
# the actions used and the human baseline's, as the leaderboard reads them (lists in results.jsonl,
# numbers separated by spaces in results.csv; empty for a game without one).
LEVEL_COLUMNS = ("level_actions", "level_baseline_actions")
RESULT_COLUMNS = (
    "run_id",
    "key",
    "profile",
    "environment",
    "game",
    *NUMERIC_RESULT_COLUMNS[:2],
    "outcome",
    *NUMERIC_RESULT_COLUMNS[2:],
    "game_score",
    *LEVEL_COLUMNS,
    "run_dir",
)
Z_95 = 1.959963984540054  # the normal quantile of a two-sided 95% interval


class SweepEnvironment(Section):
    name: str = Field(
        default="beacon_grid", description="a registered environment id, as a profile's `environment.name`"
    )
    options: dict[str, Any] = Field(
        default_factory=dict, description="its options, as a profile's `environment.options`"
    )
    seeds: tuple[int, ...] = Field(
        default=(0,),
        min_length=1,
        strict=False,
        description="the seeds every profile plays it at; a profile that is invalid with the environment at one of "
        "them is named with the seed",
    )


class SweepBudget(Section):
    in_flight: int = Field(default=2, ge=1, le=512, description="runs at once; `--in-flight` overrides it")
    cost_cap: float | None = Field(
        default=None,
        ge=0,
        description="USD, in the profiles' configured prices: no run starts once the ended runs' cost reaches it "
        "(skipped ones included; the runs in flight finish), and the runs it kept from starting are rows with "
        f"outcome `{NOT_STARTED}`",
    )


class Comparison(Section):
    a: str = Field(description="a profile id of this sweep: the difference is a's success rate less b's")
    b: str = Field(description="another profile id of this sweep")


class Sweep(Section):
    id: str = Field(
        min_length=1,
        pattern=ID_PATTERN,
        description=f"the sweep's id; its folder is `{SWEEPS_ROOT}/<id>` unless `--out` names another",
    )
    profiles: tuple[str, ...] = Field(
        min_length=1,
        strict=False,
        description="the profiles to compare: paths relative to the sweep file, or shipped names; each profile id "
        "at most once",
    )
    environments: tuple[SweepEnvironment, ...] = Field(
        default=(SweepEnvironment(),),
        min_length=1,
        strict=False,
        description="the environments every profile plays, each with its options and seeds; one whose runs cannot be "
        "resumed (an ARC-AGI-3 game in `mode: competition`) is refused, since a sweep resumes each run a kill stops",
    )
    repetitions: int = Field(default=1, ge=1, le=1000, description="runs of each profile, environment and seed")
    budget: SweepBudget = Field(default=SweepBudget(), description="how many runs at once, and the cost cap")
    engine: Literal["pool", "ray"] = Field(
        default="pool",
        description="`pool`: a local process pool, one process per run; `ray`: Ray tasks (the ray extra), as "
        "`--ray ADDRESS` asks too",
    )
    ray_address: str | None = Field(
        default=None,
        description="with `engine: ray`: `local` starts a Ray here with as many CPUs as runs in flight, `auto` joins "
        "the cluster this machine is a node of, `HOST:PORT` names its head; absent: `auto`. `--ray` overrides it",
    )
    checkpoints: str | None = Field(
        default=None,
        description="where the sweep's new runs keep their checkpoints: `sqlite` (in each run's folder) or a "
        "`postgresql://user@host:port/database` URL, which every host of a cluster reaches; absent: "
        "TURNSTATE_CHECKPOINTS where the sweep starts. `--checkpoints` overrides it",
    )
    compare: tuple[Comparison, ...] = Field(
        default=(),
        strict=False,
        description="the differences of success rate to report; absent: every pair of profiles that differ in "
        "compaction alone, the one with compaction first",
    )


class SweepError(Exception):
    """A sweep that cannot be planned or run as asked; the message names the file and the fix."""


@dataclass(frozen=True)
class PlannedRun:
    """One run of the sweep: its profile (the environment and seed set), where it is written, and
    what identifies it in the results."""

    key: str  # its folder under runs/, unique in the sweep
    profile: dict[str, Any]  # the profile as JSON data (it crosses to another process)
    profile_id: str
    environment: str
    game: str
    seed: int
    repetition: int
    checkpoints: str | None = None  # the sweep's TURNSTATE_CHECKPOINTS, carried to the host that plays it


@dataclass(frozen=True)
class Plan:
    sweep: Sweep
    source: Path
    runs: tuple[PlannedRun, ...]
    comparisons: tuple[tuple[str, str], ...]

    @property
    def adapter_ids(self) -> list[str]:
        return sorted({str(planned.profile["runtime"]["adapter_id"]) for planned in self.runs})


def load_sweep(path: Path, checkpoints: str | None = None) -> Plan:
    """The sweep file, validated, and its runs planned; a SweepError (ProfileError's lines) if not.
    `checkpoints` (`--checkpoints`) overrides the sweep's `checkpoints:`, which overrides
    TURNSTATE_CHECKPOINTS here; each planned run carries the choice to whichever host plays it."""
    try:
        sweep = load_settings(path, Sweep)
    except ProfileError as error:
        raise SweepError(str(error)) from None
    store = checkpoints if checkpoints is not None else sweep.checkpoints
    try:
        chosen_store(store)
    except CheckpointError as error:
        given = "--checkpoints" if checkpoints is not None else f"{path}: checkpoints"
        raise SweepError(f"{given}: {error}".replace(f"{STORE_VARIABLE} must", "it must", 1)) from None
    if store is None:
        store = os.environ.get(STORE_VARIABLE) or None
    profiles: list[Profile] = []
    for index, given in enumerate(sweep.profiles):
        beside = path.parent / given
        try:
            profiles.append(load_profile(beside if beside.is_file() else resolve_profile(given)))
        except ProfileError as error:  # each of the profile's lines, named as the sweep's too
            lines = (f"{path}: profiles.{index} ({given}): {line}" for line in str(error).splitlines())
            raise SweepError("\n".join(lines)) from None
    ids = [profile.id for profile in profiles]
    repeated = sorted({name for name in ids if ids.count(name) > 1})
    if repeated:
        raise SweepError(
            f"{path}: profiles: the profile id {repeated[0]!r} is named twice; fix: name each profile once"
        )
    for index, comparison in enumerate(sweep.compare):
        for side in ("a", "b"):
            if getattr(comparison, side) not in ids:
                raise SweepError(
                    f"{path}: compare.{index}.{side}: {getattr(comparison, side)!r} is not a profile of this sweep; "
                    f"fix: use one of {', '.join(ids)}"
                )
    runs = tuple(dataclasses.replace(planned, checkpoints=store) for planned in _planned(path, sweep, profiles))
    comparisons = tuple((item.a, item.b) for item in sweep.compare) or compaction_pairs(profiles)
    return Plan(sweep, path, runs, comparisons)


def _planned(path: Path, sweep: Sweep, profiles: Sequence[Profile]) -> Iterable[PlannedRun]:
    names = [environment.name for environment in sweep.environments]
    for number, environment in enumerate(sweep.environments):
        label = environment.name if names.count(environment.name) == 1 else f"{environment.name}{number + 1}"
        game = str(environment.options.get("game_id", environment.name))
        for seed in environment.seeds:
            config = EnvironmentConfig(name=environment.name, seed=seed, options=environment.options)
            checked = [profile.model_copy(update={"environment": config}) for profile in profiles]
            for profile in checked:
                try:
                    Profile.model_validate(profile.model_dump(mode="json"))  # the profile's own checks, game included
                except ValidationError as error:
                    problems = _environment_problems(number, seed, validation_problems(error, Profile))
                    raise SweepError(str(ProfileError(str(path), problems))) from None
            refusal = getattr(make_environment(environment.name, seed, environment.options), "resume_refusal", None)
            if refusal:
                raise SweepError(
                    f"{path}: environments.{number}: {refusal}, and a sweep resumes each run a kill stops; "
                    "fix: play it with `turnstate run`, one run at a time"
                )
            for profile in checked:
                for repetition in range(1, sweep.repetitions + 1):
                    yield PlannedRun(
                        key=f"{profile.id}.{label}.s{seed}.r{repetition}",
                        profile=profile.model_dump(mode="json"),
                        profile_id=profile.id,
                        environment=environment.name,
                        game=game,
                        seed=seed,
                        repetition=repetition,
                    )


def _environment_problems(
    number: int, seed: int, problems: Iterable[tuple[str, str, str]]
) -> list[tuple[str, str, str]]:
    """A profile's problems with the sweep's environment `number` at `seed`, under the sweep file's
    keys: the profile's `environment.KEY` is that entry's KEY (its `seed`, the entry's `seeds`)."""
    named = []
    for key, problem, fix in problems:
        head, _, rest = key.partition(".")
        if head == "environment":
            key = ".".join(filter(None, (f"environments.{number}", "seeds" if rest == "seed" else rest)))
        else:  # not the environment's own key: the profile's, as this environment makes it
            key, problem = f"environments.{number}", f"the profile's {key or '(top level)'}: {problem}"
        named.append((key, f"{problem} (seed {seed})", fix))
    return named


def compaction_pairs(profiles: Sequence[Profile]) -> tuple[tuple[str, str], ...]:
    """Every pair of profiles that differ in their compaction alone, the one with compaction first:
    the seed's open question (does compaction cost task success?) answered by default."""

    def without_compaction(profile: Profile) -> str:
        data = profile.model_dump(mode="json")
        data.pop("id")
        data["runtime"].pop("compaction")
        return json.dumps(data, sort_keys=True)

    pairs = []
    for first in profiles:
        for second in profiles:
            none = second.runtime.compaction.strategy == "none"
            if first is not second and none and first.runtime.compaction.strategy != "none":
                if without_compaction(first) == without_compaction(second):
                    pairs.append((first.id, second.id))
    return tuple(pairs)


# -- one run -----------------------------------------------------------------------------------------


def run_folder(runs_root: Path, key: str) -> Path | None:
    """The run folder of the planned run `key` (the newest, should a start have left two), if any."""
    holder = runs_root / key
    if not holder.is_dir():
        return None
    made = sorted(path for path in holder.iterdir() if (path / RUN_META).is_file())
    return made[-1] if made else None


def standing(plan: Plan, sweep_dir: Path) -> dict[str, list[str]]:
    """What playing the plan on `sweep_dir` does with each planned run, by key: those it skips (they
    ended), those it resumes (they began and did not end) and those it starts."""
    runs_root = sweep_dir / SWEEP_RUNS
    found: dict[str, list[str]] = {"skips": [], "resumes": [], "starts": []}
    for planned in plan.runs:
        existing = run_folder(runs_root, planned.key)
        found["skips" if is_ended(existing) else "resumes" if existing is not None else "starts"].append(planned.key)
    return found


def is_ended(run_dir: Path | None) -> bool:
    return run_dir is not None and run_meta(run_dir).get("outcome") in ENDED_OUTCOMES


def play(planned: PlannedRun, runs_root: Path) -> None:
    """Play `planned` to its end in this process: resumed from its checkpoint if it began before,
    skipped if it ended. What the run records (its folder, run_meta.json) is the result."""
    from turnstate.session.run_profile import run_profile
    from turnstate.session.runner import Runner, remove_orphans

    existing = run_folder(runs_root, planned.key)
    if is_ended(existing):
        return
    if planned.checkpoints is not None:  # the sweep's choice, whatever this host's (a Ray worker plays many runs)
        os.environ[STORE_VARIABLE] = planned.checkpoints
    else:
        os.environ.pop(STORE_VARIABLE, None)
    _freeze_once()
    holder = runs_root / planned.key
    if holder.is_dir():  # this process is the planned run's one player: a folder a kill left is no opening in progress
        remove_orphans(holder, age=0)
    if existing is not None:
        Runner(run_profile(existing), existing.parent).resume(existing)
    else:
        holder.mkdir(parents=True, exist_ok=True)
        Runner(Profile.model_validate(planned.profile), holder).run()


@functools.cache
def _freeze_once() -> None:
    """Freeze what exists when this process's first run starts, once: a Ray worker plays run after
    run, and freezing again would keep each run's leftovers out of collection for good."""
    from turnstate.session.runner import freeze_startup_objects

    freeze_startup_objects()


# -- results -----------------------------------------------------------------------------------------


def result_row(planned: PlannedRun, runs_root: Path, sweep_dir: Path, error: str | None = None) -> dict[str, Any]:
    """The results row of `planned`, from its run_meta.json (outcome `not_started` without one; `error`
    names a run whose process failed without recording an end)."""
    run_dir = run_folder(runs_root, planned.key)
    meta = run_meta(run_dir) if run_dir is not None else {}
    usage = meta.get("usage") or {}
    outcome = str(meta.get("outcome") or NOT_STARTED)
    if error is not None and outcome not in ENDED_OUTCOMES:
        outcome = "error"
    return {
        "run_id": run_dir.name if run_dir is not None else None,
        "key": planned.key,
        "profile": planned.profile_id,
        "environment": planned.environment,
        "game": planned.game,
        "seed": planned.seed,
        "repetition": planned.repetition,
        "outcome": outcome,
        "levels": meta.get("levels_won", 0),
        "turns": meta.get("turns", 0),
        "tokens_in": usage.get("input_tokens", 0),
        "tokens_cached": usage.get("cached_input_tokens", 0),
        "tokens_out": usage.get("output_tokens", 0),
        "cost": meta.get("cost_estimate", 0.0),
        "retries": meta.get("failed_attempts", 0),
        "compactions": meta.get("compactions", 0),
        "wall_seconds": meta.get("wall_seconds", 0.0),
        "rate_limit_seconds": meta.get("rate_limit_seconds", 0.0),
        "resumes": len(meta.get("resumes") or ()),
        **_scorecard_columns(meta.get("environment_scorecard")),
        "run_dir": None if run_dir is None else str(run_dir.relative_to(sweep_dir)),
        **({"error": error} if error is not None and outcome == "error" else {}),
    }


def _scorecard_columns(scorecard: Any) -> dict[str, Any]:
    """The LEVEL_COLUMNS and game_score of a run_meta's `environment_scorecard` (None without one)."""
    plays = scorecard.get("plays") if isinstance(scorecard, dict) else None
    last = plays[-1] if isinstance(plays, list) and plays and isinstance(plays[-1], dict) else {}
    return {
        "game_score": scorecard.get("score") if last else None,
        **{name: list(last.get(name) or ()) if last else None for name in LEVEL_COLUMNS},
    }


def write_results(sweep_dir: Path, rows: Sequence[Mapping[str, Any]], comparisons: Sequence[tuple[str, str]]) -> None:
    """results.jsonl, results.csv and summary.json, each replaced whole."""
    lines = "".join(json.dumps(row, sort_keys=False) + "\n" for row in rows)
    table = io.StringIO()
    writer = csv.DictWriter(table, fieldnames=RESULT_COLUMNS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        listed = {name: " ".join(map(str, row[name])) for name in LEVEL_COLUMNS if isinstance(row.get(name), list)}
        writer.writerow({**row, **listed})
    summary = summarize(rows, comparisons)
    for name, text in (
        (RESULTS, lines),
        (RESULTS_TABLE, table.getvalue()),
        (SUMMARY, json.dumps(summary, indent=2) + "\n"),
    ):
        replace_file(sweep_dir / name, text)


def replace_file(path: Path, text: str) -> None:
    """`path` holds `text` whole, or what it held before: a kill never leaves it cut short."""
    temporary = path.with_name(path.name + ".new")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


def summarize(rows: Sequence[Mapping[str, Any]], comparisons: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """Per profile over all its ended runs, then per profile and environment: wins, success rate and
    its 95% interval, means; and each comparison's difference with its interval, over all the
    environments and in each (when the sweep has more than one)."""
    environments = list(dict.fromkeys(str(row["environment"]) for row in rows))
    overall = _groups(rows, comparisons)
    summary: dict[str, Any] = {"profiles": overall[0], "comparisons": overall[1]}
    if len(environments) > 1:
        summary["by_environment"], summary["comparisons_by_environment"] = [], []
        for environment in environments:
            profiles, differences = _groups([row for row in rows if row["environment"] == environment], comparisons)
            summary["by_environment"] += [{"environment": environment, **entry} for entry in profiles]
            summary["comparisons_by_environment"] += [{"environment": environment, **entry} for entry in differences]
    scored = [row for row in rows if row.get("level_actions") is not None and row["outcome"] in ENDED_OUTCOMES]
    if scored:
        summary["by_game"] = _by_game(scored)
    return summary


def _by_game(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per profile and game, over its ended runs of a game that keeps a scorecard: wins, the mean
    game score, and per level the mean actions used beside the human baseline's."""
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for row in rows:
        groups.setdefault((str(row["profile"]), str(row["game"])), []).append(row)
    entries = []
    for (profile, game), runs in groups.items():
        levels = max(len(row["level_actions"]) for row in runs)
        used = [
            [row["level_actions"][level] for row in runs if level < len(row["level_actions"])]
            for level in range(levels)
        ]
        entries.append(
            {
                "profile": profile,
                "game": game,
                "runs": len(runs),
                "wins": sum(row["outcome"] == "win" for row in runs),
                "mean_game_score": _mean([row for row in runs if row["game_score"] is not None], "game_score"),
                "mean_level_actions": [sum(actions) / len(actions) for actions in used],
                "level_baseline_actions": max((row["level_baseline_actions"] for row in runs), key=len),
            }
        )
    return entries


def _groups(
    rows: Sequence[Mapping[str, Any]], comparisons: Sequence[tuple[str, str]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    by_profile: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        by_profile.setdefault(str(row["profile"]), []).append(row)
    profiles = []
    for profile, runs in by_profile.items():
        ended = [row for row in runs if row["outcome"] in ENDED_OUTCOMES]
        wins = sum(row["outcome"] == "win" for row in ended)
        low, high = wilson(wins, len(ended))
        profiles.append(
            {
                "profile": profile,
                "planned": len(runs),
                "runs": len(ended),
                "wins": wins,
                "success_rate": wins / len(ended) if ended else None,
                "success_low": low,
                "success_high": high,
                **{
                    f"mean_{name}": _mean(ended, name)
                    for name in ("cost", "turns", "levels", "tokens_in", "tokens_out")
                },
            }
        )
    found = {entry["profile"]: entry for entry in profiles}
    differences = []
    for a, b in comparisons:
        if a in found and b in found and found[a]["runs"] and found[b]["runs"]:
            difference, low, high = newcombe(found[a]["wins"], found[a]["runs"], found[b]["wins"], found[b]["runs"])
            differences.append({"a": a, "b": b, "difference": difference, "low": low, "high": high})
    return profiles, differences


def _mean(rows: Sequence[Mapping[str, Any]], name: str) -> float | None:
    return sum(float(row[name]) for row in rows) / len(rows) if rows else None


def wilson(successes: int, trials: int, z: float = Z_95) -> tuple[float | None, float | None]:
    """Wilson's score interval for a proportion (None, None without trials)."""
    if trials == 0:
        return None, None
    p = successes / trials
    centre = (p + z * z / (2 * trials)) / (1 + z * z / trials)
    spread = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / (1 + z * z / trials)
    return max(0.0, centre - spread), min(1.0, centre + spread)


def newcombe(wins_a: int, runs_a: int, wins_b: int, runs_b: int) -> tuple[float, float, float]:
    """The difference of two proportions and Newcombe's hybrid score interval (his method 10)."""
    p_a, p_b = wins_a / runs_a, wins_b / runs_b
    low_a, high_a = wilson(wins_a, runs_a)
    low_b, high_b = wilson(wins_b, runs_b)
    assert low_a is not None and high_a is not None and low_b is not None and high_b is not None
    difference = p_a - p_b
    low = difference - math.sqrt((p_a - low_a) ** 2 + (high_b - p_b) ** 2)
    high = difference + math.sqrt((high_a - p_a) ** 2 + (p_b - low_b) ** 2)
    return difference, max(-1.0, low), min(1.0, high)


def write_sweep_record(sweep_dir: Path, plan: Plan) -> None:
    record = {"source": str(plan.source), **plan.sweep.model_dump(mode="json"), "planned_runs": len(plan.runs)}
    replace_file(sweep_dir / SWEEP_RECORD, json.dumps(record, indent=2) + "\n")
