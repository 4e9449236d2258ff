"""What every command shares: a user's mistake as one line and exit 1, the `--json` option, and a
profile loaded by path or shipped name.

The commands' modules import only click and the standard library at the top, and what a command
uses inside it: `turnstate --help` and a command's own help load no engine, SDK or local provider."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

if TYPE_CHECKING:
    from turnstate.session.profile import Profile

EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a run stopped by Ctrl-C


def fail(message: str) -> NoReturn:
    """One line on stderr and exit 1: a user's mistake is never shown as a traceback."""
    click.echo(f"error: {message}", err=True)
    sys.exit(1)


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


def load_or_exit(given: Path) -> Profile:
    """The profile `given` names (a path, or a shipped profile's name), or its error and exit 1."""
    from turnstate.session.profile import load_profile, resolve_profile
    from turnstate.session.settings_file import ProfileError

    try:
        return load_profile(resolve_profile(given))
    except ProfileError as error:
        click.echo(str(error), err=True)
        sys.exit(1)
