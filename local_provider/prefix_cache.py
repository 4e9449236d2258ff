"""Prompt-cache accounting for the embedded local provider, by longest message prefix.

Real providers bill a resent prompt prefix as cached tokens, and a harness's context strategy is
judged partly by how much of each prompt it keeps stable. The local provider finds the matched prefix
with one simple, deterministic rule:

    matched prefix = the longest run of leading messages (system included) that is identical to the
    leading messages of an earlier request for the same model.

How much of that prefix a reply reports as cached is each provider's documented rule (a minimum
prompt length, a granularity), so each wire applies its own `CacheRule` to the matched tokens: the
cached figures then mean what they would mean on the real service.

The rule is message-granular: a message matches only if it is identical in every field (compared as
canonical JSON), so an edited message ends the cached prefix even if most of its text is unchanged.
Every served request records all of its prefixes, as a chain of hashes (prefix i's hash covers the
hash of prefix i-1 and message i), so a lookup and a record cost O(messages) each.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class CacheRule:
    """A provider's documented caching granularity: nothing below `min_tokens`, else whole `increment`s."""

    min_tokens: int
    increment: int

    def reported(self, matched_tokens: int) -> int:
        """The cached tokens a reply reports for a prefix of `matched_tokens` already seen."""
        cached = matched_tokens - matched_tokens % self.increment
        return cached if cached >= self.min_tokens else 0


class PrefixCache:
    """The prefixes of every recorded request, per model; safe to share between server threads."""

    def __init__(self) -> None:
        self._seen: set[tuple[str, bytes]] = set()
        self._lock = threading.Lock()

    def match_and_record(self, model: str, messages: Sequence[Mapping[str, object]]) -> int:
        """How many leading `messages` an earlier request for `model` also began with; then record these."""
        keys = [(model, digest) for digest in _prefix_digests(messages)]
        with self._lock:
            matched = 0
            for key in keys:
                if key not in self._seen:
                    break
                matched += 1
            self._seen.update(keys)
        return matched


def _prefix_digests(messages: Sequence[Mapping[str, object]]) -> Iterator[bytes]:
    """One digest per prefix messages[:1], messages[:2], ...; each covers the whole prefix."""
    digest = b""
    for message in messages:
        canonical = json.dumps(message, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        digest = hashlib.sha256(digest + canonical.encode("utf-8")).digest()
        yield digest
