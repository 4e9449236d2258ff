"""`python -m turnstate.cli`: the `turnstate` command."""

from turnstate.cli.commands import main

main()
