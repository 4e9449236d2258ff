"""The `turnstate` command line: click commands that parse, call a library function and print."""

from turnstate.cli.commands import main

__all__ = ["main"]
