"""What a resume reads back from a run folder: the run's profile, its conversation's projection, and
an event log cut back to the last checkpoint.

A run killed at any point resumes from its last checkpoint (harness/checkpoints.py): the turn in
flight when it died is played again, so whatever the log says of it after that checkpoint (replies,
verdicts, even an acceptance the checkpoint never made durable) is not history, and is cut from
events.jsonl before the resumed run writes on. run_meta.json records how many events were cut.

The projection (the checkpoint's events: plain texts, no opaque state) is what a resume without the
continuation, or a model switch, rebuilds the accepted state from (strategies/projection.py).
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Any

from turnstate.adapters.contract import ToolCall, ToolResult
from turnstate.harness.events import parse_event
from turnstate.harness.jsonl import whole_lines
from turnstate.harness.profile import Profile, ProfileError, parse_profile
from turnstate.strategies.strategy import ProjectedTurn

RUN_META = "run_meta.json"


class ResumeError(Exception):
    """A run folder that cannot be resumed as asked; the message names the file and the fix."""


def run_profile(run_dir: Path) -> Profile:
    """The profile the run was started with, as run_meta.json keeps it (validated, defaults filled)."""
    path = run_dir / RUN_META
    try:
        settings = json.loads(path.read_bytes())["settings"]
        return parse_profile(json.dumps(settings), source=str(path))
    except FileNotFoundError:
        raise ResumeError(f"{path}: missing; fix: pass the folder of a run (runs/<run-id>/)") from None
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ResumeError(f"{path}: cannot read the run's profile from its settings ({error})") from None
    except ProfileError as error:
        raise ResumeError(f"{path}: the run's settings are not a valid profile: {error}") from None


def run_meta(run_dir: Path) -> dict[str, Any]:
    """run_meta.json as the run last wrote it ({} if it is not a JSON object)."""
    try:
        meta = json.loads((run_dir / RUN_META).read_bytes())
    except (OSError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


def projected_turns(events: Iterable[Mapping[str, Any]], offered: Collection[str] | None = None) -> list[ProjectedTurn]:
    """The accepted turns the events hold, in order: each with the inputs before it, its reply's text
    and calls, and the results that answered them (logged ahead of the next turn's inputs). Rejected,
    refused and failed replies, and their calls, are not turns.

    With `offered` (a switch: the new session's tool names), a call of a tool the new session does not
    offer (the old adapter acted through a tool, the new one acts through text) is written into its
    reply as text (`ACTION: <action>`, the text action channel), and its result becomes an input of the
    next turn: a request must not hold a call of a tool it does not offer."""
    turns: list[ProjectedTurn] = []
    inputs: list[str] = []
    calls: dict[int, list[ToolCall]] = {}  # by the accepted message's sequence number
    results: dict[int, list[ToolResult]] = {}
    accepted: list[tuple[int, str, str | None, tuple[str, ...]]] = []  # (seq, text, action, inputs)
    as_text: dict[int, list[str]] = {}  # by message: the calls written into it as text
    answered_as_input: set[str] = set()  # their ids: their results are the next turn's inputs
    for event in events:
        kind = event["kind"]
        if kind == "user_input":
            inputs.append(event["text"])
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
            inputs.append(event["content"])
        elif kind == "tool_result" and accepted:  # answers the last accepted reply's calls
            message = accepted[-1][0]
            name = next((call.name for call in calls[message] if call.id == event["call_id"]), "")
            results[message].append(ToolResult(event["call_id"], name, event["content"], is_error=event["is_error"]))
    for seq, text, _, opening in accepted:
        reply = "\n".join([text, *as_text[seq]]) if as_text[seq] else text
        turns.append(ProjectedTurn(opening, reply, tuple(calls[seq]), tuple(results[seq])))
    return turns


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
