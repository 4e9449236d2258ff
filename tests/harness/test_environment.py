"""beacon_grid through the environment protocol: frames in, actions out, read back as the agent reads
them, and a receipt of what each applied action changed."""

from __future__ import annotations

import re
from collections import deque

import pytest

from turnstate.environments import (
    BUILTIN_ENVIRONMENTS,
    Environment,
    EnvironmentConfigError,
    Frame,
    GameState,
    Receipt,
    environment_ids,
    make_environment,
)

MOVES = {"ACTION1": (-1, 0), "ACTION2": (1, 0), "ACTION3": (0, -1), "ACTION4": (0, 1)}
BEACON_LINE = re.compile(r"^BEACON \(level (\d+)\): (\w+)$", re.MULTILINE)


def new_game(seed: int = 1, **options: object) -> tuple[Environment, Frame]:
    env = make_environment("beacon_grid", seed, options)
    return env, env.reset()


def beacon_of(frame: Frame) -> str:
    """The BEACON line's value: a door letter or `dark`."""
    match = BEACON_LINE.search(frame.text)
    assert match is not None, frame.text
    return match.group(2)


def grid_of(frame: Frame) -> list[str]:
    return [line for line in frame.text.splitlines() if re.fullmatch(r"#[#.@ABC]*#", line)]


def find(grid: list[str], symbol: str) -> tuple[int, int]:
    for row, line in enumerate(grid):
        if symbol in line:
            return row, line.index(symbol)
    raise AssertionError(f"{symbol!r} not in grid")


def distances_from(grid: list[str], start: tuple[int, int]) -> dict[tuple[int, int], int]:
    distances = {start: 0}
    queue = deque([start])
    while queue:
        row, column = queue.popleft()
        for d_row, d_column in MOVES.values():
            cell = (row + d_row, column + d_column)
            if grid[cell[0]][cell[1]] != "#" and cell not in distances:
                distances[cell] = distances[(row, column)] + 1
                queue.append(cell)
    return distances


def walk_to_door(env: Environment, frame: Frame, letter: str) -> Frame:
    """Step along a shortest path until standing on `letter`; the test's own route finder."""
    grid = grid_of(frame)
    distances = distances_from(grid, find(grid, letter))
    row, column = find(grid, "@")
    while distances[(row, column)] > 0:
        for action, (d_row, d_column) in MOVES.items():
            if distances.get((row + d_row, column + d_column)) == distances[(row, column)] - 1:
                frame = env.step(action)
                row, column = row + d_row, column + d_column
                break
    assert f"STANDING ON: door {letter}" in frame.text
    return frame


def wrong_door(beacon: str) -> str:
    return next(letter for letter in "ABC" if letter != beacon)


def test_frame_has_the_documented_line_structure():
    _, frame = new_game(seed=3)
    lines = frame.text.splitlines()
    assert lines[0] == "LEVEL 1/3 | STATE NOT_FINISHED"
    assert re.fullmatch(r"BEACON \(level 1\): [ABC]", lines[1])
    assert lines[2:9] == grid_of(frame) and len(grid_of(frame)) == 7
    assert all(len(row) == 9 for row in grid_of(frame))
    assert lines[9] == "STANDING ON: floor"
    assert lines[10] == "LEGEND @ you, # wall, . floor, A B C doors"
    assert lines[11].startswith("ACTIONS ACTION1 up, ACTION2 down")
    assert (frame.state, frame.level, frame.levels) == (GameState.NOT_FINISHED, 1, 3)


def test_same_seed_gives_same_frames():
    actions = ["ACTION1", "ACTION4", "ACTION2", "ACTION5", "ACTION3", "RESET", "ACTION6"]
    (first, first_frame), (second, second_frame) = new_game(seed=11), new_game(seed=11)
    assert first_frame == second_frame
    for action in actions:
        assert first.step(action) == second.step(action)


def test_different_seeds_give_different_levels():
    first_grids = {tuple(grid_of(new_game(seed=seed)[1])) for seed in range(5)}
    assert len(first_grids) == 5


def test_every_door_is_reachable_and_at_least_five_moves_from_the_start():
    for seed in range(30):
        for size in ({"width": 7, "height": 5}, {"width": 15, "height": 11}, {}):
            _, frame = new_game(seed=seed, **size)
            grid = grid_of(frame)
            distances = distances_from(grid, find(grid, "@"))
            for letter in "ABC":
                assert distances[find(grid, letter)] >= 5, (seed, size, letter)


def test_beacon_is_shown_only_in_the_first_frame_of_a_level():
    env, frame = new_game(seed=5)
    assert beacon_of(frame) in "ABC"
    assert beacon_of(env.step("ACTION6")) == "dark"
    assert beacon_of(env.step("ACTION2")) == "dark"
    assert beacon_of(env.step("RESET")) == "dark"


def test_reset_starts_a_new_game_that_shows_the_beacon_again():
    env, first = new_game(seed=5)
    env.step("ACTION4")
    again = env.reset()
    assert again == first


def test_walls_block_movement():
    env, frame = new_game(seed=2)
    grid = grid_of(frame)
    for _ in range(len(grid)):
        row, column = find(grid, "@")
        below = grid[row + 1][column]
        grid = grid_of(env.step("ACTION2"))
        expected = (row, column) if below == "#" else (row + 1, column)
        assert find(grid, "@") == expected
    assert grid[find(grid, "@")[0] + 1][find(grid, "@")[1]] == "#"


def test_entering_with_no_door_underfoot_changes_nothing():
    env, frame = new_game(seed=4)
    after = env.step("ACTION5")
    assert grid_of(after) == grid_of(frame)
    assert after.state is GameState.NOT_FINISHED and after.level == 1


def test_unknown_action_raises_and_names_it():
    env, _ = new_game()
    with pytest.raises(ValueError, match="JUMP"):
        env.step("JUMP")


def test_step_or_observe_before_reset_raises():
    env = make_environment("beacon_grid", 1)
    with pytest.raises(RuntimeError, match="reset"):
        env.step("ACTION1")
    with pytest.raises(RuntimeError, match="reset"):
        env.observe()
    assert env.receipts() == ()


# The first frame of seed 0 as every local profile's model has read it since the game was written:
# the protocol moved no rendering, so the runs' outcomes cannot have moved either.
SEED_0_FIRST_FRAME = """\
LEVEL 1/3 | STATE NOT_FINISHED
BEACON (level 1): B
#########
#.BA....#
##C...###
#.....@.#
#......##
#......##
#########
STANDING ON: floor
LEGEND @ you, # wall, . floor, A B C doors
ACTIONS ACTION1 up, ACTION2 down, ACTION3 left, ACTION4 right, ACTION5 enter door, ACTION6 wait, RESET restart level"""


def test_the_model_reads_the_frame_text_the_environment_renders_unchanged():
    _, frame = new_game(seed=0)
    assert frame.text == SEED_0_FIRST_FRAME


def test_observing_returns_the_current_frame_again_and_never_spends_the_beacon():
    env, first = new_game(seed=5)
    assert env.observe() == env.observe() == first
    assert beacon_of(env.observe()) in "ABC"
    moved = env.step("ACTION6")
    assert beacon_of(moved) == "dark" and env.observe() == moved
    assert len(env.receipts()) == 1  # observing applied nothing


def test_every_applied_action_leaves_a_receipt_of_what_it_changed():
    env, first = new_game(seed=6, levels=2)
    env.step("ACTION5")  # on floor: nothing
    walk_to_door(env, first, wrong_door(beacon_of(first)))
    env.step("ACTION5")
    with pytest.raises(ValueError):
        env.step("ACTION1")  # refused in GAME_OVER: no receipt
    restarted = env.step("RESET")
    walk_to_door(env, restarted, beacon_of(first))
    second = env.step("ACTION5")
    walk_to_door(env, second, beacon_of(second))
    env.step("ACTION5")
    receipts = env.receipts()
    assert [receipt.step for receipt in receipts] == list(range(1, len(receipts) + 1))
    changes = [receipt.changed for receipt in receipts if receipt.changed != "player moved"]
    door = wrong_door(beacon_of(first))
    assert changes[0] == "nothing"
    assert changes[-4:] == [f"wrong door {door} entered: game over", "level 1 restarted", "level 2 reached", "game won"]
    assert env.receipts(since=len(receipts) - 1) == (Receipt(len(receipts), "ACTION5", "game won"),)
    env.reset()
    assert env.receipts() == ()


def test_wrong_door_is_game_over_and_only_reset_recovers():
    env, first = new_game(seed=6)
    door = wrong_door(beacon_of(first))
    walk_to_door(env, first, door)
    over = env.step("ACTION5")
    assert over.state is GameState.GAME_OVER
    assert f"STANDING ON: door {door}\nYOU ENTERED DOOR {door}: WRONG DOOR" in over.text
    with pytest.raises(ValueError, match="GAME_OVER"):
        env.step("ACTION1")
    restarted = env.step("RESET")
    assert restarted.state is GameState.NOT_FINISHED and restarted.level == 1
    assert grid_of(restarted) == grid_of(first)
    assert beacon_of(restarted) == "dark"
    assert "WRONG DOOR" not in restarted.text


def test_correct_door_advances_and_shows_the_new_levels_beacon():
    env, first = new_game(seed=6)
    walk_to_door(env, first, beacon_of(first))
    second = env.step("ACTION5")
    assert (second.state, second.level) == (GameState.NOT_FINISHED, 2)
    assert second.text.startswith("LEVEL 2/3 | STATE NOT_FINISHED\nBEACON (level 2): ")
    assert beacon_of(second) in "ABC"
    assert beacon_of(env.step("ACTION6")) == "dark"


def test_correct_door_on_last_level_wins_and_then_no_step_is_allowed():
    env, frame = new_game(seed=8, levels=2)
    for _ in range(2):
        walk_to_door(env, frame, beacon_of(frame))
        frame = env.step("ACTION5")
    assert (frame.state, frame.level, frame.levels) == (GameState.WIN, 2, 2)
    assert frame.text.startswith("LEVEL 2/2 | STATE WIN")
    for action in ("ACTION6", "RESET"):
        with pytest.raises(ValueError, match="WIN"):
            env.step(action)


def test_options_set_levels_and_grid_size():
    _, frame = new_game(seed=1, levels=1, width=12, height=8)
    grid = grid_of(frame)
    assert frame.levels == 1 and frame.text.startswith("LEVEL 1/1 ")
    assert len(grid) == 8 and {len(row) for row in grid} == {12}


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"colour": "red"}, "colour"),
        ({"levels": 0}, "levels"),
        ({"levels": 1001}, "levels"),
        ({"levels": "3"}, "levels"),
        ({"levels": True}, "levels"),
        ({"width": 6}, "width"),
        ({"width": 16}, "width"),
        ({"height": 4}, "height"),
        ({"height": 12}, "height"),
    ],
)
def test_invalid_option_raises_naming_it(options, named):
    with pytest.raises(EnvironmentConfigError, match=f"'{named}'"):
        make_environment("beacon_grid", 1, options)


def test_unknown_option_message_lists_the_allowed_ones():
    with pytest.raises(EnvironmentConfigError, match="allowed options: height, levels, render, scale, width"):
        make_environment("beacon_grid", 1, {"colour": "red"})


def test_unknown_environment_raises_and_lists_known_ones():
    assert list(BUILTIN_ENVIRONMENTS) == environment_ids() == ["arc_agi3", "beacon_grid", "catalog_hunt"]
    with pytest.raises(
        EnvironmentConfigError,
        match="unknown environment 'maze'; registered environments: arc_agi3, beacon_grid, catalog_hunt",
    ):
        make_environment("maze", 1)


def test_a_thousand_level_game_is_drawn_level_by_level():
    env = make_environment("beacon_grid", 0, {"levels": 1000})
    frame = env.reset()
    assert (frame.level, frame.levels) == (1, 1000) and "LEVEL 1/1000" in frame.text
