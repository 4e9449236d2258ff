"""The machines drawn (`turnstate diagrams`): every configuration from its table, the one a profile
assembles, and a run on the machine it ran, each transition with the times it fired.

machine/diagrams.py draws a table; this module decides what to draw. A run is drawn in one place,
`run_pictures`, for the run's page (reports/run.py) and for `diagrams --run` alike."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from turnstate.durable.layout import RUN_META, TRANSITIONS
from turnstate.durable.transition_log import TransitionLogError, read_transition_log
from turnstate.machine import coverage_map as gate
from turnstate.machine import diagrams as drawing
from turnstate.machine.engine import MachineSpec, Row
from turnstate.reports.page import ReportError
from turnstate.reports.text import RUN_FOLDER_FIX, nested
from turnstate.strategies import MACHINES, STRATEGIES, configuration_name
from turnstate.strategies.compaction import Kind

if TYPE_CHECKING:
    from turnstate.strategies.strategy import Strategy

TESTS_MAP = "transition_tests.json"  # beside them: the tests that assert each row, as a whole-suite run writes it
Machines = dict[str, MachineSpec]


def pictures() -> dict[str, Machines]:
    """What `turnstate diagrams` draws: each configuration alone, and every configuration of a
    strategy that has several at once (its full machine, named after the strategy)."""
    drawn: dict[str, Machines] = {}
    for strategy in STRATEGIES.values():
        configurations = _configurations(strategy)
        drawn |= {name: {name: spec} for name, spec in configurations.items()}
        if len(configurations) > 1:
            drawn[strategy.name] = configurations
    return drawn


def _configurations(strategy: Strategy) -> Machines:
    return {configuration_name(strategy, kind): spec for kind, spec in strategy.specs.items()}


def committed_tests(directory: Path) -> dict[Row, list[str]] | None:
    """The tests that assert each row, from the map a whole-suite run writes beside the diagrams (None
    without one). A row is looked up under the label of the configuration that first holds it, as
    the map is written."""
    path = directory / TESTS_MAP
    if not path.exists():
        return None
    return gate.tests_of_rows(MACHINES, read_tests_map(path))


def read_tests_map(path: Path) -> dict[str, dict[str, list[str]]]:
    try:
        return gate.read_tests_by_row(path)
    except (OSError, ValueError) as error:
        raise ReportError(f"cannot read {path} ({error}); fix: run the whole test suite to write it again") from None


def write_all(directory: Path) -> list[tuple[Path, Path]]:
    """Every picture as DOT and SVG in `directory`, each row linked to the tests that assert it."""
    tests = committed_tests(directory)
    return [drawing.write(name, machines, directory, tests=tests) for name, machines in pictures().items()]


def stale_diagrams(directory: Path) -> list[str]:
    """Each committed DOT in `directory` that differs from what the tables draw, or that no table draws
    any more, as a line with its fix (none when the diagrams are current)."""
    committed = sorted(directory.glob("*.dot"))
    if not committed:
        raise ReportError(f"no diagrams in {directory}; run from the repository root or pass --out")
    drawn = pictures()
    stale = [
        f"stale diagram: {directory / (name + '.dot')} (run `turnstate diagrams` and commit it)"
        for name in drawing.stale(drawn, directory, committed_tests(directory))
    ]
    orphans = [
        f"stale diagram: {path} (no table draws it any more; delete it)" for path in committed if path.stem not in drawn
    ]
    return stale + orphans


def profile_configuration(strategy_name: str, kind: Kind, source: str) -> tuple[str, Machines]:
    """The configuration a profile runs: its strategy's machine as its compaction `kind` assembles it."""
    strategy = STRATEGIES[strategy_name]
    if kind not in strategy.specs:
        raise ReportError(
            f"{source}: {strategy.name} has no machine for compaction {kind} (it has: {', '.join(strategy.specs)})"
        )
    name = configuration_name(strategy, kind)
    return name, {name: strategy.specs[kind]}


# -- a run on its machine -------------------------------------------------------------------------
@dataclass(frozen=True)
class RunPicture:
    """One machine a run played, on the configuration it ran, with the times each transition fired."""

    machine: str
    name: str
    machines: Machines
    counts: Mapping[tuple[str, str, str], int]

    @property
    def undrawn(self) -> str | None:
        """What of the run is not on the picture: transitions that are no rows of the current table."""
        drawn = {key for spec in self.machines.values() for row in spec.rows() for key in spec.log_keys(row)}
        count = sum(fired for key, fired in self.counts.items() if key not in drawn)
        if not count:
            return None
        return f"{count} transitions of {self.machine} are not rows of its current table (a run of another version?); they are not drawn"


def run_pictures(meta: Any, transitions: Sequence[Mapping[str, str]]) -> list[RunPicture]:
    """The run's machines, each on the configuration its run_meta.json names (`meta`; every
    configuration of a machine it does not name), with each transition's count in `transitions`."""
    return [
        RunPicture(machine, *configuration_for(meta, machine), counts)
        for machine, counts in drawing.run_counts(transitions).items()
    ]


def draw_run(run_dir: Path, out_dir: Path) -> tuple[list[Path], list[str]]:
    """Draw, into `out_dir`, the configuration the run used with each transition's count from its
    transition log: the SVGs written, and warnings. A run killed before it wrote its run_meta.json is
    drawn on every configuration of its strategy, with a warning."""
    meta = _run_meta(run_dir)
    try:
        records, warnings = read_transition_log(run_dir / TRANSITIONS, declared=declared_strategies(meta))
    except TransitionLogError as error:
        raise ReportError(str(error)) from None
    written = []
    for picture in run_pictures(meta, records):
        if meta is None and len(picture.machines) > 1:
            warnings.append(
                f"no {run_dir / RUN_META} (the run was killed before writing it?), so which compaction it ran "
                f"is unknown: drawing every configuration of {picture.machine}"
            )
        warnings += [picture.undrawn] if picture.undrawn else []
        written.append(drawing.write(picture.name, picture.machines, out_dir, picture.counts)[1])
    return written, warnings


def _run_meta(run_dir: Path) -> Any:
    """The run's run_meta.json, when it names a configuration turnstate draws (None when the run wrote
    none); ReportError for one that is not a run's or names no such configuration."""
    path = run_dir / RUN_META
    fix = RUN_FOLDER_FIX
    try:
        meta = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:
        raise ReportError(
            f"{path}: not a run's metadata ({getattr(error, 'strerror', None) or 'not JSON'}); {fix}"
        ) from None
    if ran_configuration(meta) is None:
        known = ", ".join(f"{name} ({', '.join(record.specs)})" for name, record in STRATEGIES.items())
        raise ReportError(
            f"{path}: names no strategy and runtime.compaction.kind turnstate draws (it draws: {known}); {fix}"
        )
    return meta


def declared_strategies(meta: Any) -> list[str]:
    """The machines a run's transition log may name: those it played, or any without its run_meta."""
    return ran_strategies(meta) or list(STRATEGIES)


def ran_strategies(meta: Any) -> list[str]:
    """The strategies a run played, in order: the one its run_meta.json names, after each one a
    switch (`resumes[].switched`) came from; empty when it names none turnstate knows."""
    resumes = nested(meta, "resumes")
    switched = [nested(resume, "switched", "from", "strategy") for resume in resumes or () if isinstance(resume, dict)]
    ran = [*switched, nested(meta, "strategy")]
    return [name for name in dict.fromkeys(ran) if isinstance(name, str) and name in STRATEGIES]


def ran_configuration(meta: Any) -> tuple[str, Machines] | None:
    """The configuration a run_meta.json names (`strategy`, `runtime.compaction.kind`), as {name: its
    machine}; None when it names none turnstate draws."""
    strategy = STRATEGIES.get(str(nested(meta, "strategy")))
    kind = nested(meta, "runtime", "compaction", "kind")
    if strategy is None or kind not in strategy.specs:
        return None
    name = configuration_name(strategy, kind)
    return name, {name: strategy.specs[kind]}


def configuration_for(meta: Any, machine: str) -> tuple[str, Machines]:
    """The configuration the run's run_meta.json names; for another machine the log names (a switch's
    earlier strategy, whose compaction run_meta.json no longer records) or without one, every
    configuration of that strategy."""
    ran = ran_configuration(meta)
    if ran is not None and nested(meta, "strategy") == machine:
        return ran
    return machine, _configurations(STRATEGIES[machine])
