"""Every fault a summary request can meet, on every shipped harness-summary profile (issue 30).

The seed's rule: empty, incomplete and failed summary responses are retried from unchanged accepted
state and are never installed. Each case puts one fault on a profile's first summary request and
plays to that turn's accepted action, when the summary commits: the summary installed is the one
the run without the fault installs, asked for once more for the same turns, so the run goes on as
that one does.

A fault that leaves the adapter a whole, readable reply is no failed summary: `malformed` (a fixed
text that holds no action, ended normally: what the action parser judges) and `leak_key` (the reply
plus a line) are the model's own words, and the harness judges no summary by what it says. Two
more are not this rule's: `context_overflow` is its own lane (fewer turns summarized, test_run.py),
and `expire_handle` changes nothing on a request that continues from no stored response.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from turnstate.local_provider.faults import FAULT_KINDS, STATUS_FAULTS
from turnstate.session.profile import PROFILES_DIR, Profile, load_profile
from turnstate.session.runner import Runner

NEVER_INSTALLED = sorted(
    STATUS_FAULTS  # an HTTP error before the reply
    | {"stream_cut", "html_page", "garbled", "empty_choices", "null_message"}  # no reply the adapter can read whole
    | {"truncation", "pause_turn", "refusal", "empty"}  # a reply that ended incomplete, refused, or holds nothing
)
WHOLE_REPLIES = {"malformed", "leak_key"}
OTHER_RULES = {"context_overflow", "expire_handle"}


def shipped_harness_summary_profiles() -> list[Profile]:
    """Every shipped profile that plays on the embedded provider with harness summaries."""
    paths = sorted(PROFILES_DIR.glob("*.yaml"))
    return [
        load_profile(path)
        for path in paths
        if (data := yaml.safe_load(path.read_text()))["client"]["base_url"] == "local"
        and data["runtime"].get("compaction", {}).get("strategy") == "harness_summary"
    ]


PROFILES = shipped_harness_summary_profiles()


def with_changes(profile: Profile, **sections: dict) -> Profile:
    data = profile.model_dump()
    for section, changes in sections.items():
        data[section] = {**(data[section] or {}), **changes}
    return Profile.model_validate(data)


def steps(run_dir: Path) -> list[dict]:
    return [json.loads(path.read_text()) for path in sorted(run_dir.glob("step_*.json"))]


def first_compaction(run_dir: Path) -> dict:
    return json.loads((run_dir / "compaction_001.json").read_text())


@pytest.fixture(scope="module")
def clean_runs(tmp_path_factory) -> dict[str, tuple[int, dict]]:
    """Each profile's run without a fault: the turn whose summary is its first, and that turn's record.
    Every turn before it made one request, so the turn's number is its summary request's ordinal."""
    runs = {}
    for profile in PROFILES:
        result = Runner(profile, tmp_path_factory.mktemp(profile.id)).run()
        assert result.outcome == "win"
        record = next(step for step in steps(result.artifacts) if "continuation" in step)
        runs[profile.id] = (record["step"], record)
    return runs


def test_every_fault_kind_is_placed_on_one_side_of_the_rule():
    assert set(NEVER_INSTALLED) | WHOLE_REPLIES | OTHER_RULES == FAULT_KINDS
    assert not set(NEVER_INSTALLED) & (WHOLE_REPLIES | OTHER_RULES) and not WHOLE_REPLIES & OTHER_RULES


def test_the_shipped_harness_summary_profiles_are_all_found():
    assert {profile.id for profile in PROFILES} >= {
        "local-openai-harness-summary",
        "local-gemini-harness-summary",
        "local-open-source-continuous",
        "local-deepseek-continuous",
    }


@pytest.mark.parametrize("kind", NEVER_INSTALLED)
@pytest.mark.parametrize("profile", PROFILES, ids=lambda profile: profile.id)
def test_a_summary_reply_that_failed_is_never_installed_and_the_same_turns_are_summarized_again(
    tmp_path, clock, clean_runs, profile, kind
):
    turn, clean = clean_runs[profile.id]
    faulted = with_changes(
        profile,
        agent={"max_actions": turn},  # the summary commits with this turn's action
        client={"local": {"faults": [{"at": turn, "kind": kind}]}},
    )
    result = Runner(faulted, tmp_path, sleep=clock.sleep).run()
    assert result.outcome == "max_actions" and result.accepted_actions == turn
    compaction = first_compaction(result.artifacts)
    failed, retried = compaction["attempts"]  # the faulted reply, then one that was installed
    assert retried["outcome"] == "compacted"
    assert failed["summary_input"] == retried["summary_input"]  # the same turns, from the same accepted state
    record = steps(result.artifacts)[turn - 1]
    assert record["continuation"] == clean["continuation"]  # the summary and bridge of the run without the fault
