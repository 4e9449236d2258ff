"""The opaque-blob codec: what it seals it gives back, to its own key only, and shows nothing readable."""

from __future__ import annotations

import base64
import string

import pytest

from turnstate.local_provider.sealed import Sealer, digest

THOUGHT = "NOTES: level 2 beacon C"
PAYLOAD = {"kind": "reasoning", "token": "abc", "after": None, "thought": THOUGHT}


def test_a_sealed_payload_opens_to_itself() -> None:
    sealer = Sealer()

    assert sealer.open(sealer.seal(PAYLOAD)) == PAYLOAD


def test_the_same_payload_seals_differently_each_time() -> None:
    sealer = Sealer()

    assert sealer.seal(PAYLOAD) != sealer.seal(PAYLOAD)


def test_a_blob_shows_no_readable_text_of_its_payload_not_even_decoded() -> None:
    blob = Sealer().seal(PAYLOAD)
    decoded = base64.urlsafe_b64decode(blob)

    for text in (THOUGHT, "beacon", "NOTES", "reasoning", "thought", "kind"):
        assert text not in blob
        assert text.encode() not in decoded
    assert set(blob) <= set(string.ascii_letters + string.digits + "-_=")


def test_every_changed_character_of_a_blob_fails_to_open() -> None:
    sealer = Sealer()
    blob = sealer.seal(PAYLOAD)

    for index, character in enumerate(blob):
        replacement = "A" if character != "A" else "B"
        assert sealer.open(blob[:index] + replacement + blob[index + 1 :]) is None, index


def test_a_blob_cut_short_or_lengthened_fails_to_open() -> None:
    sealer = Sealer()
    blob = sealer.seal(PAYLOAD)

    assert sealer.open(blob[:-4]) is None
    assert sealer.open(blob + "AAAA") is None
    assert sealer.open("") is None


def test_another_sealers_blob_fails_to_open() -> None:
    assert Sealer().open(Sealer().seal(PAYLOAD)) is None


def test_the_same_key_opens_across_sealer_instances() -> None:
    key = b"k" * 32

    assert Sealer(key).open(Sealer(key).seal(PAYLOAD)) == PAYLOAD


@pytest.mark.parametrize("blob", [None, 5, "not base64 !", "gAAAAA==", "\u00e9t\u00e9"])
def test_anything_that_is_not_a_blob_opens_to_none(blob: object) -> None:
    assert Sealer().open(blob) is None


def test_the_other_spelling_of_the_same_bytes_fails_to_open() -> None:
    """Base64's last character can differ in unused bits and decode to the same bytes: still altered."""
    sealer = Sealer()
    blob = sealer.seal(PAYLOAD)
    padding = len(blob) - len(blob.rstrip("="))
    assert padding, "this payload's blob ends with padding"
    last = len(blob) - padding - 1
    alphabet = string.ascii_uppercase + string.ascii_lowercase + string.digits + "-_"
    twin = alphabet[alphabet.index(blob[last]) ^ 1]  # flips the lowest bit, unused when padded
    respelled = blob[:last] + twin + blob[last + 1 :]

    assert base64.urlsafe_b64decode(respelled) == base64.urlsafe_b64decode(blob)
    assert sealer.open(respelled) is None


def test_a_token_is_recognized_only_by_the_sealer_that_issued_it() -> None:
    sealer = Sealer()
    token = sealer.new_token()

    assert sealer.issued(token)
    assert not Sealer().issued(token)
    assert not sealer.issued(token[:-1] + ("0" if token[-1] != "0" else "1"))
    assert not sealer.issued(token.upper())
    assert not sealer.issued("not-a-token")
    assert sealer.new_token() != token


def test_a_digest_depends_on_every_part_of_the_value() -> None:
    assert digest([["output_text", "a"]]) == digest([["output_text", "a"]])
    assert digest([["output_text", "a"]]) != digest([["output_text", "b"]])
    assert digest({"a": 1, "b": 2}) == digest({"b": 2, "a": 1})
