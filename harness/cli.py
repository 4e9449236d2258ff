"""The `turnstate` command line: run, validate, diagrams, serve."""

from __future__ import annotations

import gc
import json
import signal
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import NoReturn

import click
import graphviz
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

from turnstate.harness.artifacts import StepRecordError, TransitionLogError, read_transition_log, sent_messages
from turnstate.harness.endpoint import RunSetupError
from turnstate.harness.profile import DEFAULT_PROFILE, MIN_CONTEXT_TOKENS, Profile, ProfileError, load_profile
from turnstate.harness.runner import Runner, RunResult, StepProgress
from turnstate.machine.engine import MachineSpec, Row

console = Console()

EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a run stopped by Ctrl-C


@click.group()
@click.version_option(package_name="turnstate")
def main() -> None:
    """Carry an LLM agent's runtime state across model turns, as explicit state machines."""


@main.command()
@click.argument("profile", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--out",
    "out_dir",
    default=Path("runs"),
    type=click.Path(file_okay=False, path_type=Path),
    show_default=True,
    help="where runs/<run-id>/ is written",
)
def run(profile: Path | None, out_dir: Path) -> None:
    """Run an agent from PROFILE (default: the local manual_rolling profile)."""
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
            result = _run_with_progress(runner)
    except KeyboardInterrupt:
        click.echo(f"interrupted; {_what_was_recorded(runner)}", err=True)
        sys.exit(EXIT_INTERRUPTED)
    console.print(_summary(result))
    sys.exit(0 if result.outcome != "failed_closed" else 1)


def _what_was_recorded(runner: Runner | None) -> str:
    """Where the run's record is, as the disk has it now: a line must not claim a file that is not there."""
    if runner is None or runner.run_dir is None:
        return "no run had started, so nothing was recorded"
    meta = runner.run_dir / "run_meta.json"
    return f"the run is recorded in {meta}" if meta.is_file() else f"{runner.run_dir} holds no run_meta.json"


def freeze_startup_objects() -> None:
    """Leave what exists once the profile is loaded (modules, the adapter's SDK) out of garbage
    collection: a long run's collections otherwise walk them again and again (in a wide 1000-turn
    run, 2 ms of the local provider's 5 ms per call). For a process that runs one agent, as this
    command is; a library caller decides for its own process."""
    gc.collect()
    gc.freeze()


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (what `timeout`, `docker stop` and CI cancellation send) stops a run as Ctrl-C does, so
    the runner still writes run_meta.json (outcome interrupted) instead of the process just dying."""

    def interrupt(signum: int, frame: FrameType | None) -> None:
        # Once: a second SIGTERM must not cut short the run_meta.json the first one asked for.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _run_with_progress(runner: Runner) -> RunResult:
    """The run, with a progress bar while it lasts. Whatever it shows of the run (the progress, an
    error, a crash's traceback) has passed the run's redaction, as its artifacts have."""
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
        try:
            return runner.run()
        except RunSetupError as error:
            _fail(runner.redactor.text(str(error)))
        except Exception as error:  # a crash is a bug: its traceback is shown, redacted
            click.echo(runner.redactor.text("".join(traceback.format_exception(error))), err=True)
            _fail(f"the run crashed ({type(error).__name__}); {_what_was_recorded(runner)}")


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
        ("artifacts", str(result.artifacts)),
    ]
    for what, value in rows:
        table.add_row(what, Text(value))  # as text: "[redacted]" or a provider's brackets are no markup
    return table


@main.command()
@click.argument("profiles", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
def validate(profiles: tuple[Path, ...]) -> None:
    """Check PROFILES; exit 1 if any is invalid, naming the file, key path and fix."""
    failed = False
    for path in profiles:
        try:
            load_profile(path)
        except ProfileError as error:
            failed = True
            click.echo(str(error), err=True)
        else:
            click.echo(f"{path}: ok")
    sys.exit(1 if failed else 0)


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
    declared = [next(iter(used[1].values())).name] if used else list(STRATEGIES)
    try:
        records, warnings = read_transition_log(run_dir / "transitions.jsonl", declared=declared)
    except TransitionLogError as error:
        _fail(str(error))
    for warning in warnings:
        click.echo(f"warning: {warning}", err=True)
    for machine, counts in drawing.run_counts(records).items():
        name, machines = used or _every_configuration(run_dir, machine)
        drawn = set().union(*(_row_keys(spec) for spec in machines.values()))
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
    from turnstate.strategies import STRATEGIES, configuration_name

    path = run_dir / "run_meta.json"
    fix = "fix: pass a run folder that `turnstate run` wrote"
    try:
        meta = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:
        _fail(f"{path}: not a run's metadata ({getattr(error, 'strerror', None) or 'not JSON'}); {fix}")
    strategy = STRATEGIES.get(str(_field(meta, "strategy")))
    kind = _field(meta, "runtime", "compaction", "kind")
    ran = next((known for known in strategy.specs if known == kind), None) if strategy else None
    if strategy is None or ran is None:
        known = ", ".join(f"{name} ({', '.join(record.specs)})" for name, record in STRATEGIES.items())
        _fail(f"{path}: names no strategy and runtime.compaction.kind turnstate draws (it draws: {known}); {fix}")
    name = configuration_name(strategy, ran)
    return name, {name: strategy.specs[ran]}


def _field(data: object, *keys: str) -> object:
    """data[key][key]..., or None where a level is missing or not a mapping."""
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    return data


def _every_configuration(run_dir: Path, machine: str) -> tuple[str, dict[str, MachineSpec]]:
    """For a run without run_meta.json: its strategy's one configuration, or its full machine, with a
    warning that the picture holds more than the run could take."""
    machines = _pictures()[machine]  # a strategy's one configuration, or its full machine, has its name
    if len(machines) > 1:
        click.echo(
            f"warning: no {run_dir / 'run_meta.json'} (the run was killed before writing it?), so which "
            f"compaction it ran is unknown: drawing every configuration of {machine}",
            err=True,
        )
    return machine, machines


def _row_keys(spec: MachineSpec) -> set[tuple[str, str, str]]:
    """The (source, trigger, dest) records the transition log can hold for the rows of `spec`."""
    return {
        (leaf, row.trigger, spec.landing(row.dest))
        for row in spec.rows()
        for source in row.sources
        for leaf in spec.leaves(source)
    }


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
@click.option("--step", required=True, type=click.IntRange(min=1), help="the step whose request to print")
def show(run_dir: Path, step: int) -> None:
    """Print the request a step of RUN_DIR sent, rebuilt from its step records (readable messages, as JSON)."""
    try:
        messages = sent_messages(run_dir, step)
    except StepRecordError as error:
        _fail(str(error))
    click.echo(json.dumps(messages, indent=2, ensure_ascii=False))


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


def _load_or_exit(path: Path) -> Profile:
    try:
        return load_profile(path)
    except ProfileError as error:
        click.echo(str(error), err=True)
        sys.exit(1)


def _fail(message: str) -> NoReturn:
    """One line on stderr and exit 1: a user's mistake is never shown as a traceback."""
    click.echo(f"error: {message}", err=True)
    sys.exit(1)


if __name__ == "__main__":
    main()
