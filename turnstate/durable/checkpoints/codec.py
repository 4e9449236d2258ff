"""How a checkpoint's layers are encoded: the continuation as snapshots and deltas (rule 3), each record
as compact JSON deflated against the record before it in its layer (rule 11)."""

from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, is_dataclass
from pathlib import Path
from typing import Any, Final

import orjson
from pydantic import ValidationError

from turnstate.durable.checkpoints.lifted import restored
from turnstate.durable.checkpoints.protocol import CheckpointError, DamagedStore
from turnstate.strategies.state import RuntimeState, TurnSpan

_DEFLATE_LEVEL: Final = 6


_DICTIONARY_BYTES: Final = 32 * 1024  # DEFLATE's window: a dictionary's bytes before its last 32 KiB are never used


_ENVELOPE: Final = ("pending", "unanswered", "unread_turn", "completed_context_tokens")


_IDENTITY: Final = ("schema_version", "adapter_id", "strategy")  # a change of one is a new state: a snapshot


@dataclass
class _Deflated:
    """One layer's records as raw DEFLATE, each with the record before it as its dictionary (rule 11).
    `previous` is the plain bytes of the layer's last record: `packed` and `unpacked` do not move it,
    `advance` does, once the record is committed or read."""

    previous: bytes = b""

    def packed(self, plain: bytes, alone: bool = False) -> bytes:
        packer = zlib.compressobj(_DEFLATE_LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS, zdict=b"" if alone else self.previous)
        return packer.compress(plain) + packer.flush()

    def unpacked(self, blob: bytes, alone: bool = False) -> bytes:
        """The plain bytes; raises zlib.error for a record that does not inflate whole."""
        unpacker = zlib.decompressobj(-zlib.MAX_WBITS, zdict=b"" if alone else self.previous)
        plain = unpacker.decompress(blob) + unpacker.flush()
        if not unpacker.eof or unpacker.unused_data:
            raise zlib.error("the record is cut or has bytes past its end")
        return plain

    def advance(self, plain: bytes) -> None:
        self.previous = plain[-_DICTIONARY_BYTES:]


@dataclass
class _Chain:
    """The continuation rows since the last snapshot, by size (what rule 3's snapshot choice reads),
    and the last one's plain bytes (the next one's dictionary, rule 11)."""

    snapshot: int = 0  # bytes of the last snapshot
    grown: int = 0  # bytes of elements appended since
    replaced: int = 0  # bytes of values and fields written again whole since
    deflated: _Deflated = field(default_factory=_Deflated)

    def wants_snapshot(self, grown: int, replaced: int) -> bool:
        return self.replaced + replaced > self.snapshot + self.grown + grown

    def add(self, snapshot: bool, grown: int, body: bytes) -> None:
        size = len(body)
        if snapshot:
            self.snapshot, self.grown, self.replaced = size, 0, 0
        else:
            self.grown, self.replaced = self.grown + grown, self.replaced + size - grown
        self.deflated.advance(body)


_MISSING: Final = object()


def snapshot_of(state: RuntimeState) -> dict[str, Any]:
    """The whole state as one record: its fields, the turn spans as [start, end] pairs."""
    return {
        "schema_version": state.schema_version,
        "adapter_id": state.adapter_id,
        "strategy": state.strategy,
        "payload": state.payload,
        "turns": [(span.start, span.end) for span in state.turns],
        "pending": state.pending,
        "unanswered": state.unanswered,
        "unread_turn": state.unread_turn,
        "completed_context_tokens": state.completed_context_tokens,
    }


def continuation_delta(previous: RuntimeState, state: RuntimeState) -> dict[str, Any] | None:
    """What `state` adds to `previous`, or None when it does not extend it (a snapshot is due).

    The delta holds "append" (per payload list, the elements after the old list, which the new one
    keeps as its prefix), "set" (payload values that are not the same objects as before, whole),
    "drop" (payload keys gone), "order" (the payload's keys, when their order changed), "turns" (the
    spans appended) and the envelope fields that changed. A prefix is compared with ==, which is fast
    on shared objects: an old element replaced by an equal one of another JSON type (1 by 1.0) would
    go unseen, and no adapter does that."""
    if any(getattr(state, name) != getattr(previous, name) for name in _IDENTITY):
        return None
    turns = _appended(previous.turns, state.turns)
    if turns is None:
        return None
    delta: dict[str, Any] = {}
    appended: dict[str, Sequence[Any]] = {}
    changed: dict[str, Any] = {}
    before = previous.payload
    for key, value in state.payload.items():
        old = before.get(key, _MISSING)
        if value is old:
            continue
        if isinstance(value, list) and isinstance(old, list):
            extra = _appended(old, value)
            if extra is None:
                return None
            if extra:
                appended[key] = extra
        else:
            changed[key] = value
    if appended:
        delta["append"] = appended
    if changed:
        delta["set"] = changed
    dropped = [key for key in before if key not in state.payload]
    if dropped:
        delta["drop"] = dropped
    if list(state.payload) != list(before):
        delta["order"] = list(state.payload)
    if turns:
        delta["turns"] = [(span.start, span.end) for span in turns]
    for name in _ENVELOPE:
        if getattr(state, name) != getattr(previous, name):
            delta[name] = getattr(state, name)
    return delta


def apply_delta(state: dict[str, Any], delta: dict[str, Any]) -> dict[str, Any]:
    """`state` (a decoded record, changed in place) with `delta` applied: the inverse of continuation_delta."""
    payload = state["payload"]
    for key in delta.get("drop", ()):
        del payload[key]
    payload.update(delta.get("set", {}))
    for key, elements in delta.get("append", {}).items():
        payload[key].extend(elements)
    if "order" in delta:
        state["payload"] = {key: payload[key] for key in delta["order"]}
    state["turns"].extend(delta.get("turns", ()))
    for name in _ENVELOPE:
        if name in delta:
            state[name] = delta[name]
    return state


def _appended(old: Sequence[Any], new: Sequence[Any]) -> Sequence[Any] | None:
    """The elements `new` adds after `old`, or None when `new` does not keep `old` as its prefix."""
    if new is old:
        return new[:0]
    if len(new) < len(old) or new[: len(old)] != old:
        return None
    return new[len(old) :]


def _encode(value: Any) -> bytes:
    """Compact JSON. orjson refuses integers past 64 bits and lone surrogates, which a provider's reply
    may hold; those documents go to the standard encoder, ASCII-only, behind a leading space (still
    JSON), so that `_decode` reads them back with the decoder that keeps their integers exact."""
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError:
        text = json.dumps(value, ensure_ascii=True, allow_nan=False, separators=(",", ":"), default=_fields)
        return b" " + text.encode()


def _fields(value: Any) -> dict[str, Any]:
    """A dataclass record as the standard encoder needs it (orjson encodes one as it is, alike)."""
    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


def _decode(blob: bytes) -> Any:
    return json.loads(blob) if blob[:1] == b" " else orjson.loads(blob)


def _encoded_records(records: Sequence[object], what: str) -> bytes | None:
    """A commit's facts as one JSON array, None when there are none."""
    if not records:
        return None
    objects = [_json_object(record, f"{what} {index}") for index, record in enumerate(records)]
    try:
        return _encode(objects)
    except (TypeError, ValueError):
        for index, record in enumerate(objects):
            _encoded_object(record, f"{what} {index}")  # raises, naming the record
        raise


def _encoded_object(value: Any, what: str) -> bytes:
    try:
        return _encode(_json_object(value, what))
    except (TypeError, ValueError) as error:
        raise CheckpointError(f"{what} is not JSON: {error}") from None


def _json_object(value: Any, what: str) -> Any:
    """A record as the encoder takes it: a dict, a mapping copied to one, or a dataclass instance,
    which orjson encodes as the object of its fields without the copy `asdict` would make."""
    if isinstance(value, dict) or (is_dataclass(value) and not isinstance(value, type)):
        return value
    if isinstance(value, Mapping):
        return dict(value)
    raise CheckpointError(f"{what} must be a JSON object, not {type(value).__name__}")


def _record_place(sequence: int, snapshot: bool) -> bytes:
    """A continuation record's associated data, beside the store's id: its checkpoint and its kind."""
    return sequence.to_bytes(8, "big") + (b"snapshot" if snapshot else b"delta")


def rebuilt_state(
    path: str | Path,
    rows: Sequence[tuple[int, int, int, bytes, int]],
    unsealed: Callable[[bytes, int, bool], bytes],
    stored_image: Callable[[int], tuple[str, bytes] | None],
) -> tuple[RuntimeState, _Chain]:
    """The state the continuation `rows` (sequence, snapshot, grown bytes, record, lifted; from the
    last snapshot on) rebuild, and that chain's sizes (rule 3); `unsealed` opens a record (rule 6),
    `stored_image` reads (SHA-256, PNG) of the image a lifted record names by number (rule 12)."""
    if not rows or not rows[0][1]:
        raise DamagedStore(f"{path}: the continuation does not start at a snapshot: the store is corrupt")
    state: dict[str, Any] = {}
    chain = _Chain()
    images: dict[int, bytes] = {}

    def image_of(number: int) -> bytes:
        if number not in images:
            stored = stored_image(number)
            if stored is None:
                raise DamagedStore(f"{path}: image {number} is missing: the store is corrupt")
            digest, png = stored
            if hashlib.sha256(png).hexdigest() != digest:
                raise DamagedStore(f"{path}: image {number} ({digest}) is altered: the store is corrupt")
            images[number] = png
        return images[number]

    for sequence, snapshot, grown, blob, lifted in rows:
        packed = unsealed(blob, sequence, bool(snapshot))
        body = inflated(path, chain.deflated, packed, "continuation", alone=bool(snapshot))
        record = decoded(path, body, "continuation")
        try:
            if lifted:
                record = restored(record, image_of)
            state = record if snapshot else apply_delta(state, record)
        except (KeyError, TypeError, AttributeError, ValueError):
            raise DamagedStore(f"{path}: continuation record {sequence} does not apply: the store is corrupt") from None
        chain.add(bool(snapshot), grown, body)
    try:
        turns = [TurnSpan(start=first, end=end) for first, end in state["turns"]]
        return RuntimeState.model_validate({**state, "turns": turns}), chain
    except (ValidationError, KeyError, TypeError, ValueError) as error:
        raise DamagedStore(f"{path}: the continuation does not rebuild a valid state: {error}") from None


def inflated(path: str | Path, deflated: _Deflated, record: bytes, layer: str, alone: bool = False) -> bytes:
    """A record's plain bytes, inflated with its layer's dictionary (rule 11)."""
    try:
        return deflated.unpacked(record, alone)
    except zlib.error as error:
        raise DamagedStore(
            f"{path}: a record of the {layer} does not inflate ({error}): the store is corrupt"
        ) from None


def decoded(path: str | Path, blob: bytes, layer: str) -> Any:
    try:
        return _decode(blob)
    except (ValueError, TypeError):
        raise DamagedStore(f"{path}: a record of the {layer} is not JSON: the store is corrupt") from None
