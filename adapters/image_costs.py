"""The providers' published image facts: what an image costs in tokens, and what each accepts.

Rules it keeps:
1. Each provider's image-cost rule is one function, its docstring citing where it is published; the
   harness's estimate and the local provider's count both call it, so the two are the same number.
2. Each provider's limits are one frozen `ImageLimits`, every figure with its source: the adapters and
   the local provider import these, never their own copies.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from turnstate.adapters.images import ImagePart, refuse

# -- token estimates, one published rule each --------------------------------------------------------------

OpenAIDetail = Literal["low", "high", "auto"]
OPENAI_IMAGE_DETAIL: OpenAIDetail = (
    "high"  # what the harness sends: a fixed detail is a fixed cost ("auto" is the model's choice)
)
OPENAI_LOW_DETAIL_TOKENS = 85  # also the base of a high-detail image, for GPT-4o-class models
OPENAI_TILE_TOKENS = 170
OPENAI_FIT_SIDE, OPENAI_SHORT_SIDE, OPENAI_TILE_SIDE = 2048, 768, 512


def openai_image_tokens(
    width: int,
    height: int,
    detail: OpenAIDetail = "auto",
    *,
    base_tokens: int = OPENAI_LOW_DETAIL_TOKENS,
    tile_tokens: int = OPENAI_TILE_TOKENS,
) -> int:
    """OpenAI's tile rule (Responses and Chat Completions), "Calculating costs" in the Images and vision
    guide, https://platform.openai.com/docs/guides/images-vision#calculating-costs: `detail: low` costs
    the base (85 tokens); `high` scales the image to fit a 2048 x 2048 square, then so that its shortest
    side is 768 px, and costs the base plus 170 a 512 px tile that covers it. Worked examples published
    there: 1024 x 1024 high = 765, 2048 x 4096 high = 1105, low = 85 whatever the size.

    `auto` lets the model choose; it is counted as `high`, the larger, so an estimate never falls short.
    Both scalings only shrink, so a 512 x 512 frame is one tile: the guide's steps and examples are all
    reductions (that a small image is not enlarged is the common reading, not a published sentence).
    The guide gives other base/tile pairs for some models (pass them as base_tokens/tile_tokens), and a
    second, patch-based rule for gpt-4.1-mini, gpt-4.1-nano and o4-mini (and, per openai/openai-python
    issue 2851, gpt-5-mini and gpt-5-nano): 32 x 32 px patches, at most 1536 (the image is shrunk to
    fit), times a model multiplier (1.62, 2.46, 1.72). That rule is not implemented here; newer models
    add `detail: "original"` with a larger patch budget ("model sizing behavior" in the same guide)."""
    if detail not in ("low", "high", "auto"):
        raise ValueError(f"OpenAI image detail is low, high or auto, not {detail!r}")
    if detail == "low":
        return base_tokens
    width, height = scaled_to(width, height, max(width, height), OPENAI_FIT_SIDE)
    width, height = scaled_to(width, height, min(width, height), OPENAI_SHORT_SIDE)
    tiles = math.ceil(width / OPENAI_TILE_SIDE) * math.ceil(height / OPENAI_TILE_SIDE)
    return base_tokens + tile_tokens * tiles


def scaled_to(width: int, height: int, side: int, target: int) -> tuple[int, int]:
    """The size shrunk, aspect kept, until `side` (its long or its short side) is `target` px (whole
    pixels, integer arithmetic); as it is when `side` is within `target` already."""
    if side <= target:
        return width, height
    return max(1, width * target // side), max(1, height * target // side)


ANTHROPIC_PIXELS_PER_TOKEN = 750
ANTHROPIC_MAX_LONG_EDGE = 1568
ANTHROPIC_PATCH_SIDE = 28
ANTHROPIC_MAX_PATCHES = 1568


def anthropic_resized(width: int, height: int) -> tuple[int, int]:
    """The size Claude reads an image at: as sent when its long edge is at most 1568 px and it covers at
    most 1568 patches of 28 x 28 px, else the largest aspect-preserving size within both (whole pixels).

    Sources: Claude's vision guide, https://platform.claude.com/docs/en/build-with-claude/vision ("Evaluate
    image size": over 1568 px on the long edge "or more than ~1,600 tokens" is scaled down; the table of
    the largest sizes not resized, 1092x1092, 951x1268, 896x1344, 819x1456, 784x1568) and its
    coordinates guide, /docs/en/build-with-claude/vision-coordinates ("How Claude resizes and pads
    images": 28 px patches). The patch cap is what makes the table exact: 1092 = 39 x 28 is the largest
    square within 1568 patches, and 784 x 1568 is exactly 28 x 56 = 1568 patches, whereas a cap of
    1,600 tokens of w*h/750 would resize 784 x 1568 (1,639 tokens). These are the limits of the models
    before Claude Opus 4.7, which raised the long edge to 2576 px (not modelled here)."""
    if fits_claude(width, height):
        return width, height
    long_side, short_side = max(width, height), min(width, height)
    low, high = 1, min(long_side, ANTHROPIC_MAX_LONG_EDGE)
    while low < high:  # the longest long edge whose aspect-kept size fits; fitting shrinks as it grows
        middle = (low + high + 1) // 2
        if fits_claude(middle, max(1, short_side * middle // long_side)):
            low = middle
        else:
            high = middle - 1
    resized_short = max(1, short_side * low // long_side)
    return (low, resized_short) if width >= height else (resized_short, low)


def fits_claude(width: int, height: int) -> bool:
    patches = math.ceil(width / ANTHROPIC_PATCH_SIDE) * math.ceil(height / ANTHROPIC_PATCH_SIDE)
    return max(width, height) <= ANTHROPIC_MAX_LONG_EDGE and patches <= ANTHROPIC_MAX_PATCHES


def anthropic_image_tokens(width: int, height: int) -> int:
    """Claude's published estimate, tokens = width * height / 750 (rounded up) of the image as Claude
    reads it (`anthropic_resized`), from "Calculate image costs" in the vision guide,
    https://platform.claude.com/docs/en/build-with-claude/vision. Its examples: 200x200 ~54,
    1000x1000 ~1334, 1092x1092 (1.19 megapixels) ~1590. The guide's newest text counts instead one token
    a 28 x 28 px patch, ceil(w/28) * ceil(h/28) after padding (361 for a 512 x 512 frame, against 350
    here); the area rule is the one the brief and the worked examples use."""
    width, height = anthropic_resized(width, height)
    return math.ceil(width * height / ANTHROPIC_PIXELS_PER_TOKEN)


GEMINI_IMAGE_TOKENS = 258
GEMINI_SMALL_SIDE = 384
GEMINI_TILE_SIDE = 768

GeminiResolution = Literal["low", "medium", "high", "ultra_high"]
GEMINI_RESOLUTION_TOKENS: dict[str, int] = {"low": 280, "medium": 560, "high": 1120, "ultra_high": 2240}
GEMINI_DEFAULT_IMAGE_RESOLUTION: GeminiResolution = "high"


def gemini_tile_tokens(width: int, height: int) -> int:
    """Gemini 2.x's rule, "Understand and count tokens", https://ai.google.dev/gemini-api/docs/tokens
    (also Firebase AI Logic's input-file requirements): an image with both sides at most 384 px is 258
    tokens; a larger one is cut into 768 x 768 px tiles, 258 tokens each (ceil(w/768) * ceil(h/768))."""
    if width <= GEMINI_SMALL_SIDE and height <= GEMINI_SMALL_SIDE:
        return GEMINI_IMAGE_TOKENS
    return GEMINI_IMAGE_TOKENS * math.ceil(width / GEMINI_TILE_SIDE) * math.ceil(height / GEMINI_TILE_SIDE)


def gemini_resolution_tokens(resolution: GeminiResolution | None = None) -> int:
    """Gemini 3's rule: an image costs a fixed budget set by its media resolution, whatever its size, per
    "Media resolution" (Interactions API), https://ai.google.dev/gemini-api/docs/interactions/media-resolution
    #token-counts: low 280, medium 560, high 1120, ultra_high 2240; an image content item without
    `resolution` gets the default, high (Vertex AI's image-understanding page: "Default resolution
    tokens: 1120"). The budget is a maximum, so it is an estimate that never falls short. The
    Interactions image item carries it as `resolution` (google-genai 3.6: low | medium | high | ultra_high)."""
    chosen = GEMINI_DEFAULT_IMAGE_RESOLUTION if resolution is None else resolution
    if chosen not in GEMINI_RESOLUTION_TOKENS:
        raise ValueError(f"Gemini media resolution is one of {', '.join(GEMINI_RESOLUTION_TOKENS)}, not {chosen!r}")
    return GEMINI_RESOLUTION_TOKENS[chosen]


# -- limits, one value per provider -------------------------------------------------------------------------

MB = 1_000_000
MIB = 1024 * 1024


@dataclass(frozen=True)
class ImageLimits:
    """What one provider accepts of an inline image, as it publishes it. Sizes are bytes of the image
    file, or of its base64 text where `counts_base64` says so; None means no published limit."""

    provider: str
    media_types: frozenset[str]
    max_image_bytes: int
    counts_base64: bool
    max_images_per_request: int | None
    max_request_image_bytes: int | None  # all the images of one request together
    max_request_bytes: int | None  # the whole request body, images and all
    max_side: int | None  # pixels, either side
    many_images: int | None  # above this many images in one request, `many_images_max_side` applies
    many_images_max_side: int | None
    source: str

    def side_limit(self, images_in_request: int) -> int | None:
        if self.many_images is not None and images_in_request > self.many_images:
            return self.many_images_max_side
        return self.max_side

    def check(self, part: ImagePart, images_in_request: int = 1) -> None:
        """Raise ImageError if this provider would refuse `part` in a request of `images_in_request`."""
        fix = f"send fewer or smaller images (a smaller frame scale); limits: {self.source}"
        if part.media_type not in self.media_types:
            raise refuse(f"{self.provider} does not accept {part.media_type}", fix)
        size = len(part.base64) if self.counts_base64 else len(part.data)
        if size > self.max_image_bytes:
            counted = "base64 characters" if self.counts_base64 else "bytes"
            raise refuse(f"{self.provider} takes at most {self.max_image_bytes} {counted} an image, got {size}", fix)
        side = self.side_limit(images_in_request)
        if side is not None and max(part.width, part.height) > side:
            raise refuse(f"{self.provider} takes at most {side} px a side here, got {part.width} x {part.height}", fix)
        if self.max_images_per_request is not None and images_in_request > self.max_images_per_request:
            raise refuse(f"{self.provider} takes at most {self.max_images_per_request} images a request", fix)


OPENAI_IMAGE_LIMITS = ImageLimits(
    provider="OpenAI",
    media_types=frozenset({"image/png", "image/jpeg", "image/webp", "image/gif"}),  # GIF: non-animated only
    max_image_bytes=20 * MB,
    counts_base64=False,
    max_images_per_request=500,
    max_request_image_bytes=50 * MB,
    max_request_bytes=None,
    max_side=None,  # none published: a high-detail image is scaled down (openai_image_tokens)
    many_images=None,
    many_images_max_side=None,
    source="https://platform.openai.com/docs/guides/images-vision (Image input requirements)",
)
ANTHROPIC_IMAGE_LIMITS = ImageLimits(
    provider="Anthropic",
    media_types=frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"}),
    max_image_bytes=5 * MIB,  # the API's own refusal: "image exceeds 5 MB maximum: N bytes > 5242880 bytes"
    counts_base64=True,  # ... counted on source.base64, as that message shows
    max_images_per_request=100,  # 600 for models whose context window is over 200k tokens
    max_request_image_bytes=None,
    max_request_bytes=32 * MB,
    max_side=8000,
    many_images=20,
    many_images_max_side=2000,
    source="https://platform.claude.com/docs/en/build-with-claude/vision (General limits)",
)
GEMINI_IMAGE_LIMITS = ImageLimits(
    provider="Gemini",
    media_types=frozenset({"image/png", "image/jpeg", "image/webp", "image/heic", "image/heif"}),
    max_image_bytes=20 * MB,  # inline data: the whole request, prompt included, stays under 20 MB
    counts_base64=False,
    max_images_per_request=3600,
    max_request_image_bytes=None,
    max_request_bytes=20 * MB,
    max_side=None,  # none published: larger images are scaled (gemini_tile_tokens)
    many_images=None,
    many_images_max_side=None,
    source="https://ai.google.dev/gemini-api/docs/image-understanding (inline image data; 3,600 images a request)",
)
XAI_IMAGE_LIMITS = ImageLimits(
    provider="xAI",
    media_types=frozenset({"image/jpeg", "image/png"}),
    max_image_bytes=20 * MIB,
    counts_base64=False,
    max_images_per_request=None,  # "no limit" on the number of images
    max_request_image_bytes=None,
    max_request_bytes=None,
    max_side=None,
    many_images=None,
    many_images_max_side=None,
    source="https://docs.x.ai/docs/guides/image-understanding (maximum image size 20MiB; jpg/jpeg or png)",
)
