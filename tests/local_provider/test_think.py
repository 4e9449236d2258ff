"""The policy as a reasoning model: the beacon lives in its private thought and its memory, never in
its visible reply, and a compaction summary keeps what it needs."""

from __future__ import annotations

import pytest

from turnstate.adapters.tokens import estimate_text_tokens
from turnstate.environments import GameState, make_environment
from turnstate.local_provider.policy import reply, summarize, think
from turnstate.strategies.summary import SummaryPass, bridge_text, summary_instruction

from .test_policy import EXAMPLE_ROWS, NOTES_SYSTEM, PLAIN_SYSTEM, action_in, assistant, frame_text, user


@pytest.mark.parametrize("system", [PLAIN_SYSTEM, NOTES_SYSTEM], ids=["plain", "notes-asked"])
def test_the_beacon_goes_into_the_thought_and_never_into_a_notes_line(system: str) -> None:
    thought, visible = think(system, [user(frame_text(EXAMPLE_ROWS, beacon="C"))], [])

    assert thought == "NOTES: level 1 beacon C"
    assert "NOTES" not in visible
    assert visible.splitlines() == ["Level 1: heading for door C (beacon seen).", "ACTION: ACTION2"]


def test_the_visible_reply_is_the_chat_reply_without_its_notes_line() -> None:
    messages = [user(frame_text(EXAMPLE_ROWS, beacon="B"))]

    assert think(NOTES_SYSTEM, messages, [])[1] == "\n".join(reply(NOTES_SYSTEM, messages).splitlines()[:-1])


def test_memory_supplies_the_beacon_a_dark_frame_does_not_show() -> None:
    dark = [user(frame_text(EXAMPLE_ROWS, beacon="dark"))]

    remembered_thought, remembered = think(PLAIN_SYSTEM, dark, ["NOTES: level 1 beacon C"])
    forgotten_thought, forgotten = think(PLAIN_SYSTEM, dark, [])

    assert "heading for door C (beacon seen)" in remembered
    assert remembered_thought == "Level 1: following the beacon I noted."
    assert "beacon unknown, guessing" in forgotten
    assert forgotten_thought == "Level 1: no beacon noted, guessing door A."


def test_only_a_beacon_seen_this_turn_is_noted_so_the_note_lives_in_one_thought() -> None:
    dark = [user(frame_text(EXAMPLE_ROWS, beacon="dark"))]
    noted_then_followed = ["NOTES: level 1 beacon C", think(PLAIN_SYSTEM, dark, ["NOTES: level 1 beacon C"])[0]]

    assert "C" not in noted_then_followed[1]
    assert "door C" in think(PLAIN_SYSTEM, dark, noted_then_followed)[1]
    assert "guessing" in think(PLAIN_SYSTEM, dark, noted_then_followed[1:])[1]  # the noting thought dropped


def test_a_beacon_read_in_the_kept_context_is_followed_but_not_noted_again() -> None:
    dark = [user(frame_text(EXAMPLE_ROWS, beacon="dark"))]
    kept = [user(frame_text(EXAMPLE_ROWS, beacon="B"))]  # a compacted window's kept frame

    thought, visible = think(PLAIN_SYSTEM, dark, [], context=kept)

    assert "heading for door B (beacon seen)" in visible
    assert (
        thought == "Level 1: following the beacon the kept messages show."
    )  # no NOTES line: only the context holds it
    assert "guessing" in think(PLAIN_SYSTEM, dark, [thought])[1]  # so a client that drops the kept messages forgets it


def test_the_current_turn_wins_over_memory_and_the_latest_memory_wins_over_older() -> None:
    shown = [user(frame_text(EXAMPLE_ROWS, beacon="B"))]
    dark = [user(frame_text(EXAMPLE_ROWS, beacon="dark"))]

    assert think(PLAIN_SYSTEM, shown, ["NOTES: level 1 beacon C"])[0] == "NOTES: level 1 beacon B"
    assert "door C" in think(PLAIN_SYSTEM, dark, ["NOTES: level 1 beacon A", "NOTES: level 1 beacon C"])[1]


def test_memory_about_another_level_does_not_help() -> None:
    dark_level_two = [user(frame_text(EXAMPLE_ROWS, beacon="dark", level=2))]

    assert "guessing" in think(PLAIN_SYSTEM, dark_level_two, ["NOTES: level 1 beacon C"])[1]


def test_a_turn_without_a_frame_thinks_and_takes_no_action() -> None:
    thought, visible = think(PLAIN_SYSTEM, [user("hello")], ["NOTES: level 1 beacon C"])

    assert thought and "ACTION:" not in visible


def test_a_won_game_still_notes_its_level_and_takes_no_action() -> None:
    won = [user(frame_text(EXAMPLE_ROWS, beacon="dark", state="WIN", level=3))]
    thought, visible = think(PLAIN_SYSTEM, won, ["NOTES: level 3 beacon B"])

    assert thought == "Level 3: following the beacon I noted."
    assert "all levels cleared" in visible and "ACTION:" not in visible


def test_a_summary_keeps_only_the_latest_beacon_of_the_level_being_played() -> None:
    memory = [
        "NOTES: level 2 beacon A",
        "NOTES: level 1 beacon B\nNOTES: level 1 beacon unknown",
        "NOTES: level 2 beacon C",
        "an unrelated thought",
    ]

    assert summarize(memory) == "NOTES: level 2 beacon C"  # level 1 is won: its beacon is never needed again
    assert summarize([]) == summarize(["nothing about beacons"])
    assert "beacon" not in summarize([]).replace("NOTES: nothing to remember yet", "")


def test_a_frame_of_a_later_level_makes_every_earlier_note_unneeded() -> None:
    dark_level_three = frame_text(EXAMPLE_ROWS, beacon="dark", level=3)
    shown_level_three = frame_text(EXAMPLE_ROWS, beacon="B", level=3)

    assert summarize(["NOTES: level 2 beacon C", dark_level_three]) == "NOTES: nothing to remember yet"
    assert summarize(["NOTES: level 2 beacon C", shown_level_three]) == "NOTES: level 3 beacon B"


SUMMARY_ASKED = "Summarize the conversation so far. Keep the summary within {budget} tokens."


@pytest.mark.parametrize(("budget", "expected"), [(6, "NOTES: level 3 beacon B"), (5, "")], ids=["fits", "too small"])
def test_a_chat_summary_keeps_within_the_budget_its_request_names_or_says_nothing(budget, expected) -> None:
    messages = [user(frame_text(EXAMPLE_ROWS, beacon="B", level=3)), user(SUMMARY_ASKED.format(budget=budget))]

    assert reply(PLAIN_SYSTEM, messages) == expected  # the line is 23 bytes: 6 tokens (24 bytes) hold it, 5 do not


def test_a_reasoning_summary_counts_its_thought_against_the_budget() -> None:
    messages = [user(frame_text(EXAMPLE_ROWS, beacon="B", level=3)), user(SUMMARY_ASKED.format(budget=16))]
    thought, summary = think(PLAIN_SYSTEM, messages, [])

    assert thought == "Summarizing what the conversation holds."  # 40 bytes: 10 tokens of the 16
    assert summary == "NOTES: level 3 beacon B"  # 6 tokens: 16 hold both, 15 do not
    assert think(PLAIN_SYSTEM, messages[:1] + [user(SUMMARY_ASKED.format(budget=15))], [])[1] == ""


def test_a_summary_read_back_as_memory_still_knows_the_beacon() -> None:
    dark = [user(frame_text(EXAMPLE_ROWS, beacon="dark"))]
    summary = summarize(["NOTES: level 1 beacon C", "NOTES: level 1 beacon C"])

    assert "heading for door C (beacon seen)" in think(PLAIN_SYSTEM, dark, [summary])[1]


def test_old_frames_reach_think_only_if_the_caller_passes_them_as_the_current_turn() -> None:
    """think reads what it is given; the wire decides that old frames are not part of it."""
    history = [user(frame_text(EXAMPLE_ROWS, beacon="C")), assistant("ok"), user(frame_text(EXAMPLE_ROWS, "dark"))]

    assert "door C" in think(PLAIN_SYSTEM, history, [])[1]
    assert "guessing" in think(PLAIN_SYSTEM, history[-1:], [])[1]


def test_summaries_stay_one_line_within_budget_through_a_long_game_that_is_still_won() -> None:
    """The harness-summary loop with the policy alone: every ten turns the turns since the last
    summary (their frames, and the thoughts as memory) are summarized and replaced by the bridge."""
    asked = summary_instruction(SummaryPass("trigger", 1, 1, fork=True), 256)
    env = make_environment("beacon_grid", 0, {"levels": 120, "width": 7, "height": 5})
    frame, bridge, sent, thoughts, summaries = env.reset(), [], [], [], []
    while frame.state is not GameState.WIN and len(summaries) < 200:
        sent.append(user(frame.text))
        thought, answer = think(PLAIN_SYSTEM, [*bridge, sent[-1]], thoughts)
        thoughts.append(thought)
        frame = env.step(action_in(answer))
        if len(thoughts) == 10:
            summaries.append(think(PLAIN_SYSTEM, [*bridge, *sent, user(asked)], thoughts)[1])
            bridge, sent, thoughts = [user(bridge_text(summaries[-1]))], [], []

    assert frame.state is GameState.WIN and frame.level == 120
    assert all(summary.count("\n") == 0 and estimate_text_tokens(summary) <= 256 for summary in summaries)
    assert max(map(len, summaries)) <= len("NOTES: level 120 beacon A")
