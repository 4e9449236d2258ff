"""continuous_conversation: the provider's own items, opaque reasoning included, carried whole from one
accepted turn to the next.

Rules
1. The accepted state is every item of every accepted turn, in order, exactly as the adapter's
   transcript keeps them (encrypted reasoning, signatures and compaction items included); nothing is
   trimmed or rewritten. The model's own state travels in those items, so no carry-forward
   instruction is added to the system prompt.
2. A request is: the system prompt, every accepted item, then the new turn's opening items.
3. A reply is provisional. It commits only when the runner's parser accepts an action from it; a
   retry starts again from the unchanged accepted items, so no orphan item reaches a later request.
4. Retries, backoff and buffered inputs are those of every turn-taking strategy (strategies/turn.py).
5. Native inline compaction (compaction: native) arrives inside an action reply as a compaction item.
   Committing such a reply keeps only the latest compaction item and everything after it, as one
   turn; a rejected reply's compaction is discarded with it.
6. A context overflow fails closed: opaque turns cannot be dropped or rewritten from here, so only
   compaction can shrink the history.
"""

from __future__ import annotations

import enum

from turnstate.adapters.contract import Item, ModelRequest
from turnstate.machine.engine import Transition
from turnstate.strategies.events import ActionAccepted, ContextOverflowed, ObservationArrived
from turnstate.strategies.state import TurnSpan
from turnstate.strategies.turn import TurnTaking, shared_rows, turn_record, turn_spec

STRATEGY = "continuous_conversation"


class State(enum.Enum):
    Accepted = "every accepted turn's native items; waiting for the next input"
    AwaitingReply = "a request replaying every accepted item is with the provider"
    BackingOff = "a transient failure; waiting before asking again from the accepted items"
    Provisional = "a reply is held with its native items; it commits only if it yields a valid action"
    FailedClosed = "the turn failed for good; the accepted items are kept"


T = Transition
S = State

# The rows every turn-taking strategy shares (strategies/turn.py), then continuous_conversation's own.
# fmt: off
TRANSITIONS = (
    *shared_rows(S),
    # event               source           dest
    T(ObservationArrived, S.Accepted,      S.AwaitingReply, actions=("open_turn", "request_reply")),
    T(ContextOverflowed,  S.AwaitingReply, S.FailedClosed,  actions=("fail_closed",)),
    T(ActionAccepted,     S.Provisional,   S.Accepted,      actions=("commit_provisional", "keep_from_latest_compaction",
                                                                     "submit_action")),
)
# fmt: on

SPEC = turn_spec(STRATEGY, State, TRANSITIONS)


class ContinuousConversation(TurnTaking):
    """The model object the continuous_conversation table drives."""

    strategy = STRATEGY
    overflow_failure = "context overflow: opaque turns cannot be dropped, and no compaction made room"

    def commit_provisional(self, event: ActionAccepted) -> None:
        items = self.accepted.items
        turn_items = [*self._turn.opening, *self.transcript.reply_items(self._provisional)]
        spans = [*self.accepted.turns, TurnSpan(start=len(items), end=len(items) + len(turn_items))]
        self.accepted = self.accepted.replace(payload={"items": items + turn_items}, turns=spans, pending=())
        self.turn = None

    def keep_from_latest_compaction(self, event: ActionAccepted) -> None:
        """Rule 5: a compaction item replaces everything before it, and what is kept is one turn."""
        items = self.accepted.items
        cut = self.transcript.latest_compaction(items)
        if not cut:  # no compaction item, or nothing before it
            return
        kept = items[cut:]
        self.accepted = self.accepted.replace(payload={"items": kept}, turns=[TurnSpan(start=0, end=len(kept))])

    def build_request(self) -> ModelRequest:
        accepted: list[Item] = self.accepted.items
        return ModelRequest(system=self.system_prompt, items=(*accepted, *self._turn.opening))


RECORD = turn_record(SPEC, ContinuousConversation, {"items": []}, compaction=("none", "native"))
start = RECORD.start
