"""The deterministic "model" of the embedded local provider: it plays beacon_grid from text only
(and catalog_hunt, whose play is catalog_policy.py's, and turnstate's two ARC-AGI-3 games, whose play
is arc_policy.py's: a request about one of those games is answered there).

It reads nothing but the request, as a real model would, so how well it plays measures what the
harness kept in the window: a level's beacon letter appears only in that level's first frame, and
survives later turns only if that frame, or a carry-forward `NOTES: level N beacon X` line, is still
in the messages. Without it the policy guesses door A and fails any level whose beacon is not A.

Asked to summarize the conversation (a harness summary), either model answers with `summarize` of
everything the request holds, its memory included, keeping only what it still needs: the beacon of
the level being played. What it can know from the text alone: a frame names its level (`LEVEL n/m`),
levels are played in order, and a level is left only by entering its beacon (a wrong door restarts
it), so the highest level any frame or note names is the one being played and every level below it
is won, its beacon never needed again. A summary is therefore at most one NOTES line, however long
the game: it stays bounded where one line per level grew past any output cap (issue 18). The summary
request names its budget ("within N tokens", strategies/summary.py), and the model keeps to it: a
reasoning model counts its thought against it, as the wires bill thought and reply to one cap, and a
budget too small for the one line it needs gets no summary at all rather than a cut line, which
would read as a different beacon or none. A compaction's summary (`Exchange.summarize`) keeps the
same one line, with no budget named.

Over a reasoning wire (OpenAI Responses) the model is `think`: when a frame shows a beacon, it notes
it in a private thought (`NOTES: level N beacon X`), which the wire seals into encrypted reasoning;
later thoughts only say that they follow the note, and the visible reply never carries a NOTES line.
It reads the current turn's messages, the context the wire hands it apart (on the Responses wire,
a compacted window's kept messages, which the service keeps in the model's context: it follows a
beacon their frames show but does not note it again, since the context holds it) and its memory:
the thoughts of the replayed reasoning, a compaction's summary (`summarize`) and earlier messages it
was handed, from all of which it takes only NOTES lines, never the beacon line of an older frame.
So the beacon survives only in the reasoning item of the turn that saw it, and after a compaction in
the compaction item or, for a compaction that kept the user messages, in those kept frames: it is
remembered only if those were replayed faithfully.

Tools. The model answers in text on every wire, and a wire turns its lines into calls of the tools
the request offers (`offered_calls`, one convention for all): a `CALL: <tool> <JSON object>` line is
a call of that tool, and the `ACTION: <name> [values...]` line, when a tool named <name> is offered
(an environment's actions offered as tools), a call of it with the values as its arguments. Tool
results reach it as messages `{"role": "tool", "content": <text>}`, in order, on every wire, so a
frame that arrives in a tool result is read as any other. A latest user message that asks "call TOOL
with {JSON}" (a test's convention) is answered with those CALL lines alone.

The frame format is parsed here on purpose instead of imported from the environment: the policy must
know no more than the text it is given.
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from turnstate.adapters.tokens import estimate_text_tokens
from turnstate.local_provider.arc_policy import arc_reply, arc_summary, arc_think
from turnstate.local_provider.catalog_policy import catalog_reply, catalog_summary, catalog_think
from turnstate.local_provider.recall import recall_thought

Cell = tuple[int, int]  # (row, column)

FRAME_HEADER = re.compile(r"^LEVEL (\d+)/(\d+) \| STATE (\w+)[ \t]*$", re.MULTILINE)
BEACON_LINE = re.compile(r"^BEACON \(level (\d+)\): ([A-Z])[ \t]*$", re.MULTILINE)
NOTES_MENTION = re.compile(r"\bNOTES: level (\d+) beacon ([A-Z])\b")
GRID_ROW = re.compile(r"^#[#.@A-Z]*#$")
STANDING_ON_DOOR = re.compile(r"^STANDING ON: door ([A-Z])[ \t]*$", re.MULTILINE)

NOTES_REQUEST = "NOTES:"  # in the system prompt, the harness's carry-forward instruction
# What a harness says when it asks for a summary of the conversation (strategies/summary.py).
SUMMARY_REQUEST = re.compile(r"\bsummarize the conversation\b", re.IGNORECASE)
# How that request names the summary's budget, in tokens.
SUMMARY_BUDGET = re.compile(r"\bwithin (\d+) tokens\b")
SUMMARY_THOUGHT = "Summarizing what the conversation holds."
CALLING_THOUGHT = "Calling the tools the user asked for."
NOTHING_TO_REMEMBER = "NOTES: nothing to remember yet"
GUESS_DOOR = "A"
WALL, PLAYER = "#", "@"
# Checked in this order, which is the tie-break between equally short paths.
STEPS: tuple[tuple[str, Cell], ...] = (
    ("ACTION1", (-1, 0)),
    ("ACTION2", (1, 0)),
    ("ACTION3", (0, -1)),
    ("ACTION4", (0, 1)),
)
ENTER, WAIT, RESET = "ACTION5", "ACTION6", "RESET"


@dataclass(frozen=True)
class SeenFrame:
    """The parts of a rendered frame the policy acts on."""

    level: int
    state: str
    grid: tuple[str, ...]
    standing_on_door: str | None


def reply(system: str, messages: Sequence[Mapping[str, object]]) -> str:
    """The model's answer to one chat request: the CALL lines the latest user message asks for, or a
    summary line, `ACTION: ...`, and NOTES if asked."""
    asked = asked_calls(messages)
    if asked:
        return asked
    if asks_for_summary(messages):
        return summarize([message_text(message) for message in messages], summary_budget(messages))
    other_game = arc_reply(system, messages) or catalog_reply(system, messages)
    if other_game is not None:
        return other_game
    frame = last_frame(messages)
    if frame is None:
        return NO_FRAME_REPLY
    if frame.state == "WIN":
        return won_reply(frame)

    beacon = known_beacon(messages, frame.level)
    lines = decision_lines(frame, beacon)
    if NOTES_REQUEST in system:
        lines.append(notes_line(frame.level, beacon))
    return "\n".join(lines)


def think(
    system: str,
    messages: Sequence[Mapping[str, object]],
    memory: Sequence[str],
    context: Sequence[Mapping[str, object]] = (),
) -> tuple[str, str]:
    """The reasoning model's (private thought, visible reply) for one request.

    `messages` are the current turn's only; `memory` holds the texts the model reads back from its
    replayed opaque state, oldest first; `context` holds earlier messages that stay in the context
    (a compacted window's kept user messages), whose frames it reads as they are. The thought notes
    a beacon the current turn shows (a NOTES line), never one it reads in `context`, which is there
    already; else it says whether the model follows the context, its notes, or guesses. The reply is
    what `reply` answers without NOTES, whatever the system prompt asks for (the CALL lines a user
    asks for included, with a thought that says so).
    """
    asked = asked_calls(messages)
    if asked:
        return CALLING_THOUGHT, asked
    if asks_for_summary(messages):
        read = [*memory, *map(message_text, [*context, *messages])]
        budget = summary_budget(messages)
        left = None if budget is None else budget - estimate_text_tokens(SUMMARY_THOUGHT)
        return SUMMARY_THOUGHT, summarize(read, left)
    other_game = arc_think(system, messages, memory, context) or catalog_think(system, messages, memory, context)
    if other_game is not None:
        return other_game
    frame = last_frame(messages)
    if frame is None:
        return "No game frame in this turn.", NO_FRAME_REPLY
    seen = known_beacon(messages, frame.level)
    kept = known_beacon(context, frame.level)
    noted = noted_beacon(memory, frame.level)
    beacon = seen or kept or noted
    shown = notes_line(frame.level, seen) if seen else None
    thought = recall_thought(
        f"Level {frame.level}", "beacon", shown, bool(kept), bool(noted), f"guessing door {GUESS_DOOR}"
    )
    if frame.state == "WIN":
        return thought, won_reply(frame)
    return thought, "\n".join(decision_lines(frame, beacon))


def summarize(texts: Sequence[str], budget: int | None = None) -> str:
    """An honest summary of `texts` (a compaction's memory, or everything a summary request holds),
    of what is still needed: the latest beacon the texts give for the level being played, the highest
    any frame or note names, as one NOTES line (the levels below it are won). A beacon the texts do
    not hold is not in the summary. Within `budget` tokens, if one is given, or empty. Texts about
    an ARC game or catalog_hunt are summarized as that game's (arc_policy.py, catalog_policy.py)."""
    other_game = arc_summary(texts, budget)
    if other_game is None:
        other_game = catalog_summary(texts, budget)
    if other_game is not None:
        return other_game
    beacons: dict[int, str] = {}
    playing = 0
    for text in texts:
        playing = max([playing, *(int(header.group(1)) for header in FRAME_HEADER.finditer(text))])
        mentions = sorted([*BEACON_LINE.finditer(text), *NOTES_MENTION.finditer(text)], key=match_start)
        for mention in mentions:
            level = int(mention.group(1))
            beacons[level] = mention.group(2)
            playing = max(playing, level)
    summary = notes_line(playing, beacons[playing]) if playing in beacons else NOTHING_TO_REMEMBER
    return summary if budget is None or estimate_text_tokens(summary) <= budget else ""


def summary_budget(messages: Sequence[Mapping[str, object]]) -> int | None:
    """The tokens the summary request in the last message allows its answer, if it names them."""
    named = SUMMARY_BUDGET.findall(message_text(messages[-1])) if messages else []
    return int(named[-1]) if named else None


def asks_for_summary(messages: Sequence[Mapping[str, object]]) -> bool:
    """Whether the last message asks the model to summarize the conversation (a harness summary)."""
    return bool(messages) and SUMMARY_REQUEST.search(message_text(messages[-1])) is not None


def noted_beacon(memory: Sequence[str], level: int) -> str | None:
    """The latest beacon the memory notes for `level`: NOTES lines only (the model's own thoughts, a
    compaction's summary, a summary it was handed), never a beacon line of an old frame. Read from
    the newest text back, as `known_beacon` reads messages."""
    for text in reversed(memory):
        mentions = [mention for mention in NOTES_MENTION.finditer(text) if int(mention.group(1)) == level]
        if mentions:
            return mentions[-1].group(2)
    return None


CALL_REQUEST = re.compile(r"\bcall (\w+) with (?=\{)")


def asked_calls(messages: Sequence[Mapping[str, object]]) -> str:
    """The `CALL:` lines that answer the calls the latest message asks for, when it is a user
    message (a turn answered by tool results goes on as the game has it); empty when it asks for
    none or one ask's ARGS are not a JSON object. A test's convention, not a game's: "call TOOL
    with ARGS", ARGS a JSON object, once per call ("call a with {...} and call b with {...}" asks
    for two), answered in the order asked. Deterministic, so a wire's tool tests know what the model
    will call; which of the lines become calls is the wire's to say (`offered_calls`)."""
    if not messages or messages[-1].get("role") != "user":
        return ""
    text = message_text(messages[-1])
    lines = []
    decoder = json.JSONDecoder()
    for request in CALL_REQUEST.finditer(text):
        try:
            arguments, _ = decoder.raw_decode(text, request.end())
        except json.JSONDecodeError:
            return ""
        if not isinstance(arguments, dict):
            return ""
        lines.append(f"CALL: {request.group(1)} {json.dumps(arguments)}")
    return "\n".join(lines)


CALL_LINE = re.compile(r"CALL: (\S+) (\{.*\})\s*")
ACTION_CALL_LINE = re.compile(r"ACTION: (\S+)((?:[ \t]+\S+)*)\s*")
INTEGER = re.compile(r"-?[0-9]+")
Call = tuple[str, dict[str, object]]


def offered_calls(reply: str, offered: Iterable[tuple[object, object]]) -> tuple[str, list[Call]]:
    """A completed reply as the model that uses tools gives it: (the text left, its calls of the
    offered tools, in the order of their lines). `offered` is each offered tool's (name, parameters'
    JSON Schema), as the wire spells them; the first tool of a name counts. A line is a call when it
    names an offered tool: `CALL: <tool> <JSON object>`, or `ACTION: <tool> [values...]`, whose
    values map onto the schema's `properties` in order (an integer where the property says
    `"type": "integer"`, else a string). Any other line stays text: one naming a tool not offered,
    arguments that are not a JSON object, a value count that does not match the properties, or a
    value an integer property cannot take. Without calls the reply is returned as it is."""
    schemas: dict[str, object] = {}
    for name, schema in offered:
        if isinstance(name, str):
            schemas.setdefault(name, schema)
    kept: list[str] = []
    calls: list[Call] = []
    for line in reply.split("\n") if schemas else ():
        call = _line_call(line, schemas)
        if call is None:
            kept.append(line)
        else:
            calls.append(call)
    return ("\n".join(kept).strip(), calls) if calls else (reply, [])


def _line_call(line: str, schemas: Mapping[str, object]) -> Call | None:
    """The call of an offered tool that one reply line makes, or None (the line stays text)."""
    called = CALL_LINE.fullmatch(line)
    if called is not None and called.group(1) in schemas:
        try:
            arguments = json.loads(called.group(2))
        except json.JSONDecodeError:
            return None
        return (called.group(1), arguments) if isinstance(arguments, dict) else None
    acted = ACTION_CALL_LINE.fullmatch(line)
    if acted is not None and acted.group(1) in schemas:
        mapped = _mapped_values(acted.group(2).split(), schemas[acted.group(1)])
        return None if mapped is None else (acted.group(1), mapped)
    return None


def _mapped_values(values: Sequence[str], schema: object) -> dict[str, object] | None:
    """An `ACTION:` line's values as the arguments of a tool with this parameters' schema: one value
    per property, in the order of `properties`; None when they do not fit."""
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    fields = properties if isinstance(properties, Mapping) else {}
    if len(values) != len(fields):
        return None
    arguments: dict[str, object] = {}
    for (name, spec), value in zip(fields.items(), values, strict=True):
        if isinstance(spec, Mapping) and spec.get("type") == "integer":
            if INTEGER.fullmatch(value) is None:
                return None
            arguments[str(name)] = int(value)
        else:
            arguments[str(name)] = value
    return arguments


NO_FRAME_REPLY = "I see no game frame, so I take no action."


def won_reply(frame: SeenFrame) -> str:
    return f"Level {frame.level}: all levels cleared, nothing left to do."


def decision_lines(frame: SeenFrame, beacon: str | None) -> list[str]:
    """The summary line and the `ACTION: ...` line for a frame that is not won."""
    if frame.state == "GAME_OVER":
        summary, action = f"Level {frame.level}: wrong door, restarting the level.", RESET
    else:
        target = beacon or GUESS_DOOR
        how = "beacon seen" if beacon else "beacon unknown, guessing"
        summary = f"Level {frame.level}: heading for door {target} ({how})."
        action = next_action(frame, target)
    return [summary, f"ACTION: {action}"]


def notes_line(level: int, beacon: str | None) -> str:
    return f"NOTES: level {level} beacon {beacon or 'unknown'}"


def message_text(message: Mapping[str, object]) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else ""


def last_frame(messages: Sequence[Mapping[str, object]]) -> SeenFrame | None:
    """The newest frame: the last `LEVEL n/m | STATE ...` block of the last message holding one."""
    for message in reversed(messages):
        text = message_text(message)
        headers = list(FRAME_HEADER.finditer(text))
        if headers:
            return parse_frame(headers[-1], text)
    return None


def parse_frame(header: re.Match[str], text: str) -> SeenFrame:
    """Read the frame that starts at `header`; anything after it in `text` belongs to it."""
    block = text[header.end() :]
    grid: list[str] = []
    for line in block.splitlines():
        if GRID_ROW.match(line):
            grid.append(line)
        elif grid:
            break  # the grid is the first run of wall-bounded rows
    door = STANDING_ON_DOOR.search(block)
    return SeenFrame(
        level=int(header.group(1)),
        state=header.group(3),
        grid=tuple(grid),
        standing_on_door=door.group(1) if door else None,
    )


def known_beacon(messages: Sequence[Mapping[str, object]], level: int) -> str | None:
    """The latest beacon letter any message gives for `level`, from a frame or a NOTES line: read
    from the newest message back, so a long history costs only the messages since the latest one."""
    for message in reversed(messages):
        text = message_text(message)
        mentions = [
            mention
            for mention in (*BEACON_LINE.finditer(text), *NOTES_MENTION.finditer(text))
            if int(mention.group(1)) == level
        ]
        if mentions:
            return max(mentions, key=match_start).group(2)
    return None


def match_start(match: re.Match[str]) -> int:
    return match.start()


def next_action(frame: SeenFrame, target: str) -> str:
    """Enter the target door if on it, else one step along a shortest path to it; wait if lost."""
    if frame.standing_on_door == target:
        return ENTER
    player, goal = find_cell(frame.grid, PLAYER), find_cell(frame.grid, target)
    if player is None or goal is None:
        return WAIT
    distances = distances_to(goal, frame.grid)
    here = distances.get(player)
    if here is None:
        return WAIT
    for action, (d_row, d_column) in STEPS:
        if distances.get((player[0] + d_row, player[1] + d_column)) == here - 1:
            return action
    return WAIT


def find_cell(grid: Sequence[str], symbol: str) -> Cell | None:
    for row, line in enumerate(grid):
        column = line.find(symbol)
        if column >= 0:
            return (row, column)
    return None


def distances_to(goal: Cell, grid: Sequence[str]) -> dict[Cell, int]:
    """Moves from every reachable cell to `goal`, walking on anything that is not a wall."""
    distances = {goal: 0}
    queue = deque([goal])
    while queue:
        row, column = queue.popleft()
        for _, (d_row, d_column) in STEPS:
            neighbour = (row + d_row, column + d_column)
            if neighbour not in distances and is_walkable(grid, neighbour):
                distances[neighbour] = distances[(row, column)] + 1
                queue.append(neighbour)
    return distances


def is_walkable(grid: Sequence[str], cell: Cell) -> bool:
    row, column = cell
    return 0 <= row < len(grid) and 0 <= column < len(grid[row]) and grid[row][column] != WALL
