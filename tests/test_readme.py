"""The README's quick start is what CI runs: its test command is in .ci/run verbatim, and both of its
commands make the virtual environment Debian's Python needs (a bare `pip install` is refused there)."""

from __future__ import annotations

import re
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent


def quick_start_commands() -> list[str]:
    readme = (REPOSITORY / "README.md").read_text()
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.+?)\n```", section, flags=re.DOTALL)


def test_the_quick_start_has_two_commands_each_in_a_virtual_environment():
    run, tests = quick_start_commands()
    for command in (run, tests):
        assert "\n" not in command and "python3 -m venv .venv" in command
        assert " pip install" not in command.replace(".venv/bin/pip install", "")  # never the system's pip
    assert run.endswith(".venv/bin/turnstate run") and tests.endswith(".venv/bin/python -m pytest")


def test_ci_runs_the_readmes_test_command_verbatim():
    _, tests = quick_start_commands()
    assert tests in (REPOSITORY / ".ci" / "run").read_text().splitlines()
