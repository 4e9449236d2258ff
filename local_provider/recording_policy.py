"""The local provider's model playing an ARC-AGI-3 game from a recording of a winning play
(`client.local.recording`): a model that knows the game's moves, but knows where it is in them only
from the state the strategy carries.

A recording is the toolkit's JSONL, one action a line (`{"data": {"action_input": {"id": N, "data":
{"game_id": ..., "x": .., "y": ..}}}}`; id 0 is RESET, 1-7 ACTION1-7, and 6 takes the cell), as the
ARC-AGI-3 agents write them and `read_recording` reads them, naming the line of anything it cannot.

Where it is. After a reply plays the recording's action number K, the model has played K of its N
actions, and it keeps that count where each strategy carries state, as the other policies keep a
level's beacon:
- a chat model asked for notes (manual_rolling's carry-forward instruction) ends its reply with
  `NOTES: recording step K of N`, which the window replays with the turn;
- a reasoning model writes that line in its private thought, which the wire seals into opaque state
  (encrypted reasoning, a thinking signature, a thought signature); its visible reply never says
  where it is, so only a faithful replay of that state (or the server's stored conversation, for
  previous_response_id) tells the next turn;
- a summary, the harness's or a compaction's, keeps the one line.
The count it goes on from is the highest any note it is given names (a count only grows); with none
it starts at the beginning. So a strategy that loses its state sends the model back to the first
move, and it loses its place and the game.

What it reads in each frame (the newest ARC frame in the request, `ARC LEVEL n/m | STATE ...`):
the state (WIN: it says the game is won; GAME_OVER: a winning play never loses, so it has lost its
place) and the ACTIONS line, the moves the game takes now: a recorded move the frame does not offer,
or none left to play, means it has lost its place. A model that has lost its place says so and names
no action, which the harness rejects, and the turn fails closed when its retries are spent. Requests
that are not about an ARC game are the default policy's (policy.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from turnstate.adapters.tokens import estimate_text_tokens
from turnstate.local_provider import policy
from turnstate.local_provider.arc_policy import ARC_HEADER, ArcFrame, arc_frame, texts_of, won_reply

# The toolkit's action numbers (arcengine's GameAction), as a recording names them.
ACTION_NAMES = {0: "RESET", **{number: f"ACTION{number}" for number in range(1, 8)}}
CLICK, SIDE = 6, 64  # ACTION6 takes a cell: x and y from 0 to SIDE - 1
STEP_NOTE = re.compile(r"\bNOTES: recording step (?P<played>\d+) of (?P<total>\d+)\b")
ACTIONS_LINE = re.compile(r"^ACTIONS (?P<listed>.*)$", re.MULTILINE)
MAX_RECORDING_BYTES = 16 * 1024 * 1024
PLAYING = "Playing the recorded move."
SUMMARY_THOUGHT = "Summarizing where I am in the recording."


class RecordingError(ValueError):
    """A recording that cannot be played: the message names the file, the line and the problem."""


def read_recording(path: Path) -> tuple[str, tuple[str, ...]]:
    """The recording's game id (the first line's) and its actions as the harness writes them
    (`ACTION1`, `ACTION6 16 47`), in order. RecordingError naming the line of anything else."""
    try:
        if path.stat().st_size > MAX_RECORDING_BYTES:
            raise RecordingError(f"{path}: larger than {MAX_RECORDING_BYTES // 2**20} MiB; is it a recording?")
        lines = path.read_bytes().decode("utf-8").splitlines()
    except UnicodeDecodeError as error:
        raise RecordingError(f"{path}: not UTF-8 text ({error.reason} at byte {error.start})") from None
    except OSError as error:
        raise RecordingError(f"{path}: cannot be read ({error.strerror or error})") from None
    game_ids: list[str] = []
    actions: list[str] = []
    for number, line in enumerate(lines, 1):
        if line.strip():
            game_id, action = _recorded_action(line, f"{path}, line {number}")
            game_ids.append(game_id)
            actions.append(action)
    if not actions:
        raise RecordingError(f"{path}: holds no action (one JSON object a line, as the ARC-AGI-3 agents record)")
    if len(set(game_ids)) > 1:
        raise RecordingError(f"{path}: names more than one game ({', '.join(sorted(set(game_ids)))}); one game a file")
    return game_ids[0], tuple(actions)


def _recorded_action(line: str, where: str) -> tuple[str, str]:
    """One recording line's game id and action; RecordingError naming `where` and the problem."""
    try:
        entry = json.loads(line)
        action = entry["data"]["action_input"]
        number, data = action["id"], action.get("data") or {}
    except (ValueError, KeyError, TypeError):
        raise RecordingError(
            f'{where}: not a recorded action; each line is {{"data": {{"action_input": {{"id": N, "data": {{...}}}}}}}}'
        ) from None
    if isinstance(number, bool) or number not in ACTION_NAMES or not isinstance(data, dict):
        raise RecordingError(f"{where}: action id {number!r} is not one of 0 (RESET) to 7")
    game_id = data.get("game_id")
    if not isinstance(game_id, str) or not game_id:
        raise RecordingError(f"{where}: the action names no game_id")
    if number != CLICK:
        return game_id, ACTION_NAMES[number]
    cell = [data.get(axis) for axis in "xy"]
    if not all(isinstance(value, int) and not isinstance(value, bool) and 0 <= value < SIDE for value in cell):
        raise RecordingError(
            f"{where}: ACTION6 needs integer x and y from 0 to {SIDE - 1}, got x={cell[0]!r}, y={cell[1]!r}"
        )
    return game_id, f"ACTION6 {cell[0]} {cell[1]}"


class RecordingModel:
    """The model, for a LocalProvider: `reply` on a chat wire, `think` and `summarize` on a
    reasoning one (exchange.Thinker)."""

    def __init__(self, actions: Sequence[str]) -> None:
        self.actions = tuple(actions)

    def reply(self, system: str, messages: Sequence[Mapping[str, object]]) -> str:
        texts = texts_of(messages)
        if policy.asked_calls(messages):
            return policy.reply(system, messages)
        if policy.asks_for_summary(messages):
            return self._summary(texts, policy.summary_budget(messages))
        frame = arc_frame(texts)
        if frame is None:
            return policy.reply(system, messages)
        lines, played = self._move(frame, texts, texts)
        if played is not None and policy.NOTES_REQUEST in system:
            lines.append(self._note(played))
        return "\n".join(lines)

    def think(
        self,
        system: str,
        messages: Sequence[Mapping[str, object]],
        memory: Sequence[str],
        context: Sequence[Mapping[str, object]] = (),
    ) -> tuple[str, str]:
        shown = [*texts_of(context), *texts_of(messages)]
        if policy.asked_calls(messages):
            return policy.think(system, messages, memory, context)
        if policy.asks_for_summary(messages):
            budget = policy.summary_budget(messages)
            left = None if budget is None else budget - estimate_text_tokens(SUMMARY_THOUGHT)
            return SUMMARY_THOUGHT, self._summary([*memory, *shown], left)
        frame = arc_frame(shown)
        if frame is None:
            return policy.think(system, messages, memory, context)
        lines, played = self._move(frame, shown, [*memory, *shown])
        thought = self._note(played) if played is not None else "I have lost my place in the recording."
        return thought, "\n".join(lines)

    def summarize(self, memory: Sequence[str]) -> str:
        """A compaction's summary: the one line that says where the model is (none before a move)."""
        if not any(STEP_NOTE.search(text) for text in memory):
            return policy.summarize(memory)
        return self._summary(memory, None)

    def _move(self, frame: ArcFrame, frames: Sequence[str], notes: Sequence[str]) -> tuple[list[str], int | None]:
        """The reply's lines for `frame`, the newest ARC frame in `frames`, going on from the notes
        in `notes`, and the count played once its move is (None: no move)."""
        if frame.state == "WIN":
            return [won_reply(frame)], None
        played = played_so_far(notes)
        lost = self._lost(frame.state, played, offered(frames))
        if lost is not None:
            return [f"I have lost my place in the recording ({lost}), so I name no move."], None
        return [PLAYING, f"ACTION: {self.actions[played]}"], played + 1

    def _lost(self, state: str, played: int, offered_actions: frozenset[str]) -> str | None:
        if state == "GAME_OVER":
            return f"the game is over after {played} recorded moves, and the recording wins"
        if played >= len(self.actions):
            return f"all {len(self.actions)} recorded moves are played and the game is not won"
        move = self.actions[played].split(" ", 1)[0]
        if move not in offered_actions:
            return f"move {played + 1} is {move}, which this frame does not offer"
        return None

    def _note(self, played: int) -> str:
        return f"NOTES: recording step {played} of {len(self.actions)}"

    def _summary(self, texts: Sequence[str], budget: int | None) -> str:
        """One NOTES line: how far the texts say the recording is played; within `budget`, or empty."""
        summary = self._note(played_so_far(texts))
        return summary if budget is None or estimate_text_tokens(summary) <= budget else ""


def played_so_far(texts: Sequence[str]) -> int:
    """The highest count of recorded moves played that a note in `texts` names; 0 with none."""
    return max((int(note["played"]) for text in texts for note in STEP_NOTE.finditer(text)), default=0)


def offered(texts: Sequence[str]) -> frozenset[str]:
    """The moves the newest ARC frame's ACTIONS line offers (`ACTION6 x y` offers ACTION6)."""
    for text in reversed(texts):
        headers = list(ARC_HEADER.finditer(text))
        if headers:
            listed = ACTIONS_LINE.search(text, headers[-1].end())
            words = listed["listed"].replace(",", " ").split() if listed else []
            return frozenset(word for word in words if word == "RESET" or word.startswith("ACTION"))
    return frozenset()
