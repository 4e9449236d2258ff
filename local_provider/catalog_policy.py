"""The local provider's model playing catalog_hunt from text only, as policy.py plays beacon_grid.

A catalog frame (`CATALOG LEVEL n/m | STATE ...`) shows its level's clue (`CLUE (level n): catalog
page P entry E`) only in the level's first frame; later frames say `dark`. The clue names an entry of
a large catalog page the model reads with the `read_catalog` tool, whose `ENTRY E: cell x=X y=Y` line
gives the cell to mark. The model knows the clue only while the request still holds that first frame,
or a carry-forward `NOTES: level n clue page P entry E` line; without it, it guesses cell 0 0 and
fails any level whose cell is not 0 0. Its decisions:
- GAME_OVER: `ACTION: RESET`; WIN: a line saying it is done;
- clue unknown: `ACTION: MARK 0 0`;
- clue known and the page's text (a `CATALOG PAGE P` block holding entry E) in the request:
  `ACTION: MARK X Y`; else `CALL: read_catalog {"page": P}`, a tool round.
When the system prompt asks for notes it adds `NOTES: level n clue page P entry E` (or `clue unknown`).

Which game: these functions answer (non-None) only when the newest message holding a frame holds a
catalog frame, beacon_grid's `LEVEL n/m | STATE` header counted too, so the caller falls back to the
beacon policy otherwise. A request that holds no frame at all but a catalog page (a tool round's
answer whose frame a window dropped, or a reasoning wire's current turn after a `read_catalog` call,
where the frame is an earlier turn's) is a catalog turn too: still NOT_FINISHED, since the model reads
pages only while playing, at the highest level any catalog line it reads names.

The reasoning variant (`catalog_think`) mirrors policy.think: it reads the current turn's messages,
the `context` kept beside them (followed, not noted again) and `memory`, from which it takes only
NOTES lines, never an old frame's clue. The thought notes a clue the current turn shows; the reply
never carries NOTES. A summary (`catalog_summary`) keeps one NOTES line: the clue of the level being
played.

The frame format is parsed here rather than imported from the environment (the model knows only the
text it is given). policy.py dispatches to this module, so it imports nothing of policy.py (no two
modules import each other): it reads a game frame's header as beacon_grid's `LEVEL n/m | STATE X`
line, optionally prefixed `CATALOG `, and the notes request as policy.py does; a test holds both to
policy.py's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from turnstate.adapters.tokens import estimate_text_tokens
from turnstate.local_provider.recall import recall_thought

# A game frame's header: beacon_grid's (policy.FRAME_HEADER) or, prefixed, catalog_hunt's.
GAME_HEADER = re.compile(r"^(CATALOG )?LEVEL (\d+)/(\d+) \| STATE (\w+)[ \t]*$", re.MULTILINE)
CATALOG_HEADER = re.compile(r"^CATALOG LEVEL (\d+)/(\d+) \| STATE (\w+)[ \t]*$", re.MULTILINE)
CLUE_LINE = re.compile(r"^CLUE \(level (\d+)\): catalog page (\d+) entry (\d+)[ \t]*$", re.MULTILINE)
CLUE_NOTE = re.compile(r"\bNOTES: level (\d+) clue page (\d+) entry (\d+)\b")
PAGE_HEADER = re.compile(r"^CATALOG PAGE (\d+)[ \t]*$", re.MULTILINE)
PAGE_START = re.compile(r"^(?=CATALOG PAGE \d+[ \t]*$)", re.MULTILINE)
ENTRY_LINE = re.compile(r"^ENTRY (\d+): cell x=(\d+) y=(\d+)[ \t]*$", re.MULTILINE)

READ_CATALOG = "read_catalog"
RESET = "RESET"
NOTES_REQUEST = "NOTES:"  # in the system prompt, the harness's carry-forward instruction
NOTHING_TO_REMEMBER = "NOTES: no catalog clue to remember yet"
GUESS = (0, 0)
NOT_FINISHED, WIN, GAME_OVER = "NOT_FINISHED", "WIN", "GAME_OVER"

Message = Mapping[str, object]


@dataclass(frozen=True)
class Clue:
    page: int
    entry: int


@dataclass(frozen=True)
class CatalogFrame:
    """What the model acts on: the level (None when no text it reads names one) and the state."""

    level: int | None
    state: str


def catalog_reply(system: str, messages: Sequence[Message]) -> str | None:
    """The model's answer to a chat request about catalog_hunt, or None when the request is not one
    (the caller answers it as beacon_grid's). Summary requests are the caller's to check first."""
    texts = texts_of(messages)
    frame = catalog_frame(texts, texts)
    if frame is None:
        return None
    if frame.state == WIN:
        return won_reply(frame)
    clue = known_clue(texts, frame.level)
    lines = decision_lines(frame, clue, texts)
    if NOTES_REQUEST in system:
        lines.append(notes_line(frame.level, clue))
    return "\n".join(lines)


def catalog_think(
    system: str,
    messages: Sequence[Message],
    memory: Sequence[str],
    context: Sequence[Message] = (),
) -> tuple[str, str] | None:
    """The reasoning model's (thought, reply) for a catalog_hunt request, or None when it is not one.

    The frame is the newest in the current turn, else in `context`; with neither, a catalog page in
    the current turn makes it the turn after a `read_catalog` call, at the level memory notes. The
    clue comes from the current turn (then noted in the thought), else `context`, else memory's
    NOTES lines."""
    current, kept = texts_of(messages), texts_of(context)
    frame = catalog_frame([*kept, *current], [*memory, *kept, *current])
    if frame is None:
        return None
    seen = known_clue(current, frame.level)
    in_context = known_clue(kept, frame.level)
    noted = known_clue(memory, frame.level, notes_only=True)
    clue = seen or in_context or noted
    shown = notes_line(frame.level, seen) if seen else None
    guess = f"guessing cell x={GUESS[0]} y={GUESS[1]}"
    thought = recall_thought(level_name(frame), "clue", shown, bool(in_context), bool(noted), guess)
    if frame.state == WIN:
        return thought, won_reply(frame)
    return thought, "\n".join(decision_lines(frame, clue, [*kept, *current]))


def catalog_summary(texts: Sequence[str], budget: int | None = None) -> str | None:
    """What a summary of `texts` keeps of catalog_hunt: the latest clue the texts give for the level
    being played (the highest any catalog frame, clue or note names; the levels below it are won), as
    one NOTES line, or that there is nothing to remember. None when the texts hold no catalog frame,
    clue or note (a compaction's texts may be notes alone). Within `budget` tokens, if one is given,
    or empty, as policy.summarize keeps its budget."""
    level = highest_level(texts)
    if level is None:
        return None
    clue = known_clue(texts, level)
    summary = notes_line(level, clue) if clue else NOTHING_TO_REMEMBER
    return summary if budget is None or estimate_text_tokens(summary) <= budget else ""


def decision_lines(frame: CatalogFrame, clue: Clue | None, texts: Sequence[str]) -> list[str]:
    """The summary line and the `ACTION:` (or `CALL:`) line for a frame that is not won."""
    where = level_name(frame)
    if frame.state == GAME_OVER:
        return [f"{where}: wrong cell, restarting the level.", f"ACTION: {RESET}"]
    if clue is None:
        x, y = GUESS
        return [f"{where}: clue unknown, guessing cell x={x} y={y}.", f"ACTION: MARK {x} {y}"]
    cell = entry_cell(texts, clue)
    if cell is None:
        arguments = json.dumps({"page": clue.page})
        return [
            f"{where}: reading catalog page {clue.page} for entry {clue.entry}.",
            f"CALL: {READ_CATALOG} {arguments}",
        ]
    x, y = cell
    return [f"{where}: catalog page {clue.page} entry {clue.entry} is cell x={x} y={y}.", f"ACTION: MARK {x} {y}"]


def catalog_frame(frame_texts: Sequence[str], level_texts: Sequence[str]) -> CatalogFrame | None:
    """The frame to act on: the newest frame in `frame_texts` when it is a catalog one (None when it
    is beacon_grid's); with no frame there, a catalog page makes it a NOT_FINISHED catalog turn at the
    highest level `level_texts` name."""
    for text in reversed(frame_texts):
        headers = list(GAME_HEADER.finditer(text))
        if headers:
            newest = headers[-1]
            if newest.group(1) is None:
                return None  # beacon_grid's
            return CatalogFrame(int(newest.group(2)), newest.group(4))
    if any(PAGE_HEADER.search(text) for text in frame_texts):
        return CatalogFrame(highest_level(level_texts), NOT_FINISHED)
    return None


def highest_level(texts: Iterable[str]) -> int | None:
    """The highest level any catalog frame, clue line or clue note names; None when none does."""
    levels = [
        int(match.group(1))
        for text in texts
        for pattern in (CATALOG_HEADER, CLUE_LINE, CLUE_NOTE)
        for match in pattern.finditer(text)
    ]
    return max(levels, default=None)


def known_clue(texts: Sequence[str], level: int | None, notes_only: bool = False) -> Clue | None:
    """The latest clue the texts give for `level`, from a frame's clue line or a NOTES line (NOTES
    lines alone with `notes_only`, as memory is read): from the newest text back."""
    if level is None:
        return None
    patterns = (CLUE_NOTE,) if notes_only else (CLUE_LINE, CLUE_NOTE)
    for text in reversed(texts):
        mentions = [
            mention for pattern in patterns for mention in pattern.finditer(text) if int(mention.group(1)) == level
        ]
        if mentions:
            newest = max(mentions, key=match_start)
            return Clue(int(newest.group(2)), int(newest.group(3)))
    return None


def entry_cell(texts: Sequence[str], clue: Clue) -> tuple[int, int] | None:
    """The cell the clue's entry gives, from the newest `CATALOG PAGE P` block that holds the entry
    (a block runs to the next page header or the end of its text); None when no text holds it."""
    for text in reversed(texts):
        for block in reversed(PAGE_START.split(text)):
            header = PAGE_HEADER.match(block)
            if header is None or int(header.group(1)) != clue.page:
                continue
            for entry in ENTRY_LINE.finditer(block):
                if int(entry.group(1)) == clue.entry:
                    return int(entry.group(2)), int(entry.group(3))
    return None


def notes_line(level: int | None, clue: Clue | None) -> str:
    shown = f"clue page {clue.page} entry {clue.entry}" if clue else "clue unknown"
    return f"NOTES: level {level if level is not None else 'unknown'} {shown}"


def level_name(frame: CatalogFrame) -> str:
    return f"Level {frame.level}" if frame.level is not None else "Level unknown"


def won_reply(frame: CatalogFrame) -> str:
    return f"{level_name(frame)}: all catalog levels cleared, nothing left to do."


def texts_of(messages: Sequence[Message]) -> list[str]:
    """Each message's text content ("" when it is not text), as the wires hand messages over."""
    return [content if isinstance(content := message.get("content"), str) else "" for message in messages]


def match_start(match: re.Match[str]) -> int:
    return match.start()
