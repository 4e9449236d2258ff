"""manual_rolling: the harness owns the transcript and carries it as a window of whole turns.

Rules
1. The accepted state is a window of complete turns. A turn is the items that open it (every input
   that arrived since the last reply, in order) and the accepted reply's items; the adapter's
   transcript says what those items are. The replies ARE the state, so the system prompt asks the
   model to restate, in a NOTES line, every fact it will need later (the carry-forward instruction).
2. A request is: system prompt, the accepted window, then the new user message. The window is trimmed
   only when the estimated prompt plus the output allowance passes max_context_length, and then by
   removing the OLDEST COMPLETE TURNS until the estimate is down to the low-water mark (trim_low_water
   of the prompt budget). Never "the last N messages", never half a turn. Trimming below the limit
   keeps the window's prefix unchanged for many turns after each trim, so a provider's prompt cache
   can serve it; a low-water mark of 1 trims only what must go, which moves the prefix every turn
   once the window is full. Each turn's estimate is taken once, when it commits.
3. A reply is provisional. It is committed (appended as a new turn, the window trimmed again by the
   same rule) only when the runner's parser accepts an action from it, or a tool round. The results
   of its tool calls join its turn, so trimming drops a call and its result together.
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
from dataclasses import dataclass

from turnstate.adapters.contract import Item, Transcript
from turnstate.machine.engine import Transition
from turnstate.strategies.events import (
    ActionAccepted,
    CallProvider,
    ContextOverflowed,
    ObservationArrived,
    ToolsAnswered,
)
from turnstate.strategies.state import RuntimeState, TurnSpan
from turnstate.strategies.strategy import StrategySettings
from turnstate.strategies.turn import (
    TurnTaking,
    action_rejected,
    answering,
    backoff_elapsed,
    buffering,
    provider_failures,
    reply_held,
    turn_spec,
    turn_strategy,
)

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

# By source state; the rows every turn-taking table holds come from strategies/turn.py, placed where
# they apply. An overflow is recovered by a self-loop: the request with the oldest turn dropped is
# with the provider, which is what AwaitingReply means.
# fmt: off
TRANSITIONS = (
    # event               source           dest
    buffering(S.Accepted),
    answering(S.Accepted),
    T(ObservationArrived, S.Accepted,      S.AwaitingReply, actions=("open_turn", "request_reply")),

    reply_held(S.AwaitingReply, S.Provisional),
    *provider_failures(S.AwaitingReply, backing_off=S.BackingOff, failed=S.FailedClosed),
    T(ContextOverflowed,  S.AwaitingReply, S.AwaitingReply, guards=("has_droppable_turn",),
                          actions=("drop_oldest_turn", "request_reply")),
    T(ContextOverflowed,  S.AwaitingReply, S.FailedClosed,  actions=("fail_closed",)),

    backoff_elapsed(S.BackingOff, S.AwaitingReply),

    T(ActionAccepted,     S.Provisional,   S.Accepted,      actions=("commit_provisional", "submit_action")),
    *action_rejected(S.Provisional, S.AwaitingReply, S.FailedClosed),
)
# fmt: on

SPEC = turn_spec(STRATEGY, State, TRANSITIONS)


class ManualRolling(TurnTaking):
    """The model object the manual_rolling table drives: its own guards and actions beside the shared ones."""

    strategy = STRATEGY
    overflow_failure = "context overflow with no turn left to drop"

    def __init__(self, state: RuntimeState, settings: StrategySettings, transcript: Transcript) -> None:
        super().__init__(state, settings, transcript)
        self.system_prompt = f"{settings.system_prompt}\n\n{CARRY_FORWARD_INSTRUCTION}"
        self.prompt_budget = settings.max_context_length - settings.max_output_tokens
        self.low_water = int(self.prompt_budget * settings.trim_low_water)
        self.skipped_turns = 0  # the oldest accepted turns the open turn's requests leave out
        self._estimates = self._estimate(self.accepted)

    def has_droppable_turn(self, event: ContextOverflowed) -> bool:
        return self.skipped_turns < self.accepted.settled_turns

    def open_turn(self, event: ObservationArrived) -> None:
        super().open_turn(event)
        self.skipped_turns = 0

    def drop_oldest_turn(self, event: ContextOverflowed) -> None:
        self.skipped_turns += 1

    def commit_provisional(self, event: ActionAccepted) -> None:
        turn = self._turn
        items, spans = self._window()
        turn_items = [*turn.opening, *self.transcript.reply_items(self._provisional)]
        spans.append(TurnSpan(start=len(items), end=len(items) + len(turn_items)))
        items += turn_items
        turn_tokens = [*self._turn_tokens()[self.skipped_turns :], self.transcript.estimate_tokens(turn_items)]
        over = self._turns_to_trim(turn_tokens, tail_tokens=0)
        items, spans = drop_turns(items, spans, over)
        self.accepted = self.accepted.replace(
            payload={"items": items}, turns=spans, pending=(), unanswered=self._unanswered_calls(), unread_turn=False
        )
        self._estimates = WindowEstimates(self.accepted, self._estimates.head, turn_tokens[over:])
        self.turn = None

    def answer_tool_calls(self, event: ToolsAnswered) -> None:
        """The results join the last turn, and its estimate grows by theirs (estimates are additive)."""
        turns = self._turn_tokens()
        before = self.accepted.item_count
        super().answer_tool_calls(event)
        added = self.transcript.estimate_tokens(self.accepted.payload["items"][before:])
        self._estimates = WindowEstimates(self.accepted, self._estimates.head, [*turns[:-1], turns[-1] + added])

    def ask(self) -> CallProvider:
        """System prompt, the accepted window less the oldest turns trimmed away, the new input.

        The turns left out are remembered, so an overflow drops the oldest turn this request
        actually sent, and a commit keeps exactly the window that was sent."""
        turn = self._turn
        tail_tokens = self.transcript.estimate_tokens(turn.opening)
        settled = self._turn_tokens()[self.skipped_turns : self.accepted.settled_turns]
        if self.accepted.unread_turn:  # the next reply's input, like the opening: never trimmed
            tail_tokens += self._turn_tokens()[-1]
        self.skipped_turns += self._turns_to_trim(settled, tail_tokens)
        items, spans = self._window()
        return self.projected(items, spans, turn.opening)

    def _turns_to_trim(self, turn_tokens: list[int], tail_tokens: int) -> int:
        """How many oldest complete turns go: none while the prompt (window of `turn_tokens`, then a
        tail) fits the budget; else enough to bring it down to the low-water mark."""
        estimate = self._estimates.head + sum(turn_tokens) + tail_tokens
        if estimate <= self.prompt_budget:
            return 0
        dropped = 0
        for tokens in turn_tokens:
            if estimate <= self.low_water:
                break
            estimate -= tokens
            dropped += 1
        return dropped

    def _turn_tokens(self) -> list[int]:
        """The estimate of each accepted turn, oldest first, taken once per window."""
        if not self._estimates.describe(self.accepted):
            self._estimates = self._estimate(self.accepted)
        return self._estimates.turns

    def _estimate(self, state: RuntimeState) -> WindowEstimates:
        items = state.items
        turns = [self.transcript.estimate_tokens(items[span.start : span.end]) for span in state.turns]
        # The head is the system prompt and any items outside a turn: what no trim can remove.
        head = self.transcript.estimate_tokens(items, self.system_prompt) - sum(turns)
        return WindowEstimates(state, head, turns)

    def _window(self) -> tuple[list[Item], list[TurnSpan]]:
        """The accepted window minus the oldest turns this attempt leaves out."""
        return drop_turns(self.accepted.items, list(self.accepted.turns), self.skipped_turns)


@dataclass(frozen=True)
class WindowEstimates:
    """The token estimates of one accepted state's window: what cannot be trimmed, then each turn."""

    state: RuntimeState
    head: int
    turns: list[int]

    def describe(self, state: RuntimeState) -> bool:
        """Whether `state` has this window (a buffered input changes the state, not the window)."""
        known = self.state
        return state is known or (
            state.payload.get("items") is known.payload.get("items") and state.turns == known.turns
        )


def drop_turns(items: list, spans: list[TurnSpan], count: int) -> tuple[list, list[TurnSpan]]:
    """Remove the `count` oldest complete turns and shift the remaining spans."""
    if count == 0:
        return list(items), list(spans)
    cut = spans[count - 1].end if count <= len(spans) else len(items)
    kept = [TurnSpan(start=span.start - cut, end=span.end - cut) for span in spans[count:]]
    return list(items[cut:]), kept


DEFINITION = turn_strategy({"none": SPEC}, ManualRolling, {"items": []})
start = DEFINITION.start
