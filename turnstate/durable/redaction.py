"""Redaction: what a run writes or shows holds no key and no opaque provider state.

Artifacts are for people and downstream tools, so they hold readable projections only. One
`Redactor` per run enforces three rules, here rather than trusted to each caller, and the same
redactor cleans whatever the run shows on the terminal (its failure, its progress, its errors):
1. Opaque provider state (encrypted content, signatures, redacted thinking) is dropped by key.
2. Secrets (API keys) are redacted structurally and, where long enough to be one, by value: the
   value of a field or header that carries a key (KEY_FIELDS, and `Authorization: Bearer ...` or
   `x-api-key: ...` written in a text) whatever it is, and a key of MIN_SECRET_CHARS or more
   wherever a string holds it. A shorter key is a keyless server's placeholder (`x`, `EMPTY`,
   `ollama`): replaced by value, it would rewrite every word that holds its letters, records a
   resume reads back included (`"action_mode": "te[redacted]t"` for the key `x`).
3. An opaque value the run has received (the runner hands each reply's native items to `learn`) is
   replaced wherever a string repeats it: a provider can echo a blob into a reply's text or an
   error's code. Every encrypted_content, signature and redacted_thinking data in the recorded
   traffic (../shared/recorded) and from the local provider is base64 of 224 characters or more, so
   a value is known by its longest run of base64 characters, if that run has OPAQUE_MIN_CHARS; the
   run is kept as its length and hash (not its text: a long run receives thousands), indexed by its
   last GRAM characters (their first ones are a format's constant header, as OpenAI's "gAAAAAB").
All happen on the data before it is serialized, so whatever a secret looks like, every artifact
stays valid JSON; every container the writer may be handed (mappings, lists, tuples, sets,
dataclasses) is walked, and written as JSON's object or array.
"""

from __future__ import annotations

import json
import math
import re
import string
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import fields, is_dataclass
from typing import Any

from turnstate.adapters.json_bytes import json_bytes

OPAQUE_KEYS = frozenset({"encrypted_content", "signature", "thought_signature"})


OPAQUE_DATA_TYPE = "redacted_thinking"  # a block of this type holds opaque state under "data"


_OPAQUE_DATA_KEYS = OPAQUE_KEYS | {"data"}


REDACTED = "[redacted]"


MIN_SECRET_CHARS = 12
"""The shortest key redacted by value (rule 2): real providers' keys are 39 characters and more."""


KEY_FIELDS = frozenset(
    {"api_key", "api-key", "apikey", "authorization", "proxy-authorization", "x-api-key", "x-goog-api-key"}
)
"""Fields and headers (compared in lower case) whose value is a key, whatever its length (rule 2)."""


_KEY_IN_TEXT_PATTERN = (
    r"((?:proxy-)?authorization:\s*(?:bearer|basic)\s+|(?:x-goog-|x-)?api[-_]?key[\"']?\s*[:=]\s*[\"']?)[^\s\"',;]+"
)


_KEY_IN_TEXT = re.compile(_KEY_IN_TEXT_PATTERN, re.IGNORECASE)


# What a text holds, once lower-cased, if a key field's name or a key written in it is there: every
# name in KEY_FIELDS and every match of _KEY_IN_TEXT holds one of them. A substring search of the
# lowered text is C's speed; the case-blind pattern itself took 88 us on a 1.4 KB step record.
_KEY_HINTS = ("authorization", "api-key", "api_key", "apikey")


_KEY_HINTS_BYTES = tuple(hint.encode() for hint in _KEY_HINTS)


OPAQUE_MIN_CHARS = 64
"""The shortest run of base64 characters by which an opaque value is known (rule 3): longer than the
ids a record holds (37 characters at most on the local provider), far shorter than any blob."""


GRAM = 16  # the characters of a known run's tail that index it


_BASE64 = string.ascii_letters + string.digits + "+/=_-"  # both alphabets, and padding


_RUNS = re.compile(f"[{re.escape(_BASE64)}]+")


_LONG_RUNS = re.compile(f"(?<![{re.escape(_BASE64)}])[{re.escape(_BASE64)}]{{{OPAQUE_MIN_CHARS},}}")


# JSON writes base64 characters as they are: a record's text holds a long run wherever a string does.
_RUN_BYTES = bytes(ord("x") if chr(byte) in _BASE64 else ord(" ") for byte in range(256))


_LONG_RUN_BYTES = b"x" * OPAQUE_MIN_CHARS


def _is_key_field(key: Any, value: Any) -> bool:
    """Whether `key: value` is a field or header that carries a key (rule 2)."""
    return isinstance(key, str) and isinstance(value, str) and bool(value) and key.lower() in KEY_FIELDS


def _hidden_keys(mapping: Mapping[Any, Any]) -> frozenset[str]:
    """The keys of `mapping` whose values are opaque provider state (rule 1)."""
    return _OPAQUE_DATA_KEYS if mapping.get("type") == OPAQUE_DATA_TYPE else OPAQUE_KEYS


def _opaque_values(value: Any, opaque: bool = False) -> Iterator[str]:
    """Every string held under an opaque key of `value` (native items: mappings, lists, tuples)."""
    if isinstance(value, str):
        if opaque:
            yield value
    elif isinstance(value, Mapping):
        hidden = _hidden_keys(value)
        for key, item in value.items():
            yield from _opaque_values(item, opaque or key in hidden)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _opaque_values(item, opaque)


class Redactor:
    """One run's redaction (the module's rules), for its artifacts and for all it shows: `scrub` for
    data, `text` for a string, `render` for a record's JSON text. Knows the run's secrets from the
    start and the opaque values it receives from `learn`."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        # Longest first, so a secret that contains another is replaced whole (rule 2: long ones only).
        long_enough = {secret for secret in secrets if len(secret) >= MIN_SECRET_CHARS}
        self._secrets = tuple(sorted(long_enough, key=len, reverse=True))
        self._markers = _scrub_markers(self._secrets)
        self._opaque: dict[str, tuple[tuple[int, int], ...]] = {}  # a run's tail -> (length, hash) of each

    def learn(self, items: Iterable[Any]) -> None:
        """Know every opaque value in `items` (a reply's native items) from now on (rule 3)."""
        for value in _opaque_values(tuple(items)):
            run = max(_RUNS.findall(value), key=len, default="")
            if len(run) >= OPAQUE_MIN_CHARS:
                known = self._opaque.get(run[-GRAM:], ())
                if (len(run), hash(run)) not in known:
                    self._opaque[run[-GRAM:]] = (*known, (len(run), hash(run)))

    def text(self, value: str) -> str:
        """`value` with each known opaque value, then each secret, replaced by REDACTED."""
        if self._opaque and len(value) >= OPAQUE_MIN_CHARS and _has_long_run(value.encode("utf-8", "surrogatepass")):
            value = self._without_opaque(value)
        for secret in self._secrets:
            value = value.replace(secret, REDACTED)
        lowered = value.lower()
        if not any(hint in lowered for hint in _KEY_HINTS):
            return value
        return _KEY_IN_TEXT.sub(lambda match: match.group(1) + REDACTED, value)

    def scrub(self, value: Any) -> Any:
        """A copy of `value` as JSON can hold it (any mapping an object; any list, tuple, set or
        dataclass an array or object), without opaque provider state, with every string passed
        through `text`, and non-finite numbers as null."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            hidden = _hidden_keys(value)
            return {
                _json_key(key): REDACTED if _is_key_field(key, item) else self.scrub(item)
                for key, item in value.items()
                if key not in hidden
            }
        if isinstance(value, (list, tuple)):
            return [self.scrub(item) for item in value]
        if isinstance(value, (set, frozenset)):
            return sorted((self.scrub(item) for item in value), key=repr)  # in an order that does not vary
        if is_dataclass(value) and not isinstance(value, type):
            return self.scrub({field.name: getattr(value, field.name) for field in fields(value)})
        if isinstance(value, float) and not math.isfinite(value):
            return None
        return value

    def render(self, data: Any, indent: bool = False) -> bytes:
        """`data` as one JSON document and its newline, scrubbed.

        Most records hold nothing to scrub, and their text says so: without any of the markers (an
        opaque key's name, a secret as JSON writes it, and, once the run knows an opaque value, a
        run of OPAQUE_MIN_CHARS base64 characters) they are written as they are, and only a record
        whose text holds a marker (or that JSON cannot hold as it is) is scrubbed first."""
        try:
            text = json_bytes(data, indent=indent)
            if (
                not any(marker in text for marker in self._markers)
                and not (self._opaque and _has_long_run(text))
                and not any(hint in text.lower() for hint in _KEY_HINTS_BYTES)
            ):
                return text + b"\n"
        except (ValueError, TypeError):  # non-finite numbers, sets, mappings that are not dicts
            pass
        return json_bytes(self.scrub(data), indent=indent) + b"\n"

    def _without_opaque(self, value: str) -> str:
        """`value` with every known opaque run in it replaced: each long run of base64 characters
        is searched for a known run's tail, character by character, and a tail found is checked
        by the hash of the whole run it ends."""
        spans = []
        for run in _LONG_RUNS.finditer(value):
            start = run.start()
            for end in range(start + GRAM, run.end() + 1):
                for length, digest in self._opaque.get(value[end - GRAM : end], ()):
                    if end - length >= start and hash(value[end - length : end]) == digest:
                        spans.append((end - length, end))
        if not spans:
            return value
        parts, at = [], 0
        for begin, end in sorted(spans):
            if begin >= at:
                parts += [value[at:begin], REDACTED]
            at = max(at, end)  # a span that overlaps the one before extends it
        return "".join(parts) + value[at:]


def _has_long_run(text: bytes) -> bool:
    """Whether `text` (UTF-8, or JSON) holds a run of OPAQUE_MIN_CHARS base64 characters: two passes
    in C, where looking for the runs themselves is a regular expression's pass in Python's engine."""
    return _LONG_RUN_BYTES in text.translate(_RUN_BYTES)


def _json_key(key: Any) -> Any:
    """A mapping's key as a JSON object can hold it (the encoders take text, numbers, booleans and null)."""
    return key if key is None or isinstance(key, (str, int, float)) else str(key)


def _scrub_markers(secrets: Sequence[str]) -> tuple[bytes, ...]:
    """What a record's JSON text holds if `scrub` would change the record: an opaque key's name (or
    the type whose "data" is opaque), and each secret as a JSON string holds it. JSON escapes a
    string character by character, so a string that holds a secret holds its escaped form, as both
    encoders `json_bytes` uses escape it."""
    names = [*OPAQUE_KEYS, OPAQUE_DATA_TYPE]
    escaped = {json.dumps(secret, ensure_ascii=False)[1:-1].encode() for secret in secrets}
    escaped |= {json_bytes(secret)[1:-1] for secret in secrets}
    return (*(f'"{name}"'.encode() for name in names), *escaped)
