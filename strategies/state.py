"""The RuntimeState envelope: what is carried from one accepted turn to the next.

The envelope is the harness's; the payload is the adapter's. The harness checks what it can without
knowing the payload: the schema version, that the adapter id and strategy are the ones the run was
configured with, that everything is JSON-serializable (so it could be checkpointed), and that the
accepted-turn boundaries are ordered, non-overlapping spans of `payload["items"]`, so that overflow
recovery and window trimming can unwind whole turns and never half of one.

`completed_context_tokens` is how large the last accepted action's context was, as the provider
counted it, so that a compaction trigger reads the provider's figure rather than an estimate.

Inputs that arrived without a model call (a GAME_OVER frame, a reset observation) wait in `pending`
and are replayed, in order, ahead of the next observation; one that shows images waits as a
`PendingInput`, its PNGs as base64, so the state stays JSON.

`unanswered` holds the ids of the tool calls the last accepted reply made, until their results join
that reply's turn: no request may be built while a call is unanswered, since every provider refuses
a call without its result. Once they have joined it, `unread_turn` says that the last turn ends with
results no reply has read yet: like an observation, that turn is the next reply's input, so no trim,
summary or compaction takes it before a reply has (`settled_turns`).

States are immutable values: every change makes a new state, so a provisional state can be dropped
and the last accepted one is still exactly what it was.
"""

from __future__ import annotations

import json
import operator
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, model_validator
from pydantic.dataclasses import dataclass

from turnstate.adapters.contract import Input, UserInput
from turnstate.adapters.images import ImagePart

SCHEMA_VERSION: Final = 1
PREVIOUS = "previous"  # validation context: the state this one replaces, whose values were checked


class StateMismatch(ValueError):
    """A RuntimeState was offered to an adapter or strategy it does not belong to."""


@dataclass(frozen=True, slots=True, config=ConfigDict(extra="forbid"))
class TurnSpan:
    """One accepted turn: the half-open span [start, end) of payload["items"] it occupies. That it is
    not empty is checked by the state that holds it, with the order of its spans: a validator of its
    own would run again for every span of every state a commit makes. A slotted dataclass, not a
    model: a state holds one per turn, and a model's instance dict and field set would be about nine
    times its size."""

    start: int = Field(ge=0)
    end: int = Field(gt=0)


@dataclass(frozen=True, slots=True, config=ConfigDict(extra="forbid"))
class PendingInput:
    """A waiting input that shows images: its text and its PNGs' base64, in order (a `UserInput` as JSON)."""

    text: str
    images: tuple[str, ...] = Field(min_length=1)

    @classmethod
    def of(cls, given: Input) -> str | PendingInput:
        if isinstance(given, str) or not given.images:
            return given if isinstance(given, str) else given.text
        return cls(given.text, tuple(image.base64 for image in given.images))

    def as_input(self) -> UserInput:
        return UserInput(self.text, tuple(ImagePart.from_base64(encoded) for encoded in self.images))


class RuntimeState(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: Literal[1] = SCHEMA_VERSION
    adapter_id: str = Field(min_length=1)
    strategy: str = Field(min_length=1)  # a strategy record's name
    payload: dict[str, Any] = Field(default_factory=dict)
    turns: tuple[TurnSpan, ...] = ()
    pending: tuple[str | PendingInput, ...] = ()
    unanswered: tuple[str, ...] = ()  # the last accepted reply's tool call ids, until they are answered
    unread_turn: bool = False  # the last turn ends with tool results no reply has read yet
    # The completed context of the last accepted action as the provider reported it: that request's
    # input plus its reply's output tokens (0: no action yet, or the provider reported none). What a
    # compaction trigger measures; never cumulative usage, retries or compaction calls.
    completed_context_tokens: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _check_envelope(self, info: ValidationInfo) -> RuntimeState:
        # What this state shares with the one it replaces (the same objects) was checked then, so a
        # commit checks what it changed, not the whole history again.
        previous: RuntimeState | None = (info.context or {}).get(PREVIOUS)
        unchecked = self.payload if previous is None else _changed_values(self.payload, previous.payload)
        try:
            json.dumps(unchecked, allow_nan=False)
        except (TypeError, ValueError) as error:
            raise ValueError(f"payload is not JSON-serializable: {error}") from None
        items = self.payload.get("items", [])
        if self.turns and not isinstance(items, list):
            raise ValueError("turn spans need payload['items'] to be a list")
        kept = (
            len(previous.turns) if previous is not None and self.turns[: len(previous.turns)] == previous.turns else 0
        )
        previous_end = self.turns[kept - 1].end if kept else 0
        for span in self.turns[kept:]:
            if span.end <= span.start:
                raise ValueError(f"turn span [{span.start}, {span.end}) is empty or reversed")
            if span.start < previous_end:
                raise ValueError(f"turn spans overlap or are out of order at [{span.start}, {span.end})")
            previous_end = span.end
        if self.turns and self.turns[-1].end > len(items):  # ordered, so the last one ends furthest
            span = self.turns[-1]
            raise ValueError(f"turn span [{span.start}, {span.end}) runs past the {len(items)} items")
        return self

    @property
    def items(self) -> list[Any]:
        return list(self.payload.get("items", []))

    @property
    def item_count(self) -> int:
        """How many items the accepted history holds, without copying them."""
        return len(self.payload.get("items", ()))

    @property
    def settled_turns(self) -> int:
        """The turns, oldest first, that a trim, a summary or a compaction may take: all of them but
        an unread last turn."""
        return len(self.turns) - self.unread_turn

    def validate_for(self, adapter_id: str, strategy: str) -> RuntimeState:
        """Return self if it belongs to this adapter and strategy; raise StateMismatch otherwise."""
        if self.adapter_id != adapter_id or self.strategy != strategy:
            raise StateMismatch(
                f"runtime state belongs to adapter {self.adapter_id!r} with strategy {self.strategy!r}, "
                f"not adapter {adapter_id!r} with strategy {strategy!r}"
            )
        return self

    def replace(self, **changes: Any) -> RuntimeState:
        """A new, re-validated state with some fields changed; this one is left as it was. Values are
        handed on, not deep-copied (states are values nobody mutates), and only what differs from this
        state is checked again: a commit costs what it changed, not the whole history."""
        return type(self).model_validate({**dict(self), **changes}, context={PREVIOUS: self})

    def with_pending(self, given: Input) -> RuntimeState:
        return self.replace(pending=(*self.pending, PendingInput.of(given)))

    @property
    def pending_inputs(self) -> list[Input]:
        """The waiting inputs as a transcript takes them, images decoded again (checked, rule 1 of images.py)."""
        return [waiting if isinstance(waiting, str) else waiting.as_input() for waiting in self.pending]

    def to_json(self) -> str:
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str) -> RuntimeState:
        return cls.model_validate_json(text)


def _changed_values(payload: dict[str, Any], previous: dict[str, Any]) -> list[Any]:
    """The parts of `payload` that are not objects of `previous`: a changed value, or the elements of a
    list that `previous` did not hold under the same key (a window trimmed and extended shares the rest)."""
    changed: list[Any] = []
    for key, value in payload.items():
        before = previous.get(key)
        if value is before and key in previous:
            continue
        if isinstance(value, list) and isinstance(before, list):
            if len(value) >= len(before) and all(map(operator.is_, value, before)):
                changed.extend(value[len(before) :])  # grown at the end: the usual commit
                continue
            held = {id(element) for element in before}
            changed.extend(element for element in value if id(element) not in held)
        else:
            changed.append(value)
    return changed
