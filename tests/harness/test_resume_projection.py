"""What a resume reads back from the event log (turnstate/durable/resume.py): the accepted turns of the
projection, a switch's past calls of tools it no longer offers as text, and the log cut back to the
last checkpoint."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import pytest

from turnstate.adapters.contract import ToolCall, ToolResult, UserInput
from turnstate.adapters.images import ImagePart
from turnstate.durable.events import EventLog, read_events
from turnstate.durable.images import ImageFiles, MissingImage
from turnstate.durable.resume import cut_events, projected_turns
from turnstate.environments.frame_image import frame_to_png

MARK = ToolCall("call_a", "MARK", {"x": 3, "y": 5})
LOOK = ToolCall("call_b", "read_catalog", {"page": 1})


def written_log(path: Path) -> list[dict]:
    """Two turns: a rejected reply, then one that acts through a tool call and reads the catalog;
    their results; the next observation and an accepted text reply; each accept's checkpoint."""
    with EventLog(path, redact=str) as log:
        log.user_input(turn=1, step=1, text="frame 1", source="observation")
        rejected = log.assistant_message(turn=1, step=1, text="hmm", status="rejected", attempt=1, reason="no action")
        log.tool_call(rejected, ToolCall("call_x", "MARK", {"x": 0, "y": 0}))
        accepted = log.assistant_message(
            turn=1, step=1, text="marking", status="accepted", attempt=2, action="MARK 3 5"
        )
        log.tool_call(accepted, MARK)
        log.tool_call(accepted, LOOK)
        log.checkpoint(turn=1, step=1, checkpoint_id="1")
        log.tool_result(turn=2, step=2, result=ToolResult("call_a", "MARK", "frame 2"))
        log.tool_result(turn=2, step=2, result=ToolResult("call_b", "read_catalog", "page 1 text"))
        log.user_input(turn=2, step=2, text="game over", source="buffered")
        log.assistant_message(turn=2, step=2, text="ACTION: UP", status="accepted", attempt=1, action="UP")
        log.checkpoint(turn=2, step=2, checkpoint_id="2")
    return [asdict(event) for _, event in read_events(path).events]


def test_the_projection_is_the_accepted_turns_with_their_inputs_calls_and_results(tmp_path):
    (first, second) = projected_turns(written_log(tmp_path / "events.jsonl"))
    assert (first.inputs, first.text, first.tool_calls) == (("frame 1",), "marking", (MARK, LOOK))
    assert first.results == (
        ToolResult("call_a", "MARK", "frame 2"),
        ToolResult("call_b", "read_catalog", "page 1 text"),
    )
    assert (second.inputs, second.text, second.tool_calls, second.results) == (("game over",), "ACTION: UP", (), ())


def test_after_a_switch_a_call_of_a_tool_no_longer_offered_is_the_replys_action_line_and_its_result_an_input(tmp_path):
    (first, second) = projected_turns(written_log(tmp_path / "events.jsonl"), offered={"read_catalog"})
    assert first.text == "marking\nACTION: MARK 3 5" and first.tool_calls == (LOOK,)
    assert first.results == (ToolResult("call_b", "read_catalog", "page 1 text"),)
    assert second.inputs == ("frame 2", "game over")  # the action's frame comes first, as it arrived


def test_the_log_is_cut_back_to_the_checkpoint_keeping_that_checkpoints_own_event(tmp_path):
    path = tmp_path / "events.jsonl"
    events = written_log(path)
    last_of_first_checkpoint = events[5]["seq"]  # the accepted reply's last call
    with path.open("ab") as file:
        file.write(b'{"kind": "user_in')  # a torn line, as a kill leaves one
    assert cut_events(path, last_of_first_checkpoint) == 5  # the second turn's results, input, reply, checkpoint
    kept = [event for _, event in read_events(path).events]
    assert [event.kind for event in kept][-1] == "checkpoint" and kept[-1].seq == last_of_first_checkpoint + 1
    assert cut_events(path, last_of_first_checkpoint) == 0  # cutting again changes nothing


def test_with_no_checkpoint_the_whole_log_is_cut(tmp_path):
    path = tmp_path / "events.jsonl"
    written_log(path)
    assert cut_events(path, 0) == 12 and path.read_bytes() == b""


def test_the_projection_shows_each_input_and_result_its_images_again_read_back_by_digest(tmp_path):
    frame, other = (ImagePart(frame_to_png(rows, scale=4)) for rows in ([[0, 5]], [[8, 9]]))
    files = ImageFiles(tmp_path)
    with EventLog(tmp_path / "events.jsonl", redact=str) as log:
        log.user_input(turn=1, step=1, text="frame 1", source="observation", images=files.keep([frame]))
        accepted = log.assistant_message(turn=1, step=1, text="marking", status="accepted", attempt=1, action="MARK")
        log.tool_call(accepted, MARK)
        log.tool_result(turn=2, step=2, result=ToolResult("call_a", "MARK", "frame 2"), images=files.keep([other]))
        log.user_input(turn=2, step=2, text="go on", source="observation")
        log.assistant_message(turn=2, step=2, text="ACTION: UP", status="accepted", attempt=1, action="UP")
    events = [asdict(event) for _, event in read_events(tmp_path / "events.jsonl").events]
    (first, second) = projected_turns(events, read_image=ImageFiles(tmp_path).read)
    assert first.inputs == (UserInput("frame 1", (frame,)),)
    assert first.results == (ToolResult("call_a", "MARK", "frame 2", images=(other,)),)
    assert second.inputs == ("go on",)
    with pytest.raises(ValueError, match="shows images, and no run folder was given"):
        projected_turns(events)
    files.path(other.digest).unlink()
    with pytest.raises(MissingImage, match=other.digest):
        projected_turns(events, read_image=ImageFiles(tmp_path).read)
