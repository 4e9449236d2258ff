"""Inputs with images on every wire: each transcript lays a frame out in its own API's image part (held
to the installed SDK's TypedDict for that part, since no recorded cassette holds one), estimates it by
its provider's published rule exactly as the local provider counts it, shows it to readers by digest,
and leaves text-only turns byte for byte as they were."""

from __future__ import annotations

import json
import typing
from collections.abc import Mapping

import pytest
import typing_extensions
from anthropic.types import ImageBlockParam, TextBlockParam
from google.genai._gaos.types.interactions.imagecontent import ImageContentParam
from google.genai._gaos.types.interactions.textcontent import TextContentParam
from openai.types.chat import ChatCompletionContentPartImageParam, ChatCompletionContentPartTextParam
from openai.types.responses import ResponseInputImageParam, ResponseInputTextParam

from turnstate.adapters.anthropic_messages import MessagesItems
from turnstate.adapters.chat_completions import ChatMessages
from turnstate.adapters.contract import ModelRequest, UserInput, input_images, input_parts
from turnstate.adapters.gemini_interactions import InteractionSteps
from turnstate.adapters.image_costs import anthropic_image_tokens, gemini_resolution_tokens, openai_image_tokens
from turnstate.adapters.images import ImagePart, png_size
from turnstate.adapters.registry import ADAPTERS
from turnstate.adapters.responses import ResponsesItems
from turnstate.adapters.tokens import estimate_message_tokens, item_tokens
from turnstate.environments.frame_image import frame_to_png
from turnstate.local_provider.interactions_conversation import step_tokens
from turnstate.local_provider.messages_conversation import block_tokens
from turnstate.strategies.state import RuntimeState, TurnSpan
from turnstate.strategies.summary import SummaryPass, summary_request

FRAME = ImagePart(frame_to_png([[0, 5, 8], [9, 11, 14]], scale=16))  # 48 x 32 px
OTHER = ImagePart(frame_to_png([[5, 5, 0, 0]] * 4, scale=32))  # 128 x 128 px
INPUTS = ["the board", UserInput("your move", (FRAME, OTHER))]

# Each wire: its transcript, the SDK TypedDicts of its text part and image part, where a user item keeps
# its content, and the image cost its provider publishes for `FRAME`.
WIRES = {
    "chat_completions": (ChatMessages(), ChatCompletionContentPartTextParam, ChatCompletionContentPartImageParam),
    "responses": (ResponsesItems(), ResponseInputTextParam, ResponseInputImageParam),
    "anthropic_messages": (MessagesItems(), TextBlockParam, ImageBlockParam),
    "gemini_interactions": (InteractionSteps(), TextContentParam, ImageContentParam),
}
PUBLISHED_COST = {
    "chat_completions": lambda image: openai_image_tokens(image.width, image.height, "high"),
    "responses": lambda image: openai_image_tokens(image.width, image.height, "high"),
    "anthropic_messages": lambda image: anthropic_image_tokens(image.width, image.height),
    "gemini_interactions": lambda image: gemini_resolution_tokens(None),
}


def conforms(value: object, typed_dict: type) -> list[str]:
    """What of `value` the TypedDict does not allow: unknown keys, missing required keys, a value outside
    a Literal, recursively through nested TypedDicts (a union of them chosen by its `type` Literal)."""
    if not isinstance(value, Mapping):
        return [f"{typed_dict.__name__}: not a mapping"]
    hints = typing.get_type_hints(typed_dict, include_extras=True)
    problems = [f"{typed_dict.__name__}: unknown key {key!r}" for key in value if key not in hints]
    for key, annotation in hints.items():
        required = typing.get_origin(annotation) is typing.Required or (
            typed_dict.__total__ and typing.get_origin(annotation) is not typing.NotRequired
        )
        if key not in value:
            problems += [f"{typed_dict.__name__}: missing {key!r}"] if required else []
            continue
        problems += field_problems(value[key], strip_required(annotation), f"{typed_dict.__name__}.{key}")
    return problems


def strip_required(annotation: object) -> object:
    while typing.get_origin(annotation) in (typing.Required, typing.NotRequired, typing.Annotated):
        annotation = typing.get_args(annotation)[0]
    return annotation


def field_problems(value: object, annotation: object, where: str) -> list[str]:
    options = typing.get_args(annotation) if typing.get_origin(annotation) is typing.Union else (annotation,)
    literals = [
        arg for option in options if typing.get_origin(option) is typing.Literal for arg in typing.get_args(option)
    ]
    typed_dicts = [option for option in options if typing_extensions.is_typeddict(option)]
    if literals and value not in literals:
        return [f"{where}: {value!r} is not one of {literals}"]
    if typed_dicts:
        matching = [
            option
            for option in typed_dicts
            if isinstance(value, Mapping)
            and value.get("type") in typing.get_args(typing.get_type_hints(option).get("type"))
        ] or typed_dicts
        return min((conforms(value, option) for option in matching), key=len)
    return []


def image_part(wire: str, item: Mapping) -> list[Mapping]:
    content = item["content"]
    return [part for part in content if part["type"] in ("image", "image_url", "input_image")]


@pytest.mark.parametrize("wire", WIRES)
def test_a_frame_goes_in_the_wires_own_image_part_as_the_sdk_types_it(wire):
    transcript, text_param, image_param = WIRES[wire]
    [item] = transcript.user_items(INPUTS)
    texts = [part for part in item["content"] if part["type"] in ("text", "input_text")]
    images = image_part(wire, item)
    assert [part["text"] for part in texts] == ["the board\n\nyour move"]
    assert len(images) == 2
    assert [problem for part in texts for problem in conforms(part, text_param)] == []
    assert [problem for part in images for problem in conforms(part, image_param)] == []
    assert item["content"].index(texts[0]) < item["content"].index(images[0])  # text, then its images


def test_the_conformance_check_finds_what_the_sdk_does_not_allow():
    """The check above can fail: an unknown key, a missing required key and a detail outside the SDK's
    Literal are each named."""
    assert conforms({"type": "input_image", "image_url": "data:", "detail": "high", "size": 1}, ResponseInputImageParam)
    assert conforms({"type": "input_image", "image_url": "data:"}, ResponseInputImageParam)  # detail is required
    assert conforms({"type": "input_image", "image_url": "data:", "detail": "huge"}, ResponseInputImageParam)
    assert conforms(
        {"type": "image", "source": {"type": "base64", "media_type": "image/bmp", "data": ""}}, ImageBlockParam
    )


@pytest.mark.parametrize("wire", WIRES)
def test_the_image_bytes_on_the_wire_are_the_frames_bytes(wire):
    transcript, _, _ = WIRES[wire]
    [item] = transcript.user_items([UserInput("", (FRAME,))])
    [part] = image_part(wire, item)
    encoded = {
        "chat_completions": lambda: part["image_url"]["url"],
        "responses": lambda: part["image_url"],
        "anthropic_messages": lambda: part["source"]["data"],
        "gemini_interactions": lambda: part["data"],
    }[wire]()
    assert encoded in (FRAME.data_url, FRAME.base64)
    assert (
        ImagePart.from_data_url(encoded) == FRAME
        if encoded.startswith("data:")
        else ImagePart.from_base64(encoded) == FRAME
    )


@pytest.mark.parametrize("wire", WIRES)
def test_text_only_inputs_make_exactly_the_items_they_made_before_images(wire):
    transcript, _, _ = WIRES[wire]
    joined = "one\n\ntwo"
    before = {
        "chat_completions": {"role": "user", "content": joined},
        "responses": {"role": "user", "content": joined},
        "anthropic_messages": {"role": "user", "content": [{"type": "text", "text": joined}]},
        "gemini_interactions": {"type": "user_input", "content": [{"type": "text", "text": joined}]},
    }[wire]
    assert transcript.user_items(["one", "two"]) == [before]
    assert transcript.user_items(["one", UserInput("two")]) == [before]


def test_input_parts_keep_order_and_join_only_adjacent_texts():
    assert input_parts(["a", "b"]) == ["a\n\nb"]
    assert input_parts(["a", UserInput("b", (FRAME,)), "c", UserInput("", (OTHER,))]) == ["a\n\nb", FRAME, "c", OTHER]
    assert input_images(["a", UserInput("b", (FRAME, OTHER))]) == [FRAME, OTHER]


@pytest.mark.parametrize("wire", WIRES)
def test_an_image_is_estimated_by_its_providers_published_rule(wire):
    transcript, _, _ = WIRES[wire]
    text_only = transcript.estimate_tokens(transcript.user_items(["look"]))
    with_frame = transcript.estimate_tokens(transcript.user_items([UserInput("look", (FRAME,))]))
    assert with_frame - text_only == PUBLISHED_COST[wire](FRAME)
    assert with_frame - text_only > 0


def local_provider_count(wire: str, item: Mapping) -> int:
    """What the embedded local provider bills for one user item of the wire (its own counting code)."""
    if wire == "chat_completions":
        return estimate_message_tokens(item)
    if wire == "responses":
        return item_tokens(item)
    if wire == "anthropic_messages":
        return 4 + sum(block_tokens(block) for block in item["content"])
    return step_tokens(item)


@pytest.mark.parametrize("wire", WIRES)
def test_the_harness_estimates_an_image_turn_as_the_local_provider_counts_it(wire):
    transcript, _, _ = WIRES[wire]
    [item] = transcript.user_items([UserInput("look at it", (FRAME, OTHER))])
    assert transcript.estimate_tokens([item]) == local_provider_count(wire, item)


@pytest.mark.parametrize("wire", WIRES)
def test_a_reader_sees_an_image_by_its_digest_never_its_bytes(wire):
    transcript, _, _ = WIRES[wire]
    [shown] = transcript.readable(transcript.user_items([UserInput("look", (FRAME,))]))
    assert f"[image sha256:{FRAME.digest}]" in shown["content"]
    assert "look" in shown["content"]
    assert FRAME.base64[:40] not in str(shown)


def test_png_size_reads_the_header_from_the_first_32_base64_characters():
    assert png_size(FRAME.base64[:32]) == (48, 32)
    assert png_size(OTHER.base64) == (128, 128)
    with pytest.raises(ValueError, match="PNG signature"):
        png_size("aGVsbG8gd29ybGQ=")


def test_every_adapter_names_what_images_it_takes_and_deepseek_takes_none():
    limits = {adapter_id: descriptor.load().image_limits for adapter_id, descriptor in ADAPTERS.items()}
    assert limits["deepseek.chat_completions.v1"] is None
    assert {adapter_id: value.provider for adapter_id, value in limits.items() if value is not None} == {
        "openai.chat_completions.v1": "OpenAI",
        "openai.responses.v1": "OpenAI",
        "xai.responses.v1": "xAI",
        "anthropic.messages.v1": "Anthropic",
        "google.interactions.v1": "Gemini",
        "open_source.chat_completions.v1": "OpenAI",
    }


@pytest.mark.parametrize("wire", WIRES)
def test_a_forked_summary_sends_the_turns_images_and_an_independent_one_names_each_by_digest(wire):
    """strategies/summary.py: a fork replays the summarized turns' items, images and all; the
    independent form reads them as text, each image as its label, so no image reaches it."""
    transcript, _, _ = WIRES[wire]
    items = transcript.user_items([UserInput("frame 1", (FRAME,))])
    accepted = RuntimeState(
        adapter_id="a", strategy="continuous_conversation", payload={"items": items}, turns=(TurnSpan(0, 1),)
    )
    latest = ModelRequest("Play.", tuple(items))
    forked, independent = (
        summary_request(SummaryPass("trigger", 1, 1, fork), accepted, transcript, latest, 100, "Play.")
        for fork in (True, False)
    )
    assert forked.items[: len(items)] == tuple(items)
    assert FRAME.base64 in json.dumps(forked.items)
    assert FRAME.base64 not in json.dumps(independent.items)
    assert f"[image sha256:{FRAME.digest}]" in json.dumps(independent.items)
