"""The `turnstate` command line: run, resume, prune, validate, list, schema, show, events, diagrams,
coverage, report, serve.

A profile is named by its path or, from any folder, by the name of a shipped one. Whatever a command
prints for a person has a `--json` twin for scripts where a script needs it (run, validate, list,
show). A bad input is one line on stderr and exit 1, never a traceback; nothing it prints holds a key
or opaque provider state."""

from __future__ import annotations

import errno
import json
import re
import shutil
import signal
import sys
import traceback
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any, NoReturn, get_args

import click
import graphviz
import yaml
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table
from rich.text import Text

from turnstate.durable.accounting import UsageJournalError
from turnstate.durable.artifacts import (
    Redactor,
    StepRecordError,
    TransitionLogError,
    read_transition_log,
    sent_messages,
)
from turnstate.durable.checkpoints import CheckpointError
from turnstate.durable.checkpoints import prune as prune_checkpoints
from turnstate.durable.events import (
    AnyEvent,
    AssistantMessageEvent,
    CheckpointEvent,
    EventLogError,
    Status,
    ToolCallEvent,
    ToolResultEvent,
    UserInputEvent,
    read_events,
)
from turnstate.durable.jsonl import LinkedFileError
from turnstate.durable.layout import (
    CHECKPOINT_FILE,
    EVENTS,
    RUN_META,
    RUNS_ROOT,
    SWEEPS_ROOT,
    TRANSITIONS,
    compaction_name,
    recorded_steps,
    step_name,
)
from turnstate.durable.resume import ResumeError, audit_run, number_spans, run_id_of, run_meta
from turnstate.durable.side_effects import JournalError
from turnstate.environments import EnvironmentFault
from turnstate.machine.engine import MachineSpec, Row
from turnstate.reports.folder import ReportError, write_report
from turnstate.reports.run import (
    configuration_for,
    level_actions,
    nested,
    ran_configuration,
    ran_strategies,
    run_redactor,
    write_run_report,
)
from turnstate.session.endpoint import RunSetupError, local_service_dir
from turnstate.session.profile import (
    DEFAULT_PROFILE,
    MIN_CONTEXT_TOKENS,
    ClientConfig,
    CompactionConfig,
    Profile,
    ProfileError,
    load_profile,
    profile_json_schema,
    resolve_profile,
    shipped_profiles,
)
from turnstate.session.run_profile import run_profile, switched_profile
from turnstate.session.runner import Runner, RunResult, StepProgress, freeze_startup_objects, interrupt_once

console = Console()

EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a run stopped by Ctrl-C


@click.group()
@click.version_option(package_name="turnstate")
def main() -> None:
    """Carry an LLM agent's runtime state across model turns, as explicit state machines."""


def _json_option(what: str) -> Any:
    return click.option("--json", "as_json", is_flag=True, help=f"print one JSON document for scripts: {what}")


@main.command()
@click.argument("profile", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--out",
    "out_dir",
    default=RUNS_ROOT,
    type=click.Path(file_okay=False, path_type=Path),
    show_default=True,
    help="where runs/<run-id>/ is written",
)
@_json_option(f"{RUN_META} as the run wrote it, with the run folder, instead of the progress bar and table")
def run(profile: Path | None, out_dir: Path, as_json: bool) -> None:
    """Run an agent from PROFILE: a profile's path, or the name of a shipped one (`turnstate list`
    shows them). Default: local-manual-rolling."""
    runner: Runner | None = None
    try:
        with _sigterm_as_interrupt():
            loaded = _load_or_exit(profile or DEFAULT_PROFILE)
            freeze_startup_objects()
            try:
                out_dir.mkdir(parents=True, exist_ok=True)
            except OSError as error:
                _fail(
                    f"--out {out_dir}: cannot create the folder ({error.strerror}); fix: pass a folder you can write to, not one under a file"
                )
            runner = Runner(loaded, out_dir)
            result = _play(runner, show_progress=not as_json)
    except KeyboardInterrupt:
        click.echo(f"interrupted; {_what_was_recorded(runner)}", err=True)
        sys.exit(EXIT_INTERRUPTED)
    _report(result, as_json)


@main.command()
@click.argument("run_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--profile",
    type=click.Path(dir_okay=False, path_type=Path),
    help="switch to another adapter, model or strategy (a profile's path or a shipped name) for the same game",
)
@click.option(
    "--from-records",
    is_flag=True,
    help="when the checkpoint store was damaged, go on from the run's records instead: the accepted state "
    f"rebuilt from {EVENTS}, without the provider's opaque state (the damaged store is set aside)",
)
@_json_option(f"{RUN_META} as the run wrote it, with the run folder, instead of the progress bar and table")
def resume(run_dir: Path, profile: Path | None, from_records: bool, as_json: bool) -> None:
    """Go on with the run in RUN_DIR from its last checkpoint, after a kill, a crash or Ctrl-C: the
    accepted state, the ledger and the game are rebuilt, nothing accepted is lost or performed twice,
    and the run writes on in the same folder (run_meta.json lists each resume)."""
    runner: Runner | None = None
    try:
        with _sigterm_as_interrupt():
            try:
                loaded = run_profile(run_dir)
                if profile is not None:
                    loaded, note = switched_profile(loaded, _load_or_exit(profile))
                    if note is not None:
                        click.echo(f"note: {note}", err=True)
            except ResumeError as error:
                _fail(str(error))
            freeze_startup_objects()
            runner = Runner(loaded, run_dir.parent)
            go_on = partial(runner.resume, run_dir, switch=profile is not None, from_records=from_records)
            result = _play(runner, not as_json, go_on)
    except KeyboardInterrupt:
        click.echo(f"interrupted; {_what_was_recorded(runner)}", err=True)
        sys.exit(EXIT_INTERRUPTED)
    for note in _resume_notes((run_meta(run_dir).get("resumes") or [{}])[-1]):
        click.echo(f"note: {note}", err=True)
    _report(result, as_json)


def _resume_notes(resumed: Mapping[str, Any]) -> list[str]:
    """What a resume did that the run would not have done uninterrupted, from its entry in run_meta's
    `resumes`: lines it cut, and an accepted state it did not restore (with what that left out)."""
    notes = []
    recovered = resumed.get("from_records")
    if isinstance(recovered, dict):
        notes.append(
            f"went on from the run's records past a damaged checkpoint store ({'; '.join(recovered['damage'])}); "
            f"it was set aside as {recovered['set_aside']}"
        )
    if resumed.get("torn_lines"):
        notes.append(f"cut a torn last line (a kill mid-write) off {', '.join(resumed['torn_lines'])}")
    continuation = resumed.get("continuation")
    if continuation == "rebuilt from the projection":
        why = "a switch drops" if resumed.get("switched") else "with TURNSTATE_CHECKPOINT_KEY=off the run does not keep"
        note = f"the accepted state was rebuilt from the conversation's plain texts: {why} the provider's opaque state"
        if resumed.get("from_summary"):
            note += f"; it starts from the run's summary {resumed['from_summary']} ({compaction_name(resumed['from_summary'])})"
        if resumed.get("dropped_turns"):
            note += (
                f"; the {resumed['dropped_turns']} oldest turns did not fit the context budget and were left out "
                "(the model no longer sees them)"
            )
        notes.append(note)
    elif isinstance(continuation, str) and continuation.startswith("none"):
        notes.append("no turn had been accepted: the run started again from its first step")
    return notes


def _report(result: RunResult, as_json: bool) -> NoReturn:
    """A run's ending as `run` and `resume` print it (with its report's path), and their exit status."""
    page = _run_report(result)
    if as_json:
        click.echo(json.dumps(_run_document(result)))
    else:
        console.print(_summary(result))
        if result.server_message is not None:
            click.echo(f"the server said: {result.server_message}", err=True)
        if page is not None:
            click.echo(f"report: {page}")
    sys.exit(0 if result.outcome != "failed_closed" else 1)


def _run_report(result: RunResult) -> Path | None:
    """The run's report.html, written as the run ends; a report that cannot be written is a warning,
    never the run's failure."""
    if result.artifacts is None:
        return None
    try:
        return write_run_report(result.artifacts)
    except ReportError as error:
        click.echo(f"warning: no report: {error}", err=True)
        return None


def _run_document(result: RunResult) -> dict[str, Any]:
    """What `run --json` prints: the run's own record (outcome, failure, totals, usage, settings),
    so a script reads what run_meta.json holds, already redacted, and the run folder it is in."""
    if result.artifacts is None:  # only a session opened without an out_dir writes none
        _fail("the run wrote no run folder")
    meta = result.artifacts / RUN_META
    try:
        recorded = json.loads(meta.read_bytes())
    except (OSError, ValueError) as error:
        _fail(f"{meta}: cannot read the run's record back ({getattr(error, 'strerror', None) or 'not JSON'})")
    return {"run_folder": str(result.artifacts), **recorded}


_DISK_FULL = (errno.ENOSPC, errno.EDQUOT)
_NOT_WRITABLE = (errno.EROFS, errno.EACCES, errno.EPERM)


def _unwritable(error: OSError, *, started: bool) -> str | None:
    """A run's records that could not be written (a full disk, a read-only folder) as one line with
    the fix; None for any other OSError, which is a crash."""
    if error.errno not in (*_DISK_FULL, *_NOT_WRITABLE):
        return None
    fix = "free space on its disk" if error.errno in _DISK_FULL else "make the folder writable, or pass another --out"
    then = "`turnstate resume` the run (nothing accepted is lost)" if started else "run it again"
    where = f" {error.filename}" if error.filename else ""
    return f"cannot write{where} ({error.strerror}); fix: {fix}, then {then}"


def _what_was_recorded(runner: Runner | None) -> str:
    """Where the run's record is, as the disk has it now: a line must not claim a file that is not there."""
    if runner is None or runner.run_dir is None:
        return "no run had started, so nothing was recorded"
    meta = runner.run_dir / RUN_META
    return f"the run is recorded in {meta}" if meta.is_file() else f"{runner.run_dir} holds no {RUN_META}"


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (what `timeout`, `docker stop` and CI cancellation send) stops a run as Ctrl-C does, so
    the runner still writes run_meta.json (outcome interrupted) instead of the process just dying."""

    previous = signal.signal(signal.SIGTERM, interrupt_once)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _play(runner: Runner, show_progress: bool, play: Callable[[], RunResult] | None = None) -> RunResult:
    """The run (`play`: the runner's new run unless given), with a progress bar while it lasts if
    `show_progress`. Whatever it shows of the run (the progress, an error, a crash's traceback) has
    passed the run's redaction, as its artifacts have."""
    play = play or runner.run
    try:
        if not show_progress:
            return play()
        with _progress_bar(runner):
            return play()
    except (
        RunSetupError,
        ResumeError,
        CheckpointError,
        EventLogError,
        JournalError,
        UsageJournalError,
        LinkedFileError,
    ) as error:
        _fail(runner.redactor.text(str(error)))
    except EnvironmentFault as error:  # the game's own code failed: its file is named, nothing accepted is lost
        _fail(runner.redactor.text(f"{error}; {_what_was_recorded(runner)}"))
    except OSError as error:
        unwritable = _unwritable(error, started=runner.run_dir is not None and runner.run_dir.is_dir())
        if unwritable is None:
            raise
        _fail(runner.redactor.text(f"{unwritable}; {_what_was_recorded(runner)}"))
    except Exception as error:  # a crash is a bug: its traceback is shown, redacted
        click.echo(runner.redactor.text("".join(traceback.format_exception(error))), err=True)
        _fail(f"the run crashed ({type(error).__name__}); {_what_was_recorded(runner)}")


@contextmanager
def _progress_bar(runner: Runner) -> Iterator[None]:
    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[status]}", markup=False),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )
    with progress:
        task = progress.add_task(runner.profile.id, total=runner.profile.agent.max_actions, status="")

        def on_step(step: StepProgress) -> None:  # the runner hands the step over redacted
            status = f"level {step.level}/{step.levels}  last {step.action}  failed attempts {step.failed_attempts}"
            progress.update(task, completed=step.step, status=status)

        runner.on_step = on_step
        yield


def _summary(result: RunResult) -> Table:
    table = Table(title=f"run {result.run_id}", show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value", overflow="fold")
    usage = result.usage
    rows = [
        ("outcome", result.outcome + (f" ({result.failure})" if result.failure else "")),
        ("steps (turns played)", str(result.turns)),
        ("accepted actions", str(result.accepted_actions)),
        ("levels won", str(result.levels_won)),
        ("retries (failed attempts)", str(result.failed_attempts)),
        ("tokens in / cached / out", f"{usage.input_tokens} / {usage.cached_input_tokens} / {usage.output_tokens}"),
        ("cost estimate (configured prices)", f"${result.cost:.4f}"),
        ("wall time", f"{result.wall_seconds:.2f}s (provider {result.provider_seconds:.2f}s)"),
        ("run folder", str(result.artifacts)),
    ]
    for what, value in rows:
        table.add_row(what, Text(value))  # as text: "[redacted]" or a provider's brackets are no markup
    return table


@main.command()
@click.argument("profiles", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@_json_option("each profile's file, whether it is valid, and its problems (key, problem, fix)")
def validate(profiles: tuple[Path, ...], as_json: bool) -> None:
    """Check PROFILES (paths, or names of shipped profiles), each one even after a bad one; exit 1 if
    any is invalid, naming the file, key path and fix."""
    checked = [_check_profile(given) for given in profiles]
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


def _check_profile(given: Path) -> tuple[dict[str, Any], ProfileError | None]:
    """One profile's validation: as `validate --json` reports it, and the error, if any."""
    result: dict[str, Any] = {"profile": str(given), "file": None, "valid": True, "problems": []}
    try:
        result["file"] = str(resolve_profile(given))
        load_profile(result["file"])
    except ProfileError as error:
        problems = [{"key": key or None, "problem": problem, "fix": fix} for key, problem, fix in error.problems]
        return result | {"valid": False, "problems": problems}, error
    return result, None


@main.command("list")
@_json_option("the same lists, each entry with its fields")
def list_(as_json: bool) -> None:
    """Show the shipped profiles, the registered adapters with their review status, the strategies
    with their compaction kinds, and the environments."""
    catalog = _catalog()
    if as_json:
        click.echo(json.dumps(catalog, indent=2))
        return
    sections: dict[str, list[tuple[str, ...]]] = {
        "profiles (turnstate run NAME)": [
            ("name", "adapter", "strategy", "compaction", "endpoint"),
            *(_profile_row(entry) for entry in catalog["profiles"]),
        ],
        "adapters": [
            ("id", "review status", "provider", "strategies"),
            *((a["id"], a["review_status"], a["provider"], ", ".join(a["strategies"])) for a in catalog["adapters"]),
        ],
        "strategies": [
            ("name", "compaction kinds"),
            *((s["name"], ", ".join(s["compaction_kinds"])) for s in catalog["strategies"]),
        ],
        "environments": [("id",), *((e["id"],) for e in catalog["environments"])],
    }
    for title, rows in sections.items():
        click.echo(f"{title}\n" + "\n".join(_columns(rows)) + "\n")


def _catalog() -> dict[str, list[dict[str, Any]]]:
    """What `turnstate list` shows, read from where validation reads it: the profiles folder, the
    adapter registry, the strategy records and the environment registry."""
    from turnstate.adapters.registry import ADAPTERS
    from turnstate.environments import environment_ids
    from turnstate.strategies import STRATEGIES

    return {
        "profiles": [_profile_entry(name, path) for name, path in shipped_profiles().items()],
        "adapters": [
            {
                "id": descriptor.adapter_id,
                "review_status": descriptor.review_status,
                "provider": descriptor.provider,
                "api_surface": descriptor.api_surface,
                "version": descriptor.version,
                "strategies": list(descriptor.strategies),
            }
            for descriptor in ADAPTERS.values()
        ],
        "strategies": [
            {"name": name, "compaction_kinds": list(strategy.specs), "compaction": list(strategy.compaction)}
            for name, strategy in STRATEGIES.items()
        ],
        "environments": [{"id": name} for name in environment_ids()],
    }


def _profile_entry(name: str, path: Path) -> dict[str, Any]:
    """A shipped profile as `list` shows it, its settings read from its YAML as written (compaction
    is its runtime.compaction.strategy), not validated: validation imports every adapter's SDK,
    seconds for a listing, and the suite validates every shipped profile."""
    entry: dict[str, Any] = {"name": name, "path": str(path)}
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, yaml.YAMLError) as error:
        return entry | {"error": f"cannot read it ({type(error).__name__})"}
    compaction = nested(data, "runtime", "compaction", "strategy")
    base_url = nested(data, "client", "base_url")
    return entry | {
        "adapter": str(nested(data, "runtime", "adapter_id")),
        "strategy": str(nested(data, "runtime", "strategy")),
        "compaction": str(compaction if compaction is not None else CompactionConfig().strategy),
        "endpoint": str(base_url if base_url is not None else ClientConfig().base_url),
    }


def _profile_row(entry: dict[str, Any]) -> tuple[str, ...]:
    if "error" in entry:
        return (entry["name"], entry["error"], "", "", "")
    return (entry["name"], entry["adapter"], entry["strategy"], entry["compaction"], entry["endpoint"])


def _columns(rows: list[tuple[str, ...]]) -> list[str]:
    """Rows as left-aligned columns, indented under a heading; the first row is the header."""
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    return [
        "  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows
    ]


@main.command()
def schema() -> None:
    """Print the profiles' JSON Schema. For an editor: `turnstate schema > profile.schema.json`, then
    `# yaml-language-server: $schema=profile.schema.json` as a profile's first line."""
    click.echo(json.dumps(profile_json_schema(), indent=2))


DIAGRAMS = Path("diagrams")


@main.command()
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="where to write (default: diagrams/; with --profile the current folder; with --run the run's folder)",
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
    from turnstate.machine import diagrams as drawing

    if sum(option is not None and option is not False for option in (check, profile, run_dir)) > 1:
        raise click.UsageError("--check, --profile and --run each draw something else: pass one of them")
    try:
        if check:
            _check_diagrams(out_dir or DIAGRAMS)
        elif profile is not None:
            name, machines = _profile_configuration(profile)
            _, svg = drawing.write(name, machines, out_dir or Path("."))
            click.echo(f"wrote {svg}")
        elif run_dir is not None:
            _draw_run(run_dir, out_dir or run_dir)
        else:
            directory = out_dir or DIAGRAMS
            tests = _committed_tests(directory)
            for name, machines in _pictures().items():
                dot, svg = drawing.write(name, machines, directory, tests=tests)
                click.echo(f"wrote {dot} and {svg}")
    except graphviz.ExecutableNotFound:
        _fail("Graphviz's `dot` is not installed (apt-get install graphviz); the .dot files were written")
    except OSError as error:
        _fail(f"cannot write {error.filename} ({error.strerror}); fix: pass a folder you can write to")


def _pictures() -> dict[str, dict[str, MachineSpec]]:
    """What `turnstate diagrams` draws: each configuration alone, and every configuration of a
    strategy that has several at once (its full machine, named after the strategy)."""
    from turnstate.strategies import STRATEGIES, configuration_name

    pictures: dict[str, dict[str, MachineSpec]] = {}
    for strategy in STRATEGIES.values():
        configurations = {configuration_name(strategy, kind): spec for kind, spec in strategy.specs.items()}
        pictures |= {name: {name: spec} for name, spec in configurations.items()}
        if len(configurations) > 1:
            pictures[strategy.name] = configurations
    return pictures


def _committed_tests(directory: Path) -> dict[Row, list[str]] | None:
    """The tests that assert each row, from the map a whole-suite run writes beside the diagrams (None
    without one). A row is looked up under the label of the configuration that first holds it, as
    the map is written."""
    from turnstate.machine import coverage as gate
    from turnstate.strategies import MACHINES

    path = directory / "transition_tests.json"
    if not path.exists():
        return None
    try:
        committed = gate.read_tests_by_row(path)
    except (OSError, ValueError) as error:
        _fail(f"cannot read {path} ({error}); fix: run the whole test suite to write it again")
    return gate.tests_of_rows(MACHINES, committed)


def _check_diagrams(directory: Path) -> NoReturn:
    from turnstate.machine import diagrams as drawing

    committed = sorted(directory.glob("*.dot"))
    if not committed:
        _fail(f"no diagrams in {directory}; run from the repository root or pass --out")
    pictures = _pictures()
    stale = drawing.stale(pictures, directory, _committed_tests(directory))
    for name in stale:
        click.echo(f"stale diagram: {directory / (name + '.dot')} (run `turnstate diagrams` and commit it)", err=True)
    orphans = [path for path in committed if path.stem not in pictures]
    for path in orphans:
        click.echo(f"stale diagram: {path} (no table draws it any more; delete it)", err=True)
    sys.exit(1 if stale or orphans else 0)


def _profile_configuration(path: Path) -> tuple[str, dict[str, MachineSpec]]:
    """The configuration PROFILE runs: its strategy's machine as its compaction assembles it."""
    from turnstate.strategies import STRATEGIES, configuration_name

    loaded = _load_or_exit(path)
    strategy = STRATEGIES[loaded.runtime.strategy]
    kind = loaded.compaction().kind
    if kind not in strategy.specs:
        _fail(f"{path}: {strategy.name} has no machine for compaction {kind} (it has: {', '.join(strategy.specs)})")
    name = configuration_name(strategy, kind)
    return name, {name: strategy.specs[kind]}


def _draw_run(run_dir: Path, out_dir: Path) -> None:
    """Draw, into `out_dir`, the configuration the run used (its run_meta.json says which) with each
    transition's count from its transitions.jsonl. A run killed before it wrote run_meta.json is drawn
    on every configuration of its strategy, with a warning."""
    from turnstate.machine import diagrams as drawing
    from turnstate.strategies import STRATEGIES

    used = _run_configuration(run_dir)
    meta = _optional_json(run_dir / RUN_META) if used else None
    declared = ran_strategies(meta) if used else list(STRATEGIES)
    try:
        records, warnings = read_transition_log(run_dir / TRANSITIONS, declared=declared)
    except TransitionLogError as error:
        _fail(str(error))
    for warning in warnings:
        click.echo(f"warning: {warning}", err=True)
    for machine, counts in drawing.run_counts(records).items():
        name, machines = configuration_for(meta, machine) if used else _every_configuration(run_dir, machine)
        drawn = {key for spec in machines.values() for row in spec.rows() for key in spec.log_keys(row)}
        undrawn = sum(fired for key, fired in counts.items() if key not in drawn)
        if undrawn:
            click.echo(
                f"warning: {undrawn} transitions of {machine} are not rows of its current table "
                "(a run of another version?); they are not drawn",
                err=True,
            )
        _, svg = drawing.write(name, machines, out_dir, counts)
        click.echo(f"wrote {svg}")


def _run_configuration(run_dir: Path) -> tuple[str, dict[str, MachineSpec]] | None:
    """The configuration named by the run's run_meta.json (`strategy`, `runtime.compaction.kind`), or
    None if the run wrote none."""
    from turnstate.strategies import STRATEGIES

    path = run_dir / RUN_META
    fix = "fix: pass a run folder that `turnstate run` wrote"
    try:
        meta = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:
        _fail(f"{path}: not a run's metadata ({getattr(error, 'strerror', None) or 'not JSON'}); {fix}")
    ran = ran_configuration(meta)
    if ran is None:
        known = ", ".join(f"{name} ({', '.join(record.specs)})" for name, record in STRATEGIES.items())
        _fail(f"{path}: names no strategy and runtime.compaction.kind turnstate draws (it draws: {known}); {fix}")
    return ran


def _every_configuration(run_dir: Path, machine: str) -> tuple[str, dict[str, MachineSpec]]:
    """For a run without run_meta.json: its strategy's one configuration, or its full machine, with a
    warning that the picture holds more than the run could take."""
    machines = _pictures()[machine]  # a strategy's one configuration, or its full machine, has its name
    if len(machines) > 1:
        click.echo(
            f"warning: no {run_dir / RUN_META} (the run was killed before writing it?), so which "
            f"compaction it ran is unknown: drawing every configuration of {machine}",
            err=True,
        )
    return machine, machines


@main.command()
@click.argument("folder", type=click.Path(file_okay=False, path_type=Path))
def report(folder: Path) -> None:
    """Write FOLDER/report.html and print its path: one self-contained page (no network, no script)
    for a run folder (tokens per turn, retries, faults, compactions, the run on its machine) or a sweep
    folder (the profiles compared, with their intervals, and each run's own page)."""
    try:
        click.echo(write_report(folder))
    except ReportError as error:
        _fail(str(error))


@main.command()
@click.argument("sweep_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--out",
    "sweep_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="the sweep's folder  [default: sweeps/<the sweep's id>]",
)
@click.option("--in-flight", type=click.IntRange(min=1), help="runs at once (default: the sweep's budget)")
@click.option(
    "--ray",
    "ray_address",
    metavar="ADDRESS",
    help="run each run as a Ray task on the cluster at ADDRESS (HOST:PORT, auto); 'local' starts one here",
)
def sweep(sweep_file: Path, sweep_dir: Path | None, in_flight: int | None, ray_address: str | None) -> None:
    """Run SWEEP_FILE's profiles x environments x seeds x repetitions, each an ordinary run with its own
    folder and checkpoints, and write results.csv, results.jsonl, summary.json and report.html. Run it
    again on the same folder to go on: ended runs are skipped, unfinished ones resume."""
    from turnstate.sweeps.engines import Engine, PoolEngine, run_sweep
    from turnstate.sweeps.plan import SweepError, load_sweep

    try:
        plan = load_sweep(sweep_file)
    except SweepError as error:
        _fail(str(error))
    folder = sweep_dir or SWEEPS_ROOT / plan.sweep.id
    engine: Engine
    if ray_address is None and plan.sweep.engine == "pool":
        engine = PoolEngine(plan.adapter_ids)
    else:
        from turnstate.sweeps.ray_engine import DEFAULT_ADDRESS, RayEngine, RayEngineError

        try:
            engine = RayEngine(
                ray_address or plan.sweep.ray_address or DEFAULT_ADDRESS, in_flight or plan.sweep.budget.in_flight
            )
        except RayEngineError as error:
            _fail(str(error))

    def ended(row: Mapping[str, Any]) -> None:
        click.echo(f"{row['key']}: {row['outcome']} ({row['levels']} levels, {row['turns']} turns, ${row['cost']:.4f})")

    click.echo(f"sweep {plan.sweep.id}: {len(plan.runs)} runs into {folder}")
    try:
        run_sweep(plan, folder, engine, in_flight=in_flight, on_row=ended)
    except KeyboardInterrupt:
        click.echo(f"interrupted; run it again to go on: turnstate sweep {sweep_file} --out {folder}", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except SweepError as error:
        _fail(str(error))
    except OSError as error:
        _fail(f"{folder}: cannot write the sweep's folder ({error.strerror})")
    try:
        click.echo(f"report: {write_report(folder)}")
    except ReportError as error:
        click.echo(f"warning: no report: {error}", err=True)


@main.command()
@click.option("--port", default=0, show_default=True, type=click.IntRange(0, 65535), help="0 picks a free port")
@click.option(
    "--context-window",
    type=click.IntRange(min=MIN_CONTEXT_TOKENS),
    default=None,
    help="tokens; default: the provider's default",
)
def serve(port: int, context_window: int | None) -> None:
    """Serve the embedded local provider on 127.0.0.1 until interrupted."""
    from turnstate.local_provider.server import DEFAULT_CONTEXT_WINDOW, LocalProvider

    window = context_window if context_window is not None else DEFAULT_CONTEXT_WINDOW
    try:
        provider = LocalProvider(port=port, context_window=window).start()
    except OSError as error:
        _fail(
            f"--port {port}: cannot listen on 127.0.0.1:{port} ({error.strerror}); fix: pick another port, or 0 for a free one"
        )
    click.echo(f"local provider on {provider.base_url} (OpenAI-compatible base_url: {provider.openai_base_url})")
    provider.serve_until_interrupted()


@main.command()
@click.argument("run_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--step", required=True, type=click.IntRange(min=1), help="the step to print")
@_json_option("the request the step sent, as its readable messages (no other part of the step)")
def show(run_dir: Path, step: int, as_json: bool) -> None:
    """Print step N of RUN_DIR as a person reads it: the run's model and request settings, the
    compaction and summary calls made before its request, what was dropped or compacted since the
    previous step, the messages it sent (with their line breaks), and the reply."""
    steps = _recorded_steps(run_dir)
    if step not in steps:
        if not steps:
            _fail(f"{run_dir} holds no step records; fix: pass a run folder that `turnstate run` wrote")
        _fail(f"{run_dir} recorded no step {step}; its steps are {number_spans(steps)}; fix: pass one of them")
    meta = _optional_json(run_dir / RUN_META)
    redactor = run_redactor(meta)
    try:
        messages = redactor.scrub(sent_messages(run_dir, step))
    except StepRecordError as error:
        _fail(str(error))
    if as_json:
        click.echo(json.dumps(messages, indent=2, ensure_ascii=False))
        return
    path = run_dir / step_name(step)
    record = redactor.scrub(_optional_json(path))
    if not isinstance(record, dict):
        _fail(f"{path}: not a step record (not a JSON object); fix: restore the run folder as `turnstate run` wrote it")
    delta = record["request"]  # sent_messages checked it
    lines = [f"step {step} of {run_dir} (its steps: {number_spans(steps)})", *_settings_lines(redactor.scrub(meta))]
    lines += _calls_lines("compaction and summary calls before the request", record.get("compaction_calls"))
    dropped: list[Any] = []
    if delta["after_step"] is not None:
        dropped = redactor.scrub(sent_messages(run_dir, delta["after_step"]))[1 : 1 + delta["dropped"]]
        lines += _since_lines(run_dir, record, dropped, messages[len(messages) - len(delta["added"]) :], redactor)
    elif step > 1:
        rebuilt = "its request does not carry over (a new system prompt, or a rebuilt history)"
        lines += ["", f"since step {step - 1}: {rebuilt}, so every message below is new"]
    new_from = len(messages) - len(delta["added"])  # the added ones, their events resolved, end the request
    lines += ["", f"request sent: {len(messages)} messages"]
    for index, message in enumerate(messages):
        mark = "" if index < new_from else " · again" if message in dropped else " · new"
        lines += [f"[{index + 1}] {message.get('role', '?')}{mark}", *_indented(message.get("content"))]
    lines += _reply_lines(record)
    click.echo(_printable("\n".join(lines)))


def _recorded_steps(run_dir: Path) -> list[int]:
    try:
        return recorded_steps(run_dir)
    except OSError as error:
        _fail(
            f"{run_dir}: cannot read the folder ({error.strerror}); fix: pass a run folder that `turnstate run` wrote"
        )


def _optional_json(path: Path) -> Any:
    """The JSON in `path`, or None if it is missing or not JSON: what `show` prints around a step is
    read as far as it can be, and a record it cannot read is left out rather than failing the step."""
    try:
        return json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None


def _settings_lines(meta: Any) -> list[str]:
    if not isinstance(meta, dict):
        return [f"settings: unknown (no readable {RUN_META}: a run killed before it wrote one?)"]
    request = nested(meta, "settings", "request")
    request = request if isinstance(request, dict) else {}
    return [
        f"adapter {_inline(meta.get('adapter_id'))} (review status {_inline(meta.get('review_status'))}), "
        f"strategy {_inline(meta.get('strategy'))}",
        f"compaction: {_pairs(nested(meta, 'runtime', 'compaction'))}",
        f"request: {_pairs({key: value for key, value in request.items() if key != 'options'})}",
        f"request options: {_inline(request.get('options', {}))}",
        *([f"scorecard: {card}"] if (card := level_actions(meta.get("environment_scorecard"))) else []),
    ]


def _calls_lines(title: str, calls: Any) -> list[str]:
    """A step's `retries` or `compaction_calls`, one call a line, each with its reply's text below it."""
    if not isinstance(calls, list) or not calls:
        return []
    lines = ["", f"{title}: {len(calls)}"]
    for number, call in enumerate(calls, 1):
        call = call if isinstance(call, dict) else {}
        about = [str(call.get("outcome"))]
        if call.get("problem"):
            about[0] += f": {call['problem']}"
        if call.get("summary_input") is not None:
            about.append(f"summary input {_pairs(call['summary_input'])}")
        about.append(_tokens(call.get("usage")))
        if call.get("waited_seconds"):
            about.append(f"then waited {call['waited_seconds']}s")
        lines.append(f"  {number}. " + " · ".join(about))
        if call.get("diagnostics"):
            lines.append(f"     diagnostics {_inline(call['diagnostics'])}")
        if call.get("response_text"):
            lines += ["     reply:", *_indented(call["response_text"], "       ")]
    return lines


def _since_lines(
    run_dir: Path, record: dict[str, Any], dropped: list[Any], added: list[Any], redactor: Redactor
) -> list[str]:
    """What changed since the step this one's request follows: the messages dropped from its request
    (their first lines), how many were added, the accepted history's size, and the compaction the
    step committed, with the summary a harness summary installed in its place."""
    delta = record["request"]
    lines = ["", f"since step {delta['after_step']}:"]
    if dropped:
        lines.append(f"  dropped the {len(dropped)} oldest messages of its request:")
        lines += [f"    - {_first_line(message)}" for message in dropped]
    else:
        lines.append("  dropped no message of its request")
    again = sum(message in dropped for message in added)
    resent = f", {again} of them dropped above and sent again (marked again)" if again else ""
    lines.append(f"  added {len(added)} messages (marked new below){resent}")
    history = record.get("history")
    if isinstance(history, dict):
        before, after = history.get("items_before"), history.get("items_after")
        lines.append(f"  accepted history: {before} items before the turn, {after} after its commit")
    compaction = record.get("compaction")
    if isinstance(compaction, dict):
        facts = {key: value for key, value in compaction.items() if key not in ("usage", "cost_estimate")}
        cost = f"; its calls' {_tokens(compaction['usage'], compaction.get('cost_estimate'))}"
        lines.append(f"  compaction committed: {_pairs(facts)}{cost if compaction.get('usage') else ''}")
    continuation = record.get("continuation")
    if isinstance(continuation, dict):
        number = continuation.get("compaction")
        name = compaction_name(number) if isinstance(number, int) else None
        summary = redactor.scrub(_optional_json(run_dir / name)) if name else None
        if isinstance(summary, dict):
            lines.append(f"  harness summary {name}: {_pairs({key: summary.get(key) for key in _SUMMARY_FACTS})}")
        lines += ["  summary installed (its bridge is a new message below):", *_indented(continuation.get("summary"))]
    return lines


_SUMMARY_FACTS = (
    "lane",
    "completed_context_tokens",
    "summarized_turns",
    "excluded_turns",
    "items_before",
    "items_after",
    "overflow_recoveries",
)
"""What `show` tells of the harness summary a step installed, from its compaction_NNN.json."""


def _reply_lines(record: dict[str, Any]) -> list[str]:
    lines = _calls_lines("action requests that did not yield the action (retries)", record.get("retries"))
    lines += ["", "reply:"]
    if record.get("reasoning_summary"):
        lines += ["  reasoning summary:", *_indented(record["reasoning_summary"])]
    lines += ["  response:", *_indented(record.get("response_text"))]
    if record.get("cut"):
        lines.append(f"  cut to fit the record: {_inline(record['cut'])}")
    for call in record.get("tool_calls") or []:
        if isinstance(call, dict):
            lines.append(
                f"  tool call {_inline(call.get('id'))}: {_inline(call.get('name'))}({_inline(call.get('arguments'))})"
            )
    action = record.get("action")
    lines.append(
        f"  action: {_inline(action)}"
        if action is not None
        else "  action: none, a tool round (the results of its calls open the next step)"
    )
    lines.append(f"  {_tokens(record.get('usage'), record.get('cost_estimate'))}")
    return lines


def _tokens(usage: Any, cost: Any = None) -> str:
    """A record's usage as `tokens input 12, cached_input 0, ...`, with its configured-price cost."""
    counts = {key.removesuffix("_tokens"): value for key, value in usage.items()} if isinstance(usage, dict) else usage
    money = f", cost estimate ${cost:.4f}" if isinstance(cost, (int, float)) and not isinstance(cost, bool) else ""
    return f"tokens {_pairs(counts)}{money}"


def _indented(text: Any, indent: str = "    ") -> list[str]:
    """A message's content as its lines, indented: a text keeps its line breaks; anything else is JSON."""
    text = text if isinstance(text, str) else _inline(text)
    return [indent + line for line in text.splitlines()] or [indent + "(empty)"]


def _first_line(message: Any) -> str:
    message = message if isinstance(message, dict) else {}
    content = message.get("content")
    lines = (content if isinstance(content, str) else _inline(content)).splitlines() or ["(empty)"]
    first = lines[0] if len(lines[0]) <= 100 else lines[0][:99] + "…"
    return f"{message.get('role', '?')}: {first}{' …' if len(lines) > 1 else ''}"


def _pairs(mapping: Any) -> str:
    """A record's mapping as `key value, key value`; anything else as JSON."""
    if not isinstance(mapping, Mapping):
        return _inline(mapping)
    return ", ".join(f"{key} {_inline(value)}" for key, value in mapping.items())


def _inline(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


# Control characters other than a line break or tab, and the bidirectional overrides: a model's text
# holding them would move the cursor, recolour or reorder the terminal, so each is shown escaped.
_UNPRINTABLE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _printable(text: str) -> str:
    return _UNPRINTABLE.sub(lambda match: f"\\u{ord(match[0]):04x}", text)


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


@main.command()
@click.argument("runs_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--older-than",
    required=True,
    callback=_duration,
    help="delete the checkpoints of runs whose last checkpoint is older than this: 30d, 12h, 90m, 3600s",
)
@_json_option("the files deleted")
def prune(runs_dir: Path, older_than: timedelta, as_json: bool) -> None:
    """Delete the checkpoint stores (checkpoints.sqlite3 and its -wal and -shm files) of the runs in
    RUNS_DIR whose last checkpoint is older than --older-than: the retention of the provider state they
    may hold. The runs' other records stay; a pruned run can no longer be resumed. A run another
    process is writing is left alone. A local run's embedded provider service (its keys and stored
    conversations) is deleted with its checkpoints."""
    try:
        deleted = prune_checkpoints(runs_dir, older_than)
    except CheckpointError as error:
        _fail(f"{error}; fix: pass the folder runs are written to (--out of `turnstate run`)")
    for store in (path for path in deleted if path.name == CHECKPOINT_FILE):
        shutil.rmtree(local_service_dir(run_id_of(store.parent)), ignore_errors=True)  # its embedded provider's keys
    if as_json:
        click.echo(json.dumps({"deleted": [str(path) for path in deleted]}))
        return
    stores = sum(path.name == CHECKPOINT_FILE for path in deleted)
    click.echo(f"deleted {stores} checkpoint store{'s' * (stores != 1)} older than {_spoken(older_than)} in {runs_dir}")
    for path in deleted:
        click.echo(f"  {path}")


@main.command()
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
    path = run_dir / EVENTS
    if not path.is_file():
        fix = "fix: pass a run folder that `turnstate run` wrote"
        _fail(f"{path}: missing; {fix}" if run_dir.is_dir() else f"{run_dir}: not a folder; {fix}")
    read = audit_run(run_dir) if check else read_events(path)
    for note in read.notes:
        click.echo(f"warning: {note}", err=True)
    if not check:
        redactor = run_redactor(_optional_json(run_dir / RUN_META))
        made_by = {event.seq: event for _, event in read.events if isinstance(event, AssistantMessageEvent)}
        lines = [line for _, event in read.events for line in _event_lines(event, made_by)]
        if lines:
            click.echo(_printable(redactor.text("\n".join(lines))))
    for problem in read.problems:
        click.echo(problem, err=True)
    if read.problems:
        what = "breaks the log's rules" if check else "has lines that are not events"
        _fail(
            f"{path} {what} ({len(read.problems)} problems above); fix: restore the file as the run wrote it, "
            "or report the run that wrote it with the file"
        )
    if check:
        click.echo(_events_summary(path, [event for _, event in read.events]))


def _event_lines(event: AnyEvent, made_by: Mapping[int, AssistantMessageEvent]) -> list[str]:
    """One event as `events` prints it: a heading line (its number, turn, step and facts), its text below."""
    head = f"#{event.seq} turn {event.turn} step {event.step} · {event.kind}"
    match event:
        case UserInputEvent():
            return [f"{head} ({event.source})", *_indented(event.text)]
        case AssistantMessageEvent():
            verdict = event.status if event.reason is None else f"{event.status}: {event.reason}"
            if event.status == "accepted":
                verdict += f", action {event.action}" if event.action is not None else ", a tool round"
            raw = f" · raw in {event.raw.file}, attempt {event.raw.attempt}" if event.raw else ""
            return [f"{head} attempt {event.attempt} · {verdict}{raw}", *_indented(event.text)]
        case ToolCallEvent():
            message = made_by.get(event.message)
            status = message.status if message else "unknown"
            return [
                f"{head} {event.call_id}: {event.name}({_inline(event.arguments)}) · of #{event.message} ({status})"
            ]
        case ToolResultEvent():
            return [f"{head} {event.call_id}{' · error' if event.is_error else ''}", *_indented(event.content)]
        case CheckpointEvent():
            return [f"{head} {event.checkpoint_id}"]


def _events_summary(path: Path, logged: list[AnyEvent]) -> str:
    """The one line `events --check` prints for a sound log: how many events of each kind."""
    counts = Counter(event.kind for event in logged)
    statuses = Counter(event.status for event in logged if isinstance(event, AssistantMessageEvent))
    turns = len({event.turn for event in logged})
    verdicts = ", ".join(f"{statuses[status]} {status}" for status in get_args(Status) if statuses[status])
    return (
        f"{path}: sound, {len(logged)} events over {turns} turns: {counts['user_input']} user inputs, "
        f"{counts['assistant_message']} assistant messages{f' ({verdicts})' if verdicts else ''}, "
        f"{counts['tool_call']} tool calls, {counts['tool_result']} tool results, {counts['checkpoint']} checkpoints"
    )


@main.command()
@click.option(
    "--tests",
    "tests_path",
    default=Path("diagrams/transition_tests.json"),
    type=click.Path(dir_okay=False, path_type=Path),
    show_default=True,
    help="the map a whole-suite test run writes",
)
def coverage(tests_path: Path) -> None:
    """Print every transition with the tests that assert what it does (from the last whole-suite run)."""
    from turnstate.machine import coverage as gate
    from turnstate.strategies import MACHINES

    if not tests_path.exists():
        _fail(f"no {tests_path}: run the whole test suite from the repository root (it writes it), or pass --tests")
    try:
        committed = gate.read_tests_by_row(tests_path)
    except (OSError, ValueError) as error:
        _fail(f"cannot read {tests_path} ({error}); fix: run the whole test suite to write it again")
    for line in gate.table(MACHINES, committed):
        click.echo(line)


def _load_or_exit(given: Path) -> Profile:
    """The profile `given` names (its path, or a shipped profile's name), or its problems on stderr and exit 1."""
    try:
        return load_profile(resolve_profile(given))
    except ProfileError as error:
        click.echo(str(error), err=True)
        sys.exit(1)


def _fail(message: str) -> NoReturn:
    """One line on stderr and exit 1: a user's mistake is never shown as a traceback."""
    click.echo(f"error: {message}", err=True)
    sys.exit(1)
