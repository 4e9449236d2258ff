"""Images on the Gemini Interactions wire, through the real google-genai SDK over real HTTP.

An image content is taken as the Gemini API takes inline data (local_provider/vision.py, rule 1) and
refused in Google's 400 shape naming the content's path; the model reads a frame image by its legend
line; and an image is billed as the harness estimates it (adapters/tokens.py).
"""

from __future__ import annotations

import base64
from collections.abc import Iterator, Sequence
from typing import Any, get_args

import pytest
from google import genai
from google.genai import _interactions
from google.genai._gaos.types.interactions import imagecontent, mediaresolution

from turnstate.adapters.contract import UserInput
from turnstate.adapters.gemini_interactions import InteractionSteps
from turnstate.adapters.image_costs import GEMINI_IMAGE_LIMITS, GEMINI_RESOLUTION_TOKENS
from turnstate.adapters.images import BASE64_FIX, CORRUPT_FIX, ImagePart
from turnstate.local_provider.server import LocalProvider
from turnstate.local_provider.vision import INLINE_FIX

from .test_interactions import MODEL, client_for, google_error, text_of, user
from .test_messages_images import DOT, FRAME, JPEG, LEGEND, ROWS, echo_last_message, png_with_padding, with_stray_bits


def image(part: ImagePart | bytes | str, mime_type: str = "image/png", **keys: Any) -> dict[str, Any]:
    """An image content of an ImagePart, of raw bytes, or of base64 text as given."""
    if isinstance(part, ImagePart):
        part = part.base64
    data = part if isinstance(part, str) else base64.b64encode(part).decode("ascii")
    return {"type": "image", "data": data, "mime_type": mime_type, **keys}


def text(words: str) -> dict[str, Any]:
    return {"type": "text", "text": words}


def user_contents(*contents: dict[str, Any]) -> dict[str, Any]:
    return {"type": "user_input", "content": list(contents)}


def ask(client: genai.Client, steps: Sequence[dict[str, Any]]) -> Any:
    return client.interactions.create(model=MODEL, input=list(steps), store=False)


@pytest.fixture
def client() -> Iterator[genai.Client]:
    with LocalProvider(reply=echo_last_message) as provider, client_for(provider) as sdk_client:
        yield sdk_client


# --- accepted and read -----------------------------------------------------------------------------


def test_a_png_image_after_its_legend_line_shows_the_model_its_rows(client: genai.Client) -> None:
    reply = ask(client, [user_contents(text(f"the frame:\n{LEGEND.line()}"), image(FRAME))])

    assert text_of(reply) == f"echo: the frame:\n{LEGEND.line()}\n{ROWS[0]}\n{ROWS[1]}"


def test_an_image_no_legend_reads_is_accepted_and_shows_nothing(client: genai.Client) -> None:
    reply = ask(client, [user_contents(text("what is"), image(FRAME), text("this?"))])

    assert text_of(reply) == "echo: what is\nthis?"


def test_the_input_tokens_are_the_harness_estimate_with_the_image(client: genai.Client) -> None:
    items = InteractionSteps()
    [with_frame] = items.user_items([UserInput(LEGEND.line(), (FRAME,))])
    [text_only] = items.user_items([LEGEND.line()])
    shown, plain = ask(client, [with_frame]), ask(client, [text_only])

    assert shown.usage.total_input_tokens == items.estimate_tokens([with_frame])
    assert shown.usage.total_input_tokens - plain.usage.total_input_tokens == GEMINI_RESOLUTION_TOKENS["high"]


def test_the_resolutions_are_the_sdks_and_each_is_billed_at_its_budget(client: genai.Client) -> None:
    assert set(get_args(get_args(mediaresolution.MediaResolution)[0])) == set(GEMINI_RESOLUTION_TOKENS)
    plain = ask(client, [user_contents(text("seen"))]).usage.total_input_tokens
    for resolution, budget in GEMINI_RESOLUTION_TOKENS.items():
        shown = ask(client, [user_contents(text("seen"), image(DOT, resolution=resolution))])
        assert shown.usage.total_input_tokens - plain == budget, resolution


def test_the_accepted_media_types_are_ones_the_sdk_names() -> None:
    assert GEMINI_IMAGE_LIMITS.media_types <= set(get_args(get_args(imagecontent.ImageContentMimeType)[0]))


# --- refused, naming the content and the fix, in Google's error shape -------------------------------

PATH = "input[0].content[0]"
REFUSALS: list[tuple[str, dict[str, Any], str, str]] = [
    # (case, the image content, the message's start, the fix it names)
    ("corrupt PNG", image(FRAME.data[:-1]), f"Invalid value at '{PATH}.data': a corrupt PNG", CORRUPT_FIX),
    ("not canonical base64", image(with_stray_bits(DOT.base64)), f"Invalid value at '{PATH}.data'", BASE64_FIX),
    ("a media type Gemini refuses", image(DOT, "image/gif"), f"Invalid value at '{PATH}.data': Gemini does not", "send one of"),
    ("a JPEG", image(JPEG, "image/jpeg"), f"Invalid value at '{PATH}.data': the local provider's model reads PNG", "as PNG"),
    ("over the size limit", image(png_with_padding(20_000_001)), f"Invalid value at '{PATH}.data': Gemini takes at most", "smaller"),
    ("a URI", {"type": "image", "uri": "https://example.com/f.png", "mime_type": "image/png"}, f"Invalid value at '{PATH}.uri'", INLINE_FIX),
    ("no data", {"type": "image", "mime_type": "image/png"}, f"Field '{PATH}.data' is required.", ""),
    ("no mime type", {"type": "image", "data": DOT.base64}, f"Field '{PATH}.mime_type' is required.", ""),
    ("an unknown resolution", image(DOT, resolution="huge"), f"Invalid value at '{PATH}.resolution'", "ultra_high"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("content", "start", "fix"), [case[1:] for case in REFUSALS], ids=[case[0] for case in REFUSALS]
)
def test_a_bad_image_is_refused_naming_its_path_and_the_fix(
    client: genai.Client, content: dict[str, Any], start: str, fix: str
) -> None:
    with pytest.raises(_interactions.BadRequestError) as raised:
        ask(client, [user_contents(content)])

    message = google_error(raised)
    assert message.startswith(start) and fix in message


def test_an_image_in_a_function_result_is_checked_with_its_path(client: genai.Client) -> None:
    call = {"type": "function_call", "id": "call_1", "name": "look", "arguments": {}}
    result = {"type": "function_result", "call_id": "call_1", "result": [image(FRAME.data[:-1])]}
    with pytest.raises(_interactions.BadRequestError) as raised:
        ask(client, [user("look"), call, result])

    assert google_error(raised).startswith("Invalid value at 'input[2].result[0].data': a corrupt PNG")


def test_a_text_only_request_reads_as_before(client: genai.Client) -> None:
    reply = ask(client, [user_contents(text("one"), text("two"))])

    assert text_of(reply) == "echo: one\ntwo"
