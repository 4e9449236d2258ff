"""The session API: the caller's verdict decides what commits, a turn that cannot go on fails closed
with its reason and usage, and leaving the session closes what it opened."""

from __future__ import annotations

import json
import socket
from urllib.parse import urlsplit

import pytest

from turnstate import DEFAULT_PROFILE, FailedClosed, RuntimeState, Session, load_profile
from turnstate.environments import make_environment

from .test_run import with_changes

PROFILE = load_profile(DEFAULT_PROFILE)
GAME = make_environment("beacon_grid", 1)


def refusals(*at: int) -> dict:
    return {"local": {"faults": [{"at": ordinal, "kind": "refusal"} for ordinal in at]}}


def test_a_rejected_reply_commits_nothing_and_the_next_one_is_asked_from_the_unchanged_state(clock):
    with Session(PROFILE, actions=GAME.actions, sleep=clock.sleep) as session:
        before = session.accepted_state.to_json()
        first = session.observe(GAME.reset().text)
        assert first.action in GAME.actions and first.attempt == 1
        second = session.reject("I want another")
        assert session.accepted_state.to_json() == before  # nothing of the rejected reply
        assert second.attempt == 2 and second.action in GAME.actions
        session.accept(second.action)
        assert session.accepted_actions == 1
        assert session.accepted_state.to_json() != before
        assert RuntimeState.from_json(session.accepted_state.to_json()) == session.accepted_state


def test_the_caller_may_accept_an_action_of_its_own_choosing(clock):
    with Session(PROFILE, actions=GAME.actions, sleep=clock.sleep) as session:
        session.observe(GAME.reset().text)
        session.accept("ACTION6")
        result = session.result()
        assert result.accepted_actions == 1 and result.failed_attempts == 0
        assert session.accepted_state.turns  # the reply committed, under the caller's action


def test_a_turn_without_retries_left_fails_closed_with_its_reason_and_usage(clock):
    profile = with_changes(PROFILE, client=refusals(1, 2, 3, 4, 5, 6, 7, 8))
    with Session(profile, actions=GAME.actions, sleep=clock.sleep) as session:
        with pytest.raises(FailedClosed) as failed:
            session.observe(GAME.reset().text)
        assert "retries exhausted" in failed.value.reason
        assert failed.value.usage == session.ledger.unattributed
        assert session.accepted_actions == 0 and session.accepted_state.item_count == 0


def test_the_held_turn_must_be_judged_before_the_next_observation():
    with Session(PROFILE, actions=GAME.actions) as session:
        with pytest.raises(RuntimeError, match="no reply is held"):
            session.accept("ACTION1")
        session.observe(GAME.reset().text)
        with pytest.raises(RuntimeError, match="a turn is open"):
            session.observe("another frame")
        with pytest.raises(RuntimeError, match="a turn is open"):
            session.buffer("a frame without a call")


def test_a_session_writes_artifacts_only_when_asked_and_records_how_it_ended(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with Session(PROFILE, actions=GAME.actions) as session:
        session.accept(session.observe(GAME.reset().text).action)
    assert list(tmp_path.iterdir()) == [] and session.run_dir is None
    with Session(PROFILE, actions=GAME.actions, out_dir=tmp_path / "runs") as session:
        session.accept(session.observe(GAME.reset().text).action)
    meta = json.loads((session.run_dir / "run_meta.json").read_text())
    assert meta["outcome"] == "finished" and meta["accepted_actions"] == 1
    assert (session.run_dir / "step_000001.json").is_file()


def test_an_exception_in_the_callers_loop_is_recorded_and_still_closes_the_session(tmp_path):
    with pytest.raises(ZeroDivisionError):
        with Session(PROFILE, actions=GAME.actions, out_dir=tmp_path) as session:
            session.observe(GAME.reset().text)
            raise ZeroDivisionError("a bug in the caller's loop")
    meta = json.loads((session.run_dir / "run_meta.json").read_text())
    assert (meta["outcome"], meta["failure"]) == ("crashed", "ZeroDivisionError")


def test_leaving_the_session_stops_the_embedded_local_provider():
    with Session(PROFILE, actions=GAME.actions) as session:
        port = urlsplit(session.endpoint.base_url).port
        socket.create_connection(("127.0.0.1", port), timeout=2).close()  # serving while open
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
