"""The stale tool-result offload projection (strategies/offload.py): which results become pointers,
what a pointer says, that a projection is the same every time and stays the same as the history
grows, and that nothing else in the items is touched, on every adapter family's transcript."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable

import pytest

from turnstate.adapters.anthropic_messages import MessagesItems
from turnstate.adapters.chat_completions import ChatMessages
from turnstate.adapters.contract import Item, ToolResult, Transcript
from turnstate.adapters.gemini_interactions import InteractionSteps
from turnstate.adapters.responses import ResponsesItems
from turnstate.strategies.offload import READ_TOOL_RESULT, Offload, Projection, is_lossy, pointer, project, ref_of

BIG = 3000  # characters: above the default floor once the pointer is taken off
OPAQUE = "gAAAAABopaque" * 20


def calls_chat(calls: list[tuple[str, str]]) -> list[Item]:
    made = [{"id": id_, "type": "function", "function": {"name": name, "arguments": "{}"}} for id_, name in calls]
    return [{"role": "assistant", "content": "", "reasoning_content": "thinking it over", "tool_calls": made}]


def calls_responses(calls: list[tuple[str, str]]) -> list[Item]:
    reasoning: Item = {"type": "reasoning", "summary": [], "encrypted_content": OPAQUE}
    made = [{"type": "function_call", "call_id": id_, "name": name, "arguments": "{}"} for id_, name in calls]
    return [reasoning, *made]


def calls_anthropic(calls: list[tuple[str, str]]) -> list[Item]:
    thinking = {"type": "thinking", "thinking": "thinking it over", "signature": OPAQUE}
    made = [{"type": "tool_use", "id": id_, "name": name, "input": {}} for id_, name in calls]
    return [{"role": "assistant", "content": [thinking, *made]}]


def calls_gemini(calls: list[tuple[str, str]]) -> list[Item]:
    thought: Item = {"type": "thought", "signature": OPAQUE, "summary": []}
    return [thought, *({"type": "function_call", "id": id_, "name": name, "arguments": {}} for id_, name in calls)]


WIRES: dict[str, tuple[Transcript, Callable[[list[tuple[str, str]]], list[Item]]]] = {
    "chat": (ChatMessages(), calls_chat),
    "responses": (ResponsesItems(), calls_responses),
    "anthropic": (MessagesItems(), calls_anthropic),
    "gemini": (InteractionSteps(), calls_gemini),
}


class History:
    """A history built as a session builds one: an input, a reply making calls, their results."""

    def __init__(self, wire: str = "chat") -> None:
        self.transcript, self.calls = WIRES[wire]
        self.items: list[Item] = []
        self.made = 0

    def round(self, *results: tuple[str, str, bool]) -> list[str]:
        """One round answering a call per (tool, text, is_error); the calls' ids."""
        ids = [f"call_{self.made + number}" for number in range(len(results))]
        self.made += len(results)
        self.items += self.transcript.user_items([f"input {self.made}"])
        self.items += self.calls([(id_, name) for id_, (name, _, _) in zip(ids, results, strict=True)])
        answered = [ToolResult(id_, name, text, failed) for id_, (name, text, failed) in zip(ids, results, strict=True)]
        self.items += self.transcript.tool_result_items(answered)
        return ids


def text(tool: str, number: int, size: int = BIG) -> str:
    head = f"{tool} result {number}: "
    return head + "x" * (size - len(head))


def texts_after(history: History, projection: Projection) -> list[str]:
    return [result.text for result in history.transcript.tool_results(projection.items)]


def test_the_ref_is_tr_and_the_first_16_hex_digits_of_the_texts_sha256():
    assert ref_of("héllo") == "tr-" + hashlib.sha256("héllo".encode()).hexdigest()[:16]
    assert ref_of("héllo") != ref_of("hello")


def test_the_pointer_names_the_tool_the_ref_and_the_characters_and_how_to_read_it_back():
    assert pointer("lookup", "tr-0123456789abcdef", 12345) == (
        "[tool result offloaded: lookup, ref tr-0123456789abcdef, 12345 chars. "
        'Call read_tool_result with {"ref": "tr-0123456789abcdef"} to read it.]'
    )


def test_a_result_with_keep_recent_newer_results_of_its_tool_becomes_its_pointer_and_the_rest_stay():
    history = History()
    for number in range(5):
        history.round(("look", text("look", number), False), ("note", text("note", number), False))
    history.round(("note", text("note", 5), False))
    projection = project(history.items, history.transcript, Offload(keep_recent_per_tool=3))
    looks = [pointer("look", ref_of(text("look", n)), BIG) for n in range(2)] + [text("look", n) for n in range(2, 5)]
    notes = [pointer("note", ref_of(text("note", n)), BIG) for n in range(3)] + [text("note", n) for n in range(3, 6)]
    assert texts_after(history, projection) == [
        *(found for pair in zip(looks, notes[:5], strict=True) for found in pair),
        notes[5],
    ]
    assert projection.offloaded == (
        (ref_of(text("look", 0)), text("look", 0)),
        (ref_of(text("note", 0)), text("note", 0)),
        (ref_of(text("look", 1)), text("look", 1)),
        (ref_of(text("note", 1)), text("note", 1)),
        (ref_of(text("note", 2)), text("note", 2)),
    )
    assert is_lossy(projection)


@pytest.mark.parametrize(
    "kept, why",
    [
        (("look", text("look", 0), True), "an error result"),
        ((READ_TOOL_RESULT, text("page", 0), False), "a read_tool_result page"),
        (("look", "short", False), "a result the pointer would hardly shorten"),
    ],
)
def test_a_stale_result_is_kept_verbatim_when_it_is(kept, why):
    history = History()
    history.round(kept)
    for number in range(1, 4):
        history.round((kept[0], text(kept[0], number), False))
    projection = project(history.items, history.transcript, Offload(keep_recent_per_tool=3))
    first = history.transcript.tool_results(history.items)[0]
    assert texts_after(history, projection)[0] == first.text, why
    assert not is_lossy(projection) and projection.items[first.index] is history.items[first.index]


def test_a_replacement_saving_exactly_the_floor_is_made_and_one_character_less_is_not():
    for extra, replaced in ((0, True), (-1, False)):
        history = History()
        size = 500 + len(pointer("look", ref_of(""), 500))  # the same length for any ref and any 500 characters
        history.round(("look", text("look", 0, size + extra), False))
        history.round(("look", text("look", 1), False))
        projection = project(history.items, history.transcript, Offload(keep_recent_per_tool=1, min_savings_chars=500))
        assert is_lossy(projection) is replaced, extra


def test_the_projection_of_the_same_items_is_byte_identical_every_time():
    history = History()
    for number in range(6):
        history.round(("look", text("look", number), False))
    offload = Offload()
    first, again = (project(history.items, history.transcript, offload) for _ in range(2))
    assert json.dumps(first.items) == json.dumps(again.items) and first == again


def test_a_replaced_result_reads_the_same_in_every_later_request_so_the_prefix_before_the_next_change_holds():
    history = History()
    requests = []
    for number in range(8):
        history.round(("look", text("look", number), False))
        requests.append(project(history.items, history.transcript, Offload()).items)
    for number, (earlier, later) in enumerate(zip(requests, requests[1:], strict=False), start=1):
        changed = [index for index, item in enumerate(earlier) if later[index] != item]
        # from the fourth result on, one result crosses the staleness line a round: the request changes there, once
        assert len(changed) == (number >= 3)
        assert all(
            json.dumps(later[index]) == json.dumps(earlier[index])
            for index in range(len(earlier))
            if index not in changed
        )
    assert texts_after(history, Projection(requests[-1]))[:5] == [
        pointer("look", ref_of(text("look", n)), BIG) for n in range(5)
    ]


@pytest.mark.parametrize("wire", sorted(WIRES))
def test_items_not_replaced_are_the_very_objects_given_and_opaque_items_are_never_touched(wire):
    history = History(wire)
    for number in range(4):
        history.round(("look", text("look", number), False), ("note", text("note", number), False))
    before = json.dumps(history.items)
    projection = project(history.items, history.transcript, Offload(keep_recent_per_tool=2))
    replaced = {result.index for result in history.transcript.tool_results(history.items)[:4]}
    assert json.dumps(history.items) == before  # the accepted items are never changed
    for index, item in enumerate(history.items):
        assert (projection.items[index] is item) is (index not in replaced), index
    assert texts_after(history, projection)[:4] == [
        pointer(name, ref_of(text(name, n)), BIG) for n in range(2) for name in ("look", "note")
    ]
    assert json.dumps(projection.items).count(OPAQUE) == before.count(OPAQUE) == (0 if wire == "chat" else 4)


def test_results_no_reply_has_read_yet_are_never_replaced():
    history = History()
    history.round(("look", text("look", 0), False))
    unread_from = len(history.items)
    history.round(*(("look", text("look", number), False) for number in range(1, 6)))  # one reply, five calls
    projection = project(history.items, history.transcript, Offload(keep_recent_per_tool=3), unread_from)
    assert texts_after(history, projection) == [pointer("look", ref_of(text("look", 0)), BIG)] + [
        text("look", number) for number in range(1, 6)
    ]


def test_the_offload_off_sends_the_items_as_they_are_and_is_not_lossy():
    history = History()
    for number in range(5):
        history.round(("look", text("look", number), False))
    projection = project(history.items, history.transcript, None)
    assert projection == Projection(tuple(history.items)) and not is_lossy(projection)
    assert all(sent is item for sent, item in zip(projection.items, history.items, strict=True))


@pytest.mark.parametrize(
    "knob, value",
    [
        ("keep_recent_per_tool", 0),
        ("keep_recent_per_tool", -1),
        ("keep_recent_per_tool", 2.5),
        ("keep_recent_per_tool", True),
        ("min_savings_chars", -1),
        ("min_savings_chars", math.nan),
        ("min_savings_chars", math.inf),
        ("min_savings_chars", 10.0),
    ],
)
def test_a_knob_that_is_not_a_whole_number_in_range_is_refused_by_name(knob, value):
    with pytest.raises(ValueError, match=knob):
        Offload(**{knob: value})
