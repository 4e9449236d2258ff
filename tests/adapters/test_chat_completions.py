"""openai.chat_completions.v1 through the real openai SDK against the embedded local provider.

Only what is particular to Chat Completions is here (the request body, usage from the estimator, the
cached prefix, OpenAI's error words); what every adapter must do is checked in test_contract.py.
"""

from __future__ import annotations

import pytest

from turnstate.adapters.chat_completions import ChatCompletionsAdapter
from turnstate.adapters.contract import Endpoint, ErrorKind, ModelRequest, ModelResponse, ProviderError, RequestSettings
from turnstate.adapters.tokens import estimate_messages_tokens, estimate_text_tokens
from turnstate.local_provider.faults import Fault
from turnstate.local_provider.server import LocalProvider

FRAME = "LEVEL 1/1 | STATE NOT_FINISHED\nBEACON (level 1): dark\n#####\n#@.A#\n#####\nSTANDING ON: floor"
REQUEST = ModelRequest(system="Play. NOTES: please", items=({"role": "user", "content": FRAME},))


def adapter_for(provider: LocalProvider, *, stream: bool, max_output_tokens: int = 64) -> ChatCompletionsAdapter:
    settings = RequestSettings(model="local-policy-1", max_output_tokens=max_output_tokens, stream=stream)
    return ChatCompletionsAdapter.connect(
        Endpoint(provider.base_url, "test-key", is_local=True, timeout_seconds=10.0), settings
    )


@pytest.fixture(params=[False, True], ids=["plain", "stream"])
def stream(request) -> bool:
    return request.param


def test_a_reply_is_normalized_with_the_estimators_usage(stream):
    with LocalProvider() as provider:
        outcome = adapter_for(provider, stream=stream).call(REQUEST)
    assert isinstance(outcome, ModelResponse)
    assert "ACTION: ACTION4" in outcome.text
    assert outcome.stop_reason == "stop"
    sent = [{"role": "system", "content": REQUEST.system}, {"role": "user", "content": FRAME}]
    assert outcome.usage.input_tokens == estimate_messages_tokens(sent)
    assert outcome.usage.output_tokens == estimate_text_tokens(outcome.text)
    assert outcome.native_items == ({"role": "assistant", "content": outcome.text},)


def test_the_request_puts_the_system_prompt_first_and_asks_for_stream_usage(stream):
    with LocalProvider() as provider:
        adapter_for(provider, stream=stream).call(REQUEST)
        (body,) = provider.request_log
    assert body["messages"][0] == {"role": "system", "content": REQUEST.system}
    assert body["max_completion_tokens"] == 64 and "max_tokens" not in body  # what OpenAI's endpoint wants
    assert body.get("stream", False) is stream
    assert (body.get("stream_options") == {"include_usage": True}) is stream


def test_the_output_limit_goes_in_the_field_the_endpoint_expects():
    with LocalProvider() as provider:
        settings = RequestSettings(model="local-policy-1", max_output_tokens=32, output_limit_param="max_tokens")
        endpoint = Endpoint(provider.base_url, "test-key", is_local=True, timeout_seconds=10.0)
        ChatCompletionsAdapter.connect(endpoint, settings).call(REQUEST)
        (body,) = provider.request_log
    assert body["max_tokens"] == 32 and "max_completion_tokens" not in body


def test_an_integer_past_64_bits_is_sent_as_written_and_the_provider_answers_it(stream):
    # The body's fast encoder stops at 64 bits; such a cap must still reach the API, which refuses it.
    with LocalProvider() as provider:
        failed = adapter_for(provider, stream=stream, max_output_tokens=10**30).call(REQUEST)
    assert isinstance(failed, ProviderError) and failed.kind is ErrorKind.FATAL
    assert failed.diagnostics["status"] == 400 and failed.diagnostics["code"] == "invalid_type"


def test_a_repeated_long_prefix_is_reported_as_cached_in_whole_128_token_blocks(stream):
    long_request = ModelRequest(system="x" * 4400, items=REQUEST.items)  # over OpenAI's 1,024-token minimum
    with LocalProvider() as provider:
        adapter = adapter_for(provider, stream=stream)
        first = adapter.call(long_request)
        second = adapter.call(long_request)
    assert isinstance(first, ModelResponse) and isinstance(second, ModelResponse)
    assert first.usage.cached_input_tokens == 0
    sent = second.usage.input_tokens
    assert second.usage.cached_input_tokens == sent - sent % 128 > 0


def test_a_rate_limit_is_diagnosed_by_the_openai_sdks_error_class():
    with LocalProvider(faults=[Fault(at=1, kind="rate_limit")]) as provider:
        failed = adapter_for(provider, stream=False).call(REQUEST)
    assert isinstance(failed, ProviderError)
    assert failed.diagnostics["error_class"] == "RateLimitError"


def test_an_overflow_is_recognized_by_openais_context_length_exceeded_code(stream):
    with LocalProvider(context_window=256) as provider:
        big = ModelRequest(system="s", items=({"role": "user", "content": "x" * 2000},))
        outcome = adapter_for(provider, stream=stream).call(big)
    assert isinstance(outcome, ProviderError)
    assert outcome.kind is ErrorKind.CONTEXT_OVERFLOW
    assert outcome.diagnostics["code"] == "context_length_exceeded"


def test_turnstate_serve_answers_the_real_sdk_until_interrupted():
    import re
    import signal
    import subprocess
    import sys

    import openai

    server = subprocess.Popen(
        [sys.executable, "-m", "turnstate.cli", "serve", "--context-window", "4096"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        banner = server.stdout.readline()
        base_url = re.search(r"OpenAI-compatible base_url: (\S+)\)", banner).group(1)
        client = openai.OpenAI(base_url=base_url, api_key="k", max_retries=0, timeout=10)
        completion = client.chat.completions.create(
            model="local-policy-1", messages=[{"role": "user", "content": FRAME}], max_tokens=64
        )
        assert "ACTION: ACTION4" in completion.choices[0].message.content
    finally:
        server.send_signal(signal.SIGINT)
        assert server.wait(timeout=10) == 0
