"""The run's one redaction: every opaque marker and every container the writer may be handed, each
alone, and opaque values the run received wherever a string repeats them."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from turnstate.adapters.json_bytes import json_bytes
from turnstate.durable.redaction import MIN_SECRET_CHARS, OPAQUE_MIN_CHARS, REDACTED, Redactor
from turnstate.durable.writer import ArtifactWriter

SECRET = "sk-test-redaction-0123456789"
BLOB = base64.urlsafe_b64encode(bytes(range(200, 256)) * 5).decode()  # 376 characters, as the local provider's
ECHOED = base64.b64encode(bytes(range(0, 240))).decode()  # a blob the run received, then saw repeated


def written(tmp_path: Path, data: Any, redactor: Redactor) -> dict[str, str]:
    """`data` written as each kind of artifact (a JSON file, a step record, a transition log line)."""
    writer = ArtifactWriter(tmp_path, "run", redactor)
    writer.write_json("run_meta.json", data)
    writer.write_step(1, data)
    writer.log_transition(data)
    writer.close()
    texts = {path.name: path.read_text() for path in writer.path.iterdir()}
    for text in texts.values():
        json.loads(text)  # each is whole JSON
    return texts


def learned() -> Redactor:
    """A run's redactor after a reply whose native items held ECHOED (a Responses reasoning item)."""
    redactor = Redactor(secrets=(SECRET,))
    redactor.learn([{"type": "reasoning", "id": "rs_1", "encrypted_content": ECHOED, "summary": []}])
    return redactor


# Each marker alone in a record: the opaque keys, redacted_thinking's data, a secret, a learned value.
# fmt: off
MARKERS = {
    "encrypted_content": ({"type": "reasoning", "id": "rs_1", "encrypted_content": BLOB}, BLOB),
    "signature": ({"type": "thinking", "thinking": "readable", "signature": BLOB}, BLOB),
    "thought_signature": ({"text": "readable", "thought_signature": BLOB}, BLOB),
    "redacted_thinking data": ({"type": "redacted_thinking", "data": BLOB}, BLOB),
    "a secret": ({"note": f"Authorization: Bearer {SECRET}"}, SECRET),
    "an opaque value the run received": ({"note": f"code {ECHOED}"}, ECHOED),
}
# fmt: on


@pytest.mark.parametrize(("record", "hidden"), MARKERS.values(), ids=MARKERS.keys())
def test_a_record_whose_only_opaque_state_is_one_marker_is_written_without_it(tmp_path, record, hidden):
    for name, text in written(tmp_path, {"step": 1, "blocks": [record]}, learned()).items():
        assert hidden not in text, name
        assert '"step": 1' in text or '"step":1' in text, name  # the rest of the record is kept


@dataclass(frozen=True)
class Block:
    type: str
    signature: str
    note: str


def block() -> dict[str, str]:
    return {"type": "thinking", "signature": BLOB, "note": f"Bearer {SECRET}"}


# Every container the writer may be handed, each holding a signature and a secret (a set holds
# strings only, so it holds the secret).
# fmt: off
CONTAINERS = {
    "dict": lambda: {"inner": block()},
    "list": lambda: [block()],
    "tuple": lambda: (block(),),
    "set": lambda: {f"Bearer {SECRET}", "readable"},
    "frozenset": lambda: frozenset({f"Bearer {SECRET}", "readable"}),
    "dataclass": lambda: Block("thinking", BLOB, f"Bearer {SECRET}"),
    "mapping that is not a dict": lambda: MappingProxyType(block()),
    "a dataclass in a list in a tuple in a mapping": lambda: MappingProxyType(
        {"blocks": ([Block("thinking", BLOB, f"Bearer {SECRET}")],)}
    ),
}
# fmt: on


@pytest.mark.parametrize("container", CONTAINERS.values(), ids=CONTAINERS.keys())
def test_every_container_is_walked_and_written_as_json_without_its_opaque_state(tmp_path, container):
    for name, text in written(tmp_path, {"held": container()}, Redactor(secrets=(SECRET,))).items():
        for hidden in (BLOB, SECRET):
            assert hidden not in text, name
        assert "Bearer [redacted]" in text, name


def test_a_set_is_written_as_an_array_in_an_order_that_does_not_vary():
    assert json.loads(Redactor().render({"tags": {"b", "a", "c"}})) == {"tags": ["a", "b", "c"]}


def test_an_opaque_value_is_redacted_where_a_string_equals_contains_or_runs_into_it():
    redactor = learned()
    assert redactor.text(ECHOED) == REDACTED
    assert redactor.text(f"the code was {ECHOED}.") == f"the code was {REDACTED}."
    # Glued to other base64 characters, and twice in one string: only the value itself goes.
    assert redactor.text(f"AAAA{ECHOED}ZZZZ {ECHOED}") == f"AAAA{REDACTED}ZZZZ {REDACTED}"


def test_every_kind_of_native_item_teaches_its_opaque_values():
    redactor = Redactor()
    blobs = [base64.b64encode(bytes([seed]) * 120).decode() for seed in range(6)]
    redactor.learn(
        [
            {"type": "reasoning", "encrypted_content": blobs[0]},  # Responses
            {"type": "compaction", "encrypted_content": blobs[1]},  # Responses and xAI compaction
            {"role": "assistant", "content": [{"type": "thinking", "signature": blobs[2]}]},  # Messages
            {"role": "assistant", "content": [{"type": "redacted_thinking", "data": blobs[3]}]},
            {"type": "thought", "signature": blobs[4]},  # Interactions
            {"role": "model", "parts": [{"text": "t", "thought_signature": blobs[5]}]},  # generateContent
        ]
    )
    for blob in blobs:
        assert redactor.text(f"echo {blob}") == f"echo {REDACTED}"


def test_an_opaque_value_is_known_by_its_longest_base64_run():
    redactor = Redactor()
    run = "Q" * OPAQUE_MIN_CHARS
    redactor.learn([{"signature": f"v1.{run}.tail"}])
    assert redactor.text(f"saw v1.{run}.tail") == f"saw v1.{REDACTED}.tail"


def test_a_value_shorter_than_the_minimum_run_is_not_watched_so_ordinary_words_stay():
    redactor = Redactor()
    redactor.learn([{"type": "thinking", "signature": "ACTION1"}, {"encrypted_content": "x" * (OPAQUE_MIN_CHARS - 1)}])
    assert redactor.text("ACTION: ACTION1") == "ACTION: ACTION1"


def test_a_long_base64_run_the_run_never_received_is_written_as_it_is(tmp_path):
    stranger = base64.b64encode(bytes(range(50, 250))).decode()
    assert json.loads(written(tmp_path, {"note": stranger}, learned())["run_meta.json"]) == {"note": stranger}


def test_a_record_with_nothing_to_redact_is_written_as_the_encoder_writes_it():
    record = {"step": 1, "response_text": "I go left.\nACTION: ACTION3", "ids": ["rs_" + "ab" * 16]}
    assert learned().render(record, indent=True) == json_bytes(record, indent=True) + b"\n"


# Strings that mix what a record may hold: text, secrets, learned values, other long base64 runs.
PIECES = st.sampled_from(["a", " ", "\n", '"', "é", "sk-test", SECRET, ECHOED, ECHOED[:80], "Q" * 70, "=", "/"])
TEXTS = st.lists(PIECES, max_size=6).map("".join)
KEYS = st.sampled_from(["note", "signature", "encrypted_content", "data", "type", "code"])
RECORDS = st.recursive(
    TEXTS | st.integers() | st.sampled_from(["redacted_thinking", "thinking"]),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(KEYS, children, max_size=3),
    max_leaves=12,
)


@settings(derandomize=True, max_examples=300, deadline=None)
@given(RECORDS)
def test_the_fast_path_writes_exactly_what_the_scrubbed_record_would(record):
    redactor = learned()
    assert redactor.render(record) == json_bytes(redactor.scrub(record)) + b"\n"


# -- short keys: redacted where they are keys, never as letters (issue 30) ---------------------------

PLACEHOLDER_KEYS = ["x", "EMPTY", "ollama", "sk-no-key-required", "sk-proj-" + "Q7vX2mLp9R" * 5]


@pytest.mark.parametrize("key", PLACEHOLDER_KEYS)
def test_a_key_is_redacted_in_its_headers_and_fields_whatever_its_length(key):
    redactor = Redactor(secrets=(key,))
    record = redactor.scrub({"headers": {"Authorization": f"Bearer {key}", "X-Api-Key": key, "api_key_env": "KEY"}})
    assert record == {"headers": {"Authorization": REDACTED, "X-Api-Key": REDACTED, "api_key_env": "KEY"}}
    assert redactor.text(f"sent Authorization: Bearer {key}\nx-api-key: {key}") == (
        f"sent Authorization: Bearer {REDACTED}\nx-api-key: {REDACTED}"
    )


@pytest.mark.parametrize(
    "written", ["API_Key: abc", "Authorization: BEARER abc", "X-API-KEY=abc", "authorization: basic abc"]
)
def test_a_key_in_a_text_is_redacted_in_whatever_case_the_header_is_written_and_on_the_fast_path_too(written):
    redactor = Redactor(secrets=("abc",))
    assert redactor.text(written) == written.replace("abc", REDACTED)
    assert json.loads(redactor.render({"note": written})) == {"note": written.replace("abc", REDACTED)}


@pytest.mark.parametrize("key", PLACEHOLDER_KEYS)
def test_a_key_is_redacted_by_value_only_when_it_is_long_enough_to_be_a_secret(key):
    text = f'"action_mode": "text", the server said: invalid key {key}'
    redacted = Redactor(secrets=(key,)).text(text)
    if len(key) < MIN_SECRET_CHARS:
        assert redacted == text  # `x` would otherwise turn "text" into "te[redacted]t"
    else:
        assert redacted == f'"action_mode": "text", the server said: invalid key {REDACTED}'


@pytest.mark.parametrize("key", PLACEHOLDER_KEYS)
def test_a_run_with_a_placeholder_key_records_its_own_settings_and_resumes_under_them(tmp_path, monkeypatch, key):
    from turnstate.local_provider.server import LocalProvider
    from turnstate.session.profile import DEFAULT_PROFILE, load_profile
    from turnstate.session.run_profile import run_profile
    from turnstate.session.runner import Runner

    from .test_run import with_changes

    monkeypatch.setenv("TURNSTATE_TEST_KEY", key)
    commits = 0

    def interrupt_at_the_third_commit(point: str) -> None:
        nonlocal commits
        commits += point == "after_commit"
        if commits == 3:
            raise KeyboardInterrupt

    with LocalProvider() as provider:
        client = {"base_url": provider.openai_base_url, "api_key_env": "TURNSTATE_TEST_KEY"}
        profile = with_changes(load_profile(DEFAULT_PROFILE), client=client)
        with pytest.raises(KeyboardInterrupt):
            Runner(profile, tmp_path, on_point=interrupt_at_the_third_commit).run()
        (run_dir,) = tmp_path.iterdir()
        recorded = json.loads((run_dir / "run_meta.json").read_text())
        assert recorded["settings"] == profile.model_dump(mode="json")  # not a letter replaced
        assert run_profile(run_dir).digest() == profile.digest()
        resumed = Runner(run_profile(run_dir), tmp_path).resume(run_dir)
    assert resumed.outcome == "win"
