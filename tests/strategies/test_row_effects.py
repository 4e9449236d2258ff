"""What particular rows do, beyond the state they lead to: each test here was written against a
one-line change to the code that left the rest of the suite green (named in its docstring)."""

from __future__ import annotations

from dataclasses import replace

from turnstate.adapters.contract import ErrorKind
from turnstate.strategies.events import CallCompaction, CallProvider, CallSummary, FailClosed, ObservationArrived
from turnstate.strategies.summary import SUMMARIZER_SYSTEM, bridge_text

from .rows import check_row
from .test_continuous_conversation import COMPACTION_BACKING_OFF, start_compacting_by_call
from .test_harness_summary import (
    ITEMS,
    OBSERVE,
    OVERFLOW,
    SUMMARIZING,
    SUMMARY_ASKED,
    SUMMARY_BACKING_OFF,
    UNSCHEDULED,
    failure,
    played,
    summarized,
)


def test_an_action_overflow_without_a_scheduled_summary_summarizes_the_accepted_turns():
    check_row(played(2, UNSCHEDULED), [OBSERVE], OVERFLOW, SUMMARY_ASKED, [CallSummary])


def test_a_forked_summary_that_overflows_is_asked_again_in_the_independent_form():
    """Against: SummaryPass.shorter() keeping the fork."""
    machine = played(3)
    (forked,) = machine.fire(OBSERVE)
    assert forked.summary_pass.fork
    (shorter,) = machine.fire(OVERFLOW)
    assert not shorter.summary_pass.fork and shorter.request.system == SUMMARIZER_SYSTEM
    assert shorter.summary_pass.summarized_turns < forked.summary_pass.summarized_turns


def test_the_action_request_after_an_overflow_recovery_opens_with_the_bridge_then_the_kept_turns():
    """Against: the action request built on the accepted items instead of the recovered ones."""
    machine = played(3)
    accepted = machine.model.accepted
    machine.fire(OBSERVE)
    (shorter,) = machine.fire(OVERFLOW)
    (action,) = machine.fire(summarized("NOTES: level 1 beacon C"))
    assert isinstance(action, CallProvider)
    kept_from = accepted.turns[shorter.summary_pass.summarized_turns].start
    assert list(action.request.items) == [
        *ITEMS.user_items([bridge_text("NOTES: level 1 beacon C")]),
        *accepted.items[kept_from:],  # the turns left out of the summary, verbatim
        *ITEMS.user_items(["next"]),
    ]


def test_a_bridge_that_fits_alone_but_not_with_the_turns_inputs_fails_closed():
    """Against: the continuation's fit checked without the turn's inputs."""
    summary = "NOTES: level 1 beacon C"
    bridge = ITEMS.estimate_tokens(ITEMS.user_items([bridge_text(summary)]), "Play.")
    settings = replace(SUMMARIZING, max_context_length=bridge + SUMMARIZING.max_output_tokens + 10)
    machine = played(2, settings)
    machine.fire(ObservationArrived("x" * 200))  # 54 tokens of input: more than the 10 left
    check_row(machine, [], summarized(summary), "FailedClosed", [FailClosed])


def test_a_transient_failure_in_overflow_recovery_spends_one_of_the_turns_retries():
    """Against: harness_summary's BackingOff row without spend_retry."""
    machine = played(7)
    machine.fire(OBSERVE)
    machine.fire(OVERFLOW)
    used = machine.model.turn.retries.used
    machine.fire(failure(ErrorKind.TRANSIENT))
    assert machine.path == SUMMARY_BACKING_OFF and machine.model.turn.retries.used == used + 1


def test_a_transient_compaction_failure_spends_one_of_the_turns_retries():
    """Against: compaction_call's BackingOff row without spend_retry (caught only end to end before)."""
    machine = start_compacting_by_call()
    (call,) = machine.fire(ObservationArrived("f2"))
    assert isinstance(call, CallCompaction) and machine.model.turn.retries.used == 0
    machine.fire(failure(ErrorKind.TRANSIENT))
    assert machine.path == COMPACTION_BACKING_OFF and machine.model.turn.retries.used == 1
