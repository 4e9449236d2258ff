"""Events the strategy machines accept and effects they emit: the vocabulary between machine and runner.

Events are facts the runner reports (a provider replied, the action was rejected); effects are what a
machine asks the runner to do (call the provider, parse an action). Both are small frozen dataclasses.
"""

from __future__ import annotations

from dataclasses import dataclass

from turnstate.adapters.contract import (
    ErrorKind,
    Input,
    ModelRequest,
    ModelResponse,
    ProviderError,
    ToolResult,
    UserInput,
)
from turnstate.adapters.images import ImagePart
from turnstate.machine.engine import Effect, Event
from turnstate.strategies.summary import SummaryPass

# Events the conversation machines accept, named as facts.


@dataclass(frozen=True)
class ObservationArrived(Event):
    """A frame to act on: its text, and the images it shows (checked PNGs), if any."""

    text: str
    images: tuple[ImagePart, ...] = ()

    @property
    def input(self) -> Input | None:
        """The turn's input as a transcript takes it; None when the observation is empty (the
        results of the last reply's calls are then the whole input)."""
        if self.images:
            return UserInput(self.text, self.images)
        return self.text or None


@dataclass(frozen=True)
class InputBuffered(Event):
    """An input that arrived without a model call (GAME_OVER, a reset observation)."""

    text: str
    images: tuple[ImagePart, ...] = ()

    @property
    def input(self) -> Input:
        return UserInput(self.text, self.images) if self.images else self.text


@dataclass(frozen=True)
class ToolsAnswered(Event):
    """The results of the last accepted reply's tool calls, one per call, in the calls' order."""

    results: tuple[ToolResult, ...]


@dataclass(frozen=True)
class ProviderReplied(Event):
    response: ModelResponse


@dataclass(frozen=True)
class ProviderFailed(Event):
    error: ProviderError


@dataclass(frozen=True)
class ContextOverflowed(Event):
    error: ProviderError


@dataclass(frozen=True)
class CompactionReplied(Event):
    """A separate compaction call answered: its items replace the accepted history it was sent."""

    response: ModelResponse


@dataclass(frozen=True)
class HandleExpired(Event):
    """The provider no longer knows the response handle the request continued from (a 404)."""

    error: ProviderError


@dataclass(frozen=True)
class ActionAccepted(Event):
    """The held reply is accepted: its action, or None for a tool round (a reply that only called
    tools, which the harness answers before the model is asked again)."""

    action: str | None


@dataclass(frozen=True)
class ActionRejected(Event):
    reason: str


@dataclass(frozen=True)
class BackoffElapsed(Event):
    """The wait the machine asked for before its next attempt has passed."""


def outcome_event(outcome: ModelResponse | ProviderError, *, compaction: bool = False) -> Event:
    """The event that reports an adapter call's outcome (an action request's, or with `compaction`
    a compaction call's) to a machine."""
    if isinstance(outcome, ModelResponse):
        return CompactionReplied(outcome) if compaction else ProviderReplied(outcome)
    if outcome.kind is ErrorKind.CONTEXT_OVERFLOW:
        return ContextOverflowed(outcome)
    if outcome.kind is ErrorKind.EXPIRED_HANDLE:
        return HandleExpired(outcome)
    return ProviderFailed(outcome)


# Effects the machines emit and the runner performs.


@dataclass(frozen=True)
class CallProvider(Effect):
    """Send the action request. `offloaded` is the (ref, full text) of each stale tool result the
    request carries as a pointer (strategies/offload.py): the runner stores them before it sends."""

    request: ModelRequest
    offloaded: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class ParseAction(Effect):
    response: ModelResponse


@dataclass(frozen=True)
class SubmitAction(Effect):
    action: str


@dataclass(frozen=True)
class CallCompaction(Effect):
    """Ask the provider to compact `request.items` (the accepted history) in a call of its own."""

    request: ModelRequest


@dataclass(frozen=True)
class CallSummary(Effect):
    """Ask the model for a summary of accepted turns (an ordinary call of the adapter): `request` as
    strategies/summary.py assembled it, `summary_pass` what it summarizes and leaves out."""

    request: ModelRequest
    summary_pass: SummaryPass
    summarized_items: int  # the accepted items the summarized turns hold


@dataclass(frozen=True)
class ReportSummary(Effect):
    """A harness summary committed with the turn's accepted action: what the runner records of it."""

    summary: str
    bridge: str  # the exact continuation message sent in its place
    summary_pass: SummaryPass
    completed_context_tokens: int | None  # the completed context that scheduled it (None on an overflow lane)
    items_before: int
    items_after: int
    overflow_recoveries: int


@dataclass(frozen=True)
class WaitBeforeRetry(Effect):
    seconds: float


@dataclass(frozen=True)
class FailClosed(Effect):
    reason: str
