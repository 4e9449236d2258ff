"""The continuation sealed at rest (rule 6): which key a run uses, how a store's cipher is made from it
and checked, and AES-256-GCM bound to each record's place."""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import orjson
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

from turnstate.adapters.private_files import private_problem
from turnstate.durable.checkpoints.codec import _record_place
from turnstate.durable.checkpoints.protocol import CheckpointError, DamagedStore
from turnstate.durable.state_home import state_home
from turnstate.durable.writer import write_first

KEY_VARIABLE: Final = "TURNSTATE_CHECKPOINT_KEY"


OPT_OUT: Final = "off"  # TURNSTATE_CHECKPOINT_KEY=off: the continuation is not kept


KEY_FILE: Final = "checkpoint.key"  # in the state folder: the default key, made on first use


MIN_KEY_CHARS: Final = 16


_SCRYPT: Final = {"n": 2**15, "r": 8, "p": 1}


_KEY_CHECK: Final = b"turnstate checkpoint key check"


_NONCE_BYTES: Final = 12


@dataclass
class _Cipher:
    """AES-256-GCM with this store's derived key; the associated data binds a record to its place."""

    store_id: bytes
    aead: AESGCM = field(repr=False)

    def seal(self, data: bytes, where: bytes) -> bytes:
        nonce = os.urandom(_NONCE_BYTES)
        return nonce + self.aead.encrypt(nonce, data, self.store_id + where)

    def open(self, blob: bytes, where: bytes) -> bytes:
        return self.aead.decrypt(blob[:_NONCE_BYTES], blob[_NONCE_BYTES:], self.store_id + where)


_CIPHER: Final = "aes-256-gcm"


def _checked_key(key: str) -> bytes:
    if len(key) < MIN_KEY_CHARS:
        raise CheckpointError(
            f"{KEY_VARIABLE} must hold at least {MIN_KEY_CHARS} characters (it holds {len(key)}); generate a key "
            'with: python -c "import secrets; print(secrets.token_urlsafe(32))", or unset it for no encryption'
        )
    return key.encode("utf-8", "surrogatepass")


def _derived(key: bytes, salt: bytes, parameters: Mapping[str, Any]) -> bytes:
    """The AES-256 key, by the store's recorded derivation (rule 6)."""
    if parameters["name"] == "hkdf-sha256":
        return HKDF(algorithm=hashes.SHA256(), length=32, salt=salt, info=b"turnstate checkpoints").derive(key)
    if parameters["name"] != "scrypt":
        raise ValueError(f"unknown key derivation {parameters['name']!r}")
    return Scrypt(salt=salt, length=32, n=parameters["n"], r=parameters["r"], p=parameters["p"]).derive(key)


@dataclass(frozen=True)
class ChosenKey:
    """The key a store is opened with (rule 6), where it came from, and whether it was given (by the
    caller or TURNSTATE_CHECKPOINT_KEY): a given key may be a passphrase, so it is stretched with
    scrypt, and its user expects encryption; the key file's is random, and a default."""

    key: str | None
    where: str  # for messages: what holds the key
    given: bool


def key_file() -> Path:
    return state_home() / KEY_FILE


def chosen_key(*, create: bool) -> ChosenKey:
    """TURNSTATE_CHECKPOINT_KEY if it is set (None for `off`), else the user's key file, made first
    if `create` (a writer) and it is missing (rule 6)."""
    value = os.environ.get(KEY_VARIABLE)
    if value == OPT_OUT:
        return ChosenKey(None, f"{KEY_VARIABLE}={OPT_OUT}", given=True)
    if value is not None:
        return ChosenKey(value, KEY_VARIABLE, given=True)
    path = key_file()
    return ChosenKey(_key_from_file(path, create), str(path), given=False)


def _key_from_file(path: Path, create: bool) -> str | None:
    """The key `path` holds (None when it is missing and not `create`d), checked owner-only. Made
    whole or not at all: written to a temporary file, then linked to its name, which fails if another
    process made it first (then its key is read)."""
    try:
        return _read_key_file(path)
    except FileNotFoundError:
        if not create:
            return None
    folder = path.parent
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = os.stat(folder)
    if info.st_uid != os.geteuid() or info.st_mode & 0o022:  # others could swap the key file for theirs
        raise CheckpointError(f"{folder}: the checkpoint key's folder must be yours and writable by you alone")
    write_first(path, secrets.token_urlsafe(32).encode() + b"\n")  # or another run made it first: its key is the one
    return _read_key_file(path)


def _read_key_file(path: Path) -> str:
    info = os.lstat(path)
    problem = private_problem(path, info, folder=False)
    if problem is not None:
        raise CheckpointError(f"{path}: the checkpoint key file {problem}")
    key = path.read_text().strip()
    if len(key) < MIN_KEY_CHARS:
        raise CheckpointError(
            f"{path}: the checkpoint key file holds no key of {MIN_KEY_CHARS} characters or more; fix: delete it "
            f"(a new one is made; runs it sealed then need {KEY_VARIABLE} set to their key)"
        )
    return key


def new_cipher(store_id: bytes, chosen: ChosenKey) -> tuple[_Cipher | None, list[tuple[str, bytes]]]:
    """A new store's cipher (None without a key) and the rows of its `store` table that name the store
    and say how its key unlocks it: a passphrase given is stretched with scrypt, the key file's random
    bytes with HKDF, each with a salt of the store's own, and a check record tells a wrong key."""
    if chosen.key is None:
        return None, [("id", store_id), ("cipher", b"none")]
    salt = os.urandom(16)
    parameters: dict[str, Any] = {"name": "scrypt", **_SCRYPT} if chosen.given else {"name": "hkdf-sha256"}
    cipher = _Cipher(store_id, AESGCM(_derived(_checked_key(chosen.key), salt, parameters)))
    return cipher, [
        ("id", store_id),
        ("cipher", _CIPHER.encode()),
        ("kdf", orjson.dumps(parameters)),
        ("salt", salt),
        ("key_check", cipher.seal(_KEY_CHECK, b"key check")),
    ]


def unlocked(path: str | Path, store: Mapping[str, bytes], chosen: ChosenKey, writer: bool) -> _Cipher | None:
    """The cipher the store at `path` seals its continuation with (its `store` rows), checked against
    its key check record; None for a plain store. A writer that was given a key refuses a plain store."""
    if store.get("cipher") == b"none":
        if chosen.key is not None and writer and chosen.given:
            raise CheckpointError(
                f"{path}: the store was written without encryption, but {KEY_VARIABLE} is set: unset it "
                "to resume this run (its continuation stays unencrypted), or start a new run to have it encrypted"
            )
        return None
    if store.get("cipher") != _CIPHER.encode():
        raise DamagedStore(f"{path}: the store's encryption is not one this turnstate knows: it is corrupt")
    if chosen.key is None:
        raise CheckpointError(
            f"{path}: the continuation is encrypted, and {chosen.where} holds no key; set {KEY_VARIABLE} "
            f"to the key the run was started with (the variable's, or {KEY_FILE} of the machine it started on)"
        )
    try:
        parameters = orjson.loads(store["kdf"])
        if parameters["name"] == "scrypt" and not 2**10 <= parameters["n"] <= 2**20:
            raise ValueError
        cipher = _Cipher(store["id"], AESGCM(_derived(_checked_key(chosen.key), store["salt"], parameters)))
    except (KeyError, ValueError, TypeError):
        raise DamagedStore(f"{path}: the store's encryption parameters cannot be read: it is corrupt") from None
    try:
        cipher.open(store["key_check"], b"key check")
    except (InvalidTag, KeyError):
        raise CheckpointError(
            f"{path}: {chosen.where} does not hold the key this store was written with; set "
            f"{KEY_VARIABLE} to that key (the variable's, or {KEY_FILE} of the machine the run started on)"
        ) from None
    return cipher


def opened(path: str | Path, cipher: _Cipher, blob: bytes, sequence: int, snapshot: bool) -> bytes:
    """A sealed continuation record's plain bytes, or DamagedStore for one that fails authentication."""
    try:
        return cipher.open(blob, _record_place(sequence, snapshot))
    except InvalidTag:
        raise DamagedStore(
            f"{path}: continuation record {sequence} fails authentication: it was altered or damaged "
            "after it was written, so the continuation cannot be trusted"
        ) from None
