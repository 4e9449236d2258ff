"""Traces people already read (issue 36): a run's OpenTelemetry spans in the GenAI semantic
conventions (turnstate/durable/traces.py), exported from a run folder as OTLP/JSON (`turnstate export
RUN_DIR --otlp FILE`, read back strictly with OpenTelemetry's own protobuf types) and sent live by
the OpenTelemetry SDK to a real backend nobody here wrote: Arize Phoenix (tools/phoenix.py), which
must take every span of a 300-turn run, with the token totals of its run_meta.json."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "opentelemetry.sdk.trace",
    reason="the OpenTelemetry SDK is not installed (pip install -e '.[otel]' in turnstate's checkout): traces are not tested",
)

from tests.harness.conftest import LEAKED_KEY  # noqa: E402
from tests.harness.test_cli_user import assert_one_line_error, invoke  # noqa: E402
from tests.harness.test_resume import killed_run  # noqa: E402
from tests.tools import tool  # noqa: E402
from turnstate.durable.events import ToolResultEvent, read_events  # noqa: E402
from turnstate.durable.layout import CALLS, EVENTS, RUN_META  # noqa: E402
from turnstate.durable.redaction import REDACTED  # noqa: E402
from turnstate.durable.traces import USAGE_ATTRIBUTES, span_id, trace_id  # noqa: E402
from turnstate.session.profile import DEFAULT_PROFILE, load_profile  # noqa: E402

phoenix_tool = tool("phoenix")  # tools/phoenix.py (the name `phoenix` is Phoenix's own package only in its venv)


def meta_of(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / RUN_META).read_text())


def exported(run_dir: Path, tmp_path: Path, *options: str) -> list[dict[str, Any]]:
    """`turnstate export RUN_DIR --otlp FILE` (its one line checked), the file read back as
    OpenTelemetry's protobuf types read it (strictly: an unknown field or a wrong type fails), its spans."""
    path = tmp_path / f"{run_dir.name}{''.join(options)}.otlp.json"
    done = invoke("export", str(run_dir), "--otlp", str(path), *options)
    assert done.exit_code == 0, done.stderr
    request = protobuf_request(path.read_bytes())
    spans = [
        span for resource in request["resourceSpans"] for scope in resource["scopeSpans"] for span in scope["spans"]
    ]
    assert done.stdout == f"wrote {len(spans)} spans to {path}\n"
    return spans


def protobuf_request(otlp_json: bytes) -> dict[str, Any]:
    """An OTLP/JSON file, checked by parsing it as an ExportTraceServiceRequest (`as_protobuf`),
    returned as the file holds it."""
    as_protobuf(otlp_json)
    (line,) = otlp_json.splitlines()
    return json.loads(line)


def as_protobuf(otlp_json: bytes) -> Any:
    """An OTLP/JSON file as the ExportTraceServiceRequest it encodes, parsed strictly by OpenTelemetry's
    own protobuf types (its ids hex, as OTLP's JSON encoding has them, made the protobuf JSON
    mapping's base64 first)."""
    from google.protobuf import json_format
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    (line,) = otlp_json.splitlines()
    request = json.loads(line)
    for resource in request["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            for span in scope["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
    return json_format.Parse(json.dumps(request), ExportTraceServiceRequest())


def attributes(span: dict[str, Any]) -> dict[str, Any]:
    """An OTLP/JSON span's attributes as plain values."""
    plain = {}
    for attribute in span["attributes"]:
        (kind, value), *_ = attribute["value"].items()
        plain[attribute["key"]] = int(value) if kind == "intValue" else value
    return plain


def by_operation(spans: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = {}
    for span in spans:
        grouped.setdefault(attributes(span)["gen_ai.operation.name"], []).append(span)
    return grouped


@pytest.mark.parametrize("name", ["tools", "faulted"])
def test_an_export_has_a_span_per_call_and_timed_tool_under_one_run_span_with_run_metas_token_totals(
    exported_runs, name, tmp_path
):
    run_dir = exported_runs[name]
    meta, spans = meta_of(run_dir), exported(run_dir, tmp_path)
    grouped = by_operation(spans)
    (run_span,) = grouped["invoke_agent"]
    calls = (run_dir / CALLS).read_text().splitlines()
    results = [event for _, event in read_events(run_dir / EVENTS).events if isinstance(event, ToolResultEvent)]
    assert len(grouped["chat"]) == len(calls) == meta["provider_calls"]
    assert len(grouped.get("execute_tool", [])) == len(results)  # the runner timed every tool it ran
    assert {span["traceId"] for span in spans} == {trace_id(meta["run_id"])}
    assert run_span["spanId"] == span_id(meta["run_id"], "run") and "parentSpanId" not in run_span
    assert {span["parentSpanId"] for span in spans if span is not run_span} == {run_span["spanId"]}
    assert len({span["spanId"] for span in spans}) == len(spans)
    for key, attribute in USAGE_ATTRIBUTES.items():
        assert sum(attributes(span)[attribute] for span in grouped["chat"]) == meta["usage"][key], key
        assert attributes(run_span)[attribute] == meta["usage"][key], key
    said = attributes(run_span)
    assert said["gen_ai.conversation.id"] == meta["run_id"] and said["gen_ai.agent.name"] == meta["config_id"]
    assert said["turnstate.outcome"] == meta["outcome"] == "win"
    assert run_span["name"] == f"invoke_agent {meta['config_id']}"
    first = min(int(span["startTimeUnixNano"]) for span in spans)
    assert int(run_span["startTimeUnixNano"]) == first <= int(run_span["endTimeUnixNano"])


def test_each_call_says_its_kind_and_outcome_and_each_reply_its_verdict(exported_runs, tmp_path):
    run_dir = exported_runs["faulted"]
    chats = [attributes(span) for span in by_operation(exported(run_dir, tmp_path))["chat"]]
    assert {"action", "retry", "summary"} <= {chat["turnstate.call.kind"] for chat in chats}
    failed = [chat for chat in chats if chat["turnstate.outcome"] not in ("replied", "compacted")]
    assert Counter(chat["turnstate.outcome"] for chat in failed) == {"transient": 2, "refusal": 1}  # the 429, the 500
    assert all(chat["error.type"] == chat["turnstate.outcome"] for chat in failed)
    messages = [event for _, event in read_events(run_dir / EVENTS).events if event.kind == "assistant_message"]
    verdicts = Counter(chat["turnstate.verdict"] for chat in chats if "turnstate.verdict" in chat)
    assert verdicts == Counter(message.status for message in messages)
    assert verdicts["rejected"] == 1 and verdicts["refused"] == 1
    (rejected,) = [chat for chat in chats if chat.get("turnstate.verdict") == "rejected"]
    assert rejected["turnstate.verdict.reason"]
    assert "gen_ai.input.messages" not in rejected and "gen_ai.output.messages" not in rejected


def test_an_error_span_says_so_in_its_status(exported_runs, tmp_path):
    spans = exported(exported_runs["faulted"], tmp_path)
    errors = [(attributes(span)["turnstate.outcome"], span["status"]) for span in spans if span["status"]]
    assert sorted(errors) == [
        (outcome, {"code": 2, "message": outcome}) for outcome in ("refusal", "transient", "transient")
    ]


def test_content_is_in_the_spans_only_when_asked_for_and_then_as_the_events_hold_it(exported_runs, tmp_path):
    run_dir = exported_runs["tools"]
    content_keys = {
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
    }
    plain = exported(run_dir, tmp_path)
    assert not any(content_keys & set(attributes(span)) for span in plain)
    with_content = exported(run_dir, tmp_path, "--content")
    said = [attributes(span) for span in with_content]
    assert all(content_keys & set(one) for one in said if one["gen_ai.operation.name"] != "invoke_agent")
    texts = set()
    for _, event in read_events(run_dir / EVENTS).events:
        texts |= {value for value in vars(event).values() if isinstance(value, str)}
    for one in said:
        for key in content_keys & set(one):
            assert all(text in texts for text in leaves(one[key], key)), key


def leaves(value: str, key: str) -> list[str]:
    """The texts inside a content attribute: a message list's contents, a result's text, arguments' JSON."""
    if key == "gen_ai.tool.call.result":
        return [value]
    if key == "gen_ai.tool.call.arguments":
        return [text for text in json.loads(value).values() if isinstance(text, str)]
    return [part.get("content", part.get("response")) for message in json.loads(value) for part in message["parts"]]


def test_a_key_the_model_repeats_is_redacted_in_the_spans_as_in_the_records(leaked_key_run, tmp_path):
    path = tmp_path / "trace.json"
    assert invoke("export", str(leaked_key_run), "--otlp", str(path), "--content").exit_code == 0
    text = path.read_text()
    assert LEAKED_KEY not in text and f"Authorization: Bearer {REDACTED}" in text


def test_export_names_a_folder_that_is_no_run_and_a_file_it_cannot_write(exported_runs, tmp_path):
    assert_one_line_error(invoke("export", str(tmp_path), "--otlp", str(tmp_path / "t.json")), "run_meta.json: missing")
    unwritable = tmp_path / "no-such-folder" / "t.json"
    assert_one_line_error(
        invoke("export", str(exported_runs["tools"]), "--otlp", str(unwritable)), str(unwritable), "cannot be written"
    )
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / RUN_META).write_text(json.dumps(meta_of(exported_runs["tools"])))
    (broken / CALLS).write_text('{"call": 1}\nnot json\n')
    assert_one_line_error(
        invoke("export", str(broken), "--otlp", str(tmp_path / "t.json")), "calls.jsonl: line 2 is not a provider call"
    )


# Live, to a real backend.


@pytest.fixture(scope="module")
def phoenix() -> Iterator[Any]:
    command = phoenix_tool.executable()
    if command is None:
        pytest.skip(f"Phoenix is not installed: `python tools/phoenix.py install` puts it in {phoenix_tool.home()}")
    with phoenix_tool.running_phoenix(command) as server:
        yield server


def arrived(phoenix: Any, project: str, count: int, seconds: float = 60) -> list[dict[str, Any]]:
    """The spans Phoenix stored for `project`, once it holds `count` (it stores them in the background)."""
    deadline = time.monotonic() + seconds
    while True:
        spans = phoenix.spans(project)
        if len(spans) >= count or time.monotonic() > deadline:
            return spans
        time.sleep(0.25)


def traced_to(monkeypatch, endpoint: str, project: str) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", endpoint)
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", f"openinference.project.name={project}")


def test_a_300_turn_run_traced_live_arrives_whole_at_phoenix_with_run_metas_token_totals(
    phoenix, tmp_path, monkeypatch
):
    traced_to(monkeypatch, phoenix.traces_url, "long-run")
    done = invoke(
        "run",
        "--set",
        "agent.max_actions=300",
        "--set",
        "environment.options.levels=60",
        "--out",
        str(tmp_path),
        "--json",
    )
    assert done.exit_code == 0, done.stderr
    assert "were not taken" not in done.stderr
    run_dir = Path(json.loads(done.stdout)["run_folder"])
    meta = meta_of(run_dir)
    assert meta["turns"] == meta["provider_calls"] == 300
    expected = {span["spanId"]: span for span in exported(run_dir, tmp_path)}
    stored = arrived(phoenix, "long-run", len(expected))
    assert {span["context"]["span_id"] for span in stored} == set(expected)
    assert {span["context"]["trace_id"] for span in stored} == {trace_id(meta["run_id"])}
    chats = [span for span in stored if span["attributes"]["gen_ai.operation.name"] == "chat"]
    (run_span,) = [span for span in stored if span["attributes"]["gen_ai.operation.name"] == "invoke_agent"]
    assert len(chats) == 300
    for key, attribute in USAGE_ATTRIBUTES.items():
        assert sum(span["attributes"][attribute] for span in chats) == meta["usage"][key], key
        assert run_span["attributes"][attribute] == meta["usage"][key], key
    for span in stored:  # what arrived is what the export says, attribute by attribute
        assert span["attributes"].items() >= attributes(expected[span["context"]["span_id"]]).items()
    assert run_span["span_kind"] == "AGENT" and {span["span_kind"] for span in chats} == {"LLM"}


def test_a_resumed_run_traces_what_it_adds_under_a_run_span_of_its_own(phoenix, tmp_path, monkeypatch):
    """Killed after its fourth reply (its call journaled, its turn not committed), untraced; resumed
    traced: the resume's spans are the calls it made, parented on `run resume 1`, with nothing of
    the first process's sent."""
    profile = load_profile(DEFAULT_PROFILE)
    run_dir = killed_run(profile, tmp_path / "runs", "after_reply", 4)
    before = len((run_dir / CALLS).read_text().splitlines())
    traced_to(monkeypatch, phoenix.traces_url, "resumed")
    done = invoke("resume", str(run_dir))
    assert done.exit_code == 0, done.stderr
    meta = meta_of(run_dir)
    calls = len((run_dir / CALLS).read_text().splitlines())
    stored = arrived(phoenix, "resumed", calls - before + 1)
    root = span_id(meta["run_id"], "run resume 1")
    (run_span,) = [span for span in stored if span["parent_id"] is None]
    assert run_span["context"]["span_id"] == root and run_span["attributes"]["turnstate.outcome"] == "win"
    chats = sorted(span["attributes"]["turnstate.call.number"] for span in stored if span["parent_id"] == root)
    assert chats == list(range(before + 1, calls + 1)) and len(stored) == len(chats) + 1


def test_an_exported_file_sent_to_phoenix_is_taken_whole(phoenix, exported_runs, tmp_path):
    """The OTLP/JSON file, made the protobuf request it encodes, is what a collector would forward."""
    spans = exported(exported_runs["faulted"], tmp_path)
    request = as_protobuf((tmp_path / f"{exported_runs['faulted'].name}.otlp.json").read_bytes())
    project = request.resource_spans[0].resource.attributes.add()
    project.key, project.value.string_value = "openinference.project.name", "exported"
    assert phoenix.post(request.SerializeToString()) == 200
    stored = arrived(phoenix, "exported", len(spans))
    assert sorted(span["context"]["span_id"] for span in stored) == sorted(span["spanId"] for span in spans)
    errors = sorted(span["attributes"]["turnstate.outcome"] for span in stored if span["status_code"] == "ERROR")
    assert errors == ["refusal", "transient", "transient"]


def test_a_receiver_that_is_down_never_fails_the_run_and_is_named_in_a_warning(tmp_path):
    """As a person at a terminal sees it: the command's own stderr."""
    endpoint = f"http://127.0.0.1:{phoenix_tool.free_port()}/v1/traces"  # nothing listens there
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "turnstate.cli",
            "run",
            "--set",
            "agent.max_actions=5",
            "--out",
            str(tmp_path),
            "--json",
        ],
        env={**_environment(), "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": endpoint, "OTEL_EXPORTER_OTLP_TIMEOUT": "1"},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    run_dir = Path(json.loads(done.stdout)["run_folder"])
    assert f"traces: 6 of 6 spans of {run_dir.name} were not taken by {endpoint}" in done.stderr
    assert f"turnstate export {run_dir} --otlp FILE" in done.stderr


def test_tracing_asked_for_without_the_sdk_is_refused_before_the_run_starts(tmp_path):
    blocked = "import sys; sys.modules['opentelemetry.sdk.trace'] = None; from turnstate.cli import main; main()"
    done = subprocess.run(
        [sys.executable, "-c", blocked, "run", "--out", str(tmp_path)],
        env={**_environment(), "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip() == (
        "error: OTEL_EXPORTER_OTLP_ENDPOINT is set, but the OpenTelemetry SDK is not installed; "
        "fix: pip install 'turnstate[otel]', or unset OTEL_EXPORTER_OTLP_ENDPOINT"
    )
    assert list(tmp_path.iterdir()) == []


def test_a_protocol_other_than_http_protobuf_is_refused_naming_the_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    assert_one_line_error(
        invoke("run", "--out", str(tmp_path)),
        "OTEL_EXPORTER_OTLP_PROTOCOL=grpc",
        "fix: set OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
    )
    assert list(tmp_path.iterdir()) == []


def _environment() -> dict[str, str]:
    import os

    return {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
