"""What the local provider's model sees of the images a request shows, and how strictly it takes them.

The model reads text. It sees an image the way the frame's legend line tells a vision model to read it
(environments/frame_image.py, rule 5): a legend line `IMAGE: ...` reads the first image after the text
it stands in that no legend has read yet, and the model sees that image's cells, as the legend's
symbols, as rows of text right under the legend line. So a policy plays an image frame from the same
grid it plays the text one from, and knows nothing of images.

Rules:
1. Every wire takes an image as real APIs do, and the same strictly, before the model sees anything:
   inline base64 only (the local provider fetches no URL and holds no uploaded file: a clear refusal
   that names the fix), the media type one its provider accepts, the base64 canonical, the bytes a
   whole PNG (the only format this model decodes: another format a real API takes is refused by
   name), and the provider's published size, side and count limits (adapters/image_costs.py). Each
   wire raises the refusal in its own API's error shape, naming the part's path.
2. An image no legend reads, or one that is not the grid its legend states, is taken (a real API
   would take it) and shows the model nothing: no rows, so a policy finds no grid in it.
3. A message without images reads exactly as before images: its texts joined as the wire joins them.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from turnstate.adapters.image_costs import ImageLimits
from turnstate.adapters.images import PNG_MEDIA_TYPE, ImageError, ImagePart, decode_base64, refuse
from turnstate.environments.frame_image import ImageLegend

INLINE_FIX = "send the image inline, as base64 of its PNG bytes (the local provider fetches no URL and stores no file)"


def inline_image(encoded: str, media_type: str, limits: ImageLimits, images_in_request: int) -> ImagePart:
    """The image a part carries as base64 under `media_type`, checked as its provider checks it
    (rule 1); ImageError saying what is wrong and the fix."""
    if media_type not in limits.media_types:
        accepted = ", ".join(sorted(limits.media_types))
        raise refuse(f"{limits.provider} does not accept {media_type!r} images", f"send one of {accepted}")
    if media_type != PNG_MEDIA_TYPE:
        raise refuse(f"the local provider's model reads PNG images only, not {media_type}", "send the frame as PNG")
    image = ImagePart(decode_base64(encoded))
    limits.check(image, images_in_request)
    return image


def url_image(url: str, limits: ImageLimits, images_in_request: int) -> ImagePart:
    """The image an OpenAI-style part names by URL: a base64 data URL only here (rule 1)."""
    if not url.startswith("data:"):
        raise refuse("the local provider fetches no image URL", INLINE_FIX)
    header, comma, encoded = url[len("data:") :].partition(",")
    media_type, _, encoding = header.partition(";")
    if not comma or encoding != "base64":
        raise refuse(f"the data URL does not read data:<media type>;base64,<data> ({header[:40]!r})", INLINE_FIX)
    return inline_image(encoded, media_type, limits, images_in_request)


def seen_text(parts: Sequence[str | ImagePart], joiner: str = "") -> str:
    """The text the model reads of a message's parts, in order: its texts, each legend line followed
    by the rows of the image it reads (rule 2). Without images: the texts joined by `joiner` (rule 3);
    with them, each image also ends the line before it."""
    if all(isinstance(part, str) for part in parts):
        return joiner.join(str(part) for part in parts)
    texts = [part.split("\n") for part in parts if isinstance(part, str)]
    legends: deque[tuple[int, int, ImageLegend]] = deque()  # (text, line) of each legend not yet read
    shown: dict[tuple[int, int], list[str]] = {}  # the rows each legend line read
    read = 0
    for part in parts:
        if isinstance(part, str):
            lines = texts[read]
            legends.extend((read, at, legend) for at, line in enumerate(lines) if (legend := ImageLegend.parse(line)))
            read += 1
        elif legends:
            text, at, legend = legends.popleft()
            try:
                shown[(text, at)] = legend.read(part)
            except ImageError:
                pass  # rule 2: not the grid its legend states
    return "\n".join(
        line
        for text, lines in enumerate(texts)
        for at, own in enumerate(lines)
        for line in (own, *shown.get((text, at), ()))
    )
