"""Stale tool-result offload: a projection of the items a request sends, never of the state it keeps.

Rules:
1. A tool result is stale once at least `keep_recent_per_tool` newer results of the same tool follow
   it in the items. Staleness only grows as results arrive, so a result replaced in one request is
   replaced in every later one that still holds it: nothing about it needs remembering.
2. A stale result is replaced by its pointer, which names the tool, the result's ref and its length
   in characters, and says how to read it back. The pointer is a pure function of those three, and
   the ref a digest of the text, so a replaced result reads the same, byte for byte, in every later
   request: the provider's prompt cache breaks once where a result turns into its pointer, no more.
3. Kept verbatim: an error result (short, and what the model must correct), a `read_tool_result`
   page (the model asked for it; replacing it would send it back to read it again), a result the
   pointer would shorten by fewer than `min_savings_chars` characters, a result whose call named no
   tool the items show, and a result no reply has read yet (from `unread_from` on).
4. Only the result's content changes, through the transcript; opaque items (reasoning, signatures,
   compaction) are never read or touched, and every item not replaced is the very object it was.
5. The full text of each replaced result is in the projection's `offloaded`, for the caller to put
   in its write-once store before the request is sent; `is_lossy` tells a projected request apart.

Pure: no I/O, no clock, no state; the same items give the same projection every time.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from turnstate.adapters.contract import Item, ToolResultAt, Transcript

READ_TOOL_RESULT = "read_tool_result"
"""The tool that pages an offloaded result back (turnstate/durable/tool_results.py answers it)."""

REF_PREFIX = "tr-"
REF_DIGITS = 16
REF_PATTERN = rf"^{REF_PREFIX}[0-9a-f]{{{REF_DIGITS}}}$"
"""What a ref looks like, and all it may look like: a store names a file by it."""

DEFAULT_KEEP_RECENT_PER_TOOL = 3
DEFAULT_MIN_SAVINGS_CHARS = 2000


@dataclass(frozen=True)
class Offload:
    """The offload's two knobs, checked when built: a result is kept while fewer than
    `keep_recent_per_tool` (at least 1, so a tool's latest result always stays) newer results of its
    tool follow it, and a replacement must save at least `min_savings_chars` characters (0 or more)."""

    keep_recent_per_tool: int = DEFAULT_KEEP_RECENT_PER_TOOL
    min_savings_chars: int = DEFAULT_MIN_SAVINGS_CHARS

    def __post_init__(self) -> None:
        for name, least in (("keep_recent_per_tool", 1), ("min_savings_chars", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError(f"{name} must be a whole number of at least {least}, not {value!r}")


@lru_cache(maxsize=4096)
def ref_of(text: str) -> str:
    """The content-digested ref of a result's text: "tr-" and the first 16 hex digits of its UTF-8
    SHA-256. Memoized: every request projects the same stale texts again, and the history holds the
    same string objects, whose lookup is then an identity check instead of a digest."""
    return REF_PREFIX + hashlib.sha256(text.encode("utf-8")).hexdigest()[:REF_DIGITS]


def pointer(name: str, ref: str, chars: int) -> str:
    """What the request carries in place of an offloaded result: a pure function of its arguments."""
    return (
        f"[tool result offloaded: {name}, ref {ref}, {chars} chars. "
        f'Call {READ_TOOL_RESULT} with {{"ref": "{ref}"}} to read it.]'
    )


_SOME_REF = REF_PREFIX + "0" * REF_DIGITS  # every ref has its length


@dataclass(frozen=True)
class Projection:
    """The items a request sends, and the (ref, full text) of each result they no longer hold whole."""

    items: tuple[Item, ...]
    offloaded: tuple[tuple[str, str], ...] = ()


def is_lossy(projection: Projection) -> bool:
    """Whether the projection replaced anything: a lossy request is not the accepted history verbatim."""
    return bool(projection.offloaded)


def project(
    items: Sequence[Item], transcript: Transcript, offload: Offload | None, unread_from: int | None = None
) -> Projection:
    """The items with every stale result replaced by its pointer (the rules above); `offload` None is
    the offload off, and the items go as they are. Results in items at or after `unread_from` are ones
    no reply has read yet: they are never replaced, however many of their tool's follow them."""
    if offload is None:
        return Projection(tuple(items))
    read_before = len(items) if unread_from is None else unread_from
    newer: dict[str, int] = {}
    stale = []
    for result in reversed(transcript.tool_results(items)):
        seen = newer.get(result.name, 0)
        newer[result.name] = seen + 1
        if seen >= offload.keep_recent_per_tool and result.index < read_before and _replaceable(result, offload):
            stale.append(result)
    if not stale:
        return Projection(tuple(items))
    projected = list(items)
    offloaded: dict[str, str] = {}
    for result in reversed(stale):  # in order, so an item holding several is rewritten once per result
        ref = ref_of(result.text)
        offloaded[ref] = result.text
        replacement = pointer(result.name, ref, len(result.text))
        projected[result.index] = transcript.with_tool_result_text(projected[result.index], result.call_id, replacement)
    return Projection(tuple(projected), tuple(offloaded.items()))


def _replaceable(result: ToolResultAt, offload: Offload) -> bool:
    """Rule 3, short of the unread part; the saving is known without the digest, whose length is fixed."""
    if result.is_error or not result.name or result.name == READ_TOOL_RESULT:
        return False
    chars = len(result.text)
    if chars < offload.min_savings_chars:  # most results: no pointer to format
        return False
    return chars - len(pointer(result.name, _SOME_REF, chars)) >= offload.min_savings_chars
