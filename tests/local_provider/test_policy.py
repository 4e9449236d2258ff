"""The local provider's policy: what it does depends only on what the request text still holds."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from turnstate.environments import Frame, GameState, make_environment
from turnstate.local_provider.policy import reply

Exchange = tuple[str, str]  # (frame text sent as user, policy reply)
Window = Callable[[list[Exchange]], list[Exchange]]

PLAIN_SYSTEM = "You play beacon_grid. Answer with one line ACTION: <action>."
NOTES_SYSTEM = PLAIN_SYSTEM + " End every reply with a line NOTES: level <n> beacon <letter>."
ACTION_LINE = re.compile(r"^ACTION: (\S+)$", re.MULTILINE)
SHOWN_BEACON = re.compile(r"^BEACON \(level (\d+)\): ([ABC])$", re.MULTILINE)
MAX_STEPS = 300


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, str]:
    return {"role": "assistant", "content": text}


def full_history(exchanges: list[Exchange]) -> list[Exchange]:
    return exchanges


def without_level_openers(exchanges: list[Exchange]) -> list[Exchange]:
    """Lost memory: every exchange whose frame showed a beacon is gone."""
    return [exchange for exchange in exchanges if not SHOWN_BEACON.search(exchange[0])]


def last_two_exchanges(exchanges: list[Exchange]) -> list[Exchange]:
    return exchanges[-2:]


def as_messages(exchanges: list[Exchange], frame: Frame) -> list[dict[str, str]]:
    messages = []
    for sent, answer in exchanges:
        messages += [user(sent), assistant(answer)]
    return messages + [user(frame.text)]


def action_in(answer: str) -> str:
    match = ACTION_LINE.search(answer)
    assert match is not None, answer
    return match.group(1)


def play(seed: int, window: Window, system: str = PLAIN_SYSTEM) -> list[Frame]:
    """Replay policy replies through the game until it is won or lost; every frame, in order."""
    env = make_environment("beacon_grid", seed)
    frames = [env.reset()]
    exchanges: list[Exchange] = []
    while frames[-1].state is GameState.NOT_FINISHED and len(frames) <= MAX_STEPS:
        answer = reply(system, as_messages(window(exchanges), frames[-1]))
        exchanges.append((frames[-1].text, answer))
        frames.append(env.step(action_in(answer)))
    return frames


def beacons_shown(frames: list[Frame]) -> dict[int, str]:
    return {int(level): letter for frame in frames for level, letter in SHOWN_BEACON.findall(frame.text)}


def seeds_with_a_beacon_other_than_a(count: int = 3) -> list[int]:
    """Seeds where guessing door A must fail some level, read from a full-memory playthrough."""
    seeds = []
    for seed in range(40):
        if set(beacons_shown(play(seed, full_history)).values()) - {"A"}:
            seeds.append(seed)
        if len(seeds) == count:
            return seeds
    raise AssertionError(f"only {len(seeds)} of 40 seeds have a beacon other than A")


LOST_MEMORY_SEEDS = seeds_with_a_beacon_other_than_a()


def frame_text(
    rows: list[str],
    beacon: str = "B",
    state: str = "NOT_FINISHED",
    level: int = 1,
    standing_on: str = "floor",
) -> str:
    """A hand-written frame in the game's format, for cases a replay cannot pin down."""
    return "\n".join(
        [
            f"LEVEL {level}/3 | STATE {state}",
            f"BEACON (level {level}): {beacon}",
            *rows,
            f"STANDING ON: {standing_on}",
            "LEGEND @ you, # wall, . floor, A B C doors",
            "ACTIONS ACTION1 up, ACTION2 down, ACTION3 left, ACTION4 right, ACTION5 enter door, "
            "ACTION6 wait, RESET restart level",
        ]
    )


EXAMPLE_ROWS = [
    "#########",
    "#..A....#",
    "#.@..#..#",
    "#....#B.#",
    "#C......#",
    "#########",
]
DETOUR_ROWS = [  # straight right is a dead end; the shortest path to B starts upward
    "#########",
    "#.......#",
    "#.#####.#",
    "#@....#B#",
    "#########",
]


@pytest.mark.parametrize("seed", range(6))
def test_full_history_wins_the_game(seed):
    assert play(seed, full_history)[-1].state is GameState.WIN


@pytest.mark.parametrize("seed", LOST_MEMORY_SEEDS)
def test_without_level_openers_and_notes_it_loses_a_level_whose_beacon_is_not_a(seed):
    beacons = beacons_shown(play(seed, full_history))
    last = play(seed, without_level_openers)[-1]
    assert last.state is GameState.GAME_OVER
    assert beacons[last.level] != "A"
    assert "YOU ENTERED DOOR A: WRONG DOOR" in last.text


@pytest.mark.parametrize("seed", LOST_MEMORY_SEEDS)
def test_notes_carry_the_beacon_through_a_two_exchange_window(seed):
    assert play(seed, last_two_exchanges, NOTES_SYSTEM)[-1].state is GameState.WIN


@pytest.mark.parametrize("seed", LOST_MEMORY_SEEDS)
def test_two_exchange_window_without_notes_loses(seed):
    assert play(seed, last_two_exchanges, PLAIN_SYSTEM)[-1].state is GameState.GAME_OVER


def test_game_over_frame_gets_reset():
    over = play(LOST_MEMORY_SEEDS[0], without_level_openers)[-1]
    assert over.state is GameState.GAME_OVER
    assert action_in(reply(PLAIN_SYSTEM, [user(over.text)])) == "RESET"


def test_the_last_frame_in_a_message_is_the_one_acted_on():
    over = frame_text(EXAMPLE_ROWS, beacon="dark", state="GAME_OVER")
    restarted = frame_text(EXAMPLE_ROWS, beacon="dark")
    assert action_in(reply(PLAIN_SYSTEM, [user(over)])) == "RESET"
    assert action_in(reply(PLAIN_SYSTEM, [user(over + "\n" + restarted)])) != "RESET"


def test_a_later_message_without_a_frame_does_not_hide_the_last_frame():
    messages = [
        user(frame_text(EXAMPLE_ROWS, state="GAME_OVER")),
        assistant("Thinking."),
        user("Go on."),
    ]
    assert action_in(reply(PLAIN_SYSTEM, messages)) == "RESET"


def test_won_game_gets_no_action_line():
    won = frame_text(EXAMPLE_ROWS, beacon="dark", state="WIN", level=3)
    answer = reply(NOTES_SYSTEM, [user(won)])
    assert "all levels cleared" in answer and "ACTION:" not in answer


def test_no_frame_means_no_action_line():
    answer = reply(PLAIN_SYSTEM, [user("Hello, are you there?")])
    assert answer.strip() and "ACTION:" not in answer


def test_notes_line_only_when_the_system_prompt_asks():
    messages = [user(frame_text(EXAMPLE_ROWS, beacon="C"))]
    assert reply(NOTES_SYSTEM, messages).splitlines()[-1] == "NOTES: level 1 beacon C"
    assert "NOTES" not in reply(PLAIN_SYSTEM, messages)
    unknown = [user(frame_text(EXAMPLE_ROWS, beacon="dark"))]
    assert reply(NOTES_SYSTEM, unknown).splitlines()[-1] == "NOTES: level 1 beacon unknown"


def test_reply_format_names_level_target_and_source():
    seen = reply(NOTES_SYSTEM, [user(frame_text(EXAMPLE_ROWS, beacon="B"))])
    assert seen.splitlines() == [
        "Level 1: heading for door B (beacon seen).",
        "ACTION: ACTION1",
        "NOTES: level 1 beacon B",
    ]
    guessed = reply(PLAIN_SYSTEM, [user(frame_text(EXAMPLE_ROWS, beacon="dark"))])
    assert guessed.splitlines()[0] == "Level 1: heading for door A (beacon unknown, guessing)."


def test_unknown_beacon_heads_for_door_a():
    # From (2,2), A at (1,3) is two moves away by up or right; C would need down or left.
    answer = reply(PLAIN_SYSTEM, [user(frame_text(EXAMPLE_ROWS, beacon="dark"))])
    assert action_in(answer) == "ACTION1"
    to_c = reply(PLAIN_SYSTEM, [user(frame_text(EXAMPLE_ROWS, beacon="C"))])
    assert action_in(to_c) == "ACTION2"


def test_beacon_from_a_notes_line_in_an_assistant_message():
    messages = [
        assistant("Level 1: heading for door C.\nNOTES: level 1 beacon C"),
        user(frame_text(EXAMPLE_ROWS, beacon="dark")),
    ]
    assert "heading for door C (beacon seen)" in reply(PLAIN_SYSTEM, messages)


def test_beacon_from_a_notes_mention_inside_a_user_message():
    carried = "Carried over: NOTES: level 1 beacon C\n"
    messages = [user(carried + frame_text(EXAMPLE_ROWS, beacon="dark"))]
    assert "heading for door C (beacon seen)" in reply(PLAIN_SYSTEM, messages)


def test_latest_mention_for_the_current_level_wins():
    messages = [
        user(frame_text(EXAMPLE_ROWS, beacon="B")),
        assistant("NOTES: level 1 beacon C\nNOTES: level 2 beacon A"),
        user(frame_text(EXAMPLE_ROWS, beacon="dark")),
    ]
    assert "heading for door C" in reply(PLAIN_SYSTEM, messages)


def test_a_beacon_for_another_level_is_ignored():
    messages = [
        assistant("NOTES: level 1 beacon C"),
        user(frame_text(EXAMPLE_ROWS, beacon="dark", level=2)),
    ]
    assert "heading for door A (beacon unknown, guessing)" in reply(PLAIN_SYSTEM, messages)


def test_standing_on_the_target_door_enters_it():
    rows = ["#########", "#..A....#", "#....#..#", "#....#@.#", "#C......#", "#########"]
    answer = reply(PLAIN_SYSTEM, [user(frame_text(rows, beacon="B", standing_on="door B"))])
    assert action_in(answer) == "ACTION5"


def test_standing_on_another_door_walks_on_instead_of_entering():
    rows = ["#######", "#..@..#", "#.....#", "#C...B#", "#######"]
    answer = reply(PLAIN_SYSTEM, [user(frame_text(rows, beacon="B", standing_on="door A"))])
    assert action_in(answer) == "ACTION2"


def test_moves_along_the_shortest_path_not_straight_at_the_door():
    assert action_in(reply(PLAIN_SYSTEM, [user(frame_text(DETOUR_ROWS, beacon="B"))])) == "ACTION1"


def test_equally_short_first_steps_prefer_action1_then_2_3_4():
    # From (2,2) door B is six moves away going up, down or right: up wins.
    assert action_in(reply(PLAIN_SYSTEM, [user(frame_text(EXAMPLE_ROWS, beacon="B"))])) == "ACTION1"
    # Door C is three moves away going down or left: down wins.
    assert action_in(reply(PLAIN_SYSTEM, [user(frame_text(EXAMPLE_ROWS, beacon="C"))])) == "ACTION2"
