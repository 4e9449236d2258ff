"""The artifact writer is the one place that keeps opaque provider state and secrets out of files."""

from __future__ import annotations

import json
import os
import time

import pytest

from turnstate.adapters.chat_completions import ChatMessages
from turnstate.adapters.contract import ModelRequest, Usage
from turnstate.durable.artifacts import (
    ACTION_METADATA_BYTES,
    Attempt,
    CallKind,
    compaction_record,
    fitted,
    item_descriptor,
    request_delta,
    sent_messages,
    step_record,
)
from turnstate.durable.layout import step_name
from turnstate.durable.redaction import REDACTED, Redactor
from turnstate.durable.transition_log import TransitionLines
from turnstate.durable.writer import ArtifactWriter
from turnstate.strategies.events import ReportSummary
from turnstate.strategies.summary import SummaryPass

OPAQUE = {
    "type": "reasoning",
    "encrypted_content": "gAAAA-opaque",
    "summary": [{"type": "summary_text", "text": "thought about doors"}],
    "blocks": [
        {"type": "thinking", "thinking": "readable", "signature": "sig-opaque"},
        {"type": "redacted_thinking", "data": "redacted-opaque"},
        {"type": "tool_result", "data": "kept: only redacted_thinking data is opaque"},
        {"thought_signature": "thought-opaque", "text": "kept"},
    ],
}


def test_scrub_drops_opaque_state_and_keeps_the_readable_rest():
    cleaned = json.dumps(Redactor().scrub(OPAQUE))
    for opaque in ("gAAAA-opaque", "sig-opaque", "redacted-opaque", "thought-opaque"):
        assert opaque not in cleaned
    for readable in (
        "thought about doors",
        "readable",
        "kept: only redacted_thinking data is opaque",
        '"text": "kept"',
    ):
        assert readable in cleaned


def test_every_artifact_is_scrubbed_and_secrets_are_replaced(tmp_path):
    writer = ArtifactWriter(tmp_path, "run-1", Redactor(("sk-secret-123",)))
    writer.write_step(1, {"state": OPAQUE, "note": "key was sk-secret-123"})
    writer.write_json("run_meta.json", {"settings": {"header": "Bearer sk-secret-123"}})
    writer.log_transition({"event": "x", "blob": OPAQUE})
    writer.close()
    written = {path.name: path.read_text() for path in (tmp_path / "run-1").iterdir()}
    assert set(written) == {"step_000001.json", "run_meta.json", "transitions.jsonl"}
    for name, text in written.items():
        assert "sk-secret-123" not in text, name
        assert "opaque" not in text.replace("only redacted_thinking data is opaque", ""), name
    assert REDACTED in written["run_meta.json"]


def read_all(run_dir) -> dict[str, str]:
    return {path.name: path.read_text() for path in run_dir.iterdir()}


def test_a_secret_is_redacted_in_values_and_keys_stay_intact_whatever_the_secret_looks_like(tmp_path):
    # Also secrets JSON escapes: a record is scrubbed when its text holds a secret as JSON writes it.
    # Each long enough to be redacted by value (test_redaction.py holds the shorter ones).
    shapes = ("k", "1", '"', "sk-secret-123", "back\\slash", "two\nlines", "clé-ü", "\x01ctl")
    for number, secret in enumerate(f"{shape}-0123456789" for shape in shapes):
        writer = ArtifactWriter(tmp_path, f"run-{number}", Redactor((secret,)))
        writer.write_json("run_meta.json", {"api_key_env": "KEY_VAR", "count": 1, "note": f"key={secret}"})
        writer.log_transition({"machine": "m", "note": f"[{secret}]"})
        writer.close()
        for name, text in read_all(writer.path).items():
            records = (
                [json.loads(line) for line in text.splitlines() if line]
                if name.endswith(".jsonl")
                else [json.loads(text)]
            )
            for record in records:
                assert secret not in record["note"], (secret, name)
                assert REDACTED in record["note"]
        meta = json.loads((writer.path / "run_meta.json").read_text())
        assert meta["api_key_env"] == "KEY_VAR" and meta["count"] == 1


def test_non_finite_numbers_are_written_as_null_so_every_artifact_stays_json(tmp_path):
    writer = ArtifactWriter(tmp_path, "run")
    path = writer.write_json("run_meta.json", {"cost": float("inf"), "ratio": float("nan"), "ok": 1.5})
    assert json.loads(path.read_text()) == {"cost": None, "ratio": None, "ok": 1.5}
    assert "Infinity" not in path.read_text() and "NaN" not in path.read_text()
    writer.close()


def test_a_number_past_64_bits_from_a_provider_is_written_as_it_came_in_every_artifact(tmp_path):
    # A provider's error code or token count can be any JSON number; the fast encoder stops at 64 bits.
    huge = 10**30
    writer = ArtifactWriter(tmp_path, "run")
    step = writer.write_step(1, {"step": 1, "retries": [{"diagnostics": {"code": huge}}]})
    writer.log_transition({"machine": "m", "source": "A", "trigger": "E", "dest": "B", "code": huge})
    meta = writer.write_json("run_meta.json", {"usage": {"input_tokens": huge}})
    writer.close()
    assert json.loads(step.read_text())["retries"][0]["diagnostics"]["code"] == huge
    assert json.loads((writer.path / "transitions.jsonl").read_text())["code"] == huge
    assert meta.read_text() == '{\n  "usage": {\n    "input_tokens": 1000000000000000000000000000000\n  }\n}\n'


def test_a_record_with_both_a_number_past_64_bits_and_a_non_finite_one_is_still_written(tmp_path):
    writer = ArtifactWriter(tmp_path, "run")
    meta = writer.write_json("run_meta.json", {"code": 10**30, "ratio": float("nan")})
    writer.close()
    assert json.loads(meta.read_text()) == {"code": 10**30, "ratio": None}


def test_a_json_artifact_is_replaced_whole_and_leaves_no_temporary_file(tmp_path, monkeypatch):
    writer = ArtifactWriter(tmp_path, "run")
    target = writer.write_json("run_meta.json", {"outcome": "first"})

    def interrupted_rename(source, destination):
        raise KeyboardInterrupt  # a kill between writing the temporary file and renaming it

    monkeypatch.setattr("os.replace", interrupted_rename)
    try:
        writer.write_json("run_meta.json", {"outcome": "second"})
    except KeyboardInterrupt:
        pass
    assert json.loads(target.read_text()) == {"outcome": "first"}  # never a half-written file
    monkeypatch.undo()
    writer.write_json("run_meta.json", {"outcome": "third"})
    assert json.loads(target.read_text()) == {"outcome": "third"}
    assert sorted(path.name for path in writer.path.iterdir()) == ["run_meta.json", "transitions.jsonl"]


def test_the_transition_log_is_on_disk_before_the_step_file_that_follows_it(tmp_path):
    writer = ArtifactWriter(tmp_path, "run")
    for index in range(1, 4):
        writer.log_transition({"machine": "m", "source": "A", "trigger": "E", "dest": "B", "step": index})
        writer.write_step(index, {"step": index})
        # Read through another file object, as a reader after a kill would: nothing may be buffered.
        logged = (writer.path / "transitions.jsonl").read_text().splitlines()
        assert len(logged) == index
    writer.close()


def test_step_records_are_written_in_order_before_any_file_that_follows_them(tmp_path, monkeypatch):
    writer = ArtifactWriter(tmp_path, "run")
    written: list[str] = []
    write_whole = writer._write_whole

    def slow_write(target, text, **options):
        if target.name.startswith("step_"):
            time.sleep(0.02)  # a slow disk: the steps' thread lags behind the run
        write_whole(target, text, **options)
        written.append(target.name)

    monkeypatch.setattr(writer, "_write_whole", slow_write)
    for index in range(1, 4):
        writer.write_step(index, {"step": index})
    writer.write_json("run_meta.json", {"accepted_actions": 3})
    assert written == ["step_000001.json", "step_000002.json", "step_000003.json", "run_meta.json"]
    writer.close()


def test_a_step_record_that_cannot_be_written_fails_the_next_write(tmp_path, monkeypatch):
    writer = ArtifactWriter(tmp_path, "run")

    def full_disk(target, text, **options):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(writer, "_write_whole", full_disk)
    writer.write_step(1, {"step": 1})
    with pytest.raises(OSError, match="No space left"):
        writer.write_json("run_meta.json", {"accepted_actions": 1})
    writer.close()


def test_step_names_sort_in_step_order_past_a_thousand():
    names = [step_name(index) for index in (2, 10, 999, 1000, 3000)]
    assert sorted(names) == names


SYSTEM = {"role": "system", "content": "Play."}


def turn(number: int) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"frame {number}"}, {"role": "assistant", "content": f"reply {number}"}]


def request(*turns: list[dict[str, str]], system: str = SYSTEM["content"]) -> ModelRequest:
    return ModelRequest(system=system, items=tuple(item for turn in turns for item in turn))


@pytest.mark.parametrize(
    ("previous", "sent", "expected"),
    [
        (None, request(turn(1)), {"after_step": None, "dropped": 0, "added": [SYSTEM, *turn(1)]}),
        (request(turn(1)), request(turn(1), turn(2)), {"after_step": 4, "dropped": 0, "added": turn(2)}),
        (request(turn(1), turn(2)), request(turn(2), turn(3)), {"after_step": 4, "dropped": 2, "added": turn(3)}),
        (
            request(turn(1)),
            request(turn(1), system="Other."),
            {"after_step": None, "dropped": 0, "added": [{"role": "system", "content": "Other."}, *turn(1)]},
        ),
        (request(turn(1), turn(2)), request(turn(3)), {"after_step": 4, "dropped": 4, "added": turn(3)}),
    ],
    ids=["first", "appended", "oldest turn dropped", "new system prompt", "all dropped"],
)
def test_a_request_is_recorded_as_what_it_changed_and_rebuilds_to_itself(tmp_path, previous, sent, expected):
    readable = ChatMessages().readable
    delta = request_delta((4, previous) if previous else None, sent, readable)
    assert {key: delta[key] for key in expected} == expected
    assert delta["items_sent"] == len(sent.items)  # and the added items, by structure alone:
    assert delta["input_items"] == [
        {"type": "message", "role": m["role"]} for m in expected["added"] if m is not SYSTEM and m["role"] != "system"
    ]
    writer = ArtifactWriter(tmp_path, "run-1")
    if previous:
        writer.write_step(4, {"request": request_delta(None, previous, readable)})
    writer.write_step(5, {"request": delta})
    writer.wait_for_steps()
    assert sent_messages(writer.path, 5) == [{"role": "system", "content": sent.system}, *sent.items]


def test_only_what_a_request_added_or_dropped_is_projected():
    projected: list[dict[str, str]] = []

    def readable(items):
        projected.extend(items)
        return ChatMessages().readable(items)

    before = request(turn(1), turn(2), turn(3))
    request_delta((1, before), request(turn(2), turn(3), turn(4)), readable)
    assert sorted(item["content"] for item in projected) == ["frame 1", "frame 4", "reply 1", "reply 4"]


def encoded_size(texts: dict) -> int:
    return sum(len(json.dumps(text, ensure_ascii=False).encode()) for text in texts.values() if text is not None)


def test_texts_that_fit_the_action_record_are_left_whole():
    texts = {"response_text": "ACTION: ACTION1", "reasoning_summary": None}
    assert fitted(texts) == (texts, [])


def test_long_texts_share_the_action_record_and_say_where_they_were_cut():
    texts = {"response_text": "a" * 20_000, "reasoning_summary": "€" * 9_000, "short": "kept whole"}
    result, cut = fitted(texts)
    assert cut == ["reasoning_summary", "response_text"] and result["short"] == "kept whole"
    assert ACTION_METADATA_BYTES - 64 < encoded_size(result) <= ACTION_METADATA_BYTES  # the budget is used, not passed
    assert result["reasoning_summary"].startswith("€€€") and result["reasoning_summary"].endswith(
        " of 9000 characters kept]"
    )


def test_escaped_characters_count_as_json_writes_them():
    result, cut = fitted({"response_text": "\n" * 10_000})  # 20,000 bytes once escaped
    assert cut == ["response_text"] and encoded_size(result) <= ACTION_METADATA_BYTES


def test_an_item_descriptor_names_structure_never_a_body():
    reasoning = {
        "type": "reasoning",
        "id": "rs_1",
        "encrypted_content": "sealed",
        "summary": [{"type": "summary_text", "text": "t"}],
    }
    assert item_descriptor(reasoning) == {"type": "reasoning", "id": "rs_1"}
    anthropic = {
        "role": "assistant",
        "content": [{"type": "thinking", "thinking": "x", "signature": "s"}, {"type": "text", "text": "y"}],
    }
    assert item_descriptor(anthropic) == {"type": "message", "role": "assistant", "blocks": ["thinking", "text"]}
    chat = {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "function": {"name": "f"}}]}
    assert item_descriptor(chat) == {"type": "message", "role": "assistant", "tool_calls": ["call_1"]}


# Records built from plain values (the runner hands over what happened; these spell it).

ASKED = ModelRequest(system="Play.", items=())
SUMMARY_PASS = SummaryPass("trigger", summarized_turns=4, total_turns=4, fork=True)


def attempt(kind: CallKind, outcome: str, tokens: int, **fields) -> Attempt:
    return Attempt(kind, ASKED, outcome, Usage(input_tokens=tokens), **fields)


def step_of(attempts: list[Attempt], summary: tuple[int, ReportSummary] | None = None) -> dict:
    usage = sum((each.usage for each in attempts), Usage())
    return step_record(
        3,
        {"after_step": 2},
        "ACTION1",
        (),
        attempts,
        usage=usage,
        history=(6, 2),
        summary=summary,
        transitions=TransitionLines(7, 3),
        cost=lambda usage: usage.input_tokens / 1000,
        redact=str,
    )


def test_a_step_record_lists_its_compaction_calls_apart_from_the_action_requests_that_were_retried():
    attempts = [
        attempt("compaction", "transient", 5, summarized_items=6),
        attempt("compaction", "compacted", 7, summarized_items=6, compaction_items=1),
        attempt("action", "action_rejected", 11, problem="no action"),
        attempt("compaction", "compacted", 8, summarized_items=6, compaction_items=1),
        attempt("action", "accepted", 13, response_text="ACTION: ACTION1"),
    ]
    record = step_of(attempts)
    assert [(call["outcome"], call["usage"]["input_tokens"]) for call in record["compaction_calls"]] == [
        ("transient", 5),
        ("compacted", 7),
        ("compacted", 8),
    ]
    assert [(retry["outcome"], retry["problem"]) for retry in record["retries"]] == [("action_rejected", "no action")]
    assert record["compaction"] == {
        "by": "call",
        "items_returned": 1,
        "summarized_items": 6,
        "usage": Usage(input_tokens=20).to_dict(),  # every compaction call of the turn, the failed one too
        "cost_estimate": 0.02,
    }
    assert record["usage"]["input_tokens"] == 44 and record["history"] == {"items_before": 6, "items_after": 2}
    assert [each.failed for each in attempts] == [True, False, True, False, False]


def test_a_harness_summary_is_recorded_with_the_completed_context_that_scheduled_it():
    report = ReportSummary(
        "NOTES", "bridge: NOTES", SUMMARY_PASS, 1600, items_before=12, items_after=1, overflow_recoveries=0
    )
    disclosed = {"lane": "trigger", "form": "fork", "summarized_turns": 4, "excluded_turns": 0}
    attempts = [
        attempt("summary", "compacted", 9, summarized_items=12, summary_input=disclosed),
        attempt("action", "accepted", 13),
    ]
    record = compaction_record(1, report, attempts, step=4, cost=lambda usage: 0.0, redact=str)
    assert record["completed_context_tokens"] == 1600 and "trigger_tokens" not in record and record["step"] == 4
    assert [(each["outcome"], each["summary_input"]) for each in record["attempts"]] == [("compacted", disclosed)]
    step = step_of(attempts, summary=(1, report))
    assert step["compaction"]["by"] == "summary" and step["retries"] == []
    assert step["continuation"] == {"compaction": 1, "summary": "NOTES", "bridge": "bridge: NOTES"}


def test_a_step_record_is_one_line_of_json_that_costs_one_fsync(tmp_path, monkeypatch):
    """Indenting was 23% of a step record's bytes, and its folder's fsync a second sync per step: the
    folder's next sync (run_meta.json's write) takes the record's rename to disk with it."""
    writer = ArtifactWriter(tmp_path, "run")
    synced: list[int] = []
    fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda descriptor: (synced.append(descriptor), fsync(descriptor))[1])
    record = {"step": 1, "request": {"added": [{"role": "user", "content": "line one\nline two"}]}}
    writer.write_step(1, record)
    writer.wait_for_steps()
    assert len(synced) == 1
    content = (writer.path / "step_000001.json").read_bytes()
    assert content.count(b"\n") == 1 and content.endswith(b"\n") and json.loads(content) == record
    writer.write_json("run_meta.json", {"steps": 1})
    assert len(synced) == 3  # run_meta.json's file and the folder, which holds the step record's rename
    writer.close()
