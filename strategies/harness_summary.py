"""harness_summary: the nested machine of a compaction the harness writes itself, with the model's
summary installed as one continuation message in a fresh provider state (strategies/summary.py).

Rules
1. A summary request holds accepted turns only: the turn's fresh and buffered inputs wait, and come
   after the rebuilt state unchanged.
2. An empty summary is never installed: it is asked for again at once, as a refusal is; a transient
   failure waits first (strategies/retry.py). A summary cut off at its output cap is never asked for
   again as it was (the same request would be cut the same way): the retry asks for a shorter one,
   within half the budget the cut request named (`ask_shorter_summary`, strategies/summary.py), and
   goes on as a recovery. All from the turn's one retry budget, from the unchanged accepted state,
   and every attempt's usage is billed.
3. Overflow recovery: a summary request the provider could not hold is asked again for half as many
   of the oldest turns (cut at accepted-turn boundaries); the turns left out are kept verbatim after
   the summary. Halving bounds a forced deep recovery to floor(log2(turns)) + 1 requests. A refused
   request in recovery is asked again at once as it stands (the pass keeps its turns and budget),
   which is what `Requesting` means.
4. Leaving is the parent's to say (continuous_conversation): a usable summary goes on to the action
   request on the rebuilt state; nothing shorter than one turn to summarize (the protected
   boundary), an oversized continuation, an empty summary without retries left or a failure without
   them fails the turn closed.
"""

from __future__ import annotations

import enum

from turnstate.machine.engine import MachineSpec, Transition
from turnstate.strategies.events import BackoffElapsed, CompactionReplied, ContextOverflowed, ProviderFailed

NAME = "harness_summary"


class State(enum.Enum):
    Requesting = "a summary of the oldest accepted turns is with the provider, as the turn's pass stands"
    BackingOff = "a transient failure; waiting before asking again for the summary"
    OverflowRecovery = (
        "the provider could not hold the summary request (one for fewer turns is with it) or its answer (one "
        "asked to be shorter is)"
    )


T = Transition
S = State

# fmt: off
TRANSITIONS = (
    # event              source              dest                guards / actions
    T(CompactionReplied, S.Requesting,       S.Requesting,       guards=("is_empty_summary", "has_retries_left"),
                         actions=("spend_retry", "request_summary")),
    T(CompactionReplied, S.OverflowRecovery, S.OverflowRecovery, guards=("is_empty_summary", "has_retries_left"),
                         actions=("spend_retry", "request_summary")),
    T(ProviderFailed,    S.Requesting,       S.BackingOff,       guards=("is_transient", "has_retries_left", "can_wait"),
                         actions=("spend_retry", "wait_before_retry")),
    T(ProviderFailed,    S.OverflowRecovery, S.BackingOff,       guards=("is_transient", "has_retries_left", "can_wait"),
                         actions=("spend_retry", "wait_before_retry")),
    T(ProviderFailed,    S.Requesting,       S.OverflowRecovery, guards=("is_truncated", "has_retries_left"),
                         actions=("spend_retry", "ask_shorter_summary", "request_summary")),
    T(ProviderFailed,    S.OverflowRecovery, S.OverflowRecovery, guards=("is_truncated", "has_retries_left"),
                         actions=("spend_retry", "ask_shorter_summary", "request_summary")),
    # After the rows of a cut summary, what is asked again at once as it stands is a refusal.
    T(ProviderFailed,    S.Requesting,       S.Requesting,       guards=("is_retryable_at_once", "has_retries_left"),
                         actions=("spend_retry", "request_summary")),
    T(ProviderFailed,    S.OverflowRecovery, S.Requesting,       guards=("is_retryable_at_once", "has_retries_left"),
                         actions=("spend_retry", "request_summary")),
    T(BackoffElapsed,    S.BackingOff,       S.Requesting,       actions=("request_summary",)),
    T(ContextOverflowed, S.Requesting,       S.OverflowRecovery, guards=("has_shorter_candidate",),
                         actions=("shorten_candidate", "request_summary")),
    T(ContextOverflowed, S.OverflowRecovery, S.OverflowRecovery, guards=("has_shorter_candidate",),
                         actions=("shorten_candidate", "request_summary")),
)
# fmt: on

SPEC = MachineSpec(name=NAME, states=State, initial=State.Requesting, final=frozenset(), transitions=TRANSITIONS)
