"""The session with tools, through the real SDK and the local provider: a reply that calls read-only
tools is a tool round whose calls and results commit in one turn; results must answer every call in
order before the next request; a rejected reply's calls never commit; tool rounds are bounded; and in
tools mode the model acts by calling an action tool, whose result carries the next frame."""

from __future__ import annotations

import json

import pytest

from turnstate import DEFAULT_PROFILE, Session, load_profile
from turnstate.adapters.contract import ToolResult, ToolSpec
from turnstate.durable.events import check_events, read_events
from turnstate.durable.layout import EVENTS
from turnstate.durable.tool_results import READ_TOOL_RESULT_SPEC
from turnstate.environments import make_environment
from turnstate.strategies.offload import ref_of

from .test_run import with_changes

PROFILE = load_profile(DEFAULT_PROFILE)
GAME = make_environment("beacon_grid", 1)
LOOKUP = ToolSpec(
    "lookup",
    "Look a page up.",
    {"type": "object", "properties": {"page": {"type": "integer"}}, "required": ["page"]},
)
ASK = 'call lookup with {"page": 1}'  # the local model's convention: it calls what the input asks for


def answer(turn, text: str = "page one: nothing about doors") -> list[ToolResult]:
    return [ToolResult(call.id, call.name, text) for call in turn.tool_calls]


def test_a_tool_round_commits_its_calls_and_their_results_join_its_turn(tmp_path, clock):
    with Session(PROFILE, actions=GAME.actions, tools=(LOOKUP,), out_dir=tmp_path, sleep=clock.sleep) as session:
        turn = session.observe(f"{GAME.reset().text}\n\n{ASK}")
        assert turn.is_tool_round and [(call.name, dict(call.arguments)) for call in turn.tool_calls] == [
            ("lookup", {"page": 1})
        ]
        session.accept()
        assert session.accepted_actions == 0 and session.accepted_state.unanswered == (turn.tool_calls[0].id,)
        acted = session.observe(results=answer(turn, "page one says: the beacon is far"))
        assert acted.action in GAME.actions and not acted.tool_calls
        session.accept()
        state = session.accepted_state
        first = state.turns[0]
        readable = session.adapter.transcript.readable(state.items[first.start : first.end])
        assert "page one says: the beacon is far" in readable[-1]["content"]  # the result ends the calls' turn
        assert len(state.turns) == 2 and not state.unanswered
    steps = sorted(session.run_dir.glob("step_*.json"))  # written by the time the session is left
    records = [json.loads(path.read_text()) for path in steps]
    assert [record["action"] for record in records] == [None, acted.action]
    assert records[0]["tool_calls"] == [{"id": turn.tool_calls[0].id, "name": "lookup", "arguments": '{"page":1}'}]
    assert "tool_calls" not in records[1]


def test_results_must_answer_every_call_in_order_before_the_next_observation(clock):
    with Session(PROFILE, actions=GAME.actions, tools=(LOOKUP,), sleep=clock.sleep) as session:
        turn = session.observe(f"{GAME.reset().text}\n\n{ASK}")
        session.accept()
        before = session.accepted_state
        with pytest.raises(
            ValueError, match=r"tool calls are .+; pass one result for each, in that order \(got none\)"
        ):
            session.observe("the next frame")
        with pytest.raises(ValueError, match=r"\(got other\)"):
            session.observe(results=[ToolResult("other", "lookup", "?")])
        assert session.accepted_state is before and session.turns == 1
        session.observe(results=answer(turn))


def test_results_without_calls_to_answer_are_refused(clock):
    with Session(PROFILE, actions=GAME.actions, tools=(LOOKUP,), sleep=clock.sleep) as session:
        with pytest.raises(ValueError, match=r"tool calls are none; .+ \(got c1\)"):
            session.observe("a frame", results=[ToolResult("c1", "lookup", "?")])
        with pytest.raises(ValueError, match="nothing to observe"):
            session.observe()


def test_a_rejected_replys_calls_never_commit(clock):
    with Session(PROFILE, actions=GAME.actions, tools=(LOOKUP,), sleep=clock.sleep) as session:
        before = session.accepted_state.to_json()
        session.observe(f"{GAME.reset().text}\n\n{ASK}")
        again = session.reject("not now")
        assert session.accepted_state.to_json() == before
        assert again.is_tool_round  # asked again from the unchanged state, the model calls again
        session.accept()
        assert session.accepted_state.unanswered == (again.tool_calls[0].id,)


def test_tool_rounds_past_the_profiles_bound_are_rejected(clock):
    profile = with_changes(PROFILE, agent={"max_tool_rounds": 1})
    with Session(profile, actions=GAME.actions, tools=(LOOKUP,), sleep=clock.sleep) as session:
        turn = session.observe(f"{GAME.reset().text}\n\n{ASK}")
        session.accept()
        second = session.observe(ASK, results=answer(turn))
        assert (
            second.tool_calls and second.problem == "1 tool rounds in a row without an action (agent.max_tool_rounds)"
        )
        with pytest.raises(ValueError, match="cannot be accepted"):
            session.accept()


def test_with_offload_the_session_offers_read_tool_result_and_answers_it_from_its_store(clock):
    profile = with_changes(PROFILE, runtime={"tool_result_offload": {}})
    page = "CATALOG PAGE 1\n" + "entry " * 1000
    with Session(profile, actions=GAME.actions, sleep=clock.sleep) as session:
        assert READ_TOOL_RESULT_SPEC in session.tools
        session.tool_results.put(ref_of(page), page)
        ask = f'call read_tool_result with {{"ref": "{ref_of(page)}"}} and call read_tool_result with {{"ref": "tr-0"}}'
        turn = session.observe(f"{GAME.reset().text}\n\n{ask}")
        assert turn.is_tool_round
        found, unknown = (session.read_tool_result(call) for call in turn.tool_calls)
    assert found.content.startswith("CATALOG PAGE 1") and not found.is_error
    assert unknown.is_error and "tr-0" in unknown.content


def test_the_event_log_keeps_refusals_rejections_and_each_call_paired_with_its_result(tmp_path, clock):
    profile = with_changes(PROFILE, client={"local": {"faults": [{"at": 1, "kind": "refusal"}]}})
    with Session(profile, actions=GAME.actions, tools=(LOOKUP,), out_dir=tmp_path, sleep=clock.sleep) as session:
        first = session.observe(f"{GAME.reset().text}\n\n{ASK}")  # refused once, then a tool round
        again = session.reject("not yet")
        session.accept()
        acted = session.observe(results=answer(again))
        session.accept()
    log = session.run_dir / EVENTS
    assert check_events(log) == []
    events = [event for _, event in read_events(log).events]
    verdicts = [(event.status, event.attempt) for event in events if event.kind == "assistant_message"]
    assert verdicts == [("refused", 1), ("rejected", first.attempt), ("accepted", again.attempt), ("accepted", 1)]
    calls = [event.call_id for event in events if event.kind == "tool_call"]
    results = [event.call_id for event in events if event.kind == "tool_result"]
    assert calls == [first.tool_calls[0].id, again.tool_calls[0].id] and results == [again.tool_calls[0].id]
    assert acted.action is not None
