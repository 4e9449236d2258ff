"""The embedded local provider's Anthropic Messages wire, through the real anthropic SDK over real HTTP.

The model is the real policy, so a level-1 frame that shows beacon C followed by a dark frame tells
whether the provider read the beacon back from the replayed thinking (or compaction): the dark frame
alone says nothing of it.
"""

from __future__ import annotations

import base64
import json
import typing
from collections.abc import Callable, Iterator, Sequence
from email.message import Message
from typing import Any

import anthropic
import httpx2
import pytest
from anthropic.types import DocumentBlockParam
from anthropic.types import Message as SdkMessage
from anthropic.types.beta import BetaMessage, BetaMetadataParam, BetaToolChoiceParam, BetaToolParam, BetaToolUnionParam
from anthropic.types.beta import message_create_params as beta_params

from turnstate.adapters.tokens import estimate_text_tokens
from turnstate.local_provider.exchange import MALFORMED_REPLY
from turnstate.local_provider.faults import FAULT_KINDS, Fault
from turnstate.local_provider.messages import COMPACTION_CONTENT, THINKING_SUMMARY
from turnstate.local_provider.messages_conversation import CacheUse, PromptCache, PromptUnit
from turnstate.local_provider.messages_request import (
    CUSTOM_TOOL_KEYS,
    DOCUMENT_SOURCES,
    REQUEST_FIELDS,
    SERVER_TOOL_TYPES,
    TOOL_CHOICE_KEYS,
)
from turnstate.local_provider.server import LocalProvider

from .test_policy import EXAMPLE_ROWS, frame_text

MODEL = "claude-sonnet-4-6"
SYSTEM = "You play beacon_grid. Answer with one line ACTION: <action>."
THINKING = {"type": "enabled", "budget_tokens": 1024}
MAX_TOKENS = 2048
COMPACT = "compact-2026-09-04"
THINKING_TOKENS = "thinking-token-count-2026-05-13"
SHOWN = frame_text(EXAMPLE_ROWS, beacon="C")
DARK = frame_text(EXAMPLE_ROWS, beacon="dark")
REMEMBERED = "heading for door C (beacon seen)"
FORGOTTEN = "heading for door A (beacon unknown, guessing)"
THOUGHT = "NOTES: level 1 beacon C"

Turn = dict[str, Any]


def user(text: str) -> Turn:
    return {"role": "user", "content": text}


def client_for(provider: LocalProvider) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=provider.base_url, api_key="test-key", max_retries=0)


def ask(client: anthropic.Anthropic, messages: Sequence[Turn], **params: Any) -> SdkMessage:
    settings: dict[str, Any] = {"system": SYSTEM, "thinking": THINKING, "max_tokens": MAX_TOKENS, **params}
    return client.messages.create(model=MODEL, messages=list(messages), **settings)


def ask_after_compaction(client: anthropic.Anthropic, messages: Sequence[Turn]) -> SdkMessage:
    """A request that replays a compaction block, which only the compaction beta knows."""
    return ask(client, messages, extra_headers={"anthropic-beta": COMPACT})


def compact(client: anthropic.Anthropic, messages: Sequence[Turn]) -> BetaMessage:
    return client.beta.messages.create(
        model=MODEL,
        max_tokens=MAX_TOKENS,
        system=SYSTEM,
        messages=list(messages),  # type: ignore[arg-type]
        betas=[COMPACT],
        extra_body={"compaction": {"type": "summarize"}},
    )


def replayed(reply: SdkMessage | BetaMessage) -> Turn:
    """The reply as the next request's assistant message: every block, serialized as received."""
    return {
        "role": "assistant",
        "content": [block.model_dump(mode="json", exclude_unset=True) for block in reply.content],
    }


def first_turn(client: anthropic.Anthropic, **params: Any) -> tuple[list[Turn], SdkMessage]:
    """The beacon frame answered; the conversation so far, replayed faithfully."""
    reply = ask(client, [user(SHOWN)], **params)
    return [user(SHOWN), replayed(reply)], reply


def text_of(reply: SdkMessage | BetaMessage) -> str:
    return "".join(getattr(block, "text", "") for block in reply.content if block.type == "text")


def refused(raised: pytest.ExceptionInfo[anthropic.APIStatusError]) -> str:
    """The message of an Anthropic error body, after checking its shape."""
    body = raised.value.body
    assert isinstance(body, dict) and body["type"] == "error"
    assert body["error"]["type"] == "invalid_request_error"
    return str(body["error"]["message"])


@pytest.fixture
def provider() -> Iterator[LocalProvider]:
    with LocalProvider() as running:
        yield running


@pytest.fixture
def client(provider: LocalProvider) -> Iterator[anthropic.Anthropic]:
    with client_for(provider) as sdk_client:
        yield sdk_client


# --- thinking and its replay -----------------------------------------------------------------------


def test_a_first_turn_with_thinking_is_a_signed_thinking_block_then_the_action(client: anthropic.Anthropic) -> None:
    reply = ask(client, [user(SHOWN)])
    assert [block.type for block in reply.content] == ["thinking", "text"]
    thinking = reply.content[0]
    assert thinking.type == "thinking" and thinking.thinking == THINKING_SUMMARY and thinking.signature
    assert "ACTION: " in text_of(reply) and REMEMBERED in text_of(reply)
    assert reply.stop_reason == "end_turn"


def test_the_thought_is_in_no_readable_part_of_the_reply_nor_in_its_sealed_blob(client: anthropic.Anthropic) -> None:
    reply = ask(client, [user(SHOWN)])
    thinking = reply.content[0]
    assert thinking.type == "thinking"
    assert THOUGHT not in reply.model_dump_json()
    decoded = base64.urlsafe_b64decode(thinking.signature.encode("ascii"))
    assert b"NOTES" not in decoded and b"beacon" not in decoded


def test_display_omitted_gives_an_empty_thinking_text_that_still_carries_the_thought(
    client: anthropic.Anthropic,
) -> None:
    omitted = {**THINKING, "display": "omitted"}
    history, reply = first_turn(client, thinking=omitted)
    assert reply.content[0].type == "thinking" and reply.content[0].thinking == ""
    assert REMEMBERED in text_of(ask(client, [*history, user(DARK)], thinking=omitted))


def test_a_faithful_replay_is_accepted_and_the_beacon_is_remembered(client: anthropic.Anthropic) -> None:
    history, _ = first_turn(client)
    assert REMEMBERED in text_of(ask(client, [*history, user(DARK)]))


def test_adaptive_thinking_replays_as_enabled_thinking_does(client: anthropic.Anthropic) -> None:
    history, _ = first_turn(client, thinking={"type": "adaptive"})
    assert REMEMBERED in text_of(ask(client, [*history, user(DARK)], thinking={"type": "adaptive"}))


def test_the_old_frame_alone_does_not_carry_the_beacon_only_the_thinking_does(client: anthropic.Anthropic) -> None:
    """Without thinking, the same history read back has no memory: the model never re-reads old frames."""
    reply = ask(client, [user(SHOWN)], thinking={"type": "disabled"})
    assert [block.type for block in reply.content] == ["text"]
    assert FORGOTTEN in text_of(ask(client, [user(SHOWN), replayed(reply), user(DARK)], thinking={"type": "disabled"}))


def test_a_replay_may_start_at_a_later_whole_turn_and_loses_what_it_dropped(client: anthropic.Anthropic) -> None:
    """Only the turn that saw the beacon noted it; dropping that turn is allowed and forgets it."""
    history, _ = first_turn(client)
    second = replayed(ask(client, [*history, user(DARK)]))
    assert REMEMBERED in text_of(ask(client, [*history, user(DARK), second, user(DARK)]))
    assert FORGOTTEN in text_of(ask(client, [user(DARK), second, user(DARK)]))


def _altered_signature(history: list[Turn]) -> list[Turn]:
    signature = history[1]["content"][0]["signature"]
    flipped = ("A" if signature[10] != "A" else "B").join((signature[:10], signature[11:]))
    return _with_first_block(history, signature=flipped)


def _with_first_block(history: list[Turn], **changes: Any) -> list[Turn]:
    blocks = [dict(block) for block in history[1]["content"]]
    blocks[0].update(changes)
    return [history[0], {"role": "assistant", "content": blocks}]


def _without_signature(history: list[Turn]) -> list[Turn]:
    blocks = [dict(block) for block in history[1]["content"]]
    del blocks[0]["signature"]
    return [history[0], {"role": "assistant", "content": blocks}]


def _thinking_after_the_text(history: list[Turn]) -> list[Turn]:
    return [history[0], {"role": "assistant", "content": history[1]["content"][::-1]}]


def _text_edited(history: list[Turn]) -> list[Turn]:
    thinking, text = history[1]["content"]
    return [history[0], {"role": "assistant", "content": [thinking, {**text, "text": text["text"] + " (edited)"}]}]


UNFAITHFUL: list[tuple[str, Callable[[list[Turn]], list[Turn]], str]] = [
    ("altered signature", _altered_signature, "Invalid `signature` in `thinking` block"),
    ("altered thinking text", lambda history: _with_first_block(history, thinking="I know it."), "Invalid `signature`"),
    ("missing signature", _without_signature, "messages.1.content.0.thinking.signature: Field required"),
    ("thinking after the text", _thinking_after_the_text, "`thinking` blocks must come first"),
    ("its message's text edited", _text_edited, "Invalid `signature` in `thinking` block"),
]


@pytest.mark.parametrize(("case", "unfaithful", "words"), UNFAITHFUL, ids=[case[0] for case in UNFAITHFUL])
def test_an_unfaithful_replay_of_thinking_is_a_400(
    client: anthropic.Anthropic, case: str, unfaithful: Callable[[list[Turn]], list[Turn]], words: str
) -> None:
    history, _ = first_turn(client)
    assert REMEMBERED in text_of(ask(client, [*history, user(DARK)]))  # the faithful control
    with pytest.raises(anthropic.BadRequestError) as raised:
        ask(client, [*unfaithful(history), user(DARK)])
    assert words in refused(raised)


def test_thinking_blocks_swapped_between_turns_are_a_400(client: anthropic.Anthropic) -> None:
    history, _ = first_turn(client)
    second = replayed(ask(client, [*history, user(DARK)]))
    first = history[1]
    swapped_first = {"role": "assistant", "content": [second["content"][0], first["content"][1]]}
    swapped_second = {"role": "assistant", "content": [first["content"][0], second["content"][1]]}
    with pytest.raises(anthropic.BadRequestError) as raised:
        ask(client, [user(SHOWN), swapped_first, user(DARK), swapped_second, user(DARK)])
    # The two turns' texts are the same, so each block matches its new message: the chain catches it.
    assert "messages.3.content.0: this `thinking` block was produced in another place" in refused(raised)


def test_whole_turns_reordered_are_a_400(client: anthropic.Anthropic) -> None:
    history, _ = first_turn(client)
    second = replayed(ask(client, [*history, user(DARK)]))
    with pytest.raises(anthropic.BadRequestError) as raised:
        ask(client, [user(DARK), second, user(SHOWN), history[1], user(DARK)])
    assert "produced in another place in the conversation" in refused(raised)


def test_another_providers_thinking_cannot_be_replayed(client: anthropic.Anthropic) -> None:
    with LocalProvider() as other, client_for(other) as other_client:
        history, _ = first_turn(other_client)
    with pytest.raises(anthropic.BadRequestError) as raised:
        ask(client, [*history, user(DARK)])
    assert "Invalid `signature` in `thinking` block" in refused(raised)


def without_thinking(turn: Turn) -> Turn:
    return {"role": "assistant", "content": [block for block in turn["content"] if block["type"] != "thinking"]}


def test_a_turn_replayed_without_its_thinking_is_accepted_and_only_forgets(client: anthropic.Anthropic) -> None:
    """Recorded: with thinking on, the real service answered a final assistant turn of text alone
    followed by a user text turn (test_anthropic_model_thinking_part_from_other_model)."""
    history, _ = first_turn(client)
    reply = ask(client, [history[0], without_thinking(history[1]), user(DARK)])
    assert reply.stop_reason == "end_turn" and FORGOTTEN in text_of(reply)


HANDED_OVER = {"role": "assistant", "content": [{"type": "text", "text": "ACTION: ACTION1"}]}


def test_a_history_another_model_wrote_is_read_as_text_and_stays_read(client: anthropic.Anthropic) -> None:
    """A switch replays turns this model did not write: it has no thought of them, so it reads their
    frames, on this request and on the next, after a reply of its own."""
    reply = ask(client, [user(SHOWN), HANDED_OVER, user(DARK)])
    assert REMEMBERED in text_of(reply)
    assert THOUGHT not in reply.content[0].model_dump_json()  # followed, not noted: the history holds it
    assert REMEMBERED in text_of(ask(client, [user(SHOWN), HANDED_OVER, user(DARK), replayed(reply), user(DARK)]))


def test_a_history_another_model_wrote_is_kept_by_a_compaction(client: anthropic.Anthropic) -> None:
    compacted = replayed(compact(client, [user(SHOWN), HANDED_OVER, user(DARK)]))
    assert REMEMBERED in text_of(ask_after_compaction(client, [compacted, user(DARK)]))


def test_its_own_turn_without_thinking_is_still_its_own_on_a_provider_opened_on_the_same_service(tmp_path) -> None:
    """The reply log outlives its provider, as a resumed run needs: a turn it wrote stays forgotten."""
    with LocalProvider(service_dir=tmp_path) as provider, client_for(provider) as first:
        history, _ = first_turn(first)
    assert (tmp_path / "anthropic.messages.replies").stat().st_mode & 0o777 == 0o600
    with LocalProvider(service_dir=tmp_path) as provider, client_for(provider) as again:
        assert FORGOTTEN in text_of(ask(again, [history[0], without_thinking(history[1]), user(DARK)]))
    with LocalProvider() as provider, client_for(provider) as other:  # another service: not its turn
        assert REMEMBERED in text_of(ask(other, [history[0], without_thinking(history[1]), user(DARK)]))


def test_thinking_dropped_from_a_middle_turn_leaves_the_later_thinking_valid(client: anthropic.Anthropic) -> None:
    history, _ = first_turn(client)
    second = replayed(ask(client, [*history, user(DARK)]))
    third = replayed(ask(client, [*history, user(DARK), second, user(DARK)]))
    middle_dropped = [*history, user(DARK), without_thinking(second), user(DARK), third, user(DARK)]
    assert REMEMBERED in text_of(ask(client, middle_dropped))
    repeated = [*history, user(DARK), second, user(DARK), second, user(DARK)]
    with pytest.raises(anthropic.BadRequestError) as raised:
        ask(client, repeated)
    assert "messages.5.content.0: this `thinking` block was produced in another place" in refused(raised)


TOOL_USE = {"type": "tool_use", "id": "toolu_1", "name": "look", "input": {}}
TOOL_RESULT = {"type": "tool_result", "tool_use_id": "toolu_1", "content": DARK}
TOOLS = [{"name": "look", "input_schema": {"type": "object"}}]


def test_an_open_tool_loop_whose_first_assistant_turn_lacks_thinking_is_a_400(client: anthropic.Anthropic) -> None:
    """The service's rule: "a final `assistant` message must start with a thinking block (preceeding the
    lastmost set of `tool_use` and `tool_result` blocks)"; only the loop's first assistant turn is held
    to it, and a finished turn before the loop is not."""
    history, _ = first_turn(client)
    calling = {"role": "assistant", "content": [{"type": "text", "text": "Looking."}, TOOL_USE]}
    results = {"role": "user", "content": [TOOL_RESULT]}
    again = {"role": "assistant", "content": [{**TOOL_USE, "id": "toolu_2"}]}
    loop = [calling, results, again, {"role": "user", "content": [{**TOOL_RESULT, "tool_use_id": "toolu_2"}]}]
    with pytest.raises(anthropic.BadRequestError) as raised:
        ask(client, [history[0], without_thinking(history[1]), user(DARK), *loop], tools=TOOLS)
    assert refused(raised).startswith(
        "messages.3.content.0.type: Expected `thinking` or `redacted_thinking`, but found `text`. "
        "When `thinking` is enabled, a final `assistant` message must start with a thinking block"
    )
    answered = {"role": "assistant", "content": [{"type": "text", "text": "Seen."}]}
    closed = [history[0], without_thinking(history[1]), user(DARK), calling, results, answered, user(DARK)]
    assert ask(client, closed, tools=TOOLS).stop_reason == "end_turn"


# --- turns -----------------------------------------------------------------------------------------


def test_consecutive_user_messages_are_accepted_and_read_as_one_turn(client: anthropic.Anthropic) -> None:
    """The SDK's `messages` docstring: consecutive user or assistant turns are combined into one."""
    reply = ask(client, [user(SHOWN), user(DARK)])
    assert REMEMBERED in text_of(reply)  # the beacon of the first message is read with the second's frame


def test_a_reply_replayed_as_consecutive_assistant_messages_is_read_as_one_turn(client: anthropic.Anthropic) -> None:
    history, _ = first_turn(client)
    thinking, text = history[1]["content"]
    split = [{"role": "assistant", "content": [thinking]}, {"role": "assistant", "content": [text]}]
    assert REMEMBERED in text_of(ask(client, [history[0], *split, user(DARK)]))


# --- documents -------------------------------------------------------------------------------------


def document(source: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"type": "document", "source": source, **fields}


def test_a_plain_text_document_is_accepted_and_read(client: anthropic.Anthropic) -> None:
    text_source = {"type": "text", "media_type": "text/plain", "data": SHOWN}
    reply = ask(client, [{"role": "user", "content": [document(text_source, title="frame")]}])
    assert REMEMBERED in text_of(reply)
    content_source = {"type": "content", "content": [{"type": "text", "text": SHOWN}]}
    assert REMEMBERED in text_of(ask(client, [{"role": "user", "content": [document(content_source)]}]))


def test_a_pdf_or_url_document_is_accepted_though_not_read(client: anthropic.Anthropic) -> None:
    pdf = {"type": "base64", "media_type": "application/pdf", "data": base64.b64encode(b"%PDF-1.4").decode()}
    url = {"type": "url", "url": "https://example.com/frame.pdf"}
    for source in (pdf, url):
        reply = ask(client, [{"role": "user", "content": [document(source), {"type": "text", "text": DARK}]}])
        assert FORGOTTEN in text_of(reply)


DOCUMENT_PATH = "messages.0.content.0.document"
INVALID_DOCUMENTS: list[tuple[dict[str, Any], str]] = [
    (document({"type": "html", "data": "x"}), f"{DOCUMENT_PATH}.source: Input tag 'html' found using 'type'"),
    (
        document({"type": "text", "media_type": "text/html", "data": "x"}),
        f"{DOCUMENT_PATH}.source.text.media_type: Input should be 'text/plain'",
    ),
    (document({"type": "text", "media_type": "text/plain"}), f"{DOCUMENT_PATH}.source.text.data: Field required"),
    (
        document({"type": "url", "url": "https://example.com", "x": 1}),
        f"{DOCUMENT_PATH}.source.url.x: Extra inputs are not permitted",
    ),
    (
        document({"type": "content", "content": [{"type": "thinking", "thinking": "", "signature": ""}]}),
        f"{DOCUMENT_PATH}.source.content.content.0: Input tag 'thinking'",
    ),
    (document({"type": "file", "file_id": "file_1"}), f"{DOCUMENT_PATH}.source.file.file_id: no file `file_1`"),
    (document({"type": "url", "url": "u"}, citations={"on": True}), f"{DOCUMENT_PATH}.citations.on: Extra inputs"),
    (document({"type": "url", "url": "u"}, title=3), f"{DOCUMENT_PATH}.title: Input should be a valid string"),
]


@pytest.mark.parametrize(("block", "words"), INVALID_DOCUMENTS, ids=[words for _, words in INVALID_DOCUMENTS])
def test_a_document_the_sdks_types_forbid_is_a_400_naming_its_field(
    client: anthropic.Anthropic, block: dict[str, Any], words: str
) -> None:
    with pytest.raises(anthropic.BadRequestError) as raised:
        ask(client, [{"role": "user", "content": [block]}])
    assert refused(raised).startswith(words)


def test_the_document_sources_are_the_installed_sdks() -> None:
    sources = typing.get_args(_hint(DocumentBlockParam, "source"))
    assert {_literal_type(source): set(source.__annotations__) for source in sources} == DOCUMENT_SOURCES


# --- the fields the SDK's types constrain ---------------------------------------------------------


TYPED: list[tuple[dict[str, Any], str]] = [
    ({"metadata": {"user_id": "u-1", "plan": "pro"}}, "metadata.plan: Extra inputs are not permitted"),
    ({"metadata": {"user_id": 42}}, "metadata.user_id: Input should be a valid string"),
    ({"tools": [{"name": "look"}]}, "tools.0.custom.input_schema: Field required"),
    ({"tools": [{"input_schema": {"type": "object"}}]}, "tools.0.custom.name: Field required"),
    ({"tools": [{**TOOLS[0], "color": "red"}]}, "tools.0.custom.color: Extra inputs are not permitted"),
    ({"tools": [{"type": "teleport_20990101", "name": "t"}]}, "tools.0: Input tag 'teleport_20990101'"),
    ({"tools": "look"}, "tools: Input should be a valid list"),
    ({"tool_choice": {"type": "sometimes"}}, "tool_choice: Input tag 'sometimes' found using 'type'"),
    ({"tool_choice": {"type": "tool"}}, "tool_choice.tool.name: Field required"),
    ({"tool_choice": {"type": "none", "disable_parallel_tool_use": True}}, "tool_choice.none.disable_parallel"),
]


@pytest.mark.parametrize(("params", "words"), TYPED, ids=[words for _, words in TYPED])
def test_a_field_the_sdks_types_forbid_is_a_400_naming_it(
    client: anthropic.Anthropic, params: dict[str, Any], words: str
) -> None:
    with pytest.raises(anthropic.BadRequestError) as raised:
        ask(client, [user(SHOWN)], **params)
    assert refused(raised).startswith(words)


def test_the_fields_the_sdks_types_allow_are_accepted(client: anthropic.Anthropic) -> None:
    reply = ask(
        client,
        [user(SHOWN)],
        metadata={"user_id": None},
        tools=[*TOOLS, {"type": "web_search_20250305", "name": "web_search"}],
        tool_choice={"type": "auto", "disable_parallel_tool_use": True},
    )
    assert REMEMBERED in text_of(reply)


def test_the_tool_fields_are_the_installed_sdks() -> None:
    assert set(BetaToolParam.__annotations__) == CUSTOM_TOOL_KEYS
    server = typing.get_args(BetaToolUnionParam)[1:]
    assert {name for tool in server for name in typing.get_args(_hint(tool, "type"))} == SERVER_TOOL_TYPES
    choices = typing.get_args(BetaToolChoiceParam)
    assert {_literal_type(choice): set(choice.__annotations__) for choice in choices} == TOOL_CHOICE_KEYS
    assert set(BetaMetadataParam.__annotations__) == {"user_id"}


def _hint(typed: Any, name: str) -> Any:
    return typing.get_type_hints(typed)[name]


def _literal_type(typed: Any) -> str:
    (tag,) = typing.get_args(_hint(typed, "type"))
    return str(tag)


# --- compaction ------------------------------------------------------------------------------------


def test_compaction_answers_one_signed_block_with_stop_reason_compaction(client: anthropic.Anthropic) -> None:
    history, _ = first_turn(client)
    reply = compact(client, [*history, user(DARK)])
    assert reply.stop_reason == "compaction"
    assert [block.type for block in reply.content] == ["compaction"]
    block = reply.content[0]
    assert block.type == "compaction" and block.content == COMPACTION_CONTENT and block.signature
    assert THOUGHT not in reply.model_dump_json()


@pytest.mark.parametrize("placement", ["in place of the messages", "after the messages"])
def test_a_replayed_compaction_carries_the_beacon(client: anthropic.Anthropic, placement: str) -> None:
    history, _ = first_turn(client)
    compacted = replayed(compact(client, [*history, user(DARK)]))
    before = [] if placement == "in place of the messages" else [*history, user(DARK)]
    reply = ask_after_compaction(client, [*before, compacted, user(DARK)])
    assert REMEMBERED in text_of(reply)
    following = ask_after_compaction(client, [*before, compacted, user(DARK), replayed(reply), user(DARK)])
    assert REMEMBERED in text_of(following)


def test_a_replay_that_drops_the_compaction_forgets_what_it_carried(client: anthropic.Anthropic) -> None:
    history, _ = first_turn(client)
    compact(client, [*history, user(DARK)])
    assert FORGOTTEN in text_of(ask(client, [user(DARK)]))


def test_an_altered_compaction_is_a_400(client: anthropic.Anthropic) -> None:
    history, _ = first_turn(client)
    compacted = replayed(compact(client, [*history, user(DARK)]))
    for change in ({"content": "I remember everything."}, {"signature": compacted["content"][0]["signature"][:-4]}):
        block = {**compacted["content"][0], **change}
        with pytest.raises(anthropic.BadRequestError) as raised:
            ask_after_compaction(client, [{"role": "assistant", "content": [block]}, user(DARK)])
        assert "messages.0.content.0: Invalid `signature` in `compaction` block" in refused(raised)


def test_a_compaction_block_replayed_without_its_beta_is_a_400(client: anthropic.Anthropic) -> None:
    history, _ = first_turn(client)
    compacted = replayed(compact(client, [*history, user(DARK)]))
    with pytest.raises(anthropic.BadRequestError) as raised:
        ask(client, [compacted, user(DARK)])
    assert refused(raised).startswith("messages.0.content.0: Input tag 'compaction' found using 'type' does not match")


def test_compaction_needs_its_beta(client: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.BadRequestError) as raised:
        ask(client, [user(SHOWN)], extra_body={"compaction": {"type": "summarize"}})
    assert refused(raised) == "compaction: Extra inputs are not permitted"


def test_a_compaction_reports_its_usage_as_iterations_not_at_the_top(client: anthropic.Anthropic) -> None:
    history, _ = first_turn(client)
    reply = compact(client, [*history, user(DARK)])
    usage = reply.usage
    assert usage.iterations is not None
    compaction, message = usage.iterations
    assert compaction.type == "compaction" and compaction.input_tokens > 0 and compaction.output_tokens > 0
    assert message.type == "message" and message.input_tokens == message.output_tokens == 0
    assert (usage.input_tokens, usage.output_tokens) == (message.input_tokens, message.output_tokens)
    assert compaction.cache_creation is not None and usage.service_tier == "standard"  # each entry as recorded


# --- streaming -------------------------------------------------------------------------------------


def test_a_stream_sends_its_events_in_the_documented_order(client: anthropic.Anthropic) -> None:
    stream = client.messages.create(
        model=MODEL, max_tokens=MAX_TOKENS, thinking=THINKING, messages=[user(SHOWN)], stream=True
    )
    events = [(event.type, getattr(getattr(event, "delta", None), "type", None)) for event in stream]
    names = [name for name, _ in events]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    blocks = [name for name in names if name.startswith("content_block_")]
    thinking, text = blocks[: blocks.index("content_block_stop") + 1], blocks[blocks.index("content_block_stop") + 1 :]
    assert thinking[0] == "content_block_start" and thinking[-1] == "content_block_stop"
    assert text[0] == "content_block_start" and text[-1] == "content_block_stop"
    deltas = [kind for name, kind in events if name == "content_block_delta"]
    assert deltas.index("signature_delta") == deltas.index("text_delta") - 1
    assert deltas[0] == "thinking_delta" and deltas.count("text_delta") > 1


def test_a_streamed_reply_accumulates_to_a_replayable_message(client: anthropic.Anthropic) -> None:
    with client.messages.stream(
        model=MODEL, max_tokens=MAX_TOKENS, thinking=THINKING, messages=[user(SHOWN)]
    ) as stream:
        final = stream.get_final_message()
    assert [block.type for block in final.content] == ["thinking", "text"]
    assert final.stop_reason == "end_turn" and final.usage.output_tokens > 0
    assert REMEMBERED in text_of(ask(client, [user(SHOWN), replayed(final), user(DARK)]))


def test_a_stream_is_event_and_data_lines(provider: LocalProvider) -> None:
    body = {"model": MODEL, "max_tokens": MAX_TOKENS, "messages": [user(SHOWN)], "stream": True}
    response = httpx2.post(f"{provider.base_url}/v1/messages", json=body, headers=_raw_headers())
    lines = [line for line in response.text.splitlines() if line]
    assert lines[0] == "event: message_start" and lines[1].startswith("data: {")
    names = [line.removeprefix("event: ") for line in lines if line.startswith("event: ")]
    datas = [json.loads(line.removeprefix("data: ")) for line in lines if line.startswith("data: ")]
    assert names == [data["type"] for data in datas] and names[-1] == "message_stop"


def test_a_streamed_compaction_arrives_whole_in_its_block_start(client: anthropic.Anthropic) -> None:
    history, _ = first_turn(client)
    stream = client.beta.messages.create(
        model=MODEL,
        max_tokens=MAX_TOKENS,
        messages=[*history, user(DARK)],  # type: ignore[list-item]
        betas=[COMPACT],
        extra_body={"compaction": {"type": "summarize"}},
        stream=True,
    )
    events = list(stream)
    starts = [event for event in events if event.type == "content_block_start"]
    assert len(starts) == 1 and starts[0].content_block.type == "compaction"
    assert starts[0].content_block.signature
    assert [event.type for event in events if event.type == "content_block_delta"] == []
    delta = next(event for event in events if event.type == "message_delta")
    assert delta.delta.stop_reason == "compaction"


# --- usage -----------------------------------------------------------------------------------------


LONG_SYSTEM = SYSTEM + " Remember the rules." * 300  # about 1,450 tokens


def test_without_a_breakpoint_nothing_is_cached(client: anthropic.Anthropic) -> None:
    for _ in range(2):
        reply = ask(client, [user(SHOWN)], system=LONG_SYSTEM)
        assert (reply.usage.cache_read_input_tokens, reply.usage.cache_creation_input_tokens) == (0, 0)


def test_automatic_caching_writes_the_prompt_then_reads_it_back(client: anthropic.Anthropic) -> None:
    history, first = first_turn(client, system=LONG_SYSTEM, cache_control={"type": "ephemeral"})
    assert first.usage.cache_read_input_tokens == 0
    written = first.usage.cache_creation_input_tokens
    assert written is not None and written >= 1024 and first.usage.input_tokens == 0
    second = ask(client, [*history, user(DARK)], system=LONG_SYSTEM, cache_control={"type": "ephemeral"})
    assert second.usage.cache_read_input_tokens == written
    assert second.usage.cache_creation_input_tokens is not None and second.usage.cache_creation_input_tokens > 0
    assert second.usage.input_tokens == 0


def test_an_explicit_breakpoint_caches_only_up_to_itself(client: anthropic.Anthropic) -> None:
    system = [{"type": "text", "text": LONG_SYSTEM, "cache_control": {"type": "ephemeral"}}]
    first = ask(client, [user(SHOWN)], system=system)
    second = ask(client, [user(DARK)], system=system)
    written = first.usage.cache_creation_input_tokens
    assert written is not None and written >= 1024 and first.usage.input_tokens > 0
    assert second.usage.cache_read_input_tokens == written and second.usage.cache_creation_input_tokens == 0


def test_a_prefix_under_the_minimum_cacheable_length_is_never_cached(client: anthropic.Anthropic) -> None:
    for _ in range(2):
        reply = ask(client, [user(SHOWN)], cache_control={"type": "ephemeral"})
        assert (reply.usage.cache_read_input_tokens, reply.usage.cache_creation_input_tokens) == (0, 0)


def test_thinking_tokens_are_reported_only_with_their_beta(client: anthropic.Anthropic) -> None:
    plain = ask(client, [user(SHOWN)])
    assert plain.usage.output_tokens_details is None
    counted = client.beta.messages.create(
        model=MODEL, max_tokens=MAX_TOKENS, thinking=THINKING, messages=[user(SHOWN)], betas=[THINKING_TOKENS]
    )
    details = counted.usage.output_tokens_details
    assert details is not None and details.thinking_tokens == estimate_text_tokens(THOUGHT)
    assert counted.usage.output_tokens == plain.usage.output_tokens  # thinking is inside output_tokens


def _units(*blocks: tuple[str, int, str | None]) -> list[PromptUnit]:
    """Prompt units from (text, tokens, the breakpoint's ttl or None)."""
    return [PromptUnit("user", {"type": "text", "text": text}, tokens, ttl) for text, tokens, ttl in blocks]


# Each case: the requests in order, and the last one's (cache read, 5m writes, 1h writes).
CACHE_CASES: list[tuple[str, list[list[PromptUnit]], tuple[int, int, int]]] = [
    ("no breakpoint", [_units(("a", 2000, None))] * 2, (0, 0, 0)),
    ("first write", [_units(("a", 2000, "5m"))], (0, 2000, 0)),
    ("read back", [_units(("a", 2000, "5m"))] * 2, (2000, 0, 0)),
    ("under the minimum", [_units(("a", 1000, "5m"))] * 2, (0, 0, 0)),
    (
        "longer prompt reads the old prefix",
        [_units(("a", 1500, "5m")), _units(("a", 1500, None), ("b", 100, "5m"))],
        (1500, 100, 0),
    ),
    (
        "a moved breakpoint still reads",
        [_units(("a", 1500, "5m"), ("b", 10, None)), _units(("a", 1500, None), ("b", 10, "5m"))],
        (1500, 10, 0),
    ),
    ("an edited block ends the prefix", [_units(("a", 1500, "5m")), _units(("z", 1500, "5m"))], (0, 1500, 0)),
    (
        "only prefixes ending at a breakpoint are written",
        [_units(("a", 1500, None), ("b", 10, "5m")), _units(("a", 1500, "5m"), ("b", 10, None))],
        (0, 1500, 0),
    ),
    ("a 1h breakpoint writes for 1h", [_units(("a", 2000, "1h"))], (0, 0, 2000)),
    ("1h up to its breakpoint, 5m beyond it", [_units(("a", 1500, "1h"), ("b", 600, "5m"))], (0, 600, 1500)),
    (
        "1h from the read prefix to the 1h breakpoint, 5m after it",
        [_units(("a", 1500, "5m")), _units(("a", 1500, None), ("b", 600, "1h"), ("c", 300, "5m"))],
        (1500, 300, 600),
    ),
    (
        "a 1h breakpoint inside the read prefix writes nothing",
        [_units(("a", 1500, "1h"), ("b", 600, "5m"))] * 2,
        (2100, 0, 0),
    ),
]


@pytest.mark.parametrize(("case", "requests", "expected"), CACHE_CASES, ids=[case[0] for case in CACHE_CASES])
def test_the_prompt_cache_follows_anthropics_rules(
    case: str, requests: list[list[PromptUnit]], expected: tuple[int, int, int]
) -> None:
    cache = PromptCache()
    results = [cache.read_and_write(MODEL, units) for units in requests]
    assert results[-1] == CacheUse(*expected)


def test_usage_splits_cache_writes_by_ttl_and_names_the_service_tier(client: anthropic.Anthropic) -> None:
    """The recorded shape: usage.cache_creation {ephemeral_5m_input_tokens, ephemeral_1h_input_tokens},
    zeros included, beside cache_creation_input_tokens (their sum), and service_tier."""
    plain = ask(client, [user(SHOWN)])
    assert plain.usage.cache_creation is not None and plain.usage.service_tier == "standard"
    assert (
        plain.usage.cache_creation.ephemeral_5m_input_tokens,
        plain.usage.cache_creation.ephemeral_1h_input_tokens,
    ) == (0, 0)
    system = [{"type": "text", "text": LONG_SYSTEM, "cache_control": {"type": "ephemeral", "ttl": "1h"}}]
    hour = ask(client, [user(SHOWN)], system=system, cache_control={"type": "ephemeral"})
    created = hour.usage.cache_creation
    assert created is not None and created.ephemeral_1h_input_tokens >= 1024
    assert (
        created.ephemeral_5m_input_tokens > 0
    )  # the messages after the system prompt, under the automatic 5m breakpoint
    assert (
        hour.usage.cache_creation_input_tokens == created.ephemeral_1h_input_tokens + created.ephemeral_5m_input_tokens
    )


def test_a_1h_breakpoint_after_a_5m_one_is_a_400(client: anthropic.Anthropic) -> None:
    system = [{"type": "text", "text": LONG_SYSTEM, "cache_control": {"type": "ephemeral"}}]
    late = {
        "role": "user",
        "content": [{"type": "text", "text": SHOWN, "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
    }
    with pytest.raises(anthropic.BadRequestError) as raised:
        ask(client, [late], system=system)
    assert refused(raised) == (
        "messages.0.content.0.cache_control.ttl: a ttl='1h' cache_control block must not come after "
        "a ttl='5m' cache_control block."
    )


def test_a_stream_reports_the_cache_breakdown_and_tier_at_its_start_only(client: anthropic.Anthropic) -> None:
    """Recorded streams carry cache_creation and service_tier in message_start's usage; message_delta's
    usage has neither (MessageDeltaUsage has no such field), and the SDK keeps the start's."""
    system = [{"type": "text", "text": LONG_SYSTEM, "cache_control": {"type": "ephemeral", "ttl": "1h"}}]
    with client.messages.stream(
        model=MODEL, max_tokens=MAX_TOKENS, thinking=THINKING, system=system, messages=[user(SHOWN)]
    ) as stream:
        events = list(stream)
        final = stream.get_final_message()
    start = next(event for event in events if event.type == "message_start").message.usage
    delta = next(event for event in events if event.type == "message_delta").usage
    assert start.service_tier == "standard" and start.cache_creation is not None
    assert "cache_creation" not in delta.model_dump(exclude_unset=True)
    assert "service_tier" not in delta.model_dump(exclude_unset=True)
    assert final.usage.cache_creation is not None and final.usage.cache_creation.ephemeral_1h_input_tokens >= 1024
    assert final.usage.service_tier == "standard"


# --- validation, window, auth ----------------------------------------------------------------------


def _raw_headers(**extra: str) -> dict[str, str]:
    return {"x-api-key": "test-key", "anthropic-version": "2023-06-01", **extra}


VALID = {"model": MODEL, "max_tokens": MAX_TOKENS, "messages": [user(SHOWN)]}
INVALID: list[tuple[dict[str, Any], str]] = [
    ({"model": MODEL, "messages": [user(SHOWN)]}, "max_tokens: Field required"),
    ({"max_tokens": 10, "messages": [user(SHOWN)]}, "model: Field required"),
    ({**VALID, "temperature": 0.5}, "temperature: Extra inputs are not permitted"),
    ({**VALID, "max_tokens": 0}, "max_tokens: Input should be greater than or equal to 1"),
    ({**VALID, "messages": [{"role": "assistant", "content": "hi"}]}, 'first message must use the "user" role'),
    (
        {**VALID, "messages": [{"role": "system", "content": "x"}]},
        "messages.0.role: Input should be 'user' or 'assistant'",
    ),
    (
        {**VALID, "messages": [{"role": "user", "content": [{"type": "text", "text": "x", "id": 1}]}]},
        "messages.0.content.0.text.id: Extra",
    ),
    ({**VALID, "system": [{"type": "image"}]}, "system.0.type: Input should be 'text'"),
    ({**VALID, "thinking": {"type": "enabled"}}, "thinking.enabled.budget_tokens: Field required"),
    ({**VALID, "thinking": {"type": "enabled", "budget_tokens": 100}}, "greater than or equal to 1024"),
    ({**VALID, "thinking": {"type": "enabled", "budget_tokens": MAX_TOKENS}}, "`max_tokens` must be greater than"),
    ({**VALID, "thinking": {"type": "sometimes"}}, "thinking: Input tag 'sometimes'"),
    (
        {**VALID, "model": "claude-opus-5", "thinking": THINKING},
        "thinking.type: thinking.type.enabled is not supported for this model",
    ),
    ({**VALID, "cache_control": {"type": "forever"}}, "cache_control.type: Input should be 'ephemeral'"),
]


@pytest.mark.parametrize(("body", "words"), INVALID, ids=[words for _, words in INVALID])
def test_an_invalid_request_is_a_400_naming_its_field(
    provider: LocalProvider, body: dict[str, Any], words: str
) -> None:
    valid = httpx2.post(f"{provider.base_url}/v1/messages", json=VALID, headers=_raw_headers())
    assert valid.status_code == 200
    response = httpx2.post(f"{provider.base_url}/v1/messages", json=body, headers=_raw_headers())
    assert response.status_code == 400
    error = response.json()
    assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    assert words in error["error"]["message"]


def test_the_request_fields_are_the_installed_sdks() -> None:
    sdk_fields = set(beta_params.MessageCreateParamsBase.__annotations__) - {"betas"}
    assert set(REQUEST_FIELDS) == sdk_fields | {"stream"}


def test_the_beta_header_may_list_several_betas(client: anthropic.Anthropic) -> None:
    reply = client.beta.messages.create(
        model=MODEL, max_tokens=MAX_TOKENS, thinking=THINKING, messages=[user(SHOWN)], betas=[COMPACT, THINKING_TOKENS]
    )
    assert reply.usage.output_tokens_details is not None


def test_a_prompt_over_the_window_is_a_400_prompt_too_long() -> None:
    with LocalProvider(context_window=200) as provider, client_for(provider) as client:
        with pytest.raises(anthropic.BadRequestError) as raised:
            ask(client, [user(SHOWN + " x" * 400)], max_tokens=10, thinking={"type": "disabled"})
        assert refused(raised).startswith("prompt is too long: ") and refused(raised).endswith(" > 200 maximum")
        with pytest.raises(anthropic.BadRequestError) as raised:
            ask(client, [user("hi")], max_tokens=500, thinking={"type": "disabled"})
        assert "input length and `max_tokens` exceed context limit" in refused(raised)


def test_an_invalid_key_is_the_anthropic_401(provider: LocalProvider) -> None:
    with anthropic.Anthropic(base_url=provider.base_url, api_key="sk-invalid", max_retries=0) as bad:
        with pytest.raises(anthropic.AuthenticationError) as raised:
            ask(bad, [user(SHOWN)])
    body = raised.value.body
    assert isinstance(body, dict) and body["error"]["type"] == "authentication_error"
    assert (
        httpx2.post(
            f"{provider.base_url}/v1/messages", json=VALID, headers=_raw_headers(**{"x-api-key": "k"})
        ).status_code
        == 200
    )
    no_key = {"anthropic-version": "2023-06-01"}
    assert httpx2.post(f"{provider.base_url}/v1/messages", json=VALID, headers=no_key).status_code == 401


# --- faults ----------------------------------------------------------------------------------------


def _faulted(kind: str) -> LocalProvider:
    return LocalProvider(faults=[Fault(at=1, kind=kind)])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kind", "error", "status"),
    [
        ("rate_limit", anthropic.RateLimitError, 429),
        ("server_error", anthropic.InternalServerError, 500),
        ("overloaded", anthropic.OverloadedError, 529),
    ],
)
def test_a_status_fault_fails_only_its_request(kind: str, error: type[anthropic.APIStatusError], status: int) -> None:
    with _faulted(kind) as provider, client_for(provider) as client:
        with pytest.raises(error) as raised:
            ask(client, [user(SHOWN)])
        assert raised.value.status_code == status
        body = raised.value.body
        assert isinstance(body, dict) and body["type"] == "error"
        assert REMEMBERED in text_of(ask(client, [user(SHOWN)]))


CONTENT_FAULTS: list[tuple[str, Callable[[SdkMessage], bool]]] = [
    ("refusal", lambda reply: reply.stop_reason == "refusal" and "ACTION: " in text_of(reply)),  # written, then stopped
    ("pause_turn", lambda reply: reply.stop_reason == "pause_turn" and "ACTION: " in text_of(reply)),
    ("truncation", lambda reply: reply.stop_reason == "max_tokens" and "ACTION: " not in text_of(reply)),
    ("empty", lambda reply: reply.stop_reason == "end_turn" and text_of(reply) == ""),
    ("malformed", lambda reply: text_of(reply) == MALFORMED_REPLY),
    ("leak_key", lambda reply: "test-key" in text_of(reply)),
    ("empty_choices", lambda reply: reply.content == [] and reply.usage.output_tokens > 0),
    ("null_message", lambda reply: reply.content is None),
    ("expire_handle", lambda reply: REMEMBERED in text_of(reply)),
]


@pytest.mark.parametrize(("kind", "check"), CONTENT_FAULTS, ids=[kind for kind, _ in CONTENT_FAULTS])
def test_a_content_fault_shapes_only_its_reply(kind: str, check: Callable[[SdkMessage], bool]) -> None:
    with _faulted(kind) as provider, client_for(provider) as client:
        assert check(ask(client, [user(SHOWN)]))
        assert REMEMBERED in text_of(ask(client, [user(SHOWN)]))


def test_a_refusal_carries_stop_details() -> None:
    with _faulted("refusal") as provider, client_for(provider) as client:
        reply = ask(client, [user(SHOWN)])
    assert reply.stop_details is not None and reply.stop_details.type == "refusal"


def test_an_html_page_is_a_200_the_sdk_cannot_parse() -> None:
    """The SDK does not validate a 200: it hands back the page as text, not a Message."""
    with _faulted("html_page") as provider, client_for(provider) as client:
        reply: object = ask(client, [user(SHOWN)])
    assert isinstance(reply, str) and reply.startswith("<!DOCTYPE html>")


@pytest.mark.parametrize("stream", [False, True])
def test_a_garbled_body_or_stream_cannot_be_read(stream: bool) -> None:
    with _faulted("garbled") as provider, client_for(provider) as client:
        with pytest.raises((anthropic.APIResponseValidationError, json.JSONDecodeError, ValueError)):
            if stream:
                list(ask(client, [user(SHOWN)], stream=True))
            else:
                ask(client, [user(SHOWN)])


def test_a_cut_stream_ends_after_its_first_text_and_never_stops() -> None:
    with _faulted("stream_cut") as provider, client_for(provider) as client:
        seen: list[str] = []
        with pytest.raises((anthropic.APIConnectionError, httpx2.HTTPError)):
            for event in ask(client, [user(SHOWN)], stream=True):
                seen.append(event.type)
        assert "message_stop" not in seen and "message_delta" not in seen


def test_a_cut_compaction_stream_sends_the_block_but_never_its_stop_reason() -> None:
    with LocalProvider(faults=[Fault(at=2, kind="stream_cut")]) as provider, client_for(provider) as client:
        history, _ = first_turn(client)
        seen: list[str] = []
        with pytest.raises((anthropic.APIConnectionError, httpx2.HTTPError)):
            stream = client.beta.messages.create(
                model=MODEL,
                max_tokens=MAX_TOKENS,
                messages=[*history, user(DARK)],  # type: ignore[list-item]
                betas=[COMPACT],
                extra_body={"compaction": {"type": "summarize"}},
                stream=True,
            )
            for event in stream:
                seen.append(event.type)
        assert "content_block_stop" in seen and "message_delta" not in seen


def test_a_cut_non_streamed_request_gets_no_response() -> None:
    with _faulted("stream_cut") as provider, client_for(provider) as client:
        with pytest.raises(anthropic.APIConnectionError):
            ask(client, [user(SHOWN)])


def test_a_context_overflow_fault_is_the_prompt_too_long_400_for_that_request_only() -> None:
    with _faulted("context_overflow") as provider, client_for(provider) as client:
        with pytest.raises(anthropic.BadRequestError) as raised:
            ask(client, [user(SHOWN)])
        assert refused(raised).startswith("prompt is too long: ")
        assert REMEMBERED in text_of(ask(client, [user(SHOWN)]))


def test_every_fault_kind_has_a_messages_test() -> None:
    tested = {"rate_limit", "server_error", "overloaded", "html_page", "garbled", "stream_cut", "context_overflow"}
    tested |= {kind for kind, _ in CONTENT_FAULTS}
    assert tested == set(FAULT_KINDS)


def test_the_beta_header_is_read_from_every_header_line() -> None:
    from turnstate.local_provider.messages_request import betas_of

    headers = Message()
    headers["anthropic-beta"] = f"{COMPACT}, {THINKING_TOKENS}"
    headers["anthropic-beta"] = "other-beta"
    assert betas_of(headers) == {COMPACT, THINKING_TOKENS, "other-beta"}
