"""`prune`: the retention of the provider state a run's checkpoints may hold."""

from __future__ import annotations

import json
import re
import shutil
from datetime import timedelta
from pathlib import Path

import click

from turnstate.cli.common import fail, json_option

DURATION = re.compile(r"(\d+)([smhd])")
DURATION_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def _duration(context: click.Context, parameter: click.Parameter, value: str) -> timedelta:
    """A time like 30d, 12h, 90m or 3600s."""
    matched = DURATION.fullmatch(value.strip())
    if matched is None or int(matched[1]) == 0:
        raise click.BadParameter(f"{value!r} is not a time; give a positive number and a unit: 30d, 12h, 90m or 3600s")
    return timedelta(**{DURATION_UNITS[matched[2]]: int(matched[1])})


def _spoken(time: timedelta) -> str:
    """A time as --older-than takes it, in words: 30 days, 12 hours, 90 minutes, 3600 seconds."""
    seconds = int(time.total_seconds())
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds % size == 0:
            count = seconds // size
            return f"{count} {unit}{'s' * (count != 1)}"
    return f"{seconds} second{'s' * (seconds != 1)}"


@click.command()
@click.argument("runs_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--older-than",
    required=True,
    callback=_duration,
    help="delete the checkpoints of runs whose last checkpoint is older than this: 30d, 12h, 90m, 3600s",
)
@json_option("the files deleted")
def prune(runs_dir: Path, older_than: timedelta, as_json: bool) -> None:
    """Delete the checkpoints of the runs in RUNS_DIR whose last checkpoint is older than --older-than:
    the retention of the provider state they may hold. A run's checkpoints.sqlite3 (and its -wal and
    -shm files), or its rows in the PostgreSQL database its checkpoints.json names (the password from
    TURNSTATE_CHECKPOINTS when it names that database, else PGPASSWORD or ~/.pgpass). The runs' other
    records stay; a pruned run can no longer be resumed. A run another process is writing is left
    alone. A local run's embedded provider service (its keys and stored conversations) is deleted with
    its checkpoints. A database that cannot be reached is named, and the command exits 1."""
    from turnstate.durable.checkpoints import CheckpointError, prune_runs
    from turnstate.durable.resume import run_id_of
    from turnstate.session.endpoint import local_service_dir

    try:
        pruned = prune_runs(runs_dir, older_than)
    except CheckpointError as error:
        fail(f"{error}; fix: pass the folder runs are written to (--out of `turnstate run`)")
    for run_dir in pruned.run_dirs:
        shutil.rmtree(local_service_dir(run_id_of(run_dir)), ignore_errors=True)  # its embedded provider's keys
    if as_json:
        click.echo(json.dumps({"deleted": pruned.deleted, "problems": pruned.problems}))
    else:
        count = len(pruned.run_dirs)
        click.echo(
            f"deleted the checkpoints of {count} run{'s' * (count != 1)} older than {_spoken(older_than)} in {runs_dir}"
        )
        for deleted in pruned.deleted:
            click.echo(f"  {deleted}")
    if pruned.problems:
        fail("; ".join(pruned.problems))
