"""manual_rolling: the harness owns the transcript and carries it as a window of whole turns.

Rules
1. The accepted state is a window of complete turns. A turn is the items that open it (every input
   that arrived since the last reply, in order) and the accepted reply's items; the adapter's
   transcript says what those items are. The replies ARE the state, so the system prompt asks the
   model to restate, in a NOTES line, every fact it will need later (the carry-forward instruction).
2. A request is: system prompt, the accepted window, then the new user message. Before it is sent the
   window is trimmed by removing the OLDEST COMPLETE TURNS until the estimated prompt plus the output
   allowance fits max_context_length. Never "the last N messages", never half a turn.
3. A reply is provisional. It is committed (appended as a new turn, window trimmed again) only when
   the runner's parser accepts an action from it.
4. A rejected action, a refusal, a truncated reply or a transient failure asks again from the
   unchanged accepted state, while the turn has retries left (max_retries per turn); a transient
   failure waits first, as strategies/retry.py rules, and fails closed if the wait would pass the
   turn's wait budget.
5. A context overflow reported by the provider means the estimate was optimistic: the oldest turn of
   this request's window is dropped and the request is sent again; with no turn left to drop, the turn
   fails closed.
6. A fatal error or exhausted retries fails closed: the last accepted state is kept intact, the run
   ends, and the usage of every failed attempt stays accounted (by the runner).
7. Inputs that arrive without a model call are buffered in the accepted state and replayed in order,
   ahead of the observation that next prompts a call.
"""

from __future__ import annotations

import enum
import random
from dataclasses import dataclass, field

from turnstate.adapters.contract import Item, ModelRequest, ModelResponse, Transcript
from turnstate.machine.engine import LiveMachine, MachineSpec, Transition
from turnstate.strategies.events import (
    ActionAccepted,
    ActionRejected,
    BackoffElapsed,
    CallProvider,
    ContextOverflowed,
    FailClosed,
    InputBuffered,
    ObservationArrived,
    ParseAction,
    ProviderFailed,
    ProviderReplied,
    SubmitAction,
    WaitBeforeRetry,
)
from turnstate.strategies.record import StrategyModel, StrategyRecord, StrategySettings
from turnstate.strategies.retry import RETRY_AFTER_WAIT, RETRY_AT_ONCE, TurnRetries
from turnstate.strategies.state import RuntimeState, TurnSpan

STRATEGY = "manual_rolling"

CARRY_FORWARD_INSTRUCTION = (
    "Only your visible replies are carried to later turns; older turns are dropped when the context "
    "fills up. End every reply with one line that starts with 'NOTES:' and restates every fact you "
    "will still need later (for example what an early frame showed)."
)


class State(enum.Enum):
    Accepted = "the last accepted window; waiting for the next input"
    AwaitingReply = "a request built from the accepted window is with the provider"
    BackingOff = "a transient failure; waiting before asking again from the accepted window"
    Provisional = "a reply is held; it commits only if it yields a valid action"
    FailedClosed = "the turn failed for good; the accepted window is kept"


T = Transition
S = State

# fmt: off
TRANSITIONS = (
    # event               source           dest
    T(InputBuffered,      S.Accepted,      S.Accepted,      actions=("buffer_input",)),
    T(ObservationArrived, S.Accepted,      S.AwaitingReply, actions=("open_turn", "request_reply")),

    T(ProviderReplied,    S.AwaitingReply, S.Provisional,   actions=("hold_provisional", "request_action_parse")),
    T(ProviderFailed,     S.AwaitingReply, S.BackingOff,    guards=("is_transient", "has_retries_left", "can_wait"),
                          actions=("spend_retry", "wait_before_retry")),
    T(ProviderFailed,     S.AwaitingReply, S.AwaitingReply, guards=("is_retryable_at_once", "has_retries_left"),
                          actions=("spend_retry", "request_reply")),
    T(ProviderFailed,     S.AwaitingReply, S.FailedClosed,  actions=("fail_closed",)),
    T(ContextOverflowed,  S.AwaitingReply, S.AwaitingReply, guards=("has_droppable_turn",),
                          actions=("drop_oldest_turn", "request_reply")),
    T(ContextOverflowed,  S.AwaitingReply, S.FailedClosed,  actions=("fail_closed",)),

    T(BackoffElapsed,     S.BackingOff,    S.AwaitingReply, actions=("request_reply",)),

    T(ActionAccepted,     S.Provisional,   S.Accepted,      actions=("commit_provisional", "submit_action")),
    T(ActionRejected,     S.Provisional,   S.AwaitingReply, guards=("has_retries_left",),
                          actions=("discard_provisional", "spend_retry", "request_reply")),
    T(ActionRejected,     S.Provisional,   S.FailedClosed,  actions=("discard_provisional", "fail_closed")),
)
# fmt: on

SPEC = MachineSpec(
    name=STRATEGY,
    states=State,
    initial=State.Accepted,
    final=frozenset({State.FailedClosed}),
    transitions=TRANSITIONS,
)


@dataclass
class OpenTurn:
    """The turn being attempted: the items that open it, how many oldest turns this request skips
    (overflow recovery), the retries spent and the reply held provisionally."""

    opening: list[Item]
    retries: TurnRetries
    skipped_turns: int = 0
    provisional: ModelResponse | None = field(default=None)


class ManualRolling(StrategyModel):
    """The model object the manual_rolling table drives: named guards (predicates) and actions (verbs)."""

    def __init__(self, state: RuntimeState, settings: StrategySettings, transcript: Transcript) -> None:
        super().__init__()
        self.accepted = state
        self.transcript = transcript
        self.system_prompt = f"{settings.system_prompt}\n\n{CARRY_FORWARD_INSTRUCTION}"
        self.prompt_budget = settings.max_context_length - settings.max_output_tokens
        self.max_retries = settings.max_retries
        self.backoff = settings.backoff
        self.rng = random.Random(settings.random_seed)
        self.turn: OpenTurn | None = None

    # Guards: pure predicates over the event and the current attempt.

    def is_transient(self, event: ProviderFailed) -> bool:
        return event.error.kind in RETRY_AFTER_WAIT

    def is_retryable_at_once(self, event: ProviderFailed) -> bool:
        return event.error.kind in RETRY_AT_ONCE

    def has_retries_left(self, event: object) -> bool:
        return self._turn.retries.left

    def can_wait(self, event: ProviderFailed) -> bool:
        return self._turn.retries.can_wait(event.error.retry_after_seconds)

    def has_droppable_turn(self, event: ContextOverflowed) -> bool:
        return self._turn.skipped_turns < len(self.accepted.turns)

    # Actions: they change the strategy's own fields and emit effects; never I/O.

    def buffer_input(self, event: InputBuffered) -> None:
        self.accepted = self.accepted.with_pending(event.text)

    def open_turn(self, event: ObservationArrived) -> None:
        opening = self.transcript.user_items([*self.accepted.pending, event.text])
        self.turn = OpenTurn(opening, TurnRetries(self.max_retries, self.backoff))

    def request_reply(self, event: object) -> None:
        self.emit(CallProvider(self.build_request()))

    def spend_retry(self, event: object) -> None:
        self._turn.retries.spend()

    def wait_before_retry(self, event: ProviderFailed) -> None:
        self.emit(WaitBeforeRetry(self._turn.retries.next_wait(event.error.retry_after_seconds, self.rng)))

    def drop_oldest_turn(self, event: ContextOverflowed) -> None:
        self._turn.skipped_turns += 1

    def hold_provisional(self, event: ProviderReplied) -> None:
        self._turn.provisional = event.response

    def request_action_parse(self, event: ProviderReplied) -> None:
        self.emit(ParseAction(event.response))

    def discard_provisional(self, event: ActionRejected) -> None:
        self._turn.provisional = None

    def commit_provisional(self, event: ActionAccepted) -> None:
        turn = self._turn
        assert turn.provisional is not None
        items, spans = self._window(turn)
        turn_items = [*turn.opening, *self.transcript.reply_items(turn.provisional)]
        spans.append(TurnSpan(start=len(items), end=len(items) + len(turn_items)))
        items += turn_items
        over = self._turns_over_budget(items, spans, [])
        items, spans = drop_turns(items, spans, over)
        self.accepted = self.accepted.replace(payload={"items": items}, turns=spans, pending=())
        self.turn = None

    def submit_action(self, event: ActionAccepted) -> None:
        self.emit(SubmitAction(event.action))

    def fail_closed(self, event: object) -> None:
        retries = self._turn.retries
        self.turn = None
        self.emit(FailClosed(reason=_failure_reason(event, retries)))

    # Request building.

    def build_request(self) -> ModelRequest:
        """System prompt, the accepted window less the oldest turns that do not fit, the new input.

        The turns left out are remembered on the open turn, so an overflow drops the oldest turn
        this request actually sent, and a commit keeps exactly the window that was sent."""
        turn = self._turn
        items, spans = self._window(turn)
        over = self._turns_over_budget(items, spans, turn.opening)
        turn.skipped_turns += over
        items, _ = drop_turns(items, spans, over)
        return ModelRequest(system=self.system_prompt, items=(*items, *turn.opening))

    def _turns_over_budget(self, items: list[Item], spans: list[TurnSpan], tail: list[Item]) -> int:
        """How many oldest complete turns must go for system + window + tail to fit the prompt budget."""
        estimate = self.transcript.estimate_tokens([*items, *tail], self.system_prompt)
        dropped = 0
        for span in spans:
            if estimate <= self.prompt_budget:
                break
            estimate -= self.transcript.estimate_tokens(items[span.start : span.end])
            dropped += 1
        return dropped

    def _window(self, turn: OpenTurn) -> tuple[list[Item], list[TurnSpan]]:
        """The accepted window minus the oldest turns this attempt leaves out."""
        return drop_turns(self.accepted.items, list(self.accepted.turns), turn.skipped_turns)

    @property
    def _turn(self) -> OpenTurn:
        if self.turn is None:
            raise RuntimeError("manual_rolling: no turn is open")
        return self.turn


def drop_turns(items: list, spans: list[TurnSpan], count: int) -> tuple[list, list[TurnSpan]]:
    """Remove the `count` oldest complete turns and shift the remaining spans."""
    if count == 0:
        return list(items), list(spans)
    cut = spans[count - 1].end if count <= len(spans) else len(items)
    kept = [TurnSpan(start=span.start - cut, end=span.end - cut) for span in spans[count:]]
    return list(items[cut:]), kept


def _failure_reason(event: object, retries: TurnRetries) -> str:
    if isinstance(event, ContextOverflowed):
        return "context overflow with no turn left to drop"
    if isinstance(event, ProviderFailed):
        failure = f"{event.error.kind.value} provider failure"
        if event.error.kind not in RETRY_AT_ONCE | RETRY_AFTER_WAIT:
            return failure
        if not retries.left:
            return failure + ", retries exhausted"
        return failure + f", the next wait would pass the turn's {retries.backoff.max_total_seconds:g} s of waiting"
    if isinstance(event, ActionRejected):
        return f"no valid action, retries exhausted (last: {event.reason})"
    return type(event).__name__


def start(
    settings: StrategySettings, transcript: Transcript, state: RuntimeState | None = None
) -> LiveMachine[StrategyModel]:
    """A live manual_rolling machine resting in Accepted on `state`, or on an empty window."""
    if state is None:
        state = RuntimeState(adapter_id=settings.adapter_id, strategy=STRATEGY, payload={"items": []})
    model = ManualRolling(state.validate_for(settings.adapter_id, STRATEGY), settings, transcript)
    return LiveMachine[StrategyModel](SPEC, model)


RECORD = StrategyRecord(spec=SPEC, model=ManualRolling, start=start)
