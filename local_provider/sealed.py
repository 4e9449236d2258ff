"""Opaque, verifiable blobs and ids: the local provider's `encrypted_content` and its item ids.

A real provider hands the client state that the client must replay but can neither read nor forge
(OpenAI's `encrypted_content`). The local provider does the same with the standard library alone:

- `seal(payload)` encrypts the payload's JSON with a keystream (HMAC-SHA256 of a key, a random nonce
  and a block counter), then tags version, nonce and ciphertext with HMAC-SHA256 (encrypt-then-MAC),
  and writes the whole as URL-safe base64. Without the key a blob shows no readable text; a change
  to any character fails the tag.
- `open(blob)` gives the payload back only if the blob is the exact text `seal` wrote and its tag
  verifies under this sealer's key; anything else is None, never an exception.
- `new_token()` / `issued(token)`: a random nonce with its own tag, written as hex. The provider
  builds every id of one response from one token (resp_T, rs_T, msg_T, cmp_T), so a replayed item's
  id alone tells whether this provider issued it, and with which sibling items, without any
  server-side record (as with store: false).

The key is made per service (service.py), as a real provider's is per account: a provider opened on
the same service folder opens what an earlier one sealed (a run resumed in a new process replays
it), and a blob from another service, or from an earlier provider that kept its service in memory,
fails verification, as another account's does on a real provider.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
from collections.abc import Mapping

VERSION = b"\x01"
NONCE_BYTES = 16
TAG_BYTES = 16
TOKEN_NONCE_BYTES = 8
TOKEN_TAG_BYTES = 8
TOKEN_HEX_LENGTH = 2 * (TOKEN_NONCE_BYTES + TOKEN_TAG_BYTES)
KEY_BYTES = 32


class Sealer:
    """Seals and opens blobs, and issues and recognizes tokens, under one secret key."""

    def __init__(self, key: bytes | None = None) -> None:
        master = key if key is not None else secrets.token_bytes(KEY_BYTES)
        self._cipher_key = _derived(master, b"cipher")
        self._mac_key = _derived(master, b"mac")
        self._token_key = _derived(master, b"token")

    def seal(self, payload: Mapping[str, object]) -> str:
        """The payload (JSON-serializable) as an opaque, tamper-evident string."""
        plain = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        nonce = secrets.token_bytes(NONCE_BYTES)
        cipher = _xor(plain, _keystream(self._cipher_key, nonce, len(plain)))
        tag = self._tag(nonce, cipher)
        return base64.urlsafe_b64encode(VERSION + nonce + cipher + tag).decode("ascii")

    def open(self, blob: object) -> dict[str, object] | None:
        """The payload `seal` put in `blob`, or None if blob is not exactly a blob this key sealed."""
        if not isinstance(blob, str):
            return None
        try:
            raw = base64.b64decode(blob.encode("ascii"), altchars=b"-_", validate=True)
        except (UnicodeEncodeError, binascii.Error, ValueError):
            return None
        # Base64 can spell the same bytes in more than one way (the unused bits of the last
        # character); only the spelling seal wrote is the blob, so any edited character fails.
        if base64.urlsafe_b64encode(raw).decode("ascii") != blob:
            return None
        if len(raw) < len(VERSION) + NONCE_BYTES + TAG_BYTES or raw[: len(VERSION)] != VERSION:
            return None
        nonce = raw[len(VERSION) : len(VERSION) + NONCE_BYTES]
        cipher, tag = raw[len(VERSION) + NONCE_BYTES : -TAG_BYTES], raw[-TAG_BYTES:]
        if not hmac.compare_digest(tag, self._tag(nonce, cipher)):
            return None
        try:
            payload = json.loads(_xor(cipher, _keystream(self._cipher_key, nonce, len(cipher))).decode("utf-8"))
        except ValueError:  # UnicodeDecodeError and JSONDecodeError are both ValueErrors
            return None
        return payload if isinstance(payload, dict) else None

    def new_token(self) -> str:
        """A fresh token (hex) that `issued` recognizes and no other key produces."""
        nonce = secrets.token_bytes(TOKEN_NONCE_BYTES)
        return (nonce + self._token_tag(nonce)).hex()

    def issued(self, token: str) -> bool:
        """Whether `token` came from this sealer's `new_token`."""
        if len(token) != TOKEN_HEX_LENGTH:
            return False
        try:
            raw = bytes.fromhex(token)
        except ValueError:
            return False
        if raw.hex() != token:  # only the lowercase spelling new_token writes
            return False
        nonce, tag = raw[:TOKEN_NONCE_BYTES], raw[TOKEN_NONCE_BYTES:]
        return hmac.compare_digest(tag, self._token_tag(nonce))

    def _tag(self, nonce: bytes, cipher: bytes) -> bytes:
        return hmac.new(self._mac_key, VERSION + nonce + cipher, hashlib.sha256).digest()[:TAG_BYTES]

    def _token_tag(self, nonce: bytes) -> bytes:
        return hmac.new(self._token_key, nonce, hashlib.sha256).digest()[:TOKEN_TAG_BYTES]


def digest(value: object) -> str:
    """A short fingerprint of a JSON value, for a sealed payload to pin what a sibling item held."""
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:32]


def _derived(master: bytes, purpose: bytes) -> bytes:
    """One key per use, so the cipher, the tag and the tokens never share a key."""
    return hmac.new(master, b"turnstate-local-provider/" + purpose, hashlib.sha256).digest()


def _keystream(key: bytes, nonce: bytes, length: int) -> bytes:
    blocks = []
    for counter in range(-(-length // hashlib.sha256().digest_size)):
        blocks.append(hmac.new(key, nonce + counter.to_bytes(4, "big"), hashlib.sha256).digest())
    return b"".join(blocks)[:length]


def _xor(data: bytes, stream: bytes) -> bytes:
    return bytes(left ^ right for left, right in zip(data, stream, strict=True))
