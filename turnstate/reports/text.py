"""What every report shows of a run's records: read as far as they can be (a missing level or file
is None, not a failure), passed through the run's redactor again, and, for a terminal (`turnstate
show` and `turnstate events`), written as lines: a mapping as `key value` pairs, a text with its line
breaks kept and indented, and nothing that would move the cursor or recolour the terminal."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from turnstate.durable.redaction import Redactor

RUN_FOLDER_FIX = "fix: pass a run folder that `turnstate run` wrote"  # a view given a folder that is not a run's


def run_redactor(meta: Any) -> Redactor:
    """What a page or a command shows of a run passes a redactor, as everything a run prints does: the
    records were written redacted, but a folder may come from elsewhere. It knows the run's key if
    this shell holds it."""
    key_env = nested(meta, "settings", "client", "api_key_env")
    return Redactor(secrets=[os.environ.get(key_env, "")] if isinstance(key_env, str) else ())


def nested(data: Any, *keys: str) -> Any:
    """data[key][key]..., or None where a level is missing or not a mapping."""
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    return data


def optional_json(path: Path) -> Any:
    """The JSON in `path`, or None if it is missing or not JSON: what is shown around a record is read
    as far as it can be, and a record that cannot be read is left out rather than failing the view."""
    try:
        return json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None


def indented(text: Any, indent: str = "    ") -> list[str]:
    """A message's content as its lines, indented: a text keeps its line breaks; anything else is JSON."""
    text = text if isinstance(text, str) else inline(text)
    return [indent + line for line in text.splitlines()] or [indent + "(empty)"]


def first_line(message: Any) -> str:
    """A message as its role and the start of its first line."""
    message = message if isinstance(message, dict) else {}
    content = message.get("content")
    lines = (content if isinstance(content, str) else inline(content)).splitlines() or ["(empty)"]
    first = lines[0] if len(lines[0]) <= 100 else lines[0][:99] + "…"
    return f"{message.get('role', '?')}: {first}{' …' if len(lines) > 1 else ''}"


def pairs(mapping: Any) -> str:
    """A record's mapping as `key value, key value`; anything else as JSON."""
    if not isinstance(mapping, Mapping):
        return inline(mapping)
    return ", ".join(f"{key} {inline(value)}" for key, value in mapping.items())


def inline(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def tokens(usage: Any, cost: Any = None) -> str:
    """A record's usage as `tokens input 12, cached_input 0, ...`, with its configured-price cost."""
    counts = {key.removesuffix("_tokens"): value for key, value in usage.items()} if isinstance(usage, dict) else usage
    money = f", cost estimate ${cost:.4f}" if isinstance(cost, (int, float)) and not isinstance(cost, bool) else ""
    return f"tokens {pairs(counts)}{money}"


# Control characters other than a line break or tab, and the bidirectional overrides: a model's text
# holding them would move the cursor, recolour or reorder the terminal, so each is shown escaped.
_UNPRINTABLE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    return _UNPRINTABLE.sub(lambda match: f"\\u{ord(match[0]):04x}", text)
