"""JSON as UTF-8 bytes, in one fast pass, for what turnstate writes every turn: request bodies and
artifacts.

orjson writes the same text as `json.dumps(..., ensure_ascii=False)` with the compact separators (or
`indent=2`), many times faster and without the standard encoder's list of small strings as long as
the document. It refuses integers past 64 bits, which a profile or a provider's reply may hold; those
documents go to the standard encoder, with the same separators, so the text is the same either way.
"""

from __future__ import annotations

import json
from typing import Any

import orjson


def json_bytes(value: Any, *, indent: bool = False) -> bytes:
    """`value` as JSON: on one line, or indented by two spaces. Raises for what JSON cannot hold, as
    json.dumps does; never writes NaN or Infinity (orjson writes null; the fallback refuses them)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS | (orjson.OPT_INDENT_2 if indent else 0))
    except orjson.JSONEncodeError:
        separators = (",", ": ") if indent else (",", ":")
        text = json.dumps(
            value, indent=2 if indent else None, separators=separators, ensure_ascii=False, allow_nan=False
        )
        return text.encode()
