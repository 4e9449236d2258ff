"""`python -m turnstate.cli`: the `turnstate` command."""

from turnstate.cli import main

main()
