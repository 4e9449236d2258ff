"""The local provider's prompt cache: the longest prefix a recent request for the same model shares."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from turnstate.local_provider.prefix_cache import PrefixCache, common_prefix


def naive_common_prefix(first: list[int], second: list[int]) -> int:
    length = 0
    while length < min(len(first), len(second)) and first[length] == second[length]:
        length += 1
    return length


@given(st.lists(st.integers(0, 2), max_size=40), st.lists(st.integers(0, 2), max_size=40))
def test_common_prefix_is_the_longest_run_of_equal_leading_elements(first, second):
    assert common_prefix(first, second) == naive_common_prefix(first, second)


def message(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def test_the_longest_prefix_of_any_recent_request_for_the_same_model_is_matched():
    cache = PrefixCache(recent=3)
    a, b, c = message("a"), message("b"), message("c")
    assert cache.match_and_record("m", [a, b, c]) == 0
    assert cache.match_and_record("m", [a, c]) == 1
    assert cache.match_and_record("m", [dict(a), dict(b), message("d")]) == 2  # equal, not the same objects
    assert cache.match_and_record("other", [a, b, c]) == 0  # per model


def test_a_request_older_than_the_recent_ones_is_forgotten():
    cache = PrefixCache(recent=2)
    cache.match_and_record("m", [message("old"), message("x")])
    cache.match_and_record("m", [message("1")])
    cache.match_and_record("m", [message("2")])
    assert cache.match_and_record("m", [message("old"), message("x")]) == 0
