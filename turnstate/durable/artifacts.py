"""Run artifacts: runs/<run-id>/run_meta.json, step_NNNNNN.json, compaction_NNN.json,
summary_input.json, failed_turn.json and transitions.jsonl.

Every record is built here, from plain values the runner hands over (the turn's `Attempt`s, its
usage, the transitions fired), so the runner only interprets effects and this module alone says
how a record spells what happened. A step record holds what is new in its request, not a copy of it
(`request_delta`): the request of the step it follows, less the oldest messages it dropped, plus
what it added. So the artifacts grow with the run, not with its square, and `sent_messages`
rebuilds any step's request as it was sent.

Artifacts are for people and downstream tools, so they hold readable projections only. One
`Redactor` per run enforces three rules, here rather than trusted to each caller, and the same
redactor cleans whatever the run shows on the terminal (its failure, its progress, its errors):
1. Opaque provider state (encrypted content, signatures, redacted thinking) is dropped by key.
2. Secrets (API keys) are redacted structurally and, where long enough to be one, by value: the
   value of a field or header that carries a key (KEY_FIELDS, and `Authorization: Bearer ...` or
   `x-api-key: ...` written in a text) whatever it is, and a key of MIN_SECRET_CHARS or more
   wherever a string holds it. A shorter key is a keyless server's placeholder (`x`, `EMPTY`,
   `ollama`): replaced by value, it would rewrite every word that holds its letters, records a
   resume reads back included (`"action_mode": "te[redacted]t"` for the key `x`).
3. An opaque value the run has received (the runner hands each reply's native items to `learn`) is
   replaced wherever a string repeats it: a provider can echo a blob into a reply's text or an
   error's code. Every encrypted_content, signature and redacted_thinking data in the recorded
   traffic (../shared/recorded) and from the local provider is base64 of 224 characters or more, so
   a value is known by its longest run of base64 characters, if that run has OPAQUE_MIN_CHARS; the
   run is kept as its length and hash (not its text: a long run receives thousands), indexed by its
   last GRAM characters (their first ones are a format's constant header, as OpenAI's "gAAAAAB").
All happen on the data before it is serialized, so whatever a secret looks like, every artifact
stays valid JSON; every container the writer may be handed (mappings, lists, tuples, sets,
dataclasses) is walked, and written as JSON's object or array.

A kill must not tear what was accepted: every JSON file is written whole (a temporary file in the
same folder, flushed and fsynced, then renamed over the target, the folder fsynced; a step record's
rename reaches the disk with the folder's next fsync, which the next other file's write makes, so a
step costs one fsync and run_meta.json still never counts a record a power loss could take), and the
transition log is flushed before each step record is handed to be written, so after a kill it is
never behind the step files. Step records are written on a thread of their own while the next turn
runs; any other file (run_meta.json above all) is written only once every step before it is, so a
run_meta.json never counts a step whose record is not on disk. The log is fsynced when the run
closes: each step record carries its own transitions, so if the machine itself loses power, the
fsynced step records are the record.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import string
from collections import deque
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from turnstate.adapters.contract import Item, ModelRequest, ToolCall, Usage
from turnstate.adapters.json_bytes import json_bytes
from turnstate.durable.jsonl import open_counted, whole_lines_of
from turnstate.durable.layout import EVENTS, TRANSITIONS, step_name
from turnstate.strategies.events import ReportSummary
from turnstate.strategies.summary import SummaryPass

OPAQUE_KEYS = frozenset({"encrypted_content", "signature", "thought_signature"})
OPAQUE_DATA_TYPE = "redacted_thinking"  # a block of this type holds opaque state under "data"
_OPAQUE_DATA_KEYS = OPAQUE_KEYS | {"data"}
REDACTED = "[redacted]"
MIN_SECRET_CHARS = 12
"""The shortest key redacted by value (rule 2): real providers' keys are 39 characters and more."""
KEY_FIELDS = frozenset(
    {"api_key", "api-key", "apikey", "authorization", "proxy-authorization", "x-api-key", "x-goog-api-key"}
)
"""Fields and headers (compared in lower case) whose value is a key, whatever its length (rule 2)."""
_KEY_IN_TEXT_PATTERN = (
    r"((?:proxy-)?authorization:\s*(?:bearer|basic)\s+|(?:x-goog-|x-)?api[-_]?key[\"']?\s*[:=]\s*[\"']?)[^\s\"',;]+"
)
_KEY_IN_TEXT = re.compile(_KEY_IN_TEXT_PATTERN, re.IGNORECASE)
# What a text holds, once lower-cased, if a key field's name or a key written in it is there: every
# name in KEY_FIELDS and every match of _KEY_IN_TEXT holds one of them. A substring search of the
# lowered text is C's speed; the case-blind pattern itself took 88 us on a 1.4 KB step record.
_KEY_HINTS = ("authorization", "api-key", "api_key", "apikey")
_KEY_HINTS_BYTES = tuple(hint.encode() for hint in _KEY_HINTS)

OPAQUE_MIN_CHARS = 64
"""The shortest run of base64 characters by which an opaque value is known (rule 3): longer than the
ids a record holds (37 characters at most on the local provider), far shorter than any blob."""
GRAM = 16  # the characters of a known run's tail that index it
_BASE64 = string.ascii_letters + string.digits + "+/=_-"  # both alphabets, and padding
_RUNS = re.compile(f"[{re.escape(_BASE64)}]+")
_LONG_RUNS = re.compile(f"(?<![{re.escape(_BASE64)}])[{re.escape(_BASE64)}]{{{OPAQUE_MIN_CHARS},}}")
# JSON writes base64 characters as they are: a record's text holds a long run wherever a string does.
_RUN_BYTES = bytes(ord("x") if chr(byte) in _BASE64 else ord(" ") for byte in range(256))
_LONG_RUN_BYTES = b"x" * OPAQUE_MIN_CHARS


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
        path = Path(run_dir) / step_name(at)
        try:
            delta = json.loads(path.read_text(encoding="utf-8"))["request"]
        except FileNotFoundError:
            raise StepRecordError(f"{path}: missing; fix: pass a run folder and a step it recorded") from None
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise StepRecordError(f"{path}: not a step record ({type(error).__name__})") from None
        problem = _delta_problem(delta, at)
        if problem is not None:
            raise StepRecordError(
                f"{path}: {problem} (a corrupted record); fix: restore the run folder as `turnstate run` wrote it"
            )
        chain.append(delta)
        at = delta["after_step"]
    texts = _event_texts(Path(run_dir), chain)
    messages: list[dict[str, Any]] = []
    for delta in reversed(chain):
        base = messages[:1] + messages[1 + delta["dropped"] :] if delta["after_step"] is not None else []
        messages = [*base, *(_resolved(message, texts) for message in delta["added"])]
    return messages


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


def _is_key_field(key: Any, value: Any) -> bool:
    """Whether `key: value` is a field or header that carries a key (rule 2)."""
    return isinstance(key, str) and isinstance(value, str) and bool(value) and key.lower() in KEY_FIELDS


def _hidden_keys(mapping: Mapping[Any, Any]) -> frozenset[str]:
    """The keys of `mapping` whose values are opaque provider state (rule 1)."""
    return _OPAQUE_DATA_KEYS if mapping.get("type") == OPAQUE_DATA_TYPE else OPAQUE_KEYS


def _opaque_values(value: Any, opaque: bool = False) -> Iterator[str]:
    """Every string held under an opaque key of `value` (native items: mappings, lists, tuples)."""
    if isinstance(value, str):
        if opaque:
            yield value
    elif isinstance(value, Mapping):
        hidden = _hidden_keys(value)
        for key, item in value.items():
            yield from _opaque_values(item, opaque or key in hidden)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _opaque_values(item, opaque)


class Redactor:
    """One run's redaction (the module's rules), for its artifacts and for all it shows: `scrub` for
    data, `text` for a string, `render` for a record's JSON text. Knows the run's secrets from the
    start and the opaque values it receives from `learn`."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        # Longest first, so a secret that contains another is replaced whole (rule 2: long ones only).
        long_enough = {secret for secret in secrets if len(secret) >= MIN_SECRET_CHARS}
        self._secrets = tuple(sorted(long_enough, key=len, reverse=True))
        self._markers = _scrub_markers(self._secrets)
        self._opaque: dict[str, tuple[tuple[int, int], ...]] = {}  # a run's tail -> (length, hash) of each

    def learn(self, items: Iterable[Any]) -> None:
        """Know every opaque value in `items` (a reply's native items) from now on (rule 3)."""
        for value in _opaque_values(tuple(items)):
            run = max(_RUNS.findall(value), key=len, default="")
            if len(run) >= OPAQUE_MIN_CHARS:
                known = self._opaque.get(run[-GRAM:], ())
                if (len(run), hash(run)) not in known:
                    self._opaque[run[-GRAM:]] = (*known, (len(run), hash(run)))

    def text(self, value: str) -> str:
        """`value` with each known opaque value, then each secret, replaced by REDACTED."""
        if self._opaque and len(value) >= OPAQUE_MIN_CHARS and _has_long_run(value.encode("utf-8", "surrogatepass")):
            value = self._without_opaque(value)
        for secret in self._secrets:
            value = value.replace(secret, REDACTED)
        lowered = value.lower()
        if not any(hint in lowered for hint in _KEY_HINTS):
            return value
        return _KEY_IN_TEXT.sub(lambda match: match.group(1) + REDACTED, value)

    def scrub(self, value: Any) -> Any:
        """A copy of `value` as JSON can hold it (any mapping an object; any list, tuple, set or
        dataclass an array or object), without opaque provider state, with every string passed
        through `text`, and non-finite numbers as null."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            hidden = _hidden_keys(value)
            return {
                _json_key(key): REDACTED if _is_key_field(key, item) else self.scrub(item)
                for key, item in value.items()
                if key not in hidden
            }
        if isinstance(value, (list, tuple)):
            return [self.scrub(item) for item in value]
        if isinstance(value, (set, frozenset)):
            return sorted((self.scrub(item) for item in value), key=repr)  # in an order that does not vary
        if is_dataclass(value) and not isinstance(value, type):
            return self.scrub({field.name: getattr(value, field.name) for field in fields(value)})
        if isinstance(value, float) and not math.isfinite(value):
            return None
        return value

    def render(self, data: Any, indent: bool = False) -> bytes:
        """`data` as one JSON document and its newline, scrubbed.

        Most records hold nothing to scrub, and their text says so: without any of the markers (an
        opaque key's name, a secret as JSON writes it, and, once the run knows an opaque value, a
        run of OPAQUE_MIN_CHARS base64 characters) they are written as they are, and only a record
        whose text holds a marker (or that JSON cannot hold as it is) is scrubbed first."""
        try:
            text = json_bytes(data, indent=indent)
            if (
                not any(marker in text for marker in self._markers)
                and not (self._opaque and _has_long_run(text))
                and not any(hint in text.lower() for hint in _KEY_HINTS_BYTES)
            ):
                return text + b"\n"
        except (ValueError, TypeError):  # non-finite numbers, sets, mappings that are not dicts
            pass
        return json_bytes(self.scrub(data), indent=indent) + b"\n"

    def _without_opaque(self, value: str) -> str:
        """`value` with every known opaque run in it replaced: each long run of base64 characters
        is searched for a known run's tail, character by character, and a tail found is checked
        by the hash of the whole run it ends."""
        spans = []
        for run in _LONG_RUNS.finditer(value):
            start = run.start()
            for end in range(start + GRAM, run.end() + 1):
                for length, digest in self._opaque.get(value[end - GRAM : end], ()):
                    if end - length >= start and hash(value[end - length : end]) == digest:
                        spans.append((end - length, end))
        if not spans:
            return value
        parts, at = [], 0
        for begin, end in sorted(spans):
            if begin >= at:
                parts += [value[at:begin], REDACTED]
            at = max(at, end)  # a span that overlaps the one before extends it
        return "".join(parts) + value[at:]


def _has_long_run(text: bytes) -> bool:
    """Whether `text` (UTF-8, or JSON) holds a run of OPAQUE_MIN_CHARS base64 characters: two passes
    in C, where looking for the runs themselves is a regular expression's pass in Python's engine."""
    return _LONG_RUN_BYTES in text.translate(_RUN_BYTES)


def _json_key(key: Any) -> Any:
    """A mapping's key as a JSON object can hold it (the encoders take text, numbers, booleans and null)."""
    return key if key is None or isinstance(key, (str, int, float)) else str(key)


class ArtifactWriter:
    """Writes one run's artifacts. Step records, one per turn, are written by a thread of their own
    while the run goes on (creating, fsyncing and renaming a file costs more than the rest of a
    turn's harness work); every other file waits for the steps before it, so nothing is ever written
    out of order, and an error writing a step is raised by the next write or by close."""

    def __init__(self, root: Path, run_id: str, redactor: Redactor | None = None, *, existing: bool = False) -> None:
        """Make <root>/<run_id>/, or with `existing` go on writing that folder (a resumed run)."""
        self.path = Path(root) / run_id
        if existing and not self.path.is_dir():
            raise FileNotFoundError(f"{self.path}: there is no run folder here")
        # Owner-only: it holds the checkpoint store, whose continuation may hold opaque provider state.
        self.path.mkdir(mode=0o700, parents=True, exist_ok=existing)
        self.redactor = redactor or Redactor()
        self._transitions, self._transition_lines = open_counted(self.path / TRANSITIONS)
        self._steps = ThreadPoolExecutor(max_workers=1, thread_name_prefix="turnstate-steps")  # in order
        self._pending: deque[Future[None]] = deque()

    def write_json(self, name: str, data: Any, *, reserve: bool = False) -> Path:
        """Write `name` whole or not at all (after every step record before it is on disk).

        With `reserve` (run_meta.json, which must say how a run ended even when the disk filled up
        under it), the file keeps room for its next write: its JSON is padded with trailing spaces
        (still JSON) to RESERVE_BYTES past the next multiple of them, and when the disk is too full
        for the temporary file, the new record overwrites the old one in place, within that room."""
        unwritten_step: OSError | None = None
        try:
            self.wait_for_steps()
        except OSError as error:  # a step record the disk had no room for: raised once run_meta.json is written
            if not reserve or error.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            unwritten_step = error
        target = self.path / name
        content = self._render(data, indent=True)
        if not reserve:
            self._write_whole(target, content)
            return target
        padded = content.ljust((len(content) // RESERVE_BYTES + 2) * RESERVE_BYTES, b" ")
        try:
            self._write_whole(target, padded)
        except OSError as error:
            if error.errno not in (errno.ENOSPC, errno.EDQUOT) or not _overwritten_in_place(target, content):
                raise
        if unwritten_step is not None:
            raise unwritten_step
        return target

    def write_step(self, index: int, record: dict[str, Any]) -> Path:
        """Render the step record now and write it on the steps' thread."""
        self._raise_failed_step()
        self._transitions.flush()  # to the OS, which a killed process cannot take back
        target = self.path / step_name(index)
        # Not indented: a step record is read through `turnstate show`, and indenting was 23% of its bytes.
        content = self._render(record)
        self._pending.append(self._steps.submit(self._write_whole, target, content, sync_folder=False))
        return target

    def wait_for_steps(self) -> None:
        """Block until every step record handed over is written; raise the first error doing so."""
        while self._pending:
            self._pending.popleft().result()

    def log_transition(self, record: dict[str, Any]) -> None:
        self._transitions.write(self._render(record))
        self._transition_lines += 1

    def last_transitions(self, count: int) -> TransitionLines:
        """Where the last `count` transitions logged are in transitions.jsonl."""
        return TransitionLines(self._transition_lines - count + 1, count)

    def sync_transitions(self) -> None:
        """Push every logged transition to disk, so the log is never behind the files written after it."""
        self._transitions.flush()
        os.fsync(self._transitions.fileno())

    def close(self) -> None:
        try:
            self.wait_for_steps()
        finally:
            self._steps.shutdown(wait=True)
            if not self._transitions.closed:
                self.sync_transitions()
                self._transitions.close()

    def _raise_failed_step(self) -> None:
        while self._pending and self._pending[0].done():
            self._pending.popleft().result()

    def _write_whole(self, target: Path, content: bytes, sync_folder: bool = True) -> None:
        """Temp file, fsync, rename over the target, fsync the folder (unless not `sync_folder`: a
        step record's, which the next other file's write syncs): whole or not at all. Plain descriptor
        calls, so the steps' thread runs next to no Python between its system calls."""
        temporary = target.with_name(f".{target.name}.tmp")
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
        try:
            unwritten = memoryview(content)
            while unwritten:
                unwritten = unwritten[os.write(descriptor, unwritten) :]
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        os.replace(temporary, target)
        if sync_folder:
            _fsync_directory(self.path)

    def _render(self, data: Any, indent: bool = False) -> bytes:
        return self.redactor.render(data, indent=indent)


def _scrub_markers(secrets: Sequence[str]) -> tuple[bytes, ...]:
    """What a record's JSON text holds if `scrub` would change the record: an opaque key's name (or
    the type whose "data" is opaque), and each secret as a JSON string holds it. JSON escapes a
    string character by character, so a string that holds a secret holds its escaped form, as both
    encoders `json_bytes` uses escape it."""
    names = [*OPAQUE_KEYS, OPAQUE_DATA_TYPE]
    escaped = {json.dumps(secret, ensure_ascii=False)[1:-1].encode() for secret in secrets}
    escaped |= {json_bytes(secret)[1:-1] for secret in secrets}
    return (*(f'"{name}"'.encode() for name in names), *escaped)


RESERVE_BYTES = 4096  # a page of most file systems: room run_meta.json keeps for its next write


def _overwritten_in_place(target: Path, content: bytes) -> bool:
    """`content` written over `target`'s own bytes (padded with spaces to its size, so no block is
    added), if it fits; whether it was. Not whole-or-nothing: for a disk too full for anything else."""
    temporary = target.with_name(f".{target.name}.tmp")
    temporary.unlink(missing_ok=True)  # what the failed write left
    try:
        size = target.stat().st_size
    except FileNotFoundError:
        return False
    if len(content) > size:
        return False
    descriptor = os.open(target, os.O_WRONLY)
    try:
        unwritten = memoryview(content.ljust(size, b" "))
        while unwritten:
            unwritten = unwritten[os.write(descriptor, unwritten) :]
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
    return True


def _fsync_directory(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


TRANSITION_KEYS = ("machine", "source", "trigger", "dest")


class TransitionLogError(ValueError):
    """A run's transitions.jsonl is missing, unreadable or not a run's log; the message says which line."""


@dataclass(frozen=True)
class TransitionLines:
    """Lines of transitions.jsonl: the `count` from line `first` (numbered from 1) on."""

    first: int
    count: int


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


def read_transition_log(log: Path, declared: Collection[str]) -> tuple[list[dict[str, str]], list[str]]:
    """A run's transition records and warnings about them, or TransitionLogError.

    A kill can leave the last record half-written, so a torn last line is skipped with a warning;
    anywhere else, a line that is not a transition record means the file is not a run's log."""
    try:
        lines = log.read_bytes().split(b"\n")
    except FileNotFoundError:
        raise TransitionLogError(f"{log}: missing; fix: pass a run folder that `turnstate run` wrote") from None
    except OSError as error:
        raise TransitionLogError(f"{log}: cannot read it ({error.strerror})") from None
    torn_tail = lines[-1] != b""  # a complete log ends with a newline
    records, warnings = [], []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            if torn_tail and number == len(lines):
                warnings.append(f"{log}: line {number} is a half-written last record (a killed run); skipped")
                continue
            raise TransitionLogError(
                f"{log}: line {number} is not JSON; fix: pass the {TRANSITIONS} of a run"
            ) from None
        if not isinstance(record, dict) or not all(isinstance(record.get(key), str) for key in TRANSITION_KEYS):
            needed = ", ".join(TRANSITION_KEYS)
            raise TransitionLogError(f"{log}: line {number} is not a transition record (needs {needed} as text)")
        if record["machine"] not in declared:
            names = ", ".join(declared)
            raise TransitionLogError(
                f"{log}: line {number} names machine {record['machine']!r}, which is not declared (declared: {names})"
            )
        records.append(record)
    if not records:
        raise TransitionLogError(f"{log}: no transitions recorded; nothing to draw")
    return records, warnings
