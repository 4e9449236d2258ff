"""A run's normalized event log as a person reads it (`turnstate events`), or its check: each tool call
answered once by a result with its id, causal order, rejected attempts never accepted history,
approvals and refusals visible (durable/events.py keeps the rules; durable/resume.py's audit_run
checks the log against the run's other records)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import get_args

from turnstate.durable.events import (
    AnyEvent,
    AssistantMessageEvent,
    CheckpointEvent,
    Status,
    ToolCallEvent,
    ToolResultEvent,
    UserInputEvent,
    read_events,
)
from turnstate.durable.layout import EVENTS, RUN_META
from turnstate.durable.resume import audit_run
from turnstate.reports.page import ReportError
from turnstate.reports.text import RUN_FOLDER_FIX, indented, inline, optional_json, printable, run_redactor


@dataclass(frozen=True)
class EventLogView:
    """What `events` shows of a run's log: whether it was checked, its text (none for a check), the
    reader's notes, the problems found, and for a sound check the one-line summary."""

    path: Path
    checked: bool
    text: str
    notes: list[str]
    problems: list[str]
    summary: str | None

    @property
    def failure(self) -> str | None:
        """The one line that says the log is not sound, and the fix (None when it is)."""
        if not self.problems:
            return None
        what = "breaks the log's rules" if self.checked else "has lines that are not events"
        return (
            f"{self.path} {what} ({len(self.problems)} problems above); fix: restore the file as the run wrote it, "
            "or report the run that wrote it with the file"
        )


def event_log(run_dir: Path, *, check: bool = False) -> EventLogView:
    """`run_dir`'s event log as `turnstate events` prints it, or with `check` verified against the run."""
    path = run_dir / EVENTS
    if not path.is_file():
        fix = RUN_FOLDER_FIX
        raise ReportError(f"{path}: missing; {fix}" if run_dir.is_dir() else f"{run_dir}: not a folder; {fix}")
    read = audit_run(run_dir) if check else read_events(path)
    logged = [event for _, event in read.events]
    text = ""
    if not check:
        redactor = run_redactor(optional_json(run_dir / RUN_META))
        made_by = {event.seq: event for event in logged if isinstance(event, AssistantMessageEvent)}
        lines = [line for event in logged for line in _event_lines(event, made_by)]
        text = printable(redactor.text("\n".join(lines))) if lines else ""
    summary = _summary(path, logged) if check and not read.problems else None
    return EventLogView(path, check, text, list(read.notes), list(read.problems), summary)


def _event_lines(event: AnyEvent, made_by: Mapping[int, AssistantMessageEvent]) -> list[str]:
    """One event as `events` prints it: a heading line (its number, turn, step and facts), its text below."""
    head = f"#{event.seq} turn {event.turn} step {event.step} · {event.kind}"
    match event:
        case UserInputEvent():
            return [f"{head} ({event.source})", *indented(event.text)]
        case AssistantMessageEvent():
            verdict = event.status if event.reason is None else f"{event.status}: {event.reason}"
            if event.status == "accepted":
                verdict += f", action {event.action}" if event.action is not None else ", a tool round"
            raw = f" · raw in {event.raw.file}, attempt {event.raw.attempt}" if event.raw else ""
            return [f"{head} attempt {event.attempt} · {verdict}{raw}", *indented(event.text)]
        case ToolCallEvent():
            message = made_by.get(event.message)
            status = message.status if message else "unknown"
            return [f"{head} {event.call_id}: {event.name}({inline(event.arguments)}) · of #{event.message} ({status})"]
        case ToolResultEvent():
            return [f"{head} {event.call_id}{' · error' if event.is_error else ''}", *indented(event.content)]
        case CheckpointEvent():
            return [f"{head} {event.checkpoint_id}"]


def _summary(path: Path, logged: list[AnyEvent]) -> str:
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
