"""The house's rules, read from the source: every floor imports only its own floor and the floors
below it, no modules import each other round in a cycle, and only durable/layout.py spells a run
folder's file names.

The floors, bottom up (ARCHITECTURE.md): the engine and the adapters; strategies, the local provider
and the environments; the run folder; the session; sweeps; reports; the command line; and on top the
package's own API and the deprecated `turnstate.harness` shim."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from turnstate.durable import layout

REPO = Path(__file__).resolve().parent.parent
FLOORS: tuple[tuple[str, ...], ...] = (
    ("machine", "adapters"),
    ("strategies", "local_provider", "environments"),
    ("durable",),
    ("session",),
    ("sweeps",),
    ("reports",),
    ("cli",),
    ("", "harness"),  # `turnstate` itself (its API) and the shim
)
FLOOR = {package: level for level, packages in enumerate(FLOORS) for package in packages}


def modules(repo: Path = REPO) -> dict[str, Path]:
    """Every turnstate module and its file, through pyproject's package-dir mapping (the games the
    environments ship are data for the toolkit, not modules of turnstate)."""
    mapping = tomllib.loads((repo / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    found: dict[str, Path] = {}
    for package, folder in mapping.items():
        for path in sorted((repo / folder).rglob("*.py")):
            parts = path.relative_to(repo / folder).with_suffix("").parts
            if "arc_games" in parts:
                continue
            name = ".".join([package, *(part for part in parts if part != "__init__")])
            mapped_elsewhere = package == "turnstate" and len(parts) > 1 and f"turnstate.{parts[0]}" in mapping
            if not mapped_elsewhere:
                found[name] = path
    return found


def import_graph(repo: Path = REPO) -> dict[str, set[str]]:
    """Module -> the turnstate modules it imports, anywhere in it (a deferred import is an edge too)."""
    found = modules(repo)
    graph: dict[str, set[str]] = {name: set() for name in found}
    for name, path in found.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                # `from package import module` is an edge to the module; `from module import name`, to the module
                targets = [f"{node.module}.{alias.name}" for alias in node.names]
            else:
                continue
            graph[name] |= {_owner(target, found) for target in targets if target.startswith("turnstate")} - {None}
            graph[name].discard(name)
    return graph


def _owner(target: str, found: Mapping[str, Path]) -> str | None:
    """The module `target` names: itself, or the module it is a name in."""
    while target and target not in found:
        target = target.rpartition(".")[0]
    return target or None


def floor_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in FLOOR else ""


def upward_imports(graph: Mapping[str, set[str]]) -> list[str]:
    return sorted(
        f"{module} ({floor_of(module) or 'turnstate'}) imports {target} ({floor_of(target) or 'turnstate'}), a floor above it"
        for module, targets in graph.items()
        for target in targets
        if FLOOR[floor_of(target)] > FLOOR[floor_of(module)]
    )


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """Each strongly connected group of two or more modules (Tarjan's), as a path round it."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in sorted(graph.get(module, ())):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def test_no_floor_imports_a_floor_above_it():
    graph = import_graph()
    assert {floor_of(module) for module in graph} <= set(FLOOR), "a package that is on no floor: give it one"
    assert upward_imports(graph) == []


def test_no_modules_import_each_other_round_in_a_cycle():
    assert cycles(import_graph()) == []


def test_an_upward_import_and_a_cycle_are_each_named_with_both_modules():
    graph = {
        "turnstate.durable.events": {"turnstate.session.profile"},
        "turnstate.session.profile": {"turnstate.durable.layout"},
        "turnstate.durable.layout": set(),
        "turnstate.strategies.a": {"turnstate.strategies.b"},
        "turnstate.strategies.b": {"turnstate.strategies.a"},
    }
    assert upward_imports(graph) == [
        "turnstate.durable.events (durable) imports turnstate.session.profile (session), a floor above it"
    ]
    assert cycles(graph) == [["turnstate.strategies.a", "turnstate.strategies.b"]]


def test_the_floors_are_read_from_the_installed_layout():
    """The graph holds every floor's modules (a layout the reader missed would check nothing)."""
    graph = import_graph()
    assert {floor_of(module) for module in graph} == set(FLOOR)
    assert "turnstate.session.session" in graph["turnstate.session.runner"]
    assert "turnstate.durable.layout" in graph["turnstate.durable.checkpoints.stores"]


# -- one owner of the run folder's names ------------------------------------------------------------
LAYOUT_NAMES = sorted(
    value
    for name, value in vars(layout).items()
    if name.isupper() and isinstance(value, str) and re.fullmatch(r"[a-z_]+(\.[a-z0-9*]+)?", value) and value != "runs"
)
SPELLED = re.compile(
    "|".join(rf"(?<![\w.]){re.escape(name)}(?!\w)" for name in LAYOUT_NAMES)
    + r"|\bstep_(\d|\{|$)|\bcompaction_(\d|\{|$)"
)


def spelled_names(path: Path) -> Iterator[str]:
    """The strings in `path`'s code (docstrings aside) that spell a name of the run folder's layout."""
    tree = ast.parse(path.read_text(), str(path))
    documents = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in documents:
            if SPELLED.search(node.value):
                yield f"{path.name}:{node.lineno}: {node.value!r}"


@pytest.mark.parametrize("module", sorted(set(modules()) - {"turnstate.durable.layout"}))
def test_only_the_layout_module_spells_a_run_folders_file_names(module):
    assert list(spelled_names(modules()[module])) == []


def test_the_layout_check_finds_a_file_name_spelled_in_code_and_not_in_a_docstring(tmp_path):
    assert {"run_meta.json", "events.jsonl", "checkpoints.sqlite3", "side_effects.jsonl"} <= set(LAYOUT_NAMES)
    source = tmp_path / "spelled.py"
    source.write_text('"""Reads run_meta.json."""\n\nMETA = "run_meta.json"\nSTEP = f"step_{1:06d}.json"\n')
    assert list(spelled_names(source)) == ["spelled.py:3: 'run_meta.json'", "spelled.py:4: 'step_'"]


# -- what a start loads -----------------------------------------------------------------------------
HEAVY = (
    "turnstate.machine",
    "turnstate.local_provider",
    "transitions",
    "openai",
    "anthropic",
    "google.genai",
    "pydantic",
)


def loaded_by(code: str) -> list[str]:
    """The heavy modules (the engine, the local provider, an SDK, pydantic) that running `code` in a
    fresh interpreter loads."""
    script = f"import sys\n{code}\nprint('\\n'.join(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return [name for name in done.stdout.split() if name.startswith(HEAVY)]


def test_import_turnstate_and_the_commands_help_load_no_engine_sdk_or_local_provider():
    assert loaded_by("import turnstate") == []
    assert (
        loaded_by(
            "import contextlib, io\n"
            "from turnstate.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
            "    main(['--help'])\n"
            "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
            "    main(['run', '--help'])\n"
        )
        == []
    )


def test_the_api_names_load_on_first_use_and_an_adapter_imports_without_the_engine():
    assert "turnstate.local_provider.server" in loaded_by("from turnstate import Session")
    adapter = loaded_by("import turnstate.adapters.responses")
    assert "openai" in adapter and not [name for name in adapter if name.startswith("turnstate.machine")]


PYTEST_PLUGIN = "turnstate.machine.coverage"  # the coverage gate is a pytest plugin: it alone may import pytest


def test_every_module_but_the_pytest_plugin_imports_on_a_plain_install_without_the_test_tools():
    """A plain install (the quick start's `pip install -e .`) has no pytest or hypothesis: a module
    that imported one at its top would crash `turnstate run` (the run's report draws the machine)."""
    skipped = {PYTEST_PLUGIN, "turnstate.harness.environments"}  # the shim warns; __main__ runs the command
    names = sorted(name for name in modules() if name not in skipped and not name.endswith("__main__"))
    script = (
        "import importlib, sys\n"
        "sys.modules['pytest'] = sys.modules['hypothesis'] = None  # what importing an absent package does\n"
        f"for name in {names!r}:\n"
        "    importlib.import_module(name)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
