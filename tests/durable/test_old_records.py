"""Records that old code wrote (issue 35): every run folder of the corpus (tests/durable/old_records.py),
its checkpoints in SQLite or in PostgreSQL, resumed with today's code, sends as its next request the
bytes the code that wrote it sent; a difference fails naming where the request changed and the record
formats then and now."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.durable.old_records import CASES, CORPUS, FORMATS, first_request_of_resume, next_request_name

ENTRIES = sorted(path.parent for path in CORPUS.glob("*/*/entry.json"))
NEWEST = max((path.parent for path in ENTRIES), default=None)


def first_difference(recorded: Any, sent: Any, where: str = "") -> str | None:
    """Where two JSON values first differ, and how; None if they are equal."""
    if isinstance(recorded, dict) and isinstance(sent, dict):
        if list(recorded) != list(sent):
            return f"{where or 'the body'}: keys {list(recorded)} then, {list(sent)} now"
        return next(
            (found for key in recorded if (found := first_difference(recorded[key], sent[key], f"{where}.{key}"))),
            None,
        )
    if isinstance(recorded, list) and isinstance(sent, list):
        for index, (old, new) in enumerate(zip(recorded, sent, strict=False)):
            if found := first_difference(old, new, f"{where}[{index}]"):
                return found
        if len(recorded) != len(sent):
            return f"{where or 'the body'}: {len(recorded)} items then, {len(sent)} now"
        return None
    if recorded != sent or type(recorded) is not type(sent):
        return f"{where or 'the body'}: {json.dumps(recorded)[:200]} then, {json.dumps(sent)[:200]} now"
    return None


def changed(entry: Path, recorded: bytes, sent: bytes) -> str:
    """Why the resume of `entry` failed the corpus: where its request differs, and the formats."""
    what = first_difference(json.loads(recorded), json.loads(sent)) or "the same JSON, in other bytes"
    then = json.loads((entry / "entry.json").read_text())["formats"]
    formats = ", ".join(f"{name} {then.get(name)} -> {FORMATS[name]}" for name in FORMATS)
    return (
        f"{entry.relative_to(CORPUS)}: the next request changed at {what} (formats: {formats}); fix: a change "
        "of a record's format needs a migration that reads the old one; a deliberate change of what a "
        "resume sends needs a new set of entries (python -m tests.durable.old_records), the old set "
        "kept until its format is no longer read"
    )


@pytest.fixture(params=["sqlite", "postgresql"])
def server(request) -> str | None:
    """Where the records' checkpoints are: SQLite in the run folder, or a PostgreSQL server's URL."""
    return None if request.param == "sqlite" else request.getfixturevalue("postgres_url")


@pytest.mark.parametrize("entry", ENTRIES, ids=[str(entry.relative_to(CORPUS)) for entry in ENTRIES])
def test_a_run_folder_written_earlier_resumes_sending_the_request_it_sent_then(tmp_path, entry, server):
    recorded = json.loads((entry / "entry.json").read_text())
    sent, outcome = first_request_of_resume(entry, tmp_path, server)
    expected = (entry / next_request_name(server)).read_bytes()
    assert sent.path == recorded["request_path"], f"{entry}: the request went to {sent.path}"
    assert sent.body == expected, changed(entry, expected, sent.body)
    assert outcome == recorded["resumed_outcome"]


def test_the_newest_set_holds_an_entry_of_every_case_and_says_so():
    """Every adapter and strategy, compacted, summarized and with tools, has records in the corpus."""
    assert NEWEST is not None, f"{CORPUS} holds no entries; write them: python -m tests.durable.old_records"
    held = {entry.name for entry in ENTRIES if entry.parent == NEWEST}
    assert held == set(CASES), f"{NEWEST}: missing {sorted(set(CASES) - held)}, unknown {sorted(held - set(CASES))}"


def test_a_changed_request_is_named_by_where_it_changed():
    assert first_difference({"a": [1, {"b": "x"}]}, {"a": [1, {"b": "y"}]}) == '.a[1].b: "x" then, "y" now'
    assert first_difference({"a": 1, "b": 2}, {"b": 2, "a": 1}) == "the body: keys ['a', 'b'] then, ['b', 'a'] now"
    assert first_difference([1, 2], [1]) == "the body: 2 items then, 1 now"
    assert first_difference({"n": 1}, {"n": 1.0}) == ".n: 1 then, 1.0 now"
    assert first_difference({"a": [1]}, {"a": [1]}) is None
