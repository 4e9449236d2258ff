"""What a resume reads back from a run folder: the run's profile, its conversation's projection, and
an event log cut back to the last checkpoint.

A run killed at any point resumes from its last checkpoint (turnstate/durable/checkpoints/): the turn in
flight when it died is played again, so whatever the log says of it after that checkpoint (replies,
verdicts, even an acceptance the checkpoint never made durable) is not history, and is cut from
events.jsonl before the resumed run writes on. run_meta.json records how many events were cut.

The projection (the events a checkpoint's mark reaches in events.jsonl: plain texts, no opaque
state) is what a resume without the continuation, or a model switch, rebuilds the accepted state
from (strategies/projection.py). The log holds it once; the checkpoint keeps the SHA-256 of the log
through its mark, so a log cut or altered under it is refused (`checkpointed_log`), never rebuilt from.

A resume knows how far the run got from more than its checkpoints (`records_ahead`): the run's
other records are written after the commits they follow, so none of them may be ahead of the last
checkpoint. A checkpoint store behind them was damaged (a deleted or cut -wal file, a truncated or
altered database); going on from it would replay turns the run already paid for, on a game already
past them. So the resume is refused, naming each record that is ahead and the fix:
- events.jsonl's last checkpoint event names a checkpoint the store does not hold (it is written
  right after its commit);
- side_effects.jsonl journals the action of a step past the last checkpoint's (an action is
  performed only after its step's checkpoint);
- a step record past the step in flight (step_NNNNNN.json is written as its turn commits, so the
  one after the last checkpoint's may be there; none later);
- run_meta.json counts more steps than that (it is written with a step's count only after the step
  was recorded).
And the other way: events.jsonl ending before the events the checkpoints hold, or missing, was cut
or deleted; one whose first events are not the bytes the checkpoints saw was altered.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Collection, Iterable, Mapping
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from turnstate.adapters.contract import Input, ToolCall, ToolResult, Usage, UserInput
from turnstate.adapters.images import ImagePart
from turnstate.durable.accounting import UsageJournal
from turnstate.durable.artifacts import is_count
from turnstate.durable.checkpoints import CheckpointError, ProjectionMark, open_run_store
from turnstate.durable.cursor import Cursor, RunCounts
from turnstate.durable.events import AssistantMessageEvent, EventsRead, ToolCallEvent, audit, log_position, parse_event
from turnstate.durable.jsonl import whole_lines
from turnstate.durable.layout import (
    APPENDED_FILES,
    CALLS,
    CHECKPOINT_FILE,
    EVENTS,
    ID_PATTERN,
    JOURNAL,
    RUN_META,
    compaction_name,
    recorded_steps,
    step_name,
)
from turnstate.durable.side_effects import REFUSED, action_key, journaled_step, read_journal
from turnstate.strategies.strategy import ProjectedTurn
from turnstate.strategies.summary import bridge_text


class ResumeError(Exception):
    """A run folder that cannot be resumed as asked; the message names the file and the fix."""


def run_id_of(run_dir: Path) -> str:
    """The id the run in `run_dir` was started under (run_meta.json's `run_id`), which its folder's
    name may no longer be (a folder renamed or moved); the folder's name for a run that recorded none."""
    recorded = run_meta(run_dir).get("run_id")
    if isinstance(recorded, str) and re.fullmatch(ID_PATTERN, recorded):
        return recorded
    return run_dir.name


def run_meta(run_dir: Path) -> dict[str, Any]:
    """run_meta.json as the run last wrote it ({} if it is not a JSON object)."""
    try:
        meta = json.loads((run_dir / RUN_META).read_bytes())
    except (OSError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


def projected_turns(
    events: Iterable[Mapping[str, Any]],
    offered: Collection[str] | None = None,
    read_image: Callable[[str], ImagePart] | None = None,
) -> list[ProjectedTurn]:
    """The accepted turns the events hold, in order: each with the inputs before it, its reply's text
    and calls, and the results that answered them (logged ahead of the next turn's inputs). Rejected,
    refused and failed replies, and their calls, are not turns. An input or a result that showed
    images shows them again, each read by its digest with `read_image` (the run folder's
    input_images/: ImageFiles.read); an event that names images needs it (ValueError without).

    With `offered` (a switch: the new session's tool names), a call of a tool the new session does not
    offer (the old adapter acted through a tool, the new one acts through text) is written into its
    reply as text (`ACTION: <action>`, the text action channel), and its result becomes an input of the
    next turn: a request must not hold a call of a tool it does not offer."""

    def shown(event: Mapping[str, Any]) -> tuple[ImagePart, ...]:
        digests = event.get("images") or ()
        if digests and read_image is None:
            raise ValueError(f"event {event['seq']} shows images, and no run folder was given to read them from")
        return tuple(read_image(digest) for digest in digests) if read_image is not None else ()

    def input_of(event: Mapping[str, Any], text: str) -> Input:
        images = shown(event)
        return UserInput(text, images) if images else text

    turns: list[ProjectedTurn] = []
    inputs: list[Input] = []
    calls: dict[int, list[ToolCall]] = {}  # by the accepted message's sequence number
    results: dict[int, list[ToolResult]] = {}
    accepted: list[tuple[int, str, str | None, tuple[Input, ...]]] = []  # (seq, text, action, inputs)
    as_text: dict[int, list[str]] = {}  # by message: the calls written into it as text
    answered_as_input: set[str] = set()  # their ids: their results are the next turn's inputs
    for event in events:
        kind = event["kind"]
        if kind == "user_input":
            inputs.append(input_of(event, event["text"]))
        elif kind == "assistant_message" and event["status"] == "accepted":
            accepted.append((event["seq"], event["text"], event["action"], tuple(inputs)))
            calls[event["seq"]], results[event["seq"]], as_text[event["seq"]] = [], [], []
            inputs = []
        elif kind == "tool_call" and event["message"] in calls:
            call = ToolCall(event["call_id"], event["name"], event["arguments"])
            if offered is None or call.name in offered:
                calls[event["message"]].append(call)
            else:
                as_text[event["message"]].append(call_line(call, accepted[-1][2]))  # an action tool's
                answered_as_input.add(call.id)
        elif kind == "tool_result" and event["call_id"] in answered_as_input:
            inputs.append(input_of(event, event["content"]))
        elif kind == "tool_result" and accepted:  # answers the last accepted reply's calls
            message = accepted[-1][0]
            name = next((call.name for call in calls[message] if call.id == event["call_id"]), "")
            answer = ToolResult(event["call_id"], name, event["content"], event["is_error"], shown(event))
            results[message].append(answer)
    for seq, text, _, opening in accepted:
        reply = "\n".join([text, *as_text[seq]]) if as_text[seq] else text
        turns.append(ProjectedTurn(opening, reply, tuple(calls[seq]), tuple(results[seq])))
    return turns


@dataclass(frozen=True)
class CommittedSummary:
    """A harness summary as its record (compaction_NNN.json) keeps it, for a rebuild to start from."""

    bridge: str  # the exact continuation message it was installed as
    step: int  # the step it committed with
    excluded_turns: int  # the newest turns before that step, kept verbatim after it


def committed_summary(run_dir: Path, number: int) -> CommittedSummary | None:
    """The run's `number`th harness summary, from its record (written before the checkpoint that
    commits it), or None when the record is missing, unreadable, or from before records said which
    step committed it."""
    try:
        record = orjson.loads((run_dir / compaction_name(number)).read_bytes())
        summary, step, excluded = record["summary"], record["step"], record["excluded_turns"]
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError):
        return None
    if not (isinstance(summary, str) and summary.strip() and is_count(step) and is_count(excluded)):
        return None
    return CommittedSummary(bridge_text(summary), step, excluded)


def call_line(call: ToolCall, action: str | None) -> str:
    """A call written into its reply as text: an action's as the text action channel's `ACTION:` line
    (`action` is the action it named), any other as a `CALL` line with its arguments."""
    return f"ACTION: {action}" if action else f"CALL {call.name} {json.dumps(call.arguments)}"


def with_calls_as_text(turn: ProjectedTurn, action_call: ToolCall | None, action: str | None) -> ProjectedTurn:
    """A last turn whose calls await their results, closed: its calls written into its reply as text,
    for their results to come as the next turn's input. A projection cannot carry the signature some
    services demand on the calls of an open tool loop (Anthropic with thinking, Gemini's current
    turn), so a rebuilt state never ends with one."""
    lines = [call_line(call, action if call == action_call else None) for call in turn.tool_calls]
    return ProjectedTurn(turn.inputs, "\n".join(line for line in (turn.text, *lines) if line))


def cut_events(path: Path, last_seq: int) -> int:
    """Cut events.jsonl back to its first `last_seq` events (the last checkpoint's), plus that
    checkpoint's own event if it follows them; return how many whole events were cut. Read from the
    end back to the checkpoint, so a long run's resume does not parse the whole log."""
    content, _ = whole_lines(path)  # a torn last line is no event: cut with the rest
    lines = content.splitlines(keepends=True)
    keep = len(content)
    cut = 0
    for line in reversed(lines):
        try:
            event = parse_event(line)
        except ValueError as error:
            raise ResumeError(f"{path}: an event after the last checkpoint cannot be read ({error})") from None
        if event.seq <= last_seq:
            break
        if event.seq == last_seq + 1 and event.kind == "checkpoint":
            break  # the checkpoint's own event, written right after its commit
        keep -= len(line)
        cut += 1
    if keep < len(content):
        os.truncate(path, keep)
    return cut


def checkpointed_log(path: Path, mark: ProjectionMark) -> bytes | None:
    """The bytes of the log at `path` that a checkpoint's projection holds (its `mark`: the log's first
    `mark.through` lines, whose SHA-256 it keeps), or None when the log does not hold them: it is
    missing, or was cut or altered under the checkpoint. A sound log numbers its events by line
    (events.py, rule 1), so the mark's event ends its `through`th line."""
    try:
        held = _first_lines(path.read_bytes(), mark.through)
    except FileNotFoundError:
        return None
    return held if held is not None and hashlib.sha256(held).digest() == mark.digest else None


def _first_lines(content: bytes, count: int) -> bytes | None:
    """The bytes of `content`'s first `count` lines, newlines included (None: it holds fewer)."""
    end = 0
    for _ in range(count):
        end = content.find(b"\n", end) + 1
        if end == 0:
            return None
    return content[:end]


def checkpointed_events(run_dir: Path, mark: ProjectionMark) -> list[dict[str, Any]]:
    """The events of the run's projection as its checkpoint's `mark` holds them, in order; a
    ResumeError when the log does not hold them (`records_ahead` refuses such a resume first)."""
    held = checkpointed_log(run_dir / EVENTS, mark)
    if held is None:
        raise ResumeError(f"{run_dir / EVENTS}: {_not_the_checkpointed_log(mark)}")
    return [orjson.loads(line) for line in held.splitlines()]


def _not_the_checkpointed_log(mark: ProjectionMark) -> str:
    return (
        f"its first {mark.through} events are not the ones the checkpoints hold (their SHA-256 differs): it was altered"
    )


def records_ahead(
    run_dir: Path, *, checkpoint: int, step: int, projection: ProjectionMark, meta: Mapping[str, Any]
) -> list[str]:
    """What the run's records say that its last checkpoint (number `checkpoint`, holding step `step`
    and the events its `projection` mark reaches; 0s for none) does not: each a clause naming the file
    (see the module docstring). `meta` is run_meta.json as the run last wrote it."""
    problems = []
    held = f"checkpoint {checkpoint} (step {step})" if checkpoint else "no checkpoint"
    position = log_position(run_dir / EVENTS)
    if position is not None and position.checkpoint > checkpoint:
        problems.append(
            f"{EVENTS} records checkpoint {position.checkpoint} (step {position.checkpoint_step}), "
            f"and the checkpoint store holds {held}"
        )
    logged = 0 if position is None else position.last_seq
    if logged < projection.through:
        how = f"ends at event {logged}" if position is not None else "is missing"
        problems.append(f"{EVENTS} {how}, and the checkpoints hold the events through {projection.through}: it was cut")
    elif checkpointed_log(run_dir / EVENTS, projection) is None:
        problems.append(f"{EVENTS}: {_not_the_checkpointed_log(projection)}")
    journaled, recorded = _records_past(run_dir, read_journal(run_dir / JOURNAL, cut=False), step)
    if journaled:
        problems.append(f"{JOURNAL} journals the action of step {journaled}, and the checkpoint store holds {held}")
    if recorded:
        problems.append(f"{step_name(recorded)} is there, and the checkpoint store holds {held}")
    counted = meta.get("steps")
    if isinstance(counted, int) and counted > step + 1:
        problems.append(f"{RUN_META} counts {counted} steps, and the checkpoint store holds {held}")
    return problems


@dataclass(frozen=True)
class RecordsPosition:
    """How far a run got by its records alone (its event log, journal, usage journal and summary and
    step records), for a resume that goes on from them when its checkpoint store was damaged
    (`turnstate resume --from-records`): the last checkpoint the log records, the cursor its counts
    make, and the accepted reply that checkpoint held, for the caller to carry out."""

    checkpoint: int  # the last checkpoint event's number: the new store's first checkpoint is this one again
    cursor: Cursor
    projection: ProjectionMark  # the events before that checkpoint's own event
    reply: AssistantMessageEvent | None  # the last accepted reply, and its calls
    calls: tuple[ToolCall, ...]


def position_from_records(run_dir: Path) -> RecordsPosition | None:
    """Where the run's records say it got (None: its log records no checkpoint, so no turn was
    accepted), or a ResumeError naming the record when they cannot say: a log that is not sound, or
    one behind the journal or the step records (then the log was cut, and nothing knows how far the
    run got). Counted from the log: the steps, turns, accepted actions, tool rounds and failed replies
    (a provider failure that wrote no reply is not in it); the usage and calls from calls.jsonl; the
    summaries from their records; the compactions from the step records."""
    path = run_dir / EVENTS
    if not path.exists():
        raise ResumeError(f"{path}: missing, so the run's records cannot say how far it got; fix: restore it")
    read = audit(path)
    if read.problems:
        raise ResumeError(f"{path}: not sound, so the run cannot go on from it: {read.problems[0]}")
    events = [event for _, event in read.events]
    last = next((event for event in reversed(events) if event.kind == "checkpoint"), None)
    if last is None:
        return None
    step = last.step
    keys = read_journal(run_dir / JOURNAL, cut=False)
    journaled, recorded = _records_past(run_dir, keys, step)
    ahead = [f"{JOURNAL} journals step {journaled}"] if journaled else []
    ahead += [f"{step_name(recorded)} is there"] if recorded else []
    if ahead:
        raise ResumeError(
            f"{path}: its last checkpoint holds step {step}, and {'; '.join(ahead)}: the log was cut, so the "
            "records cannot say how far the run got; fix: restore the run folder whole from a backup"
        )
    held = [event for event in events if event.seq < last.seq]
    unjournaled = _unjournaled_actions(held, keys, step)
    if unjournaled:
        raise ResumeError(
            f"{run_dir / JOURNAL}: the log accepted the actions of steps {number_spans(unjournaled)}, which the "
            f"journal lacks ({'it is missing' if not (run_dir / JOURNAL).exists() else f'it holds {len(keys)}'}), "
            "so the game cannot be rebuilt where the run left it; fix: restore it from a backup of the run folder"
        )
    messages = [event for event in held if isinstance(event, AssistantMessageEvent)]
    accepted = [message for message in messages if message.status == "accepted"]
    acting = [index for index, message in enumerate(accepted) if message.action is not None]
    reply = accepted[-1] if accepted else None
    usages = UsageJournal.calls_after(run_dir / CALLS, 0)
    summaries = 0
    while (summary := committed_summary(run_dir, summaries + 1)) is not None and summary.step <= step:
        summaries += 1
    counts = RunCounts(
        step=step,
        turn=last.turn,
        accepted_actions=len(acting),
        failed_attempts=len(messages) - len(accepted),
        tool_rounds=len(accepted) - 1 - acting[-1] if acting else len(accepted),
        levels_won=0,  # the carried-out reply's frame says (the runner sets it)
        summaries=summaries,
        compactions=max(summaries, _compacted_steps(run_dir, step)),
    )
    # The window is not known (0): the rebuild takes every turn, or the latest summary's.
    cursor = Cursor(counts, "Accepted", window_turns=0, usage=sum(usages, Usage()), provider_calls=len(usages))
    before = _first_lines(path.read_bytes(), last.seq - 1)  # a sound log numbers its events by line
    assert before is not None  # the checkpoint event is on line last.seq
    projection = ProjectionMark(last.seq - 1, hashlib.sha256(before).digest())
    calls = tuple(
        ToolCall(event.call_id, event.name, event.arguments)
        for event in held
        if isinstance(event, ToolCallEvent) and reply is not None and event.message == reply.seq
    )
    return RecordsPosition(int(last.checkpoint_id), cursor, projection, reply, calls)


def _unjournaled_actions(held: list[Any], keys: Collection[str], step: int) -> list[int]:
    """The steps before `step` whose accepted action the journal lacks, though the environment did
    not refuse it (a refused action is not journaled: an input or result after it says REFUSED)."""
    missing: list[int] = []
    waiting: int | None = None  # an unjournaled action's step, until its turn's inputs are read
    refused = False
    for event in held:
        if isinstance(event, AssistantMessageEvent):
            if waiting is not None and not refused:
                missing.append(waiting)
            waiting, refused = None, False
            if event.status == "accepted" and event.action is not None and event.step < step:
                waiting = event.step if action_key(event.step) not in keys else None
        elif event.kind in ("user_input", "tool_result"):
            refused = refused or (event.text if event.kind == "user_input" else event.content).startswith(REFUSED)
    return missing + ([waiting] if waiting is not None and not refused else [])


def _compacted_steps(run_dir: Path, step: int) -> int:
    """How many step records through `step` record a compaction (a lost record counts none)."""
    count = 0
    for number in recorded_steps(run_dir):
        if number > step:
            break
        try:
            count += orjson.loads((run_dir / step_name(number)).read_bytes()).get("compaction") is not None
        except (OSError, orjson.JSONDecodeError, AttributeError):
            continue
    return count


def _records_past(run_dir: Path, keys: Iterable[str], step: int) -> tuple[int | None, int | None]:
    """What of the run's records is past accepted step `step`, which none may be: the latest step
    whose action the journal (its `keys`) holds, when it is a later one (an action is performed only
    after its step's checkpoint), and the latest step record, when it is past the step in flight
    (step_NNNNNN.json is written as its turn commits); None for each that is not."""
    journaled = max((journaled_step(key) or 0 for key in keys), default=0)
    recorded = _last_step_record(run_dir)
    return (journaled if journaled > step else None), (recorded if recorded > step + 1 else None)


def _last_step_record(run_dir: Path) -> int:
    """The highest step a step record in `run_dir` is there for (0: none)."""
    return max(recorded_steps(run_dir), default=0)


def audit_run(run_dir: Path) -> EventsRead:
    """The run's events.jsonl audited (events.audit), and held against its checkpoints and step
    records: a log that ends before the events its checkpoints hold was cut; a log whose checkpoint
    events name more checkpoints than the store holds has a damaged store behind it; a step record
    of a step the checkpoints hold whose accepted reply the log lacks was cut from the log."""
    path = run_dir / EVENTS
    read = audit(path)
    extra: list[str] = []
    try:
        store = open_run_store(run_dir, continuation=False)
        with closing(store):
            restored = store.latest()
    except CheckpointError as error:
        if (run_dir / CHECKPOINT_FILE).exists():
            extra.append(f"{path}: cannot be held against the checkpoints: {error}")
        restored = None
    events = [event for _, event in read.events]
    last_seq = events[-1].seq if events else 0
    checkpoints = [
        int(event.checkpoint_id) for event in events if event.kind == "checkpoint" and event.checkpoint_id.isdigit()
    ]
    if restored is not None:
        through = restored.projection.through
        if last_seq < through:
            extra.append(
                f"{path}: the log ends at event {last_seq}, and the checkpoints hold the events through {through}: "
                f"{through - last_seq} events were cut"
            )
        elif checkpointed_log(path, restored.projection) is None:
            extra.append(f"{path}: {_not_the_checkpointed_log(restored.projection)}")
        step = restored.cursor["step"]
    else:
        step = 0
    held = restored.sequence if restored is not None else 0
    if checkpoints and max(checkpoints) > held:
        extra.append(
            f"{path}: the log records checkpoint {max(checkpoints)}, and the checkpoint store holds "
            f"{held or 'none'}: the store was damaged"
        )
    accepted = {
        event.step for event in events if isinstance(event, AssistantMessageEvent) and event.status == "accepted"
    }
    unlogged = [number for number in range(1, min(step, _last_step_record(run_dir)) + 1) if number not in accepted]
    recorded = [number for number in unlogged if (run_dir / step_name(number)).exists()]
    if recorded:
        extra.append(
            f"{path}: {len(recorded)} steps have a step record and a checkpoint and no accepted reply in the log "
            f"(steps {number_spans(recorded)}): they were cut from it"
        )
    return EventsRead(read.events, read.problems + extra, read.notes)


def number_spans(numbers: list[int]) -> str:
    """Sorted numbers as spans: 1-5, 7, 9-10."""
    spans: list[list[int]] = []
    for number in numbers:
        if spans and number == spans[-1][1] + 1:
            spans[-1][1] = number
        else:
            spans.append([number, number])
    return ", ".join(str(first) if first == last else f"{first}-{last}" for first, last in spans)


def torn_files(run_dir: Path) -> list[str]:
    """The append-only files of `run_dir` whose last line a kill tore mid-write (no newline ends it):
    each opener cuts that line off (turnstate/durable/jsonl.py), and the resume names them."""
    torn = []
    for name in APPENDED_FILES:
        try:
            with (run_dir / name).open("rb") as file:
                if file.seek(0, os.SEEK_END) == 0:
                    continue  # empty: nothing torn
                file.seek(-1, os.SEEK_END)
                if file.read(1) != b"\n":
                    torn.append(name)
        except FileNotFoundError:
            continue
    return torn


def resume_notes(resumed: Mapping[str, Any]) -> list[str]:
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
