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

from turnstate.adapters.contract import Item, ModelRequest, Transcript
from turnstate.machine.engine import Transition
from turnstate.strategies.events import ActionAccepted, ContextOverflowed, ObservationArrived
from turnstate.strategies.record import StrategySettings
from turnstate.strategies.state import RuntimeState, TurnSpan
from turnstate.strategies.turn import TurnTaking, shared_rows, turn_record, turn_spec

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

# The rows every turn-taking strategy shares (strategies/turn.py: buffering, retries, backoff,
# rejected actions), then manual_rolling's own.
# fmt: off
TRANSITIONS = (
    *shared_rows(S),
    # event               source           dest
    T(ObservationArrived, S.Accepted,      S.AwaitingReply, actions=("open_turn", "request_reply")),
    T(ContextOverflowed,  S.AwaitingReply, S.AwaitingReply, guards=("has_droppable_turn",),
                          actions=("drop_oldest_turn", "request_reply")),
    T(ContextOverflowed,  S.AwaitingReply, S.FailedClosed,  actions=("fail_closed",)),
    T(ActionAccepted,     S.Provisional,   S.Accepted,      actions=("commit_provisional", "submit_action")),
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
        self.skipped_turns = 0  # the oldest accepted turns the open turn's requests leave out

    def has_droppable_turn(self, event: ContextOverflowed) -> bool:
        return self.skipped_turns < len(self.accepted.turns)

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
        over = self._turns_over_budget(items, spans, [])
        items, spans = drop_turns(items, spans, over)
        self.accepted = self.accepted.replace(payload={"items": items}, turns=spans, pending=())
        self.turn = None

    def build_request(self) -> ModelRequest:
        """System prompt, the accepted window less the oldest turns that do not fit, the new input.

        The turns left out are remembered, so an overflow drops the oldest turn this request
        actually sent, and a commit keeps exactly the window that was sent."""
        turn = self._turn
        items, spans = self._window()
        over = self._turns_over_budget(items, spans, turn.opening)
        self.skipped_turns += over
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

    def _window(self) -> tuple[list[Item], list[TurnSpan]]:
        """The accepted window minus the oldest turns this attempt leaves out."""
        return drop_turns(self.accepted.items, list(self.accepted.turns), self.skipped_turns)


def drop_turns(items: list, spans: list[TurnSpan], count: int) -> tuple[list, list[TurnSpan]]:
    """Remove the `count` oldest complete turns and shift the remaining spans."""
    if count == 0:
        return list(items), list(spans)
    cut = spans[count - 1].end if count <= len(spans) else len(items)
    kept = [TurnSpan(start=span.start - cut, end=span.end - cut) for span in spans[count:]]
    return list(items[cut:]), kept


RECORD = turn_record(SPEC, ManualRolling, {"items": []})
start = RECORD.start
