"""Diagrams drawn from the same tables that run.

Every state is a node (nested machines are clusters inside their parent state), every table row an
edge labelled `trigger [guards] / actions`, so a reviewer reads the guards and actions by the names
the code uses. The DOT text is the checked source: it is deterministic, so `turnstate diagrams
--check` compares it to the committed file. A run can be drawn too: each edge then carries the
number of times it fired in that run, and edges that never fired are dashed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path

import graphviz

from turnstate.machine.engine import SEPARATOR, MachineSpec

Counts = Mapping[tuple[str, str, str], int]  # (source, trigger, dest) -> times fired


def to_dot(spec: MachineSpec, counts: Counts | None = None) -> str:
    graph = graphviz.Digraph(name=spec.name)
    graph.attr(rankdir="LR", label=_title(spec, counts), labelloc="t", fontname="Helvetica")
    graph.attr("node", shape="box", style="rounded", fontname="Helvetica")
    graph.attr("edge", fontname="Helvetica", fontsize="10")
    graph.node("__start__", label="", shape="point", width="0.15")
    _add_states(graph, spec, prefix="")
    graph.edge("__start__", _anchor(spec, spec.initial.name))
    guarded: set[tuple[str, str]] = set()
    for placed in spec.rows():
        row, dest = placed.transition, placed.dest
        for source in placed.sources:
            # An unguarded row after guarded ones of the same trigger is their fallback: say so.
            fallback = not row.guards and (source, row.trigger) in guarded
            if row.guards:
                guarded.add((source, row.trigger))
            label = _edge_label(row.trigger, row.guards or (("else",) if fallback else ()), row.actions)
            attributes = {}
            if counts is not None:
                fired = sum(counts.get((leaf, row.trigger, spec.landing(dest)), 0) for leaf in spec.leaves(source))
                label += f"\n×{fired}"
                attributes = {"style": "dashed", "color": "gray50"} if fired == 0 else {"penwidth": "2"}
            graph.edge(_anchor(spec, source), _anchor(spec, dest), label=label, **attributes)
    return graph.source


def _title(spec: MachineSpec, counts: Counts | None) -> str:
    if counts is None:
        return spec.name
    return f"{spec.name} (transition counts of one run)"


def _add_states(graph: graphviz.Digraph, spec: MachineSpec, prefix: str) -> None:
    for state in spec.states:
        path = prefix + state.name
        if state in spec.nested:
            with graph.subgraph(name=f"cluster_{path}") as cluster:
                cluster.attr(label=f"{path}: {spec.nested[state].name}", style="rounded")
                _add_states(cluster, spec.nested[state], prefix=path + SEPARATOR)
            continue
        shape = {"peripheries": "2"} if state in spec.final else {}
        graph.node(path, label=state.name, tooltip=str(state.value), **shape)


def _anchor(spec: MachineSpec, path: str) -> str:
    """A row that names a parent state is drawn from (or to) its nested initial state."""
    return spec.landing(path)


def _edge_label(trigger: str, guards: Iterable[str], actions: Iterable[str]) -> str:
    label = trigger
    guards = list(guards)
    actions = list(actions)
    if guards:
        label += f" [{' & '.join(guards)}]"
    if actions:
        label += " /\n" + "\n".join(actions)
    return label


def render_svg(dot_source: str) -> bytes:
    return graphviz.Source(dot_source).pipe(format="svg")


def write(name: str, spec: MachineSpec, directory: Path, counts: Counts | None = None) -> tuple[Path, Path]:
    """Write <name>.dot and <name>.svg into `directory`; return both paths."""
    directory.mkdir(parents=True, exist_ok=True)
    dot_source = to_dot(spec, counts)
    dot_path = directory / f"{name}.dot"
    svg_path = directory / f"{name}.svg"
    dot_path.write_text(dot_source, encoding="utf-8")
    svg_path.write_bytes(render_svg(dot_source))
    return dot_path, svg_path


def stale(machines: Mapping[str, MachineSpec], directory: Path) -> list[str]:
    """Names of machines whose committed DOT is missing or differs from what their table draws."""
    names = []
    for name, spec in machines.items():
        committed = directory / f"{name}.dot"
        if not committed.exists() or committed.read_text(encoding="utf-8") != to_dot(spec):
            names.append(name)
    return names


def run_counts(transitions_log: Iterable[Mapping[str, str]]) -> dict[str, Counter]:
    """Per machine, how often each (source, trigger, dest) fired in a run's transitions.jsonl."""
    counts: dict[str, Counter] = {}
    for record in transitions_log:
        key = (record["source"], record["trigger"], record["dest"])
        counts.setdefault(record["machine"], Counter())[key] += 1
    return counts
