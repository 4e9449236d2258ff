"""Images on the Anthropic Messages wire, through the real anthropic SDK over real HTTP.

An image block is taken as api.anthropic.com takes it (local_provider/vision.py, rule 1) and refused in
its 400 shape naming the block's path; the model reads a frame image by its legend line; and an image
is billed as the harness estimates it (adapters/tokens.py).
"""

from __future__ import annotations

import base64
import string
import typing
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import anthropic
import pytest
from anthropic.types import ImageBlockParam, ToolResultBlockParam
from anthropic.types import Message as SdkMessage

from turnstate.adapters.anthropic_messages import MessagesItems
from turnstate.adapters.contract import UserInput
from turnstate.adapters.image_costs import anthropic_image_tokens
from turnstate.adapters.images import BASE64_FIX, CORRUPT_FIX, ImagePart, chunk
from turnstate.environments.frame_image import ImageLegend, frame_to_png
from turnstate.local_provider.messages_request import IMAGE_PLACES, IMAGE_SOURCES, TOOL_RESULT_BLOCKS
from turnstate.local_provider.server import LocalProvider
from turnstate.local_provider.vision import INLINE_FIX

from .test_messages import MODEL, client_for, refused, text_of, user

LEGEND = ImageLegend(columns=3, rows=2, scale=4, symbols={0: ".", 5: "#"})
ROWS = ["#.#", ".#."]
FRAME = LEGEND.draw(ROWS)
DOT = ImagePart(frame_to_png([[0]], scale=1))  # 1 x 1 px: the cheapest image to send many of
LOOK_TOOL = {"name": "look", "input_schema": {"type": "object"}}
SIZE_FIX = "send fewer or smaller images"


def echo_last_message(system: str, messages: Sequence[Mapping[str, object]]) -> str:
    return f"echo: {messages[-1]['content']}"


def image(part: ImagePart | bytes | str, media_type: str = "image/png") -> dict[str, Any]:
    """An image block of an ImagePart, of raw bytes, or of base64 text as given."""
    if isinstance(part, ImagePart):
        part = part.base64
    data = part if isinstance(part, str) else base64.b64encode(part).decode("ascii")
    return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}


def text(words: str) -> dict[str, Any]:
    return {"type": "text", "text": words}


def ask(client: anthropic.Anthropic, messages: Sequence[dict[str, Any]], **params: Any) -> SdkMessage:
    return client.messages.create(model=MODEL, max_tokens=256, messages=list(messages), **params)


@pytest.fixture
def client() -> Iterator[anthropic.Anthropic]:
    with LocalProvider(reply=echo_last_message) as provider, client_for(provider) as sdk_client:
        yield sdk_client


# --- accepted and read -----------------------------------------------------------------------------


def test_a_png_image_after_its_legend_line_shows_the_model_its_rows(client: anthropic.Anthropic) -> None:
    reply = ask(client, [{"role": "user", "content": [text(f"the frame:\n{LEGEND.line()}"), image(FRAME)]}])

    assert text_of(reply) == f"echo: the frame:\n{LEGEND.line()}\n{ROWS[0]}\n{ROWS[1]}"


def test_an_image_no_legend_reads_is_accepted_and_shows_nothing(client: anthropic.Anthropic) -> None:
    reply = ask(client, [{"role": "user", "content": [text("what is "), image(FRAME), text("this?")]}])

    assert text_of(reply) == "echo: what is \nthis?"  # the image ends a line, and shows nothing


def test_an_image_in_a_tool_results_content_is_read_as_the_result(client: anthropic.Anthropic) -> None:
    call = {"type": "tool_use", "id": "toolu_1", "name": "look", "input": {}}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": [text(LEGEND.line()), image(FRAME)]}
    messages = [user("look around"), {"role": "assistant", "content": [call]}, {"role": "user", "content": [result]}]
    reply = ask(client, messages, tools=[LOOK_TOOL])

    assert text_of(reply) == f"echo: {LEGEND.line()}\n{ROWS[0]}\n{ROWS[1]}"


def test_the_input_tokens_are_the_harness_estimate_with_the_image(client: anthropic.Anthropic) -> None:
    items = MessagesItems()
    [with_frame] = items.user_items([UserInput(LEGEND.line(), (FRAME,))])
    [text_only] = items.user_items([LEGEND.line()])
    shown, plain = ask(client, [with_frame]), ask(client, [text_only])

    assert shown.usage.input_tokens == items.estimate_tokens([with_frame])
    assert shown.usage.input_tokens - plain.usage.input_tokens == anthropic_image_tokens(FRAME.width, FRAME.height)


def test_an_image_in_a_tool_result_is_billed_as_one_in_a_message_is(client: anthropic.Anthropic) -> None:
    call = {"type": "tool_use", "id": "toolu_1", "name": "look", "input": {}}

    def billed(content: list[dict[str, Any]]) -> int:
        result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": content}
        messages = [user("look"), {"role": "assistant", "content": [call]}, {"role": "user", "content": [result]}]
        return ask(client, messages, tools=[LOOK_TOOL]).usage.input_tokens

    assert billed([text("seen"), image(FRAME)]) - billed([text("seen")]) == anthropic_image_tokens(
        FRAME.width, FRAME.height
    )


# --- refused, as the real service refuses them, or by name where only this provider must ----------


def png_with_padding(extra: int) -> bytes:
    """A 1 x 1 PNG carrying `extra` bytes in an ancillary chunk before IEND: a whole PNG (a decoder
    skips the chunk) as large as wanted, cheap to decode."""
    end = chunk(b"IEND", b"")
    return DOT.data[: -len(end)] + chunk(b"tEXt", b"x" * extra) + end


def with_stray_bits(encoded: str) -> str:
    """The same bytes' base64 with the unused low bits of its last character set: it decodes to the
    same bytes, but is not what encoding them gives (base64 that is not canonical)."""
    body = encoded.rstrip("=")
    assert body != encoded, "only a padded base64 has stray bits"
    alphabet = string.ascii_uppercase + string.ascii_lowercase + string.digits + "+/"
    return body[:-1] + alphabet[alphabet.index(body[-1]) | 1] + encoded[len(body) :]


def user_blocks(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": list(blocks)}


JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00\xff\xd9"
PATH = "messages.0.content.0.image.source"
REFUSALS: list[tuple[str, list[dict[str, Any]], dict[str, Any], str, str]] = [
    # (case, messages, other params, the message's path and problem, the fix it names)
    ("corrupt PNG", [user_blocks(image(FRAME.data[:-1]))], {}, f"{PATH}.base64.data: a corrupt PNG", CORRUPT_FIX),
    (
        "non-canonical base64",
        [user_blocks(image(with_stray_bits(DOT.base64)))],
        {},
        f"{PATH}.base64.data: the image data is not canonical base64",
        BASE64_FIX,
    ),
    (
        "a media type Anthropic does not take",
        [user_blocks(image(FRAME, "image/bmp"))],
        {},
        f"{PATH}.base64.media_type: Input should be 'image/gif', 'image/jpeg', 'image/png' or 'image/webp'",
        "'image/png'",
    ),
    (
        "JPEG bytes sent as PNG",
        [user_blocks(image(JPEG))],
        {},
        f"{PATH}.base64.data: not a PNG",
        "send PNG bytes (image/png)",
    ),
    (
        "a JPEG, which Anthropic takes and this model cannot read",
        [user_blocks(image(JPEG, "image/jpeg"))],
        {},
        f"{PATH}.base64.data: the local provider's model reads PNG images only, not image/jpeg",
        "send the frame as PNG",
    ),
    (
        "over 5 MB of base64",
        [user_blocks(image(png_with_padding(4_000_000)))],
        {},
        f"{PATH}.base64.data: Anthropic takes at most 5242880 base64 characters an image",
        SIZE_FIX,
    ),
    (
        "over 8000 px a side",
        [user_blocks(image(frame_to_png([[0] * 8001], scale=1)))],
        {},
        f"{PATH}.base64.data: Anthropic takes at most 8000 px a side here, got 8001 x 1",
        SIZE_FIX,
    ),
    (
        "over 2000 px a side among more than 20 images",
        [user_blocks(*[image(DOT)] * 20, image(frame_to_png([[0] * 2001], scale=1)))],
        {},
        "messages.0.content.20.image.source.base64.data: Anthropic takes at most 2000 px a side here",
        SIZE_FIX,
    ),
    (
        "over 100 images a request",
        [user_blocks(*[image(DOT)] * 101)],
        {},
        f"{PATH}.base64.data: Anthropic takes at most 100 images a request",
        SIZE_FIX,
    ),
    (
        "a URL",
        [user_blocks({"type": "image", "source": {"type": "url", "url": "https://example.com/frame.png"}})],
        {},
        f"{PATH}.url.url: the local provider fetches no image URL",
        INLINE_FIX,
    ),
    (
        "a file",
        [user_blocks({"type": "image", "source": {"type": "file", "file_id": "file_1"}})],
        {},
        f"{PATH}.file.file_id: no file `file_1`",
        INLINE_FIX,
    ),
    (
        "a corrupt PNG in a tool result",
        [
            user("look"),
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "look", "input": {}}]},
            user_blocks({"type": "tool_result", "tool_use_id": "toolu_1", "content": [image(FRAME.data[:-1])]}),
        ],
        {"tools": [LOOK_TOOL]},
        "messages.2.content.0.tool_result.content.0.image.source.base64.data: a corrupt PNG",
        CORRUPT_FIX,
    ),
    (
        "an image in an assistant turn",
        [user("look"), {"role": "assistant", "content": [image(FRAME)]}, user("and now?")],
        {},
        "messages.1.content.0.type: `image` blocks are not allowed in `assistant` messages",
        IMAGE_PLACES,
    ),
    (
        "an image in the system prompt",
        [user("look")],
        {"system": [image(FRAME)]},
        "system.0.type: Input should be 'text'",
        IMAGE_PLACES,
    ),
]


@pytest.mark.parametrize(("case", "messages", "params", "words", "fix"), REFUSALS, ids=[case[0] for case in REFUSALS])
def test_an_image_the_wire_does_not_take_is_a_400_naming_its_path_and_the_fix(
    client: anthropic.Anthropic,
    case: str,
    messages: list[dict[str, Any]],
    params: dict[str, Any],
    words: str,
    fix: str,
) -> None:
    with pytest.raises(anthropic.BadRequestError) as raised:
        ask(client, messages, **params)

    assert raised.value.status_code == 400
    message = refused(raised)
    assert message.startswith(words), message
    assert fix in message


def test_the_image_sources_and_tool_result_blocks_are_the_installed_sdks() -> None:
    sources = typing.get_args(typing.get_type_hints(ImageBlockParam)["source"])
    assert {_literal_type(source): set(source.__annotations__) for source in sources} == IMAGE_SOURCES
    held = typing.get_args(typing.get_args(typing.get_type_hints(ToolResultBlockParam)["content"])[1])[0]
    assert tuple(_literal_type(block) for block in typing.get_args(held)) == TOOL_RESULT_BLOCKS


def _literal_type(typed: Any) -> str:
    (tag,) = typing.get_args(typing.get_type_hints(typed)["type"])
    return str(tag)
