"""The normalized event log: a run's conversation as facts in causal order, in `events.jsonl`.

Five kinds of event, whatever the provider (the seed's minimal cross-provider layer):
`user_input`, `assistant_message`, `tool_call`, `tool_result` and `checkpoint`. The log states what
happened and in which order; it never translates one provider's reasoning into another's, so it is
the projection a model switch or a resume can rebuild a conversation from, and nothing more.

Rules the log keeps (`check_events` verifies each; `EventLog` writes logs that keep them when its
caller reports what the session did):
1. Every event says the format it is written in (`v`: FORMAT, below) and has a sequence number, from
   1 and one more on each line down the file (a gap is lost events), and the turn and step it
   belongs to (the step is the step record the turn commits as, or would have); neither goes back.
2. Every reply the model gave a verdict on is an assistant_message with its status: `accepted`,
   `rejected` (with the caller's reason), `refused` (a provider refusal, with its reason) or `failed`
   (the turn failed closed, with why). Approvals and refusals stay visible; a rejected attempt is
   never history: it is never accepted later, and its calls are never answered. A step is accepted
   once, a turn that failed closed is never accepted, and only a reply (accepted or rejected) calls.
3. A tool_call names the assistant_message that made it (its sequence number). The calls of an
   accepted message are answered exactly once each, by a later tool_result with the call's id,
   before any reply of a later turn; a result never answers a call no earlier line made. Calls an
   accepted reply made just before the log ends may have no result yet (the run ended, or was
   killed): that is a note, not a problem.
4. A checkpoint holds the accepted state up to its step: that step's accepted assistant_message comes
   before it. Checkpoint ids are unique.
5. A message refers to its raw provider payload by the record that keeps its readable projection
   (`raw`: the step record file, or failed_turn.json, and its attempt), never by the payload: opaque
   values (encrypted reasoning, signatures) are never written. Every text (inputs, replies, reasons,
   the arguments' strings, results, actions) passes the caller's redaction before it is written.
   Ids are written as the provider gave them (they pair calls with results, and are not secret).

How a session reports to the log (turnstate/session/session.py): `observe(observation, results)` logs each
result as a tool_result, then the observation as a user_input (source `observation`); `buffer(text)`
a user_input (source `buffered`); `reject` the held reply as a rejected assistant_message, with its
calls; `accept` the held reply as an accepted one, then its calls, then the checkpoint that makes
the turn durable; a provider refusal a refused message; FailedClosed a failed one. A resumed run
reopens the log and goes on numbering.

Durability: one JSON line per event, flushed to the OS as it is written, so a killed process loses
at most the line being written. An event is in the log once its line ends with a newline: a last
line without one is torn, and readers ignore it with a note. Reopening a log to append cuts a torn
line off first and numbers on from the last whole event. The file is fsynced on close and by `sync`.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Annotated, Any, Final, Literal, TypeVar, get_args

import orjson
from pydantic import ConfigDict, Field, TypeAdapter, ValidationError

from turnstate.adapters.contract import ToolCall, ToolResult
from turnstate.adapters.json_bytes import json_bytes
from turnstate.durable.checkpoints import ProjectionMark
from turnstate.durable.jsonl import open_append, whole_lines_of
from turnstate.durable.layout import EVENTS

FORMAT: Final = 2
"""The format events are written in, each line's `v` (a line without one is format 1, which wrote
none). A change to what a line holds makes it the next, with a function in MIGRATIONS that makes a
line of the previous format this one's; readers upgrade each line as they read it, so a log that
different versions wrote (a run resumed by a newer turnstate) reads whole, and its bytes, which the
checkpoints hold a digest of, never change."""

MIGRATIONS: Final[dict[int, Callable[[dict[str, Any]], dict[str, Any]]]] = {
    1: dict,  # 2 added a tool_result's `ran` (when the tool ran), which no line of format 1 knew: it has none
}
"""format -> what makes a line of it the next format's (tests/durable/test_old_records.py resumes
the run folders that earlier formats left)."""

Status = Literal["accepted", "rejected", "refused", "failed"]
Source = Literal["observation", "buffered"]  # a user input came with an observation, or was buffered


@dataclass(frozen=True)
class RawRef:
    """Where a message's raw provider call is recorded for debugging: a run folder's record file
    (step_NNNNNN.json, failed_turn.json) and the attempt, the turn's provider calls counted from 1."""

    file: str
    attempt: int


@dataclass(frozen=True, kw_only=True)
class Event:
    """What every event has: the format it is written in, its kind, its place in causal order, and
    the turn and step it belongs to."""

    v: int = FORMAT
    kind: str
    seq: int
    turn: int
    step: int

    def __post_init__(self) -> None:
        if self.v > FORMAT:
            raise ValueError(
                f"format {self.v}, which a newer turnstate wrote (this one reads up to {FORMAT}); "
                "fix: read the run with the turnstate that wrote it"
            )
        if self.seq < 1 or self.turn < 0 or self.step < 0:
            raise ValueError("seq counts from 1; turn and step are never negative")


@dataclass(frozen=True, kw_only=True)
class UserInputEvent(Event):
    """An input: its text, and the digests of the images it showed (their files: durable/images.py)."""

    kind: Literal["user_input"] = "user_input"
    text: str
    source: Source
    images: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class AssistantMessageEvent(Event):
    """A reply with the verdict on it. `attempt` is the turn's provider call that gave it, from 1;
    `action` is the action an accepted reply committed (None for a tool round, or any other status)."""

    kind: Literal["assistant_message"] = "assistant_message"
    text: str
    status: Status
    reason: str | None = None
    attempt: int
    action: str | None = None
    raw: RawRef | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.status == "accepted" and self.reason is not None:
            raise ValueError("an accepted message has no reason")
        if self.status != "accepted" and not self.reason:
            raise ValueError(f"a {self.status} message needs a reason")
        if self.action is not None and self.status != "accepted":
            raise ValueError(f"a {self.status} message committed no action")
        if self.attempt < 1 or (self.raw is not None and self.raw.attempt != self.attempt):
            raise ValueError("attempt counts from 1, and raw.attempt is the message's attempt")


@dataclass(frozen=True, kw_only=True)
class ToolCallEvent(Event):
    """A call a reply made: `message` is the sequence number of that reply's assistant_message."""

    kind: Literal["tool_call"] = "tool_call"
    call_id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    message: int


@dataclass(frozen=True, kw_only=True)
class ToolResultEvent(Event):
    """A call's result: its text, the digests of the images it showed (as a user_input's), and when
    the tool ran, (start, end) in Unix nanoseconds, when its caller timed it (ToolResult.ran)."""

    kind: Literal["tool_result"] = "tool_result"
    call_id: str
    content: str
    is_error: bool = False
    images: tuple[str, ...] = ()
    ran: tuple[int, int] | None = None


@dataclass(frozen=True, kw_only=True)
class CheckpointEvent(Event):
    kind: Literal["checkpoint"] = "checkpoint"
    checkpoint_id: str  # the step it holds is `step`, the last accepted one (0: none yet)


AnyEvent = UserInputEvent | AssistantMessageEvent | ToolCallEvent | ToolResultEvent | CheckpointEvent
KINDS: tuple[str, ...] = tuple(event.kind for event in get_args(AnyEvent))

# One line's event, checked strictly (no number read from text, no bool as a number); keys it does
# not know are ignored, so a later version's extra fields do not make an old reader fail.
_LINE = TypeAdapter[AnyEvent](
    Annotated[AnyEvent, Field(discriminator="kind")],
    config=ConfigDict(strict=True),
)


_E = TypeVar("_E", bound=Event)


class EventLogError(Exception):
    """An events.jsonl that cannot be appended to (not a log, or unreadable); the message names the
    file, the line and the fix."""


def parse_event(line: bytes) -> AnyEvent:
    """One line's event, or ValueError saying in one line what is wrong with it: where (the kind,
    then the field) and what. A line of an earlier format is read as the migrations make it."""
    try:
        event = _LINE.validate_json(line)
        if event.v == FORMAT:
            return event
    except ValidationError as error:  # a line of an earlier format may not be one of today's
        first = error.errors()[0]
    upgraded = _upgraded(line)
    if upgraded is not None:
        try:
            return _LINE.validate_json(orjson.dumps(upgraded))  # JSON's rules: a list is a tuple
        except ValidationError as error:
            first = error.errors()[0]
    if first["type"] == "json_invalid":
        raise ValueError("not JSON")
    if first["type"] in ("union_tag_invalid", "union_tag_not_found"):
        raise ValueError(f"kind is not one of {', '.join(KINDS)}")
    kind, *inside = [str(part) for part in first["loc"]] or ["not an event"]
    where = [kind, ".".join(inside)] if inside else [kind]
    raise ValueError(": ".join([*where, str(first["msg"]).removeprefix("Value error, ")]))


def _upgraded(line: bytes) -> dict[str, Any] | None:
    """The line made the current format's, when an earlier format wrote it (None: it is not one)."""
    try:
        raw = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    version = raw.get("v", 1) if isinstance(raw, dict) else None
    if type(version) is not int or not 1 <= version < FORMAT:
        return None
    while version < FORMAT:
        raw, version = MIGRATIONS[version](raw), version + 1
    return raw | {"v": FORMAT}


RECENT = 64  # texts an EventLog remembers: more than one turn's inputs, its results and the last reply


class EventLog:
    """Appends a run's events to `path` (a run folder's EVENTS), numbering them in order. Each method
    writes one event and returns it as written. `redact` (the run's Redactor.text) cleans every text
    before it is written."""

    def __init__(self, path: Path | str, *, redact: Callable[[str], str]) -> None:
        self.path = Path(path)
        self.redact = redact
        self.notes: list[str] = []  # what opening the log repaired (a torn last line cut off)
        self._file = open_append(self.path)  # first: a link is refused before anything is read or cut
        self._digest = hashlib.sha256()  # of every byte of the log: what a checkpoint's mark holds
        self.last_seq = self._last_seq()  # the last event's number: the next one's is the one after
        self._recent: dict[str, int] = {}  # the last RECENT texts logged (as given), with their events' numbers

    def logged(self, text: str) -> int | None:
        """The number of a recent event that logged `text` (an input, a reply or a result), if one did:
        what a step record names instead of copying the text (artifacts.request_delta)."""
        return self._recent.get(text)

    def _remember(self, text: str, event: _E) -> _E:
        self._recent.pop(text, None)
        self._recent[text] = event.seq
        if len(self._recent) > RECENT:
            del self._recent[next(iter(self._recent))]
        return event

    def user_input(
        self, *, turn: int, step: int, text: str, source: Source, images: tuple[str, ...] = ()
    ) -> UserInputEvent:
        redacted = self.redact(text)
        event = UserInputEvent(seq=self.last_seq + 1, turn=turn, step=step, text=redacted, source=source, images=images)
        return self._remember(text, self._write(event))

    def assistant_message(
        self,
        *,
        turn: int,
        step: int,
        text: str,
        status: Status,
        attempt: int,
        reason: str | None = None,
        action: str | None = None,
        record: str | None = None,
    ) -> AssistantMessageEvent:
        """The reply and its verdict; `record` is the file that keeps the attempt's readable record."""
        event = self._write(
            AssistantMessageEvent(
                seq=self.last_seq + 1,
                turn=turn,
                step=step,
                text=self.redact(text),
                status=status,
                reason=None if reason is None else self.redact(reason),
                attempt=attempt,
                action=None if action is None else self.redact(action),
                raw=None if record is None else RawRef(record, attempt),
            )
        )
        return self._remember(text, event) if status == "accepted" else event

    def tool_call(self, message: AssistantMessageEvent, call: ToolCall) -> ToolCallEvent:
        """A call `message` made, in its turn and step."""
        return self._write(
            ToolCallEvent(
                seq=self.last_seq + 1,
                turn=message.turn,
                step=message.step,
                call_id=call.id,
                name=self.redact(call.name),
                arguments=_redacted(call.arguments, self.redact),
                message=message.seq,
            )
        )

    def tool_result(self, *, turn: int, step: int, result: ToolResult, images: tuple[str, ...] = ()) -> ToolResultEvent:
        event = self._write(
            ToolResultEvent(
                seq=self.last_seq + 1,
                turn=turn,
                step=step,
                call_id=result.call_id,
                content=self.redact(result.content),
                is_error=result.is_error,
                images=images,
                ran=result.ran,
            )
        )
        return self._remember(result.content, event)

    def checkpoint(self, *, turn: int, step: int, checkpoint_id: str) -> CheckpointEvent:
        return self._write(CheckpointEvent(seq=self.last_seq + 1, turn=turn, step=step, checkpoint_id=checkpoint_id))

    def mark(self) -> ProjectionMark:
        """Where the log is now, for a checkpoint to keep: its projection reaches the last event written."""
        return ProjectionMark(self.last_seq, self._digest.digest())

    def sync(self) -> None:
        """Every event written so far on disk, not only handed to the OS."""
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        if not self._file.closed:
            try:
                self.sync()
            finally:
                self._file.close()

    def __enter__(self) -> EventLog:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()

    def _write(self, event: _E) -> _E:
        line = _json_line(event)
        self._file.write(line)  # one write: a kill tears at most this line
        self._file.flush()
        self._digest.update(line)
        self.last_seq = event.seq
        return event

    def _last_seq(self) -> int:
        """The last whole event's number in an existing log (0 for none), once a torn last line is cut off."""
        try:
            content = self.path.read_bytes()
        except FileNotFoundError:
            return 0
        except OSError as error:
            raise EventLogError(f"{self.path}: cannot read it ({error.strerror}); fix: check its permissions") from None
        whole = content.rfind(b"\n") + 1
        lines = content[:whole].split(b"\n")[:-1]
        self._digest.update(content[:whole])
        if whole < len(content):
            os.truncate(self.path, whole)
            self.notes.append(f"{self.path}: cut off a torn last line (line {len(lines) + 1}, a killed run's)")
        if not lines:
            return 0
        try:
            return parse_event(lines[-1]).seq
        except ValueError as error:
            raise EventLogError(
                f"{self.path}: line {len(lines)}: {error}; fix: pass a run's {EVENTS} "
                "(`turnstate events RUN_DIR --check` names its problems)"
            ) from None


def _json_line(event: Event) -> bytes:
    """The event's JSON line: orjson writes a dataclass as it is, 30 times faster than copying it to a
    dict; an integer past 64 bits in a call's arguments takes the copy and json_bytes' fallback."""
    try:
        return orjson.dumps(event) + b"\n"
    except orjson.JSONEncodeError:
        return json_bytes(asdict(event)) + b"\n"


def _redacted(value: Any, redact: Callable[[str], str]) -> Any:
    """`value` (a call's arguments) as plain JSON containers, each string redacted."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, Mapping):
        return {str(key): _redacted(item, redact) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_redacted(item, redact) for item in value]
    return value


@dataclass(frozen=True)
class LogPosition:
    """How far a log got: its last whole event's number, and its last checkpoint event's id and step
    (0 for none)."""

    last_seq: int = 0
    checkpoint: int = 0
    checkpoint_step: int = 0


def log_position(path: Path | str) -> LogPosition | None:
    """The position of the log at `path` (None: there is no log), read from its end back to its last
    checkpoint event, changing nothing; a torn last line is no event. Lines it cannot read give way
    to the lines before them: `audit` names them."""
    try:
        content = Path(path).read_bytes()
    except FileNotFoundError:
        return None
    lines = whole_lines_of(content)
    last_seq = 0
    for line in reversed(lines):
        try:
            event = parse_event(line)
        except ValueError:
            continue
        last_seq = last_seq or event.seq
        if isinstance(event, CheckpointEvent) and event.checkpoint_id.isdigit():
            return LogPosition(last_seq, int(event.checkpoint_id), event.step)
    return LogPosition(last_seq)


@dataclass
class EventsRead:
    """A log as read: its events with their line numbers, the problems found (in the file's order),
    and notes (a torn last line, calls the log ends before answering), each naming the file and line."""

    events: list[tuple[int, AnyEvent]]
    problems: list[str]
    notes: list[str]


def read_events(path: Path | str) -> EventsRead:
    """Every event in the log at `path` that parses; a line that does not is a problem naming it,
    a torn last line a note. Never raises for what the file holds."""
    events, problems, notes = _read(Path(path))
    return EventsRead(events, _named(path, problems), notes)


def audit(path: Path | str) -> EventsRead:
    """The log at `path` read, with every rule of the module docstring checked."""
    events, problems, notes = _read(Path(path))
    walk = _Walk()
    for line, event in events:
        walk.see(line, event)
    notes += [
        f"{path}: line {line}: tool_call {call_id} has no result: the log ends before it was answered"
        for call_id, (line, _) in walk.pending.items()
    ]
    return EventsRead(events, _named(path, sorted(problems + walk.problems, key=lambda problem: problem[0])), notes)


def check_events(path: Path | str) -> list[str]:
    """The problems of the log at `path`, each naming its line; empty when the log is sound."""
    return audit(path).problems


Located = tuple[int, str]  # a problem and the line it is on (0: the whole file)


def _read(path: Path) -> tuple[list[tuple[int, AnyEvent]], list[Located], list[str]]:
    events: list[tuple[int, AnyEvent]] = []
    try:
        content = path.read_bytes()
    except FileNotFoundError:
        return events, [(0, "missing; fix: pass a run folder whose run wrote an events log")], []
    except OSError as error:
        return events, [(0, f"cannot read it ({error.strerror}); fix: check its permissions")], []
    problems: list[Located] = []
    notes = []
    lines = content.split(b"\n")
    for number, line in enumerate(lines, start=1):
        if number == len(lines):  # after the last newline: empty, or a line a kill tore
            if line:
                notes.append(f"{path}: line {number} is a torn last line (a killed run); ignored")
            break
        try:
            events.append((number, parse_event(line)))
        except ValueError as error:
            problems.append((number, str(error)))
    return events, problems, notes


def _named(path: Path | str, problems: list[Located]) -> list[str]:
    return [f"{path}: line {line}: {text}" if line else f"{path}: {text}" for line, text in problems]


class _Walk:
    """The rules, checked event by event in the file's order."""

    def __init__(self) -> None:
        self.problems: list[Located] = []
        self.last: tuple[int, Event] | None = None  # the previous event, with its line
        self.messages: dict[int, tuple[int, AssistantMessageEvent]] = {}  # by seq
        self.verdicts: dict[tuple[int, int], tuple[int, Status]] = {}  # (turn, attempt) -> line, status
        self.accepted_steps: dict[int, int] = {}  # step -> line of its accepted message
        self.failed_turns: dict[int, int] = {}  # turn -> line of its failed message
        self.pending: dict[str, tuple[int, ToolCallEvent]] = {}  # accepted calls awaiting their result
        self.answered: dict[str, int] = {}  # call id -> line of its result
        self.rejected_calls: dict[str, int] = {}  # call id -> line of a rejected reply's call
        self.checkpoints: dict[str, int] = {}  # id -> line

    def problem(self, line: int, text: str) -> None:
        self.problems.append((line, text))

    def see(self, line: int, event: AnyEvent) -> None:
        self.order(line, event)
        match event:
            case AssistantMessageEvent():
                self.message(line, event)
            case ToolCallEvent():
                self.call(line, event)
            case ToolResultEvent():
                self.result(line, event)
            case CheckpointEvent():
                self.checkpoint(line, event)
        self.last = (line, event)

    def order(self, line: int, event: Event) -> None:
        if self.last is None:
            if event.seq != 1:
                self.problem(
                    line, f"the log starts at seq {event.seq}: the {event.seq - 1} events before it are missing"
                )
            return
        before_line, before = self.last
        if event.seq <= before.seq:
            self.problem(line, f"seq {event.seq} does not follow seq {before.seq} (line {before_line})")
        elif event.seq > before.seq + 1:
            missing = event.seq - before.seq - 1
            self.problem(
                line, f"seq {event.seq} follows seq {before.seq} (line {before_line}): {missing} events are missing"
            )
        for what in ("turn", "step"):
            now, then = getattr(event, what), getattr(before, what)
            if now < then:
                self.problem(line, f"{what} {now} comes after {what} {then} (line {before_line}): order goes back")

    def message(self, line: int, message: AssistantMessageEvent) -> None:
        for call_id, (call_line, call) in list(self.pending.items()):
            if call.turn < message.turn:
                self.problem(
                    call_line, f"tool_call {call_id} is unanswered when turn {message.turn}'s reply comes (line {line})"
                )
                del self.pending[call_id]
        self.messages[message.seq] = (line, message)
        key = (message.turn, message.attempt)
        if key in self.verdicts:
            then, status = self.verdicts[key]
            if status != "accepted" and message.status == "accepted":
                self.problem(
                    line,
                    f"attempt {message.attempt} of turn {message.turn} was {status} (line {then}) and is accepted "
                    "here: a rejected attempt never becomes history",
                )
            else:
                self.problem(
                    line,
                    f"attempt {message.attempt} of turn {message.turn} has a verdict already ({status}, line {then})",
                )
        self.verdicts.setdefault(key, (line, message.status))
        if message.status == "accepted":
            if message.step in self.accepted_steps:
                self.problem(
                    line, f"step {message.step} was accepted already (line {self.accepted_steps[message.step]})"
                )
            if message.turn in self.failed_turns:
                self.problem(
                    line,
                    f"turn {message.turn} failed closed (line {self.failed_turns[message.turn]}) and is accepted here",
                )
            self.accepted_steps.setdefault(message.step, line)
        elif message.status == "failed":
            self.failed_turns.setdefault(message.turn, line)

    def checkpoint(self, line: int, checkpoint: CheckpointEvent) -> None:
        if checkpoint.checkpoint_id in self.checkpoints:
            where = self.checkpoints[checkpoint.checkpoint_id]
            self.problem(line, f"checkpoint {checkpoint.checkpoint_id} again (first at line {where})")
        self.checkpoints.setdefault(checkpoint.checkpoint_id, line)
        if checkpoint.step > 0 and checkpoint.step not in self.accepted_steps:
            self.problem(
                line,
                f"checkpoint {checkpoint.checkpoint_id} holds step {checkpoint.step}, "
                "whose accepted assistant_message no earlier line holds: an approval is always visible",
            )

    def call(self, line: int, call: ToolCallEvent) -> None:
        made_by = self.messages.get(call.message)
        if made_by is None:
            self.problem(
                line,
                f"tool_call {call.call_id} names assistant_message seq {call.message}, which no earlier line holds",
            )
            return
        message_line, message = made_by
        if (call.turn, call.step) != (message.turn, message.step):
            self.problem(
                line,
                f"tool_call {call.call_id} is in turn {call.turn} step {call.step}, its message "
                f"(line {message_line}) in turn {message.turn} step {message.step}",
            )
        if message.status == "accepted":
            if call.call_id in self.pending:
                self.problem(
                    line,
                    f"tool_call {call.call_id} again while the call at line {self.pending[call.call_id][0]} "
                    "awaits its result: ids pair calls with results one to one",
                )
            self.pending[call.call_id] = (line, call)
            self.answered.pop(call.call_id, None)
        elif message.status == "rejected":
            self.rejected_calls[call.call_id] = line
        else:
            self.problem(
                line,
                f"tool_call {call.call_id} of a {message.status} message (line {message_line}): only a reply "
                "(accepted or rejected) makes calls",
            )

    def result(self, line: int, result: ToolResultEvent) -> None:
        call_id = result.call_id
        if call_id in self.pending:
            del self.pending[call_id]
            self.answered[call_id] = line
        elif call_id in self.answered:
            self.problem(line, f"tool_result answers {call_id} again (answered at line {self.answered[call_id]})")
        elif call_id in self.rejected_calls:
            self.problem(
                line,
                f"tool_result answers {call_id}, a call of a rejected reply (line {self.rejected_calls[call_id]}): "
                "a rejected attempt is never history",
            )
        else:
            self.problem(line, f"tool_result answers {call_id}, which no earlier accepted tool_call made")
