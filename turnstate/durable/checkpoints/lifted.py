"""Each image once in a store (rule 12): a continuation record holds a reference where its state held a
PNG's base64, and the store keeps the PNG's bytes once, keyed by their SHA-256.

A provider's shape of an image is a string: the base64 itself (Messages' `source.data`, Interactions'
`data`) or a data URL of it (Responses' `image_url`, Chat Completions' `image_url.url`). A string that
is exactly the canonical base64 of a PNG (or the PNG data URL of it) is lifted to MARK, its form
(`png` or `url`) and the digest; any other string that starts with MARK gets one more MARK in front,
so a record is read back exactly whatever strings a provider sent. Only values are lifted, never keys.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Callable, MutableMapping
from typing import Any, Final

MARK: Final = "\ue000"  # a private-use character: a lifted image's reference starts with it
_PNG_BASE64: Final = "iVBORw0KGgo"  # the base64 of the PNG signature
_DATA_URL: Final = "data:image/png;base64,"
_FORMS: Final = {"png": "", "url": _DATA_URL}
_SHORTEST: Final = 64  # characters: a string shorter than a reference is not worth lifting


def lifted(value: Any, images: MutableMapping[str, bytes]) -> Any:
    """`value` (decoded JSON) with each image string lifted, the PNGs added to `images` by digest. The
    containers holding nothing lifted are `value`'s own (nothing is copied that need not be)."""
    if isinstance(value, str):
        return _lifted_string(value, images)
    if isinstance(value, list):
        items = [lifted(item, images) for item in value]
        return value if all(new is old for new, old in zip(items, value, strict=True)) else items
    if isinstance(value, dict):
        entries = {key: lifted(item, images) for key, item in value.items()}
        return value if all(entries[key] is item for key, item in value.items()) else entries
    return value


def restored(value: Any, image_of: Callable[[str], bytes]) -> Any:
    """The inverse of `lifted`, in place: each reference replaced by its image's string, read through
    `image_of(digest)` (which raises for an image the store lacks)."""
    if isinstance(value, str):
        return _restored_string(value, image_of) if value.startswith(MARK) else value
    if isinstance(value, list):
        for index, item in enumerate(value):
            value[index] = restored(item, image_of)
    elif isinstance(value, dict):
        for key, item in value.items():
            value[key] = restored(item, image_of)
    return value


def _lifted_string(text: str, images: MutableMapping[str, bytes]) -> str:
    if text.startswith(MARK):
        return MARK + text
    if len(text) < _SHORTEST:
        return text
    form = "url" if text.startswith(_DATA_URL + _PNG_BASE64) else "png" if text.startswith(_PNG_BASE64) else None
    if form is None:
        return text
    encoded = text[len(_FORMS[form]) :]
    try:
        png = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        return text
    if base64.b64encode(png).decode("ascii") != encoded:  # not canonical: it would not come back the same
        return text
    digest = hashlib.sha256(png).hexdigest()
    images[digest] = png
    return f"{MARK}{form}:{digest}"


def _restored_string(text: str, image_of: Callable[[str], bytes]) -> str:
    reference = text[len(MARK) :]
    if reference.startswith(MARK):
        return reference
    form, _, digest = reference.partition(":")
    if form not in _FORMS or not digest:
        raise ValueError(f"a reference to an image is malformed: {reference[:80]!r}")
    return _FORMS[form] + base64.b64encode(image_of(digest)).decode("ascii")
