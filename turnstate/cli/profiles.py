"""The commands about profiles and what is installed: `validate`, `list` and `schema`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from turnstate.cli.common import complete_profile, json_option


@click.command()
@click.argument(
    "profiles",
    nargs=-1,
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    shell_complete=complete_profile,
)
@json_option("each profile's file, whether it is valid, and its problems (key, problem, fix)")
def validate(profiles: tuple[Path, ...], as_json: bool) -> None:
    """Check PROFILES (paths, or names of shipped profiles), each one even after a bad one; exit 1 if
    any is invalid, naming the file, key path and fix."""
    from turnstate.reports.catalog import profile_check

    checked = [profile_check(given) for given in profiles]
    valid = all(error is None for _, error in checked)
    if as_json:
        click.echo(json.dumps({"valid": valid, "profiles": [result for result, _ in checked]}, indent=2))
    else:
        for result, error in checked:
            if error is None:
                click.echo(f"{result['profile']}: ok")
            else:
                click.echo(str(error), err=True)
    sys.exit(0 if valid else 1)


@click.command("list")
@json_option("the same lists, each entry with its fields")
def list_(as_json: bool) -> None:
    """Show the shipped profiles (each marked with what it needs that is not installed), the
    registered adapters with their review status, the strategies with their compaction kinds, and
    the environments."""
    from turnstate.reports.catalog import catalog

    listed = catalog()
    if as_json:
        click.echo(json.dumps(listed, indent=2))
        return
    sections: dict[str, list[tuple[str, ...]]] = {
        "profiles (turnstate run NAME)": [
            ("name", "adapter", "strategy", "compaction", "endpoint", "needs"),
            *(_profile_row(entry) for entry in listed["profiles"]),
        ],
        "adapters": [
            ("id", "review status", "provider", "strategies"),
            *((a["id"], a["review_status"], a["provider"], ", ".join(a["strategies"])) for a in listed["adapters"]),
        ],
        "strategies": [
            ("name", "compaction kinds"),
            *((s["name"], ", ".join(s["compaction_kinds"])) for s in listed["strategies"]),
        ],
        "environments": [("id",), *((e["id"],) for e in listed["environments"])],
    }
    for title, rows in sections.items():
        click.echo(f"{title}\n" + "\n".join(_columns(rows)) + "\n")


def _profile_row(entry: dict[str, Any]) -> tuple[str, ...]:
    if "error" in entry:
        return (entry["name"], entry["error"], "", "", "", "")
    needs = entry.get("needs", "")
    return (entry["name"], entry["adapter"], entry["strategy"], entry["compaction"], entry["endpoint"], needs)


def _columns(rows: list[tuple[str, ...]]) -> list[str]:
    """Rows as left-aligned columns, indented under a heading; the first row is the header."""
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    return [
        "  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows
    ]


@click.command()
def schema() -> None:
    """Print the profiles' JSON Schema. For an editor: `turnstate schema > profile.schema.json`, then
    `# yaml-language-server: $schema=profile.schema.json` as a profile's first line."""
    from turnstate.session.profile import profile_json_schema

    click.echo(json.dumps(profile_json_schema(), indent=2))
