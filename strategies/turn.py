"""What every turn-taking strategy shares: the open turn, its retries, and the rows that decide them.

A turn opens on an observation (with the inputs buffered before it), asks the provider, holds the
reply provisionally, and commits only when the runner's parser accepts an action from it, or accepts
it as a tool round (a reply that only called tools). The results of an accepted reply's tool calls
join that reply's turn, so a call and its result are kept, trimmed and summarized together, and a
rejected reply's calls never reach the accepted state. How a
failure is retried (strategies/retry.py) and how a rejected reply is discarded are the same in every
strategy, so the rows and the guards and actions they name are written once, here. A strategy module
adds what is its own: how a turn opens and what the request holds, what a commit keeps, and what a
context overflow or an expired handle means for it.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from turnstate.adapters.contract import Item, ModelRequest, ModelResponse, ToolResult, Transcript
from turnstate.machine.engine import LiveMachine, MachineSpec, Transition
from turnstate.strategies.compaction import Kind
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
    ToolsAnswered,
    WaitBeforeRetry,
)
from turnstate.strategies.offload import project
from turnstate.strategies.projection import rebuilt_window
from turnstate.strategies.retry import RETRY_AFTER_WAIT, RETRY_AT_ONCE, TurnRetries
from turnstate.strategies.state import RuntimeState, TurnSpan
from turnstate.strategies.strategy import ProjectedTurn, RebuildFn, Rebuilt, Strategy, StrategyModel, StrategySettings

T = Transition


# The rows every turn-taking table holds, one function per source state they leave. Each table places
# them under their source, among its own rows, so the order in which a state's rows are tried is the
# order the table shows. The states are passed by name: no table must hold particular state names.
# fmt: off
def buffering(resting: enum.Enum) -> Transition:
    """An input that arrives without a model call waits in the accepted state for the next turn."""
    return T(InputBuffered, resting, resting, actions=("buffer_input",))


def answering(resting: enum.Enum) -> Transition:
    """The results of the last accepted reply's tool calls join that reply's turn."""
    return T(ToolsAnswered, resting, resting, actions=("answer_tool_calls",))


def reply_held(awaiting: enum.Enum, provisional: enum.Enum) -> Transition:
    """A reply is held provisionally while the runner parses an action from it."""
    return T(ProviderReplied, awaiting, provisional, actions=("hold_provisional", "request_action_parse"))


def provider_failures(awaiting: enum.Enum, backing_off: enum.Enum, failed: enum.Enum) -> tuple[Transition, ...]:
    """A transient failure waits and asks again, a refusal or a cut reply asks again at once, from the
    turn's one retry budget (strategies/retry.py); anything else, or no budget left, fails closed."""
    return (
        T(ProviderFailed, awaiting, backing_off, guards=("is_transient", "has_retries_left", "can_wait"),
                          actions=("spend_retry", "wait_before_retry")),
        T(ProviderFailed, awaiting, awaiting,    guards=("is_retryable_at_once", "has_retries_left"),
                          actions=("spend_retry", "request_reply")),
        T(ProviderFailed, awaiting, failed,      actions=("fail_closed",)),
    )


def backoff_elapsed(backing_off: enum.Enum, awaiting: enum.Enum) -> Transition:
    return T(BackoffElapsed, backing_off, awaiting, actions=("request_reply",))


def action_rejected(provisional: enum.Enum, awaiting: enum.Enum, failed: enum.Enum) -> tuple[Transition, ...]:
    """A reply without a valid action is discarded; the turn asks again while it has retries."""
    return (
        T(ActionRejected, provisional, awaiting, guards=("has_retries_left",),
                          actions=("discard_provisional", "spend_retry", "request_reply")),
        T(ActionRejected, provisional, failed,   actions=("discard_provisional", "fail_closed")),
    )
# fmt: on


@dataclass
class OpenTurn:
    """The turn being attempted: the items that open it, its retries and the reply held provisionally."""

    opening: list[Item]
    retries: TurnRetries
    provisional: ModelResponse | None = field(default=None)


class TurnTaking(StrategyModel):
    """The guards and actions of `shared_rows`; a strategy subclasses it and adds its own."""

    strategy: ClassVar[str]
    overflow_failure: ClassVar[str] = "context overflow"

    def __init__(self, state: RuntimeState, settings: StrategySettings, transcript: Transcript) -> None:
        super().__init__()
        self.accepted = state.validate_for(settings.adapter_id, self.strategy)
        self.transcript = transcript
        self.system_prompt = settings.system_prompt
        self.tools = settings.tools
        self.offload = settings.offload
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

    # Actions: they change the strategy's own fields and emit effects; never I/O.

    def buffer_input(self, event: InputBuffered) -> None:
        self.accepted = self.accepted.with_pending(event.input)

    def answer_tool_calls(self, event: ToolsAnswered) -> None:
        check_answers(self.accepted, event.results)
        self.accepted = answered(self.accepted, self.transcript.tool_result_items(event.results))

    def open_turn(self, event: ObservationArrived) -> None:
        if self.accepted.unanswered:
            raise RuntimeError(f"{self.strategy}: a turn cannot open while tool calls are unanswered")
        given = event.input
        inputs = [*self.accepted.pending_inputs, *([given] if given is not None else [])]
        opening = self.transcript.user_items(inputs) if inputs else []
        self.turn = OpenTurn(opening, TurnRetries(self.max_retries, self.backoff))

    def request_reply(self, event: object) -> None:
        self.emit(self.ask())

    def spend_retry(self, event: object) -> None:
        self._turn.retries.spend()

    def wait_before_retry(self, event: ProviderFailed) -> None:
        self.emit(WaitBeforeRetry(self._turn.retries.next_wait(event.error.retry_after_seconds, self.rng)))

    def hold_provisional(self, event: ProviderReplied) -> None:
        self._turn.provisional = event.response

    def request_action_parse(self, event: ProviderReplied) -> None:
        self.emit(ParseAction(event.response))

    def discard_provisional(self, event: ActionRejected) -> None:
        self._turn.provisional = None

    def submit_action(self, event: ActionAccepted) -> None:
        if event.action is not None:  # a tool round submits nothing: the harness answers its calls
            self.emit(SubmitAction(event.action))

    def fail_closed(self, event: object) -> None:
        retries = self._turn.retries
        self.turn = None
        self.emit(FailClosed(reason=self._failure_reason(event, retries)))

    # What each strategy writes itself.

    def ask(self) -> CallProvider:
        """The action request of the open turn, as the strategy builds it."""
        raise NotImplementedError

    def projected(self, history: list[Item], spans: list[TurnSpan], opening: list[Item]) -> CallProvider:
        """The action request on `history` (accepted turns at `spans`) and the turn's `opening`, its
        stale tool results offloaded when the offload is on (strategies/offload.py): a projection of
        the request, never of the accepted state. The results of an unread last turn stay whole."""
        unread = self.accepted.unread_turn and spans and spans[-1].end == len(history)
        projection = project(history, self.transcript, self.offload, spans[-1].start if unread else None)
        request = ModelRequest(self.system_prompt, (*projection.items, *opening), tools=self.tools)
        return CallProvider(request, projection.offloaded)

    def _unanswered_calls(self) -> tuple[str, ...]:
        """The ids of the held reply's tool calls: what the commit leaves for the harness to answer."""
        return tuple(call.id for call in self._provisional.tool_calls)

    @property
    def _turn(self) -> OpenTurn:
        if self.turn is None:
            raise RuntimeError(f"{self.strategy}: no turn is open")
        return self.turn

    @property
    def _provisional(self) -> ModelResponse:
        provisional = self._turn.provisional
        if provisional is None:
            raise RuntimeError(f"{self.strategy}: no reply is held")
        return provisional

    def _failure_reason(self, event: object, retries: TurnRetries) -> str:
        if isinstance(event, ContextOverflowed):
            return self.overflow_failure
        if isinstance(event, ProviderFailed):
            detail = event.error.diagnostics.get("detail")
            failure = f"{event.error.kind.value} provider failure" + (f" ({detail})" if detail else "")
            if event.error.kind not in RETRY_AT_ONCE | RETRY_AFTER_WAIT:
                return failure
            if not retries.left:
                return failure + ", retries exhausted"
            seconds = retries.backoff.max_total_seconds
            return failure + f", the next wait would pass the turn's {seconds:g} s of waiting"
        if isinstance(event, ActionRejected):
            return f"no valid action, retries exhausted (last: {event.reason})"
        return type(event).__name__


def check_answers(state: RuntimeState, results: tuple[ToolResult, ...]) -> None:
    """Raise ValueError unless `results` answer exactly the state's unanswered calls, in their order:
    the one check of the pairing, which the session makes before it fires anything."""
    given = tuple(result.call_id for result in results)
    if given != state.unanswered:
        raise ValueError(
            f"the last accepted reply's tool calls are {', '.join(state.unanswered) or 'none'}; "
            f"pass one result for each, in that order (got {', '.join(given) or 'none'})"
        )


def answered(state: RuntimeState, result_items: list[Item]) -> RuntimeState:
    """The state with `result_items` appended to its last accepted turn (the one whose reply made the
    calls, which ends the items), its calls no longer unanswered."""
    last = state.turns[-1]
    if last.end != state.item_count:
        raise RuntimeError("tool results can only join the last accepted turn, and it does not end the items")
    turns = (*state.turns[:-1], TurnSpan(start=last.start, end=last.end + len(result_items)))
    items = [*state.items, *result_items]
    return state.replace(payload={**state.payload, "items": items}, turns=turns, unanswered=(), unread_turn=True)


def turn_spec(
    name: str,
    states: type[enum.Enum],
    transitions: tuple[Transition, ...],
    nested: Mapping[enum.Enum, MachineSpec] | None = None,
    omitted: frozenset[enum.Enum] = frozenset(),
) -> MachineSpec:
    """A turn-taking machine: it rests in Accepted and fails closed in FailedClosed."""
    return MachineSpec(
        name=name,
        states=states,
        initial=states["Accepted"],
        final=frozenset({states["FailedClosed"]}),
        transitions=transitions,
        nested=nested or {},
        omitted=omitted,
    )


def turn_strategy(
    specs: Mapping[Kind, MachineSpec],
    model: type[TurnTaking],
    empty_payload: Mapping[str, Any],
    rebuild: RebuildFn | None = None,
) -> Strategy:
    """A turn-taking strategy, assembled per compaction kind (`specs`), whose start rests the machine
    its settings' compaction assembles in Accepted (or in `at`, a state that takes the next
    observation), on the given accepted state or on a fresh one holding `empty_payload`. Its rebuild
    lays the projection's turns out in `items` unless it has its own (strategies/projection.py)."""

    def start(
        settings: StrategySettings, transcript: Transcript, state: RuntimeState | None = None, at: str | None = None
    ) -> LiveMachine[StrategyModel]:
        spec = specs[settings.compaction.kind]
        if state is None:
            state = RuntimeState(adapter_id=settings.adapter_id, strategy=spec.name, payload=dict(empty_payload))
        machine = LiveMachine[StrategyModel](spec, model(state, settings, transcript), at)
        if not machine.accepts(ObservationArrived):
            raise ValueError(f"{spec.name} cannot start in {at}: it is not a state between turns")
        return machine

    def rebuild_window(settings: StrategySettings, transcript: Transcript, turns: Sequence[ProjectedTurn]) -> Rebuilt:
        return rebuilt_window(settings, transcript, specs[settings.compaction.kind].name, turns)

    return Strategy(specs=specs, model=model, start=start, rebuild=rebuild or rebuild_window)
