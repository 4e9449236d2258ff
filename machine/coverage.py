"""Transition coverage as a gate: a pytest plugin (enabled in pyproject's addopts).

Two things are recorded for every row of every declared machine, anywhere in the test session:
- fired: an event took the row (its guards let it through and its actions ran). The engine names
  the row that fired, so two rows between the same states on the same event are told apart, a row
  out of a compound state (or out of several states) counts wherever the machine was, and a row
  that several configurations of a machine share counts once, whichever configuration fired it.
- asserted: a table test fired the row by itself and then checked what it did, the state the
  machine rests in and the effects its actions emitted (the tests' `check_row` reports it through
  `asserted` once its checks pass). A row that merely fires inside a longer test proves nothing
  about its actions; one whose actions were wrong would still count as fired.

Each row keeps the tests that fired it and those that asserted it (pytest node ids). A whole-suite
run writes, for every row, the tests that asserted it to the file the ini option
`transition_tests` names (diagrams/transition_tests.json): the diagrams link each edge to them, and
`turnstate coverage` prints the table. Only the asserting tests are written: which other tests fire a
row depends on timing (a retry after a slow reply), and the file is committed beside the diagrams.

At the end the plugin prints `transition coverage: <machine> fired F/D, asserted A/D` for every
declared machine and, when the whole suite ran, fails the session naming each row that never fired
or was never asserted. A subset run (`-k`, `-m`, or explicit paths) only reports, unless
`--transition-gate=on` asks for the gate anyway.

The plugin knows no machine itself: the ini option `transition_machines` names the mapping of
configuration name to MachineSpec to check, as "package.module:ATTRIBUTE"; the configurations of one
machine (the specs that share its name) are covered together, as the union of their rows.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Mapping

import pytest

from turnstate.machine.coverage_map import Tests, declared_rows, missing_rows, tests_by_row
from turnstate.machine.engine import Fired, MachineSpec, add_listener, remove_listener


class Recorder:
    """The rows fired and the rows asserted, by machine name, each with the tests that did it."""

    def __init__(self) -> None:
        self.fired: dict[str, Tests] = {}
        self.asserted: dict[str, Tests] = {}
        self.current = "(outside a test)"  # the node id of the test running now

    def __call__(self, fired: Fired) -> None:
        self.fired.setdefault(fired.machine, {}).setdefault(fired.row, set()).add(self.current)

    def clear(self) -> None:
        self.fired.clear()
        self.asserted.clear()


RECORDER = Recorder()
"""The session's record: one per process, so a test helper can report what it asserted."""


def asserted(fired: Fired) -> None:
    """Record that a test checked what the row behind `fired` did: the state it left the machine in
    and the effects its actions emitted."""
    RECORDER.asserted.setdefault(fired.machine, {}).setdefault(fired.row, set()).add(RECORDER.current)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--transition-gate",
        choices=("auto", "on", "off"),
        default="auto",
        help="fail the session when a declared transition never fired (auto: only when the whole suite runs)",
    )
    parser.addini(
        "transition_machines", "the machines to cover, as 'package.module:ATTRIBUTE' (a name -> MachineSpec mapping)"
    )
    parser.addini("transition_tests", "where a whole-suite run writes each row's asserting tests (relative to rootdir)")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> object:
    RECORDER.current = item.nodeid
    try:
        return (yield)
    finally:
        RECORDER.current = "(outside a test)"


def pytest_configure(config: pytest.Config) -> None:
    RECORDER.clear()
    add_listener(RECORDER)
    config.stash[_ACTIVE] = True


def pytest_unconfigure(config: pytest.Config) -> None:
    if config.stash.get(_ACTIVE, False):
        remove_listener(RECORDER)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    machines = declared_machines(config.getini("transition_machines"))
    never_fired = missing_rows(machines, RECORDER.fired)
    never_asserted = missing_rows(machines, RECORDER.asserted)
    lines = []
    for name, rows in declared_rows(machines).items():
        declared = len(rows)
        fired, checked = declared - len(never_fired[name]), declared - len(never_asserted[name])
        lines.append(f"transition coverage: {name} fired {fired}/{declared}, asserted {checked}/{declared}")
        lines += [f"  never fired: {name}: {label}" for label in never_fired[name]]
        lines += [
            f"  never asserted: {name}: {label}" for label in never_asserted[name] if label not in never_fired[name]
        ]
    config.stash[_REPORT] = lines
    failed = any(never_fired.values()) or any(never_asserted.values())
    target = config.getini("transition_tests")
    if target and _whole_suite(config) and session.exitstatus == 0 and not failed:
        path = config.rootpath / target
        written = json.dumps(tests_by_row(machines, RECORDER.asserted), indent=1, sort_keys=False) + "\n"
        if not path.exists() or path.read_text(encoding="utf-8") != written:
            path.write_text(written, encoding="utf-8")
            lines.append(f"transition tests written to {target}: run `turnstate diagrams` and commit both")
    if _gate_active(config) and failed and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        lines.append("transition coverage gate FAILED: every declared row must be fired, and asserted by a table test")


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    for line in config.stash.get(_REPORT, []):
        terminalreporter.write_line(line)


def declared_machines(reference: str) -> Mapping[str, MachineSpec]:
    """The mapping that `reference` ("package.module:ATTRIBUTE") names; empty if no reference is set."""
    if not reference:
        return {}
    module_name, _, attribute = reference.partition(":")
    try:
        return getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as error:
        raise pytest.UsageError(
            f"transition_machines = {reference!r} does not name an importable mapping: {error}"
        ) from None


def _gate_active(config: pytest.Config) -> bool:
    choice = config.getoption("--transition-gate")
    if choice != "auto":
        return choice == "on"
    return _whole_suite(config)


def _whole_suite(config: pytest.Config) -> bool:
    whole_suite = config.args_source == pytest.Config.ArgsSource.TESTPATHS
    return whole_suite and not config.getoption("keyword") and not config.getoption("markexpr")


_ACTIVE = pytest.StashKey[bool]()
_REPORT = pytest.StashKey[list]()
