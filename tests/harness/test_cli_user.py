"""The command line a user expects (issue 20): shipped profiles by name, `list`, `schema`, a `show`
that reads as a step, and `--json` for scripts. Each bad input is one line on stderr, never a traceback,
and nothing printed holds a key or opaque provider state."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from turnstate.adapters.registry import ADAPTERS
from turnstate.cli import main
from turnstate.durable.artifacts import sent_messages
from turnstate.durable.layout import step_name
from turnstate.environments import environment_ids
from turnstate.local_provider.server import LocalProvider
from turnstate.session.profile import load_profile, shipped_profiles
from turnstate.strategies import STRATEGIES

from ..arc_extra import needs_toolkit

CLI = [sys.executable, "-m", "turnstate.cli"]
SHIPPED = shipped_profiles()


def invoke(*args: str) -> Result:
    """The command in-process; an exception other than the command's own exit fails the test."""
    result = CliRunner().invoke(main, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


def assert_one_line_error(result: Result, *fragments: str) -> str:
    assert result.exit_code == 1, result.stderr
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    for fragment in fragments:
        assert fragment in line
    return line


def run_json(*args: str) -> dict[str, Any]:
    result = invoke("run", *args, "--json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def summarized_run(tmp_path_factory) -> Path:
    """A run of the shipped harness-summary profile, which installs two summaries in 21 steps."""
    return Path(run_json("local-openai-harness-summary", "--out", str(tmp_path_factory.mktemp("runs")))["run_folder"])


def read_step(run_dir: Path, step: int) -> dict[str, Any]:
    return json.loads((run_dir / step_name(step)).read_text())


# Shipped profiles by name


def test_run_takes_a_shipped_profile_by_name_from_any_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no profiles/ folder here
    document = run_json("local-openai-previous-response-id", "--out", "runs")
    assert document["config_id"] == "local-openai-previous-response-id"
    assert document["outcome"] == "win"
    assert Path(document["run_folder"]).parent == Path("runs")


@pytest.mark.parametrize("name", ["local-openai-continuous", "local-openai-continuous.yaml"])
def test_validate_takes_a_shipped_profile_by_name_with_or_without_yaml(tmp_path, monkeypatch, name):
    monkeypatch.chdir(tmp_path)
    result = invoke("validate", name)
    assert (result.exit_code, result.stdout) == (0, f"{name}: ok\n")


def test_diagrams_take_a_shipped_profile_by_name(tmp_path):
    result = invoke("diagrams", "--profile", "local-xai-continuous", "--out", str(tmp_path))
    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "continuous_conversation.native_call.svg").is_file()


@pytest.mark.parametrize(
    "command",
    [
        ("run", "local-opeanai-continuous"),
        ("validate", "local-opeanai-continuous"),
        ("diagrams", "--profile", "local-opeanai-continuous"),
    ],
)
def test_a_name_that_is_neither_a_file_nor_a_shipped_profile_exits_1_listing_the_shipped_names(
    tmp_path, monkeypatch, command
):
    monkeypatch.chdir(tmp_path)
    line = assert_one_line_error(
        invoke(*command), "local-opeanai-continuous: (top level): no such file, nor a shipped profile of that name"
    )
    assert line.endswith(
        "fix: did you mean local-openai-continuous? pass a profile's path, or the name of a shipped one: "
        + ", ".join(SHIPPED)
    )
    assert list(tmp_path.iterdir()) == []  # nothing ran


def test_a_file_in_the_current_folder_is_read_before_a_shipped_profile_of_the_same_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("local-manual-rolling").write_text("id: mine\n")
    result = invoke("validate", "local-manual-rolling")
    assert result.exit_code == 1
    assert result.stderr.startswith("local-manual-rolling: agent: required key is missing")


# list


def test_list_shows_the_shipped_profiles_adapters_with_review_status_strategies_with_compaction_kinds_and_environments():
    result = invoke("list")
    assert result.exit_code == 0, result.stderr
    rows = [line.split() for line in result.stdout.splitlines()]
    for name, path in SHIPPED.items():
        if needs_toolkit(path):
            continue  # refused at validation without the ARC-AGI-3 toolkit (tests/arc_extra.py)
        profile = load_profile(path)
        runtime = profile.runtime
        assert [
            name,
            runtime.adapter_id,
            runtime.strategy,
            runtime.compaction.strategy,
            profile.client.base_url,
        ] in rows
    for descriptor in ADAPTERS.values():
        row = [descriptor.adapter_id, descriptor.review_status, descriptor.provider]
        assert row + [f"{strategy}," for strategy in descriptor.strategies[:-1]] + [descriptor.strategies[-1]] in rows
    for name, strategy in STRATEGIES.items():
        assert [name, *(f"{kind}," for kind in list(strategy.specs)[:-1]), list(strategy.specs)[-1]] in rows
    environments = result.stdout.split("environments\n")[1].splitlines()[1:]
    assert [line.strip() for line in environments if line.strip()] == environment_ids()


def test_list_json_holds_every_profile_adapter_strategy_and_environment():
    result = invoke("list", "--json")
    assert result.exit_code == 0, result.stderr
    listed = json.loads(result.stdout)
    profiles = {entry["name"]: entry for entry in listed["profiles"]}
    assert list(profiles) == list(SHIPPED)
    for name, path in SHIPPED.items():
        if needs_toolkit(path):
            continue  # refused at validation without the ARC-AGI-3 toolkit (tests/arc_extra.py)
        runtime = load_profile(path).runtime
        assert (profiles[name]["adapter"], profiles[name]["strategy"], profiles[name]["compaction"]) == (
            runtime.adapter_id,
            runtime.strategy,
            runtime.compaction.strategy,
        )
    assert {a["id"]: a["review_status"] for a in listed["adapters"]} == {
        adapter_id: descriptor.review_status for adapter_id, descriptor in ADAPTERS.items()
    }
    assert {s["name"]: s["compaction_kinds"] for s in listed["strategies"]} == {
        name: list(strategy.specs) for name, strategy in STRATEGIES.items()
    }
    assert [e["id"] for e in listed["environments"]] == environment_ids()


# schema


def printed_schema() -> dict[str, Any]:
    result = invoke("schema")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


# Keywords that JSON Schema added after draft 7, which the YAML language server does not support.
NEWER_THAN_DRAFT_7 = {
    "$anchor",
    "$dynamicAnchor",
    "$dynamicRef",
    "$recursiveAnchor",
    "$recursiveRef",
    "$vocabulary",
    "dependentRequired",
    "dependentSchemas",
    "maxContains",
    "minContains",
    "prefixItems",
    "unevaluatedItems",
    "unevaluatedProperties",
}


def keywords(schema: Any) -> set[str]:
    """Every keyword used anywhere in `schema` (the names of properties and $defs are not keywords)."""
    if isinstance(schema, list):
        return set().union(*map(keywords, schema))
    if not isinstance(schema, dict):
        return set()
    found = set(schema)
    for key, value in schema.items():
        named = key in ("properties", "$defs") and isinstance(value, dict)
        found |= set().union(*map(keywords, value.values() if named else [value]))
    return found


CHOICES = [
    ("RuntimeConfig", "adapter_id"),
    ("RuntimeConfig", "strategy"),
    ("CompactionConfig", "strategy"),
    ("EnvironmentConfig", "name"),
]


def test_schema_is_draft_7_names_the_registered_choices_and_holds_every_top_level_section_of_every_shipped_profile():
    """Runs without the jsonschema package: the structure an editor relies on."""
    schema = printed_schema()
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    assert not keywords(schema) & NEWER_THAN_DRAFT_7
    assert schema["additionalProperties"] is False
    enums = {(model, key): schema["$defs"][model]["properties"][key].get("enum") for model, key in CHOICES}
    assert enums == {
        ("RuntimeConfig", "adapter_id"): sorted(ADAPTERS),
        ("RuntimeConfig", "strategy"): list(STRATEGIES),
        ("CompactionConfig", "strategy"): ["none", "native", "harness_summary"],
        ("EnvironmentConfig", "name"): environment_ids(),
    }
    for path in SHIPPED.values():
        assert set(yaml.safe_load(path.read_text())) <= set(schema["properties"]), path.name


def test_every_shipped_profile_validates_against_the_printed_schema_and_a_misspelt_key_or_unknown_adapter_does_not():
    jsonschema = pytest.importorskip("jsonschema", reason="the jsonschema package is not installed")
    schema = printed_schema()
    jsonschema.Draft7Validator.check_schema(schema)
    validator = jsonschema.Draft7Validator(schema)
    for path in SHIPPED.values():
        assert [error.message for error in validator.iter_errors(yaml.safe_load(path.read_text()))] == [], path.name
    profile = yaml.safe_load(SHIPPED["local-manual-rolling"].read_text())
    misspelt = profile | {"agent": profile["agent"] | {"max_retrys": 3}}
    assert "'max_retrys' was unexpected" in next(validator.iter_errors(misspelt)).message
    unknown = profile | {"runtime": profile["runtime"] | {"adapter_id": "openai.chat.v9"}}
    assert "'openai.chat.v9' is not one of" in next(validator.iter_errors(unknown)).message


# show


def test_show_prints_a_step_that_installed_a_summary_as_a_person_reads_it(summarized_run):
    step = next(n for n in range(1, 22) if "continuation" in read_step(summarized_run, n))
    record = read_step(summarized_run, step)
    result = invoke("show", str(summarized_run), "--step", str(step))
    assert result.exit_code == 0, result.stderr
    shown = result.stdout.splitlines()
    # the settings the run used, from run_meta.json
    assert "request: model local-policy-1, max_output_tokens 256, output_limit_param max_completion_tokens" in (
        result.stdout
    )
    assert "compaction: strategy harness_summary, kind harness_summary, trigger_tokens 1500" in result.stdout
    # the summary call made before the request
    assert "compaction and summary calls before the request: 1" in shown
    assert any(line.startswith("  1. compacted · summary input lane trigger, form fork") for line in shown)
    # what was dropped and compacted since the previous step
    dropped = record["request"]["dropped"]
    assert f"since step {step - 1}:" in shown
    assert f"  dropped the {dropped} oldest messages of its request:" in shown
    assert sum(line.startswith("    - ") for line in shown) == dropped
    history = record["history"]
    assert (
        f"  accepted history: {history['items_before']} items before the turn, {history['items_after']} after its commit"
        in shown
    )
    assert any(line.startswith("  compaction committed: by summary") for line in shown)
    assert "    " + record["continuation"]["summary"] in shown
    # the messages with their line breaks, each marked new or not
    messages = sent_messages(summarized_run, step)
    frame = messages[-1]["content"]
    assert "\n".join("    " + line for line in frame.splitlines()) in result.stdout
    assert "\\n" not in result.stdout
    assert f"[{len(messages)}] user · new" in shown and "[1] system" in shown
    # the reply
    assert f"  action: {record['action']}" in shown


def test_show_marks_the_messages_a_native_compaction_call_dropped_and_sent_again(tmp_path):
    run_dir = Path(run_json("local-xai-continuous", "--out", str(tmp_path))["run_folder"])
    step = next(n for n in range(1, 22) if (read_step(run_dir, n)["compaction"] or {}).get("by") == "call")
    result = invoke("show", str(run_dir), "--step", str(step))
    assert result.exit_code == 0, result.stderr
    messages = sent_messages(run_dir, step)
    added = messages[len(messages) - len(read_step(run_dir, step)["request"]["added"]) :]
    again = [m for m in added if m in sent_messages(run_dir, step - 1)]
    assert again  # xAI's compacted window keeps every user message
    assert f"{len(again)} of them dropped above and sent again (marked again)" in result.stdout
    marks = [line for line in result.stdout.splitlines() if line.startswith("[")]
    assert sum(line.endswith(" · again") for line in marks) == len(again)
    assert marks[[m["role"] for m in messages].index("compaction")].endswith("compaction · new")


def test_show_json_prints_the_request_the_step_sent(summarized_run):
    result = invoke("show", str(summarized_run), "--step", "5", "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == sent_messages(summarized_run, 5)


def step_files(run_dir: Path, *steps: int) -> Path:
    first = {"after_step": None, "dropped": 0, "added": [{"role": "system", "content": "Play."}]}
    for step in steps:
        (run_dir / step_name(step)).write_text(json.dumps({"step": step, "request": first}))
    return run_dir


@pytest.mark.parametrize(
    ("steps", "problem"),
    [
        ((1, 2, 3, 5, 7, 8), "recorded no step 4; its steps are 1-3, 5, 7-8; fix: pass one of them"),
        ((), "holds no step records; fix: pass a run folder that `turnstate run` wrote"),
    ],
    ids=["some steps", "no steps"],
)
def test_show_of_a_step_the_run_did_not_record_lists_the_steps_that_exist(tmp_path, steps, problem):
    step_files(tmp_path, *steps)
    for output in ([], ["--json"]):
        assert_one_line_error(invoke("show", str(tmp_path), "--step", "4", *output), f"error: {tmp_path} {problem}")


def test_show_of_a_folder_that_does_not_exist_is_one_line(tmp_path):
    assert_one_line_error(invoke("show", str(tmp_path / "nope"), "--step", "1"), "cannot read the folder")


KEY = "sk-test-show-0123456789abcdef"


def test_show_never_prints_opaque_state_the_key_or_terminal_control_characters(tmp_path, monkeypatch):
    monkeypatch.setenv("TURNSTATE_TEST_KEY", KEY)
    (tmp_path / "run_meta.json").write_text(json.dumps({"settings": {"client": {"api_key_env": "TURNSTATE_TEST_KEY"}}}))
    opaque = "gAAAAB" + "x" * 300
    added = [
        {"role": "system", "content": "Play."},
        {"role": "user", "content": f"frame\x1b[2J with {KEY}", "encrypted_content": opaque},
    ]
    record = {
        "step": 1,
        "request": {"after_step": None, "dropped": 0, "added": added},
        "response_text": "ACTION: UP",
        "compaction_calls": [{"outcome": "compacted", "diagnostics": {"signature": opaque}, "usage": {}}],
        "action": "UP",
    }
    (tmp_path / step_name(1)).write_text(json.dumps(record))
    text, as_json = (invoke("show", str(tmp_path), "--step", "1", *output) for output in ([], ["--json"]))
    for result in (text, as_json):
        assert result.exit_code == 0, result.stderr
        assert KEY not in result.stdout and opaque not in result.stdout and "\x1b" not in result.stdout
    assert "    frame\\u001b[2J with [redacted]" in text.stdout.splitlines()
    assert json.loads(as_json.stdout)[1] == {"role": "user", "content": "frame\x1b[2J with [redacted]"}


def test_show_prints_what_it_can_of_a_record_whose_other_fields_are_not_what_a_run_writes(tmp_path):
    step_files(tmp_path, 1)
    record = json.loads((tmp_path / step_name(1)).read_text())
    record |= {"history": "x", "compaction": 5, "compaction_calls": "y", "retries": [1, None], "usage": []}
    record |= {"continuation": {"compaction": "one"}, "response_text": 7, "cost_estimate": "free"}
    (tmp_path / step_name(1)).write_text(json.dumps(record))
    (tmp_path / "run_meta.json").write_text("[1, 2")
    result = invoke("show", str(tmp_path), "--step", "1")
    assert result.exit_code == 0, result.stderr
    assert "settings: unknown (no readable run_meta.json" in result.stdout
    assert "[1] system · new" in result.stdout


# --json on run and validate; the summary table names the run folder


def test_run_json_prints_one_document_with_the_outcome_the_run_folder_and_the_totals(tmp_path):
    result = invoke("run", "local-manual-rolling", "--out", str(tmp_path), "--json")
    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)  # one document, nothing else on stdout
    (run_dir,) = tmp_path.iterdir()
    assert document == {"run_folder": str(run_dir), **json.loads((run_dir / "run_meta.json").read_text())}
    assert (document["outcome"], document["levels_won"]) == ("win", 3)
    assert document["accepted_actions"] == len(list(run_dir.glob("step_*.json")))


def test_run_json_of_a_run_that_failed_closed_exits_1_with_its_outcome_and_failure(tmp_path, monkeypatch):
    def no_action(system, messages):
        return "I am not sure."

    profile = yaml.safe_load(SHIPPED["local-manual-rolling"].read_text())
    with LocalProvider(reply=no_action) as provider:
        profile["client"] = {"base_url": provider.openai_base_url, "api_key_env": "TURNSTATE_TEST_KEY"}
        path = tmp_path / "no-action.yaml"
        path.write_text(yaml.safe_dump(profile))
        monkeypatch.setenv("TURNSTATE_TEST_KEY", "sk-test-json")
        result = invoke("run", str(path), "--out", str(tmp_path / "runs"), "--json")
    assert result.exit_code == 1
    document = json.loads(result.stdout)
    assert document["outcome"] == "failed_closed"
    assert document["failure"].startswith("no valid action, retries exhausted")
    assert Path(document["run_folder"], "failed_turn.json").is_file()


def test_validate_json_reports_each_profile_with_its_file_and_problems(tmp_path):
    bad = tmp_path / "bad.yaml"
    profile = yaml.safe_load(SHIPPED["local-manual-rolling"].read_text())
    bad.write_text(yaml.safe_dump(profile | {"agent": profile["agent"] | {"max_retries": "three"}}))
    result = invoke("validate", "--json", "local-manual-rolling", str(bad), "nope")
    assert result.exit_code == 1
    assert result.stderr == ""
    document = json.loads(result.stdout)
    assert document["valid"] is False
    good, invalid, missing = document["profiles"]
    assert good == {
        "profile": "local-manual-rolling",
        "file": str(SHIPPED["local-manual-rolling"]),
        "valid": True,
        "problems": [],
    }
    assert (invalid["file"], invalid["valid"]) == (str(bad), False)
    assert [problem["key"] for problem in invalid["problems"]] == ["agent.max_retries"]
    assert invalid["problems"][0]["fix"] == "use a whole number"
    assert (missing["file"], missing["valid"]) == (None, False)
    assert missing["problems"][0]["problem"] == "no such file, nor a shipped profile of that name"
    assert json.loads(invoke("validate", "--json", "local-manual-rolling").stdout)["valid"] is True


def test_the_run_summary_table_names_the_run_folder(tmp_path):
    # A subprocess: the table is drawn for the process's terminal, here a wide one.
    env = {**os.environ, "COLUMNS": "400"}
    done = subprocess.run(
        [*CLI, "run", "local-manual-rolling", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    (run_dir,) = tmp_path.iterdir()
    (row,) = [line for line in done.stdout.splitlines() if "run folder" in line]
    assert row.split("│")[2].strip() == str(run_dir)


def test_show_prints_a_tool_rounds_calls_and_the_step_that_read_their_results(tmp_path):
    from turnstate.session.profile import DEFAULT_PROFILE, Profile
    from turnstate.session.runner import Runner

    data = load_profile(DEFAULT_PROFILE).model_dump()
    data["environment"] = {"name": "catalog_hunt", "seed": 1, "options": {"levels": 1}}
    result = Runner(Profile.model_validate(data), tmp_path).run()
    shown = invoke("show", str(result.artifacts), "--step", "1")
    assert shown.exit_code == 0, shown.stderr
    call = read_step(result.artifacts, 1)["tool_calls"][0]
    assert f'tool call {call["id"]}: read_catalog({{"page":' in shown.stdout
    assert "action: none, a tool round (the results of its calls open the next step)" in shown.stdout
    after = invoke("show", str(result.artifacts), "--step", "2")
    assert "CATALOG PAGE" in after.stdout and "action: MARK " in after.stdout
