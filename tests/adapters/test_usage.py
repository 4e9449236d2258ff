"""Usage as each adapter reads it from its SDK's own types: cache writes beside cache reads, and a
provider-reported cost recorded when present (the harness never writes one)."""

from __future__ import annotations

import anthropic.types.beta as anthropic_beta
import pytest
from openai.types import CompletionUsage
from openai.types.responses import ResponseUsage

from turnstate.adapters import anthropic_messages, chat_completions, responses
from turnstate.adapters.contract import Usage, reported_cost


def test_chat_usage_keeps_cache_writes_and_the_providers_own_cost():
    usage = CompletionUsage.model_validate(
        {
            "prompt_tokens": 100,
            "completion_tokens": 10,
            "total_tokens": 110,
            "prompt_tokens_details": {"cached_tokens": 40, "cache_write_tokens": 60},
            "cost": 0.0012,  # OpenRouter's usage.cost, kept by the SDK as an extra field
        }
    )
    assert chat_completions._usage(usage) == Usage(100, 40, 10, 0, cache_write_tokens=60, cost=0.0012)


def test_deepseek_cache_hits_stand_in_where_prompt_tokens_details_is_missing():
    usage = CompletionUsage.model_validate(
        {
            "prompt_tokens": 12,
            "completion_tokens": 3,
            "total_tokens": 15,
            "prompt_cache_hit_tokens": 8,
            "prompt_cache_miss_tokens": 4,
        }
    )
    assert chat_completions._usage(usage).cached_input_tokens == 8


def test_responses_usage_keeps_cache_writes():
    usage = ResponseUsage.model_validate(
        {
            "input_tokens": 2000,
            "input_tokens_details": {"cached_tokens": 1024, "cache_write_tokens": 976},
            "output_tokens": 30,
            "output_tokens_details": {"reasoning_tokens": 12},
            "total_tokens": 2030,
        }
    )
    assert responses._usage(usage) == Usage(2000, 1024, 30, 12, cache_write_tokens=976)


def test_anthropic_cache_creation_is_counted_in_input_and_kept_as_its_own_breakdown():
    usage = anthropic_beta.BetaUsage.model_validate(
        {"input_tokens": 5, "cache_read_input_tokens": 2048, "cache_creation_input_tokens": 1100, "output_tokens": 40}
    )
    read = anthropic_messages._usage(usage)
    assert (read.input_tokens, read.cached_input_tokens, read.cache_write_tokens) == (3153, 2048, 1100)
    assert read.cost is None  # Anthropic reports no cost; none is made up


@pytest.mark.parametrize("value", [None, "0.1", True, -1.0, float("inf"), float("nan")])
def test_a_cost_that_is_not_a_finite_non_negative_number_is_unreported(value):
    assert reported_cost(type("U", (), {"cost": value})()) is None


def test_costs_add_up_where_reported_and_stay_unreported_where_none_was():
    assert (Usage(cost=0.5) + Usage() + Usage(cost=0.25)).cost == 0.75
    assert (Usage() + Usage()).cost is None
    assert "cost" not in Usage().to_dict() and Usage(cost=0.5).to_dict()["cost"] == 0.5
