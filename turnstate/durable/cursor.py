"""What a checkpoint holds of a session's: its workflow cursor (where the run is, a typed and
versioned value) and the accepted reply among its facts (the intent a resumed caller carries out).

The store keeps the cursor as one small JSON object per checkpoint and never interprets it
(checkpoints rule 1); this module is the one place that says what it holds and reads it back. A
session writes it with every commit and restores its counts and ledger from it on resume; a resume
from the run's records (durable/resume.py) makes one from the records.

Versions: 1 is the layout below. A cursor written before the version was kept has no `version` key
and version 1's fields; a cursor of a later version is refused, naming the fix, rather than read as
something it is not."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any, ClassVar

from turnstate.adapters.contract import ToolCall, Usage


class CursorError(ValueError):
    """A cursor this turnstate cannot read: of a later version, or missing a field."""


@dataclass
class RunCounts:
    """What a run has counted so far, as its last checkpoint keeps them."""

    step: int = 0  # committed replies (actions and tool rounds), numbering the step records
    turn: int = 0  # observations the model was asked to act on, a turn that failed closed included
    accepted_actions: int = 0
    failed_attempts: int = 0
    tool_rounds: int = 0  # tool rounds since the last accepted action
    levels_won: int = 0
    summaries: int = 0  # harness summaries committed, numbering the compaction records
    compactions: int = 0  # compactions of every kind committed (inline, by a call, harness summaries)

    def take(self, other: RunCounts) -> None:
        """Take `other`'s counts in place (a resume's, from its checkpoint), for those who hold this one."""
        for count in fields(self):
            setattr(self, count.name, getattr(other, count.name))


@dataclass(frozen=True)
class Cursor:
    """A checkpoint's cursor: the counts, the state the machine rested in, how many accepted turns its
    window holds, and the ledger (the usage and the provider calls paid for up to the checkpoint)."""

    VERSION: ClassVar[int] = 1

    counts: RunCounts
    machine_state: str
    window_turns: int
    usage: Usage
    provider_calls: int

    def to_record(self) -> dict[str, Any]:
        """The JSON object the store keeps."""
        return {
            "version": self.VERSION,
            **asdict(self.counts),
            "machine_state": self.machine_state,
            "window_turns": self.window_turns,
            "usage": self.usage.to_dict(),
            "provider_calls": self.provider_calls,
        }

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Cursor:
        """The cursor the store kept, or CursorError naming what it cannot read."""
        version = record.get("version", 1)
        if version != cls.VERSION:
            raise CursorError(
                f"the checkpoint's cursor is version {version}, and this turnstate reads version {cls.VERSION}; "
                "fix: resume the run with the turnstate that started it"
            )
        try:
            counts = RunCounts(**{field.name: int(record[field.name]) for field in fields(RunCounts)})
            return cls(
                counts=counts,
                machine_state=str(record["machine_state"]),
                window_turns=int(record.get("window_turns", 0)),  # 0: not known, the rebuild takes every turn
                usage=Usage.from_dict(record["usage"]),
                provider_calls=int(record["provider_calls"]),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise CursorError(f"the checkpoint's cursor cannot be read ({type(error).__name__}: {error})") from None


@dataclass(frozen=True)
class AcceptedReply:
    """An accepted reply as its checkpoint's fact keeps it: the intent its action and calls are
    performed from, so a resumed caller performs what the kill left undone, and nothing twice."""

    step: int
    action: str | None  # None: a tool round
    action_call: ToolCall | None
    tool_calls: tuple[ToolCall, ...]
    # The reply's readable reasoning, redacted and bounded (protocol.readable_reasoning), for an
    # environment that keeps it beside the action (RecordingEnvironment); never opaque state.
    reasoning: str | None = None

    def as_fact(self) -> dict[str, Any]:
        return {
            "kind": "accepted",
            "step": self.step,
            "action": self.action,
            "action_call": None if self.action_call is None else self.action_call.id,
            "tool_calls": [
                {"id": call.id, "name": call.name, "arguments": dict(call.arguments)} for call in self.tool_calls
            ],
            "reasoning": self.reasoning,
        }

    @classmethod
    def last_of(cls, facts: Sequence[Mapping[str, Any]]) -> AcceptedReply | None:
        """The last accepted reply among `facts` (None before the first)."""
        fact = next((fact for fact in reversed(facts) if fact.get("kind") == "accepted"), None)
        if fact is None:
            return None
        calls = tuple(ToolCall(call["id"], call["name"], call["arguments"]) for call in fact["tool_calls"])
        action_call = next((call for call in calls if call.id == fact["action_call"]), None)
        return cls(fact["step"], fact["action"], action_call, calls, fact.get("reasoning"))
