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
        ({"turns": [{"start": -1, "end": 2}]}, "turns.0.start"),
        ({"turns": [{"start": 0, "end": 1, "length": 1}]}, "turns.0.length"),
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


def test_a_replace_checks_only_what_differs_from_the_state_it_replaces():
    # A state built without validation holds an element the check would refuse: handed on, it is not
    # checked again; a new element, a new key or a new value beside it is.
    held = {"opaque": object()}
    state = RuntimeState.model_construct(adapter_id="a", strategy="s", payload={"items": [held]}, turns=(), pending=())
    assert state.with_pending("GAME_OVER").pending == ("GAME_OVER",)
    extended = state.replace(payload={"items": [held, {"text": "new"}]}, turns=[TurnSpan(start=1, end=2)])
    assert extended.turns == (TurnSpan(start=1, end=2),)
    for payload in ({"items": [held, {"when": object()}]}, {"items": [held], "new": {1j}}, {"items": held}):
        with pytest.raises(ValueError, match="not JSON-serializable"):
            state.replace(payload=payload)


def test_spans_added_after_kept_ones_are_checked_against_them():
    state = make(turns=[TurnSpan(start=0, end=2)])
    with pytest.raises(ValueError, match="overlap or are out of order"):
        state.replace(turns=[*state.turns, TurnSpan(start=1, end=3)])
    with pytest.raises(ValueError, match="runs past the 3 items"):
        state.replace(turns=[*state.turns, TurnSpan(start=2, end=4)])
    assert state.replace(turns=[*state.turns, TurnSpan(start=2, end=3)]).turns[-1] == TurnSpan(start=2, end=3)


def test_an_element_equal_to_a_held_one_but_not_it_is_checked_again():
    from decimal import Decimal

    held = {"count": 1}
    state = RuntimeState(adapter_id="a", strategy="s", payload={"items": [held]})
    with pytest.raises(ValueError, match="not JSON-serializable"):
        state.replace(payload={"items": [{"count": Decimal(1)}, {"text": "new"}]})  # == held, yet not JSON
