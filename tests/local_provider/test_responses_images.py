"""Images on the OpenAI Responses wire, through the real openai SDK over real HTTP.

An `input_image` part is taken as api.openai.com takes it (local_provider/vision.py, rule 1) and
refused in OpenAI's 400 shape naming the part's path; the model reads a frame image by its legend
line, in a message or in a function_call_output's output list; and an image is billed as the harness
estimates it (adapters/tokens.py).
"""

from __future__ import annotations

import typing
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import openai
import pytest
from openai.types.responses import ResponseInputImageContentParam, ResponseInputImageParam
from openai.types.responses.image_detail import ImageDetail

from turnstate.adapters.contract import UserInput
from turnstate.adapters.image_costs import openai_image_tokens
from turnstate.adapters.images import BASE64_FIX, CORRUPT_FIX, ImagePart, data_url
from turnstate.adapters.responses import ResponsesItems
from turnstate.local_provider.chat_completions_request import OPENAI_DETAILS
from turnstate.local_provider.responses_request import FILE_ID_FIX, PART_KEYS
from turnstate.local_provider.server import LocalProvider
from turnstate.local_provider.vision import INLINE_FIX

from .test_messages_images import DOT, FRAME, JPEG, LEGEND, ROWS, echo_last_message, png_with_padding, with_stray_bits
from .test_responses import MODEL, client_for, replayable_compaction, user

Item = dict[str, Any]
CALL = {"type": "function_call", "call_id": "call_1", "name": "look", "arguments": "{}"}
SIZE_FIX = "send fewer or smaller images"


def image(part: ImagePart | bytes | str, media_type: str = "image/png", **extra: object) -> Item:
    """An input_image part of an ImagePart or raw bytes as a data URL, or of a URL as given."""
    if isinstance(part, ImagePart):
        part = part.data
    url = part if isinstance(part, str) else data_url(part, media_type)
    return {"type": "input_image", "image_url": url, "detail": "high", **extra}


def text(words: str) -> Item:
    return {"type": "input_text", "text": words}


def parts(*content: Item, role: str = "user") -> Item:
    return {"role": role, "content": list(content)}


def tool_round(*output: Item) -> list[Item]:
    """A call and its function_call_output whose output is a list of parts."""
    return [user("look around"), CALL, {"type": "function_call_output", "call_id": "call_1", "output": list(output)}]


@pytest.fixture
def client() -> Iterator[openai.OpenAI]:
    with LocalProvider(reply=echo_last_message) as provider, client_for(provider) as sdk_client:
        yield sdk_client


def ask(client: openai.OpenAI, items: Sequence[Item]) -> Any:
    return client.responses.create(model=MODEL, input=list(items), store=False)


# --- accepted and read -----------------------------------------------------------------------------


def test_a_png_image_after_its_legend_line_shows_the_model_its_rows(client: openai.OpenAI) -> None:
    reply = ask(client, [parts(text(f"the frame:\n{LEGEND.line()}"), image(FRAME))])

    assert reply.output_text == f"echo: the frame:\n{LEGEND.line()}\n{ROWS[0]}\n{ROWS[1]}"


def test_an_image_no_legend_reads_is_accepted_and_shows_nothing(client: openai.OpenAI) -> None:
    reply = ask(client, [parts(text("what is "), image(FRAME), text("this?"))])

    assert reply.output_text == "echo: what is \nthis?"  # the image ends a line, and shows nothing


def test_an_image_in_a_function_call_outputs_list_is_read_as_the_result(client: openai.OpenAI) -> None:
    reply = ask(client, tool_round(text(LEGEND.line()), image(FRAME)))

    assert reply.output_text == f"echo: {LEGEND.line()}\n{ROWS[0]}\n{ROWS[1]}"


def test_an_image_in_a_developer_message_is_read_in_the_system_prompt() -> None:
    seen: list[str] = []

    def record(system: str, messages: Sequence[Mapping[str, object]]) -> str:
        seen.append(system)
        return "ok"

    with LocalProvider(reply=record) as provider, client_for(provider) as client:
        ask(client, [parts(text(LEGEND.line()), image(FRAME), role="developer"), user("go")])

    assert seen == [f"{LEGEND.line()}\n{ROWS[0]}\n{ROWS[1]}"]


def test_a_compacted_windows_kept_image_message_is_read_back() -> None:
    seen: list[list[object]] = []

    def record(system: str, messages: Sequence[Mapping[str, object]]) -> str:
        seen.append([message["content"] for message in messages])
        return "ok"

    with LocalProvider(reply=record) as provider, client_for(provider) as client:
        compacted = client.responses.compact(model=MODEL, input=[parts(text(LEGEND.line()), image(FRAME))])
        ask(client, [*replayable_compaction(compacted.output), user("and now?")])

    assert seen[-1] == [f"{LEGEND.line()}\n{ROWS[0]}\n{ROWS[1]}", "and now?"]


@pytest.mark.parametrize("detail", ["low", "high", "auto", None], ids=["low", "high", "auto", "absent"])
def test_the_input_tokens_are_the_harness_estimate_with_the_image(client: openai.OpenAI, detail: str | None) -> None:
    items = ResponsesItems()
    [with_frame] = items.user_items([UserInput(LEGEND.line(), (FRAME,))])
    with_frame["content"][1] = {key: value for key, value in with_frame["content"][1].items() if key != "detail"}
    if detail is not None:
        with_frame["content"][1]["detail"] = detail
    [text_only] = items.user_items([LEGEND.line()])
    shown, plain = ask(client, [with_frame]), ask(client, [text_only])

    assert shown.usage.input_tokens == items.estimate_tokens([with_frame])
    assert shown.usage.input_tokens - plain.usage.input_tokens == openai_image_tokens(
        FRAME.width, FRAME.height, detail or "auto"
    )


def test_an_image_in_a_function_call_output_is_billed_as_one_in_a_message_is(client: openai.OpenAI) -> None:
    def billed(*output: Item) -> int:
        return ask(client, tool_round(*output)).usage.input_tokens

    assert billed(text("seen"), image(FRAME)) - billed(text("seen")) == openai_image_tokens(
        FRAME.width, FRAME.height, "high"
    )


# --- refused, as the real service refuses them, or by name where only this provider must ----------


PATH = "input[0].content[0]"
REFUSALS: list[tuple[str, list[Item], str, str, str, str]] = [
    # (case, input, param, code, the message's start, the fix it names)
    (
        "corrupt PNG",
        [parts(image(FRAME.data[:-1]))],
        f"{PATH}.image_url",
        "invalid_image",
        "a corrupt PNG",
        CORRUPT_FIX,
    ),
    (
        "non-canonical base64",
        [parts(image(f"data:image/png;base64,{with_stray_bits(DOT.base64)}"))],
        f"{PATH}.image_url",
        "invalid_image",
        "the image data is not canonical base64",
        BASE64_FIX,
    ),
    (
        "a media type OpenAI does not take",
        [parts(image(FRAME, "image/bmp"))],
        f"{PATH}.image_url",
        "invalid_image",
        "OpenAI does not accept 'image/bmp' images",
        "send one of image/gif, image/jpeg, image/png, image/webp",
    ),
    (
        "JPEG bytes sent as PNG",
        [parts(image(JPEG))],
        f"{PATH}.image_url",
        "invalid_image",
        "not a PNG",
        "send PNG bytes (image/png)",
    ),
    (
        "a JPEG, which OpenAI takes and this model cannot read",
        [parts(image(JPEG, "image/jpeg"))],
        f"{PATH}.image_url",
        "invalid_image",
        "the local provider's model reads PNG images only, not image/jpeg",
        "send the frame as PNG",
    ),
    (
        "over 20 MB",
        [parts(image(png_with_padding(20_000_000)))],
        f"{PATH}.image_url",
        "invalid_image",
        "OpenAI takes at most 20000000 bytes an image",
        SIZE_FIX,
    ),
    (
        "over 500 images a request",
        [parts(*[image(DOT)] * 250), user("and"), parts(*[image(DOT)] * 251)],
        f"{PATH}.image_url",
        "invalid_image",
        "OpenAI takes at most 500 images a request",
        SIZE_FIX,
    ),
    (
        "a web URL",
        [parts(image("https://example.com/frame.png"))],
        f"{PATH}.image_url",
        "invalid_image",
        "the local provider fetches no image URL",
        INLINE_FIX,
    ),
    (
        "a data URL that is not base64",
        [parts(image("data:image/png,rawbytes"))],
        f"{PATH}.image_url",
        "invalid_image",
        "the data URL does not read data:<media type>;base64,<data>",
        INLINE_FIX,
    ),
    (
        "a file",
        [parts({"type": "input_image", "file_id": "file_1", "detail": "high"})],
        f"{PATH}.file_id",
        "invalid_image",
        "no file 'file_1': the local provider stores no file",
        FILE_ID_FIX,
    ),
    (
        "neither a URL nor a file",
        [parts({"type": "input_image", "detail": "high"})],
        f"{PATH}.image_url",
        "missing_required_parameter",
        f"Missing required parameter: '{PATH}.image_url'.",
        "image_url",
    ),
    (
        "the newer models' original detail, not modelled",
        [parts(image(FRAME, detail="original"))],
        f"{PATH}.detail",
        "invalid_value",
        "Invalid value: 'original'.",
        "Supported values are: 'auto', 'low', and 'high'.",
    ),
    (
        "a corrupt PNG in a function_call_output",
        tool_round(text("seen"), image(FRAME.data[:-1])),
        "input[2].output[1].image_url",
        "invalid_image",
        "a corrupt PNG",
        CORRUPT_FIX,
    ),
    (
        "an unknown key on an image in a function_call_output",
        tool_round(image(FRAME, size=1)),
        "input[2].output[0].size",
        "unknown_parameter",
        "Unknown parameter: 'input[2].output[0].size'.",
        "size",
    ),
    (
        "an image in an assistant message",
        [user("look"), parts(image(FRAME), role="assistant"), user("and now?")],
        "input[1].content[0].type",
        "invalid_value",
        "Invalid value: 'input_image'.",
        "Supported values are: 'output_text' and 'refusal'.",
    ),
]


@pytest.mark.parametrize(
    ("case", "items", "param", "code", "words", "fix"), REFUSALS, ids=[case[0] for case in REFUSALS]
)
def test_an_image_the_wire_does_not_take_is_a_400_naming_its_path_and_the_fix(
    client: openai.OpenAI, case: str, items: list[Item], param: str, code: str, words: str, fix: str
) -> None:
    with pytest.raises(openai.BadRequestError) as raised:
        ask(client, items)

    assert raised.value.status_code == 400
    body = raised.value.body
    assert isinstance(body, dict)
    assert (body["type"], body["param"], body["code"]) == ("invalid_request_error", param, code)
    message = str(body["message"])
    expected_start = f"Invalid image: {words}" if code == "invalid_image" else words
    assert message.startswith(expected_start), message
    assert fix in message


def test_the_compact_endpoint_refuses_an_image_as_create_does(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as raised:
        client.responses.compact(model=MODEL, input=[parts(image(FRAME.data[:-1]))])

    body = raised.value.body
    assert isinstance(body, dict)
    assert (body["param"], body["code"]) == (f"{PATH}.image_url", "invalid_image")
    assert CORRUPT_FIX in str(body["message"])


def test_the_image_part_keys_and_details_are_the_installed_sdks() -> None:
    assert PART_KEYS["input_image"] == set(typing.get_type_hints(ResponseInputImageParam))
    assert PART_KEYS["input_image"] == set(typing.get_type_hints(ResponseInputImageContentParam))
    details = set(typing.get_args(ImageDetail)) - {"original"}  # "original" is not modelled here
    assert set(OPENAI_DETAILS) == details
