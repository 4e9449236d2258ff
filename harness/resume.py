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
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from turnstate.adapters.contract import ToolCall, ToolResult
from turnstate.harness.events import parse_event
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


def projected_turns(events: Iterable[Mapping[str, Any]]) -> list[ProjectedTurn]:
    """The accepted turns the events hold, in order: each with the inputs before it, its reply's text
    and calls, and the results that answered them (logged ahead of the next turn's inputs). Rejected,
    refused and failed replies, and their calls, are not turns."""
    turns: list[ProjectedTurn] = []
    inputs: list[str] = []
    calls: dict[int, list[ToolCall]] = {}  # by the accepted message's sequence number
    results: dict[int, list[ToolResult]] = {}
    accepted: list[tuple[int, str, tuple[str, ...]]] = []  # (seq, text, inputs)
    for event in events:
        kind = event["kind"]
        if kind == "user_input":
            inputs.append(event["text"])
        elif kind == "assistant_message" and event["status"] == "accepted":
            accepted.append((event["seq"], event["text"], tuple(inputs)))
            calls[event["seq"]], results[event["seq"]] = [], []
            inputs = []
        elif kind == "tool_call" and event["message"] in calls:
            calls[event["message"]].append(ToolCall(event["call_id"], event["name"], event["arguments"]))
        elif kind == "tool_result" and accepted:  # answers the last accepted reply's calls
            message = accepted[-1][0]
            name = next((call.name for call in calls[message] if call.id == event["call_id"]), "")
            results[message].append(ToolResult(event["call_id"], name, event["content"], is_error=event["is_error"]))
    for seq, text, opening in accepted:
        turns.append(ProjectedTurn(opening, text, tuple(calls[seq]), tuple(results[seq])))
    return turns


def cut_events(path: Path, last_seq: int) -> int:
    """Cut events.jsonl back to its first `last_seq` events (the last checkpoint's), plus that
    checkpoint's own event if it follows them; return how many whole events were cut."""
    try:
        content = path.read_bytes()
    except FileNotFoundError:
        return 0
    keep = cut = 0
    offset = 0
    for line in content.splitlines(keepends=True):
        if not line.endswith(b"\n"):
            break  # a torn last line: the event log cuts it off as it opens
        try:
            event = parse_event(line)
        except ValueError as error:
            raise ResumeError(f"{path}: an event after the last checkpoint cannot be read ({error})") from None
        if event.seq <= last_seq or (event.seq == last_seq + 1 and event.kind == "checkpoint" and not cut):
            keep = offset + len(line)
        else:
            cut += 1
        offset += len(line)
    if keep < len(content):
        os.truncate(path, keep)
    return cut
