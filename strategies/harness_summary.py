"""harness_summary: the nested machine of a compaction the harness writes itself, with the model's
summary installed as one continuation message in a fresh provider state (strategies/summary.py), and
the guards and actions its rows name (`HarnessSummarizing`, mixed into the strategy that nests it).

Rules
1. Entering the machine asks for the summary of the turn's pass (the trigger lane's, unless the
   parent chose another lane). A summary request holds settled accepted turns only: the turn's
   fresh and buffered inputs wait, and come after the rebuilt state unchanged, as does an unread
   last turn (tool results no reply has read: strategies/state.py).
2. An empty summary is never installed: it is asked for again at once, as a refusal is; a transient
   failure waits first (strategies/retry.py). A summary cut off at its output cap is never asked for
   again as it was (the same request would be cut the same way): the retry asks for a shorter one,
   within half the budget the cut request named (`ask_shorter_summary`, strategies/summary.py), and
   goes on as a recovery. All from the turn's one retry budget, from the unchanged accepted state,
   and every attempt's usage is billed.
3. Overflow recovery: a summary request the provider could not hold is asked again for half as many
   of the oldest turns (cut at accepted-turn boundaries); the turns left out are kept verbatim after
   the summary. Halving bounds a forced deep recovery to floor(log2(turns)) + 1 requests. A refused
   request or an empty summary in recovery is asked again at once as it stands (the pass keeps its
   turns and budget), which is what `Summarizing` means. The rows out of Summarizing and
   OverflowRecovery are the same; the two states tell a reviewer (and the transition log) whether
   the request with the provider is a recovery.
4. A usable summary is held as the rebuilt state (Summarized, final): the parent goes on to the
   action request. What the machine leaves unhandled fails the turn closed, as the parent says
   (continuous_conversation): nothing shorter than one turn to summarize (the protected boundary),
   an oversized continuation, an empty summary without retries left, or a failure without them.
"""

from __future__ import annotations

import enum

from turnstate.adapters.contract import ErrorKind, ModelRequest
from turnstate.machine.engine import MachineSpec, Transition
from turnstate.strategies.compaction import Compaction, HarnessSummary, HeldCompaction
from turnstate.strategies.events import (
    BackoffElapsed,
    CallSummary,
    CompactionReplied,
    ContextOverflowed,
    ProviderFailed,
    ReportSummary,
)
from turnstate.strategies.summary import (
    SummaryPass,
    bridge_text,
    first_pass,
    rebuilt,
    summarized_items,
    summary_request,
)
from turnstate.strategies.turn import TurnTaking

NAME = "harness_summary"


class State(enum.Enum):
    Summarizing = "a summary of the oldest accepted turns is with the provider, as the turn's pass stands"
    OverflowRecovery = (
        "the provider could not hold the summary request (one for fewer turns is with it) or its answer (one "
        "asked to be shorter is)"
    )
    BackingOff = "a transient failure; waiting before asking again for the summary"
    Summarized = "a usable summary is held as the rebuilt state; it commits only with this turn's accepted action"


T = Transition
S = State
AWAITING = (S.Summarizing, S.OverflowRecovery)  # a summary request is with the provider

# A cut summary (rule 2) is a failure that is also retryable at once: its row comes before the refusal's.
# fmt: off
TRANSITIONS = (
    # event              source    dest                guards / actions
    T(CompactionReplied, AWAITING, S.Summarized,       guards=("is_usable_summary",), actions=("hold_summary",)),
    T(CompactionReplied, AWAITING, S.Summarizing,      guards=("is_empty_summary", "has_retries_left"),
                         actions=("spend_retry", "request_summary")),
    T(ProviderFailed,    AWAITING, S.BackingOff,       guards=("is_transient", "has_retries_left", "can_wait"),
                         actions=("spend_retry", "wait_before_retry")),
    T(ProviderFailed,    AWAITING, S.OverflowRecovery, guards=("is_truncated", "has_retries_left"),
                         actions=("spend_retry", "ask_shorter_summary", "request_summary")),
    T(ProviderFailed,    AWAITING, S.Summarizing,      guards=("is_retryable_at_once", "has_retries_left"),
                         actions=("spend_retry", "request_summary")),
    T(ContextOverflowed, AWAITING, S.OverflowRecovery, guards=("has_shorter_candidate",),
                         actions=("shorten_candidate", "request_summary")),

    T(BackoffElapsed,    S.BackingOff, S.Summarizing,  actions=("request_summary",)),
)
# fmt: on

SPEC = MachineSpec(
    name=NAME,
    states=State,
    initial=State.Summarizing,
    final=frozenset({State.Summarized}),
    transitions=TRANSITIONS,
    entry=("request_summary",),
)


class HarnessSummarizing(TurnTaking):
    """The guards and actions of the harness_summary table."""

    compaction: Compaction
    compacted: HeldCompaction | None
    summary_pass: SummaryPass | None  # the open turn's summary request, while it summarizes
    overflow_recoveries: int
    latest_request: ModelRequest | None  # the latest action request sent: a fork's prefix
    max_context_length: int
    max_output_tokens: int

    # Guards.

    def is_truncated(self, event: ProviderFailed) -> bool:
        return event.error.kind is ErrorKind.TRUNCATED

    def is_empty_summary(self, event: CompactionReplied) -> bool:
        return not event.response.text.strip()

    def is_usable_summary(self, event: CompactionReplied) -> bool:
        """Not empty, and a continuation that leaves room for this turn's request and its output."""
        if self.is_empty_summary(event):
            return False
        items, _ = rebuilt(self._summary_pass, self.accepted, self.transcript, event.response.text)
        request = self.transcript.estimate_tokens([*items, *self._turn.opening], self.system_prompt)
        return request + self.max_output_tokens <= self.max_context_length

    def has_shorter_candidate(self, event: ContextOverflowed) -> bool:
        return self._summary_pass.shorter().summarized_turns >= 1

    # Actions.

    def request_summary(self, event: object) -> None:
        """Rule 1: the summary request of the turn's pass (the trigger lane's, unless a lane set one)."""
        summary = self._summary_settings
        self.compacted = None
        if self.summary_pass is None:
            self.summary_pass = first_pass("trigger", self.accepted, self.latest_request, summary.fork)
        request = summary_request(
            self.summary_pass,
            self.accepted,
            self.transcript,
            self.latest_request,
            summary.max_output_tokens,
            self.system_prompt,
        )
        count = summarized_items(self.accepted.turns, self.summary_pass.summarized_turns)
        self.emit(CallSummary(request, self.summary_pass, count))

    def ask_shorter_summary(self, event: ProviderFailed) -> None:
        """Rule 2: a summary cut off at its cap is asked for within half the budget."""
        self.summary_pass = self._summary_pass.after_cut()

    def shorten_candidate(self, event: ContextOverflowed) -> None:
        """Rule 3: a request the provider could not hold is asked again for half as many turns."""
        self.summary_pass = self._summary_pass.shorter()
        self.overflow_recoveries += 1

    def hold_summary(self, event: CompactionReplied) -> None:
        summary_pass, summary = self._summary_pass, event.response.text
        items, spans = rebuilt(summary_pass, self.accepted, self.transcript, summary)
        scheduled_at = self.accepted.completed_context_tokens if summary_pass.lane == "trigger" else None
        report = ReportSummary(
            summary.strip(),
            bridge_text(summary),
            summary_pass,
            scheduled_at,
            items_before=len(self.accepted.items),
            items_after=len(items),
            overflow_recoveries=self.overflow_recoveries,
        )
        self.compacted = HeldCompaction("summary", items, spans, report)

    @property
    def _summary_settings(self) -> HarnessSummary:
        if not isinstance(self.compaction, HarnessSummary):
            raise RuntimeError(f"{self.strategy}: compaction {self.compaction.kind} writes no summary")
        return self.compaction

    @property
    def _summary_pass(self) -> SummaryPass:
        if self.summary_pass is None:
            raise RuntimeError(f"{self.strategy}: no summary is being asked for")
        return self.summary_pass
