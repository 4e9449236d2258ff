"""compaction_call: the nested machine of a provider-native compaction that is a call of its own.

Rules
1. The compaction request holds only the accepted history: the turn's fresh and buffered inputs are
   not compacted; they follow the compacted history in the action request.
2. Its failures are retried as an action request's (strategies/retry.py), from the same budget: the
   compaction and the action form one provisional turn.
3. Leaving the machine is the parent's to say (continuous_conversation): a compaction reply goes on
   to the action request; a failure without retries left, or an overflow, fails the turn closed.
"""

from __future__ import annotations

import enum

from turnstate.machine.engine import MachineSpec, Transition
from turnstate.strategies.events import BackoffElapsed, ProviderFailed

NAME = "compaction_call"


class State(enum.Enum):
    Requesting = "the accepted history is with the provider to be compacted"
    BackingOff = "a transient failure; waiting before asking again for the compaction"


T = Transition
S = State

# fmt: off
TRANSITIONS = (
    # event           source        dest
    T(ProviderFailed, S.Requesting, S.BackingOff, guards=("is_transient", "has_retries_left", "can_wait"),
                      actions=("spend_retry", "wait_before_retry")),
    T(ProviderFailed, S.Requesting, S.Requesting, guards=("is_retryable_at_once", "has_retries_left"),
                      actions=("spend_retry", "request_compaction")),
    T(BackoffElapsed, S.BackingOff, S.Requesting, actions=("request_compaction",)),
)
# fmt: on

SPEC = MachineSpec(name=NAME, states=State, initial=State.Requesting, final=frozenset(), transitions=TRANSITIONS)
