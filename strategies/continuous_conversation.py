"""continuous_conversation: the provider's own items, opaque reasoning included, carried whole from one
accepted turn to the next.

Rules
1. The accepted state is every item of every accepted turn, in order, exactly as the adapter's
   transcript keeps them (encrypted reasoning, signatures and compaction items included); nothing is
   trimmed or rewritten. The model's own state travels in those items, so no carry-forward
   instruction is added to the system prompt.
2. A request is: the system prompt, every accepted item, then the new turn's opening items.
3. A reply is provisional. It commits only when the runner's parser accepts an action from it (or a
   tool round); a retry starts again from the unchanged accepted items, so no orphan item reaches a
   later request. The results of its tool calls join its turn (strategies/turn.py).
4. Retries, backoff and buffered inputs are those of every turn-taking strategy (strategies/turn.py).
5. Compaction. Inline native compaction (OpenAI) arrives inside an action reply as a compaction item
   (after the reply's message, standing for the whole conversation so far), and committing such a
   reply keeps only the latest compaction item the reply carried and everything after it, as one
   turn. A compaction by a call of its own, native (xAI, Anthropic: the nested compaction_call
   machine) or written by the harness from the model's summary (the nested harness_summary machine),
   is scheduled when an accepted action's completed context (its reported input plus output tokens)
   reaches the trigger: the next turn first compacts the accepted history alone (the Compacting
   state, holding the configuration's nested machine, which asks for the compaction as it is
   entered), then sends the action request on the compacted history. The compaction and the action form one provisional turn,
   committed together only with an accepted action, and exactly as the action request was built on
   them (xAI's compacted window keeps user messages before its compaction item: they stay). Whatever
   fails after a compaction succeeded (a rejected action, a refused, truncated or transient action
   request) discards both, and the retry compacts the unchanged accepted history again; every call
   is billed to the turn. The first observation never compacts.
6. A context overflow fails closed: opaque turns cannot be dropped or rewritten from here. With
   harness summaries, an action request that overflows before the turn compacted recovers by
   compacting: it summarizes the accepted history on the overflow lane (the turn's inputs held
   aside) and is sent once more; a second overflow fails closed.

The machine is assembled per compaction kind (`SPECS`): without a compaction by a call of its own it
has neither CompactionScheduled nor Compacting, and Compacting holds exactly one nested machine.
"""

from __future__ import annotations

import enum

from turnstate.adapters.contract import ModelRequest, Transcript
from turnstate.machine.engine import Done, MachineSpec, Transition, when
from turnstate.strategies import compaction_call, harness_summary
from turnstate.strategies.compaction import KINDS, HarnessSummary, HeldCompaction, Kind, NativeByCall
from turnstate.strategies.events import (
    ActionAccepted,
    ActionRejected,
    BackoffElapsed,
    CallProvider,
    CompactionReplied,
    ContextOverflowed,
    ObservationArrived,
    ProviderFailed,
)
from turnstate.strategies.state import RuntimeState, TurnSpan
from turnstate.strategies.strategy import StrategySettings
from turnstate.strategies.summary import SummaryPass, first_pass
from turnstate.strategies.turn import (
    action_rejected,
    answering,
    backoff_elapsed,
    buffering,
    provider_failures,
    reply_held,
    turn_spec,
    turn_strategy,
)

STRATEGY = "continuous_conversation"


class State(enum.Enum):
    Accepted = "every accepted turn's native items; waiting for the next input"
    CompactionScheduled = "the last accepted action reached the compaction trigger; the next turn compacts first"
    AwaitingReply = "a request replaying every accepted item is with the provider"
    BackingOff = "a transient failure; waiting before asking again from the accepted items"
    Compacting = "a call of its own compacts the accepted items; they commit only with this turn's action"
    Provisional = "a reply is held with its native items; it commits only if it yields a valid action"
    FailedClosed = "the turn failed for good; the accepted items are kept"


T = Transition
S = State

COMMIT = ("report_summary", "commit_provisional", "keep_from_latest_compaction", "submit_action")
NESTED = {"native_call": compaction_call.SPEC, "harness_summary": harness_summary.SPEC}


def transitions(kind: Kind) -> tuple[Transition, ...]:
    """The table as compaction `kind` assembles it, by source state. A turn that compacted and then
    failed (a rejected action, a refused, truncated or transient action request) compacts the
    unchanged accepted history again: those rows sit above the rows that retry or fail."""
    by_call = kind in NESTED
    summary = kind == "harness_summary"
    # fmt: off
    return (
        # Accepted
        buffering(S.Accepted),
        answering(S.Accepted),
        T(ObservationArrived,     S.Accepted,            S.AwaitingReply, actions=("open_turn", "request_reply")),
        # CompactionScheduled, Compacting: with a compaction by a call of its own (entering Compacting asks for it)
        *when(by_call,
            buffering(S.CompactionScheduled),
            answering(S.CompactionScheduled),
            T(ObservationArrived, S.CompactionScheduled, S.Compacting,    actions=("open_turn",)),
            T(Done,               S.Compacting,          S.AwaitingReply, actions=("request_reply",)),
            T(ProviderFailed,     S.Compacting,          S.FailedClosed,  actions=("fail_closed",)),
            T(ContextOverflowed,  S.Compacting,          S.FailedClosed,  actions=("fail_closed",))),
        *when(summary,
            T(CompactionReplied,  S.Compacting,          S.FailedClosed,  actions=("fail_closed",))),
        # AwaitingReply
        reply_held(S.AwaitingReply, S.Provisional),
        *when(by_call,
            T(ProviderFailed,     S.AwaitingReply,       S.Compacting,
              guards=("is_retryable_at_once", "has_retries_left", "compacted_this_turn"), actions=("spend_retry",))),
        *provider_failures(S.AwaitingReply, backing_off=S.BackingOff, failed=S.FailedClosed),
        *when(summary,
            T(ContextOverflowed,  S.AwaitingReply,       S.Compacting,
              guards=("can_summarize_overflow",), actions=("take_overflow_lane",))),
        T(ContextOverflowed,      S.AwaitingReply,       S.FailedClosed,  actions=("fail_closed",)),
        # BackingOff
        *when(by_call,
            T(BackoffElapsed,     S.BackingOff,          S.Compacting,    guards=("compacted_this_turn",))),
        backoff_elapsed(S.BackingOff, S.AwaitingReply),
        # Provisional
        *when(by_call,
            T(ActionAccepted,     S.Provisional,         S.CompactionScheduled, guards=("is_compaction_due",),
              actions=COMMIT)),
        T(ActionAccepted,         S.Provisional,         S.Accepted,      actions=COMMIT),
        *when(by_call,
            T(ActionRejected,     S.Provisional,         S.Compacting,
              guards=("has_retries_left", "compacted_this_turn"), actions=("discard_provisional", "spend_retry"))),
        *action_rejected(S.Provisional, S.AwaitingReply, S.FailedClosed),
    )
    # fmt: on


def assemble(kind: Kind) -> MachineSpec:
    nested: dict[enum.Enum, MachineSpec] = {S.Compacting: NESTED[kind]} if kind in NESTED else {}
    omitted = frozenset() if nested else frozenset({S.CompactionScheduled, S.Compacting})
    return turn_spec(STRATEGY, State, transitions(kind), nested=nested, omitted=omitted)


SPECS: dict[Kind, MachineSpec] = {kind: assemble(kind) for kind in KINDS}


class ContinuousConversation(compaction_call.CompactionCall, harness_summary.HarnessSummarizing):
    """The model object the continuous_conversation table drives; the nested tables' guards and
    actions come from their own modules."""

    strategy = STRATEGY
    overflow_failure = "context overflow: opaque turns cannot be dropped, and no compaction made room"

    def __init__(self, state: RuntimeState, settings: StrategySettings, transcript: Transcript) -> None:
        super().__init__(state, settings, transcript)
        self.compaction = settings.compaction
        self.max_context_length = settings.max_context_length
        self.max_output_tokens = settings.max_output_tokens
        self.compacted: HeldCompaction | None = None
        self.summary_pass: SummaryPass | None = None
        self.overflow_recoveries = 0
        # The latest action request sent: a summary's fork shares its prefix. A machine started on an
        # accepted state (a resume) takes it to be one that carried that history whole, as the last
        # action request did (an accepted turn's request carries the history it committed on).
        self.latest_request: ModelRequest | None = (
            ModelRequest(self.system_prompt, tuple(state.items), tools=self.tools) if state.turns else None
        )

    # Guards.

    def is_compaction_due(self, event: ActionAccepted) -> bool:
        """Rule 5: the action being accepted reached the trigger with its completed context, its
        reported input plus output tokens (the committed items' estimate if it reported none)."""
        if not isinstance(self.compaction, NativeByCall | HarnessSummary):
            return False
        # Once its calls are answered this turn is unread and no compaction takes it: with no turn
        # before it (nor one compacted this turn) there would be nothing to compact.
        if self._provisional.tool_calls and not self.accepted.turns and self.compacted is None:
            return False
        return self._completed_context() >= self.compaction.trigger_tokens

    def compacted_this_turn(self, event: object) -> bool:
        return self.compacted is not None

    def can_summarize_overflow(self, event: ContextOverflowed) -> bool:
        """Rule 6: once per turn, and only with settled accepted turns to summarize."""
        return self.compacted is None and self.accepted.settled_turns > 0

    # Actions.

    def open_turn(self, event: ObservationArrived) -> None:
        super().open_turn(event)
        self.compacted = self.summary_pass = None
        self.overflow_recoveries = 0

    def request_reply(self, event: object) -> None:
        asked = self.ask()
        self.latest_request = asked.request
        self.emit(asked)

    def take_overflow_lane(self, event: ContextOverflowed) -> None:
        """Rule 6: the summary Compacting asks for as it is entered is the overflow lane's."""
        self.summary_pass = first_pass(
            "action_overflow", self.accepted, self.latest_request, self._summary_settings.fork
        )

    def report_summary(self, event: ActionAccepted) -> None:
        if self.compacted is not None and self.compacted.report is not None:
            self.emit(self.compacted.report)

    def commit_provisional(self, event: ActionAccepted) -> None:
        """The turn's items after the accepted history, or after its compaction, which commits with it."""
        if self.compacted is None:
            items, spans = self.accepted.items, list(self.accepted.turns)
        else:
            items, spans = list(self.compacted.items), list(self.compacted.spans)
        turn_items = [*self._turn.opening, *self.transcript.reply_items(self._provisional)]
        spans.append(TurnSpan(start=len(items), end=len(items) + len(turn_items)))
        self.accepted = self.accepted.replace(
            payload={"items": items + turn_items},
            turns=spans,
            pending=(),
            unanswered=self._unanswered_calls(),
            unread_turn=False,
            completed_context_tokens=self._reported_context(),
        )
        self.turn = self.compacted = self.summary_pass = None

    def keep_from_latest_compaction(self, event: ActionAccepted) -> None:
        """Rule 5: a compaction item that the accepted reply carried (inline) replaces everything before
        it, and what is kept is one turn. A compaction by a call is a window of its own (xAI's keeps the
        user messages before its compaction item), committed exactly as the action request was built on
        it, so only the turn just committed is searched."""
        items = self.accepted.items
        turn_start = self.accepted.turns[-1].start
        found = self.transcript.latest_compaction(items[turn_start:])
        if found is None or turn_start + found == 0:  # no inline compaction, or nothing before it
            return
        kept = items[turn_start + found :]
        self.accepted = self.accepted.replace(payload={"items": kept}, turns=[TurnSpan(start=0, end=len(kept))])

    def ask(self) -> CallProvider:
        if self.compacted is None:
            return self.projected(self.accepted.items, list(self.accepted.turns), self._turn.opening)
        return self.projected(self.compacted.items, self.compacted.spans, self._turn.opening)

    def _reported_context(self) -> int:
        usage = self._provisional.usage
        return usage.input_tokens + usage.output_tokens

    def _completed_context(self) -> int:
        """The held reply's completed context as reported, or the estimate of what it would commit."""
        reported = self._reported_context()
        if reported:
            return reported
        history = self.accepted.items if self.compacted is None else self.compacted.items
        committed = [*history, *self._turn.opening, *self.transcript.reply_items(self._provisional)]
        return self.transcript.estimate_tokens(committed, self.system_prompt)


DEFINITION = turn_strategy(SPECS, ContinuousConversation, {"items": []})
start = DEFINITION.start
