"""The offloaded tool-result store and the read_tool_result tool (turnstate/durable/tool_results.py): written
once under the run folder, or kept in memory; paged back in the design's format; every call it
cannot answer refused with a reason the model reads."""

from __future__ import annotations

import pytest

from turnstate.adapters.chat_completions import ChatMessages
from turnstate.adapters.contract import ToolResult
from turnstate.durable.tool_results import PAGE_CHARS, READ_TOOL_RESULT_SPEC, ToolResultStore
from turnstate.environments.protocol import ToolRefused
from turnstate.strategies.offload import READ_TOOL_RESULT, Offload, project, ref_of

TEXT = "".join(f"line {number:03d}: é✓\r\n" for number in range(700))  # 9800 characters, some not ASCII
REF = ref_of(TEXT)


@pytest.fixture(params=["folder", "memory"])
def store(request, tmp_path) -> ToolResultStore:
    return ToolResultStore(tmp_path if request.param == "folder" else None)


def test_a_put_text_is_written_once_whole_under_its_ref_in_the_run_folders_tool_results(tmp_path):
    ToolResultStore(tmp_path).put(REF, TEXT)
    assert [path.name for path in (tmp_path / "tool_results").iterdir()] == [f"{REF}.txt"]  # no temporary left
    assert (tmp_path / "tool_results" / f"{REF}.txt").read_bytes() == TEXT.encode("utf-8")


def test_an_existing_file_is_never_rewritten_by_this_store_or_another(tmp_path):
    target = tmp_path / "tool_results" / f"{REF}.txt"
    ToolResultStore(tmp_path).put(REF, TEXT)
    target.write_text("kept as it is")  # so that a rewrite would show
    store = ToolResultStore(tmp_path)
    store.put(REF, TEXT)
    store.put(REF, TEXT)
    assert target.read_text() == "kept as it is"


def test_a_store_without_a_folder_keeps_the_texts_in_memory_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    store = ToolResultStore(None)
    store.put(REF, TEXT)
    assert list(tmp_path.iterdir()) == []
    assert store.read({"ref": REF}).startswith(TEXT[:PAGE_CHARS])


@pytest.mark.parametrize("ref", ["../escape", "tr-0123456789ABCDEF", f"{REF}\n", f"/tmp/{REF}", "tr-0123", 7])
def test_a_put_under_anything_but_a_ref_is_refused_and_writes_nothing(store, tmp_path, ref):
    with pytest.raises(ValueError, match="not a tool result ref"):
        store.put(ref, TEXT)
    assert list(tmp_path.iterdir()) == []


def test_a_put_under_another_texts_ref_is_refused(store):
    with pytest.raises(ValueError, match="not the digest"):
        store.put(ref_of("something else"), TEXT)
    with pytest.raises(ToolRefused, match="no offloaded tool result"):
        store.read({"ref": ref_of("something else")})


def test_a_result_is_read_in_pages_each_ending_with_where_it_ends_and_how_to_read_on(store):
    store.put(REF, TEXT)
    assert len(TEXT) == 9800
    assert store.read({"ref": REF}) == f"{TEXT[:4000]}\n[characters 0-4000 of 9800; read on with offset 4000]"
    assert store.read({"ref": REF, "offset": 4000}) == (
        f"{TEXT[4000:8000]}\n[characters 4000-8000 of 9800; read on with offset 8000]"
    )
    assert store.read({"ref": REF, "offset": 8000}) == f"{TEXT[8000:]}\n[end of result]"
    assert store.read({"ref": REF, "offset": 9800}) == "\n[end of result]"


def test_reading_on_from_each_pages_offset_gives_back_the_whole_text_exactly(store):
    store.put(REF, TEXT)
    read, offset = "", 0
    while True:
        page, last = store.read({"ref": REF, "offset": offset}).rsplit("\n", 1)
        read += page
        if last == "[end of result]":
            break
        offset = int(last.rsplit(" ", 1)[1].rstrip("]"))
    assert read == TEXT


def test_a_fresh_store_over_the_same_folder_reads_what_an_earlier_one_put(tmp_path):
    ToolResultStore(tmp_path).put(REF, TEXT)
    assert ToolResultStore(tmp_path).read({"ref": REF, "offset": 8000}) == f"{TEXT[8000:]}\n[end of result]"


@pytest.mark.parametrize(
    "arguments, words",
    [
        ({"ref": ref_of("never put")}, "no offloaded tool result has the ref"),
        ({"ref": "../../etc/passwd"}, "is not a tool result ref"),
        ({}, "needs ref"),
        ({"ref": 12}, "needs ref"),
        ({"ref": REF, "offset": -1}, "offset must be a whole number of at least 0, not -1"),
        ({"ref": REF, "offset": 1.5}, "offset must be a whole number"),
        ({"ref": REF, "offset": "40"}, "offset must be a whole number"),
        ({"ref": REF, "offset": True}, "offset must be a whole number"),
        ({"ref": REF, "offset": 9801}, "offset 9801 is past the end of .* which has 9800 characters"),
        ({"ref": REF, "limit": 10, "page": 2}, "takes only ref and offset, not limit, page"),
    ],
)
def test_a_call_the_store_cannot_answer_is_refused_saying_why(store, arguments, words):
    store.put(REF, TEXT)
    with pytest.raises(ToolRefused, match=words):
        store.read(arguments)


def test_the_tool_takes_a_required_string_ref_and_a_non_negative_integer_offset_and_nothing_else():
    jsonschema = pytest.importorskip("jsonschema", reason="the jsonschema package is not installed")
    schema = READ_TOOL_RESULT_SPEC.parameters
    jsonschema.Draft202012Validator.check_schema(schema)
    valid = jsonschema.Draft202012Validator(schema).is_valid
    assert READ_TOOL_RESULT_SPEC.name == READ_TOOL_RESULT
    assert valid({"ref": REF}) and valid({"ref": REF, "offset": 0}) and valid({"ref": REF, "offset": 4000})
    assert not any(
        valid(arguments) for arguments in ({}, {"ref": 1}, {"ref": REF, "offset": -1}, {"ref": REF, "extra": 1})
    )
    assert schema["properties"]["offset"]["default"] == 0 and schema["required"] == ["ref"]


def test_every_result_a_projection_offloads_is_read_back_whole_from_the_store(store):
    transcript = ChatMessages()
    items = []
    for number in range(5):
        call = {"id": f"c{number}", "type": "function", "function": {"name": "look", "arguments": "{}"}}
        items += [{"role": "assistant", "content": "", "tool_calls": [call]}]
        items += transcript.tool_result_items([ToolResult(f"c{number}", "look", f"{number}: {TEXT}")])
    projection = project(items, transcript, Offload())
    assert len(projection.offloaded) == 2
    for ref, text in projection.offloaded:
        store.put(ref, text)
    for ref, text in projection.offloaded:
        pages = [store.read({"ref": ref, "offset": offset}) for offset in range(0, len(text), PAGE_CHARS)]
        assert "".join(page.rsplit("\n", 1)[0] for page in pages) == text
