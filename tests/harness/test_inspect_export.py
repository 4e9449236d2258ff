"""A run as an Inspect evaluation log (issue 36; turnstate/reports/inspect_log.py): `turnstate export
RUN_DIR --inspect FILE` writes it with Inspect's own log types, and the tests read it back with
Inspect's own reader and have Inspect's own viewer server (`inspect view`) list and serve it."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
import zipfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

inspect_log = pytest.importorskip(
    "inspect_ai.log",
    reason="inspect-ai is not installed (pip install -e '.[inspect]' in turnstate's checkout): the Inspect export "
    "is not tested",
)

from tests.harness.conftest import LEAKED_KEY  # noqa: E402
from tests.harness.test_cli_user import SHIPPED, assert_one_line_error, invoke  # noqa: E402
from tests.harness.test_resume import killed_run  # noqa: E402
from turnstate.durable.events import AssistantMessageEvent, ToolResultEvent, UserInputEvent, read_events  # noqa: E402
from turnstate.durable.layout import CALLS, EVENTS, RUN_META  # noqa: E402
from turnstate.durable.redaction import REDACTED  # noqa: E402
from turnstate.local_provider.server import LocalProvider  # noqa: E402
from turnstate.reports.step import step_messages  # noqa: E402
from turnstate.session.profile import DEFAULT_PROFILE, load_profile  # noqa: E402

USAGE_KEYS = ("input_tokens", "cached_input_tokens", "cache_write_tokens", "output_tokens", "reasoning_tokens")


def meta_of(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / RUN_META).read_text())


def exported(run_dir: Path, tmp_path: Path, suffix: str = ".eval") -> Any:
    """`turnstate export RUN_DIR --inspect FILE` (its one line checked), read back by Inspect's reader (with
    the texts it keeps once, as attachments, put back in place)."""
    path = tmp_path / f"{run_dir.name}{suffix}"
    done = invoke("export", str(run_dir), "--inspect", str(path))
    assert done.exit_code == 0, done.stderr
    log = inspect_log.read_eval_log(str(path), resolve_attachments=True)
    assert done.stdout == f"wrote an Inspect log of {len(log.samples[0].events)} events to {path}\n"
    return log


def usage_as_turnstate_counts(usage: Any) -> dict[str, int]:
    """Inspect's ModelUsage in turnstate's terms (its input tokens include the cache reads and writes)."""
    read, write = usage.input_tokens_cache_read or 0, usage.input_tokens_cache_write or 0
    return {
        "input_tokens": usage.input_tokens + read + write,
        "cached_input_tokens": read,
        "cache_write_tokens": write,
        "output_tokens": usage.output_tokens,
        "reasoning_tokens": usage.reasoning_tokens or 0,
    }


def as_readable(message: Any) -> tuple[str, str]:
    """An Inspect message of a model event's input as the readable message it was made from (its role
    and text; a reasoning summary is the assistant's reasoning)."""
    role = (message.metadata or {}).get("turnstate.role", message.role)
    if role == "reasoning":
        (reasoning,) = message.content
        return role, reasoning.reasoning
    return role, message.text


@pytest.mark.parametrize("name", ["tools", "faulted"])
def test_a_log_read_back_by_inspect_holds_the_accepted_conversation_every_call_and_tool_and_run_metas_usage(
    exported_runs, name, tmp_path
):
    run_dir = exported_runs[name]
    meta, log = meta_of(run_dir), exported(run_dir, tmp_path)
    model = f"openai/{meta['settings']['request']['model']}"
    assert (log.status, log.eval.task, log.eval.model, log.eval.run_id) == (
        "success",
        meta["config_id"],
        model,
        meta["run_id"],
    )
    (sample,) = log.samples
    assert sample.id == meta["run_id"]
    events = [event for _, event in read_events(run_dir / EVENTS).events]
    conversation = [
        {UserInputEvent: "user", AssistantMessageEvent: "assistant", ToolResultEvent: "tool"}[type(event)]
        for event in events
        if isinstance(event, (UserInputEvent, ToolResultEvent))
        or (isinstance(event, AssistantMessageEvent) and event.status == "accepted")
    ]
    assert [message.role for message in sample.messages] == ["system", *conversation]
    accepted = [
        event.text for event in events if isinstance(event, AssistantMessageEvent) and event.status == "accepted"
    ]
    assert [message.text for message in sample.messages if message.role == "assistant"] == accepted
    assert sample.output.completion == accepted[-1]
    model_events = [event for event in sample.events if event.event == "model"]
    tool_events = [event for event in sample.events if event.event == "tool"]
    assert len(model_events) == len((run_dir / CALLS).read_text().splitlines()) == meta["provider_calls"]
    assert len(tool_events) == sum(isinstance(event, ToolResultEvent) for event in events)
    assert [event.timestamp for event in sample.events] == sorted(event.timestamp for event in sample.events)
    totals = {
        key: sum(usage_as_turnstate_counts(event.output.usage)[key] for event in model_events) for key in USAGE_KEYS
    }
    assert totals == {key: meta["usage"][key] for key in USAGE_KEYS}
    assert usage_as_turnstate_counts(sample.model_usage[model]) == totals
    assert usage_as_turnstate_counts(log.stats.model_usage[model]) == totals
    assert (sample.scores["won"].value, sample.scores["levels_won"].value) == (1, meta["levels_won"])
    assert {score.name: score.metrics["mean"].value for score in log.results.scores} == {
        "won": 1.0,
        "levels_won": float(meta["levels_won"]),
    }


def test_each_action_call_holds_the_request_its_step_sent_and_the_verdict_on_its_reply(exported_runs, tmp_path):
    run_dir = exported_runs["faulted"]
    model_events = [event for event in exported(run_dir, tmp_path).samples[0].events if event.event == "model"]
    kinds = Counter(event.metadata["turnstate.call.kind"] for event in model_events)
    assert {"action", "retry", "summary"} <= set(kinds)
    for event in model_events:
        if event.metadata["turnstate.call.kind"] in ("action", "retry"):
            sent = step_messages(run_dir, event.metadata["turnstate.step"])
            assert [as_readable(message) for message in event.input] == [
                (message["role"], message["content"]) for message in sent
            ]
        else:
            assert event.input == []  # a summary call's input is the history
    failed = [event for event in model_events if event.metadata["turnstate.outcome"] not in ("replied", "compacted")]
    assert Counter(event.error for event in failed) == {"transient": 2, "refusal": 1}  # the 429, the 500
    statuses = [
        event.status for _, event in read_events(run_dir / EVENTS).events if isinstance(event, AssistantMessageEvent)
    ]
    verdicts = [event.metadata["turnstate.verdict"] for event in model_events if "turnstate.verdict" in event.metadata]
    assert Counter(verdicts) == Counter(statuses) and {"rejected", "refused"} <= set(verdicts)
    (rejected,) = [event for event in model_events if event.metadata.get("turnstate.verdict") == "rejected"]
    assert rejected.metadata["turnstate.verdict.reason"] and rejected.output.completion


def test_a_json_log_reads_back_as_the_eval_one_does(exported_runs, tmp_path):
    as_eval, as_json = (exported(exported_runs["tools"], tmp_path, suffix).samples[0] for suffix in (".eval", ".json"))
    assert [(message.role, message.text) for message in as_json.messages] == [
        (message.role, message.text) for message in as_eval.messages
    ]
    assert [event.model_dump(exclude={"uuid"}) for event in as_json.events if event.event == "tool"] == [
        event.model_dump(exclude={"uuid"}) for event in as_eval.events if event.event == "tool"
    ]
    assert as_json.model_usage == as_eval.model_usage and as_json.scores == as_eval.scores


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_inspect_view_lists_the_log_and_serves_it_whole(exported_runs, tmp_path):
    """Inspect's own viewer server, as `inspect view` starts it, lists the exported log in its folder
    and serves it as the EvalLog the viewer's page renders."""
    logs = tmp_path / "logs"
    logs.mkdir()
    path = logs / "run.eval"
    assert invoke("export", str(exported_runs["tools"]), "--inspect", str(path)).exit_code == 0
    port = free_port()
    viewer = [sys.executable, "-m", "inspect_ai._cli.main", "view", "--log-dir", str(logs), "--port", str(port)]
    server = subprocess.Popen(viewer, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        base = f"http://127.0.0.1:{port}/api"
        deadline = time.monotonic() + 60
        while True:
            try:
                listing = json.loads(urllib.request.urlopen(f"{base}/log-files", timeout=5).read())
                break
            except OSError:
                assert server.poll() is None, server.stderr.read().decode() if server.stderr else ""
                assert time.monotonic() < deadline, "inspect view did not answer in 60 s"
                time.sleep(0.25)
        (listed,) = listing["files"]
        assert listed["name"] == path.as_uri() and listed["task"] == meta_of(exported_runs["tools"])["config_id"]
        served = urllib.request.urlopen(f"{base}/logs/{urllib.parse.quote(listed['name'], safe='')}", timeout=30)
        log = inspect_log.EvalLog.model_validate_json(served.read())
        assert log.status == "success" and len(log.samples[0].messages) == len(
            inspect_log.read_eval_log(str(path)).samples[0].messages
        )
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_a_killed_run_is_a_log_that_started_and_one_that_failed_closed_ended_in_error(tmp_path, monkeypatch):
    killed = killed_run(load_profile(DEFAULT_PROFILE), tmp_path / "killed", "after_reply", 4)
    log = exported(killed, tmp_path)
    assert log.status == "started" and log.results.completed_samples == 0 and log.error is None
    assert len(log.samples[0].events) == len((killed / CALLS).read_text().splitlines())

    profile = yaml.safe_load(SHIPPED["local-manual-rolling"].read_text())
    with LocalProvider(reply=lambda system, messages: "I am not sure.") as provider:
        profile["client"] = {"base_url": provider.openai_base_url, "api_key_env": "TURNSTATE_TEST_KEY"}
        (tmp_path / "no-action.yaml").write_text(yaml.safe_dump(profile))
        monkeypatch.setenv("TURNSTATE_TEST_KEY", "sk-test-inspect")
        failed = invoke("run", str(tmp_path / "no-action.yaml"), "--out", str(tmp_path / "failed"), "--json")
    run_dir = Path(json.loads(failed.stdout)["run_folder"])
    log = exported(run_dir, tmp_path)
    assert log.status == "error" and log.error.message.startswith("no valid action, retries exhausted")
    assert log.samples[0].error == log.error and log.samples[0].scores["won"].value == 0
    verdicts = [event.metadata["turnstate.verdict"] for event in log.samples[0].events]
    assert verdicts[-1] == "failed" and set(verdicts[:-1]) == {"rejected"}  # the last attempt's, as the turn failed
    assert log.samples[0].events[-1].metadata["turnstate.verdict.reason"] == log.error.message


def test_a_key_the_model_repeats_is_redacted_in_the_log_as_in_the_records(leaked_key_run, tmp_path):
    path = tmp_path / "run.eval"
    assert invoke("export", str(leaked_key_run), "--inspect", str(path)).exit_code == 0
    with zipfile.ZipFile(path) as archive:
        text = b"".join(archive.read(name) for name in archive.namelist()).decode()
    assert LEAKED_KEY not in text and f"Authorization: Bearer {REDACTED}" in text


def test_export_names_what_it_cannot_do_in_one_line(exported_runs, tmp_path, monkeypatch):
    run_dir = str(exported_runs["tools"])
    assert_one_line_error(invoke("export", run_dir), "fix: pass --otlp FILE, --inspect FILE, or both")
    assert_one_line_error(invoke("export", run_dir, "--inspect", str(tmp_path / "x.eval"), "--content"), "--otlp")
    assert_one_line_error(invoke("export", run_dir, "--inspect", str(tmp_path / "x.txt")), "x.txt", "ending in .eval")
    missing = tmp_path / "no-such-folder" / "x.eval"
    assert_one_line_error(invoke("export", run_dir, "--inspect", str(missing)), str(missing), "cannot be written")
    assert not missing.parent.exists()
    assert_one_line_error(
        invoke("export", str(tmp_path), "--inspect", str(tmp_path / "x.eval")), "run_meta.json: missing"
    )
    monkeypatch.setitem(sys.modules, "inspect_ai.log", None)  # as if the inspect extra were not installed
    assert_one_line_error(
        invoke("export", run_dir, "--inspect", str(tmp_path / "x.eval")), "pip install -e '.[inspect]'"
    )
    assert not list(tmp_path.glob("*.eval")) and not list(tmp_path.glob(".*"))
