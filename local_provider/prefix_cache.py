"""Prompt-cache accounting for the embedded local provider, by longest message prefix.

Real providers bill a resent prompt prefix as cached tokens, and a harness's context strategy is
judged partly by how much of each prompt it keeps stable. The local provider finds the matched prefix
with one simple, deterministic rule:

    matched prefix = the longest run of leading messages (system included) that is identical to the
    leading messages of a recent request (one of the latest RECENT_REQUESTS) for the same model.

How much of that prefix a reply reports as cached is each provider's documented rule (a minimum
prompt length, a granularity), so each wire applies its own `CacheRule` to the matched tokens: the
cached figures then mean what they would mean on the real service.

The rule is message-granular: a message matches only if it is identical in every field, so an edited
message ends the cached prefix even if most of its text is unchanged.

Like a real provider's cache, it holds recent prompts only: the latest RECENT_REQUESTS requests per
model, as their message lists (so memory is bounded however long a run is). A lookup compares the new
request against each of them with list equality, which runs in C; a candidate that is wholly a
prefix of the new request (the usual case, a conversation that grew) costs one pass, and any other
a binary search over prefix lengths. So a call costs a few passes over its own messages, never a
pass over the history of every earlier request.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Hashable, Mapping, Sequence
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


RECENT_REQUESTS = 16
"""How many of the latest requests per model the cache compares a new one against."""


@dataclass(frozen=True)
class SharedPrefix:
    """What a new request shares with the recent request it matches best: its leading `messages`, and
    the note the wire recorded with that request (what it read of each message, so the shared ones
    need not be read again); None when nothing is shared."""

    messages: int
    note: object = None
    source: tuple[Mapping[str, object], ...] = ()  # the recent request's messages


class PrefixCache:
    """The latest requests' messages, each with the wire's note, per key (a model, or a wire and a
    model); safe to share between server threads."""

    def __init__(self, recent: int = RECENT_REQUESTS) -> None:
        self._recent: dict[Hashable, deque[tuple[tuple[Mapping[str, object], ...], object]]] = {}
        self._size = recent
        self._lock = threading.Lock()

    def match(self, key: Hashable, messages: Sequence[object]) -> SharedPrefix:
        """The longest run of leading `messages` that a recent request under `key` also began with."""
        sent = tuple(messages)  # compared with the recorded tuples: a list never equals a tuple
        with self._lock:
            earlier = list(self._recent.get(key, ()))
        best = SharedPrefix(0)
        for candidate, note in reversed(earlier):  # the newest first: usually the longest match
            if min(len(candidate), len(sent)) > best.messages:
                shared = common_prefix(candidate, sent)
                if shared > best.messages:
                    best = SharedPrefix(shared, note, candidate)
        return best

    def record(
        self,
        key: Hashable,
        messages: Sequence[Mapping[str, object]],
        note: object = None,
        shared: SharedPrefix | None = None,
    ) -> None:
        """Remember a served request's messages (and the wire's note of them) under `key`. Its prefix
        `shared` with a recent request is kept as that request's objects, so a growing conversation
        is held once, not once per recent request."""
        kept = (
            tuple(messages) if shared is None else shared.source[: shared.messages] + tuple(messages[shared.messages :])
        )
        with self._lock:
            self._recent.setdefault(key, deque(maxlen=self._size)).append((kept, note))

    def match_and_record(self, key: Hashable, messages: Sequence[Mapping[str, object]]) -> int:
        """How many leading `messages` a recent request under `key` also began with; then record these."""
        shared = self.match(key, messages)
        self.record(key, messages, shared=shared)
        return shared.messages


def common_prefix(first: Sequence[object], second: Sequence[object]) -> int:
    """The length of the longest common prefix of two sequences, by C-level slice comparisons."""
    longest = min(len(first), len(second))
    if first[:longest] == second[:longest]:
        return longest
    low, high = 0, longest  # first[:low] == second[:low]; first[:high] != second[:high]
    while high - low > 1:
        middle = (low + high) // 2
        if first[:middle] == second[:middle]:
            low = middle
        else:
            high = middle
    return low
