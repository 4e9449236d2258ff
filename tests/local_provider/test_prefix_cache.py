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


def test_a_shared_prefix_is_read_for_roles_once_and_what_follows_it_in_full():
    from turnstate.local_provider.chat_completions import ReadMessages, read_roles

    system, first = {"role": "system", "content": "S"}, message("1")
    reply, developer, second = (
        {"role": "assistant", "content": "r"},
        {"role": "developer", "content": "D"},
        message("2"),
    )
    earlier = (system, first, reply)
    known = ReadMessages(earlier, (1, 1, 1), (0,), (first, reply))
    assert read_roles([system, first, reply, developer, second], known, 3) == ((0, 3), (first, reply, second))
    assert read_roles([system, first, developer], known, 2) == ((0, 2), (first,))
    fresh = ReadMessages((), (), (), ())
    assert read_roles([system, first, reply, developer, second], fresh, 0) == ((0, 3), (first, reply, second))
