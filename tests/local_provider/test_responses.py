"""The embedded local provider's OpenAI Responses wire, through the real openai SDK over real HTTP.

The model is the real policy (it reads the game's frame format), so a hand-written level-1 frame
that shows beacon C, followed by a dark frame, tells whether the provider read the beacon back from
the replayed reasoning: the dark frame alone says nothing of it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import httpx2
import openai
import pytest
from openai.types.responses import Response

from turnstate.adapters.tokens import MESSAGE_OVERHEAD_TOKENS, content_text, estimate_text_tokens
from turnstate.local_provider.exchange import MALFORMED_REPLY
from turnstate.local_provider.faults import FAULT_KINDS, Fault
from turnstate.local_provider.responses import CONTEXT_EXCEEDED, REASONING_SUMMARY
from turnstate.local_provider.server import LocalProvider

from .test_policy import EXAMPLE_ROWS, frame_text

MODEL = "gpt-5"
SYSTEM = "You play beacon_grid. Answer with one line ACTION: <action>."
ENCRYPTED = ["reasoning.encrypted_content"]
SHOWN = frame_text(EXAMPLE_ROWS, beacon="C")
DARK = frame_text(EXAMPLE_ROWS, beacon="dark")
REMEMBERED = "heading for door C (beacon seen)"
FORGOTTEN = "heading for door A (beacon unknown, guessing)"
THOUGHT = "NOTES: level 1 beacon C"

Item = dict[str, Any]


def user(text: str) -> Item:
    return {"role": "user", "content": text}


def client_for(provider: LocalProvider) -> openai.OpenAI:
    return openai.OpenAI(base_url=provider.openai_base_url, api_key="test-key", max_retries=0)


def ask(client: openai.OpenAI, items: Sequence[Item] | str, **params: Any) -> Response:
    """A stateless continuous-conversation request, as the openai.responses.v1 adapter sends it."""
    settings: dict[str, Any] = {"store": False, "include": ENCRYPTED, "instructions": SYSTEM, **params}
    return client.responses.create(model=MODEL, input=items, **settings)


def replayable(response: Response) -> list[Item]:
    """Every output item as the next request's input, serialized exactly as received: as on the real
    service, no output item carries a field the input refuses."""
    return [output.model_dump(mode="json", exclude_unset=True) for output in response.output]


def from_latest_compaction(items: Sequence[Item]) -> list[Item]:
    """An inline-compacting client's history: the latest compaction item and everything after it."""
    starts = [index for index, item in enumerate(items) if item.get("type") == "compaction"]
    return list(items[starts[-1] :]) if starts else list(items)


def first_turn(client: openai.OpenAI, **params: Any) -> tuple[list[Item], Response]:
    """The beacon frame answered; the conversation so far, replayed faithfully."""
    opening = [user(SHOWN)]
    response = ask(client, opening, **params)
    return opening + replayable(response), response


def refusal(raised: pytest.ExceptionInfo[openai.APIStatusError]) -> Mapping[str, Any]:
    body = raised.value.body
    assert isinstance(body, dict)
    return body


@pytest.fixture
def provider() -> Iterator[LocalProvider]:
    with LocalProvider() as running:
        yield running


@pytest.fixture
def client(provider: LocalProvider) -> Iterator[openai.OpenAI]:
    with client_for(provider) as sdk_client:
        yield sdk_client


# --- a first turn ----------------------------------------------------------------------------------


def test_a_first_turn_is_opaque_reasoning_then_the_visible_action(client: openai.OpenAI) -> None:
    response = ask(client, [user(SHOWN)])

    reasoning, message = response.output
    assert response.object == "response" and response.status == "completed" and response.model == MODEL
    assert response.id.startswith("resp_")
    token = response.id.removeprefix("resp_")
    assert (reasoning.type, reasoning.id) == ("reasoning", f"rs_{token}")
    assert (message.type, message.id, message.role, message.status) == (
        "message",
        f"msg_{token}",
        "assistant",
        "completed",
    )
    assert isinstance(reasoning.encrypted_content, str) and len(reasoning.encrypted_content) > 100
    assert reasoning.summary == []
    assert response.output_text == "Level 1: heading for door C (beacon seen).\nACTION: ACTION2"
    assert message.content[0].annotations == []


def test_the_hidden_fact_is_in_no_readable_part_of_the_response(client: openai.OpenAI) -> None:
    response = ask(client, [user(SHOWN)], instructions=SYSTEM + " End every reply with NOTES: level <n> beacon <x>.")
    raw = json.dumps([item.model_dump(mode="json") for item in response.output])

    assert "NOTES" not in raw
    assert "beacon C" not in raw
    assert THOUGHT not in response.output[0].encrypted_content


def test_a_reasoning_summary_is_given_only_when_asked(client: openai.OpenAI) -> None:
    asked = ask(client, [user(SHOWN)], reasoning={"summary": "auto"})
    not_asked = ask(client, [user(SHOWN)], reasoning={"effort": "high"})

    assert [part.text for part in asked.output[0].summary] == [REASONING_SUMMARY]
    assert not_asked.output[0].summary == []
    assert asked.reasoning.summary == "auto"


def test_without_include_the_reasoning_carries_no_encrypted_content(client: openai.OpenAI) -> None:
    response = client.responses.create(model=MODEL, input=[user(SHOWN)], store=False)

    assert response.output[0].type == "reasoning"
    assert response.output[0].encrypted_content is None


# --- stateless replay ------------------------------------------------------------------------------


def test_a_faithful_replay_is_accepted_and_the_beacon_is_remembered(client: openai.OpenAI) -> None:
    history, _ = first_turn(client)

    second = ask(client, [*history, user(DARK)])
    third = ask(client, [*history, *replayable(second), user(DARK)])

    assert REMEMBERED in second.output_text
    assert REMEMBERED in third.output_text


def test_old_frames_alone_do_not_carry_the_beacon_only_the_reasoning_does(client: openai.OpenAI) -> None:
    """The old beacon frame is in the input, but the model does not re-read it: with the visible reply
    replayed as plain text and no reasoning, the beacon is gone."""
    first = ask(client, [user(SHOWN)])
    visible_only = [user(SHOWN), {"role": "assistant", "content": first.output_text}, user(DARK)]

    assert FORGOTTEN in ask(client, visible_only).output_text


def test_every_output_item_replays_unchanged_turn_after_turn(client: openai.OpenAI) -> None:
    """As a client that replays output items as received does (recorded real replies carry no status
    on reasoning items and no created_by on compaction items, so nothing needs removing)."""
    history, first = first_turn(client)
    second = ask(client, [*history, user(DARK)], context_management=COMPACT_AT)
    third = ask(client, [*history, user(DARK), *replayable(second), user(DARK)], context_management=COMPACT_AT)

    raw = [item.model_dump(mode="json") for response in (first, second) for item in response.output]
    assert [item["type"] for item in raw] == ["reasoning", "message", "reasoning", "message", "compaction"]
    assert all(item.get("status") is None for item in raw if item["type"] == "reasoning")
    assert all(item.get("created_by") is None for item in raw if item["type"] == "compaction")
    assert REMEMBERED in third.output_text


def test_a_reasoning_item_replayed_with_a_status_is_accepted(client: openai.OpenAI) -> None:
    """The spec's input ReasoningItem and the SDK's ResponseReasoningItemParam take `status`."""
    history, _ = first_turn(client)
    with_status = [history[0], {**history[1], "status": "completed"}, *history[2:]]

    assert REMEMBERED in ask(client, [*with_status, user(DARK)]).output_text


def altered(blob: str) -> str:
    middle = len(blob) // 2
    return blob[:middle] + ("A" if blob[middle] != "A" else "B") + blob[middle + 1 :]


def two_turns(client: openai.OpenAI) -> list[Item]:
    """[user, rs1, msg1, user, rs2, msg2]: two faithfully replayable turns."""
    history, _ = first_turn(client)
    second = ask(client, [*history, user(DARK)])
    return [*history, user(DARK), *replayable(second)]


def dropped_reasoning(items: list[Item]) -> list[Item]:
    return [item for item in items if item is not items[1]]


def dropped_message(items: list[Item]) -> list[Item]:
    return [item for item in items if item is not items[2]]


def altered_reasoning(items: list[Item]) -> list[Item]:
    return [items[0], {**items[1], "encrypted_content": altered(items[1]["encrypted_content"])}, *items[2:]]


def swapped_blobs(items: list[Item]) -> list[Item]:
    swapped = list(items)
    swapped[1] = {**items[1], "encrypted_content": items[4]["encrypted_content"]}
    swapped[4] = {**items[4], "encrypted_content": items[1]["encrypted_content"]}
    return swapped


def altered_summary(items: list[Item]) -> list[Item]:
    return [items[0], {**items[1], "summary": [{"type": "summary_text", "text": "I made this up."}]}, *items[2:]]


def altered_message(items: list[Item]) -> list[Item]:
    message = items[2]
    content = [{**message["content"][0], "text": "Level 1: heading for door A.\nACTION: ACTION1"}]
    return [items[0], items[1], {**message, "content": content}, *items[3:]]


def reordered_turns(items: list[Item]) -> list[Item]:
    return [*items[3:], *items[:3]]


def status_invalid(items: list[Item]) -> list[Item]:
    return [items[0], {**items[1], "status": "done"}, *items[2:]]


@pytest.mark.parametrize(
    ("lossy", "param", "code", "words"),
    [
        (dropped_reasoning, "input", None, "was provided without its required 'reasoning' item"),
        (dropped_message, "input", None, "was provided without its required following item"),
        (altered_reasoning, "input", "invalid_encrypted_content", "could not be verified"),
        (swapped_blobs, "input", "invalid_encrypted_content", "it was issued for item"),
        (altered_summary, "input", "invalid_encrypted_content", "summary is not the one it was issued with"),
        (altered_message, "input", "invalid_encrypted_content", "is not the message it was issued with"),
        (reordered_turns, "input", "reasoning_out_of_order", "is out of order"),
        (status_invalid, "input[1].status", "invalid_value", "Invalid value: 'done'."),
    ],
    ids=lambda value: getattr(value, "__name__", None),
)
def test_an_unfaithful_replay_is_a_400_naming_input(
    client: openai.OpenAI, lossy: Any, param: str, code: str | None, words: str
) -> None:
    history = two_turns(client)
    assert REMEMBERED in ask(client, [*history, user(DARK)]).output_text  # the faithful replay is fine

    with pytest.raises(openai.BadRequestError) as raised:
        ask(client, [*lossy(history), user(DARK)])

    body = refusal(raised)
    assert body["type"] == "invalid_request_error"
    assert body["param"] == param
    assert body["code"] == code
    assert words in body["message"]


def test_a_replay_may_start_at_any_whole_turn_and_loses_what_the_dropped_turns_held(client: openai.OpenAI) -> None:
    """Dropping whole old turns is allowed, as on the real service; the beacon was noted only in the
    first turn's reasoning, so it is gone."""
    history = two_turns(client)

    response = ask(client, [*history[3:], user(DARK)])

    assert response.status == "completed"
    assert FORGOTTEN in response.output_text


def test_a_duplicated_item_is_a_400(client: openai.OpenAI) -> None:
    history, _ = first_turn(client)

    with pytest.raises(openai.BadRequestError) as raised:
        ask(client, [*history, *history[1:], user(DARK)])

    assert "Duplicate item found with id rs_" in refusal(raised)["message"]
    assert refusal(raised)["param"] == "input"


def test_another_providers_reasoning_cannot_be_replayed(client: openai.OpenAI) -> None:
    history, _ = first_turn(client)

    with LocalProvider() as other, client_for(other) as other_client, pytest.raises(openai.BadRequestError) as raised:
        ask(other_client, [*history, user(DARK)])

    assert refusal(raised)["code"] == "invalid_encrypted_content"


# --- stored responses ------------------------------------------------------------------------------


def test_store_false_reasoning_without_encrypted_content_cannot_be_replayed(client: openai.OpenAI) -> None:
    opening = [user(SHOWN)]
    response = client.responses.create(model=MODEL, input=opening, store=False, instructions=SYSTEM)

    with pytest.raises(openai.NotFoundError) as raised:
        client.responses.create(model=MODEL, input=[*opening, *replayable(response), user(DARK)], store=False)

    assert refusal(raised)["message"].startswith(f"Item with id '{response.output[0].id}' not found.")
    assert refusal(raised)["param"] == "input"


def test_stored_reasoning_without_encrypted_content_is_read_from_the_store(client: openai.OpenAI) -> None:
    opening = [user(SHOWN)]
    response = client.responses.create(model=MODEL, input=opening, instructions=SYSTEM)

    continued = client.responses.create(model=MODEL, input=[*opening, *replayable(response), user(DARK)])

    assert response.store is True and response.output[0].encrypted_content is None
    assert REMEMBERED in continued.output_text


def test_previous_response_id_continues_a_stored_response(client: openai.OpenAI) -> None:
    first = client.responses.create(model=MODEL, input=[user(SHOWN)], instructions=SYSTEM)
    second = client.responses.create(
        model=MODEL, input=[user(DARK)], previous_response_id=first.id, instructions=SYSTEM
    )
    third = client.responses.create(
        model=MODEL, input=[user(DARK)], previous_response_id=second.id, instructions=SYSTEM, store=False
    )

    assert second.previous_response_id == first.id
    assert REMEMBERED in second.output_text
    assert REMEMBERED in third.output_text
    # the stored chain is billed as input: first turn's items plus this turn's
    assert second.usage.input_tokens > first.usage.input_tokens + estimate_text_tokens(DARK)


def test_an_unknown_previous_response_id_is_a_404(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as raised:
        client.responses.create(model=MODEL, input="hi", previous_response_id="resp_nope")

    assert refusal(raised) == {
        "message": "Previous response with id 'resp_nope' not found.",
        "type": "invalid_request_error",
        "param": "previous_response_id",
        "code": "previous_response_not_found",
    }


def test_a_store_false_response_is_not_kept(client: openai.OpenAI) -> None:
    unstored = client.responses.create(model=MODEL, input=[user(SHOWN)], store=False)

    with pytest.raises(openai.NotFoundError) as raised:
        client.responses.create(model=MODEL, input=[user(DARK)], previous_response_id=unstored.id)

    assert refusal(raised)["code"] == "previous_response_not_found"


def test_an_expired_handle_is_a_404_and_only_from_the_faulted_request_on() -> None:
    with LocalProvider(faults=[Fault(at=3, kind="expire_handle")]) as provider, client_for(provider) as client:
        first = client.responses.create(model=MODEL, input=[user(SHOWN)])
        second = client.responses.create(model=MODEL, input=[user(DARK)], previous_response_id=first.id)
        with pytest.raises(openai.NotFoundError) as raised:
            client.responses.create(model=MODEL, input=[user(DARK)], previous_response_id=second.id)

    assert REMEMBERED in second.output_text
    assert refusal(raised)["message"] == f"Previous response with id '{second.id}' not found."


def test_a_stored_response_does_not_outlive_its_provider(client: openai.OpenAI) -> None:
    stored = client.responses.create(model=MODEL, input=[user(SHOWN)])

    with LocalProvider() as other, client_for(other) as other_client, pytest.raises(openai.NotFoundError):
        other_client.responses.create(model=MODEL, input="hi", previous_response_id=stored.id)


# --- compaction ------------------------------------------------------------------------------------

COMPACT_AT = [{"type": "compaction", "compact_threshold": 200}]


def test_inline_compaction_comes_after_the_reply_when_the_context_crosses_the_threshold(client: openai.OpenAI) -> None:
    """Recorded (compact_stateful_mode.yaml): the real service answers, then compacts, and the
    compaction item, without created_by, follows the message; its summary is billed as output."""
    history, first = first_turn(client, context_management=COMPACT_AT)
    compacted = ask(client, [*history, user(DARK)], context_management=COMPACT_AT)

    assert [item.type for item in first.output] == ["reasoning", "message"]  # under the threshold
    assert first.usage.input_tokens + first.usage.output_tokens <= 200
    assert compacted.usage.input_tokens + compacted.usage.output_tokens > 200
    reasoning, message, compaction = compacted.output
    token = compacted.id.removeprefix("resp_")
    assert (reasoning.type, message.type, compaction.type, compaction.id) == (
        "reasoning",
        "message",
        "compaction",
        f"cmp_{token}",
    )
    assert "created_by" not in compaction.model_dump(exclude_unset=True)
    assert THOUGHT not in compaction.encrypted_content
    assert REMEMBERED in compacted.output_text
    assert compacted.usage.output_tokens > estimate_text_tokens(compacted.output_text) + estimate_text_tokens(THOUGHT)


def test_the_context_that_crosses_the_threshold_counts_the_reply_too(client: openai.OpenAI) -> None:
    prompt = ask(client, [user(SHOWN)])
    threshold = [{"type": "compaction", "compact_threshold": prompt.usage.input_tokens + 1}]

    compacted = ask(client, [user(SHOWN)], context_management=threshold)

    assert compacted.usage.input_tokens < threshold[0]["compact_threshold"]
    assert [item.type for item in compacted.output] == ["reasoning", "message", "compaction"]


def test_a_compaction_in_the_turn_that_saw_the_beacon_carries_it(client: openai.OpenAI) -> None:
    """The compaction stands for the whole conversation, this response's reasoning included."""
    compacted = ask(client, [user(SHOWN)], context_management=[{"type": "compaction", "compact_threshold": 16}])
    kept = from_latest_compaction([user(SHOWN), *replayable(compacted)])

    assert kinds(kept) == ["compaction"]
    assert REMEMBERED in ask(client, [*kept, user(DARK)]).output_text


def test_the_replayed_compaction_item_carries_the_beacon(client: openai.OpenAI) -> None:
    history, _ = first_turn(client)
    compacted = ask(client, [*history, user(DARK)], context_management=COMPACT_AT)
    kept = from_latest_compaction(replayable(compacted))

    after = ask(client, [*kept, user(DARK)])
    later = ask(client, [*kept, user(DARK), *replayable(after), user(DARK)])

    assert REMEMBERED in after.output_text
    assert REMEMBERED in later.output_text
    assert after.usage.input_tokens < compacted.usage.input_tokens


def test_the_compaction_alone_carries_what_it_replaced(client: openai.OpenAI) -> None:
    """Without the items before it, the compaction item still holds the first turn's beacon."""
    history, _ = first_turn(client)
    compacted = ask(client, [*history, user(DARK)], context_management=COMPACT_AT)
    compaction = replayable(compacted)[-1]

    assert REMEMBERED in ask(client, [compaction, user(DARK)]).output_text


def test_a_replay_that_drops_the_compaction_item_forgets_what_it_carried(client: openai.OpenAI) -> None:
    history, _ = first_turn(client)
    compacted = ask(client, [*history, user(DARK)], context_management=COMPACT_AT)
    after = ask(client, [*replayable(compacted)[-1:], user(DARK)])
    kept = [*replayable(compacted)[-1:], user(DARK), *replayable(after)]

    assert kinds(kept) == ["compaction", "message", "reasoning", "message"]
    assert REMEMBERED in ask(client, [*kept, user(DARK)]).output_text
    assert FORGOTTEN in ask(client, [*kept[1:], user(DARK)]).output_text


def kinds(items: Sequence[Item]) -> list[str]:
    return [str(item.get("type", "message")) for item in items]


def test_items_before_the_latest_compaction_are_tolerated_and_not_read(client: openai.OpenAI) -> None:
    history, _ = first_turn(client)
    compacted = ask(client, [*history, user(DARK)], context_management=COMPACT_AT)
    stale = [user(frame_text(EXAMPLE_ROWS, beacon="B")), history[1], {"type": "reasoning", "id": "rs_x", "summary": []}]

    response = ask(client, [*history, user(DARK), *replayable(compacted), user(DARK)])
    with_stale_junk = ask(client, [stale[0], *replayable(compacted), user(DARK)])

    assert REMEMBERED in response.output_text
    assert REMEMBERED in with_stale_junk.output_text  # the beacon-B frame before it is not read


def test_a_compaction_item_that_fails_verification_is_a_400(client: openai.OpenAI) -> None:
    history, _ = first_turn(client)
    compaction = replayable(ask(client, [*history, user(DARK)], context_management=COMPACT_AT))[-1]
    tampered = {**compaction, "encrypted_content": altered(compaction["encrypted_content"])}

    with pytest.raises(openai.BadRequestError) as raised:
        ask(client, [tampered, user(DARK)])

    assert refusal(raised)["code"] == "invalid_encrypted_content"
    assert refusal(raised)["param"] == "input"


def test_created_by_on_an_input_compaction_item_is_a_400(client: openai.OpenAI) -> None:
    """The spec's input compaction item has no created_by (openai-node strips it as output-only)."""
    history, _ = first_turn(client)
    compaction = replayable(ask(client, [*history, user(DARK)], context_management=COMPACT_AT))[-1]

    with pytest.raises(openai.BadRequestError) as raised:
        ask(client, [{**compaction, "created_by": "context_management"}, user(DARK)])

    assert refusal(raised)["param"] == "input[0].created_by"
    assert refusal(raised)["code"] == "unknown_parameter"


def test_the_compact_endpoint_keeps_the_user_messages_and_adds_one_compaction_item(client: openai.OpenAI) -> None:
    """As recorded (compact_messages.yaml): each kept message in the output form, with a fresh id,
    status and input_text parts; then one compaction item without created_by."""
    history = two_turns(client)

    compacted = client.responses.compact(model=MODEL, input=history)

    assert compacted.object == "response.compaction"
    *messages, compaction = compacted.output
    dumped = [message.model_dump(mode="json", exclude_unset=True, warnings=False) for message in messages]
    assert [{key: value for key, value in item.items() if key != "id"} for item in dumped] == [
        {"type": "message", "role": "user", "status": "completed", "content": [{"type": "input_text", "text": text}]}
        for text in (SHOWN, DARK)
    ]
    ids = [item["id"] for item in dumped]
    assert all(item_id.startswith("msg_") for item_id in ids) and len(set(ids)) == 2
    assert (compaction.type, compaction.id) == ("compaction", "cmp_" + compacted.id.removeprefix("resp_"))
    assert compaction.model_dump(exclude_unset=True).keys() == {"type", "id", "encrypted_content"}
    assert THOUGHT not in compaction.encrypted_content
    assert compacted.usage.input_tokens > 0
    assert compacted.usage.output_tokens_details.reasoning_tokens == 0


def replayable_compaction(output: Sequence[Any]) -> list[Item]:
    """A compact output as the next request's input, serialized exactly as received."""
    # The SDK types every output message as an assistant's, so a user message dumps with a warning.
    return [item.model_dump(mode="json", exclude_unset=True, warnings=False) for item in output]


def test_a_compacted_window_replayed_whole_reads_the_beacon_back_from_its_kept_messages(client: openai.OpenAI) -> None:
    compacted = client.responses.compact(model=MODEL, input=two_turns(client))
    window = replayable_compaction(compacted.output)

    response = ask(client, [*window, user(DARK)])
    later = ask(client, [*window, user(DARK), *replayable(response), user(DARK)])

    assert REMEMBERED in response.output_text
    assert REMEMBERED in later.output_text


def test_a_compacted_window_without_its_kept_messages_forgets_the_beacon(client: openai.OpenAI) -> None:
    """The compaction stands for what it replaced, not for the messages it kept: the beacon frame is
    one of them, so its summary does not repeat the beacon, and a client that drops them loses it."""
    compacted = client.responses.compact(model=MODEL, input=two_turns(client))
    compaction = replayable_compaction(compacted.output)[-1]

    assert compaction["type"] == "compaction"
    assert FORGOTTEN in ask(client, [compaction, user(DARK)]).output_text
    assert compacted.usage.output_tokens == 0  # the summary is empty: the kept frames hold it all


def test_the_compaction_carries_what_only_the_replaced_items_held(client: openai.OpenAI) -> None:
    """A beacon noted in reasoning whose frame is not among the kept messages (here the client sent
    the compact call the visible turn without its frame) survives in the compaction itself."""
    history = two_turns(client)
    without_the_frame = history[1:]  # the reasoning that noted the beacon, without the beacon frame

    compacted = client.responses.compact(model=MODEL, input=without_the_frame)
    compaction = replayable_compaction(compacted.output)[-1]

    assert REMEMBERED in ask(client, [compaction, user(DARK)]).output_text


def test_kept_messages_are_read_back_in_any_form_the_input_takes(client: openai.OpenAI) -> None:
    """With or without id and status, typed or in the short form: the service reads their text."""
    compacted = client.responses.compact(model=MODEL, input=two_turns(client))
    *kept, compaction = replayable_compaction(compacted.output)
    short = [user(content_text(message["content"])) for message in kept]

    assert REMEMBERED in ask(client, [*short, compaction, user(DARK)]).output_text


def test_a_second_compaction_keeps_every_user_message_those_before_the_first_included(client: openai.OpenAI) -> None:
    compacted = client.responses.compact(model=MODEL, input=two_turns(client))
    window = replayable_compaction(compacted.output)
    response = ask(client, [*window, user(DARK)])

    again = client.responses.compact(model=MODEL, input=[*window, user(DARK), *replayable(response)])
    messages = [item for item in again.output if item.type == "message"]

    assert [content_text(message.model_dump(warnings=False)["content"]) for message in messages] == [SHOWN, DARK, DARK]
    assert [item.type for item in again.output].count("compaction") == 1
    assert REMEMBERED in ask(client, [*replayable_compaction(again.output), user(DARK)]).output_text


def test_a_user_message_before_the_compaction_that_it_did_not_keep_is_not_read(client: openai.OpenAI) -> None:
    """Only the kept messages of the compacted window are read back: another frame before the
    compaction item (here a beacon-B frame) is tolerated and not read."""
    compacted = client.responses.compact(model=MODEL, input=two_turns(client))
    *kept, compaction = replayable_compaction(compacted.output)
    stale = user(frame_text(EXAMPLE_ROWS, beacon="B"))

    assert REMEMBERED in ask(client, [*kept, stale, compaction, user(DARK)]).output_text


def test_the_compact_endpoint_holds_a_replay_to_the_same_rules(client: openai.OpenAI) -> None:
    history = two_turns(client)

    with pytest.raises(openai.BadRequestError) as raised:
        client.responses.compact(model=MODEL, input=dropped_reasoning(history))

    assert "without its required 'reasoning' item" in refusal(raised)["message"]


def test_the_compact_endpoint_rejects_unknown_params_and_needs_a_model(provider: LocalProvider) -> None:
    unknown = post_raw(provider, {"model": MODEL, "input": "hi", "store": False}, path="/responses/compact")
    no_model = post_raw(provider, {"input": "hi"}, path="/responses/compact")

    assert (unknown.status_code, unknown.json()["error"]["param"]) == (400, "store")
    assert (no_model.status_code, no_model.json()["error"]["param"]) == (400, "model")


# --- streaming -------------------------------------------------------------------------------------


def test_a_stream_sends_its_events_in_the_documented_order(client: openai.OpenAI) -> None:
    history, _ = first_turn(client)
    events = list(ask(client, [*history, user(DARK)], stream=True, reasoning={"summary": "auto"}))

    assert [event.sequence_number for event in events] == list(range(len(events)))
    assert [event.type for event in events] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.reasoning_summary_part.added",
        *["response.reasoning_summary_text.delta"] * 3,
        "response.reasoning_summary_text.done",
        "response.reasoning_summary_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.content_part.added",
        *["response.output_text.delta"] * 3,
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    added, done = events[2], events[9]
    assert added.item.encrypted_content is None and isinstance(done.item.encrypted_content, str)
    completed = events[-1].response
    assert completed.output[0].encrypted_content == done.item.encrypted_content
    text = "".join(event.delta for event in events if event.type == "response.output_text.delta")
    assert text == completed.output_text and REMEMBERED in text
    assert events[0].response.status == "in_progress" and events[0].response.output == []


def test_a_streamed_reply_replays_as_faithfully_as_a_plain_one(client: openai.OpenAI) -> None:
    events = list(ask(client, [user(SHOWN)], stream=True))
    completed = events[-1].response

    assert REMEMBERED in ask(client, [user(SHOWN), *replayable(completed), user(DARK)]).output_text


def test_the_sdk_stream_helper_completes(client: openai.OpenAI) -> None:
    with client.responses.stream(
        model=MODEL, input=[user(SHOWN)], store=False, include=ENCRYPTED, instructions=SYSTEM
    ) as stream:
        types = [event.type for event in stream]
        final = stream.get_final_response()

    assert types[0] == "response.created" and types[-1] == "response.completed"
    assert final.output_text.endswith("ACTION: ACTION2")


def test_an_inline_compaction_is_streamed_as_the_last_item(client: openai.OpenAI) -> None:
    history, _ = first_turn(client)
    events = list(ask(client, [*history, user(DARK)], stream=True, context_management=COMPACT_AT))

    types = [event.type for event in events]
    assert types[-4:] == [
        "response.output_item.added",
        "response.compaction.compacting",
        "response.output_item.done",
        "response.completed",
    ]
    done = events[-2]
    assert (done.item.type, done.output_index) == ("compaction", 2) and done.item.encrypted_content
    assert [event.output_index for event in events if event.type == "response.output_item.added"] == [0, 1, 2]
    assert [item.type for item in events[-1].response.output] == ["reasoning", "message", "compaction"]


def test_a_stream_is_event_and_data_lines_in_chunked_encoding(provider: LocalProvider) -> None:
    response = post_raw(provider, {"model": MODEL, "input": "hi", "stream": True})

    assert response.headers["transfer-encoding"] == "chunked"
    assert response.headers["content-type"].startswith("text/event-stream")
    blocks = [block for block in response.text.split("\n\n") if block]
    for block in blocks:
        event_line, data_line = block.split("\n")
        assert event_line.removeprefix("event: ") == json.loads(data_line.removeprefix("data: "))["type"]
    assert blocks[-1].startswith("event: response.completed")


# --- usage and caching -----------------------------------------------------------------------------


def tokens_of(text: str) -> int:
    return MESSAGE_OVERHEAD_TOKENS + estimate_text_tokens(text)


def test_usage_counts_every_item_sent_and_the_thought_as_reasoning(client: openai.OpenAI) -> None:
    history, first = first_turn(client)
    second = ask(client, [*history, user(DARK)])

    assert first.usage.input_tokens == tokens_of(SYSTEM) + tokens_of(SHOWN)
    assert first.usage.output_tokens_details.reasoning_tokens == estimate_text_tokens(THOUGHT)
    assert first.usage.output_tokens == estimate_text_tokens(first.output_text) + estimate_text_tokens(THOUGHT)
    assert first.usage.total_tokens == first.usage.input_tokens + first.usage.output_tokens
    reasoning, message = history[1], history[2]
    assert second.usage.input_tokens == (
        tokens_of(SYSTEM)
        + tokens_of(SHOWN)
        + tokens_of(reasoning["encrypted_content"])  # an opaque blob is billed by its length
        + tokens_of(message["content"][0]["text"])
        + tokens_of(DARK)
    )


def test_cached_tokens_follow_openais_rule_over_the_replayed_items(client: openai.OpenAI) -> None:
    long_system = SYSTEM + " " + "x" * 4400  # 4 + ceil(4459 / 4) = 1119 tokens on its own
    history, first = first_turn(client, instructions=long_system)
    second = ask(client, [*history, user(DARK)], instructions=long_system)
    unrelated = ask(client, [user(DARK)], instructions=SYSTEM)

    assert first.usage.input_tokens_details.cached_tokens == 0
    assert first.usage.input_tokens >= 1024
    assert second.usage.input_tokens_details.cached_tokens == first.usage.input_tokens // 128 * 128
    assert unrelated.usage.input_tokens_details.cached_tokens == 0


def test_cache_write_tokens_report_what_each_request_stored_in_the_cache(client: openai.OpenAI) -> None:
    """The spec's ResponseUsage requires input_tokens_details.cache_write_tokens; as recorded, a first
    request writes its cacheable prefix and reads nothing, and the same request again reads it all
    and writes nothing. A grown conversation writes only its new whole blocks."""
    long_system = SYSTEM + " " + "x" * 4400
    history, first = first_turn(client, instructions=long_system)
    again = ask(client, [user(SHOWN)], instructions=long_system)
    grown = ask(client, [*history, user(DARK + " " + "y" * 600)], instructions=long_system)
    short = ask(client, [user(DARK)])

    def read_and_written(response: Response) -> tuple[int, int]:
        details = response.usage.input_tokens_details
        return details.cached_tokens, details.cache_write_tokens

    cacheable = first.usage.input_tokens // 128 * 128
    assert read_and_written(first) == (0, cacheable)
    assert read_and_written(again) == (cacheable, 0)
    assert read_and_written(grown) == (cacheable, grown.usage.input_tokens // 128 * 128 - cacheable)
    assert read_and_written(grown)[1] > 0
    assert read_and_written(short) == (0, 0)  # under 1,024 tokens nothing is cached


def test_a_compaction_reports_its_cache_writes_too(client: openai.OpenAI) -> None:
    long_system = SYSTEM + " " + "x" * 4400
    history, first = first_turn(client, instructions=long_system)

    compacted = client.responses.compact(model=MODEL, input=history, instructions=long_system)

    details = compacted.usage.input_tokens_details
    assert details.cached_tokens == first.usage.input_tokens // 128 * 128
    assert details.cache_write_tokens == compacted.usage.input_tokens // 128 * 128 - details.cached_tokens


def test_a_short_shared_prefix_is_not_cached(client: openai.OpenAI) -> None:
    history, _ = first_turn(client)
    second = ask(client, [*history, user(DARK)])

    assert second.usage.input_tokens_details.cached_tokens == 0


# --- the context window and the output limit -------------------------------------------------------


def test_a_prompt_over_the_window_is_a_400_context_length_exceeded() -> None:
    prompt = tokens_of(SYSTEM) + tokens_of(SHOWN)
    with LocalProvider(context_window=prompt + 99) as provider, client_for(provider) as client:
        fits = ask(client, [user(SHOWN)], max_output_tokens=99)
        with pytest.raises(openai.BadRequestError) as raised:
            ask(client, [user(SHOWN)], max_output_tokens=100)

    assert fits.status == "completed"
    assert refusal(raised) == {
        "message": CONTEXT_EXCEEDED,
        "type": "invalid_request_error",
        "param": "input",
        "code": "context_length_exceeded",
    }


def test_truncation_auto_drops_the_oldest_whole_turns_to_fit() -> None:
    latest = user(DARK + " " + "y" * 1200)
    with LocalProvider(context_window=600) as provider, client_for(provider) as client:
        history, _ = first_turn(client)
        assert ask(client, [latest], max_output_tokens=100).usage.input_tokens + 100 <= 600
        with pytest.raises(openai.BadRequestError):
            ask(client, [*history, latest], max_output_tokens=100)
        fitted = ask(client, [*history, latest], max_output_tokens=100, truncation="auto")

    assert fitted.usage.input_tokens == tokens_of(SYSTEM) + tokens_of(latest["content"])
    assert FORGOTTEN in fitted.output_text  # the dropped first turn held the beacon


def test_max_output_tokens_bounds_thought_and_reply_together(client: openai.OpenAI) -> None:
    response = ask(client, [user(SHOWN)], max_output_tokens=16)

    thought_tokens = estimate_text_tokens(THOUGHT)
    assert response.status == "incomplete"
    assert response.incomplete_details.reason == "max_output_tokens"
    assert response.output[1].status == "incomplete"
    assert response.usage.output_tokens_details.reasoning_tokens == thought_tokens
    assert estimate_text_tokens(response.output_text) <= 16 - thought_tokens
    assert "Level 1: heading for door C".startswith(response.output_text[:20])


# --- faults ----------------------------------------------------------------------------------------


def send(client: openai.OpenAI, stream: bool) -> Response:
    """One first-turn request; streamed, the response the stream ends with."""
    if not stream:
        return ask(client, [user(SHOWN)])
    events = list(ask(client, [user(SHOWN)], stream=True))
    return events[-1].response


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize(
    ("kind", "error_class", "status"),
    [
        ("rate_limit", openai.RateLimitError, 429),
        ("server_error", openai.InternalServerError, 500),
        ("overloaded", openai.InternalServerError, 503),
    ],
)
def test_a_status_fault_fails_only_its_request(
    kind: str, error_class: type[openai.APIStatusError], status: int, stream: bool
) -> None:
    with LocalProvider(faults=[Fault(at=2, kind=kind)]) as provider, client_for(provider) as client:
        before = send(client, stream)
        with pytest.raises(error_class) as raised:
            send(client, stream)
        after = send(client, stream)

    assert raised.value.status_code == status
    assert before.status == after.status == "completed"


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize(
    ("kind", "status", "reason", "text"),
    [
        ("refusal", "incomplete", "content_filter", ""),
        ("truncation", "incomplete", "max_output_tokens", "Level 1: heading for door C ("),  # the first half
        ("empty", "completed", None, ""),
        ("malformed", "completed", None, MALFORMED_REPLY),
    ],
)
def test_a_content_fault_shapes_only_its_reply(
    kind: str, status: str, reason: str | None, text: str, stream: bool
) -> None:
    with LocalProvider(faults=[Fault(at=2, kind=kind)]) as provider, client_for(provider) as client:
        before = ask(client, [user(SHOWN)])
        faulted = send(client, stream)
        after = ask(client, [user(SHOWN)])

    assert (faulted.status, faulted.output_text) == (status, text)
    assert (faulted.incomplete_details.reason if faulted.incomplete_details else None) == reason
    assert faulted.output[1].status == ("completed" if status == "completed" else "incomplete")
    assert faulted.usage.output_tokens == estimate_text_tokens(text) + estimate_text_tokens(THOUGHT)
    assert before.output_text == after.output_text != text


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_a_pause_is_the_whole_reply_ended_as_truncated(stream: bool) -> None:
    with LocalProvider(faults=[Fault(at=2, kind="pause_turn")]) as provider, client_for(provider) as client:
        whole = ask(client, [user(SHOWN)])
        paused = send(client, stream)

    assert (paused.status, paused.incomplete_details and paused.incomplete_details.reason) == (
        "incomplete",
        "max_output_tokens",
    )
    assert paused.output_text == whole.output_text and "ACTION: " in paused.output_text


def test_a_context_overflow_fault_is_context_length_exceeded_for_that_request_only() -> None:
    with LocalProvider(faults=[Fault(at=1, kind="context_overflow")]) as provider, client_for(provider) as client:
        with pytest.raises(openai.BadRequestError) as raised:
            ask(client, [user(SHOWN)])
        assert refusal(raised)["code"] == "context_length_exceeded"
        assert ask(client, [user(SHOWN)]).status == "completed"


def test_a_leaked_key_shows_in_the_visible_text() -> None:
    with LocalProvider(faults=[Fault(at=1, kind="leak_key")]) as provider, client_for(provider) as client:
        response = ask(client, [user(SHOWN)])

    assert response.output_text.endswith("\nAuthorization: Bearer test-key")


def test_an_html_page_is_a_200_the_sdk_cannot_parse() -> None:
    with LocalProvider(faults=[Fault(at=1, kind="html_page")]) as provider, client_for(provider) as client:
        raw = client.responses.with_raw_response.create(model=MODEL, input="hi")

    assert raw.status_code == 200 and raw.headers["content-type"].startswith("text/html")


def test_a_garbled_body_or_stream_cannot_be_read() -> None:
    faults = [Fault(at=1, kind="garbled"), Fault(at=2, kind="garbled")]
    with LocalProvider(faults=faults) as provider, client_for(provider) as client:
        with pytest.raises(json.JSONDecodeError):
            ask(client, [user(SHOWN)])
        stream = ask(client, [user(SHOWN)], stream=True)
        first = next(iter(stream))
        with pytest.raises(json.JSONDecodeError):
            list(stream)
        recovered = ask(client, [user(SHOWN)])

    assert first.type == "response.created"
    assert recovered.status == "completed"


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_empty_choices_is_a_response_with_an_empty_output_and_its_usage(stream: bool) -> None:
    with LocalProvider(faults=[Fault(at=1, kind="empty_choices")]) as provider, client_for(provider) as client:
        if stream:
            events = list(ask(client, [user(SHOWN)], stream=True))
            response = events[-1].response
            assert [event.type for event in events] == [
                "response.created",
                "response.in_progress",
                "response.completed",
            ]
        else:
            response = ask(client, [user(SHOWN)])

    assert response.output == [] and response.output_text == ""
    assert response.usage.input_tokens > 0 and response.usage.output_tokens > 0


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_null_message_is_an_output_message_without_content(stream: bool) -> None:
    with LocalProvider(faults=[Fault(at=1, kind="null_message")]) as provider, client_for(provider) as client:
        response = send(client, stream)

    assert [item.type for item in response.output] == ["reasoning", "message"]
    assert response.output[1].content is None
    with pytest.raises(TypeError):
        _ = response.output_text  # the SDK's own helper cannot read it: a client must check


def test_a_cut_stream_ends_after_its_first_text_and_never_completes() -> None:
    received = []
    with LocalProvider(faults=[Fault(at=1, kind="stream_cut")]) as provider, client_for(provider) as client:
        with pytest.raises(openai.APIConnectionError) as raised:
            for event in ask(client, [user(SHOWN)], stream=True):
                received.append(event)
        recovered = ask(client, [user(SHOWN)])

    assert isinstance(raised.value.__cause__, httpx2.RemoteProtocolError)
    assert received[-1].type == "response.output_text.delta"
    assert not any(event.type.startswith("response.completed") for event in received)
    assert recovered.status == "completed"


def test_a_cut_non_streamed_request_gets_no_response() -> None:
    with LocalProvider(faults=[Fault(at=1, kind="stream_cut")]) as provider, client_for(provider) as client:
        with pytest.raises(openai.APIConnectionError):
            ask(client, [user(SHOWN)])


def test_the_stream_helper_raises_when_the_stream_is_cut() -> None:
    with LocalProvider(faults=[Fault(at=1, kind="stream_cut")]) as provider, client_for(provider) as client:
        with pytest.raises(openai.APIConnectionError):
            with client.responses.stream(model=MODEL, input=[user(SHOWN)]) as stream:
                list(stream)


@pytest.mark.parametrize(
    ("kind", "check"),
    [
        ("empty_choices", lambda body: body["output"] == []),
        ("null_message", lambda body: body["output"][-1]["encrypted_content"] is None),
        ("refusal", lambda body: body["output"][-1]["type"] == "compaction"),  # nothing visible to refuse
    ],
)
def test_the_compact_endpoint_words_the_faults_that_apply_to_it(kind: str, check: Any) -> None:
    with LocalProvider(faults=[Fault(at=1, kind=kind)]) as faulted:
        response = post_raw(faulted, {"model": MODEL, "input": "hi"}, path="/responses/compact")

    assert response.status_code == 200
    assert check(response.json())


def test_a_cut_or_garbled_compaction_gets_no_readable_response() -> None:
    faults = [Fault(at=1, kind="stream_cut"), Fault(at=2, kind="garbled")]
    with LocalProvider(faults=faults) as provider, client_for(provider) as client:
        with pytest.raises(openai.APIConnectionError):
            client.responses.compact(model=MODEL, input="hi")
        with pytest.raises(json.JSONDecodeError):
            client.responses.compact(model=MODEL, input="hi")


FAULT_TESTS = {
    "rate_limit": test_a_status_fault_fails_only_its_request,
    "server_error": test_a_status_fault_fails_only_its_request,
    "overloaded": test_a_status_fault_fails_only_its_request,
    "refusal": test_a_content_fault_shapes_only_its_reply,
    "truncation": test_a_content_fault_shapes_only_its_reply,
    "pause_turn": test_a_pause_is_the_whole_reply_ended_as_truncated,
    "context_overflow": test_a_context_overflow_fault_is_context_length_exceeded_for_that_request_only,
    "empty": test_a_content_fault_shapes_only_its_reply,
    "malformed": test_a_content_fault_shapes_only_its_reply,
    "leak_key": test_a_leaked_key_shows_in_the_visible_text,
    "html_page": test_an_html_page_is_a_200_the_sdk_cannot_parse,
    "garbled": test_a_garbled_body_or_stream_cannot_be_read,
    "empty_choices": test_empty_choices_is_a_response_with_an_empty_output_and_its_usage,
    "null_message": test_null_message_is_an_output_message_without_content,
    "stream_cut": test_a_cut_stream_ends_after_its_first_text_and_never_completes,
    "expire_handle": test_an_expired_handle_is_a_404_and_only_from_the_faulted_request_on,
}


def test_every_fault_kind_has_a_responses_test() -> None:
    assert set(FAULT_TESTS) == FAULT_KINDS


# --- plumbing --------------------------------------------------------------------------------------


def post_raw(provider: LocalProvider, body: Mapping[str, object], *, path: str = "/responses") -> httpx2.Response:
    headers = {"Authorization": "Bearer test-key", "Content-Type": "application/json"}
    return httpx2.post(provider.openai_base_url + path, content=json.dumps(body).encode(), headers=headers)


def test_the_model_reads_the_system_prompt_kept_messages_and_current_turn_from_the_latest_compaction() -> None:
    seen: list[tuple[str, list[Mapping[str, object]]]] = []

    def record(system: str, messages: Sequence[Mapping[str, object]]) -> str:
        seen.append((system, [dict(message) for message in messages]))
        return "ok"

    old_rules = {"role": "developer", "content": "old rules"}
    with LocalProvider(reply=record) as provider, client_for(provider) as client:
        compacted = client.responses.compact(model=MODEL, input=[old_rules, user("a")])
        kept = replayable_compaction(compacted.output)
        new_rules = {"role": "system", "content": [{"type": "input_text", "text": "new rules"}]}
        client.responses.create(
            model=MODEL, instructions="always", input=[old_rules, *kept, new_rules, user("b"), user("c")]
        )

    # the compacted window's kept message first, then the current turn; the old rules are not read
    assert seen == [("always\nnew rules", [user("a"), user("b"), user("c")])]


def test_a_reply_function_without_thoughts_still_answers_over_this_wire() -> None:
    def echo(system: str, messages: Sequence[Mapping[str, object]]) -> str:
        return f"echo: {messages[-1]['content']}"

    with LocalProvider(reply=echo) as provider, client_for(provider) as client:
        history, first = first_turn(client)
        second = ask(client, [*history, user("again")])

    assert first.output_text == f"echo: {SHOWN}"
    assert second.output_text == "echo: again"
    assert first.usage.output_tokens_details.reasoning_tokens == 0


def test_a_missing_key_is_the_openai_401(provider: LocalProvider) -> None:
    response = httpx2.post(provider.openai_base_url + "/responses", json={"model": MODEL, "input": "hi"})

    assert response.status_code == 401
    assert response.json()["error"]["code"] == "invalid_api_key"
