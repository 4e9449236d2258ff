"""The artifact writer is the one place that keeps opaque provider state and secrets out of files."""

from __future__ import annotations

import json

from turnstate.harness.artifacts import REDACTED, ArtifactWriter, scrub

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
    cleaned = json.dumps(scrub(OPAQUE))
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
    writer = ArtifactWriter(tmp_path, "run-1", secrets=("sk-secret-123",))
    writer.write_step(1, {"state": OPAQUE, "note": "key was sk-secret-123"})
    writer.write_json("run_meta.json", {"settings": {"header": "Bearer sk-secret-123"}})
    writer.log_transition({"event": "x", "blob": OPAQUE})
    writer.close()
    written = {path.name: path.read_text() for path in (tmp_path / "run-1").iterdir()}
    assert set(written) == {"step_001.json", "run_meta.json", "transitions.jsonl"}
    for name, text in written.items():
        assert "sk-secret-123" not in text, name
        assert "opaque" not in text.replace("only redacted_thinking data is opaque", ""), name
    assert REDACTED in written["run_meta.json"]
