"""Profiles: every shipped profile validates; bad ones are rejected naming file, key path and fix."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from turnstate.harness.profile import (
    DEFAULT_PROFILE,
    PROFILES_DIR,
    ProfileError,
    load_profile,
    parse_profile,
)

BASE = yaml.safe_load(DEFAULT_PROFILE.read_text())


def profile_text(**sections) -> str:
    data = {key: (value if not isinstance(value, dict) else dict(value)) for key, value in BASE.items()}
    for path, value in sections.items():
        *parents, leaf = path.split("__")
        target = data
        for parent in parents:
            target[parent] = dict(target.get(parent) or {})
            target = target[parent]
        if value is DELETE:
            del target[leaf]
        else:
            target[leaf] = value
    return yaml.safe_dump(data)


DELETE = object()


@pytest.mark.parametrize("path", sorted(PROFILES_DIR.glob("*.yaml")), ids=lambda path: path.name)
def test_every_shipped_profile_is_valid(path):
    assert load_profile(path).id


# (change, key path the error must name, text it must contain: the fix or the contradiction)
# fmt: off
REJECTED = [
    ({"agent__max_retrys": 3}, "agent.max_retrys", "remove it or correct the spelling (allowed here: max_actions, max_context_length, max_retries)"),
    ({"runtime__compaction__trigger": 5}, "runtime.compaction.trigger", "allowed here: strategy"),
    ({"colour": "blue"}, "colour", "allowed here: agent, client, environment, id, pricing, request, runtime"),
    ({"agent__max_retries": "three"}, "agent.max_retries", "use a whole number"),
    ({"request__stream": "maybe"}, "request.stream", "use true or false"),
    ({"runtime__strategy": "rolling"}, "runtime.strategy", "unknown strategy 'rolling'; fix: use one of: manual_rolling"),
    ({"runtime__state": "manual_rolling"}, "runtime.state", "unknown key"),
    ({"request__model": DELETE}, "request.model", "add it"),
    ({"agent": DELETE}, "agent", "add it"),
    ({"client__local": {"faults": [{"at": 0, "kind": "rate_limit"}]}}, "client.local.faults.0.at", "raise the value"),
    # contradictions between settings
    ({"runtime__adapter_id": "acme.chat.v9"}, "runtime.adapter_id", "'acme.chat.v9' is not registered"),
    ({"runtime__compaction__strategy": "native"}, "runtime.compaction.strategy", "manual_rolling does not compose with compaction 'native'; fix: use one of: none"),
    ({"request__max_output_tokens": 5000}, "request.max_output_tokens", "leaves no room for the prompt"),
    ({"client__base_url": "https://api.example.test/v1", "client__local": {"context_window": 4096}}, "client.local", "base_url is not 'local'"),
    ({"client__base_url": "https://api.example.test/v1"}, "client.api_key_env", "a remote base_url needs a key"),
    ({"environment__options": {"levles": 2}}, "environment", "levles"),
    ({"environment__name": "chess"}, "environment", "unknown environment 'chess'"),
    ({"client__local": {"faults": [{"at": 2, "kind": "empty"}, {"at": 2, "kind": "refusal"}]}}, "client.local.faults", "more than one fault at request 2"),
]
# fmt: on


@pytest.mark.parametrize(("change", "key_path", "text"), REJECTED)
def test_a_bad_or_contradictory_setting_is_named_with_its_path_and_fix(change, key_path, text):
    with pytest.raises(ProfileError) as caught:
        parse_profile(profile_text(**change), source="profiles/bad.yaml")
    message = str(caught.value)
    assert f"profiles/bad.yaml: {key_path}:" in message
    assert "; fix: " in message
    assert text in message


def test_broken_yaml_names_the_line():
    with pytest.raises(
        ProfileError,
        match=r"p.yaml: \(top level\): not valid YAML at line \d+, column \d+; fix: fix the YAML syntax there",
    ):
        parse_profile("id: x\nagent: [unclosed\n", source="p.yaml")


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(ProfileError, match="cannot read the file"):
        load_profile(tmp_path / "nope.yaml")


def test_validate_command_exits_0_for_good_and_1_naming_the_key_for_bad(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(profile_text(agent__max_retries="three"))
    good = subprocess.run(
        [sys.executable, "-m", "turnstate.harness.cli", "validate", str(DEFAULT_PROFILE)],
        capture_output=True,
        text=True,
    )
    assert good.returncode == 0, good.stderr
    assert "ok" in good.stdout
    failed = subprocess.run(
        [sys.executable, "-m", "turnstate.harness.cli", "validate", str(DEFAULT_PROFILE), str(bad)],
        capture_output=True,
        text=True,
    )
    assert failed.returncode == 1
    assert f"{bad}: agent.max_retries:" in failed.stderr
