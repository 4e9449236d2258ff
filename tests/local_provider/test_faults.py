"""Faults that outlast one request or reach past the reply text: a rate limit that keeps refusing until
its retry-after has passed, a reply that leaks the API key, and the 401 for a wrong key.

The rate-limit window runs on a fake clock, so these tests do not sleep; one test uses the real clock,
and one lets the real openai SDK's own retry wait the window out.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence

import openai
import pytest

from turnstate.adapters.tokens import estimate_text_tokens
from turnstate.local_provider.faults import Fault
from turnstate.local_provider.openai_words import masked_api_key
from turnstate.local_provider.server import INVALID_API_KEY, LocalProvider

HI = [{"role": "user", "content": "hi"}]


def echo_last_message(system: str, messages: Sequence[Mapping[str, object]]) -> str:
    return f"echo: {messages[-1]['content']}"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def client_for(provider: LocalProvider, api_key: str = "test-key", max_retries: int = 0) -> openai.OpenAI:
    return openai.OpenAI(base_url=provider.openai_base_url, api_key=api_key, max_retries=max_retries)


def refused(client: openai.OpenAI) -> openai.RateLimitError:
    with pytest.raises(openai.RateLimitError) as raised:
        client.chat.completions.create(model="local-model", messages=HI)
    return raised.value


def served_text(client: openai.OpenAI, **params: object) -> str | None:
    response = client.chat.completions.create(model="local-model", messages=HI, **params)
    return response.choices[0].message.content


# --- rate_limit with retry_after_seconds -----------------------------------------------------------


def test_a_rate_limit_keeps_refusing_every_request_until_its_retry_after_has_passed() -> None:
    clock = FakeClock()
    faults = [Fault(at=1, kind="rate_limit", retry_after_seconds=5)]
    with LocalProvider(faults=faults, reply=echo_last_message, clock=clock) as provider:
        with client_for(provider) as client:
            first = refused(client)
            clock.now += 1.5
            second = refused(client)
            clock.now += 3.5
            after = client.chat.completions.create(model="local-model", messages=HI)

    assert (first.response.headers["retry-after"], first.response.headers["retry-after-ms"]) == ("5", "5000")
    assert (second.response.headers["retry-after"], second.response.headers["retry-after-ms"]) == ("4", "3500")
    assert second.code == "rate_limit_exceeded"
    assert after.choices[0].message.content == "echo: hi"
    assert after.id == "chatcmpl-local-3"  # the refused requests were admitted and numbered
    assert len(provider.request_log) == 3


def test_inside_the_window_a_request_scheduled_for_another_fault_is_refused_too() -> None:
    clock = FakeClock()
    faults = [Fault(at=1, kind="rate_limit", retry_after_seconds=2), Fault(at=2, kind="server_error")]
    with LocalProvider(faults=faults, reply=echo_last_message, clock=clock) as provider:
        with client_for(provider) as client:
            refused(client)
            refused(client)
            clock.now += 2
            text = served_text(client)

    assert text == "echo: hi"


def test_a_rate_limit_without_retry_after_seconds_says_retry_now_and_closes_nothing() -> None:
    with LocalProvider(faults=[Fault(at=1, kind="rate_limit")], reply=echo_last_message) as provider:
        with client_for(provider) as client:
            error = refused(client)
            text = served_text(client)

    assert error.response.headers["retry-after"] == "0"
    assert "retry-after-ms" not in error.response.headers
    assert text == "echo: hi"


def test_the_window_runs_on_the_real_monotonic_clock_by_default() -> None:
    faults = [Fault(at=1, kind="rate_limit", retry_after_seconds=0.2)]
    with LocalProvider(faults=faults, reply=echo_last_message) as provider, client_for(provider) as client:
        started = time.monotonic()
        refused(client)
        refused(client)
        time.sleep(max(0.0, 0.2 - (time.monotonic() - started)) + 0.02)
        text = served_text(client)

    assert text == "echo: hi"


def test_the_openai_sdks_own_retry_honours_the_header_and_then_succeeds() -> None:
    faults = [Fault(at=1, kind="rate_limit", retry_after_seconds=0.3)]
    with LocalProvider(faults=faults, reply=echo_last_message) as provider:
        with client_for(provider, max_retries=1) as client:
            started = time.monotonic()
            text = served_text(client)
            waited = time.monotonic() - started

    assert text == "echo: hi"
    assert waited >= 0.3
    assert len(provider.request_log) == 2


@pytest.mark.parametrize("seconds", [0, -1, math.inf, math.nan, True, "5"])
def test_retry_after_seconds_must_be_a_finite_positive_number(seconds: object) -> None:
    with pytest.raises(ValueError, match="retry_after_seconds"):
        Fault(at=1, kind="rate_limit", retry_after_seconds=seconds)  # type: ignore[arg-type]


def test_retry_after_seconds_belongs_to_rate_limit_only() -> None:
    with pytest.raises(ValueError, match="rate_limit only"):
        Fault(at=1, kind="overloaded", retry_after_seconds=1)


# --- leak_key --------------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_a_leak_key_fault_appends_the_requests_key_to_its_reply_only(stream: bool) -> None:
    with LocalProvider(faults=[Fault(at=2, kind="leak_key")], reply=echo_last_message) as provider:
        with client_for(provider, api_key="sk-test-secret-123") as client:
            replies = []
            for _ in range(3):
                if stream:
                    chunks = client.chat.completions.create(model="local-model", messages=HI, stream=True)
                    replies.append("".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices))
                else:
                    replies.append(served_text(client))

    assert replies == ["echo: hi", "echo: hi\nAuthorization: Bearer sk-test-secret-123", "echo: hi"]


def test_a_leaked_key_shows_even_when_the_reply_is_cut_by_the_token_limit() -> None:
    with LocalProvider(faults=[Fault(at=1, kind="leak_key")], reply=echo_last_message) as provider:
        with client_for(provider) as client:
            response = client.chat.completions.create(model="local-model", messages=HI, max_completion_tokens=1)

    text = response.choices[0].message.content
    assert text == "echo\nAuthorization: Bearer test-key"
    assert response.choices[0].finish_reason == "length"
    assert response.usage is not None and response.usage.completion_tokens == estimate_text_tokens(text)


# --- a wrong API key -------------------------------------------------------------------------------


def test_the_invalid_key_is_401_quoting_the_key_as_openai_does_and_not_admitted() -> None:
    with LocalProvider(reply=echo_last_message) as provider:
        with client_for(provider, api_key=INVALID_API_KEY) as client:
            with pytest.raises(openai.AuthenticationError) as raised:
                served_text(client)

    assert raised.value.status_code == 401
    assert raised.value.body == {
        "message": "Incorrect API key provided: sk-invalid. You can find your API key at "
        "https://platform.openai.com/account/api-keys.",
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_api_key",
    }
    assert provider.request_log == []


def test_a_long_key_is_quoted_with_its_first_8_and_last_4_characters_only() -> None:
    key = "sk-" + "a" * 5 + "b" * 39 + "wxyz"

    assert masked_api_key(key) == "sk-aaaaa" + "*" * 39 + "wxyz"
    assert masked_api_key("undefined") == "undefined"


def test_the_request_log_keeps_only_the_latest_bodies_and_ordinals_keep_counting() -> None:
    with LocalProvider(request_log_size=2, faults=[Fault(at=3, kind="server_error")]) as provider:
        client = openai.OpenAI(base_url=provider.openai_base_url, api_key="test-key", max_retries=0)
        for text in ("one", "two"):
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": text}])
        with pytest.raises(openai.InternalServerError):  # the third request is still ordinal 3
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "three"}])
        kept = [body["messages"][0]["content"] for body in provider.request_log]
    assert kept == ["two", "three"]
