"""The normalized event log: its writer, its checker against logs that break each rule, a torn last
line, and `turnstate events`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from turnstate.adapters.contract import ToolCall, ToolResult
from turnstate.cli import main
from turnstate.durable import events
from turnstate.durable.events import (
    AssistantMessageEvent,
    EventLog,
    EventLogError,
    ToolResultEvent,
    UserInputEvent,
    audit,
    check_events,
    read_events,
)
from turnstate.durable.layout import EVENTS
from turnstate.durable.redaction import REDACTED, Redactor

Records = list[dict[str, Any]]


def keep(text: str) -> str:
    return text


def write_session(path: Path) -> None:
    """A sound log of every kind and status: a rejected reply with a call, a tool round, its result,
    an action, a buffered input, a provider refusal, and a turn that failed closed."""
    with EventLog(path, redact=keep) as log:
        log.user_input(turn=1, step=1, text="You see a door.", source="observation")
        rejected = log.assistant_message(
            turn=1, step=1, text="hmm", status="rejected", reason="no ACTION line", attempt=1, record="step_000001.json"
        )
        log.tool_call(rejected, ToolCall("c0", "look", {}))
        accepted = log.assistant_message(
            turn=1, step=1, text="let me look", status="accepted", attempt=2, record="step_000001.json"
        )
        log.tool_call(accepted, ToolCall("c1", "look", {"at": "door"}))
        log.checkpoint(turn=1, step=1, checkpoint_id="ck-1")
        log.tool_result(turn=2, step=2, result=ToolResult("c1", "look", "a red door"))
        log.assistant_message(turn=2, step=2, text="ACTION: LEFT", status="accepted", attempt=1, action="LEFT")
        log.checkpoint(turn=2, step=2, checkpoint_id="ck-2")
        log.user_input(turn=3, step=3, text="GAME_OVER", source="buffered")
        log.user_input(turn=3, step=3, text="You see a wall.", source="observation")
        log.assistant_message(turn=3, step=3, text="", status="refused", reason="refusal (content_filter)", attempt=1)
        log.assistant_message(
            turn=3, step=3, text="", status="failed", reason="no retry left", attempt=2, record="failed_turn.json"
        )


@pytest.fixture
def sound(tmp_path: Path) -> Path:
    path = tmp_path / EVENTS
    write_session(path)
    return path


def records(path: Path) -> Records:
    return [json.loads(line) for line in path.read_text().splitlines()]


def rewrite(path: Path, lines: Records, renumber: bool = True) -> None:
    """Write `lines` back, numbered 1.. in their new order (each call's link to its message follows)."""
    if renumber:
        new_seq = {line["seq"]: number for number, line in enumerate(lines, start=1)}
        for line in lines:
            line["seq"] = new_seq[line["seq"]]
            if line["kind"] == "tool_call":
                line["message"] = new_seq.get(line["message"], line["message"])
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def find(lines: Records, kind: str, **fields: Any) -> dict[str, Any]:
    return next(line for line in lines if line["kind"] == kind and fields.items() <= line.items())


# The writer.


def test_the_writer_logs_one_json_line_per_event_numbered_in_causal_order(sound):
    lines = records(sound)
    assert [line["seq"] for line in lines] == list(range(1, len(lines) + 1))
    assert [line["kind"] for line in lines][:6] == [
        "user_input",
        "assistant_message",
        "tool_call",
        "assistant_message",
        "tool_call",
        "checkpoint",
    ]
    accepted = find(lines, "assistant_message", attempt=2)
    assert find(lines, "tool_call", call_id="c1")["message"] == accepted["seq"]
    assert accepted["raw"] == {"file": "step_000001.json", "attempt": 2}
    assert find(lines, "assistant_message", status="rejected")["reason"] == "no ACTION line"
    assert check_events(sound) == []


def test_every_text_passes_the_callers_redaction_before_it_is_written(tmp_path):
    blob = "gAAAAAB" + "x" * 300
    redactor = Redactor(secrets=("sk-secret-123",))
    redactor.learn([{"type": "reasoning", "encrypted_content": blob}])
    leak = f"key sk-secret-123 blob {blob}"
    path = tmp_path / EVENTS
    with EventLog(path, redact=redactor.text) as log:
        log.user_input(turn=1, step=1, text=leak, source="observation")
        message = log.assistant_message(
            turn=1, step=1, text=leak, status="rejected", reason=leak, attempt=1, record="step_000001.json"
        )
        log.tool_call(message, ToolCall("c1", "note", {"text": leak, "nested": [{"deep": leak}]}))
        accepted = log.assistant_message(turn=1, step=1, text=leak, status="accepted", attempt=2, action=leak)
        log.tool_call(accepted, ToolCall("c2", "note", {}))
        log.tool_result(turn=2, step=2, result=ToolResult("c2", "note", leak))
    written = path.read_text()
    assert "sk-secret-123" not in written and blob not in written
    assert written.count(REDACTED) == 2 * 8  # the key and the blob in each of the eight texts


def test_each_event_is_handed_to_the_os_as_it_is_written_so_a_kill_loses_no_whole_event(tmp_path):
    path = tmp_path / EVENTS
    script = f"""
import os, signal
from turnstate.durable.events import EventLog
log = EventLog({str(path)!r}, redact=str)
for turn in range(1, 4):
    log.user_input(turn=turn, step=turn, text="frame", source="observation")
    log.assistant_message(turn=turn, step=turn, text="ACTION: LEFT", status="accepted", attempt=1, action="LEFT")
os.kill(os.getpid(), signal.SIGKILL)
"""
    killed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert len(records(path)) == 6
    assert check_events(path) == []


def test_closing_the_log_fsyncs_it(tmp_path, monkeypatch):
    synced: list[int] = []
    real_fsync = os.fsync
    log = EventLog(tmp_path / EVENTS, redact=keep)
    log.user_input(turn=1, step=1, text="frame", source="observation")
    monkeypatch.setattr(os, "fsync", lambda descriptor: synced.append(descriptor) or real_fsync(descriptor))
    log.close()
    assert len(synced) == 1


def test_reopening_a_log_cuts_its_torn_last_line_off_and_numbers_on_from_the_last_whole_event(sound):
    before = records(sound)
    with sound.open("ab") as file:
        file.write(b'{"kind":"user_input","seq":99,"tu')
    with EventLog(sound, redact=keep) as log:
        assert log.notes == [f"{sound}: cut off a torn last line (line {len(before) + 1}, a killed run's)"]
        event = log.user_input(turn=4, step=4, text="resumed", source="observation")
    assert event.seq == before[-1]["seq"] + 1
    assert records(sound)[:-1] == before
    assert check_events(sound) == []


def test_reopening_a_log_whose_last_line_is_not_an_event_names_the_file_and_line(sound):
    count = len(records(sound))
    with sound.open("ab") as file:
        file.write(b"not an event\n")
    with pytest.raises(EventLogError, match=rf"{sound}: line {count + 1}: not JSON; fix: "):
        EventLog(sound, redact=keep)


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"status": "rejected"}, "a rejected message needs a reason"),
        ({"status": "refused", "reason": ""}, "a refused message needs a reason"),
        ({"status": "accepted", "reason": "fine"}, "an accepted message has no reason"),
        ({"status": "failed", "reason": "x", "action": "LEFT"}, "a failed message committed no action"),
        ({"status": "accepted", "attempt": 0}, "attempt counts from 1"),
        ({"status": "accepted", "seq": 0}, "seq counts from 1"),
    ],
)
def test_a_message_that_would_hide_its_verdict_cannot_be_built(fields, problem):
    with pytest.raises(ValueError, match=problem):
        AssistantMessageEvent(**{"seq": 1, "turn": 1, "step": 1, "text": "", "attempt": 1, **fields})


# The checker: each rule broken on its own, against the sound log.


def move_before(lines: Records, moved: dict[str, Any], anchor: dict[str, Any]) -> Records:
    rest = [line for line in lines if line is not moved]
    at = rest.index(anchor)
    return [*rest[:at], moved, *rest[at:]]


def insert_after(lines: Records, anchor: dict[str, Any], *added: dict[str, Any]) -> Records:
    at = lines.index(anchor) + 1
    return [*lines[:at], *added, *lines[at:]]


def result_of(lines: Records, call_id: str) -> dict[str, Any]:
    return find(lines, "tool_result", call_id=call_id)


BREAKS: dict[str, tuple[Callable[[Records], Records], str]] = {
    "a result answers a call twice": (
        lambda lines: insert_after(lines, result_of(lines, "c1"), {**result_of(lines, "c1"), "seq": 1000}),
        "tool_result answers c1 again (answered at line 7)",
    ),
    "a result answers no call": (
        lambda lines: [{**line, "call_id": "c9"} if line["kind"] == "tool_result" else line for line in lines],
        "tool_result answers c9, which no earlier accepted tool_call made",
    ),
    "a result comes before its call": (
        lambda lines: move_before(lines, result_of(lines, "c1"), find(lines, "tool_call", call_id="c1")),
        "tool_result answers c1, which no earlier accepted tool_call made",
    ),
    "a call is never answered though the conversation goes on": (
        lambda lines: [line for line in lines if line["kind"] != "tool_result"],
        "line 5: tool_call c1 is unanswered when turn 2's reply comes (line 7)",
    ),
    "a rejected reply's call is answered": (
        lambda lines: insert_after(
            lines, result_of(lines, "c1"), {**result_of(lines, "c1"), "seq": 1000, "call_id": "c0"}
        ),
        "tool_result answers c0, a call of a rejected reply (line 3): a rejected attempt is never history",
    ),
    "two calls awaiting results share an id": (
        lambda lines: insert_after(
            lines, find(lines, "tool_call", call_id="c1"), {**find(lines, "tool_call", call_id="c1"), "seq": 1000}
        ),
        "tool_call c1 again while the call at line 5 awaits its result",
    ),
    "a call names no message": (
        lambda lines: [
            {**line, "message": 77} if line.get("call_id") == "c1" and line["kind"] == "tool_call" else line
            for line in lines
        ],
        "tool_call c1 names assistant_message seq 77, which no earlier line holds",
    ),
    "a refused message makes a call": (
        lambda lines: insert_after(
            lines,
            find(lines, "assistant_message", status="refused"),
            {
                **find(lines, "tool_call", call_id="c1"),
                "seq": 1000,
                "call_id": "c5",
                "turn": 3,
                "step": 3,
                "message": find(lines, "assistant_message", status="refused")["seq"],
            },
        ),
        "tool_call c5 of a refused message (line 12): only a reply (accepted or rejected) makes calls",
    ),
    "a call sits in another turn than its message": (
        lambda lines: insert_after(
            lines,
            find(lines, "assistant_message", status="refused"),
            {**find(lines, "tool_call", call_id="c0"), "seq": 1000, "turn": 3, "step": 3},
        ),
        "tool_call c0 is in turn 3 step 3, its message (line 2) in turn 1 step 1",
    ),
    "a rejected attempt is accepted later": (
        lambda lines: [
            {**line, "attempt": 1, "raw": None}
            if line["kind"] == "assistant_message" and line.get("attempt") == 2 and line["turn"] == 1
            else line
            for line in lines
        ],
        "attempt 1 of turn 1 was rejected (line 2) and is accepted here: a rejected attempt never becomes history",
    ),
    "an attempt is given two verdicts": (
        lambda lines: [
            {**line, "attempt": 1, "raw": None} if line.get("status") == "failed" else line for line in lines
        ],
        "attempt 1 of turn 3 has a verdict already (refused, line 12)",
    ),
    "a step is accepted twice": (
        lambda lines: insert_after(
            lines,
            find(lines, "checkpoint", checkpoint_id="ck-2"),
            {**find(lines, "assistant_message", action="LEFT"), "seq": 1000, "attempt": 2},
        ),
        "step 2 was accepted already (line 8)",
    ),
    "a turn that failed closed is accepted": (
        lambda lines: [
            *lines,
            {**find(lines, "assistant_message", action="LEFT"), "seq": 1000, "turn": 3, "step": 3, "attempt": 3},
        ],
        "turn 3 failed closed (line 13) and is accepted here",
    ),
    "a checkpoint holds a step no accepted message made": (
        lambda lines: [
            *lines,
            {
                **find(lines, "checkpoint", checkpoint_id="ck-2"),
                "seq": 1000,
                "checkpoint_id": "ck-3",
                "turn": 3,
                "step": 3,
            },
        ],
        "checkpoint ck-3 holds step 3, whose accepted assistant_message no earlier line holds",
    ),
    "a checkpoint id repeats": (
        lambda lines: [{**line, "checkpoint_id": "ck-1"} if line["kind"] == "checkpoint" else line for line in lines],
        "checkpoint ck-1 again (first at line 6)",
    ),
    "the turn goes back": (
        lambda lines: [{**line, "turn": 1} if line.get("source") == "buffered" else line for line in lines],
        "line 10: turn 1 comes after turn 2 (line 9): order goes back",
    ),
    "the step goes back": (
        lambda lines: [{**line, "step": 1} if line.get("source") == "buffered" else line for line in lines],
        "line 10: step 1 comes after step 2 (line 9): order goes back",
    ),
    "a rejected message hides its reason": (
        lambda lines: [{**line, "reason": None} if line.get("status") == "rejected" else line for line in lines],
        "line 2: assistant_message: a rejected message needs a reason",
    ),
    "a status is none of the four": (
        lambda lines: [{**line, "status": "approved"} if line.get("status") == "accepted" else line for line in lines],
        "line 4: assistant_message: status: Input should be 'accepted', 'rejected', 'refused' or 'failed'",
    ),
    "a line has no kind the log knows": (
        lambda lines: [{**line, "kind": "reasoning"} if line["kind"] == "checkpoint" else line for line in lines],
        "line 6: kind is not one of user_input, assistant_message, tool_call, tool_result, checkpoint",
    ),
    "a number is written as text": (
        lambda lines: [{**line, "turn": "1"} if line["seq"] == 1 else line for line in lines],
        "line 1: user_input: turn: Input should be a valid integer",
    ),
    "a field is missing": (
        lambda lines: [
            {k: v for k, v in line.items() if k != "content"} if line["kind"] == "tool_result" else line
            for line in lines
        ],
        "line 7: tool_result: content: Field required",
    ),
}


@pytest.mark.parametrize("broken", list(BREAKS))
def test_the_checker_reports_a_log_that_breaks_a_rule_naming_the_line(sound, broken):
    mutate, problem = BREAKS[broken]
    rewrite(sound, mutate(records(sound)))
    problems = check_events(sound)
    assert any(problem in found for found in problems), problems
    assert all(found.startswith(f"{sound}: line ") for found in problems)


def test_the_checker_reports_sequence_numbers_that_do_not_increase(sound):
    lines = records(sound)
    lines[3]["seq"] = lines[2]["seq"]
    rewrite(sound, lines, renumber=False)
    assert f"{sound}: line 4: seq 3 does not follow seq 3 (line 3)" in check_events(sound)


def test_a_line_that_is_not_json_is_a_problem_naming_it_and_the_lines_around_it_are_still_read(sound):
    lines = sound.read_bytes().split(b"\n")
    sound.write_bytes(b"\n".join([*lines[:2], b"{torn in the middle", *lines[2:]]))
    read = audit(sound)
    assert f"{sound}: line 3: not JSON" in read.problems
    assert len(read.events) == len(lines) - 1


def test_a_blank_line_in_the_middle_is_a_problem(sound):
    content = sound.read_bytes()
    sound.write_bytes(content.replace(b"\n", b"\n\n", 1))
    assert f"{sound}: line 2: not JSON" in check_events(sound)


def test_a_torn_last_line_is_ignored_with_a_note(sound):
    count = len(records(sound))
    with sound.open("ab") as file:
        file.write(b'{"kind":"tool_result","seq":14,"turn":4,"step":4,"call_id":"c1","content":"a re')
    read = audit(sound)
    assert read.problems == []
    assert read.notes == [f"{sound}: line {count + 1} is a torn last line (a killed run); ignored"]
    assert len(read.events) == count


def test_every_line_says_its_format_and_a_line_without_one_is_the_first_format_read_as_todays(sound):
    lines = records(sound)
    assert {line["v"] for line in lines} == {events.FORMAT} and list(lines[0])[:2] == ["v", "kind"]
    for line in lines:
        del line["v"]  # as the runs before the format was written left them
        line.pop("ran", None)  # format 2's: format 1 had no time for a tool
    rewrite(sound, lines)
    read = [event for _, event in read_events(sound).events]
    assert check_events(sound) == [] and {event.v for event in read} == {events.FORMAT}
    assert all(event.ran is None for event in read if isinstance(event, ToolResultEvent))


def test_a_line_a_newer_turnstate_wrote_is_a_problem_saying_so_and_how_to_read_it(sound):
    lines = records(sound)
    lines[1]["v"] = events.FORMAT + 1
    rewrite(sound, lines)
    assert (
        f"{sound}: line 2: {lines[1]['kind']}: format {events.FORMAT + 1}, which a newer turnstate wrote "
        f"(this one reads up to {events.FORMAT}); fix: read the run with the turnstate that wrote it"
    ) in check_events(sound)


def test_a_line_of_an_earlier_format_is_read_as_the_migrations_make_it(sound, monkeypatch):
    """The path a format change takes: today's lines become the earlier format, and a migration
    (renaming user_input's `text`) makes them the next one's as they are read."""
    lines = records(sound)
    for line in lines:
        if line["kind"] == "user_input":
            line["said"] = line.pop("text")
    rewrite(sound, lines)
    assert any("user_input" in problem for problem in check_events(sound))  # not today's format
    monkeypatch.setattr(events, "FORMAT", events.FORMAT + 1)
    monkeypatch.setitem(events.MIGRATIONS, events.FORMAT - 1, rename_said)
    assert check_events(sound) == []
    read = [event for _, event in read_events(sound).events]
    assert {event.v for event in read} == {events.FORMAT}
    assert [event.text for event in read if isinstance(event, UserInputEvent)] == [
        line["said"] for line in lines if line["kind"] == "user_input"
    ]


def rename_said(line: dict) -> dict:
    return {key if key != "said" else "text": value for key, value in line.items()}


def test_calls_the_log_ends_before_answering_are_a_note_not_a_problem(tmp_path):
    path = tmp_path / EVENTS
    with EventLog(path, redact=keep) as log:
        message = log.assistant_message(turn=1, step=1, text="ACTION: MARK 3 5", status="accepted", attempt=1)
        log.tool_call(message, ToolCall("c1", "MARK", {"x": 3, "y": 5}))
    read = audit(path)
    assert read.problems == []
    assert read.notes == [f"{path}: line 2: tool_call c1 has no result: the log ends before it was answered"]


def test_a_missing_log_is_one_problem_never_an_exception(tmp_path):
    assert check_events(tmp_path / EVENTS) == [
        f"{tmp_path / EVENTS}: missing; fix: pass a run folder whose run wrote an events log"
    ]


def test_the_reader_gives_back_the_events_as_written(sound):
    read = read_events(sound)
    first = read.events[0]
    assert first == (1, UserInputEvent(seq=1, turn=1, step=1, text="You see a door.", source="observation"))


# turnstate events


def invoke(*args: str) -> Result:
    result = CliRunner().invoke(main, ["events", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


def test_events_check_prints_one_summary_line_for_a_sound_log(sound):
    result = invoke(str(sound.parent), "--check")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"{sound}: sound, 13 events over 3 turns: 3 user inputs, 5 assistant messages (2 accepted, 1 rejected, "
        "1 refused, 1 failed), 2 tool calls, 1 tool results, 2 checkpoints"
    ]
    assert result.stderr == ""


def test_events_check_names_each_problem_in_line_order_and_exits_1(sound):
    lines = records(sound)
    rewrite(sound, [{**line, "call_id": "c9"} if line["kind"] == "tool_result" else line for line in lines])
    result = invoke(str(sound.parent), "--check")
    assert result.exit_code == 1
    assert "Traceback" not in result.stderr
    *problems, last = result.stderr.strip().splitlines()
    assert problems == [  # in the file's order
        f"{sound}: line 5: tool_call c1 is unanswered when turn 2's reply comes (line 8)",
        f"{sound}: line 7: tool_result answers c9, which no earlier accepted tool_call made",
    ]
    assert last.startswith(f"error: {sound} breaks the log's rules (2 problems above); fix: ")
    assert result.stdout == ""


def test_events_check_warns_of_a_torn_last_line_and_passes(sound):
    with sound.open("ab") as file:
        file.write(b'{"kind":')
    result = invoke(str(sound.parent), "--check")
    assert result.exit_code == 0
    assert result.stderr.startswith(f"warning: {sound}: line 14 is a torn last line")


def test_events_prints_each_event_readably_with_its_verdict(sound):
    result = invoke(str(sound.parent))
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert "#1 turn 1 step 1 · user_input (observation)\n    You see a door.\n" in out
    assert (
        "#2 turn 1 step 1 · assistant_message attempt 1 · rejected: no ACTION line · raw in step_000001.json, attempt 1\n    hmm\n"
        in out
    )
    assert "#3 turn 1 step 1 · tool_call c0: look({}) · of #2 (rejected)\n" in out
    assert "#4 turn 1 step 1 · assistant_message attempt 2 · accepted, a tool round" in out
    assert '#5 turn 1 step 1 · tool_call c1: look({"at": "door"}) · of #4 (accepted)\n' in out
    assert "#7 turn 2 step 2 · tool_result c1\n    a red door\n" in out
    assert "#8 turn 2 step 2 · assistant_message attempt 1 · accepted, action LEFT\n" in out
    assert "#12 turn 3 step 3 · assistant_message attempt 1 · refused: refusal (content_filter)\n    (empty)\n" in out
    assert "#13 turn 3 step 3 · assistant_message attempt 2 · failed: no retry left · raw in failed_turn.json" in out


def test_events_escapes_control_characters_and_redacts_the_runs_key(tmp_path, monkeypatch):
    monkeypatch.setenv("TEST_EVENTS_KEY", "sk-from-the-shell")
    (tmp_path / "run_meta.json").write_text(json.dumps({"settings": {"client": {"api_key_env": "TEST_EVENTS_KEY"}}}))
    with EventLog(tmp_path / EVENTS, redact=keep) as log:
        log.user_input(turn=1, step=1, text="\x1b[31mred\x1b[0m key sk-from-the-shell", source="observation")
    result = invoke(str(tmp_path))
    assert result.exit_code == 0
    assert "\\u001b[31mred\\u001b[0m key [redacted]" in result.stdout
    assert "\x1b" not in result.stdout and "sk-from-the-shell" not in result.stdout


def test_events_prints_what_it_can_read_and_exits_1_naming_a_bad_line(sound):
    lines = sound.read_bytes().split(b"\n")
    sound.write_bytes(b"\n".join([*lines[:2], b"not json", *lines[2:]]))
    result = invoke(str(sound.parent))
    assert result.exit_code == 1
    assert "#13 turn 3 step 3" in result.stdout
    assert result.stderr.splitlines()[0] == f"{sound}: line 3: not JSON"
    assert result.stderr.splitlines()[1].startswith(f"error: {sound} has lines that are not events (1 problems above)")


@pytest.mark.parametrize("check", [[], ["--check"]])
def test_events_of_a_folder_without_a_log_is_one_line_naming_the_file(tmp_path, check):
    result = invoke(str(tmp_path), *check)
    assert result.exit_code == 1
    assert result.stderr == f"error: {tmp_path / EVENTS}: missing; fix: pass a run folder that `turnstate run` wrote\n"


def test_events_of_a_path_that_is_no_folder_says_so(tmp_path):
    result = invoke(str(tmp_path / "nowhere"))
    assert result.exit_code == 1
    assert (
        result.stderr
        == f"error: {tmp_path / 'nowhere'}: not a folder; fix: pass a run folder that `turnstate run` wrote\n"
    )
