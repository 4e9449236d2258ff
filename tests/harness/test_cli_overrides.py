"""The command line people expect (issue 36): `-h` on every command, `--set KEY=VALUE` overrides of a
profile's keys (validated as the file is, recorded in run_meta.json, kept by a resume) with `--model`
and `--seed` as shorthands, and "did you mean" for a misspelt profile name or key."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.arc_extra import needs_toolkit
from tests.harness.test_cli_user import assert_one_line_error, invoke, run_json
from tests.harness.test_resume import killed_run
from turnstate.cli import COMMANDS
from turnstate.durable.layout import RUN_META
from turnstate.environments.arc_agi3 import missing_toolkit
from turnstate.session.profile import DEFAULT_PROFILE, load_profile, shipped_profiles
from turnstate.session.run_profile import run_profile
from turnstate.session.runner import Runner


@pytest.mark.parametrize("command", [command.name for command in COMMANDS])
def test_every_command_answers_dash_h_with_its_own_usage(command):
    answered = invoke(str(command), "-h")
    assert answered.exit_code == 0 and answered.stdout.startswith(f"Usage: main {command} ")
    assert "-h, --help" in answered.stdout


def test_the_group_answers_dash_h():
    answered = invoke("-h")
    assert answered.exit_code == 0 and "Commands:" in answered.stdout


def test_set_model_and_seed_change_the_profile_before_it_is_validated_and_run_meta_records_them(tmp_path):
    meta = run_json(
        "--out", str(tmp_path), "--set", "agent.max_actions=200", "--seed", "3", "--model", "local-policy-1"
    )
    assert meta["outcome"] == "win"
    assert meta["overrides"] == ["agent.max_actions=200", 'request.model="local-policy-1"', "environment.seed=3"]
    settings = meta["settings"]
    assert (settings["agent"]["max_actions"], settings["environment"]["seed"]) == (200, 3)
    plain = run_json("--out", str(tmp_path / "plain"))
    assert "overrides" not in plain and plain["settings"]["environment"]["seed"] == 0


def test_a_resumed_run_keeps_the_overrides_it_was_started_with(tmp_path):
    overrides = [("environment.seed", "5"), ("agent.max_actions", "150")]
    profile = load_profile(DEFAULT_PROFILE, overrides)
    run_dir = killed_run(profile, tmp_path / "runs", "after_commit", 3)
    resumed = Runner(run_profile(run_dir), run_dir.parent).resume(run_dir)
    meta = json.loads((run_dir / RUN_META).read_text())
    assert resumed.outcome == "win" and meta["resumes"]
    assert meta["overrides"] == ["environment.seed=5", "agent.max_actions=150"]
    assert meta["settings"]["environment"]["seed"] == 5


@pytest.mark.parametrize(
    ("given", "fragments"),
    [
        (["--set", "agent.max_actonz=3"], ["with --set agent.max_actonz=3: agent.max_actonz: unknown key",
                                           "fix: did you mean `max_actions`?"]),
        (["--set", "agent.max_actions=many"], ["agent.max_actions: Input should be a valid integer (got 'many')",
                                               "use a whole number"]),
        (["--set", "id.part=x"], ["id.part: --set id.part: id is not a mapping of keys; fix: set id itself"]),
        (["--set", "agent.max_actions=[1"], ["--set agent.max_actions: '[1' is not a YAML value; fix: quote it"]),
        (["--model", " "], ['with --set request.model=" ": request.model: the model name is empty']),
    ],
)  # fmt: skip
def test_a_bad_override_is_one_line_naming_the_key_and_the_fix_and_nothing_runs(tmp_path, given, fragments):
    assert_one_line_error(invoke("run", "--out", str(tmp_path / "runs"), *given), *fragments)
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


@pytest.mark.parametrize("given", ["nope", "=3", "agent..max_actions=3"])
def test_an_override_that_is_not_key_equals_value_is_a_usage_error(given):
    refused = invoke("run", "--set", given)
    assert refused.exit_code == 2 and "is not KEY=VALUE" in refused.stderr


def test_a_misspelt_key_in_a_profile_file_is_answered_with_the_key_it_is_closest_to(tmp_path):
    path = tmp_path / "profile.yaml"
    path.write_text(DEFAULT_PROFILE.read_text().replace("strategy: manual_rolling", "stratgy: manual_rolling", 1))
    refused = invoke("validate", str(path))
    assert refused.exit_code == 1
    assert f"{path}: runtime.stratgy: unknown key; fix: did you mean `strategy`? remove it" in refused.stderr


def test_the_shells_completion_of_a_profile_offers_the_shipped_names_that_start_so_and_files():
    """Through click's completion protocol, as bash's hook calls it (docs/cli.md)."""
    environment = os.environ | {"COMP_WORDS": "turnstate run local-openai", "COMP_CWORD": "2"}
    environment["_TURNSTATE_COMPLETE"] = "bash_complete"
    answered = subprocess.run(
        [sys.executable, "-c", "from turnstate.cli import main; main(prog_name='turnstate')"],
        env=environment,
        capture_output=True,
        text=True,
        check=True,
    )
    offered = answered.stdout.splitlines()
    assert offered == [f"plain,{name}" for name in sorted(shipped_profiles()) if name.startswith("local-openai")] + [
        "file,local-openai"
    ]


def test_list_marks_a_profile_that_needs_what_is_not_installed_with_how_to_install_it():
    """local-arc plays ARC-AGI-3 games: without the toolkit (the arc extra) its row says so; with it
    (.ci/arc's Python 3.12 environment), no profile needs anything."""
    missing = missing_toolkit()
    listed = {entry["name"]: entry for entry in json.loads(invoke("list", "--json").stdout)["profiles"]}
    needing = {name: entry["needs"] for name, entry in listed.items() if "needs" in entry}
    arc_profiles = {name for name in listed if needs_toolkit(name)}
    assert needing == ({name: missing for name in arc_profiles} if missing else {})
    text = invoke("list").stdout
    (row,) = [line for line in text.splitlines() if line.strip().startswith("local-arc ")]
    assert row.endswith(missing) if missing else row.rstrip().endswith("local")
