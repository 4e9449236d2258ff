"""The local provider's model playing turnstate's two ARC-AGI-3 games from text only, as policy.py
plays beacon_grid and catalog_policy.py catalog_hunt.

An ARC frame (`ARC LEVEL n/m | STATE ...`, turnstate/environments/arc_agi3.py) is a grid of hex digits,
one per cell (its colour), under a `GRID ...` line (or a frame image's legend line there, followed by
the rows the model sees of the image: local_provider/vision.py). What the model has learnt of the shipped games
(arc_games/move and arc_games/cued), and acts on:
- the player is the block of colour 9; a goal is a block of colour 3, c or e; the background is the
  grid's most common colour; ACTION1-4 move the player one block up, down, left and right;
- cued's top row is a bar that shows the right goal's colour (c or e) in the level's first frame only
  (colour 5 afterwards): that colour is the level's cue. A level with one goal colour needs no cue; with
  two, the model heads for the cue's goal when it knows the cue, else it guesses c and fails any
  level whose cue is e.
Its decisions: GAME_OVER: `ACTION: RESET`; WIN: a line saying it is done; else one step along a
shortest path to the goal (blocks the size of the player, through the background only, so never onto
the other goal or into the bar). When the system prompt asks for notes it adds `NOTES: arc level n cue
X` (or `cue unknown`): the cue survives a window that dropped its frame only in such a line.

Which game: these functions answer (non-None) only when the newest message holding a game frame
(beacon_grid's `LEVEL n/m | STATE`, catalog_hunt's `CATALOG LEVEL`, or this `ARC LEVEL`) holds an
ARC frame, so policy.py falls back to the other games' policies otherwise. The reasoning variant
(`arc_think`) mirrors policy.think: the current turn's messages, the `context` kept beside them
(followed, not noted again) and `memory`, from which it takes NOTES lines only, never an old frame's
bar; its thought notes a cue the current turn shows, and its reply never carries NOTES. A summary
(`arc_summary`) keeps one NOTES line: the cue of the level being played.

The frame format is parsed here rather than imported from the environment: the model knows only the
text it is given. policy.py routes to this module, which imports nothing of policy.py.
"""

from __future__ import annotations

import re
from collections import Counter, deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from turnstate.adapters.tokens import estimate_text_tokens
from turnstate.environments.frame_image import ImageLegend
from turnstate.local_provider.recall import recall_thought

# Every game's frame header: beacon_grid's, catalog_hunt's and this game's (the policies route by it).
GAME_HEADER = re.compile(
    r"^(?P<game>ARC |CATALOG )?LEVEL (?P<level>\d+)/\d+ \| STATE (?P<state>\w+)[ \t]*$", re.MULTILINE
)
ARC_HEADER = re.compile(r"^ARC LEVEL (?P<level>\d+)/\d+ \| STATE (?P<state>\w+)[ \t]*$", re.MULTILINE)
GRID_HEADER = re.compile(r"^GRID \d+x\d+:.*$", re.MULTILINE)
GRID_ROW = re.compile(r"[0-9a-f]+")
CUE_NOTE = re.compile(r"\bNOTES: arc level (?P<level>\d+) cue (?P<cue>[0-9a-f])\b")

PLAYER = "9"
GOALS = "3ce"
CUES = "ce"
GUESS = "c"
NOTES_REQUEST = "NOTES:"  # in the system prompt, the harness's carry-forward instruction
RESET = "RESET"
FALLBACK = "ACTION1"  # no player or no way to the goal in the frame: try a move
# Checked in this order, which is the tie-break between equally short paths: (action, (dx, dy)).
STEPS: tuple[tuple[str, tuple[int, int]], ...] = (
    ("ACTION1", (0, -1)),
    ("ACTION2", (0, 1)),
    ("ACTION3", (-1, 0)),
    ("ACTION4", (1, 0)),
)
NOT_FINISHED, WIN, GAME_OVER = "NOT_FINISHED", "WIN", "GAME_OVER"

Message = Mapping[str, object]
Cell = tuple[int, int]  # (x, y) in blocks


@dataclass(frozen=True)
class ArcFrame:
    level: int
    state: str
    rows: tuple[str, ...]

    @property
    def cue(self) -> str | None:
        """The bar's colour when the top row shows a cue (a uniform row of c or e), else None."""
        top = self.rows[0] if self.rows else ""
        return top[0] if top and top[0] in CUES and top == top[0] * len(top) else None


def arc_reply(system: str, messages: Sequence[Message]) -> str | None:
    """The model's answer to a chat request about an ARC game, or None when the request is not one
    (the caller answers it as another game's). Summary requests are the caller's to check first."""
    texts = texts_of(messages)
    frame = arc_frame(texts)
    if frame is None:
        return None
    if frame.state == WIN:
        return won_reply(frame)
    cue = known_cue(texts, frame.level)
    lines = decision_lines(frame, cue)
    if NOTES_REQUEST in system:
        lines.append(notes_line(frame.level, cue))
    return "\n".join(lines)


def arc_think(
    system: str,
    messages: Sequence[Message],
    memory: Sequence[str],
    context: Sequence[Message] = (),
) -> tuple[str, str] | None:
    """The reasoning model's (thought, reply) for an ARC request, or None when it is not one. The
    frame is the newest in `context` and the current turn; the cue comes from the current turn (then
    noted in the thought), else `context`, else memory's NOTES lines."""
    current, kept = texts_of(messages), texts_of(context)
    frame = arc_frame([*kept, *current])
    if frame is None:
        return None
    seen = known_cue(current, frame.level)
    in_context = known_cue(kept, frame.level)
    noted = known_cue(memory, frame.level, notes_only=True)
    shown = notes_line(frame.level, seen) if seen else None
    thought = recall_thought(f"Level {frame.level}", "cue", shown, bool(in_context), bool(noted), f"guessing {GUESS}")
    if frame.state == WIN:
        return thought, won_reply(frame)
    return thought, "\n".join(decision_lines(frame, seen or in_context or noted))


def arc_summary(texts: Sequence[str], budget: int | None = None) -> str | None:
    """What a summary of `texts` keeps of an ARC game: the latest cue the texts give for the level
    being played (the highest any ARC frame or cue note names; the levels below it are won), as one
    NOTES line. None when the texts hold no ARC frame or note. Within `budget` tokens, if one is
    given, or empty, as policy.summarize keeps its budget."""
    levels = [
        int(match["level"]) for text in texts for pattern in (ARC_HEADER, CUE_NOTE) for match in pattern.finditer(text)
    ]
    if not levels:
        return None
    summary = notes_line(max(levels), known_cue(texts, max(levels)))
    return summary if budget is None or estimate_text_tokens(summary) <= budget else ""


def decision_lines(frame: ArcFrame, cue: str | None) -> list[str]:
    """The summary line and the `ACTION:` line for a frame that is not won."""
    if frame.state == GAME_OVER:
        return [f"Level {frame.level}: wrong goal, restarting the level.", f"ACTION: {RESET}"]
    goals = goal_colours(frame.rows)
    if len(goals) <= 1:
        goal, how = (goals[0] if goals else GUESS), "the only goal"
    elif cue in goals:
        goal, how = cue, "cue seen"
    else:
        goal, how = GUESS, "cue unknown, guessing"
    return [f"Level {frame.level}: heading for the {goal} goal ({how}).", f"ACTION: {next_action(frame.rows, goal)}"]


def goal_colours(rows: Sequence[str]) -> list[str]:
    """The goal colours on the board, sorted; a uniform row (the bar) is no board."""
    board = "".join(row for row in rows if row != row[:1] * len(row))
    return sorted(colour for colour in GOALS if colour in board)


def next_action(rows: Sequence[str], goal: str) -> str:
    """One step along a shortest path, in blocks of the player's size, from the player to a block of
    the goal's colour on the board (not in the bar), walking on the background only."""
    player = [(x, y) for y, row in enumerate(rows) for x, colour in enumerate(row) if colour == PLAYER]
    if not player:
        return FALLBACK
    size = max(x for x, _ in player) - min(x for x, _ in player) + 1
    left, top = min(x for x, _ in player), min(y for _, y in player)
    background = Counter("".join(rows)).most_common(1)[0][0]

    def colour(cell: Cell) -> str | None:
        x, y = left % size + cell[0] * size, top % size + cell[1] * size
        return rows[y][x] if 0 <= y < len(rows) and 0 <= x < len(rows[y]) else None

    def in_bar(cell: Cell) -> bool:
        row = rows[top % size + cell[1] * size] if top % size + cell[1] * size < len(rows) else ""
        return row == row[:1] * len(row)

    start = (left // size, top // size)
    width, height = max(map(len, rows)) // size + 1, len(rows) // size + 1
    goals = [(x, y) for x in range(width) for y in range(height) if colour((x, y)) == goal and not in_bar((x, y))]
    distances = {cell: 0 for cell in goals}
    queue = deque(goals)
    while queue:
        here = queue.popleft()
        for _, (dx, dy) in STEPS:
            neighbour = (here[0] + dx, here[1] + dy)
            if neighbour not in distances and (neighbour == start or colour(neighbour) == background):
                distances[neighbour] = distances[here] + 1
                queue.append(neighbour)
    if start not in distances:
        return FALLBACK
    for action, (dx, dy) in STEPS:
        if distances.get((start[0] + dx, start[1] + dy)) == distances[start] - 1:
            return action
    return FALLBACK


def arc_frame(texts: Sequence[str]) -> ArcFrame | None:
    """The newest frame in `texts` when it is an ARC frame; None when it is another game's or there
    is none."""
    for text in reversed(texts):
        headers = list(GAME_HEADER.finditer(text))
        if headers:
            return parse_frame(text, headers[-1]) if headers[-1]["game"] == "ARC " else None
    return None


def parse_frame(text: str, header: re.Match[str]) -> ArcFrame:
    """The frame whose header is `header`: its grid is the run of hex rows after its GRID line (after
    the image's legend line there too, when the frame shows the grid as an image: the rows the model
    sees of that image follow its legend, local_provider/vision.py)."""
    grid = GRID_HEADER.search(text, header.end())
    rows: list[str] = []
    if grid is not None:
        lines = text[grid.end() :].splitlines()[1:]
        if lines and ImageLegend.LINE.fullmatch(lines[0]):
            del lines[0]
        for line in lines:
            if GRID_ROW.fullmatch(line) is None:
                break
            rows.append(line)
    return ArcFrame(int(header["level"]), header["state"], tuple(rows))


def known_cue(texts: Sequence[str], level: int, notes_only: bool = False) -> str | None:
    """The latest cue the texts give for `level`, from a frame's bar or a NOTES line (NOTES lines
    alone with `notes_only`, as memory is read): from the newest text back."""
    for text in reversed(texts):
        mentions = [(note.start(), note["cue"]) for note in CUE_NOTE.finditer(text) if int(note["level"]) == level]
        if not notes_only:
            mentions += [(start, cue) for start, shown, cue in frame_cues(text) if shown == level and cue is not None]
        if mentions:
            return max(mentions)[1]
    return None


def frame_cues(text: str) -> Iterable[tuple[int, int, str | None]]:
    """Each ARC frame's position in `text`, its level and the cue its bar shows (None when dark)."""
    for header in ARC_HEADER.finditer(text):
        frame = parse_frame(text, header)
        yield header.start(), frame.level, frame.cue


def notes_line(level: int, cue: str | None) -> str:
    return f"NOTES: arc level {level} cue {cue or 'unknown'}"


def won_reply(frame: ArcFrame) -> str:
    return f"Level {frame.level}: all ARC levels cleared, nothing left to do."


def texts_of(messages: Sequence[Message]) -> list[str]:
    """Each message's text content ("" when it is not text), as the wires hand messages over."""
    return [content if isinstance(content := message.get("content"), str) else "" for message in messages]
