"""The RuntimeState envelope: what the harness validates without knowing the payload."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from turnstate.strategies.state import RuntimeState, StateMismatch, TurnSpan

ITEMS = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]


def make(**changes) -> RuntimeState:
    fields = {"adapter_id": "openai.chat_completions.v1", "strategy": "manual_rolling", "payload": {"items": ITEMS}}
    return RuntimeState(**(fields | changes))


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"schema_version": 2}, "schema_version"),
        ({"adapter_id": ""}, "adapter_id"),
        ({"strategy": ""}, "strategy"),
        ({"payload": {"items": ITEMS, "when": object()}}, "not JSON-serializable"),
        ({"payload": {"ratio": float("nan")}}, "not JSON-serializable"),
        ({"turns": [TurnSpan(start=0, end=2), TurnSpan(start=1, end=3)]}, "overlap or are out of order"),
        ({"turns": [TurnSpan(start=2, end=3), TurnSpan(start=0, end=2)]}, "overlap or are out of order"),
        ({"turns": [TurnSpan(start=0, end=4)]}, "runs past the 3 items"),
        ({"turns": [{"start": 2, "end": 2}]}, "empty or reversed"),
        ({"unknown": 1}, "unknown"),
    ],
)
def test_an_invalid_envelope_is_rejected_naming_the_problem(changes, problem):
    with pytest.raises(ValidationError, match=problem):
        make(**changes)


def test_ordered_spans_with_gaps_are_valid_and_round_trip_through_json():
    state = make(turns=[TurnSpan(start=0, end=1), TurnSpan(start=2, end=3)], pending=("GAME_OVER",))
    assert RuntimeState.from_json(state.to_json()) == state


def test_validate_for_accepts_its_own_adapter_and_strategy_only():
    state = make()
    assert state.validate_for("openai.chat_completions.v1", "manual_rolling") is state
    with pytest.raises(StateMismatch, match="not adapter 'x' with strategy 'manual_rolling'"):
        state.validate_for("x", "manual_rolling")
    with pytest.raises(StateMismatch):
        state.validate_for("openai.chat_completions.v1", "previous_response_id")


def test_changes_make_a_new_validated_state_and_leave_the_old_one_intact():
    state = make()
    buffered = state.with_pending("GAME_OVER")
    assert buffered.pending == ("GAME_OVER",)
    assert state.pending == ()
    with pytest.raises(ValidationError):
        state.replace(turns=[TurnSpan(start=0, end=9)])
    with pytest.raises(ValidationError):
        state.adapter_id = "other"  # frozen


def test_a_replaced_payload_is_checked_again_and_a_kept_one_is_handed_on():
    state = RuntimeState(adapter_id="a", strategy="s", payload={"items": [{"text": "kept"}]})
    with pytest.raises(ValueError, match="not JSON-serializable"):
        state.replace(payload={"items": [object()]})
    buffered = state.with_pending("GAME_OVER")
    assert buffered.payload == state.payload and buffered.pending == ("GAME_OVER",)
    assert state.pending == ()  # the original is left as it was
