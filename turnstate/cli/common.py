"""What every command shares: a user's mistake as one line and exit 1, the `--json` option, and a
profile loaded by path or shipped name.

The commands' modules import only click and the standard library at the top, and what a command
uses inside it: `turnstate --help` and a command's own help load no engine, SDK or local provider."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from turnstate.durable.layout import RUN_META

if TYPE_CHECKING:
    from turnstate.session.profile import Profile

EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a run stopped by Ctrl-C


def fail(message: str) -> NoReturn:
    """One line on stderr and exit 1: a user's mistake is never shown as a traceback."""
    click.echo(f"error: {message}", err=True)
    sys.exit(1)


def _overrides(context: click.Context, parameter: click.Parameter, given: tuple[str, ...]) -> list[tuple[str, str]]:
    from turnstate.session.settings_file import parse_override

    try:
        return [parse_override(item) for item in given]
    except ValueError as error:
        raise click.BadParameter(str(error)) from None


def overrides_options(command: Any) -> Any:
    """`--set KEY=VALUE` (any number), and its shorthands `--model` and `--seed`: profile keys set
    before the profile is validated, so a value is checked as the file's would be."""
    options = [
        click.option(
            "--set",
            "overrides",
            multiple=True,
            metavar="KEY=VALUE",
            callback=_overrides,
            help="set a profile key (its dotted path) before the profile is validated, e.g. agent.max_actions=50; "
            f"recorded in {RUN_META}; may be given again",
        ),
        click.option("--model", help="the model requested: --set request.model=MODEL"),
        click.option("--seed", type=int, help="the game's seed: --set environment.seed=SEED"),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def all_overrides(overrides: Sequence[tuple[str, str]], model: str | None, seed: int | None) -> list[tuple[str, str]]:
    """The --set overrides, then the shorthands' (a shorthand given wins over a --set of its key)."""
    shorthand = [
        ("request.model", None if model is None else json.dumps(model)),  # a name, even one YAML reads as a number
        ("environment.seed", None if seed is None else str(seed)),
    ]
    return [*overrides, *((key, value) for key, value in shorthand if value is not None)]


def complete_profile(context: click.Context, parameter: click.Parameter, incomplete: str) -> list[Any]:
    """A PROFILE's shell completion: the shipped profiles' names that start so, and the shell's own
    completion of a file's path (without loading the engine: a completion runs at every Tab)."""
    from click.shell_completion import CompletionItem

    from turnstate.session.shipped import shipped_names

    names = [CompletionItem(name) for name in shipped_names() if name.startswith(incomplete)]
    return [*names, CompletionItem(incomplete, type="file")]


def json_option(what: str) -> Any:
    return click.option("--json", "as_json", is_flag=True, help=f"print one JSON document for scripts: {what}")


def checkpoints_option(help_text: str) -> Any:
    """`--checkpoints URL`: `sqlite` or a postgresql:// URL (durable/checkpoints/stores.py), set as
    TURNSTATE_CHECKPOINTS for this process and the runs it starts; a value that is neither is a
    usage error saying so."""

    def chosen(context: click.Context, parameter: click.Parameter, value: str | None) -> str | None:
        from turnstate.durable.checkpoints import CheckpointError
        from turnstate.durable.checkpoints.stores import STORE_VARIABLE, chosen_store

        if value is None:
            return None
        try:
            chosen_store(value)
        except CheckpointError as error:
            raise click.BadParameter(str(error).replace(STORE_VARIABLE, "--checkpoints", 1)) from None
        os.environ[STORE_VARIABLE] = value
        return value

    return click.option(
        "--checkpoints",
        metavar="URL",
        callback=chosen,
        expose_value=False,
        is_eager=True,
        help=f"{help_text}; sets TURNSTATE_CHECKPOINTS",
    )


def load_or_exit(given: Path, overrides: Sequence[tuple[str, str]] = ()) -> Profile:
    """The profile `given` names (a path, or a shipped profile's name) with `overrides` set in it, or
    its error and exit 1."""
    from turnstate.session.profile import load_profile, resolve_profile
    from turnstate.session.settings_file import ProfileError

    try:
        return load_profile(resolve_profile(given), overrides)
    except ProfileError as error:
        click.echo(str(error), err=True)
        sys.exit(1)
