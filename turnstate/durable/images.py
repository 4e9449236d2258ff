"""The images a run's inputs showed, each kept once, in the run folder's input_images/ (durable/layout.py).

Rules:
1. An image is a file named by the sha256 of its PNG bytes (layout.image_name), written once (a
   temporary file, fsynced, renamed: writer.write_once), however many turns send it; a file already
   there is never rewritten, since it already holds those bytes.
2. Every other record names an image by that digest and never holds its bytes: a user_input or
   tool_result event lists the digests of the images it showed, and a step record's readable
   messages show each image as `[image sha256:<digest>]` (adapters/tokens.image_label).
3. Images are not secret (they are what the environment drew) and pass no redaction; the checkpoint
   store keeps each image a continuation replays once too, by digest (checkpoints rule 12).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from turnstate.adapters.images import ImagePart
from turnstate.durable.layout import IMAGES, image_name
from turnstate.durable.writer import write_once


class ImageFiles:
    """A run folder's input_images/: `keep` writes each image the first time it is shown (rule 1) and names
    them all by digest (rule 2). It remembers what it has written, so a frame sent again costs a set
    lookup."""

    def __init__(self, run_dir: Path) -> None:
        self.folder = Path(run_dir) / IMAGES
        self._kept: set[str] = set()

    def keep(self, images: Sequence[ImagePart]) -> tuple[str, ...]:
        """The images' digests, in order, each image's file written first if it is not yet."""
        for image in images:
            if image.digest not in self._kept:
                write_once(self.folder / image_name(image.digest), image.data)
                self._kept.add(image.digest)
        return tuple(image.digest for image in images)

    def path(self, digest: str) -> Path:
        return self.folder / image_name(digest)

    def read(self, digest: str) -> ImagePart:
        """The image kept under `digest`, for a rebuild from the projection (rule 2); MissingImage
        naming the file when it is gone, unreadable, or not the PNG its name says."""
        path = self.path(digest)
        try:
            image = ImagePart(path.read_bytes())
        except (OSError, ValueError) as error:
            raise MissingImage(f"{path}: {error}") from None
        if image.digest != digest:
            raise MissingImage(f"{path}: its bytes are not the image its name says (sha256 {image.digest})")
        self._kept.add(digest)
        return image


class MissingImage(Exception):
    """An image the records name cannot be read back from input_images/."""
