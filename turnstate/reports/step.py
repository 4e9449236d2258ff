"""One step of a run as a person reads it (`turnstate show`): the run's model and request settings, the
compaction and summary calls made before its request, what was dropped or compacted since the
previous step, the messages it sent (with their line breaks), and the reply.

Everything shown passes the run's redactor again (its key, if this shell holds it): the records were
written redacted, but a folder may come from elsewhere. A record around the step that cannot be read
is left out rather than failing the step; the step itself must be readable (ReportError otherwise)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from turnstate.durable.artifacts import StepRecordError, sent_messages
from turnstate.durable.layout import RUN_META, compaction_name, recorded_steps, step_name
from turnstate.durable.redaction import Redactor
from turnstate.durable.resume import number_spans
from turnstate.reports.page import ReportError
from turnstate.reports.run import level_actions
from turnstate.reports.text import (
    RUN_FOLDER_FIX,
    first_line,
    indented,
    inline,
    nested,
    optional_json,
    pairs,
    printable,
    run_redactor,
    tokens,
)


def step_messages(run_dir: Path, step: int) -> list[dict[str, Any]]:
    """The request step `step` of `run_dir` sent, as its readable messages, redacted."""
    _check_step(run_dir, step)
    return _messages(run_dir, step, run_redactor(optional_json(run_dir / RUN_META)))


def step_text(run_dir: Path, step: int) -> str:
    """Step `step` of `run_dir` as `turnstate show` prints it."""
    steps = _check_step(run_dir, step)
    meta = optional_json(run_dir / RUN_META)
    redactor = run_redactor(meta)
    messages = _messages(run_dir, step, redactor)
    path = run_dir / step_name(step)
    record = redactor.scrub(optional_json(path))
    if not isinstance(record, dict):
        raise ReportError(
            f"{path}: not a step record (not a JSON object); fix: restore the run folder as `turnstate run` wrote it"
        )
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
        lines += [f"[{index + 1}] {message.get('role', '?')}{mark}", *indented(message.get("content"))]
    lines += _reply_lines(record)
    return printable("\n".join(lines))


def _check_step(run_dir: Path, step: int) -> list[int]:
    """The run's recorded steps, which hold `step`."""
    try:
        steps = recorded_steps(run_dir)
    except OSError as error:
        raise ReportError(f"{run_dir}: cannot read the folder ({error.strerror}); {RUN_FOLDER_FIX}") from None
    if step not in steps:
        if not steps:
            raise ReportError(f"{run_dir} holds no step records; {RUN_FOLDER_FIX}")
        raise ReportError(
            f"{run_dir} recorded no step {step}; its steps are {number_spans(steps)}; fix: pass one of them"
        )
    return steps


def _messages(run_dir: Path, step: int, redactor: Redactor) -> list[dict[str, Any]]:
    try:
        return redactor.scrub(sent_messages(run_dir, step))
    except StepRecordError as error:
        raise ReportError(str(error)) from None


def _settings_lines(meta: Any) -> list[str]:
    if not isinstance(meta, dict):
        return [f"settings: unknown (no readable {RUN_META}: a run killed before it wrote one?)"]
    request = nested(meta, "settings", "request")
    request = request if isinstance(request, dict) else {}
    return [
        f"adapter {inline(meta.get('adapter_id'))} (review status {inline(meta.get('review_status'))}), "
        f"strategy {inline(meta.get('strategy'))}",
        f"compaction: {pairs(nested(meta, 'runtime', 'compaction'))}",
        f"request: {pairs({key: value for key, value in request.items() if key != 'options'})}",
        f"request options: {inline(request.get('options', {}))}",
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
            about.append(f"summary input {pairs(call['summary_input'])}")
        about.append(tokens(call.get("usage")))
        if call.get("waited_seconds"):
            about.append(f"then waited {call['waited_seconds']}s")
        lines.append(f"  {number}. " + " · ".join(about))
        if call.get("diagnostics"):
            lines.append(f"     diagnostics {inline(call['diagnostics'])}")
        if call.get("response_text"):
            lines += ["     reply:", *indented(call["response_text"], "       ")]
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
        lines += [f"    - {first_line(message)}" for message in dropped]
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
        cost = f"; its calls' {tokens(compaction['usage'], compaction.get('cost_estimate'))}"
        lines.append(f"  compaction committed: {pairs(facts)}{cost if compaction.get('usage') else ''}")
    continuation = record.get("continuation")
    if isinstance(continuation, dict):
        number = continuation.get("compaction")
        name = compaction_name(number) if isinstance(number, int) else None
        summary = redactor.scrub(optional_json(run_dir / name)) if name else None
        if isinstance(summary, dict):
            lines.append(f"  harness summary {name}: {pairs({key: summary.get(key) for key in SUMMARY_FACTS})}")
        lines += ["  summary installed (its bridge is a new message below):", *indented(continuation.get("summary"))]
    return lines


SUMMARY_FACTS = (
    "lane",
    "completed_context_tokens",
    "summarized_turns",
    "excluded_turns",
    "items_before",
    "items_after",
    "overflow_recoveries",
)
"""What `show` tells of the harness summary a step installed, from its compaction record."""


def _reply_lines(record: dict[str, Any]) -> list[str]:
    lines = _calls_lines("action requests that did not yield the action (retries)", record.get("retries"))
    lines += ["", "reply:"]
    if record.get("reasoning_summary"):
        lines += ["  reasoning summary:", *indented(record["reasoning_summary"])]
    lines += ["  response:", *indented(record.get("response_text"))]
    if record.get("cut"):
        lines.append(f"  cut to fit the record: {inline(record['cut'])}")
    for call in record.get("tool_calls") or []:
        if isinstance(call, dict):
            lines.append(
                f"  tool call {inline(call.get('id'))}: {inline(call.get('name'))}({inline(call.get('arguments'))})"
            )
    action = record.get("action")
    lines.append(
        f"  action: {inline(action)}"
        if action is not None
        else "  action: none, a tool round (the results of its calls open the next step)"
    )
    lines.append(f"  {tokens(record.get('usage'), record.get('cost_estimate'))}")
    return lines
