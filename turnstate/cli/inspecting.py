"""The commands that read what runs left: `show`, `events`, `export`, `report`, `diagrams` and `coverage`. Each
calls a function of turnstate.reports that a library user can call too, and prints what it returns."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from turnstate.cli.common import fail, json_option, load_or_exit

DIAGRAMS = Path("diagrams")  # the repository's committed diagrams, from its root


@click.command()
@click.argument("run_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--step", required=True, type=click.IntRange(min=1), help="the step to print")
@json_option("the request the step sent, as its readable messages (no other part of the step)")
def show(run_dir: Path, step: int, as_json: bool) -> None:
    """Print step N of RUN_DIR as a person reads it: the run's model and request settings, the
    compaction and summary calls made before its request, what was dropped or compacted since the
    previous step, the messages it sent (with their line breaks), and the reply."""
    from turnstate.reports.page import ReportError
    from turnstate.reports.step import step_messages, step_text

    try:
        if as_json:
            click.echo(json.dumps(step_messages(run_dir, step), indent=2, ensure_ascii=False))
        else:
            click.echo(step_text(run_dir, step))
    except ReportError as error:
        fail(str(error))


@click.command()
@click.argument("run_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--otlp",
    "otlp_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="write the run's spans to FILE as OTLP/JSON, which OpenTelemetry collectors and backends read",
)
@click.option(
    "--content",
    is_flag=True,
    help="put the messages in the spans too (each turn's inputs, each reply, tool arguments and results), "
    "redacted as the run's records are",
)
@click.option(
    "--inspect",
    "inspect_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="write the run to FILE (*.eval or *.json) as an Inspect evaluation log, which `inspect view` opens: "
    "its messages, each provider call with the request it sent, its scores (needs the inspect extra)",
)
def export(run_dir: Path, otlp_file: Path | None, content: bool, inspect_file: Path | None) -> None:
    """Write RUN_DIR to files other tools read: its OpenTelemetry trace (--otlp: a span per run, per
    provider call and per tool execution, in the GenAI semantic conventions, docs/traces.md, as a live
    trace of the run sends them) and its Inspect evaluation log (--inspect), redacted as its records are."""
    from turnstate.durable.traces import TraceError, export_otlp
    from turnstate.reports.inspect_log import InspectExportError, export_inspect

    if otlp_file is None and inspect_file is None:
        fail("export writes nothing without a file; fix: pass --otlp FILE, --inspect FILE, or both")
    if content and otlp_file is None:
        fail("--content puts messages in the spans of --otlp; fix: pass --otlp FILE with it (an Inspect log has them)")
    try:
        if otlp_file is not None:
            count = export_otlp(run_dir, otlp_file, content=content)
            click.echo(f"wrote {count} spans to {otlp_file}")
        if inspect_file is not None:
            count = export_inspect(run_dir, inspect_file)
            click.echo(f"wrote an Inspect log of {count} events to {inspect_file}")
    except (TraceError, InspectExportError) as error:
        fail(str(error))


@click.command()
@click.argument("run_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--check",
    is_flag=True,
    help="verify the log instead of printing it: exit 1 naming each problem's line, else print a one-line summary",
)
def events(run_dir: Path, check: bool) -> None:
    """Print RUN_DIR's normalized event log (events.jsonl) as a person reads it, or, with --check,
    verify it: each tool call answered once by a result with its id, causal order, rejected attempts
    never accepted history, approvals and refusals visible."""
    from turnstate.reports.events import event_log
    from turnstate.reports.page import ReportError

    try:
        log = event_log(run_dir, check=check)
    except ReportError as error:
        fail(str(error))
    for note in log.notes:
        click.echo(f"warning: {note}", err=True)
    if log.text:
        click.echo(log.text)
    for problem in log.problems:
        click.echo(problem, err=True)
    if log.failure is not None:
        fail(log.failure)
    if log.summary is not None:
        click.echo(log.summary)


@click.command()
@click.argument("folder", type=click.Path(file_okay=False, path_type=Path))
def report(folder: Path) -> None:
    """Write FOLDER/report.html and print its path: one self-contained page (no network, no script)
    for a run folder (tokens per turn, retries, faults, compactions, the run on its machine) or a sweep
    folder (the profiles compared, with their intervals, and each run's own page)."""
    from turnstate.reports.folder import write_report
    from turnstate.reports.page import ReportError

    try:
        click.echo(write_report(folder))
    except ReportError as error:
        fail(str(error))


@click.command()
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help=f"where to write (default: {DIAGRAMS}/; with --profile the current folder; with --run the run's folder)",
)
@click.option("--check", is_flag=True, help="exit 1 naming every committed DOT that differs from what the tables draw")
@click.option(
    "--profile",
    type=click.Path(dir_okay=False, path_type=Path),
    help="draw only the machine PROFILE assembles (its strategy with its compaction)",
)
@click.option(
    "--run",
    "run_dir",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    help="draw what a run could take, each transition with its count",
)
def diagrams(out_dir: Path | None, check: bool, profile: Path | None, run_dir: Path | None) -> None:
    """Render every machine configuration, and the full machine of a strategy that has several, from
    its tables to OUT/<name>.dot and .svg."""
    import graphviz

    from turnstate.machine import diagrams as drawing
    from turnstate.reports import diagrams as pictures
    from turnstate.reports.page import ReportError

    if sum(option is not None and option is not False for option in (check, profile, run_dir)) > 1:
        raise click.UsageError("--check, --profile and --run each draw something else: pass one of them")
    try:
        if check:
            stale = pictures.stale_diagrams(out_dir or DIAGRAMS)
            for line in stale:
                click.echo(line, err=True)
            sys.exit(1 if stale else 0)
        elif profile is not None:
            loaded = load_or_exit(profile)
            name, machines = pictures.profile_configuration(
                loaded.runtime.strategy, loaded.compaction().kind, str(profile)
            )
            _, svg = drawing.write(name, machines, out_dir or Path("."))
            click.echo(f"wrote {svg}")
        elif run_dir is not None:
            written, warnings = pictures.draw_run(run_dir, out_dir or run_dir)
            for warning in warnings:
                click.echo(f"warning: {warning}", err=True)
            for svg in written:
                click.echo(f"wrote {svg}")
        else:
            for dot, svg in pictures.write_all(out_dir or DIAGRAMS):
                click.echo(f"wrote {dot} and {svg}")
    except ReportError as error:
        fail(str(error))
    except graphviz.ExecutableNotFound:
        fail("Graphviz's `dot` is not installed (apt-get install graphviz); the .dot files were written")
    except OSError as error:
        fail(f"cannot write {error.filename} ({error.strerror}); fix: pass a folder you can write to")


@click.command()
@click.option(
    "--tests",
    "tests_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help=f"the map a whole-suite test run writes  [default: the one in {DIAGRAMS}/]",
)
def coverage(tests_path: Path | None) -> None:
    """Print every transition with the tests that assert what it does (from the last whole-suite run)."""
    from turnstate.machine import coverage_map as gate
    from turnstate.reports.diagrams import TESTS_MAP, read_tests_map
    from turnstate.reports.page import ReportError
    from turnstate.strategies import MACHINES

    tests_path = tests_path or DIAGRAMS / TESTS_MAP
    if not tests_path.exists():
        fail(f"no {tests_path}: run the whole test suite from the repository root (it writes it), or pass --tests")
    try:
        committed = read_tests_map(tests_path)
    except ReportError as error:
        fail(str(error))
    for line in gate.table(MACHINES, committed):
        click.echo(line)
