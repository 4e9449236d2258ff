"""The commands that play: `run`, `resume`, `sweep` and `serve`.

A run's ending is printed with its report's path; a bad input is one line and exit 1; Ctrl-C and
SIGTERM stop a run with its record written (exit 130); a crash, a bug, shows its traceback redacted."""

from __future__ import annotations

import errno
import json
import signal
import sys
import traceback
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from turnstate.adapters.tokens import MIN_CONTEXT_TOKENS
from turnstate.cli.common import (
    EXIT_INTERRUPTED,
    all_overrides,
    checkpoints_option,
    complete_profile,
    fail,
    json_option,
    load_or_exit,
    overrides_options,
)
from turnstate.durable.layout import EVENTS, RUN_META, RUNS_ROOT, SWEEPS_ROOT

if TYPE_CHECKING:
    from rich.table import Table

    from turnstate.session.runner import Runner, RunResult
    from turnstate.sweeps.progress import SweepProgress

MIN_PORT, MAX_PORT = 0, 65535


@click.command()
@click.argument(
    "profile", required=False, type=click.Path(dir_okay=False, path_type=Path), shell_complete=complete_profile
)
@click.option(
    "--out",
    "out_dir",
    default=RUNS_ROOT,
    type=click.Path(file_okay=False, path_type=Path),
    show_default=True,
    help="where runs/<run-id>/ is written",
)
@checkpoints_option(
    "where the run keeps its checkpoints: `sqlite` (in its folder, the default) or a postgresql://user@host:port/database URL"
)
@overrides_options
@json_option(f"{RUN_META} as the run wrote it, with the run folder, instead of the progress bar and table")
def run(
    profile: Path | None,
    out_dir: Path,
    overrides: list[tuple[str, str]],
    model: str | None,
    seed: int | None,
    as_json: bool,
) -> None:
    """Run an agent from PROFILE: a profile's path, or the name of a shipped one (`turnstate list`
    shows them). Default: local-manual-rolling."""
    from turnstate.session.profile import DEFAULT_PROFILE
    from turnstate.session.runner import Runner, freeze_startup_objects

    runner: Runner | None = None
    try:
        with _sigterm_as_interrupt():
            loaded = load_or_exit(profile or DEFAULT_PROFILE, all_overrides(overrides, model, seed))
            freeze_startup_objects()
            try:
                out_dir.mkdir(parents=True, exist_ok=True)
            except OSError as error:
                fail(
                    f"--out {out_dir}: cannot create the folder ({error.strerror}); fix: pass a folder you can write to, not one under a file"
                )
            runner = Runner(loaded, out_dir)
            result = _play(runner, show_progress=not as_json)
    except KeyboardInterrupt:
        click.echo(f"interrupted; {_what_was_recorded(runner)}", err=True)
        sys.exit(EXIT_INTERRUPTED)
    _report(result, as_json)


@click.command()
@click.argument("run_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--profile",
    type=click.Path(dir_okay=False, path_type=Path),
    shell_complete=complete_profile,
    help="switch to another adapter, model or strategy (a profile's path or a shipped name) for the same game",
)
@click.option(
    "--from-records",
    is_flag=True,
    help="when the checkpoint store was damaged, go on from the run's records instead: the accepted state "
    f"rebuilt from {EVENTS}, without the provider's opaque state (the damaged store is set aside)",
)
@checkpoints_option(
    "the database the run's checkpoints are in, when its folder points at PostgreSQL (its URL with the password); "
    "another place is refused"
)
@json_option(f"{RUN_META} as the run wrote it, with the run folder, instead of the progress bar and table")
def resume(run_dir: Path, profile: Path | None, from_records: bool, as_json: bool) -> None:
    """Go on with the run in RUN_DIR from its last checkpoint, after a kill, a crash or Ctrl-C: the
    accepted state, the ledger and the game are rebuilt, nothing accepted is lost or performed twice,
    and the run writes on in the same folder (run_meta.json lists each resume)."""
    from turnstate.durable.resume import ResumeError, resume_notes, run_meta
    from turnstate.session.run_profile import run_profile, switched_profile
    from turnstate.session.runner import Runner, freeze_startup_objects

    runner: Runner | None = None
    try:
        with _sigterm_as_interrupt():
            try:
                loaded = run_profile(run_dir)
                if profile is not None:
                    loaded, note = switched_profile(loaded, load_or_exit(profile))
                    if note is not None:
                        click.echo(f"note: {note}", err=True)
            except ResumeError as error:
                fail(str(error))
            freeze_startup_objects()
            runner = Runner(loaded, run_dir.parent)
            go_on = partial(runner.resume, run_dir, switch=profile is not None, from_records=from_records)
            result = _play(runner, not as_json, go_on)
    except KeyboardInterrupt:
        click.echo(f"interrupted; {_what_was_recorded(runner)}", err=True)
        sys.exit(EXIT_INTERRUPTED)
    for note in resume_notes((run_meta(run_dir).get("resumes") or [{}])[-1]):
        click.echo(f"note: {note}", err=True)
    _report(result, as_json)


def _report(result: RunResult, as_json: bool) -> NoReturn:
    """A run's ending as `run` and `resume` print it (with its report's path), and their exit status."""
    from rich.console import Console

    page = _run_report(result)
    if as_json:
        click.echo(json.dumps(_run_document(result)))
    else:
        Console().print(_summary(result))
        if result.server_message is not None:
            click.echo(f"the server said: {result.server_message}", err=True)
        if page is not None:
            click.echo(f"report: {page}")
    sys.exit(0 if result.outcome != "failed_closed" else 1)


def _run_report(result: RunResult) -> Path | None:
    """The run's report.html, written as the run ends; a report that cannot be written is a warning,
    never the run's failure."""
    from turnstate.reports.page import ReportError
    from turnstate.reports.run import write_run_report

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
        fail("the run wrote no run folder")
    meta = result.artifacts / RUN_META
    try:
        recorded = json.loads(meta.read_bytes())
    except (OSError, ValueError) as error:
        fail(f"{meta}: cannot read the run's record back ({getattr(error, 'strerror', None) or 'not JSON'})")
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
    from turnstate.session.interrupts import interruptible

    with interruptible(signal.SIGTERM):
        yield


def _play(runner: Runner, show_progress: bool, play: Callable[[], RunResult] | None = None) -> RunResult:
    """The run (`play`: the runner's new run unless given), with a progress bar while it lasts if
    `show_progress`. Whatever it shows of the run (the progress, an error, a crash's traceback) has
    passed the run's redaction, as its artifacts have."""
    from turnstate.durable.accounting import UsageJournalError
    from turnstate.durable.checkpoints import CheckpointError
    from turnstate.durable.events import EventLogError
    from turnstate.durable.jsonl import LinkedFileError
    from turnstate.durable.resume import ResumeError
    from turnstate.durable.side_effects import JournalError
    from turnstate.environments import EnvironmentFault
    from turnstate.session.endpoint import RunSetupError

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
        fail(runner.redactor.text(str(error)))
    except EnvironmentFault as error:  # the game's own code failed: its file is named, nothing accepted is lost
        fail(runner.redactor.text(f"{error}; {_what_was_recorded(runner)}"))
    except OSError as error:
        unwritable = _unwritable(error, started=runner.run_dir is not None and runner.run_dir.is_dir())
        if unwritable is None:
            raise
        fail(runner.redactor.text(f"{unwritable}; {_what_was_recorded(runner)}"))
    except Exception as error:  # a crash is a bug: its traceback is shown, redacted
        click.echo(runner.redactor.text("".join(traceback.format_exception(error))), err=True)
        fail(f"the run crashed ({type(error).__name__}); {_what_was_recorded(runner)}")


@contextmanager
def _progress_bar(runner: Runner) -> Iterator[None]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from turnstate.session.runner import StepProgress

    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[status]}", markup=False),
        TimeElapsedColumn(),
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
    from rich.table import Table
    from rich.text import Text

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
        *([("waited on the rate limit", f"{result.rate_limit_seconds:.2f}s")] if result.rate_limit_seconds else []),
        ("run folder", str(result.artifacts)),
    ]
    for what, value in rows:
        table.add_row(what, Text(value))  # as text: "[redacted]" or a provider's brackets are no markup
    return table


@click.command()
@click.argument("sweep_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--out",
    "sweep_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help=f"the sweep's folder  [default: {SWEEPS_ROOT}/<the sweep's id>]",
)
@click.option("--in-flight", type=click.IntRange(min=1), help="runs at once (default: the sweep's budget)")
@click.option(
    "--ray",
    "ray_address",
    metavar="ADDRESS",
    help="run each run as a Ray task on the cluster at ADDRESS (HOST:PORT, auto); 'local' starts one here",
)
@click.option(
    "--checkpoints",
    metavar="URL",
    help="where the sweep's new runs keep their checkpoints: `sqlite` (in each run's folder) or a "
    "postgresql://user@host:port/database URL; overrides the sweep's `checkpoints:`",
)
def sweep(
    sweep_file: Path, sweep_dir: Path | None, in_flight: int | None, ray_address: str | None, checkpoints: str | None
) -> None:
    """Run SWEEP_FILE's profiles x environments x seeds x repetitions, each an ordinary run with its own
    folder and checkpoints, and write results.csv, results.jsonl, summary.json and report.html. Run it
    again on the same folder to go on: ended runs are skipped, unfinished ones resume."""
    from turnstate.reports.folder import write_report
    from turnstate.reports.page import ReportError
    from turnstate.sweeps.engines import Engine, PoolEngine, run_sweep
    from turnstate.sweeps.plan import SweepError, load_sweep, standing
    from turnstate.sweeps.progress import SweepProgress, counts

    try:
        plan = load_sweep(sweep_file, checkpoints)
    except SweepError as error:
        fail(str(error))
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
            fail(str(error))

    def ended(row: Mapping[str, Any]) -> None:
        click.echo(f"{row['key']}: {row['outcome']} ({row['levels']} levels, {row['turns']} turns, ${row['cost']:.4f})")

    click.echo(f"sweep {plan.sweep.id}: {len(plan.runs)} runs into {folder}")
    found = standing(plan, folder)
    for verb, why in (("skips", "they ended"), ("resumes", "they did not end")):
        if found[verb]:
            click.echo(f"  {verb} {len(found[verb])} ({why}): {', '.join(found[verb])}")
    progress = SweepProgress.of(plan, folder, in_flight)
    title = f"sweep {plan.sweep.id}"
    try:
        with _live_view(progress, title):
            run_sweep(plan, folder, engine, in_flight=in_flight, on_row=ended, progress=progress)
    except KeyboardInterrupt:
        click.echo(f"interrupted; run it again to go on: turnstate sweep {sweep_file} --out {folder}", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except SweepError as error:
        fail(str(error))
    except OSError as error:
        fail(f"{folder}: cannot write the sweep's folder ({error.strerror})")
    ended_as = progress.snapshot()
    click.echo(f"{title}: {counts(ended_as)}, in {ended_as.seconds:.1f} s")
    try:
        click.echo(f"report: {write_report(folder)}")
    except ReportError as error:
        click.echo(f"warning: no report: {error}", err=True)


@contextmanager
def _live_view(progress: SweepProgress, title: str) -> Iterator[None]:
    """On a terminal, the sweep's progress (sweeps/progress.py) redrawn four times a second below the
    lines the sweep prints, gone when it ends; elsewhere (a pipe, a file, CI) nothing: the lines alone."""
    if not sys.stdout.isatty():
        yield
        return
    from rich.live import Live
    from rich.text import Text

    from turnstate.sweeps.progress import progress_lines

    def view() -> Text:
        return Text("\n".join(progress_lines(progress.snapshot(), title)))

    with Live(get_renderable=view, refresh_per_second=4, transient=True):
        yield


@click.command()
@click.option(
    "--port", default=0, show_default=True, type=click.IntRange(MIN_PORT, MAX_PORT), help="0 picks a free port"
)
@click.option(
    "--context-window",
    type=click.IntRange(min=MIN_CONTEXT_TOKENS),
    default=None,
    help="tokens; default: the provider's default",
)
@click.option(
    "--requests-per-minute",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="refuse requests above this rate with 429 and a Retry-After, as a provider's limiter does",
)
@click.option(
    "--tokens-per-minute",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="likewise for tokens (a request's characters / 4, counted as it arrives)",
)
def serve(
    port: int, context_window: int | None, requests_per_minute: float | None, tokens_per_minute: float | None
) -> None:
    """Serve the embedded local provider on 127.0.0.1 until interrupted."""
    from turnstate.adapters.rate_buckets import Rate
    from turnstate.local_provider.server import DEFAULT_CONTEXT_WINDOW, LocalProvider

    window = context_window if context_window is not None else DEFAULT_CONTEXT_WINDOW
    limited = requests_per_minute is not None or tokens_per_minute is not None
    rate = Rate(requests_per_minute, tokens_per_minute) if limited else None
    try:
        provider = LocalProvider(port=port, context_window=window, rate=rate).start()
    except OSError as error:
        fail(
            f"--port {port}: cannot listen on 127.0.0.1:{port} ({error.strerror}); fix: pick another port, or 0 for a free one"
        )
    click.echo(f"local provider on {provider.base_url} (OpenAI-compatible base_url: {provider.openai_base_url})")
    provider.serve_until_interrupted()
