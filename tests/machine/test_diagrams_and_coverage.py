"""Diagrams come from the tables that run, and the coverage gate fails on an unfired transition."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from turnstate.machine.diagrams import to_dot
from turnstate.strategies import MACHINES

REPO = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "turnstate.harness.cli"]


def test_the_committed_diagrams_are_current():
    done = subprocess.run(
        [*CLI, "diagrams", "--check", "--out", str(REPO / "diagrams")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr


def test_a_stale_or_missing_diagram_is_named(tmp_path):
    shutil.copytree(REPO / "diagrams", tmp_path / "diagrams")
    (tmp_path / "diagrams" / "manual_rolling.dot").write_text("digraph manual_rolling {}\n")
    done = subprocess.run(
        [*CLI, "diagrams", "--check", "--out", str(tmp_path / "diagrams")], capture_output=True, text=True
    )
    assert done.returncode == 1
    assert "stale diagram:" in done.stderr and "manual_rolling.dot" in done.stderr


def test_every_row_is_drawn_with_its_trigger_guards_and_actions():
    for spec in MACHINES.values():
        dot = to_dot(spec)
        for state in spec.members():
            if state in spec.nested:  # a parent state is a cluster around its nested machine
                assert f"subgraph cluster_{state.name} {{" in dot
            else:
                assert f"\t{state.name} [label={state.name}" in dot
        for row in spec.rows():
            for source in row.sources:
                assert f"{spec.landing(source)} -> {spec.landing(row.dest)}" in dot
            for name in (row.trigger, *row.transition.guards, *row.transition.actions):
                assert name in dot


def test_rendering_writes_dot_and_a_real_svg(tmp_path):
    done = subprocess.run([*CLI, "diagrams", "--out", str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    svg = (tmp_path / "manual_rolling.svg").read_text()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    assert "AwaitingReply" in svg and "has_retries_left" in svg
    assert (tmp_path / "manual_rolling.dot").read_text() == to_dot(MACHINES["manual_rolling"])


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
    assert "request_reply\n×3" in dot
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
    assert "transition coverage: manual_rolling fired 1/12, asserted 0/12" in done.stdout
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
    assert "transition coverage: manual_rolling fired 1/12, asserted 0/12" in done.stdout


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
    from turnstate.machine import coverage

    spec = MACHINES["manual_rolling"]
    rows = list(spec.rows())
    first, second = coverage.row_label(spec, rows[0]), coverage.row_label(spec, rows[1])
    committed = {"manual_rolling": {first: ["tests/t.py::test_buffers"], "Gone --Went--> Away / no action": ["x"]}}
    lines = coverage.table({"manual_rolling": spec}, committed)
    assert lines[:3] == ["manual_rolling: 12 transitions", f"  {first}", "      tests/t.py::test_buffers"]
    assert lines[3:5] == [f"  {second}", "      (no test asserts what this row does)"]
    assert f"asserted by no test: manual_rolling: {second}" in lines
    assert lines[-1].endswith("manual_rolling: Gone --Went--> Away / no action")


def test_turnstate_coverage_prints_the_committed_map():
    done = subprocess.run([*CLI, "coverage"], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert "continuous_conversation: 33 transitions" in done.stdout
    assert "asserted by no test" not in done.stdout  # the gate keeps every row asserted
    assert "tests/strategies/test_harness_summary.py::test_table[" in done.stdout
