"""The shipped llama-server profiles against the real server (never mocked): each plays beacon_grid,
streamed and not, to the outcome its run records; what the harness counted is what the server
reported; the state each wire carries is replayed as that wire requires; a kill and a resume end as
the uninterrupted run. The exchanges come from the recording proxy (conftest.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.harness.test_resume import killed_run
from tests.harness.test_run import with_changes
from tests.real_server.conftest import Exchange, RecordingProxy
from turnstate.environments import make_environment
from turnstate.session import scaffold
from turnstate.session.profile import PROFILES_DIR, Profile, load_profile
from turnstate.session.runner import Runner

PROFILES = (
    "llama-chat-manual-rolling",
    "llama-open-weight-continuous",
    "llama-responses-continuous",
    "llama-messages-continuous",
)
ACTIONS = 8  # a run's accepted actions: enough for every wire's replay to be exercised, cheap on one thread
GRAMMAR = {"llama-chat-manual-rolling", "llama-open-weight-continuous", "llama-responses-continuous"}


def llama_profile(name: str, proxy: RecordingProxy, monkeypatch: pytest.MonkeyPatch, **request: Any) -> Profile:
    """The shipped profile, pointed at the proxy through its LLAMA_BASE_URL, with a short budget."""
    monkeypatch.setenv("LLAMA_BASE_URL", proxy.base_url + ("" if "messages" in name else "/v1"))
    profile = load_profile(PROFILES_DIR / f"{name}.yaml")
    return with_changes(profile, agent={"max_actions": ACTIONS}, request=request)


def calls(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "calls.jsonl").read_text().splitlines()]


def assistant_events(run_dir: Path) -> list[dict[str, Any]]:
    lines = (run_dir / "events.jsonl").read_text().splitlines()
    return [event for event in map(json.loads, lines) if event["kind"] == "assistant_message"]


def reported_usage(exchange: Exchange) -> tuple[int, int, int]:
    """(input tokens with the cached ones, cached, output) as the server's reply says, on its wire."""
    if exchange.status != 200:
        return (0, 0, 0)
    streamed = exchange.request.get("stream", False)
    if exchange.path.endswith("/chat/completions"):
        usage = (
            next(event["usage"] for event in exchange.events() if event.get("usage"))
            if streamed
            else exchange.reply()["usage"]
        )
        return usage["prompt_tokens"], usage["prompt_tokens_details"]["cached_tokens"], usage["completion_tokens"]
    if exchange.path.endswith("/responses"):
        reply = (
            next(e["response"] for e in exchange.events() if e["type"] == "response.completed")
            if streamed
            else exchange.reply()
        )
        usage = reply["usage"]
        return usage["input_tokens"], usage["input_tokens_details"]["cached_tokens"], usage["output_tokens"]
    if streamed:  # Anthropic: the input in message_start, the output in the last message_delta
        events = exchange.events()
        start = next(event["message"]["usage"] for event in events if event["type"] == "message_start")
        output = [event["usage"]["output_tokens"] for event in events if event["type"] == "message_delta"][-1]
        usage = {**start, "output_tokens": output}
    else:
        usage = exchange.reply()["usage"]
    cached = usage.get("cache_read_input_tokens", 0)
    return usage["input_tokens"] + cached, cached, usage["output_tokens"]


def without_ids(value: Any) -> Any:
    """A request with the `id` of every item it replays left out: llama-server names each reply anew."""
    if isinstance(value, dict):
        return {key: without_ids(item) for key, item in value.items() if key != "id"}
    return [without_ids(item) for item in value] if isinstance(value, list) else value


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("name", PROFILES)
def test_a_shipped_llama_profile_plays_to_the_outcome_it_records_and_counts_what_the_server_reported(
    name, stream, proxy, monkeypatch, tmp_path
):
    result = Runner(llama_profile(name, proxy, monkeypatch, stream=stream), tmp_path).run()
    run_dir = result.artifacts
    meta = json.loads((run_dir / "run_meta.json").read_text())
    replies = assistant_events(run_dir)
    accepted = [event for event in replies if event["status"] == "accepted"]
    assert meta["outcome"] == result.outcome in ("win", "max_actions", "failed_closed")
    assert meta["accepted_actions"] == result.accepted_actions == len(accepted)
    if result.outcome == "max_actions":
        assert result.accepted_actions == ACTIONS
    if name in GRAMMAR:  # the grammar lets the model write valid actions only: none is rejected
        actions = set(make_environment("beacon_grid", 0, {"levels": 2}).actions)
        assert [event["status"] for event in replies] == ["accepted"] * len(replies)
        assert all(event["action"] in actions for event in replies)
        assert result.accepted_actions == ACTIONS or result.outcome == "failed_closed"
    exchanges = proxy.model_calls()
    assert [exchange.request.get("stream", False) for exchange in exchanges] == [stream] * len(exchanges)
    journaled = calls(run_dir)
    assert len(journaled) == len(exchanges)
    counted = [call["usage"] for call in journaled]
    assert [(u["input_tokens"], u["cached_input_tokens"], u["output_tokens"]) for u in counted] == [
        reported_usage(exchange) for exchange in exchanges
    ]
    assert meta["usage"]["input_tokens"] == sum(reported_usage(exchange)[0] for exchange in exchanges)


def test_the_open_weight_thought_is_the_servers_reasoning_content_replayed_exactly(proxy, monkeypatch, tmp_path):
    Runner(llama_profile("llama-open-weight-continuous", proxy, monkeypatch), tmp_path).run()
    exchanges = [exchange for exchange in proxy.model_calls() if exchange.status == 200]
    thoughts, finished = [], []
    for exchange in exchanges:
        choices = [event["choices"][0] for event in exchange.events() if event.get("choices")]
        thoughts.append("".join(choice["delta"].get("reasoning_content") or "" for choice in choices))
        finished.append([choice["finish_reason"] for choice in choices if choice.get("finish_reason")] == ["stop"])
    assert all(thoughts), "the server's reasoning parser returns the grammar's <think> apart"
    last = exchanges[-1].request["messages"]
    replayed = [message["reasoning_content"] for message in last if message["role"] == "assistant"]
    accepted = [thought for thought, stop in zip(thoughts[:-1], finished[:-1], strict=True) if stop]
    assert replayed == accepted and len(replayed) >= ACTIONS - 1  # each accepted thought, exactly, in order
    actions = scaffold.action_tools(make_environment("beacon_grid", 0, {}).actions)
    assert exchanges[0].request["grammar"] == scaffold.action_grammar(actions, thinking=True)


def test_responses_output_items_are_replayed_as_the_server_sent_them(proxy, monkeypatch, tmp_path):
    Runner(llama_profile("llama-responses-continuous", proxy, monkeypatch), tmp_path).run()
    exchanges = [exchange for exchange in proxy.model_calls() if exchange.status == 200]
    for before, after in zip(exchanges, exchanges[1:], strict=False):
        sent = before.reply()["output"]
        replayed = after.request["input"][len(before.request["input"]) : len(before.request["input"]) + len(sent)]
        # as the API returned them, a reasoning item's status dropped (the input schema refuses it)
        assert replayed == [
            {key: value for key, value in item.items() if not (key == "status" and item["type"] == "reasoning")}
            for item in sent
        ]


@pytest.mark.parametrize("name", sorted(GRAMMAR))
def test_a_run_killed_against_the_real_server_and_resumed_ends_as_the_uninterrupted_one(
    name, proxy, monkeypatch, tmp_path
):
    # Without the server's prompt cache: a prompt half read from the cache is summed in other batches
    # than one read whole, and at temperature 0 a near tie then goes the other way (seen on the
    # open-weight profile's long thoughts, with every request byte for byte the same).
    profile = llama_profile(name, proxy, monkeypatch, extra_body={"seed": 1, "cache_prompt": False})
    baseline = Runner(profile, tmp_path / "whole").run()
    uninterrupted = [exchange.request for exchange in proxy.model_calls()]
    run_dir = killed_run(profile, tmp_path / "killed", "after_commit", ACTIONS // 2)
    before_resume = len(proxy.model_calls())
    resumed = Runner(profile, run_dir.parent).resume(run_dir)
    after_kill = [exchange.request for exchange in proxy.model_calls()[before_resume:]]
    # the requests the uninterrupted run sent, but for the ids the server gave each run's own replies
    assert [without_ids(sent) for sent in after_kill] == [
        without_ids(sent) for sent in uninterrupted[len(uninterrupted) - len(after_kill) :]
    ]
    assert (resumed.outcome, resumed.accepted_actions) == (baseline.outcome, baseline.accepted_actions)
    actions = [
        [event["action"] for event in assistant_events(folder) if event["status"] == "accepted"]
        for folder in (baseline.artifacts, run_dir)
    ]
    assert actions[0] == actions[1]


def test_previous_response_id_fails_closed_with_the_servers_own_reason(proxy, monkeypatch, tmp_path):
    profile = llama_profile("llama-responses-continuous", proxy, monkeypatch)
    data = profile.model_dump()
    data["runtime"]["strategy"] = "previous_response_id"
    data["request"]["options"] = {"store": True}
    result = Runner(Profile.model_validate(data), tmp_path).run()
    assert result.outcome == "failed_closed" and result.failure == "fatal provider failure"
    assert result.server_message == "HTTP 400: llama.cpp does not support 'previous_response_id'."
    written = b"".join(path.read_bytes() for path in result.artifacts.iterdir() if path.is_file())
    assert b"does not support" not in written  # the console's alone: no provider message is written
