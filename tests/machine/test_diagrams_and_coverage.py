"""Diagrams come from the tables that run and read without overlaps, and the coverage gate fails on
an unfired transition."""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from turnstate.machine.diagrams import to_dot
from turnstate.machine.engine import SEPARATOR, MachineSpec
from turnstate.strategies import MACHINES

REPO = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "turnstate.cli"]
FULL = {name: spec for name, spec in MACHINES.items() if name.startswith("continuous_conversation.")}
PICTURES = {**{name: {name: spec} for name, spec in MACHINES.items()}, "continuous_conversation": FULL}


def test_the_committed_diagrams_are_current():
    done = subprocess.run(
        [*CLI, "diagrams", "--check", "--out", str(REPO / "diagrams")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr


def test_diagrams_are_one_per_configuration_and_one_full_machine_per_strategy_with_several():
    committed = sorted(path.stem for path in (REPO / "diagrams").glob("*.dot"))
    assert committed == sorted(PICTURES)  # their content: test_the_committed_diagrams_are_current


def test_a_stale_missing_or_orphaned_diagram_is_named(tmp_path):
    shutil.copytree(REPO / "diagrams", tmp_path / "diagrams")
    (tmp_path / "diagrams" / "manual_rolling.dot").write_text("digraph manual_rolling {}\n")
    (tmp_path / "diagrams" / "continuous_conversation.dot").unlink()
    (tmp_path / "diagrams" / "compaction_call.dot").write_text("digraph compaction_call {}\n")
    done = subprocess.run(
        [*CLI, "diagrams", "--check", "--out", str(tmp_path / "diagrams")], capture_output=True, text=True
    )
    assert done.returncode == 1
    assert f"stale diagram: {tmp_path / 'diagrams' / 'manual_rolling.dot'} (run `turnstate diagrams`" in done.stderr
    assert f"stale diagram: {tmp_path / 'diagrams' / 'continuous_conversation.dot'} (run" in done.stderr
    assert f"stale diagram: {tmp_path / 'diagrams' / 'compaction_call.dot'} (no table draws it" in done.stderr


# What a reviewer reads, taken from Graphviz's own layout of the picture (`dot -Tjson`).


def layout(dot: str) -> dict:
    return json.loads(subprocess.run(["dot", "-Tjson"], input=dot, capture_output=True, text=True, check=True).stdout)


def texts(drawn: dict) -> list[str]:
    """The lines of text an object's label draws, in order."""
    return [op["text"] for op in drawn.get("_ldraw_", []) if op["op"] == "T"]


def edges(dot: str) -> dict[tuple[str, str], list[str]]:
    """Each edge as (from, to) -> its label's lines: a state by its name, a cluster (an edge drawn from
    or to its border) by its title; an edge laid out backwards (dir=back) is read the way it points.
    A state's internal transitions are read as an edge from it to itself."""
    drawn = layout(dot)
    objects = drawn["objects"]
    name = {obj["name"]: (texts(obj) or [""])[0] for obj in objects}
    read = {}
    for edge in drawn.get("edges", []):
        ends = [
            name[edge.get(end) or objects[edge[side]]["name"]] for end, side in (("ltail", "tail"), ("lhead", "head"))
        ]
        if edge.get("dir") == "back":
            ends.reverse()
        read[tuple(ends)] = texts(edge)
    for obj in objects:
        if "nodes" not in obj and len(texts(obj)) > 1:
            read[(texts(obj)[0], texts(obj)[0])] = texts(obj)[1:]
    return read


def state_name(spec: MachineSpec, path: str) -> str:
    """A state as the picture of one configuration names it: by its path, a compound state by its
    cluster's title."""
    name = path.replace(SEPARATOR, "/")
    if not spec.is_compound(path):
        return name
    table, state = spec.find(path)
    child = table.nested[state]
    return f"{name}: {child.name}" + (f" — entry / {', '.join(child.entry)}" if child.entry else "")


def actions_under(lines: list[str], index: int) -> list[str]:
    """The actions listed under the trigger at `index`: after the triggers that share them, indented."""
    triggers = list(itertools.takewhile(lambda line: not line.startswith("    "), lines[index:]))
    shared = next((number for number, line in enumerate(triggers) if line.endswith(" /")), None)
    if shared is None:
        return []
    following = lines[index + shared + 1 :]
    return [line.strip() for line in itertools.takewhile(lambda line: line.startswith("    "), following)]


@pytest.mark.parametrize("name", MACHINES)
def test_every_row_is_drawn_between_its_states_with_its_trigger_guards_and_actions(name):
    spec = MACHINES[name]
    drawn = edges(to_dot({name: spec}))
    for row in spec.rows():
        guards = f" [{' & '.join(row.transition.guards)}]" if row.transition.guards else ""
        for source in row.sources:
            lines = drawn[(state_name(spec, source), state_name(spec, row.dest))]
            trigger = next(
                i
                for i, line in enumerate(lines)
                if line.removesuffix(" /") in (row.trigger + guards, row.trigger + " [else]")
            )
            assert actions_under(lines, trigger) == list(row.transition.actions), lines


def test_an_unguarded_row_under_guarded_ones_of_its_trigger_reads_as_their_else():
    drawn = edges(to_dot({"manual_rolling": MACHINES["manual_rolling"]}))
    assert drawn[("Provisional", "FailedClosed")] == [
        "ActionRejected [else] /",
        "    discard_provisional",
        "    fail_closed",
    ]


def test_rows_to_the_same_state_with_the_same_actions_share_one_edge_listing_their_triggers():
    drawn = edges(to_dot({"manual_rolling": MACHINES["manual_rolling"]}))
    assert drawn[("AwaitingReply", "FailedClosed")] == [
        "ProviderFailed [else]",
        "ContextOverflowed [else] /",
        "    fail_closed",
    ]


def test_a_nested_machine_is_a_cluster_titled_with_its_entry_actions_and_its_states_name_their_parent():
    drawn = layout(to_dot({"h": MACHINES["continuous_conversation.harness_summary"]}))
    titles = [texts(obj)[0] for obj in drawn["objects"] if obj["name"].startswith("cluster")]
    assert titles == ["Compacting: harness_summary — entry / request_summary"]
    names = [texts(obj)[0] for obj in drawn["objects"] if "nodes" not in obj and texts(obj)]
    assert {"Compacting/Summarizing", "Compacting/BackingOff", "BackingOff", "Compacting/Summarized"} <= set(names)


@pytest.mark.parametrize("picture", PICTURES)
def test_no_two_states_read_alike(picture):
    drawn = layout(to_dot(PICTURES[picture]))
    names = [texts(obj)[0] for obj in drawn["objects"] if "nodes" not in obj and texts(obj)]
    assert len(names) == len(set(names)), names


def test_rows_from_the_compound_state_leave_its_border_and_done_reads_as_completion():
    spec = MACHINES["continuous_conversation.native_call"]
    drawn = edges(to_dot({"n": spec}))
    compacting = "Compacting: compaction_call — entry / request_compaction"
    assert drawn[(compacting, "AwaitingReply")] == ["Done /", "    request_reply"]
    assert drawn[(compacting, "FailedClosed")] == ["ProviderFailed", "ContextOverflowed /", "    fail_closed"]
    assert drawn[("CompactionScheduled", compacting)] == ["ObservationArrived /", "    open_turn"]


def test_a_row_back_to_its_own_state_is_listed_inside_the_state():
    drawn = edges(to_dot({"manual_rolling": MACHINES["manual_rolling"]}))
    assert drawn[("Accepted", "Accepted")] == [
        "InputBuffered /",
        "    buffer_input",
        "ToolsAnswered /",
        "    answer_tool_calls",
    ]


def test_the_full_machine_draws_each_nested_machine_and_names_what_only_some_configurations_have():
    dot = to_dot(FULL)
    drawn = layout(dot)
    titles = [texts(obj)[0] for obj in drawn["objects"] if obj["name"].startswith("cluster")]
    assert titles == [
        "Compacting",
        "compaction_call (native_call) — entry / request_compaction",
        "harness_summary (harness_summary) — entry / request_summary",
    ]
    read = edges(dot)
    assert read[("AwaitingReply", "Compacting")] == [
        "ProviderFailed [is_retryable_at_once & has_retries_left & compacted_this_turn] /",
        "    spend_retry",
        "ContextOverflowed [can_summarize_overflow] (harness_summary) /",
        "    take_overflow_lane",
    ]
    assert read[("Compacting", "FailedClosed")] == [
        "ProviderFailed",
        "ContextOverflowed",
        "CompactionReplied (harness_summary) /",
        "    fail_closed",
    ]
    # A row every configuration with both its ends has is not marked.
    assert read[("CompactionScheduled", "Compacting")] == ["ObservationArrived /", "    open_turn"]
    # Only the harness summary falls back on an overflow it could not summarize: else only there, yet
    # the row is the fallback the full machine shows.
    assert read[("AwaitingReply", "FailedClosed")] == [
        "ProviderFailed [else]",
        "ContextOverflowed [else] /",
        "    fail_closed",
    ]
    assert "Compacting/harness_summary/BackingOff" in [texts(obj)[0] for obj in drawn["objects"] if texts(obj)]


def test_each_edge_carries_the_tests_that_assert_its_rows_and_links_the_first():
    spec = MACHINES["manual_rolling"]
    rows = {(row.sources, row.dest, row.trigger): row for row in spec.rows()}
    tests = {
        rows[(("AwaitingReply",), "FailedClosed", "ProviderFailed")]: [
            "tests/strategies/test_manual_rolling.py::test_table[gives up]"
        ],
        rows[(("AwaitingReply",), "FailedClosed", "ContextOverflowed")]: [
            'tests/strategies/test_row_effects.py::test_row["quoted"]',
            "tests/strategies/test_manual_rolling.py::test_table[gives up]",
        ],
        rows[(("Accepted",), "Accepted", "InputBuffered")]: ["tests/strategies/test_turn.py::test_buffers"],
    }
    drawn = layout(to_dot({"manual_rolling": spec}, tests=tests))
    name = {obj["_gvid"]: obj["name"] for obj in drawn["objects"]}
    by_ends = {(name[edge["tail"]], name[edge["head"]]): edge for edge in drawn["edges"]}
    failing = by_ends[("AwaitingReply", "FailedClosed")]
    assert failing["URL"] == "../tests/strategies/test_manual_rolling.py"
    assert failing["tooltip"].splitlines() == [
        "tests/strategies/test_manual_rolling.py::test_table[gives up]",
        'tests/strategies/test_row_effects.py::test_row["quoted"]',
    ]
    untested = by_ends[("Provisional", "FailedClosed")]
    assert "URL" not in untested and untested["tooltip"] == "no test asserts this transition"
    # A state's internal transitions carry theirs on their cell.
    svg = subprocess.run(["dot", "-Tsvg"], input=to_dot({"m": spec}, tests=tests), capture_output=True, text=True)
    assert 'xlink:href="../tests/strategies/test_turn.py"' in svg.stdout
    assert 'xlink:title="tests/strategies/test_turn.py::test_buffers"' in svg.stdout


def test_without_tests_no_edge_carries_a_link():
    assert "URL" not in to_dot(FULL) and "href" not in to_dot(FULL)


# No two labels overlap, from Graphviz's own layout. A label's box is the union of its lines: each
# line `width` wide (as the layout reports it in the label's text operations) and from 0.3 font sizes
# below its baseline to 0.9 above, a little more than a glyph's descent and ascent, so an overlap
# cannot hide in the estimate. A node's box is its position and size.


def text_box(drawn: dict) -> tuple[float, float, float, float] | None:
    boxes, size = [], 14.0
    for op in drawn.get("_ldraw_", []):
        if op["op"] == "F":
            size = op["size"]
        elif op["op"] == "T":
            (x, y), width = op["pt"], op["width"]
            left = {"l": x, "c": x - width / 2, "r": x - width}[op["align"]]
            boxes.append((left, y - 0.3 * size, left + width, y + 0.9 * size))
    if not boxes:
        return None
    return (min(b[0] for b in boxes), min(b[1] for b in boxes), max(b[2] for b in boxes), max(b[3] for b in boxes))


def meet(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def bezier(points: list[list[float]], steps: int = 24) -> list[tuple[float, float]]:
    """Points along a spline, as graphviz draws it: cubic Bézier pieces sharing their ends."""
    along = []
    for start in range(0, len(points) - 3, 3):
        (x0, y0), (x1, y1), (x2, y2), (x3, y3) = points[start : start + 4]
        for step in range(steps + 1):
            t = step / steps
            a, b, c, d = (1 - t) ** 3, 3 * (1 - t) ** 2 * t, 3 * (1 - t) * t * t, t**3
            along.append((a * x0 + b * x1 + c * x2 + d * x3, a * y0 + b * y1 + c * y2 + d * y3))
    return along


def overlaps(dot: str) -> list[str]:
    drawn = layout(dot)
    objects = drawn["objects"]

    def edge_name(edge: dict) -> str:
        return f"edge {objects[edge['tail']]['name']} -> {objects[edge['head']]['name']}"

    labels = [(edge_name(edge), box) for edge in drawn.get("edges", []) if (box := text_box(edge))]
    titles = [
        (f"title of {obj['name']}", box) for obj in [drawn, *objects] if "nodes" in obj and (box := text_box(obj))
    ]
    nodes = []
    for obj in objects:
        if "nodes" not in obj and "pos" in obj:
            x, y = map(float, obj["pos"].split(","))
            half_width, half_height = float(obj["width"]) * 36, float(obj["height"]) * 36
            nodes.append((f"node {obj['name']}", (x - half_width, y - half_height, x + half_width, y + half_height)))
    found = [f"{a} overlaps {b}" for (a, one), (b, other) in itertools.combinations(labels, 2) if meet(one, other)]
    found += [f"{a} overlaps {b}" for a, one in labels for b, other in titles + nodes if meet(one, other)]
    for edge in drawn.get("edges", []):
        along = [point for op in edge.get("_draw_", []) if op["op"] == "b" for point in bezier(op["points"])]
        for title, (left, bottom, right, top) in titles:
            if any(left <= x <= right and bottom <= y <= top for x, y in along):
                found.append(f"{edge_name(edge)} crosses the {title}")
    return found


def run_counts(spec: MachineSpec, every: int) -> dict[tuple[str, str, str], int]:
    """A run that took every `every`-th transition the table allows, a dozen times (two-digit counts)."""
    keys = sorted(key for row in spec.rows() for key in spec.log_keys(row))
    return {key: 12 for key in keys[::every]}


DRAWN = [pytest.param((REPO / "diagrams" / f"{name}.dot").read_text(), id=name) for name in PICTURES] + [
    pytest.param(to_dot({name: spec}, run_counts(spec, every)), id=f"{name} with a run taking 1 in {every}")
    for name, spec in MACHINES.items()
    for every in (1, 2)
]


@pytest.mark.parametrize("dot", DRAWN)
def test_no_label_overlaps_another_a_state_or_a_title_and_no_edge_crosses_a_title(dot):
    assert overlaps(dot) == []


def test_the_overlap_check_sees_labels_that_overlap_and_edges_through_a_title():
    stacked = (
        r'digraph { rankdir=LR; a -> a [label="one long label\nover two lines"]; a -> a [label="another\nlabel"] }'
    )
    assert overlaps(stacked) == ["edge a -> a overlaps edge a -> a"]
    through = 'digraph { a; subgraph cluster_x { label="a long title over b"; b } a -> b }'
    assert overlaps(through) == ["edge a -> b crosses the title of cluster_x"]


@pytest.mark.parametrize("name", MACHINES)
def test_a_run_counts_each_row_once_over_the_states_it_leaves(name):
    """A compound state's row counts what fired from every state inside it; the Done row what fired
    from the nested final state; two rows never share a transition-log record."""
    spec = MACHINES[name]
    owners: dict[tuple[str, str, str], object] = {}
    for row in spec.rows():
        for key in spec.log_keys(row):
            assert owners.setdefault(key, row) == row, f"{key} is drawn on two rows"


def test_a_compound_states_row_is_counted_from_every_state_inside_it():
    spec = MACHINES["continuous_conversation.harness_summary"]
    counts = {
        ("Compacting_Summarizing", "ProviderFailed", "FailedClosed"): 2,
        ("Compacting_OverflowRecovery", "ProviderFailed", "FailedClosed"): 3,
        ("Compacting_Summarized", "Done", "AwaitingReply"): 4,
    }
    drawn = edges(to_dot({"h": spec}, counts))
    compacting = "Compacting: harness_summary — entry / request_summary"
    assert drawn[(compacting, "FailedClosed")][0] == "ProviderFailed  ×5"
    assert drawn[(compacting, "AwaitingReply")][0] == "Done  ×4 /"


def test_rendering_writes_dot_and_a_real_svg(tmp_path):
    done = subprocess.run([*CLI, "diagrams", "--out", str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    svg = (tmp_path / "manual_rolling.svg").read_text()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    assert "AwaitingReply" in svg and "has_retries_left" in svg
    assert (tmp_path / "manual_rolling.dot").read_text() == to_dot({"manual_rolling": MACHINES["manual_rolling"]})
    assert sorted(path.stem for path in tmp_path.glob("*.dot")) == sorted(PICTURES)


def test_a_run_is_drawn_with_each_transitions_count(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    fired = [("Accepted", "ObservationArrived", "AwaitingReply")] * 3 + [
        ("AwaitingReply", "ProviderReplied", "Provisional")
    ]
    records = [{"machine": "manual_rolling", "source": s, "trigger": t, "dest": d} for s, t, d in fired]
    (run_dir / "transitions.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))
    done = subprocess.run([*CLI, "diagrams", "--run", str(run_dir)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    dot = (run_dir / "manual_rolling.dot").read_text()
    assert "ObservationArrived  ×3 /" in dot
    assert "×0" in dot and "dashed" in dot  # never-fired rows are drawn, dashed


GATED_TEST = textwrap.dedent(
    """
    from turnstate.strategies.events import ObservationArrived
    from turnstate.strategies import manual_rolling as mr
    from turnstate.strategies.strategy import StrategySettings
    from turnstate.adapters.chat_completions import ChatMessages

    def test_one_transition():
        machine = mr.start(StrategySettings("a", "s", 1, 1000, 10), ChatMessages())
        machine.fire(ObservationArrived("frame"))
    """
)


def _pytest(tmp_path: Path, *options: str) -> subprocess.CompletedProcess:
    (tmp_path / "test_partial.py").write_text(GATED_TEST)
    command = [sys.executable, "-m", "pytest", "-p", "turnstate.machine.coverage", "-p", "no:cacheprovider"]
    command += ["-o", "transition_machines=turnstate.strategies:MACHINES", *options, str(tmp_path)]
    return subprocess.run(command, capture_output=True, text=True, cwd=tmp_path)


def test_the_gate_fails_a_session_naming_each_unfired_transition(tmp_path):
    done = _pytest(tmp_path, "--transition-gate=on")
    assert done.returncode == 1, done.stdout
    assert "transition coverage: manual_rolling fired 1/13, asserted 0/13" in done.stdout
    never_fired = (
        "never fired: manual_rolling: Provisional --ActionRejected--> FailedClosed / discard_provisional, fail_closed"
    )
    assert never_fired in done.stdout
    assert "never fired: manual_rolling: Accepted --ObservationArrived--> AwaitingReply" not in done.stdout
    # fired inside a test that checks nothing of it: not asserted
    assert (
        "never asserted: manual_rolling: Accepted --ObservationArrived--> AwaitingReply / open_turn, request_reply"
        in done.stdout
    )


def test_a_subset_run_reports_coverage_without_failing(tmp_path):
    done = _pytest(tmp_path)
    assert done.returncode == 0, done.stdout
    assert "transition coverage: manual_rolling fired 1/13, asserted 0/13" in done.stdout


LAMP_TESTS = textwrap.dedent(
    """
    import enum
    from dataclasses import dataclass

    from turnstate.machine import coverage
    from turnstate.machine.engine import Event, LiveMachine, MachineModel, MachineSpec, Transition


    class Lamp(enum.Enum):
        Off = "off"
        On = "on"


    @dataclass(frozen=True)
    class Switched(Event):
        pass


    LAMP = MachineSpec("lamp", Lamp, Lamp.Off, frozenset({Lamp.On}), (Transition(Switched, Lamp.Off, Lamp.On),))
    MACHINES = {"lamp": LAMP}


    def test_switching_turns_the_lamp_on():
        machine = LiveMachine(LAMP, MachineModel())
        machine.fire(Switched())
        assert machine.path == "On"
        coverage.asserted(machine.fired[-1])


    def test_switching_without_a_look():
        LiveMachine(LAMP, MachineModel()).fire(Switched())
    """
)


def test_a_whole_suite_run_writes_the_tests_that_assert_each_row(tmp_path):
    (tmp_path / "test_lamp.py").write_text(LAMP_TESTS)
    (tmp_path / "pytest.ini").write_text("[pytest]\ntestpaths = .\n")
    command = [sys.executable, "-m", "pytest", "-p", "turnstate.machine.coverage", "-p", "no:cacheprovider"]
    command += ["-o", "transition_machines=test_lamp:MACHINES", "-o", "transition_tests=map.json"]
    done = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stdout
    # The test that only fired the row is not one that proves it.
    assert json.loads((tmp_path / "map.json").read_text()) == {
        "lamp": {"Off --Switched--> On / no action": ["test_lamp.py::test_switching_turns_the_lamp_on"]}
    }
    assert "transition tests written to map.json" in done.stdout


def test_the_coverage_table_names_each_rows_tests_and_every_row_no_test_asserts():
    from turnstate.machine import coverage_map as coverage

    spec = MACHINES["manual_rolling"]
    rows = list(spec.rows())
    first, second = coverage.row_label(rows[0]), coverage.row_label(rows[1])
    committed = {"manual_rolling": {first: ["tests/t.py::test_buffers"], "Gone --Went--> Away / no action": ["x"]}}
    lines = coverage.table({"manual_rolling": spec}, committed)
    assert lines[:3] == ["manual_rolling: 13 transitions", f"  {first}", "      tests/t.py::test_buffers"]
    assert lines[3:5] == [f"  {second}", "      (no test asserts what this row does)"]
    assert f"asserted by no test: manual_rolling: {second}" in lines
    assert lines[-1].endswith("manual_rolling: Gone --Went--> Away / no action")


def test_turnstate_coverage_prints_the_committed_map():
    done = subprocess.run([*CLI, "coverage"], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert "continuous_conversation: 35 transitions" in done.stdout
    assert "asserted by no test" not in done.stdout  # the gate keeps every row asserted
    assert "tests/strategies/test_harness_summary.py::test_table[" in done.stdout
