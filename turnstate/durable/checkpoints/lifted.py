"""Each image once in a store (rule 12): a continuation record holds a reference where its state held a
PNG's base64, and the store keeps the PNG's bytes once, numbered in the order it first saw them.

A provider's shape of an image is a string: the base64 itself (Messages' `source.data`, Interactions'
`data`) or a data URL of it (Responses' `image_url`, Chat Completions' `image_url.url`). A string that
is exactly the canonical base64 of a PNG (or the PNG data URL of it) is lifted to MARK, its form
(`png` or `url`) and the image's number in the store; any other string that starts with MARK gets one
more MARK in front, so a record is read back exactly whatever strings a provider sent. Only values are
lifted, never keys. A number, not the SHA-256: a record names an image in a few bytes, where a digest
(64 hex digits, which do not compress) cost a 300-turn image run's continuation 26 KB against 3 KB.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Callable
from typing import Any, Final

MARK: Final = "\ue000"  # a private-use character: a lifted image's reference starts with it
_PNG_BASE64: Final = "iVBORw0KGgo"  # the base64 of the PNG signature
_DATA_URL: Final = "data:image/png;base64,"
_FORMS: Final = {"png": "", "url": _DATA_URL}
_SHORTEST: Final = 64  # characters: a string shorter than a reference is not worth lifting


Numbering = Callable[[str, bytes], int]  # (the PNG's SHA-256, its bytes) -> its number in the store


def lifted(value: Any, number_of: Numbering) -> Any:
    """`value` (decoded JSON) with each image string lifted to a reference to `number_of(digest, png)`.
    The containers holding nothing lifted are `value`'s own (nothing is copied that need not be)."""
    if isinstance(value, str):
        return _lifted_string(value, number_of)
    if isinstance(value, list):
        items = [lifted(item, number_of) for item in value]
        return value if all(new is old for new, old in zip(items, value, strict=True)) else items
    if isinstance(value, dict):
        entries = {key: lifted(item, number_of) for key, item in value.items()}
        return value if all(entries[key] is item for key, item in value.items()) else entries
    return value


def restored(value: Any, image_of: Callable[[int], bytes]) -> Any:
    """The inverse of `lifted`, in place: each reference replaced by its image's string, read through
    `image_of(number)` (which raises for an image the store lacks)."""
    if isinstance(value, str):
        return _restored_string(value, image_of) if value.startswith(MARK) else value
    if isinstance(value, list):
        for index, item in enumerate(value):
            value[index] = restored(item, image_of)
    elif isinstance(value, dict):
        for key, item in value.items():
            value[key] = restored(item, image_of)
    return value


def _lifted_string(text: str, number_of: Numbering) -> str:
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
    return f"{MARK}{form}:{number_of(hashlib.sha256(png).hexdigest(), png)}"


def _restored_string(text: str, image_of: Callable[[int], bytes]) -> str:
    reference = text[len(MARK) :]
    if reference.startswith(MARK):
        return reference
    form, _, number = reference.partition(":")
    if form not in _FORMS or not number.isdigit():
        raise ValueError(f"a reference to an image is malformed: {reference[:80]!r}")
    return _FORMS[form] + base64.b64encode(image_of(int(number))).decode("ascii")
