"""The runtime-state seed's rules for Anthropic's thinking-token counts (issue 30), each a test.

`anthropic_messages._usage` reads thinking as a breakdown of output: the top level's
`output_tokens_details.thinking_tokens` when reported, used once; else the sampled iterations' own
counts; a compaction iteration's own count added once; nothing reported, nothing counted. The table
reads the SDK's own BetaUsage; the last test reads what the local provider reports through the SDK.
"""

from __future__ import annotations

import pytest

from turnstate.adapters.contract import ModelResponse
from turnstate.local_provider.server import LocalProvider

from ..local_provider.test_messages import DARK
from .test_anthropic_messages import (
    ITEMS,
    THINKING_TOKENS_BETA,
    connect,
    first_turn,
    iteration,
    request,
    stream,  # noqa: F401 - the plain and streamed fixture
    usage_of,
)


def thinking(count: int) -> dict:
    return {"output_tokens_details": {"thinking_tokens": count}}


# (usage fields, reasoning_tokens expected)
# fmt: off
THINKING_TOKENS = {
    "the top-level breakdown populates reasoning_tokens": (
        {"output_tokens": 30, **thinking(20)}, 20),
    "the top-level breakdown is used once, not again for each iteration it covers": (
        {"output_tokens": 30, **thinking(20), "iterations": [iteration("message", output_tokens=12, **thinking(12)), iteration("message", output_tokens=18, **thinking(8))]}, 20),
    "without a top-level count the sampled iterations' own counts stand in": (
        {"output_tokens": 30, "iterations": [iteration("message", output_tokens=12, **thinking(5)), iteration("message", output_tokens=18, **thinking(6))]}, 11),
    "a compaction's own thinking is added once to the top-level count": (
        {"output_tokens": 9, **thinking(4), "iterations": [iteration("compaction", output_tokens=30, **thinking(3)), iteration("message", output_tokens=9, **thinking(4))]}, 7),
    "a compaction's own thinking is added once to the iterations' fallback": (
        {"output_tokens": 9, "iterations": [iteration("compaction", output_tokens=30, **thinking(3)), iteration("message", output_tokens=9, **thinking(5))]}, 8),
    "a usage that reports no thinking counts none": (
        {"output_tokens": 30}, 0),
    "iterations that report no thinking count none": (
        {"output_tokens": 39, "iterations": [iteration("compaction", output_tokens=30), iteration("message", output_tokens=9)]}, 0),
}
# fmt: on


@pytest.mark.parametrize(("fields", "expected"), THINKING_TOKENS.values(), ids=THINKING_TOKENS.keys())
def test_reasoning_tokens_are_the_reported_thinking_a_breakdown_of_output(fields, expected):
    assert usage_of(input_tokens=5, **fields).reasoning_tokens == expected


@pytest.mark.parametrize("beta", [True, False], ids=["with the beta", "without it"])
def test_the_local_providers_thinking_count_reaches_reasoning_tokens_only_where_it_is_reported(stream, beta):  # noqa: F811
    betas = [THINKING_TOKENS_BETA] if beta else []
    with LocalProvider() as provider:
        adapter = connect(provider, stream=stream, betas=betas)
        history, first = first_turn(adapter)
        later = adapter.call(request(*history, *ITEMS.user_items([DARK])))
    assert isinstance(later, ModelResponse)
    for reply in (first, later):
        if beta:  # a breakdown of output, never extra output
            assert 0 < reply.usage.reasoning_tokens < reply.usage.output_tokens
        else:  # unreported stays zero, never estimated from the thinking block
            assert reply.usage.reasoning_tokens == 0 and reply.reasoning_summary
