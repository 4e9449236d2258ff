"""The seeds' rules for harness summaries that live in the strategy machines (issue 30), each a test,
driven by events alone: newer input wins over an installed summary, and `fork: false` keeps every
summary request in the independent form."""

from __future__ import annotations

from dataclasses import replace

import pytest

from turnstate.strategies.events import CallProvider, CallSummary, InputBuffered
from turnstate.strategies.summary import SUMMARIZER_SYSTEM, SUMMARY_INSTRUCTION, bridge_text

from .test_harness_summary import ITEMS, OBSERVE, OVERFLOW, SUMMARIZING, UNSCHEDULED, played, summarized

NEWER_WINS = "where it conflicts with a newer message, the newer message is right"
SUMMARY = "NOTES: level 1 beacon C"
BUFFERED = ("GAME_OVER", "RESET: level 1")


def installed(lane: str) -> CallProvider:
    """The action request sent on a freshly installed summary of two accepted turns, on the `lane`
    that made it, with two inputs buffered before the turn's observation ("next")."""
    machine = played(2, SUMMARIZING if lane == "trigger" else UNSCHEDULED)
    for text in BUFFERED:
        machine.fire(InputBuffered(text))
    (asked,) = machine.fire(OBSERVE)
    if lane == "action_overflow":
        assert isinstance(asked, CallProvider)  # under the trigger: the action request goes first, and overflows
        (asked,) = machine.fire(OVERFLOW)
    assert isinstance(asked, CallSummary) and asked.summary_pass.lane == lane
    assert "GAME_OVER" not in repr(asked.request) and "next" not in repr(asked.request)  # held aside
    (action_request,) = machine.fire(summarized(SUMMARY))
    assert isinstance(action_request, CallProvider)
    return action_request


@pytest.mark.parametrize("lane", ["trigger", "action_overflow"])
def test_every_pending_observation_follows_the_installed_summary_unchanged_and_in_order(lane):
    items = list(installed(lane).request.items)
    assert items == [*ITEMS.user_items([bridge_text(SUMMARY)]), *ITEMS.user_items([*BUFFERED, "next"])]


@pytest.mark.parametrize("lane", ["trigger", "action_overflow"])
def test_the_installed_summary_tells_the_model_that_a_newer_message_wins_over_it(lane):
    (bridge, *_) = installed(lane).request.items
    text = bridge["text"]
    assert NEWER_WINS in text and text.endswith(SUMMARY)
    assert text.index(NEWER_WINS) < text.index(SUMMARY)  # the rule frames the summary it applies to


@pytest.mark.parametrize(("fork", "form"), [(True, "fork"), (False, "independent")])
def test_with_fork_off_the_trigger_lanes_summary_is_independent_though_it_could_fork(fork, form):
    """The latest action request carried the accepted history whole, so only the setting decides."""
    settings = replace(SUMMARIZING, compaction=replace(SUMMARIZING.compaction, fork=fork))
    machine = played(2, settings)
    latest = machine.model.latest_request
    assert list(latest.items) == machine.model.accepted.items[: len(latest.items)]  # a fork would be allowed
    (call,) = machine.fire(OBSERVE)
    assert isinstance(call, CallSummary) and call.summary_pass.fork is fork
    if form == "fork":
        assert call.request.system == latest.system and call.request.items[: len(latest.items)] == latest.items
    else:
        (message,) = call.request.items  # the summarized turns as readable text, under the summarizer
        assert call.request.system == SUMMARIZER_SYSTEM and call.request.tools == ()
        assert "f1" in message["text"] and SUMMARY_INSTRUCTION in message["text"]
        assert "sealed(" not in message["text"]  # no opaque reasoning reaches the independent form
