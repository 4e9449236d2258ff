"""Transition coverage as a gate: a pytest plugin (enabled in pyproject's addopts).

Every transition fired anywhere in the test session (table tests, adapter tests, end-to-end runs) is
recorded through the engine's listener hook. At the end the plugin prints `transition coverage: C/D`
for every declared machine and, when the whole suite ran, fails the session naming each declared
transition that never fired. A subset run (`-k`, `-m`, or explicit paths) only reports, unless
`--transition-gate=on` asks for the gate anyway.

The plugin knows no machine itself: the ini option `transition_machines` names the mapping of
machine name to MachineSpec to check, as "package.module:ATTRIBUTE".
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping

import pytest

from turnstate.machine.engine import MachineSpec, add_listener, remove_listener

Triple = tuple[str, str, str]


class Recorder:
    def __init__(self) -> None:
        self.fired: dict[str, set[Triple]] = {}

    def __call__(self, machine: str, source: str, trigger: str, dest: str) -> None:
        self.fired.setdefault(machine, set()).add((source, trigger, dest))


def missing_transitions(
    machines: Mapping[str, MachineSpec], fired: Mapping[str, set[Triple]]
) -> dict[str, list[Triple]]:
    """Per machine, the declared (source, trigger, dest) triples that never fired, in table order."""
    return {
        name: [triple for triple in spec.declared() if triple not in fired.get(name, set())]
        for name, spec in machines.items()
    }


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


def pytest_configure(config: pytest.Config) -> None:
    recorder = Recorder()
    add_listener(recorder)
    config.stash[_RECORDER] = recorder


def pytest_unconfigure(config: pytest.Config) -> None:
    recorder = config.stash.get(_RECORDER, None)
    if recorder is not None:
        remove_listener(recorder)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    machines = declared_machines(config.getini("transition_machines"))
    recorder = config.stash[_RECORDER]
    missing = missing_transitions(machines, recorder.fired)
    lines = []
    for name, spec in machines.items():
        declared = len(spec.declared())
        lines.append(f"transition coverage: {name} {declared - len(missing[name])}/{declared}")
        lines += [f"  never fired: {name}: {source} --{trigger}--> {dest}" for source, trigger, dest in missing[name]]
    config.stash[_REPORT] = lines
    gated = _gate_active(config)
    if gated and any(missing.values()) and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        lines.append("transition coverage gate FAILED: every declared transition must be fired by a test")


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
    whole_suite = config.args_source == pytest.Config.ArgsSource.TESTPATHS
    return whole_suite and not config.getoption("keyword") and not config.getoption("markexpr")


_RECORDER = pytest.StashKey[Recorder]()
_REPORT = pytest.StashKey[list]()
