"""catalog_hunt through the environment protocol, rule by rule: a seed is a game, the clue shows once,
the catalog tool reads without changing anything, every applied action leaves a receipt, and every
malformed action or tool call is refused by name, changing nothing."""

from __future__ import annotations

import re

import pytest

from turnstate.environments import (
    BUILTIN_ENVIRONMENTS,
    EnvironmentConfigError,
    Frame,
    GameState,
    Receipt,
    environment_ids,
    make_environment,
)
from turnstate.environments.catalog_hunt import CatalogHunt
from turnstate.environments.protocol import ToolEnvironment, ToolRefused

CLUE_LINE = re.compile(r"^CLUE \(level (\d+)\): (.+)$", re.MULTILINE)
SHOWN_CLUE = re.compile(r"^catalog page (\d+) entry (\d+)$")
BEACON_FRAME_HEADER = re.compile(r"^LEVEL (\d+)/(\d+) \| STATE (\w+)[ \t]*$", re.MULTILINE)


def new_game(seed: int = 1, **options: object) -> tuple[CatalogHunt, Frame]:
    env = make_environment("catalog_hunt", seed, options)
    assert isinstance(env, CatalogHunt)
    return env, env.reset()


def clue_of(frame: Frame) -> str:
    """The CLUE line's value: `catalog page P entry E` or `dark`."""
    match = CLUE_LINE.search(frame.text)
    assert match is not None, frame.text
    assert int(match.group(1)) == frame.level
    return match.group(2)


def target_of(env: CatalogHunt, clue: str) -> tuple[int, int]:
    """The cell a shown clue names, read as an agent reads it: through the catalog tool."""
    shown = SHOWN_CLUE.fullmatch(clue)
    assert shown is not None, clue
    page = env.call_tool("read_catalog", {"page": int(shown.group(1))})
    entry = re.search(rf"^ENTRY {shown.group(2)}: cell x=(\d) y=(\d)$", page, re.MULTILINE)
    assert entry is not None, page
    return int(entry.group(1)), int(entry.group(2))


def mark(cell: tuple[int, int]) -> str:
    return f"MARK {cell[0]} {cell[1]}"


def a_wrong_cell(right: tuple[int, int]) -> tuple[int, int]:
    return (right[0] + 1) % 8, right[1]


def play_through(env: CatalogHunt, first: Frame) -> list[Frame]:
    """Win every level by reading each clue's page; every frame, in order."""
    frames = [first]
    while frames[-1].state is GameState.NOT_FINISHED:
        frames.append(env.step(mark(target_of(env, clue_of(frames[-1])))))
    return frames


def state_of(env: CatalogHunt) -> tuple[Frame, tuple[Receipt, ...]]:
    return env.observe(), env.receipts()


def test_catalog_hunt_is_a_registered_built_in_tool_environment():
    assert "catalog_hunt" in BUILTIN_ENVIRONMENTS and "catalog_hunt" in environment_ids()
    env, _ = new_game()
    assert isinstance(env, ToolEnvironment)
    assert env.name == "catalog_hunt" and env.actions == ("MARK", "WAIT", "RESET")


def test_a_seed_is_a_game_frames_and_pages_alike():
    first, again = new_game(7)[0], new_game(7)[0]
    assert [frame.text for frame in play_through(first, first.reset())] == [
        frame.text for frame in play_through(again, again.reset())
    ]
    assert first.call_tool("read_catalog", {"page": 12}) == again.call_tool("read_catalog", {"page": 12})
    others = {clue_of(new_game(seed)[1]) for seed in range(10)}
    assert len(others) > 1


def test_the_first_frame_of_each_level_shows_its_clue_and_every_later_frame_is_dark():
    env, first = new_game(3, levels=3)
    assert clue_of(first).startswith("catalog page ") and env.observe() == first
    waited = env.step("WAIT")
    assert clue_of(waited) == "dark" and clue_of(env.observe()) == "dark"
    restarted = env.step("RESET")
    assert clue_of(restarted) == "dark" and restarted.level == 1
    level_two = env.step(mark(target_of(env, clue_of(first))))
    assert level_two.level == 2 and clue_of(level_two).startswith("catalog page ")
    assert clue_of(env.step("WAIT")) == "dark"


def test_the_frame_header_is_its_own_so_no_beacon_grid_reader_takes_it_for_a_beacon_frame():
    _, first = new_game(levels=4)
    assert first.text.splitlines()[0] == "CATALOG LEVEL 1/4 | STATE NOT_FINISHED"
    assert BEACON_FRAME_HEADER.search(first.text) is None
    legend = first.text.splitlines()[-3:]
    assert legend[0].startswith("BOARD 8 x 8") and "MARK x y" in legend[1] and "read_catalog" in legend[2]


def test_the_entry_the_clue_names_gives_the_cell_that_wins_each_level():
    env, first = new_game(5, levels=3)
    frames = play_through(env, first)
    assert [frame.level for frame in frames] == [1, 2, 3, 3]
    assert frames[-1].state is GameState.WIN
    assert [receipt.changed for receipt in env.receipts()] == ["level 2 reached", "level 3 reached", "game won"]


def test_pages_are_large_headed_and_hold_numbered_entries_with_cells():
    env, _ = new_game(2, pages=500)
    for page in range(1, 501):
        text = env.call_tool("read_catalog", {"page": page})
        assert 3000 <= len(text) <= 5000
        assert text.splitlines()[0] == f"CATALOG PAGE {page}"
        entries = re.findall(r"^ENTRY (\d+): cell x=[0-7] y=[0-7]$", text, re.MULTILINE)
        assert entries == [str(number) for number in range(1, len(entries) + 1)] and 8 <= len(entries) <= 16
        assert len(re.findall(r"ENTRY|CATALOG PAGE", text)) == len(entries) + 1


def test_the_catalog_is_the_games_not_the_levels_and_reading_it_changes_nothing():
    env, first = new_game(4)
    page = env.call_tool("read_catalog", {"page": 1})
    before = state_of(env)
    for number in range(1, 41):
        env.call_tool("read_catalog", {"page": number})
    assert state_of(env) == before and env.observe() == first  # the clue is still the first frame's
    env.step(mark(target_of(env, clue_of(first))))
    assert env.call_tool("read_catalog", {"page": 1}) == page
    assert len(env.receipts()) == 1


def test_a_wrong_mark_is_game_over_and_only_reset_plays_on_restarting_the_level_dark():
    env, first = new_game(6)
    wrong = a_wrong_cell(target_of(env, clue_of(first)))
    over = env.step(mark(wrong))
    assert over.state is GameState.GAME_OVER and over.level == 1
    assert f"YOU MARKED x={wrong[0]} y={wrong[1]}: WRONG CELL" in over.text
    for refused in ("WAIT", mark(wrong)):
        with pytest.raises(
            ValueError, match=f"action '{refused}' is not allowed in state GAME_OVER; allowed actions: RESET"
        ):
            env.step(refused)
    assert state_of(env) == (over, env.receipts()) and len(env.receipts()) == 1
    restarted = env.step("RESET")
    assert restarted.state is GameState.NOT_FINISHED and restarted.level == 1
    assert clue_of(restarted) == "dark" and "WRONG CELL" not in restarted.text


def test_after_the_last_level_is_won_no_step_is_allowed_until_reset():
    env, first = new_game(8, levels=1)
    won = play_through(env, first)[-1]
    assert won.state is GameState.WIN
    with pytest.raises(ValueError, match=r"allowed actions: none \(call reset\(\)\)"):
        env.step("RESET")
    again = env.reset()
    assert again == first and env.receipts() == ()


def test_every_applied_action_leaves_a_receipt_of_what_it_changed():
    env, first = new_game(9, levels=2)
    right = target_of(env, clue_of(first))
    wrong = a_wrong_cell(right)
    for action in ("WAIT", "RESET", mark(wrong), "RESET", mark(right)):
        env.step(action)
    assert env.receipts() == (
        Receipt(1, "WAIT", "nothing"),
        Receipt(2, "RESET", "level 1 restarted"),
        Receipt(3, mark(wrong), f"wrong cell x={wrong[0]} y={wrong[1]} marked: game over"),
        Receipt(4, "RESET", "level 1 restarted"),
        Receipt(5, mark(right), "level 2 reached"),
    )
    assert env.receipts(since=4) == (Receipt(5, mark(right), "level 2 reached"),)


@pytest.mark.parametrize(
    ("action", "problem"),
    [
        ("MARK", "MARK takes two integers, x (the column) then y (the row)"),
        ("MARK 3", "MARK takes two integers"),
        ("MARK 3 5 1", "MARK takes two integers"),
        ("MARK a b", "MARK's x must be an integer from 0 to 7, got 'a'"),
        ("MARK 3 b", "MARK's y must be an integer from 0 to 7, got 'b'"),
        ("MARK 99 0", "MARK's x must be an integer from 0 to 7, got '99'"),
        ("MARK 0 8", "MARK's y must be an integer from 0 to 7, got '8'"),
        ("MARK -1 0", "MARK's x must be an integer from 0 to 7, got '-1'"),
        ("MARK 3.0 5", "MARK's x must be an integer from 0 to 7, got '3.0'"),
        ("MARK  3 5", "MARK takes two integers"),
        ("WAIT 1", "WAIT takes no arguments"),
        ("RESET now", "RESET takes no arguments"),
        ("mark 3 5", "unknown action 'mark 3 5'; allowed actions: MARK x y, WAIT, RESET"),
        (" MARK 3 5", "unknown action"),
        ("", "unknown action ''"),
        ("ACTION5", "unknown action 'ACTION5'"),
    ],
)
def test_a_malformed_action_is_refused_naming_the_problem_and_changes_nothing(action, problem):
    env, _ = new_game()
    env.step("WAIT")
    before = state_of(env)
    with pytest.raises(ValueError, match=re.escape(problem)):
        env.step(action)
    assert state_of(env) == before


def test_step_and_observe_before_reset_are_refused():
    env = CatalogHunt.from_options(1, {})
    for call in (env.observe, lambda: env.step("WAIT")):
        with pytest.raises(RuntimeError, match="call reset"):
            call()
    assert env.receipts() == ()


@pytest.mark.parametrize(
    ("name", "arguments", "problem"),
    [
        ("read_page", {"page": 1}, "unknown tool 'read_page'; the read-only tools are: read_catalog"),
        ("MARK", {"x": 1, "y": 2}, "'MARK' is an action, step it; the read-only tools are: read_catalog"),
        ("read_catalog", {}, "read_catalog takes one argument, 'page': an integer from 1 to 40; it is missing"),
        ("read_catalog", {"page": 1, "entry": 2}, "unexpected argument 'entry'"),
        ("read_catalog", {"page": "3"}, "an integer from 1 to 40; got '3'"),
        ("read_catalog", {"page": True}, "got True"),
        ("read_catalog", {"page": 2.5}, "got 2.5"),
        ("read_catalog", {"page": None}, "got None"),
        ("read_catalog", {"page": 0}, "got 0"),
        ("read_catalog", {"page": 41}, "got 41"),
        ("read_catalog", [("page", 1)], "as a JSON object; got list"),
    ],
)
def test_a_tool_call_the_schema_refuses_is_refused_by_name_and_changes_nothing(name, arguments, problem):
    env, _ = new_game()
    before = state_of(env)
    with pytest.raises(ToolRefused, match=re.escape(problem)):
        env.call_tool(name, arguments)
    assert state_of(env) == before


def test_an_integral_number_is_an_integer_page_as_json_schema_has_it():
    env, _ = new_game()
    assert env.call_tool("read_catalog", {"page": 3.0}) == env.call_tool("read_catalog", {"page": 3})


def test_the_actions_are_tools_whose_schemas_refuse_what_step_refuses():
    env, _ = new_game(pages=25)
    assert [tool.name for tool in env.action_tools] == list(env.actions)
    marking = env.action_tools[0].parameters
    assert marking == {
        "type": "object",
        "properties": {
            "x": {"type": "integer", "minimum": 0, "maximum": 7, "description": "the column, 0 at the left"},
            "y": {"type": "integer", "minimum": 0, "maximum": 7, "description": "the row, 0 at the top"},
        },
        "required": ["x", "y"],
        "additionalProperties": False,
    }
    for bare in env.action_tools[1:]:
        assert bare.parameters == {"type": "object", "properties": {}, "additionalProperties": False}
    (reading,) = env.tools
    assert reading.name == "read_catalog"
    assert reading.parameters["properties"] == {
        "page": {"type": "integer", "minimum": 1, "maximum": 25, "description": "the page number"}
    }
    assert reading.parameters["required"] == ["page"] and reading.parameters["additionalProperties"] is False


def test_a_mark_written_from_its_tools_properties_in_order_marks_that_cell():
    env, first = new_game(11)
    wrong = a_wrong_cell(target_of(env, clue_of(first)))
    arguments = {"y": wrong[1], "x": wrong[0]}  # a call's arguments, in any order
    action = " ".join(["MARK", *(str(arguments[name]) for name in env.action_tools[0].parameters["properties"])])
    assert f"YOU MARKED x={wrong[0]} y={wrong[1]}" in env.step(action).text


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"colour": "red"}, "catalog_hunt has no option 'colour'; allowed options: levels, pages"),
        ({"pages": 4}, "catalog_hunt option 'pages' must be an integer from 5 to 500, got 4"),
        ({"pages": 501}, "got 501"),
        ({"levels": 0}, "catalog_hunt option 'levels' must be an integer from 1 to 1000, got 0"),
        ({"levels": "3"}, "got '3'"),
        ({"levels": True}, "got True"),
    ],
)
def test_options_are_checked_by_name_before_any_play(options, named):
    with pytest.raises(EnvironmentConfigError, match=re.escape(named)):
        make_environment("catalog_hunt", 1, options)


def test_the_largest_game_is_drawn_level_by_level():
    env, first = new_game(0, levels=1000, pages=500)
    assert (first.level, first.levels) == (1, 1000) and "CATALOG LEVEL 1/1000" in first.text
    assert "1-500" in first.text
