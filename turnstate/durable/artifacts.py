"""Run records: what run_meta.json, the step records, the compaction records, summary_input.json
and failed_turn.json hold (durable/layout.py names them).

Every record is built here, from plain values the runner hands over (the turn's `Attempt`s, its
usage, the transitions fired), so the runner only interprets effects and this module alone says
how a record spells what happened. A step record holds what is new in its request, not a copy of it
(`request_delta`): the request of the step it follows, less the oldest messages it dropped, plus
what it added. So the artifacts grow with the run, not with its square, and `sent_messages`
rebuilds any step's request as it was sent.

The records hold readable projections only: durable/redaction.py says what a run never writes,
and durable/writer.py how each file is written so that a kill tears nothing accepted.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from turnstate.adapters.contract import Item, ModelRequest, ToolCall, Usage
from turnstate.adapters.json_bytes import json_bytes
from turnstate.durable.jsonl import whole_lines_of
from turnstate.durable.layout import EVENTS, TRANSITIONS, step_name
from turnstate.durable.transition_log import TransitionLines
from turnstate.strategies.events import ReportSummary
from turnstate.strategies.summary import SummaryPass

ACTION_METADATA_BYTES = 16 * 1024
"""The seed's action-metadata size: a step record's visible output and reasoning summary, as JSON
encodes them, fit in it together; a text cut to fit says so."""
CUT_MARK = "\n[cut to fit the action record: {kept} of {total} characters kept]"


def request_delta(
    previous: tuple[int, ModelRequest] | None,
    request: ModelRequest,
    readable: Callable[[Sequence[Item]], list[dict[str, str]]],
    logged: Callable[[str], int | None] = lambda text: None,
) -> dict[str, Any]:
    """How `request` follows from the previous step's (its step and request): the same system
    message, then the previous request's items less the `dropped` oldest, then `added`, all as
    `readable` projects them. With no such relation (the first step, a new system prompt, a rebuilt
    history), the whole request is `added`, after no step. Beside them: `items_sent`, how many
    native items the request held, and `input_items`, the structural descriptors of the items it
    added (item_descriptor), so a record names every item sent once, where it first went out.

    Items are compared, and only what was dropped or added is projected, so a record costs what the
    request changed; the kept items are the same objects turn after turn, so even comparing them is
    cheap. `readable` must project item by item (a list's projection is its items', concatenated).
    An added message whose content is the very text of an event in events.jsonl (`logged` gives that
    event's number: the observation, the last reply, a tool result) names the event instead of copying
    the text, {"role": ..., "event": N}: the log holds each text once, and `sent_messages` resolves it."""
    delta: dict[str, Any] | None = None
    if previous is not None and previous[1].system == request.system:
        step, before = previous
        for dropped in range(len(before.items) + 1):
            kept = len(before.items) - dropped
            if request.items[:kept] == before.items[dropped:]:
                added = readable(request.items[kept:])
                dropped_messages = len(readable(before.items[:dropped]))
                delta = {"after_step": step, "dropped": dropped_messages, "added": added}
                new_items = request.items[kept:]
                break
    if delta is None:
        system = {"role": "system", "content": request.system}
        delta = {"after_step": None, "dropped": 0, "added": [system, *readable(request.items)]}
        new_items = request.items
    delta["added"] = [_pointing(message, logged) for message in delta["added"]]
    return delta | {"items_sent": len(request.items), "input_items": [item_descriptor(item) for item in new_items]}


def _pointing(message: dict[str, Any], logged: Callable[[str], int | None]) -> dict[str, Any]:
    content = message.get("content")
    event = logged(content) if isinstance(content, str) and message.get("role") != "system" else None
    if event is None:
        return message
    return {**{key: value for key, value in message.items() if key != "content"}, "event": event}


def item_descriptor(item: Item) -> dict[str, Any]:
    """What an artifact may say of a native item: its type, id and role, the types of its content
    blocks and the ids of its tool calls; never a body, so never any opaque state."""
    described: dict[str, Any] = {"type": str(item.get("type", "message"))}
    for key in ("id", "role", "call_id", "tool_call_id"):
        if isinstance(item.get(key), str):
            described[key] = item[key]
    content = item.get("content")
    if isinstance(content, list):
        described["blocks"] = [str(part.get("type")) for part in content if isinstance(part, dict)]
    calls = item.get("tool_calls")
    if isinstance(calls, list):
        described["tool_calls"] = [str(call.get("id")) for call in calls if isinstance(call, dict)]
    return described


def fitted(
    texts: dict[str, str | None], redact: Callable[[str], str] | None = None, limit: int = ACTION_METADATA_BYTES
) -> tuple[dict[str, str | None], list[str]]:
    """`texts` fitted so that, as JSON encodes them, they take at most `limit` bytes together, and the
    names of those that were cut. Each text gets an even share of what the smaller ones leave; a cut
    one keeps its head and ends with CUT_MARK. Redacted first (`redact`, a Redactor's `text`): a
    cut through a secret or an opaque value would leave a head that no longer matches it."""
    if redact is not None:
        texts = {name: None if text is None else redact(text) for name, text in texts.items()}
    sizes = {name: len(json_bytes(text)) for name, text in texts.items() if text is not None}
    if sum(sizes.values()) <= limit:
        return texts, []
    result, cut = dict(texts), []
    budget, left = limit, len(sizes)
    for name in sorted(sizes, key=sizes.__getitem__):
        share = budget // left
        text = str(texts[name])
        if sizes[name] > share:
            result[name] = _cut_to(text, share)
            cut.append(name)
        budget -= len(json_bytes(result[name]))
        left -= 1
    return result, sorted(cut)


def _cut_to(text: str, limit: int) -> str:
    """The longest head of `text`, with its CUT_MARK, that JSON encodes in at most `limit` bytes."""
    low, high = 0, len(text)
    while low < high:  # the largest k whose cut fits
        middle = (low + high + 1) // 2
        if len(json_bytes(text[:middle] + CUT_MARK.format(kept=middle, total=len(text)))) <= limit:
            low = middle
        else:
            high = middle - 1
    return text[:low] + CUT_MARK.format(kept=low, total=len(text))


# The records. Each function takes what happened as plain values and returns the record as written
# (the writer redacts it whole); texts a record repeats from a reply are fitted here, redacted first.

CallKind = Literal["action", "compaction", "summary"]
"""What a provider call of a turn was for: the action request, a native compaction call, or a harness
summary's call (an ordinary call of the adapter)."""


@dataclass
class Attempt:
    """One provider call of a turn, as the records show it."""

    kind: CallKind
    request: ModelRequest
    outcome: str  # replied, then accepted or action_rejected; compacted; or the failure's error kind
    usage: Usage
    response_text: str | None = None
    reasoning_summary: str | None = None
    problem: str | None = None
    diagnostics: dict[str, Any] = field(default_factory=dict)
    waited_seconds: float = 0.0  # the wait the machine asked for after this attempt, before the next
    summarized_items: int | None = None  # a compaction call's: how many accepted items it was asked to replace
    compaction_items: int = 0  # how many compaction items the reply returned (a call's, or an inline one's)
    # A harness summary's input, told before the call (its lane and form, how many turns it summarizes
    # and how many recent ones it left out to fit), so the record of a failed attempt keeps it too.
    summary_input: dict[str, Any] | None = None

    @property
    def failed(self) -> bool:
        """Whether it counts among the run's failed attempts: a compaction call that compacted did its job."""
        return self.outcome not in ("accepted", "compacted")


def attempt_record(attempt: Attempt, redact: Callable[[str], str]) -> dict[str, Any]:
    """An attempt as a step's `retries` and `compaction_calls`, a summary's and a failed turn's
    `attempts` list it."""
    texts, cut = fitted({"response_text": attempt.response_text}, redact)
    return {
        "outcome": attempt.outcome,
        **({"summary_input": attempt.summary_input} if attempt.summary_input is not None else {}),
        "problem": attempt.problem,
        "diagnostics": attempt.diagnostics,
        "usage": attempt.usage.to_dict(),
        **texts,
        **({"cut": cut} if cut else {}),
        "waited_seconds": round(attempt.waited_seconds, 3),
    }


def summary_input(summary_pass: SummaryPass) -> dict[str, Any]:
    """What a harness summary's call is told to summarize (seed 003's fidelity disclosure): its lane
    and form, the turns it summarizes and those it leaves out to fit."""
    return {
        "lane": summary_pass.lane,
        "form": "fork" if summary_pass.fork else "independent",
        "summarized_turns": summary_pass.summarized_turns,
        "excluded_turns": summary_pass.excluded_turns,
    }


def step_record(
    index: int,
    request: dict[str, Any],
    action: str | None,
    calls: Sequence[ToolCall],
    attempts: Sequence[Attempt],
    *,
    usage: Usage,
    history: tuple[int, int],
    summary: tuple[int, ReportSummary] | None,
    transitions: TransitionLines,
    cost: Callable[[Usage], float],
    redact: Callable[[str], str],
) -> dict[str, Any]:
    """The record of an accepted step: `request` is its request_delta, `action` None for a tool round,
    `calls` the tool calls of the accepted reply (their arguments as compact JSON text, redacted; their
    results are in the next step's request), `attempts` the turn's calls in
    order (the accepted action request last), `usage` all they cost since the previous step,
    `history` the accepted history's size in items before the turn and after its commit, `summary`
    the number and report of a harness summary it committed. `retries` are the action requests
    that did not yield the action; `compaction_calls` every compaction or summary call of the turn,
    failed ones included (compacting is not retrying); `transitions` the lines of transitions.jsonl
    that hold the transitions it fired (`step_transitions` reads them), which are not copied here."""
    accepted = attempts[-1]
    texts, cut = fitted(
        {"response_text": accepted.response_text, "reasoning_summary": accepted.reasoning_summary}, redact
    )
    retries = [attempt for attempt in attempts[:-1] if attempt.kind == "action"]
    return {
        "step": index,
        "request": request,
        **texts,
        **({"cut": cut} if cut else {}),
        "action": action,
        **({"tool_calls": [_call_record(call, redact) for call in calls]} if calls else {}),
        "usage": usage.to_dict(),
        "cost_estimate": cost(usage),
        "retries": [attempt_record(attempt, redact) for attempt in retries],
        "compaction_calls": [attempt_record(attempt, redact) for attempt in _compaction_calls(attempts)],
        "history": {"items_before": history[0], "items_after": history[1]},
        "compaction": _step_compaction(attempts, cost),
        **({"continuation": _continuation(*summary)} if summary is not None else {}),
        "transitions": asdict(transitions),
    }


def _call_record(call: ToolCall, redact: Callable[[str], str]) -> dict[str, str]:
    arguments = json.dumps(call.arguments, separators=(",", ":"), ensure_ascii=False)
    return {"id": call.id, "name": call.name, "arguments": redact(arguments)}


def _compaction_calls(attempts: Sequence[Attempt]) -> list[Attempt]:
    """A turn's compaction calls (a native one's or a harness summary's), failed ones included."""
    return [attempt for attempt in attempts if attempt.kind != "action"]


def _step_compaction(attempts: Sequence[Attempt], cost: Callable[[Usage], float]) -> dict[str, Any] | None:
    """The compaction a step committed, if any, never its payload: how it was made (`inline` in the
    accepted reply, by a `call` of its own, or a harness `summary`), how many compaction items came
    back, how many accepted items it replaced (a call's or a summary's; an inline one replaces all
    before it, which `history` shows), and the usage of the turn's compaction calls alone (already
    in the step's usage; an inline compaction's is not reported apart) with its configured-price cost."""
    accepted = attempts[-1]
    calls = _compaction_calls(attempts)
    compacted = [attempt for attempt in calls if attempt.outcome == "compacted"]
    if compacted:
        usage = sum((attempt.usage for attempt in calls), Usage())
        committed = compacted[-1]
        return {
            "by": "summary" if committed.kind == "summary" else "call",
            "items_returned": committed.compaction_items,
            "summarized_items": committed.summarized_items,
            "usage": usage.to_dict(),
            "cost_estimate": cost(usage),
        }
    if accepted.compaction_items:
        return {
            "by": "inline",
            "items_returned": accepted.compaction_items,
            "summarized_items": None,
            "usage": None,
            "cost_estimate": None,
        }
    return None


def _continuation(number: int, report: ReportSummary) -> dict[str, Any]:
    """What the step that committed a harness summary records of it: which compaction record, the
    summary and the exact bridge sent in its place."""
    return {"compaction": number, "summary": report.summary, "bridge": report.bridge}


def compaction_record(
    number: int,
    report: ReportSummary,
    attempts: Sequence[Attempt],
    *,
    step: int,
    cost: Callable[[Usage], float],
    redact: Callable[[str], str],
) -> dict[str, Any]:
    """compaction_NNN.json for the run's `number`th harness summary, committed with its turn's action
    (`attempts`, the turn's calls) as step `step`: the summary and how it was made (a resume without
    the continuation starts from it: its step and excluded turns say which turns follow it), every summary attempt with the
    input it was told, and their usage; no opaque provider state. `completed_context_tokens` is the
    completed context that scheduled it (None on an overflow lane); the configured threshold is
    run_meta.json's runtime.compaction.trigger_tokens."""
    calls = _compaction_calls(attempts)
    summarized = report.summary_pass
    usage = sum((attempt.usage for attempt in calls), Usage())
    return {
        "compaction": number,
        "step": step,
        "lane": summarized.lane,
        "completed_context_tokens": report.completed_context_tokens,
        "summary": report.summary,
        "items_before": report.items_before,
        "items_after": report.items_after,
        "summarized_turns": summarized.summarized_turns,
        "excluded_turns": summarized.excluded_turns,
        "overflow_recoveries": report.overflow_recoveries,
        "attempts": [attempt_record(attempt, redact) for attempt in calls],
        "usage": usage.to_dict(),
        "cost_estimate": cost(usage),
    }


def failed_turn_record(
    index: int,
    failure: str | None,
    attempts: Sequence[Attempt],
    *,
    usage: Usage,
    transitions: list[dict[str, str]],
    redact: Callable[[str], str],
) -> dict[str, Any]:
    """Why the turn failed closed, attempt by attempt in order (allowlisted diagnostics only), with
    the usage no accepted step holds."""
    return {
        "turn": index,
        "failure": failure,
        "attempts": [attempt_record(attempt, redact) for attempt in attempts],
        "usage": usage.to_dict(),
        "transitions": transitions,
    }


class RunFigures(Protocol):
    """What run_meta.json's totals are made of (the runner's RunResult)."""

    outcome: str
    failure: str | None
    turns: int
    accepted_actions: int
    failed_attempts: int
    levels_won: int
    compactions: int
    usage: Usage
    unattributed_usage: Usage
    cost: float
    wall_seconds: float
    provider_seconds: float
    rate_limit_seconds: float


def run_totals(figures: RunFigures, *, provider_calls: int, failed_turn: str | None) -> dict[str, Any]:
    """run_meta.json's totals: the run's figures, its provider calls, and the name of the failed turn's
    record (or null)."""
    return {
        "outcome": figures.outcome,
        "failure": figures.failure,
        "turns": figures.turns,
        "accepted_actions": figures.accepted_actions,
        "failed_attempts": figures.failed_attempts,
        "levels_won": figures.levels_won,
        "provider_calls": provider_calls,
        "compactions": figures.compactions,
        "usage": figures.usage.to_dict(),
        "unattributed_usage": figures.unattributed_usage.to_dict(),
        "cost_estimate": figures.cost,
        "wall_seconds": round(figures.wall_seconds, 3),
        "provider_seconds": round(figures.provider_seconds, 3),
        "rate_limit_seconds": round(figures.rate_limit_seconds, 3),
        "failed_turn": failed_turn,
    }


class StepRecordError(ValueError):
    """A run folder's step records cannot give back a request (missing or not a step's record)."""


def sent_messages(run_dir: Path, step: int) -> list[dict[str, Any]]:
    """The readable request of `step` as it was sent, rebuilt from its record and the ones it follows.
    Each record follows an earlier step or none, so the chain ends; a record that says otherwise
    (edited, or from a corrupted run folder) is a StepRecordError naming its file."""
    chain = []
    at: int | None = step
    while at is not None:
        delta = request_record(Path(run_dir), at)
        chain.append(delta)
        at = delta["after_step"]
    texts = _event_texts(Path(run_dir), chain)
    messages: list[dict[str, Any]] = []
    for delta in reversed(chain):
        messages = _followed(messages, delta, texts)
    return messages


def sent_requests(run_dir: Path, steps: Sequence[int]) -> dict[int, list[dict[str, Any]]]:
    """The readable request of each of `steps` (the run's recorded steps), as `sent_messages` gives
    one, rebuilt in one pass over the records: each step's from the request it follows. A StepRecordError
    names a record that follows a step not among them."""
    records = {step: request_record(Path(run_dir), step) for step in sorted(steps)}
    texts = _event_texts(Path(run_dir), list(records.values()))
    requests: dict[int, list[dict[str, Any]]] = {}
    for step, delta in records.items():
        after = delta["after_step"]
        if after is not None and after not in requests:
            raise StepRecordError(
                f"{Path(run_dir) / step_name(step)}: follows step {after}, which the folder does not hold; fix: "
                "restore the run folder as `turnstate run` wrote it"
            )
        requests[step] = _followed(requests[after] if after is not None else [], delta, texts)
    return requests


def request_record(run_dir: Path, step: int) -> dict[str, Any]:
    """Step `step`'s request record (its request_delta), checked; a StepRecordError names its file."""
    path = run_dir / step_name(step)
    try:
        delta = json.loads(path.read_text(encoding="utf-8"))["request"]
    except FileNotFoundError:
        raise StepRecordError(f"{path}: missing; fix: pass a run folder and a step it recorded") from None
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise StepRecordError(f"{path}: not a step record ({type(error).__name__})") from None
    problem = _delta_problem(delta, step)
    if problem is not None:
        raise StepRecordError(
            f"{path}: {problem} (a corrupted record); fix: restore the run folder as `turnstate run` wrote it"
        )
    return delta


def _followed(before: list[dict[str, Any]], delta: Mapping[str, Any], texts: Mapping[int, str]) -> list[dict[str, Any]]:
    """The request `delta` records, from `before`, the request of the step it follows (if it follows one):
    the same system message, less the `dropped` oldest, then `added`."""
    base = before[:1] + before[1 + delta["dropped"] :] if delta["after_step"] is not None else []
    return [*base, *(_resolved(message, texts) for message in delta["added"])]


def _event_texts(run_dir: Path, deltas: Sequence[Mapping[str, Any]]) -> dict[int, str]:
    """The texts of the events the request records `deltas` name, read from the run's events.jsonl
    (only when one names any); a StepRecordError when the log does not hold one of them."""
    named = {message["event"] for delta in deltas for message in delta["added"] if "event" in message}
    if not named:
        return {}
    path = run_dir / EVENTS
    texts: dict[int, str] = {}
    try:
        for line in whole_lines_of(path.read_bytes()):
            event = json.loads(line)
            if event.get("seq") in named:
                texts[event["seq"]] = event["content"] if event["kind"] == "tool_result" else event["text"]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        raise StepRecordError(f"{path}: cannot be read for the texts the step records name") from None
    missing = sorted(named - texts.keys())
    if missing:
        raise StepRecordError(
            f"{path}: holds no event {missing[0]}, whose text a step record names; fix: restore the run folder "
            "as `turnstate run` wrote it"
        )
    return texts


def _resolved(message: Mapping[str, Any], texts: Mapping[int, str]) -> dict[str, Any]:
    if "event" not in message:
        return dict(message)
    return {**{key: value for key, value in message.items() if key != "event"}, "content": texts[message["event"]]}


def _delta_problem(delta: Any, step: int) -> str | None:
    """What makes `delta`, step `step`'s request record, unusable by sent_messages, or None."""
    if not isinstance(delta, dict):
        return f"request is a {type(delta).__name__}, not an object"
    after = delta.get("after_step")
    if after is not None and not (is_count(after) and 1 <= after < step):
        return f"request.after_step is {after!r}, not null or an earlier step than {step}"
    if not is_count(delta.get("dropped")):
        return f"request.dropped is {delta.get('dropped')!r}, not a count of messages"
    added = delta.get("added")
    if not isinstance(added, list) or not all(isinstance(message, dict) for message in added):
        return "request.added is not a list of messages"
    if not all(is_count(message["event"]) for message in added if "event" in message):
        return "request.added names an event that is not a number"
    return None


def is_count(value: Any) -> bool:
    """Whether a record's `value` is a count: a whole number, not a bool, not negative."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def step_transitions(run_dir: Path, record: Mapping[str, Any]) -> list[dict[str, str]]:
    """The transitions a step record's step fired, read from the lines of transitions.jsonl it names;
    a StepRecordError when the log does not hold them."""
    where: Any = record.get("transitions")
    path = Path(run_dir) / TRANSITIONS
    try:
        lines = whole_lines_of(path.read_bytes())[where["first"] - 1 : where["first"] - 1 + where["count"]]
        if len(lines) != where["count"]:
            raise ValueError
        return [json.loads(line) for line in lines]
    except (OSError, ValueError, KeyError, TypeError):
        raise StepRecordError(f"{path}: does not hold the transitions step {record.get('step')} names") from None
