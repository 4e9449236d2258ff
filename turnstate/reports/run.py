"""`turnstate report RUN_DIR`: one run on one page, from the files the run wrote.

What it reads, and what for:
- run_meta.json: the summary (outcome, levels, turns, tokens, cost, wall time, resumes) and which
  configuration of the strategy ran. A run killed before writing one is still reported, from its
  steps, and the page says so.
- step_NNNNNN.json: per turn, its usage (input, cached, output, reasoning), its retries (each
  attempt's outcome: a rejected reply or a provider fault), its failed compaction calls, and the
  compaction it committed: the plots' points, markers and rules.
- transitions.jsonl: each transition the machine took, counted per row (machine/diagrams.py's
  `run_counts`, as `turnstate diagrams --run` counts them) and drawn on the configuration's machine.
  The log, not the step records' copies: it also holds the turn that failed closed.
- events.jsonl and calls.jsonl: the verdicts on the replies and the provider calls by kind, for the
  summary; failed_turn.json: the turn that failed closed, marked at the end of the plot.

Only figures and short texts are shown (outcomes, problems, actions, settings), never a reply or a
request: the records are redacted when written, and what the page repeats passes the run's
redactor again (its key, if this shell holds it), as `turnstate show` does for a folder from
elsewhere."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any

import graphviz

from turnstate.durable.events import AssistantMessageEvent, ToolCallEvent, read_events
from turnstate.durable.layout import CALLS, EVENTS, FAILED_TURN, JOURNAL, RUN_META, STEP_FILE, STEP_GLOB, TRANSITIONS
from turnstate.durable.redaction import Redactor
from turnstate.durable.transition_log import TransitionLogError, read_transition_log
from turnstate.machine import diagrams as drawing
from turnstate.reports.diagrams import declared_strategies, run_pictures
from turnstate.reports.page import (
    ReportError,
    display,
    facts,
    link,
    note,
    outcome,
    page,
    read_json,
    read_lines,
    section,
    table,
    write_page,
)
from turnstate.reports.plots import (
    BLACK,
    BLUE,
    GREEN,
    GREY,
    LIGHT_BLUE,
    ORANGE,
    PURPLE,
    RED,
    YELLOW,
    Marker,
    Rule,
    Series,
    timeline,
)
from turnstate.reports.text import nested, run_redactor

FIX = "restore the run folder as `turnstate run` wrote it"


@dataclass
class Step:
    """One step record's figures, as the page plots them."""

    step: int
    action: str | None
    usage: dict[str, int]
    cost: float | None
    retries: list[dict[str, Any]]
    failed_compaction_calls: list[dict[str, Any]]
    compaction: dict[str, Any] | None
    trimmed: int  # messages of the previous step's request this one's dropped (a rolling window's trim)


@dataclass
class Run:
    """What a run folder holds, read for its page."""

    folder: Path
    meta: dict[str, Any] | None
    steps: list[Step]
    calls: Counter[str] = field(default_factory=Counter)
    verdicts: Counter[str] = field(default_factory=Counter)
    tool_calls: int = 0
    transitions: list[dict[str, str]] | None = None
    failed_turn: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)


def is_run(folder: Path) -> bool:
    """Whether `folder` is a run's: it holds run_meta.json or a step record."""
    return (folder / RUN_META).is_file() or any(STEP_FILE.fullmatch(path.name) for path in folder.glob(STEP_GLOB))


def write_run_report(folder: Path) -> Path:
    """Read the run in `folder`, write its page to folder/report.html, return the page's path."""
    return write_page(folder, run_page(read_run(folder)))


def read_run(folder: Path) -> Run:
    """The run in `folder`, or ReportError naming the first file that is not what the run wrote."""
    meta = read_json(folder / RUN_META, FIX) if (folder / RUN_META).is_file() else None
    if meta is not None and not isinstance(meta, dict):
        raise ReportError(f"{folder / RUN_META}: not a run's metadata (not a JSON object); fix: {FIX}")
    redactor = run_redactor(meta)
    names = sorted(path.name for path in folder.iterdir() if STEP_FILE.fullmatch(path.name))
    run = Run(folder, redactor.scrub(meta), [_step(folder / name, redactor) for name in names])
    if meta is None:
        run.notes.append(
            f"no {RUN_META}: the run was killed before it wrote one (or is still running); figures from its steps"
        )
    if (folder / EVENTS).is_file():
        read = read_events(folder / EVENTS)
        if read.problems:
            raise ReportError(f"{read.problems[0]}; fix: {FIX}")
        run.notes += read.notes
        events = [event for _, event in read.events]
        run.verdicts = Counter(event.status for event in events if isinstance(event, AssistantMessageEvent))
        run.tool_calls = sum(isinstance(event, ToolCallEvent) for event in events)
    if (folder / CALLS).is_file():
        run.calls = Counter(
            str(entry.get("kind")) for _, entry in read_lines(folder / CALLS, FIX) if isinstance(entry, dict)
        )
    if isinstance(nested(meta, "failed_turn"), str) and (folder / FAILED_TURN).is_file():
        failed = read_json(folder / FAILED_TURN, FIX)
        run.failed_turn = redactor.scrub(failed) if isinstance(failed, dict) else None
    if (folder / TRANSITIONS).is_file():
        try:
            run.transitions, warnings = read_transition_log(folder / TRANSITIONS, declared=declared_strategies(meta))
        except TransitionLogError as error:
            raise ReportError(str(error)) from None
        run.notes += warnings
    else:
        run.notes.append(f"no {TRANSITIONS}: no transition counts to draw")
    return run


USAGE_KEYS = ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_tokens")


def _step(path: Path, redactor: Redactor) -> Step:
    record = read_json(path, FIX)
    usage = nested(record, "usage")
    problem = None
    if not isinstance(record, dict) or not isinstance(record.get("step"), int):
        problem = "not a step record (no step number)"
    elif not isinstance(usage, dict) or not all(isinstance(usage.get(key, 0), int) for key in USAGE_KEYS):
        problem = "usage is not a record of token counts"
    if problem is not None:
        raise ReportError(f"{path}: {problem}; fix: {FIX}")
    attempts = [call for call in record.get("compaction_calls") or [] if isinstance(call, dict)]
    cost = record.get("cost_estimate")
    return Step(
        step=record["step"],
        action=redactor.text(record["action"]) if isinstance(record.get("action"), str) else None,
        usage={key: usage.get(key, 0) for key in USAGE_KEYS},
        cost=cost if isinstance(cost, (int, float)) else None,
        retries=redactor.scrub([call for call in record.get("retries") or [] if isinstance(call, dict)]),
        failed_compaction_calls=redactor.scrub([call for call in attempts if call.get("outcome") != "compacted"]),
        compaction=redactor.scrub(record["compaction"]) if isinstance(record.get("compaction"), dict) else None,
        trimmed=dropped if isinstance(dropped := nested(record, "request", "dropped"), int) else 0,
    )


# The page.

REJECTED = "action_rejected"  # the attempt's outcome when the reply named no valid action


def run_page(run: Run) -> str:
    meta = run.meta or {}
    subtitle = (
        f"profile {meta.get('config_id', '—')} · adapter {meta.get('adapter_id', '—')} · "
        f"strategy {meta.get('strategy', '—')} · compaction {nested(meta, 'runtime', 'compaction', 'kind') or '—'}"
    )
    sections = [
        section("Summary", facts(_summary(run)), *(note(text) for text in run.notes), section_id="summary"),
        section("Tokens per turn", *_plots(run), section_id="timeline"),
        section("Retries, faults, compactions and resumes", _incidents(run), section_id="incidents"),
        section("The run on its machine", *_diagram(run), section_id="machine"),
        section("Files", _files(run.folder), section_id="files"),
    ]
    return page(f"turnstate run {run.folder.name}", subtitle, sections)


def _summary(run: Run) -> list[tuple[str, Any]]:
    meta = run.meta or {}
    steps = run.steps
    usage: Mapping[str, Any] = meta["usage"] if isinstance(meta.get("usage"), dict) else _total(steps)
    environment = nested(meta, "settings", "environment") or {}
    retries = [retry for _, retry in _retries(run)]
    faults = Counter(str(retry.get("outcome")) for retry in retries if retry.get("outcome") != REJECTED)
    rejected = len(retries) - faults.total()
    replies = f"{rejected} rejected repl{'ies' if rejected > 1 else 'y'}"
    kinds = ", ".join([replies] * bool(rejected) + [f"{n} {kind}" for kind, n in faults.most_common()])
    failure = meta.get("failure")
    rows: list[tuple[str, Any]] = [
        ("outcome", outcome(str(meta.get("outcome", f"unknown (no {RUN_META})")))),
        *([("failure", failure)] if failure else []),
        ("levels won", meta.get("levels_won")),
        ("steps (turns played)", meta.get("turns", len(steps))),
        ("accepted actions", meta.get("accepted_actions")),
        ("retries (failed attempts)", meta.get("failed_attempts", len(retries))),
        ("retries by kind", kinds or "none"),
        ("compactions", meta.get("compactions", sum(step.compaction is not None for step in steps))),
        ("provider calls", _calls(meta, run.calls)),
        (f"replies ({EVENTS})", ", ".join(f"{count} {status}" for status, count in run.verdicts.items()) or None),
        ("tool calls", run.tool_calls),
        ("tokens in / cached / out", _tokens(usage)),
        ("cost estimate (configured prices)", _money(meta.get("cost_estimate", sum(step.cost or 0 for step in steps)))),
        ("wall time", _seconds(meta)),
        ("resumes", _resumes(meta.get("resumes"))),
        ("environment", f"{environment.get('name', '—')} seed {environment.get('seed', '—')}"),
        *([("scorecard", card)] if (card := level_actions(meta.get("environment_scorecard"))) else []),
        ("model", nested(meta, "settings", "request", "model")),
    ]
    unattributed = meta.get("unattributed_usage")
    if isinstance(unattributed, dict) and any(unattributed.values()):
        rows.append(("usage no step holds (unattributed)", _tokens(unattributed)))
    return rows


def level_actions(scorecard: Any) -> str | None:
    """A game's scorecard (run_meta's `environment_scorecard`) as the leaderboard reads it: its
    score, and per level of its last play the actions used against the human baseline's."""
    plays = scorecard.get("plays") if isinstance(scorecard, dict) else None
    if not isinstance(plays, list) or not plays or not isinstance(plays[-1], dict):
        return None
    used, baseline = plays[-1].get("level_actions") or [], plays[-1].get("level_baseline_actions") or []
    levels = [
        f"{number}: {actions}" + (f"/{baseline[number - 1]}" if number <= len(baseline) else "")
        for number, actions in enumerate(used, 1)
        if actions
    ]
    return f"score {scorecard.get('score')}; per level, actions/baseline: {', '.join(levels) or 'none played'}"


def _total(steps: list[Step]) -> dict[str, int]:
    return {key: sum(step.usage[key] for step in steps) for key in USAGE_KEYS}


def _tokens(usage: Mapping[str, Any]) -> str:
    counts = [usage.get(key, 0) for key in ("input_tokens", "cached_input_tokens", "output_tokens")]
    reasoning = usage.get("reasoning_tokens")
    return " / ".join(f"{count:,}" for count in counts) + (f" (reasoning {reasoning:,})" if reasoning else "")


def _money(value: Any) -> str | None:
    return f"${value:.4f}" if isinstance(value, (int, float)) else None


def _seconds(meta: Mapping[str, Any]) -> str | None:
    wall, provider, limited = (meta.get(key) for key in ("wall_seconds", "provider_seconds", "rate_limit_seconds"))
    if not isinstance(wall, (int, float)):
        return None
    parts = [f"provider {provider:.2f} s"] if isinstance(provider, (int, float)) else []
    parts += [f"waited on the rate limit {limited:.2f} s"] if isinstance(limited, (int, float)) and limited else []
    return f"{wall:.2f} s" + (f" ({', '.join(parts)})" if parts else "")


def _calls(meta: Mapping[str, Any], calls: Counter[str]) -> str | None:
    kinds = ", ".join(f"{count} {kind}" for kind, count in calls.items())
    total = meta.get("provider_calls", calls.total() if calls else None)
    return f"{total}" + (f" ({kinds}, from {CALLS})" if kinds else "") if total is not None else None


def _resumes(resumes: Any) -> str:
    if not isinstance(resumes, list) or not resumes:
        return "none"
    where = ", ".join(f"after step {nested(resume, 'step')}" for resume in resumes)
    return f"{len(resumes)}: {where}"


def _plots(run: Run) -> list[str]:
    if not run.steps:
        return [note("no step records: the run took no turn")]
    turns = [step.step for step in run.steps]
    markers, rules = _markers(run), _rules(run)
    xs = [*turns, *(marker.x for marker in markers), *(rule.x for rule in rules)]
    x_range = (min(xs), max(xs))  # both plots on one turn axis

    def hover(index: int) -> str:
        step = run.steps[index]
        usage = step.usage
        return (
            f"step {step.step}: action {step.action or '(a tool round)'}; input {usage['input_tokens']:,} "
            f"(cached {usage['cached_input_tokens']:,}), output {usage['output_tokens']:,}, "
            f"cost {_money(step.cost) or '—'}" + (f"; {len(step.retries)} retries" if step.retries else "")
        )

    def values(key: str) -> list[float]:
        return [step.usage[key] for step in run.steps]

    tokens = timeline(
        "plot-tokens",
        "input and cached input tokens per turn",
        turns,
        [Series("input tokens", values("input_tokens"), BLUE, area=True)]
        + [Series("cached input tokens", values("cached_input_tokens"), LIGHT_BLUE, area=True)],
        markers=markers,
        rules=rules,
        y_label="tokens",
        hover=hover,
        x_range=x_range,
    )
    outputs = [Series("output tokens", values("output_tokens"), ORANGE)]
    if any(values("reasoning_tokens")):
        outputs.append(Series("of which reasoning", values("reasoning_tokens"), PURPLE))
    output = timeline(
        "plot-output",
        "output tokens per turn",
        turns,
        outputs,
        rules=rules,
        y_label="tokens",
        hover=hover,
        height=150,
        x_range=x_range,
    )
    about = (
        "Each turn's usage is every provider call since the turn before it (its retries and compaction "
        "calls too). Markers above the plot: each retry of the turn's action request (a reply the harness "
        "rejected, or a provider fault), compaction calls that failed, turns whose request dropped the "
        "oldest messages of the one before. A compaction committed and a resume: a dashed line across the plots "
        "(a tick above them, where there are too many lines to read). Hover for the figures."
    )
    return [note(about), tokens, output]


def _retries(run: Run) -> list[tuple[int, dict[str, Any]]]:
    """Each attempt that did not yield its turn's action, with its step: the steps' retries, and the
    attempts of the turn that failed closed (failed_turn.json), which no step holds."""
    found = [(step.step, retry) for step in run.steps for retry in step.retries]
    failed = run.failed_turn
    if failed is not None and isinstance(failed.get("turn"), int):
        attempts = [attempt for attempt in failed.get("attempts") or [] if isinstance(attempt, dict)]
        found += [
            (failed["turn"], attempt) for attempt in attempts if attempt.get("outcome") not in ("accepted", "compacted")
        ]
    return found


def _retry_kind(retry: dict[str, Any]) -> str:
    return "rejected reply" if retry.get("outcome") == REJECTED else "provider fault"


def _retry_text(retry: dict[str, Any]) -> str:
    waited = f"; waited {retry['waited_seconds']} s" if retry.get("waited_seconds") else ""
    return f"{retry.get('outcome')}" + (f": {retry['problem']}" if retry.get("problem") else "") + waited


def _markers(run: Run) -> list[Marker]:
    markers = [
        Marker(
            step,
            _retry_kind(retry),
            YELLOW if retry.get("outcome") == REJECTED else RED,
            f"step {step}: {_retry_text(retry)}",
        )
        for step, retry in _retries(run)
    ]
    for step in run.steps:
        for call in step.failed_compaction_calls:
            markers.append(
                Marker(step.step, "failed compaction call", PURPLE, f"step {step.step}: {call.get('outcome')}")
            )
        if step.trimmed and step.compaction is None:
            text = f"step {step.step}: its request dropped the oldest {step.trimmed} messages of the one before"
            markers.append(Marker(step.step, "history trimmed", GREY, text))
    failed = run.failed_turn
    if failed is not None and isinstance(failed.get("turn"), int):
        markers.append(
            Marker(failed["turn"], "failed closed", BLACK, f"turn {failed['turn']}: {failed.get('failure')}")
        )
    return [marker for marker in markers if run.steps[0].step <= marker.x <= run.steps[-1].step + 1]


def _rules(run: Run) -> list[Rule]:
    rules = [
        Rule(step.step, "compaction", GREEN, f"step {step.step}: compaction by {step.compaction.get('by')}")
        for step in run.steps
        if step.compaction is not None
    ]
    resumes = nested(run.meta, "resumes")
    for resume in resumes if isinstance(resumes, list) else []:
        if isinstance(nested(resume, "step"), int):
            text = f"resumed after step {resume['step']} ({nested(resume, 'continuation')})"
            rules.append(Rule(resume["step"] + 1, "resume", GREY, text))
    return rules


INCIDENTS_OPEN = 40  # a longer list (a long run's compactions) is folded, its counts in its heading


def _incidents(run: Run) -> str:
    rows: list[tuple[Any, str, Any]] = []
    for step in run.steps:
        rows += [(step.step, _retry_kind(retry), _retry_text(retry)) for retry in step.retries]
        for call in step.failed_compaction_calls:
            rows.append((step.step, "failed compaction call", f"{call.get('outcome')}: {call.get('problem') or ''}"))
        if step.compaction is not None:
            shown = {key: value for key, value in step.compaction.items() if key != "usage" and value is not None}
            rows.append((step.step, "compaction", ", ".join(f"{key} {display(value)}" for key, value in shown.items())))
    resumes = nested(run.meta, "resumes")
    for resume in resumes if isinstance(resumes, list) else []:
        details = {key: value for key, value in resume.items() if key != "step"} if isinstance(resume, dict) else resume
        rows.append((nested(resume, "step"), "resumed after it", details))
    if run.failed_turn is not None:
        turn = run.failed_turn.get("turn")
        rows += [(turn, _retry_kind(retry), _retry_text(retry)) for at, retry in _retries(run) if at == turn]
        rows.append((turn, "failed closed", run.failed_turn.get("failure")))
    if not rows:
        return note("none: every turn's first reply was accepted, nothing was compacted, and the run never resumed")
    listed = table(("step", "what", "detail"), rows, numeric=(0,))
    if len(rows) <= INCIDENTS_OPEN:
        return listed
    kinds = ", ".join(f"{what}: {count}" for what, count in Counter(row[1] for row in rows).items())
    return f"<details><summary>{escape(f'{len(rows)} of them ({kinds}): show the list')}</summary>{listed}</details>"


def _diagram(run: Run) -> list[str]:
    """The configuration that ran, each row with the times it fired in this run; rows it never took dashed."""
    if not run.transitions:
        return [note("no transitions recorded: nothing to draw")]
    parts = []
    for picture in run_pictures(run.meta, run.transitions):
        if picture.undrawn:
            parts.append(note(picture.undrawn))
        try:
            svg = drawing.render_svg(drawing.to_dot(picture.machines, picture.counts)).decode("utf-8")
        except graphviz.ExecutableNotFound:
            return [note("Graphviz's `dot` is not installed (apt-get install graphviz): the diagram is left out")]
        svg = svg[svg.index("<svg") :].replace("<svg", f'<svg id="diagram-{_ident(picture.name)}" class="machine"', 1)
        parts.append(f'<div class="diagram" id="diagram">{svg}</div>')
    parts.insert(0, note("Each transition with the times this run took it; dashed: never taken in this run."))
    return parts


def _ident(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "-", name)


FILES = (RUN_META, EVENTS, CALLS, TRANSITIONS, FAILED_TURN, JOURNAL)


def _files(folder: Path) -> str:
    present = [name for name in FILES if (folder / name).is_file()]
    steps = sorted(path.name for path in folder.iterdir() if STEP_FILE.fullmatch(path.name))
    if steps:
        present.append(steps[0])
    links = ", ".join(str(link(name, name)) for name in present)
    more = f", … ({len(steps)} step records; `turnstate show {folder} --step N` reads one)" if steps else ""
    return f'<p class="note">In this folder: {links}{escape(more)}</p>'
