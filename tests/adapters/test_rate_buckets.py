"""The rate-limit arithmetic the local provider enforces and a run's shared limit keeps
(adapters/rate_buckets.py): requests and tokens a minute as buckets of `burst_seconds`."""

from __future__ import annotations

import math

import pytest

from turnstate.adapters.rate_buckets import Buckets, Rate


def admitted_within(rate: Rate, seconds: float, tokens: int, step: float = 0.001) -> int:
    """How many requests of `tokens` a client that goes as soon as the buckets allow sends in `seconds`."""
    buckets, sent = Buckets.full(rate, 0.0), 0
    for tick in range(round(seconds / step) + 1):
        buckets.refill(rate, tick * step)
        while buckets.wait(rate, tokens) == 0:
            buckets.take(rate, tokens)
            sent += 1
    return sent


@pytest.mark.parametrize(
    ("rate", "tokens", "most"),
    [
        (Rate(requests_per_minute=600), 10, 10 + 10 * 3),  # a burst of one second, then 10 a second
        (Rate(requests_per_minute=600, burst_seconds=0.5), 10, 5 + 10 * 3),
        (Rate(tokens_per_minute=6000), 100, 1 + 1 * 3),  # 100 tokens a second: one request a second
        (Rate(requests_per_minute=6000, tokens_per_minute=6000), 50, 2 + 2 * 3),  # the tokens bind
        (Rate(requests_per_minute=30), 10, 1 + 1),  # half a request a second: the bucket still holds one
    ],
)
def test_a_client_that_goes_when_the_buckets_allow_sends_the_burst_then_the_rate(rate, tokens, most):
    assert admitted_within(rate, 3.0, tokens) == most


def test_a_request_larger_than_the_token_bucket_goes_when_it_is_full_and_the_debt_waits_for_the_next():
    rate = Rate(tokens_per_minute=600)  # 10 tokens a second, a bucket of 10
    buckets = Buckets.full(rate, 0.0)
    assert buckets.wait(rate, 50) == 0.0
    buckets.take(rate, 50)
    assert buckets.tokens == -40
    assert buckets.wait(rate, 1) == pytest.approx(4.1)  # 41 tokens at 10 a second


def test_a_hold_keeps_every_request_back_until_it_has_passed_and_never_shortens():
    rate = Rate(requests_per_minute=600)
    buckets = Buckets.full(rate, 100.0)
    buckets.hold(105.0)
    buckets.hold(102.0)
    assert buckets.wait(rate, 1) == pytest.approx(5.0)
    buckets.refill(rate, 105.0)
    assert buckets.wait(rate, 1) == 0.0


def test_given_back_tokens_never_fill_a_bucket_past_its_capacity_and_a_negative_return_takes_more():
    rate = Rate(tokens_per_minute=600)
    buckets = Buckets.full(rate, 0.0)
    buckets.take(rate, 8)
    buckets.give_back(rate, 100)
    assert buckets.tokens == 10
    buckets.give_back(rate, -15)
    assert buckets.tokens == -5


def test_a_clock_that_goes_back_refills_nothing():
    rate = Rate(requests_per_minute=60)
    buckets = Buckets.full(rate, 50.0)
    buckets.take(rate, 0)
    buckets.refill(rate, 10.0)
    assert (buckets.requests, buckets.at) == (0.0, 50.0)


@pytest.mark.parametrize(
    "stored",
    [
        None,
        [],
        {},
        {"requests": "x", "tokens": 1, "at": 0, "held_until": 0},
        {"requests": math.nan, "tokens": 1, "at": 0, "held_until": 0},
    ],
)
def test_buckets_a_file_holds_nothing_readable_of_start_full(stored):
    rate = Rate(requests_per_minute=600)
    assert Buckets.from_dict(stored, rate, 7.0) == Buckets.full(rate, 7.0)


def test_buckets_survive_their_file():
    rate = Rate(requests_per_minute=600, tokens_per_minute=1000)
    buckets = Buckets(3.5, -20.0, 12.0, 15.0)
    assert Buckets.from_dict(buckets.to_dict(), rate, 99.0) == buckets
