"""Runs with tools, end to end from the shipped profiles on the embedded local provider (real SDKs,
real HTTP, real files): every local profile wins catalog_hunt, whose clue is shown once and points
into a large read-only catalog the model must call; and a profile of each adapter family wins
beacon_grid acting through its action tools."""

from __future__ import annotations

import json

import pytest

from turnstate.durable.events import check_events
from turnstate.durable.layout import EVENTS
from turnstate.session.profile import PROFILES_DIR, Profile, load_profile
from turnstate.session.runner import Runner
from turnstate.strategies.offload import pointer, ref_of

from .test_run import read_steps, with_changes

LOCAL_PROFILES = sorted(path.stem for path in PROFILES_DIR.glob("local-*.yaml"))
# One profile per adapter family (DeepSeek's acts through tools as shipped).
FAMILIES = {
    "chat_completions": "local-manual-rolling",
    "responses": "local-openai-harness-summary",
    "anthropic_messages": "local-anthropic-continuous",
    "gemini_interactions": "local-gemini-harness-summary",
    "deepseek": "local-deepseek-continuous",
}


def shipped(name: str) -> Profile:
    return load_profile(PROFILES_DIR / f"{name}.yaml")


@pytest.mark.parametrize("name", LOCAL_PROFILES)
def test_every_local_profile_wins_catalog_hunt_reading_the_page_each_clue_names(tmp_path, name):
    profile = with_changes(shipped(name), environment={"name": "catalog_hunt", "seed": 4, "options": {}})
    result = Runner(profile, tmp_path).run()
    assert (result.outcome, result.levels_won) == ("win", 3), result.failure
    steps = read_steps(result.artifacts)
    rounds = [step for step in steps if step["action"] is None]  # a page read again after a compaction too
    assert len(rounds) >= 3 and all(call["name"] == "read_catalog" for step in rounds for call in step["tool_calls"])
    assert [step["action"].split()[0] for step in steps if step["action"]] == ["MARK"] * result.accepted_actions
    assert check_events(result.artifacts / EVENTS) == []  # every call answered once, by id, in order


@pytest.mark.parametrize("name", FAMILIES.values(), ids=FAMILIES.keys())
def test_a_profile_of_each_adapter_family_wins_beacon_grid_acting_through_its_action_tools(tmp_path, name):
    profile = with_changes(shipped(name), agent={"action_mode": "tools"})
    result = Runner(profile, tmp_path).run()
    assert (result.outcome, result.levels_won) == ("win", 3), result.failure
    steps = read_steps(result.artifacts)
    assert all(step["tool_calls"][0]["name"] == step["action"] for step in steps)
    system = steps[0]["messages_sent"][0]["content"]
    assert "calling exactly one of the action tools" in system and "ACTION:" not in system


def test_with_offload_stale_pages_go_out_as_pointers_their_text_is_stored_and_the_game_is_still_won(tmp_path):
    offload = {"keep_recent_per_tool": 1, "min_savings_chars": 1000}
    profile = with_changes(
        shipped("local-openai-harness-summary"),
        environment={"name": "catalog_hunt", "seed": 2, "options": {"levels": 8}},
        runtime={"tool_result_offload": offload},
    )
    result = Runner(profile, tmp_path).run()
    assert (result.outcome, result.levels_won) == ("win", 8), result.failure
    stored = {path.stem: path.read_text() for path in (result.artifacts / "tool_results").iterdir()}
    assert stored and all(ref == ref_of(text) and text.startswith("CATALOG PAGE") for ref, text in stored.items())
    sent = [message["content"] for step in read_steps(result.artifacts) for message in step["messages_sent"]]
    assert all(
        any(pointer("read_catalog", ref, len(text)) in content for content in sent) for ref, text in stored.items()
    )
    accepted = json.dumps(result.accepted_state.payload)
    assert "tool result offloaded" not in accepted  # only requests are projected
