"""Tool results that show images (issue 34: an action's next frame as its ToolResult) on every wire:
each transcript lays them out in its API's tool-result shape, held to the installed SDK's TypedDicts;
Chat Completions, whose tool messages take text only, shows them in one user message after its tool
messages; a result of text alone is exactly what it was before images; the harness estimates them as
the local provider counts them, readers see digests, and an adapter that takes no images refuses one."""

from __future__ import annotations

import json
from collections.abc import Mapping

import pytest
from anthropic.types import ToolResultBlockParam
from google.genai._gaos.types.interactions.functionresultstep import FunctionResultStepParam
from openai.types.chat import ChatCompletionToolMessageParam, ChatCompletionUserMessageParam
from openai.types.responses.response_input_item_param import FunctionCallOutput

from turnstate.adapters.chat_completions import ERROR_RESULT_PREFIX, IMAGES_FOLLOW
from turnstate.adapters.contract import ToolResult, taken_results
from turnstate.adapters.image_costs import ANTHROPIC_IMAGE_LIMITS
from turnstate.adapters.images import ImageError, ImagePart
from turnstate.environments.frame_image import frame_to_png

from .test_image_inputs import FRAME, OTHER, PUBLISHED_COST, WIRES, conforms, image_part, local_provider_count

RESULTS = [
    ToolResult("call_1", "ACTION1", "the next frame", images=(FRAME, OTHER)),
    ToolResult("call_2", "look", "text"),
]
RESULT_PARAM = {  # the SDK TypedDict of the item (or block) that holds one tool result
    "responses": FunctionCallOutput,
    "anthropic_messages": ToolResultBlockParam,
    "gemini_interactions": FunctionResultStepParam,
    "chat_completions": ChatCompletionToolMessageParam,
}


def result_entries(wire: str, items: list) -> list[Mapping]:
    """Each result's own entry: an item, or (Messages) a tool_result block of the one user message."""
    if wire == "anthropic_messages":
        [message] = items
        return message["content"]
    return [item for item in items if wire != "chat_completions" or item["role"] == "tool"]


def held(wire: str, entry: Mapping) -> object:
    return entry[{"responses": "output", "anthropic_messages": "content", "gemini_interactions": "result"}[wire]]


@pytest.mark.parametrize("wire", ["responses", "anthropic_messages", "gemini_interactions"])
def test_a_results_images_go_in_the_wires_tool_result_after_its_text_as_the_sdk_types_it(wire):
    transcript, text_param, image_param = WIRES[wire]
    imaged, plain = result_entries(wire, transcript.tool_result_items(RESULTS))
    assert conforms(imaged, RESULT_PARAM[wire]) == [] and conforms(plain, RESULT_PARAM[wire]) == []
    text, *images = held(wire, imaged)
    assert conforms(text, text_param) == [] and text["text"] == "the next frame"
    assert [problem for part in images for problem in conforms(part, image_param)] == []
    assert len(images) == 2 and images == image_part(wire, {"content": held(wire, imaged)})
    assert held(wire, plain) == "text"  # a result of text alone: the string it was before images


def test_chat_completions_shows_a_results_images_in_one_user_message_after_the_tool_messages():
    """A tool message takes text only (ChatCompletionToolMessageParam): each says where its images are,
    and the user message after all of them holds each such result's call, text and images, in order."""
    transcript, text_param, image_param = WIRES["chat_completions"]
    failed = ToolResult("call_3", "ACTION2", "a wall", is_error=True, images=(FRAME,))
    *tools, shown = transcript.tool_result_items([*RESULTS, failed])
    assert [message["role"] for message in tools] == ["tool", "tool", "tool"]
    assert [message["content"] for message in tools] == [
        IMAGES_FOLLOW.format(count=2),
        "text",
        ERROR_RESULT_PREFIX + IMAGES_FOLLOW.format(count=1),
    ]
    assert [problem for message in tools for problem in conforms(message, ChatCompletionToolMessageParam)] == []
    assert shown["role"] == "user" and conforms(shown, ChatCompletionUserMessageParam) == []
    kinds = [part["type"] for part in shown["content"]]
    assert kinds == ["text", "image_url", "image_url", "text", "image_url"]
    assert shown["content"][0]["text"] == "The result of call call_1:\nthe next frame"
    assert shown["content"][3]["text"] == "The result of call call_3:\na wall"
    assert [
        problem for part in shown["content"] if part["type"] == "text" for problem in conforms(part, text_param)
    ] == []
    urls = [part["image_url"]["url"] for part in shown["content"] if part["type"] == "image_url"]
    assert urls == [FRAME.data_url, OTHER.data_url, FRAME.data_url]
    assert [problem for part in image_part("chat_completions", shown) for problem in conforms(part, image_param)] == []
    assert transcript.tool_result_items(RESULTS[1:]) == [{"role": "tool", "tool_call_id": "call_2", "content": "text"}]


@pytest.mark.parametrize("wire", WIRES)
def test_a_results_image_bytes_on_the_wire_are_the_frames_bytes(wire):
    transcript, _, _ = WIRES[wire]
    sent = json.dumps(transcript.tool_result_items(RESULTS))
    assert FRAME.base64 in sent and OTHER.base64 in sent
    assert sent.count(FRAME.base64) == 1


@pytest.mark.parametrize("wire", WIRES)
def test_the_harness_estimates_a_results_images_as_the_local_provider_counts_them(wire):
    transcript, _, _ = WIRES[wire]
    """What the images add, in the harness's estimate and in the local provider's count. (The text
    around them differs by a few tokens on Messages: the harness counts a `[result]` label per
    result, the provider the text alone; the harness's side is the larger, so it trims early.)"""
    items = transcript.tool_result_items(RESULTS)
    without = transcript.tool_result_items([ToolResult("call_1", "ACTION1", "the next frame"), RESULTS[1]])
    if wire == "chat_completions":  # its images' user message, with its text parts alone
        *tools, shown = items
        without = [*tools, {**shown, "content": [part for part in shown["content"] if part["type"] == "text"]}]
    counted = sum(local_provider_count(wire, item) for item in items) - sum(
        local_provider_count(wire, item) for item in without
    )
    estimated = transcript.estimate_tokens(items) - transcript.estimate_tokens(without)
    assert estimated == counted == sum(PUBLISHED_COST[wire](image) for image in (FRAME, OTHER))


@pytest.mark.parametrize("wire", WIRES)
def test_a_reader_sees_a_results_image_by_its_digest_never_its_bytes(wire):
    transcript, _, _ = WIRES[wire]
    shown = json.dumps(transcript.readable(transcript.tool_result_items(RESULTS)))
    assert f"[image sha256:{FRAME.digest}]" in shown and f"[image sha256:{OTHER.digest}]" in shown
    assert "the next frame" in shown
    assert FRAME.base64[:40] not in shown


@pytest.mark.parametrize("wire", WIRES)
def test_the_offload_reads_a_results_text_and_its_error_flag_beside_its_images(wire):
    transcript, _, _ = WIRES[wire]
    failed = ToolResult("call_1", "ACTION1", "a wall", is_error=True, images=(FRAME,))
    [found] = transcript.tool_results(transcript.tool_result_items([failed]))
    assert (found.call_id, found.is_error) == ("call_1", True)
    assert FRAME.base64 not in found.text


def test_tool_result_images_are_refused_where_the_api_takes_none_or_over_its_limits():
    with pytest.raises(ImageError, match="sends no images .* a tool result shows 2; fix: answer with text"):
        taken_results(RESULTS, None, "deepseek.chat_completions.v1")
    assert taken_results(RESULTS[1:], None, "deepseek.chat_completions.v1") == (RESULTS[1],)
    too_wide = ImagePart(frame_to_png([[0] * 251], scale=32))  # 8032 px wide: over Anthropic's 8000
    with pytest.raises(ImageError, match="fix:"):
        taken_results([ToolResult("c", "ACTION1", "", images=(too_wide,))], ANTHROPIC_IMAGE_LIMITS, "anthropic")
    with pytest.raises(TypeError, match=r"a ToolResult's images\[0\] is a bytes, not an ImagePart"):
        ToolResult("c", "ACTION1", "", images=(FRAME.data,))  # type: ignore[arg-type]
