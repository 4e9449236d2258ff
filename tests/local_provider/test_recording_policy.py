"""The recording model (client.local.recording): a winning play's moves, played from where the
carried state says the model is, with the frame read for its state and offered moves; and the
recording file read line by line, each problem named with its line."""

from __future__ import annotations

import json

import pytest

from turnstate.local_provider import policy
from turnstate.local_provider.recording_policy import RecordingError, RecordingModel, read_recording

MOVES = ("RESET", "ACTION6 16 47", "ACTION3")
NOTES_SYSTEM = "Play. End every reply with one line that starts with 'NOTES:'."


def frame(state: str = "NOT_FINISHED", actions: str = "RESET, ACTION3, ACTION6 x y") -> str:
    return "\n".join(
        [
            f"ARC LEVEL 1/2 | STATE {state}",
            "GAME ft09 | LEVELS COMPLETED 0/2",
            "GRID 2x2: one hex digit per cell",
            "00",
            "0a",
            f"ACTIONS {actions}",
        ]
    )


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, str]:
    return {"role": "assistant", "content": text}


MODEL = RecordingModel(MOVES)


def test_a_chat_reply_plays_the_move_after_the_highest_noted_step_and_notes_the_next():
    first = MODEL.reply(NOTES_SYSTEM, [user(frame())])
    assert first.splitlines()[-2:] == ["ACTION: RESET", "NOTES: recording step 1 of 3"]
    history = [user(frame()), assistant(first), user(frame()), assistant("ACTION: X\nNOTES: recording step 2 of 3")]
    assert MODEL.reply(NOTES_SYSTEM, [*history, user(frame())]).splitlines()[-2:] == [
        "ACTION: ACTION3",
        "NOTES: recording step 3 of 3",
    ]
    assert "NOTES" not in MODEL.reply("Play.", [user(frame())])  # notes only when asked for


def test_without_a_note_it_starts_again_from_the_first_move():
    forgotten = [user(frame()), assistant("Playing the recorded move.\nACTION: ACTION6 16 47"), user(frame())]
    assert "ACTION: RESET" in MODEL.reply(NOTES_SYSTEM, forgotten)


def test_a_thought_carries_the_place_and_the_visible_reply_never_does():
    thought, reply = MODEL.think("Play.", [user(frame())], ["NOTES: recording step 1 of 3"])
    assert thought == "NOTES: recording step 2 of 3"
    assert reply.splitlines() == ["Playing the recorded move.", "ACTION: ACTION6 16 47"]
    assert MODEL.think("Play.", [user(frame())], [])[1].endswith("ACTION: RESET")


def test_a_summary_keeps_the_one_line_that_says_where_it_is():
    memory = ["NOTES: recording step 1 of 3", "a frame", "NOTES: recording step 2 of 3"]
    assert MODEL.summarize(memory) == "NOTES: recording step 2 of 3"
    asked = [
        user(frame()),
        assistant("NOTES: recording step 2 of 3"),
        user("Summarize the conversation within 40 tokens."),
    ]
    assert MODEL.reply(NOTES_SYSTEM, asked) == "NOTES: recording step 2 of 3"
    tight = [*asked[:-1], user("Summarize the conversation within 2 tokens.")]
    assert MODEL.reply(NOTES_SYSTEM, tight) == ""  # no cut line, which would read as another place


@pytest.mark.parametrize(
    ("messages", "said"),
    [
        ([user(frame("GAME_OVER", "RESET"))], "the game is over after 0 recorded moves"),
        (
            [assistant("NOTES: recording step 1 of 3"), user(frame(actions="RESET, ACTION3"))],
            "move 2 is ACTION6, which this frame does not offer",
        ),
        (
            [assistant("NOTES: recording step 3 of 3"), user(frame())],
            "all 3 recorded moves are played and the game is not won",
        ),
    ],
    ids=["game over", "move not offered", "past the end"],
)
def test_a_frame_that_contradicts_its_place_makes_it_say_it_is_lost_and_name_no_move(messages, said):
    reply = MODEL.reply(NOTES_SYSTEM, messages)
    assert said in reply and "ACTION:" not in reply and "NOTES:" not in reply
    assert "lost my place" in MODEL.think("Play.", messages[-1:], [m["content"] for m in messages[:-1]])[0]


def test_a_won_frame_is_answered_as_won_and_other_games_go_to_the_default_policy():
    assert "all ARC levels cleared" in MODEL.reply(NOTES_SYSTEM, [user(frame("WIN", ""))])
    assert MODEL.reply(NOTES_SYSTEM, [user("Hello.")]) == policy.reply(NOTES_SYSTEM, [user("Hello.")])
    assert MODEL.reply(NOTES_SYSTEM, [user("Hello.")]) == policy.NO_FRAME_REPLY


def action_line(number: int, **data: object) -> str:
    return json.dumps(
        {"data": {"action_input": {"id": number, "data": {"game_id": "ft09-9ab2447a", **data}, "reasoning": None}}}
    )


def test_a_recording_is_read_as_the_harness_writes_actions(tmp_path):
    path = tmp_path / "play.jsonl"
    path.write_text("\n".join([action_line(0), action_line(6, x=16, y=47), "", action_line(3)]) + "\n")
    assert read_recording(path) == ("ft09-9ab2447a", MOVES)


@pytest.mark.parametrize(
    ("lines", "said"),
    [
        (["{not json"], "line 1: not a recorded action"),
        ([action_line(0), action_line(8)], "line 2: action id 8 is not one of 0 (RESET) to 7"),
        ([json.dumps({"data": {"action_input": {"id": True, "data": {"game_id": "g"}}}})], "action id True"),
        ([json.dumps({"data": {"action_input": {"id": 1, "data": {}}}})], "line 1: the action names no game_id"),
        ([action_line(6, x=3)], "line 1: ACTION6 needs integer x and y from 0 to 63, got x=3, y=None"),
        ([action_line(6, x=3, y=64)], "got x=3, y=64"),
        (
            [action_line(1), json.dumps({"data": {"action_input": {"id": 1, "data": {"game_id": "ls20"}}}})],
            "names more than one game",
        ),
        ([""], "holds no action"),
    ],
)
def test_a_bad_recording_is_named_with_its_file_and_line(tmp_path, lines, said):
    path = tmp_path / "play.jsonl"
    path.write_text("\n".join(lines))
    with pytest.raises(RecordingError, match=f"^{path}") as caught:
        read_recording(path)
    assert said in str(caught.value)


def test_a_recording_that_is_not_text_or_not_there_is_named(tmp_path):
    binary = tmp_path / "play.jsonl"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(RecordingError, match="not UTF-8 text"):
        read_recording(binary)
    with pytest.raises(RecordingError, match="cannot be read"):
        read_recording(tmp_path / "absent.jsonl")
