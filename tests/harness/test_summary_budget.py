"""A harness summary of a long game stays within the budget its request names (issue 18, item 6).

The summary request is assembled by strategies/summary.py and sent through each summary-capable
adapter's real SDK to the local provider, whose model reads only the request text: the summary it
writes must hold the beacon of the level being played and fit the budget, however many levels are
behind it. A cut summary's retry asks for a shorter one, in a run against the local provider.
"""

from __future__ import annotations

import json

import pytest

from turnstate.adapters.contract import Endpoint, ModelResponse, RequestSettings
from turnstate.adapters.registry import ADAPTERS, AdapterDescriptor
from turnstate.adapters.tokens import estimate_text_tokens
from turnstate.local_provider.faults import Fault
from turnstate.local_provider.server import LocalProvider
from turnstate.session.profile import PROFILES_DIR, Profile, load_profile
from turnstate.session.runner import Runner
from turnstate.strategies.continuous_conversation import STRATEGY
from turnstate.strategies.state import RuntimeState, TurnSpan
from turnstate.strategies.summary import SUMMARY_INSTRUCTION, SummaryPass, summary_request

CAP = 256  # the local profiles' summary cap (their request.max_output_tokens)
LEVELS = 80  # one NOTES line a level (about 6 tokens) would pass the cap at about level 40
SUMMARY_CAPABLE = [descriptor for descriptor in ADAPTERS.values() if descriptor.load().summary_compaction is not None]
HARNESS_SUMMARY = load_profile(PROFILES_DIR / "local-openai-harness-summary.yaml")


def beacon(level: int) -> str:
    return "ABC"[level % 3]


def opening_frame(level: int) -> str:
    """The first frame of `level`, the only one that shows its beacon, in the game's format."""
    return "\n".join(
        [
            f"LEVEL {level}/{LEVELS} | STATE NOT_FINISHED",
            f"BEACON (level {level}): {beacon(level)}",
            "#####",
            "#@.A#",
            "#####",
            "STANDING ON: floor",
        ]
    )


def long_game(descriptor: AdapterDescriptor) -> RuntimeState:
    """An accepted history of LEVELS turns, each the opening frame of the next level, in the adapter's items."""
    transcript = descriptor.load().transcript
    items: list = []
    spans = []
    for level in range(1, LEVELS + 1):
        turn = transcript.user_items([opening_frame(level)])
        spans.append(TurnSpan(start=len(items), end=len(items) + len(turn)))
        items += turn
    return RuntimeState(adapter_id=descriptor.adapter_id, strategy=STRATEGY, payload={"items": items}, turns=spans)


@pytest.mark.parametrize("cuts", [0, 3], ids=["the cap", "an eighth of it, after three cuts"])
@pytest.mark.parametrize("descriptor", SUMMARY_CAPABLE, ids=lambda descriptor: descriptor.adapter_id)
def test_a_summary_of_a_long_game_keeps_only_the_current_levels_beacon_within_the_budget_named(descriptor, cuts):
    accepted = long_game(descriptor)
    summary_pass = SummaryPass("summary_overflow", LEVELS, LEVELS, fork=False, cuts=cuts)
    request = summary_request(summary_pass, accepted, descriptor.load().transcript, None, CAP, "Play beacon_grid.")
    settings = RequestSettings(model="local-policy-1", max_output_tokens=CAP, stream=False)
    with LocalProvider(context_window=16_000) as provider:
        endpoint = Endpoint(provider.base_url, "test-key", is_local=True, timeout_seconds=10.0)
        response = descriptor.load().connect(endpoint, settings).call(request)
    assert isinstance(response, ModelResponse), response  # not cut off at the cap
    assert response.text == f"NOTES: level {LEVELS} beacon {beacon(LEVELS)}"  # the won levels' beacons are not needed
    assert estimate_text_tokens(response.text) <= summary_pass.budget(CAP)


def with_provider(profile: Profile, provider: LocalProvider) -> Profile:
    data = profile.model_dump()
    data["client"] = {**data["client"], "base_url": provider.openai_base_url, "api_key_env": "TURNSTATE_TEST_KEY"}
    return Profile.model_validate(data)


def summary_requests(provider: LocalProvider) -> list[tuple[int, str]]:
    """(ordinal, instruction) of each summary request the provider admitted, in order."""
    return [
        (ordinal, body["input"][-1]["content"])
        for ordinal, body in enumerate(provider.request_log, start=1)
        if SUMMARY_INSTRUCTION in json.dumps(body["input"][-1])
    ]


def test_a_summary_cut_off_at_its_cap_is_asked_for_again_within_half_the_budget_and_the_run_wins(tmp_path, monkeypatch):
    monkeypatch.setenv("TURNSTATE_TEST_KEY", "test-key")
    with LocalProvider() as provider:
        Runner(with_provider(HARNESS_SUMMARY, provider), tmp_path / "clean").run()
        (first, asked), *_ = summary_requests(provider)
    assert asked.endswith(f"Keep the summary within {CAP} tokens: a longer answer is cut off.")
    with LocalProvider(faults=[Fault(at=first, kind="truncation")]) as provider:
        result = Runner(with_provider(HARNESS_SUMMARY, provider), tmp_path / "cut").run()
        (cut, _), (retry, asked_again), *_ = summary_requests(provider)
    assert result.outcome == "win"
    assert (cut, retry) == (first, first + 1)
    assert asked_again.endswith(
        f"A summary of this was cut off at {CAP} tokens; keep this one within {CAP // 2} tokens."
    )
    compaction = json.loads((result.artifacts / "compaction_001.json").read_text())
    assert [attempt["outcome"] for attempt in compaction["attempts"]] == ["truncated", "compacted"]
