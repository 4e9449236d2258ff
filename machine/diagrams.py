"""Diagrams drawn from the same tables that run.

A picture draws one configuration of a machine (what one profile can run), or every configuration of
a strategy at once (its full machine). What it shows, and why:

- Every state is a node, named with its parents ("Compacting/BackingOff"), so no two states read
  alike; every nested machine is a cluster inside its parent state, titled with the machine and its
  entry actions ("Compacting: harness_summary — entry / request_summary"), with a dot for its initial
  state.
- Every row is drawn with `trigger [guards] / actions` by the names the code uses; an unguarded row
  under guarded ones of the same trigger is their `[else]`. All rows from one state to another share
  one edge, and rows with the same actions list their triggers over them: a state's failures read as
  one edge to FailedClosed, not one per event.
- A row that leaves a state and comes back to it is listed inside the state, under a line (UML's
  internal transitions; no leaf state has entry or exit actions, so the two mean the same): graphviz
  sets a self-loop's label beside the node, where the node's other edges cross it.
- A row into a compound state ends at its cluster's border (the machine starts at its dot), and a row
  from a compound state leaves the border, as it applies from every state inside; so does the `Done`
  row, as statecharts draw a completion transition.
- The layout runs top down and puts final states at the bottom: cluster titles sit at the top of
  their clusters, where no edge to a final state passes.
- A full machine draws each configuration's nested machine as its own cluster inside the compound
  state; a row (or nested machine) that only some of the configurations holding its ends have names
  them, e.g. "(harness_summary)".

- Of two states with edges both ways, the edge back towards the initial state is laid out as the
  other's twin (dir=back), so graphviz draws the pair side by side instead of twisting it.

The DOT text is the checked source: it is deterministic, so `turnstate diagrams --check` compares it
with the committed file. A run can be drawn too: each row then carries the number of times it fired
in that run, and what never fired is dashed (or grey, inside a state). Given the tests that assert
each row (the coverage gate's map), each edge carries them as a tooltip and links to the first one's
file.
"""

from __future__ import annotations

import html
from collections import Counter, deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import graphviz

from turnstate.machine.engine import SEPARATOR, MachineSpec, Row

Counts = Mapping[tuple[str, str, str], int]  # (source leaf, trigger, landing dest) -> times fired
Tests = Mapping[Row, Sequence[str]]  # row -> the pytest node ids of the tests that assert it (the coverage map)
Machines = Mapping[str, MachineSpec]  # configuration name -> the machine it assembles


def to_dot(
    machines: Machines | MachineSpec, counts: Counts | None = None, tests: Tests | None = None, test_root: str = ".."
) -> str:
    """The picture of one configuration (`{name: spec}`, or a bare spec under its own name) or of
    several at once (a full machine). `test_root` is the folder the tests' node ids are relative to,
    as seen from the diagram's folder."""
    if isinstance(machines, MachineSpec):
        machines = {machines.name: machines}
    picture = _Picture(machines, _Marks(counts, tests, test_root))
    first = next(iter(machines.values()))
    graph = graphviz.Digraph(name=next(iter(machines)) if len(machines) == 1 else first.name)
    title = picture.title + (" (transition counts of one run)" if counts is not None else "")
    graph.attr(rankdir="TB", compound="true", nodesep="0.5", label=title, labelloc="t", fontname="Helvetica")
    graph.attr("node", shape="box", style="rounded", fontname="Helvetica")
    graph.attr("edge", fontname="Helvetica", fontsize="10")
    graph.node("__start__", label="", shape="point", width="0.15")
    picture.link(graph, _Link("__start__"), _end(first, first.initial.name))
    picture.draw_table(graph, machines, table="")
    for key, edge in picture.edges.items():
        twin = {"dir": "back"} if key in picture.returns else {}
        picture.link(
            graph, edge.tail, edge.head, label=_text_label(picture.lines(edge)), **picture.marks.of(edge), **twin
        )
    return graph.source


@dataclass(frozen=True)
class _Link:
    """An edge's end: a state's node, or a compound state's cluster (`cluster`), entered or left at its
    border. Graphviz still lays the edge out from a node inside it (`node`): the machine's initial dot
    (`top`), or for an edge down to a final state a final state of the nested machine, so the label
    falls between the cluster and the other end, outside the cluster."""

    node: str
    cluster: str | None = None
    top: bool = False

    @property
    def key(self) -> str:
        return self.cluster or self.node


@dataclass
class _Edge:
    """Every row from one end to another."""

    tail: _Link
    head: _Link
    rows: dict[Row, set[str]] = field(default_factory=dict)  # each row -> the configurations holding it
    fallbacks: set[Row] = field(default_factory=set)  # rows that are their source's `else`
    keys: dict[Row, set[tuple[str, str, str]]] = field(default_factory=dict)  # row -> its transition-log keys


@dataclass(frozen=True)
class _Marks:
    """What a picture adds to its rows: a run's counts, the tests that assert them."""

    counts: Counts | None
    tests: Tests | None
    test_root: str

    def fired(self, edge: _Edge, row: Row) -> int:
        return sum(self.counts.get(key, 0) for key in edge.keys[row]) if self.counts is not None else 0

    def unfired(self, edge: _Edge) -> bool:
        return self.counts is not None and not any(self.fired(edge, row) for row in edge.rows)

    def of(self, edge: _Edge) -> dict[str, str]:
        """The edge's attributes for a run (dashed if it never fired) and for its tests (the tests as
        a tooltip, a link to the first one's file)."""
        attributes = {}
        if self.counts is not None:
            attributes = {"style": "dashed", "color": "gray50"} if self.unfired(edge) else {"penwidth": "2"}
        if self.tests is not None:
            names = list(dict.fromkeys(name for row in edge.rows for name in self.tests.get(row, ())))
            # graphviz reads a backslash in an attribute as an escape (\N, \l, ...): keep it one
            attributes["tooltip"] = (
                "\n".join(names).replace("\\", "\\\\") if names else "no test asserts this transition"
            )
            if names:
                attributes["URL"] = f"{self.test_root}/{names[0].split('::')[0]}"
        return attributes


class _Picture:
    """The states and rows of one or more configurations, each drawn once."""

    def __init__(self, machines: Machines, marks: _Marks) -> None:
        self.marks = marks
        first = next(iter(machines.values()))
        self.title = next(iter(machines)) if len(machines) == 1 else f"{first.name}: every configuration"
        # A configuration is named in the picture without its strategy: "(harness_summary)".
        self.short_names = {name: name.removeprefix(first.name + ".") for name in machines}
        self.present: dict[str, set[str]] = {}  # node or cluster -> the configurations that have it
        nested: dict[str, set[str]] = {}  # compound state -> the names of the machines it holds
        self.edges: dict[tuple[str, str], _Edge] = {}
        for name, spec in machines.items():
            for path in spec.state_paths():
                self.present.setdefault(_cluster(spec, path) or _node_id(spec, path), set()).add(name)
                if spec.is_compound(path):
                    nested.setdefault(path, set()).add(_table(spec, path).name)
            self._add_rows(name, spec)
        self.alternatives = {path for path, names in nested.items() if len(names) > 1}
        self.returns = self._returns(machines)
        # A row back to its own (simple) state is listed inside the state.
        self.internal = {
            key[0]: self.edges.pop(key)
            for key, edge in list(self.edges.items())
            if edge.tail == edge.head == _Link(key[0])
        }

    def _returns(self, machines: Machines) -> set[tuple[str, str]]:
        """The edges back to a state that has an edge to them, towards the initial state (to a state
        fewer moves from it). Each is laid out as its pair's twin (dir=back): graphviz then draws the
        two side by side, where it would twist two opposite edges together."""
        moves: dict[str, int] = {}
        for spec in machines.values():
            for path, count in _moves(spec).items():
                moves[_node_id(spec, path)] = min(count, moves.get(_node_id(spec, path), count))
        return {
            (tail, head)
            for (tail, head), edge in self.edges.items()
            if (head, tail) in self.edges
            and edge.tail.cluster is edge.head.cluster is None
            and moves[head] < moves[tail]
        }

    def _add_rows(self, name: str, spec: MachineSpec) -> None:
        guarded: set[tuple[str, str]] = set()
        for row in spec.rows():
            for source in row.sources:
                fallback = not row.transition.guards and (source, row.trigger) in guarded
                if row.transition.guards:
                    guarded.add((source, row.trigger))
                table, dest = spec.find(row.dest)
                tail, head = _end(spec, source, bottom=dest in table.final), _end(spec, row.dest)
                edge = self.edges.setdefault((tail.key, head.key), _Edge(tail, head))
                edge.rows.setdefault(row, set()).add(name)
                if fallback:
                    edge.fallbacks.add(row)
                edge.keys.setdefault(row, set()).update(spec.log_keys(row, source))

    def lines(self, edge: _Edge) -> list[str]:
        """The edge's rows, those with the same actions listing their triggers over them."""
        blocks: dict[tuple[str, ...], list[str]] = {}
        for row, configurations in edge.rows.items():
            guards = row.transition.guards or (("else",) if row in edge.fallbacks else ())
            line = row.trigger + (f" [{' & '.join(guards)}]" if guards else "")
            line += self._only_in(configurations, self.present[edge.tail.key] & self.present[edge.head.key])
            if self.marks.counts is not None:
                line += f"  ×{self.marks.fired(edge, row)}"
            blocks.setdefault(row.transition.actions, []).append(line)
        lines = []
        # Rows without actions last, so that no trigger reads as sharing the actions under the next one.
        for actions, triggers in sorted(blocks.items(), key=lambda block: not block[0]):
            lines += [
                *triggers[:-1],
                triggers[-1] + (" /" if actions else ""),
                *(f"    {action}" for action in actions),
            ]
        return lines

    def _only_in(self, configurations: set[str], possible: set[str]) -> str:
        """ " (harness_summary)" for what only some of the configurations that could have it have."""
        if configurations == possible:
            return ""
        return f" ({', '.join(short for name, short in self.short_names.items() if name in configurations)})"

    def link(self, graph: graphviz.Digraph, tail: _Link, head: _Link, **attributes: str) -> None:
        if tail.top:  # leaving a cluster at its top: laid out as an edge into it, so the cluster ranks below
            attributes["dir"] = "back"
        if attributes.get("dir") == "back":
            tail, head = head, tail
        ends = {"ltail": tail.cluster, "lhead": head.cluster}
        graph.edge(tail.node, head.node, **attributes, **{end: cluster for end, cluster in ends.items() if cluster})

    def draw_table(self, graph: graphviz.Digraph, machines: Machines, table: str) -> None:
        """Draw the states of the table nested at `table` ("" for the top one) as `machines` hold it."""
        tables = {name: _table(spec, table) for name, spec in machines.items()}
        for state in next(iter(tables.values())).states:
            holding = {name: machines[name] for name, held in tables.items() if state in held.members()}
            if not holding:
                continue
            path = _join(table, state.name)
            spec = next(iter(holding.values()))
            if not spec.is_compound(path):
                self._draw_state(graph, spec, path)
                continue
            by_machine: dict[str, dict[str, MachineSpec]] = {}
            for name, held in holding.items():
                by_machine.setdefault(_table(held, path).name, {})[name] = held
            cluster_id = str(_cluster(spec, path))
            with graph.subgraph(name=cluster_id) as cluster:
                label = self._label(spec, path)
                if len(by_machine) == 1:
                    self._draw_machine(cluster, holding, path, f"{label}: ")
                    continue
                cluster.attr(label=label, style="rounded")
                for machine, group in by_machine.items():
                    with cluster.subgraph(name=f"{cluster_id}/{machine}") as inner:
                        self._draw_machine(inner, group, path, "", self._only_in(set(group), set()))

    def _draw_machine(
        self, graph: graphviz.Digraph, machines: Machines, path: str, before: str, after: str = ""
    ) -> None:
        spec = next(iter(machines.values()))
        child = _table(spec, path)
        entry = f" — entry / {', '.join(child.entry)}" if child.entry else ""
        graph.attr(label=f"{before}{child.name}{after}{entry}", style="rounded")
        start = _start(spec, path)
        graph.node(start, label="", shape="point", width="0.1")
        self.link(graph, _Link(start), _end(spec, _join(path, child.initial.name)))
        self.draw_table(graph, machines, path)

    def _draw_state(self, graph: graphviz.Digraph, spec: MachineSpec, path: str) -> None:
        table, state = spec.find(path)
        node_id, label = _node_id(spec, path), self._label(spec, path)
        internal = self.internal.get(node_id)
        attributes = {"tooltip": str(state.value)}
        if internal is not None:
            label = self._compartments(label, internal)
        if state not in table.final:
            graph.node(node_id, label=label, **attributes)
            return
        with graph.subgraph() as bottom:  # final states at the bottom: see the module's docstring
            bottom.attr(rank="sink")
            bottom.node(node_id, label=label, peripheries="2", **attributes)

    def _compartments(self, name: str, internal: _Edge) -> str:
        """An HTML label: the state's name over its internal transitions, which carry the edge's marks."""
        marks = self.marks.of(internal)
        cell = {"href": marks.get("URL"), "tooltip": marks.get("tooltip")}
        shown = " ".join(f'{key}="{html.escape(value)}"' for key, value in cell.items() if value)
        colour = ' color="gray50"' if self.marks.unfired(internal) else ""
        rows = "".join(html.escape(line) + '<br align="left"/>' for line in self.lines(internal))
        return (
            f'<<table border="0" cellborder="0" cellspacing="0"><tr><td>{html.escape(name)}</td></tr><hr/>'
            f'<tr><td align="left" {shown}><font point-size="10"{colour}>{rows}</font></td></tr></table>>'
        )

    def _label(self, spec: MachineSpec, path: str) -> str:
        """The state's path, "/"-separated, naming the machine too inside a state that holds
        alternative machines (a full machine's Compacting)."""
        parts = path.split(SEPARATOR)
        names = []
        for depth, part in enumerate(parts):
            names.append(part)
            prefix = SEPARATOR.join(parts[: depth + 1])
            if prefix in self.alternatives and depth < len(parts) - 1:
                names.append(_table(spec, prefix).name)
        return "/".join(names)


def _moves(spec: MachineSpec) -> dict[str, int]:
    """How many moves each state the machine can rest in is from its initial state."""
    start = spec.landing(spec.initial.name)
    moves, queue = {start: 0}, deque([start])
    while queue:
        here = queue.popleft()
        for row in spec.rows():
            dest = spec.landing(row.dest)
            if dest not in moves and any(here in spec.leaves(source) for source in row.sources):
                moves[dest] = moves[here] + 1
                queue.append(dest)
    return moves


def _text_label(lines: Iterable[str]) -> str:
    return "".join(line + "\\l" for line in lines)  # "\l" ends a left-aligned line


def _join(table: str, name: str) -> str:
    return f"{table}{SEPARATOR}{name}" if table else name


def _table(spec: MachineSpec, path: str) -> MachineSpec:
    """The machine whose table holds the states under `path` ("" for the top one)."""
    if not path:
        return spec
    holder, state = spec.find(path)
    return holder.nested[state]


def _node_id(spec: MachineSpec, path: str) -> str:
    """A state's node: its path with each nested machine's name, so the states of two machines nested
    in one state (a full machine's Compacting) stay apart."""
    parts = path.split(SEPARATOR)
    names = []
    for depth, part in enumerate(parts[:-1]):
        names += [part, _table(spec, SEPARATOR.join(parts[: depth + 1])).name]
    return "/".join([*names, parts[-1]])


def _cluster(spec: MachineSpec, path: str) -> str | None:
    """A compound state's cluster (None for a simple state)."""
    return f"cluster_{_node_id(spec, path)}" if spec.is_compound(path) else None


def _start(spec: MachineSpec, path: str) -> str:
    """The initial dot of the machine nested in `path`."""
    return f"{_node_id(spec, path)}/{_table(spec, path).name}/__start__"


def _end(spec: MachineSpec, path: str, bottom: bool = False) -> _Link:
    """Where an edge to or from `path` is drawn (see `_Link`): `bottom` for an edge down to a final state."""
    cluster = _cluster(spec, path)
    if cluster is None:
        return _Link(_node_id(spec, path))
    if bottom:
        final = next(leaf for leaf in spec.leaves(path) if leaf in spec.nested_finals)
        return _Link(_node_id(spec, final), cluster)
    return _Link(_start(spec, path), cluster, top=True)


def render_svg(dot_source: str) -> bytes:
    return graphviz.Source(dot_source).pipe(format="svg")


def write(
    name: str, machines: Machines, directory: Path, counts: Counts | None = None, tests: Tests | None = None
) -> tuple[Path, Path]:
    """Write <name>.dot and <name>.svg into `directory`; return both paths. The tests' node ids are
    relative to the folder above `directory` (the repository, for diagrams/)."""
    directory.mkdir(parents=True, exist_ok=True)
    dot_source = to_dot(machines, counts, tests)
    dot_path = directory / f"{name}.dot"
    svg_path = directory / f"{name}.svg"
    dot_path.write_text(dot_source, encoding="utf-8")
    svg_path.write_bytes(render_svg(dot_source))
    return dot_path, svg_path


def stale(pictures: Mapping[str, Machines], directory: Path, tests: Tests | None = None) -> list[str]:
    """Names of pictures whose committed DOT is missing or differs from what their tables draw."""
    names = []
    for name, machines in pictures.items():
        committed = directory / f"{name}.dot"
        if not committed.exists() or committed.read_text(encoding="utf-8") != to_dot(machines, tests=tests):
            names.append(name)
    return names


def run_counts(transitions_log: Iterable[Mapping[str, str]]) -> dict[str, Counter]:
    """Per machine, how often each (source, trigger, dest) fired in a run's transitions.jsonl."""
    counts: dict[str, Counter] = {}
    for record in transitions_log:
        key = (record["source"], record["trigger"], record["dest"])
        counts.setdefault(record["machine"], Counter())[key] += 1
    return counts
