"""The commit discipline as a model-based test that any strategy machine can be walked against.

A subclass names the strategy (its record, settings and transcript). Hypothesis then plays the
runner: at every step it feeds one of the events the machine accepts in its current state
(observations of random size, buffered inputs, replies the parser accepts or rejects, each kind of
failure, overflows, a resume after failing closed), and after every step these rules must hold:

1. The accepted state changes only when an action is accepted (a commit) or an input is buffered,
   and buffering only appends to the pending inputs.
2. A commit clears the pending inputs and keeps the committed turn: its opening, then the reply.
3. Every request of a turn carries the turn's opening input: the buffered inputs, then the observation.
4. No rejected reply ever reaches the accepted state or a later request.
5. A turn makes at most max_retries + 1 attempts, and its waits before retrying are each at most
   the backoff's max_seconds and in all at most its max_total_seconds.
6. A machine that failed closed told the runner so and keeps the last accepted state exactly; a
   machine started again on that state rests in its initial state as if nothing had been tried.

A subclass adds its strategy's own invariants. A failing walk is shrunk to the shortest run of events
that breaks a rule.
"""

from __future__ import annotations

from typing import ClassVar

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from turnstate.adapters.contract import ErrorKind, Item, ModelRequest, ModelResponse, ProviderError, Transcript, Usage
from turnstate.machine.engine import Event, LiveMachine
from turnstate.strategies.events import (
    ActionAccepted,
    ActionRejected,
    BackoffElapsed,
    CallCompaction,
    CallProvider,
    CallSummary,
    CompactionReplied,
    ContextOverflowed,
    FailClosed,
    HandleExpired,
    InputBuffered,
    ObservationArrived,
    ParseAction,
    ProviderFailed,
    ProviderReplied,
    WaitBeforeRetry,
)
from turnstate.strategies.state import RuntimeState
from turnstate.strategies.strategy import Strategy, StrategySettings

# Derandomized so CI is repeatable; explore more widely by hand with a larger max_examples.
# A subclass's module assigns it: `MyWalk.TestCase.settings = WALK_SETTINGS`.
# What a machine may ask for first in a turn, and again after a wait: the action, or first a compaction.
ASKS = (CallProvider, CallCompaction, CallSummary)

WALK_SETTINGS = settings(max_examples=150, stateful_step_count=40, deadline=None, derandomize=True, database=None)

# A context overflow and an expired handle are reported by events of their own.
FAILURE_KINDS = [kind for kind in ErrorKind if kind not in (ErrorKind.CONTEXT_OVERFLOW, ErrorKind.EXPIRED_HANDLE)]


def accepting(event_type: type[Event]):
    """Let a rule run only where the machine accepts `event_type`, as the runner only feeds it there."""
    return precondition(lambda self: self.machine.accepts(event_type))


class CommitDisciplineWalk(RuleBasedStateMachine):
    """A random walk over one strategy's machine, driven only through its record and the engine.

    Subclasses set `record`, `strategy_settings` and `transcript`, and override `reply_response`
    when the adapter's replies are not one Chat assistant message. The machine's model must keep
    its accepted `RuntimeState` as `.accepted`."""

    record: ClassVar[Strategy]
    strategy_settings: ClassVar[StrategySettings]
    transcript: ClassVar[Transcript]

    def __init__(self) -> None:
        super().__init__()
        self.machine = self.start()
        self.kept = self.accepted.to_json()  # the accepted state as last committed or buffered
        self.counter = 0
        self.rejected: list[str] = []  # the markers of rejected replies
        self.opening: list[Item] = []  # the open turn's opening items
        self.turn_requests: list[ModelRequest] = []
        self.attempts = 0
        self.waits: list[float] = []  # the open turn's waits before retrying
        self.provisional: ModelResponse | None = None
        self.marker = ""  # the provisional reply's marker
        self.last_event: Event | None = None
        self.failed_closed = False

    def start(self, state: RuntimeState | None = None) -> LiveMachine:
        return self.record.start(self.strategy_settings, self.transcript, state)

    def reply_response(self, text: str) -> ModelResponse:
        """A provider reply carrying `text`, as the adapter normalizes it (Chat: one assistant message)."""
        return ModelResponse(
            text=text,
            usage=Usage(1, 0, 1),
            stop_reason="stop",
            native_items=({"role": "assistant", "content": text},),
        )

    @property
    def accepted(self) -> RuntimeState:
        return self.machine.model.accepted

    def fresh(self, prefix: str) -> str:
        """A unique marker; bracketed so that no marker is a substring of another."""
        self.counter += 1
        return f"[{prefix}-{self.counter}]"

    def fire(self, event: Event) -> list:
        effects = self.machine.fire(event)
        self.last_event = event
        self.turn_requests += [effect.request for effect in effects if isinstance(effect, CallProvider)]
        self.failed_closed |= any(isinstance(effect, FailClosed) for effect in effects)
        return effects

    # Inputs.

    @accepting(ObservationArrived)
    @rule(size=st.integers(0, 400))
    def observe(self, size: int) -> None:
        observation = self.fresh("frame") + " " + "x" * size
        self.opening = self.transcript.user_items([*self.accepted.pending, observation])
        self.turn_requests, self.attempts, self.waits = [], 0, []
        effects = self.fire(ObservationArrived(observation))
        asks = [effect for effect in effects if isinstance(effect, ASKS)]
        assert asks, "an observation must lead to a request (or first to a compaction)"

    @accepting(InputBuffered)
    @rule()
    def buffer(self) -> None:
        before = self.accepted
        text = self.fresh("buffered")
        self.fire(InputBuffered(text))
        after = self.accepted
        assert after.pending == (*before.pending, text), "buffering must append the input to the pending ones"
        assert after.model_dump(exclude={"pending"}) == before.model_dump(exclude={"pending"})
        self.kept = after.to_json()

    # Outcomes of a provider call, and the runner's verdict on a reply.

    @accepting(ProviderReplied)
    @rule()
    def reply(self) -> None:
        self.attempts += 1
        self.marker = self.fresh("reply")
        self.provisional = self.reply_response(self.marker + "\nACTION: ACTION1")
        effects = self.fire(ProviderReplied(self.provisional))
        assert ParseAction(self.provisional) in effects, "a reply must be handed to the action parser"

    def compaction_response(self) -> ModelResponse:
        """A compaction call's answer, for a strategy that compacts by a call of its own."""
        raise NotImplementedError(f"{type(self).__name__} must say what a compaction call answers")

    @accepting(CompactionReplied)
    @rule()
    def compact(self) -> None:
        effects = self.fire(CompactionReplied(self.compaction_response()))
        if self.machine.is_final:  # a reply the nested machine has no row for: its parent fails the turn closed
            return
        assert any(isinstance(effect, CallProvider) for effect in effects), "after a compaction the action is asked for"

    @accepting(ActionAccepted)
    @rule()
    def accept_action(self) -> None:
        assert self.provisional is not None
        self.fire(ActionAccepted("ACTION1"))
        if self.machine.is_final:  # a strategy may refuse to commit a reply it cannot continue from
            return
        state = self.accepted
        self.check_committed(state, self.provisional)
        assert state.pending == (), "a commit must clear the pending inputs"
        self.kept = state.to_json()

    def check_committed(self, state: RuntimeState, reply: ModelResponse) -> None:
        """What a commit must keep; by default the committed turn's items, at the end of the state."""
        turn = [*self.opening, *self.transcript.reply_items(reply)]
        assert state.items[-len(turn) :] == turn, "a commit must keep the committed turn's items"

    @accepting(ActionRejected)
    @rule()
    def reject_action(self) -> None:
        self.rejected.append(self.marker)
        self.fire(ActionRejected("no action"))

    @accepting(ProviderFailed)
    @rule(kind=st.sampled_from(FAILURE_KINDS), retry_after=st.none() | st.floats(0, 30))
    def fail(self, kind: ErrorKind, retry_after: float | None) -> None:
        self.attempts += 1
        effects = self.fire(ProviderFailed(ProviderError(kind, Usage(1, 0, 0), retry_after_seconds=retry_after)))
        self.waits += [effect.seconds for effect in effects if isinstance(effect, WaitBeforeRetry)]

    @accepting(BackoffElapsed)
    @rule()
    def wait_out(self) -> None:
        effects = self.fire(BackoffElapsed())
        asks = [effect for effect in effects if isinstance(effect, ASKS)]
        assert asks, "after a wait the machine must ask again"

    @accepting(ContextOverflowed)
    @rule()
    def overflow(self) -> None:
        self.fire(ContextOverflowed(ProviderError(ErrorKind.CONTEXT_OVERFLOW)))

    @accepting(HandleExpired)
    @rule()
    def lose_the_handle(self) -> None:
        self.attempts += 1
        self.fire(HandleExpired(ProviderError(ErrorKind.EXPIRED_HANDLE)))

    @precondition(lambda self: self.machine.is_final)
    @rule()
    def resume(self) -> None:
        """A run that failed closed is resumed from the state it kept, as if nothing had been tried."""
        self.machine = self.start(self.accepted)
        self.turn_requests, self.attempts, self.waits, self.failed_closed, self.last_event = [], 0, [], False, None
        assert self.machine.path == self.machine.spec.initial.name

    # Invariants after every step.

    @invariant()
    def the_accepted_state_changes_only_by_a_commit_or_a_buffered_input(self) -> None:
        assert self.accepted.to_json() == self.kept

    @invariant()
    def every_request_of_a_turn_carries_its_opening_input(self) -> None:
        for request in self.turn_requests:
            assert list(request.items[-len(self.opening) :]) == self.opening

    @invariant()
    def no_rejected_reply_reaches_the_accepted_state_or_a_later_request(self) -> None:
        carried = self.accepted.to_json() + repr(self.turn_requests)
        for marker in self.rejected:  # the marker, not the text: JSON and repr escape its newline
            assert marker not in carried

    @invariant()
    def a_turn_makes_at_most_max_retries_plus_one_attempts(self) -> None:
        assert self.attempts <= self.strategy_settings.max_retries + 1

    @invariant()
    def a_turns_waits_stay_within_the_backoff_caps(self) -> None:
        backoff = self.strategy_settings.backoff
        assert all(0 < seconds <= backoff.max_seconds for seconds in self.waits)
        assert sum(self.waits) <= backoff.max_total_seconds + 1e-9

    @invariant()
    def failing_closed_keeps_the_last_accepted_state(self) -> None:
        if self.machine.is_final:
            assert self.failed_closed, "a machine that fails closed must tell the runner"
            assert self.accepted.to_json() == self.kept
