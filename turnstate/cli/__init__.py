"""The `turnstate` command line: click commands that parse, call a library function and print.

Each command's module imports only click and the standard library at the top (cli/common.py says
why), so `turnstate --help` loads none of the engine, the SDKs or the local provider."""

from __future__ import annotations

import click

from turnstate.cli.inspecting import coverage, diagrams, events, export, report, show
from turnstate.cli.maintenance import prune
from turnstate.cli.profiles import list_, schema, validate
from turnstate.cli.running import resume, run, serve, sweep

COMMANDS = (run, resume, sweep, serve, validate, list_, schema, show, events, export, report, diagrams, coverage, prune)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})  # every command's own help too
@click.version_option(package_name="turnstate")
def main() -> None:
    """Carry an LLM agent's runtime state across model turns, as explicit state machines."""


for _command in COMMANDS:
    main.add_command(_command)

__all__ = ["main"]
