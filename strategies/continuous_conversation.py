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
5. Compaction. Inline native compaction (OpenAI) arrives inside an action reply as a compaction item
   (after the reply's message, standing for the whole conversation so far), and committing such a
   reply keeps only the latest compaction item the reply carried and everything after it, as one
   turn. A compaction by a call of its own, native (xAI, Anthropic: the nested compaction_call
   machine) or written by the harness from the model's summary (the nested harness_summary machine),
   is scheduled when an accepted action's completed context (its reported input plus output tokens)
   reaches the trigger: the next turn first compacts the accepted history alone, then sends the
   action request on the compacted history. The compaction and the action form one provisional turn,
   committed together only with an accepted action, and exactly as the action request was built on
   them (xAI's compacted window keeps user messages before its compaction item: they stay). Whatever
   fails after a compaction succeeded (a rejected action, a refused, truncated or transient action
   request) discards both, and the retry compacts the unchanged accepted history again; every call
   is billed to the turn. The first observation never compacts.
6. A context overflow fails closed: opaque turns cannot be dropped or rewritten from here. With
   harness summaries, an action request that overflows before a compaction was scheduled first
   summarizes the accepted history (the turn's inputs held aside) and is sent once more; a second
   overflow fails closed.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Literal

from turnstate.adapters.contract import ErrorKind, Item, ModelRequest, Transcript
from turnstate.machine.engine import Transition
from turnstate.strategies import compaction_call, harness_summary
from turnstate.strategies.compaction import ByCall, HarnessSummary, NativeByCall
from turnstate.strategies.events import (
    ActionAccepted,
    ActionRejected,
    BackoffElapsed,
    CallCompaction,
    CallProvider,
    CallSummary,
    CompactionReplied,
    ContextOverflowed,
    InputBuffered,
    ObservationArrived,
    ProviderFailed,
    ReportSummary,
)
from turnstate.strategies.state import RuntimeState, TurnSpan
from turnstate.strategies.strategy import StrategySettings
from turnstate.strategies.summary import (
    SummaryPass,
    bridge_text,
    first_pass,
    rebuilt,
    summarized_items,
    summary_request,
)
from turnstate.strategies.turn import TurnTaking, shared_rows, turn_spec, turn_strategy

STRATEGY = "continuous_conversation"


class State(enum.Enum):
    Accepted = "every accepted turn's native items; waiting for the next input"
    CompactionScheduled = "the last accepted action reached the compaction trigger; the next turn compacts first"
    AwaitingReply = "a request replaying every accepted item is with the provider"
    BackingOff = "a transient failure; waiting before asking again from the accepted items"
    Compacting = "a separate call compacts the accepted items; it commits only with this turn's action"
    Summarizing = "the model summarizes the accepted turns for a fresh state; it commits only with this turn's action"
    Provisional = "a reply is held with its native items; it commits only if it yields a valid action"
    FailedClosed = "the turn failed for good; the accepted items are kept"


T = Transition
S = State

COMPACTING = "Compacting_Requesting"  # the nested compaction_call machine's requesting state
SUMMARIZING = "Summarizing_Requesting"  # the nested harness_summary machine's states that await a reply
RECOVERING = "Summarizing_OverflowRecovery"
COMMIT = ("record_compaction", "commit_provisional", "keep_from_latest_compaction", "submit_action")

# continuous_conversation's own rows around the rows every turn-taking strategy shares
# (strategies/turn.py). A retry of a turn that compacted, whatever failed (a rejected action, a
# refused, truncated or transient action request), compacts the unchanged accepted history again,
# and an overflow with harness summaries summarizes once: those rows come before the shared ones,
# which retry or fail.
# fmt: off
TRANSITIONS = (
    # event               source                  dest
    T(ActionRejected,     S.Provisional,          S.Compacting,     guards=("has_retries_left", "compacted_by_call"),
                          actions=("discard_provisional", "spend_retry", "request_compaction")),
    T(ActionRejected,     S.Provisional,          S.Summarizing,    guards=("has_retries_left", "compacted_by_summary"),
                          actions=("discard_provisional", "spend_retry", "request_summary")),
    T(ProviderFailed,     S.AwaitingReply,        S.Compacting,     guards=("is_retryable_at_once", "has_retries_left", "compacted_by_call"),
                          actions=("spend_retry", "request_compaction")),
    T(ProviderFailed,     S.AwaitingReply,        S.Summarizing,    guards=("is_retryable_at_once", "has_retries_left", "compacted_by_summary"),
                          actions=("spend_retry", "request_summary")),
    T(BackoffElapsed,     S.BackingOff,           S.Compacting,     guards=("compacted_by_call",), actions=("request_compaction",)),
    T(BackoffElapsed,     S.BackingOff,           S.Summarizing,    guards=("compacted_by_summary",), actions=("request_summary",)),
    *shared_rows(S),
    T(ActionAccepted,     S.Provisional,          S.CompactionScheduled, guards=("is_compaction_due",), actions=COMMIT),
    T(ActionAccepted,     S.Provisional,          S.Accepted,       actions=COMMIT),
    T(ObservationArrived, S.Accepted,             S.AwaitingReply,  actions=("open_turn", "request_reply")),
    T(InputBuffered,      S.CompactionScheduled,  S.CompactionScheduled, actions=("buffer_input",)),
    T(ObservationArrived, S.CompactionScheduled,  S.Compacting,     guards=("compacts_by_call",),
                          actions=("open_turn", "request_compaction")),
    T(ObservationArrived, S.CompactionScheduled,  S.Summarizing,    actions=("open_turn", "request_summary")),
    T(CompactionReplied,  COMPACTING,             S.AwaitingReply,  actions=("hold_compaction", "request_reply")),
    T(ProviderFailed,     COMPACTING,             S.FailedClosed,   actions=("fail_closed",)),
    T(ContextOverflowed,  COMPACTING,             S.FailedClosed,   actions=("fail_closed",)),
    T(CompactionReplied,  SUMMARIZING,            S.FailedClosed,   guards=("is_unusable_summary",), actions=("fail_closed",)),
    T(CompactionReplied,  SUMMARIZING,            S.AwaitingReply,  actions=("hold_summary", "request_reply")),
    T(CompactionReplied,  RECOVERING,             S.FailedClosed,   guards=("is_unusable_summary",), actions=("fail_closed",)),
    T(CompactionReplied,  RECOVERING,             S.AwaitingReply,  actions=("hold_summary", "request_reply")),
    T(ProviderFailed,     SUMMARIZING,            S.FailedClosed,   actions=("fail_closed",)),
    T(ProviderFailed,     RECOVERING,             S.FailedClosed,   actions=("fail_closed",)),
    T(ContextOverflowed,  SUMMARIZING,            S.FailedClosed,   actions=("fail_closed",)),
    T(ContextOverflowed,  RECOVERING,             S.FailedClosed,   actions=("fail_closed",)),
    T(ContextOverflowed,  S.AwaitingReply,        S.Summarizing,    guards=("can_summarize_overflow",),
                          actions=("request_overflow_summary",)),
    T(ContextOverflowed,  S.AwaitingReply,        S.FailedClosed,   actions=("fail_closed",)),
)
# fmt: on

SPEC = turn_spec(
    STRATEGY,
    State,
    TRANSITIONS,
    nested={State.Compacting: compaction_call.SPEC, State.Summarizing: harness_summary.SPEC},
)


@dataclass(frozen=True)
class Compaction:
    """The open turn's provisional compaction of the accepted history; it commits with the turn's action."""

    by: Literal["call", "summary"]
    items: list[Item]
    spans: list[TurnSpan]
    record: ReportSummary | None = None  # a harness summary's, for the runner to write


class ContinuousConversation(TurnTaking):
    """The model object the continuous_conversation table drives."""

    strategy = STRATEGY
    overflow_failure = "context overflow: opaque turns cannot be dropped, and no compaction made room"

    def __init__(self, state: RuntimeState, settings: StrategySettings, transcript: Transcript) -> None:
        super().__init__(state, settings, transcript)
        self.compaction = settings.compaction
        self.max_context_length = settings.max_context_length
        self.max_output_tokens = settings.max_output_tokens
        self.compacted: Compaction | None = None
        self.summary_pass: SummaryPass | None = None  # the open turn's summary request, while it summarizes
        self.overflow_recoveries = 0
        self.latest_request: ModelRequest | None = None  # the latest action request sent: a fork's prefix

    # Guards.

    def is_compaction_due(self, event: ActionAccepted) -> bool:
        """Rule 5: the action being accepted reached the trigger with its completed context, its
        reported input plus output tokens (the committed items' estimate if it reported none)."""
        if not isinstance(self.compaction, NativeByCall | HarnessSummary):
            return False
        return self._completed_context() >= self.compaction.trigger_tokens

    def compacts_by_call(self, event: ObservationArrived) -> bool:
        return isinstance(self.compaction, NativeByCall)

    def compacted_by_call(self, event: object) -> bool:
        return self.compacted is not None and self.compacted.by == "call"

    def compacted_by_summary(self, event: object) -> bool:
        return self.compacted is not None and self.compacted.by == "summary"

    def is_truncated(self, event: ProviderFailed) -> bool:
        return event.error.kind is ErrorKind.TRUNCATED

    def is_empty_summary(self, event: CompactionReplied) -> bool:
        return not event.response.text.strip()

    def is_unusable_summary(self, event: CompactionReplied) -> bool:
        """An empty summary (no retry left for it), or a continuation that would not leave room for
        this turn's request and its output."""
        if self.is_empty_summary(event):
            return True
        items, _ = rebuilt(self._summary_pass, self.accepted, self.transcript, event.response.text)
        request = self.transcript.estimate_tokens([*items, *self._turn.opening], self.system_prompt)
        return request + self.max_output_tokens > self.max_context_length

    def has_shorter_candidate(self, event: ContextOverflowed) -> bool:
        return self._summary_pass.shorter().summarized_turns >= 1

    def can_summarize_overflow(self, event: ContextOverflowed) -> bool:
        """Rule 6: with harness summaries, once per turn, and only with accepted turns to summarize."""
        return isinstance(self.compaction, HarnessSummary) and self.compacted is None and bool(self.accepted.turns)

    # Actions.

    def open_turn(self, event: ObservationArrived) -> None:
        super().open_turn(event)
        self.compacted = self.summary_pass = None
        self.overflow_recoveries = 0

    def request_reply(self, event: object) -> None:
        self.latest_request = self.build_request()
        self.emit(CallProvider(self.latest_request))

    def request_compaction(self, event: object) -> None:
        """Rule 5: the accepted items alone, never the turn's fresh or buffered inputs, with the
        compaction's own output cap (where the provider's compaction call takes one)."""
        self.compacted = None
        request = ModelRequest(
            self.system_prompt, tuple(self.accepted.items), max_output_tokens=self._by_call.max_output_tokens
        )
        self.emit(CallCompaction(request))

    def hold_compaction(self, event: CompactionReplied) -> None:
        items = self.transcript.reply_items(event.response)
        self.compacted = Compaction("call", items, [TurnSpan(start=0, end=len(items))] if items else [])

    def request_summary(self, event: object) -> None:
        """The summary request of the turn's pass (the trigger lane's, unless a lane set one)."""
        self.compacted = None
        if self.summary_pass is None:
            self.summary_pass = first_pass("trigger", self.accepted, self.latest_request, self._by_call_fork)
        request = summary_request(
            self.summary_pass,
            self.accepted,
            self.transcript,
            self.latest_request,
            self._by_call.max_output_tokens,
            self.system_prompt,
        )
        count = summarized_items(self.accepted.turns, self.summary_pass.summarized_turns)
        self.emit(CallSummary(request, self.summary_pass, count))

    def request_overflow_summary(self, event: ContextOverflowed) -> None:
        self.summary_pass = first_pass("action_overflow", self.accepted, self.latest_request, self._by_call_fork)
        self.request_summary(event)

    def ask_shorter_summary(self, event: ProviderFailed) -> None:
        """harness_summary rule 2: a summary cut off at its cap is asked for within half the budget."""
        self.summary_pass = self._summary_pass.after_cut()

    def shorten_candidate(self, event: ContextOverflowed) -> None:
        self.summary_pass = self._summary_pass.shorter()
        self.overflow_recoveries += 1

    def hold_summary(self, event: CompactionReplied) -> None:
        summary_pass, summary = self._summary_pass, event.response.text
        items, spans = rebuilt(summary_pass, self.accepted, self.transcript, summary)
        trigger = self.accepted.completed_context_tokens if summary_pass.lane == "trigger" else None
        record = ReportSummary(
            summary.strip(),
            bridge_text(summary),
            summary_pass,
            trigger,
            items_before=len(self.accepted.items),
            items_after=len(items),
            overflow_recoveries=self.overflow_recoveries,
        )
        self.compacted = Compaction("summary", items, spans, record)

    def record_compaction(self, event: ActionAccepted) -> None:
        if self.compacted is not None and self.compacted.record is not None:
            self.emit(self.compacted.record)

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

    def build_request(self) -> ModelRequest:
        history: list[Item] = self.accepted.items if self.compacted is None else self.compacted.items
        return ModelRequest(system=self.system_prompt, items=(*history, *self._turn.opening))

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

    @property
    def _by_call(self) -> ByCall:
        if not isinstance(self.compaction, NativeByCall | HarnessSummary):
            raise RuntimeError(f"{self.strategy}: compaction {self.compaction.kind} is not a call of its own")
        return self.compaction

    @property
    def _by_call_fork(self) -> bool:
        return isinstance(self.compaction, HarnessSummary) and self.compaction.fork

    @property
    def _summary_pass(self) -> SummaryPass:
        if self.summary_pass is None:
            raise RuntimeError(f"{self.strategy}: no summary is being asked for")
        return self.summary_pass


DEFINITION = turn_strategy(
    SPEC, ContinuousConversation, {"items": []}, compaction=("none", "native", "harness_summary")
)
start = DEFINITION.start
