"""The transition-coverage map read and shown without pytest: each declared row's label, and the tests
that asserted it as a whole-suite run writes them (machine/coverage.py, the pytest plugin, keeps the
gate). The diagrams link each edge to its tests, and `turnstate coverage` prints the table, on an
install that has no test tools."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from turnstate.machine.engine import MachineSpec, Row

Tests = dict[Row, set[str]]  # a row -> the node ids of the tests that fired (or asserted) it


def declared_rows(configurations: Mapping[str, MachineSpec]) -> dict[str, list[Row]]:
    """Per machine name, every row of its configurations once, in table order."""
    rows: dict[str, dict[Row, None]] = {}
    for spec in configurations.values():
        for row in spec.rows():
            rows.setdefault(spec.name, {})[row] = None
    return {name: list(held) for name, held in rows.items()}


def row_label(row: Row) -> str:
    """A row as the gate names it: its sources, trigger, guards and dest (as its table declares them,
    so the label is the same in every configuration), then its actions."""
    guards = f" [{' & '.join(row.transition.guards)}]" if row.transition.guards else ""
    actions = ", ".join(row.transition.actions) or "no action"
    return f"{' | '.join(row.sources)} --{row.trigger}{guards}--> {row.dest} / {actions}"


def missing_rows(configurations: Mapping[str, MachineSpec], seen: Mapping[str, Tests]) -> dict[str, list[str]]:
    """Per machine name, the rows (labelled) not in `seen`, in table order."""
    return {
        name: [row_label(row) for row in rows if row not in seen.get(name, set())]
        for name, rows in declared_rows(configurations).items()
    }


def tests_by_row(
    configurations: Mapping[str, MachineSpec], asserted: Mapping[str, Tests]
) -> dict[str, dict[str, list[str]]]:
    """Per machine name, each row's label with the tests that asserted it, sorted: what
    `transition_tests` holds."""
    return {
        name: {row_label(row): sorted(asserted.get(name, {}).get(row, ())) for row in rows}
        for name, rows in declared_rows(configurations).items()
    }


def read_tests_by_row(path: Path) -> dict[str, dict[str, list[str]]]:
    """The committed map (empty if there is none yet)."""
    if not path.exists():
        return {}
    return json.loads(path.read_text(encoding="utf-8"))


def table(configurations: Mapping[str, MachineSpec], committed: Mapping[str, Mapping[str, list[str]]]) -> list[str]:
    """The committed map as a reviewer reads it: each transition, then the tests that assert it; a row
    no test asserts says so, and the end names every such row and every stale entry of the map."""
    lines, unproven, stale = [], [], []
    for name, rows in declared_rows(configurations).items():
        held = committed.get(name, {})
        lines.append(f"{name}: {len(rows)} transitions")
        labels = set()
        for row in rows:
            label = row_label(row)
            labels.add(label)
            tests = held.get(label, [])
            lines.append(f"  {label}")
            lines += [f"      {test}" for test in tests] or ["      (no test asserts what this row does)"]
            unproven += [] if tests else [f"{name}: {label}"]
        stale += [f"{name}: {label}" for label in held if label not in labels]
    lines += [f"asserted by no test: {label}" for label in unproven]
    lines += [f"not a row of the current tables (run the whole suite to refresh the map): {label}" for label in stale]
    return lines


def tests_of_rows(
    configurations: Mapping[str, MachineSpec], committed: Mapping[str, Mapping[str, list[str]]]
) -> dict[Row, list[str]]:
    """Each row's committed tests, as the diagrams link them (rows no test asserts are left out)."""
    return {
        row: tests
        for name, rows in declared_rows(configurations).items()
        for row in rows
        if (tests := committed.get(name, {}).get(row_label(row)))
    }
