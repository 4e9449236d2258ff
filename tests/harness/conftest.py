"""Fixtures of the export tests (test_traces.py's spans, test_inspect_export.py's Inspect log)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harness.test_cli_user import run_json
from tests.harness.test_run import with_changes
from turnstate.local_provider.faults import Fault
from turnstate.local_provider.server import LocalProvider
from turnstate.session.profile import DEFAULT_PROFILE, load_profile
from turnstate.session.runner import Runner

FAULTS = "[{at: 2, kind: rate_limit}, {at: 5, kind: malformed}, {at: 9, kind: refusal}, {at: 12, kind: server_error}]"
LEAKED_KEY = "sk-test-DO-NOT-EXPORT-4242"


@pytest.fixture(scope="module")
def exported_runs(tmp_path_factory) -> dict[str, Path]:
    """A run that reads its clues with a tool (catalog_hunt), and a harness-summary run whose provider
    fails four ways on schedule (a 429, a reply with no action, a refusal, a 500); made once a module."""
    out = tmp_path_factory.mktemp("runs")
    tools = run_json("local-openai-continuous", "--set", "environment.name=catalog_hunt", "--out", str(out))
    faulted = run_json("local-openai-harness-summary", "--set", f"client.local.faults={FAULTS}", "--out", str(out))
    return {"tools": Path(tools["run_folder"]), "faulted": Path(faulted["run_folder"])}


@pytest.fixture
def leaked_key_run(tmp_path, monkeypatch) -> Path:
    """A four-action run whose model repeats its key (LEAKED_KEY) in its second reply."""
    monkeypatch.setenv("TURNSTATE_TEST_KEY", LEAKED_KEY)
    with LocalProvider(faults=[Fault(at=2, kind="leak_key")]) as provider:
        profile = with_changes(
            load_profile(DEFAULT_PROFILE),
            client={"base_url": provider.openai_base_url, "api_key_env": "TURNSTATE_TEST_KEY"},
            agent={"max_actions": 4},
        )
        return Runner(profile, tmp_path / "runs").run().artifacts
