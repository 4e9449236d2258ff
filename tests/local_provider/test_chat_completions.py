"""The embedded local provider's Chat Completions wire, through the real openai SDK over real HTTP.

The reply function here is a small deterministic function of the request (it echoes the last
message), so these tests check the wire, not the policy.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator, Mapping, Sequence

import httpx2
import openai
import pytest
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from turnstate.adapters.tokens import estimate_messages_tokens, estimate_text_tokens
from turnstate.local_provider.exchange import MALFORMED_REPLY
from turnstate.local_provider.faults import Fault, FaultSchedule
from turnstate.local_provider.server import LocalProvider

SYSTEM = {"role": "system", "content": "You play a small game."}


def echo_last_message(system: str, messages: Sequence[Mapping[str, object]]) -> str:
    return f"echo: {messages[-1]['content']}"


def user(content: object) -> dict[str, object]:
    """A user message; content is text or a list of content parts."""
    return {"role": "user", "content": content}


def assistant(text: str) -> dict[str, object]:
    return {"role": "assistant", "content": text}


def client_for(provider: LocalProvider) -> openai.OpenAI:
    return openai.OpenAI(base_url=provider.openai_base_url, api_key="test-key", max_retries=0)


def post_raw(provider: LocalProvider, content: bytes, headers: Mapping[str, str]) -> httpx2.Response:
    """A request the SDK would refuse to send: no key, a bad body. JSON unless `headers` say otherwise."""
    sent = {"Content-Type": "application/json", **headers}
    return httpx2.post(provider.openai_base_url + "/chat/completions", content=content, headers=sent)


def ask(client: openai.OpenAI, text: str = "hello world", **params: object) -> ChatCompletion:
    return client.chat.completions.create(model="local-model", messages=[SYSTEM, user(text)], **params)


def ask_streamed(client: openai.OpenAI, text: str = "hello world", **params: object) -> list[ChatCompletionChunk]:
    stream = client.chat.completions.create(
        model="local-model",
        messages=[SYSTEM, user(text)],
        stream=True,
        stream_options={"include_usage": True},
        **params,
    )
    return list(stream)


def streamed_text(chunks: Sequence[ChatCompletionChunk]) -> str:
    return "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)


def finish_reasons(chunks: Sequence[ChatCompletionChunk]) -> list[str]:
    choices = [chunk.choices[0] for chunk in chunks if chunk.choices]
    return [choice.finish_reason for choice in choices if choice.finish_reason]


@pytest.fixture
def provider() -> Iterator[LocalProvider]:
    with LocalProvider(reply=echo_last_message) as running:
        yield running


@pytest.fixture
def client(provider: LocalProvider) -> Iterator[openai.OpenAI]:
    with client_for(provider) as sdk_client:
        yield sdk_client


# --- completions -----------------------------------------------------------------------------------


def test_a_non_streamed_completion_carries_the_reply_and_ends_with_stop(client: openai.OpenAI) -> None:
    response = ask(client, "hello world")

    assert response.id == "chatcmpl-local-1"
    assert response.object == "chat.completion"
    assert response.model == "local-model"
    assert response.choices[0].message.role == "assistant"
    assert response.choices[0].message.content == "echo: hello world"
    assert response.choices[0].finish_reason == "stop"


def test_the_reply_function_gets_the_system_prompt_joined_and_the_other_messages_as_text() -> None:
    seen: list[tuple[str, list[dict[str, object]]]] = []

    def record(system: str, messages: Sequence[Mapping[str, object]]) -> str:
        seen.append((system, [dict(message) for message in messages]))
        return "ok"

    messages = [
        {"role": "system", "content": "rule one"},
        {"role": "system", "content": [{"type": "text", "text": "rule two"}]},
        {"role": "user", "content": [{"type": "text", "text": "hel"}, {"type": "text", "text": "lo"}]},
        assistant("hi"),
        user("go"),
    ]
    with LocalProvider(reply=record) as provider, client_for(provider) as client:
        client.chat.completions.create(model="local-model", messages=messages)

    assert seen == [("rule one\nrule two", [user("hello"), assistant("hi"), user("go")])]


def test_usage_equals_the_harness_estimator(client: openai.OpenAI) -> None:
    response = ask(client, "how many tokens is this?")

    usage = response.usage
    assert usage.prompt_tokens == estimate_messages_tokens([SYSTEM, user("how many tokens is this?")])
    assert usage.completion_tokens == estimate_text_tokens("echo: how many tokens is this?")
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert usage.completion_tokens_details.reasoning_tokens == 0


def test_a_stream_reassembles_to_the_reply_and_ends_with_a_usage_chunk(client: openai.OpenAI) -> None:
    chunks = ask_streamed(client, "stream this reply please")

    assert {chunk.id for chunk in chunks} == {"chatcmpl-local-1"}
    assert {chunk.object for chunk in chunks} == {"chat.completion.chunk"}
    assert chunks[0].choices[0].delta.role == "assistant"
    content_chunks = [chunk for chunk in chunks if chunk.choices and chunk.choices[0].delta.content]
    assert len(content_chunks) > 1
    assert streamed_text(chunks) == "echo: stream this reply please"
    assert finish_reasons(chunks) == ["stop"]
    usage_chunk = chunks[-1]
    assert usage_chunk.choices == []
    assert usage_chunk.usage.prompt_tokens == estimate_messages_tokens([SYSTEM, user("stream this reply please")])
    assert usage_chunk.usage.completion_tokens == estimate_text_tokens("echo: stream this reply please")


def test_a_stream_without_include_usage_sends_no_usage(client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(model="local-model", messages=[user("hi")], stream=True)
    chunks = list(stream)

    assert all(chunk.choices for chunk in chunks)
    assert all(chunk.usage is None for chunk in chunks)
    assert streamed_text(chunks) == "echo: hi"


def test_a_stream_is_chunked_server_sent_events_ending_with_done(provider: LocalProvider) -> None:
    body = {"model": "local-model", "messages": [user("hi")], "stream": True}
    response = post_raw(provider, json.dumps(body).encode(), {"Authorization": "Bearer test-key"})

    assert response.headers["transfer-encoding"] == "chunked"
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.text.endswith("data: [DONE]\n\n")


@pytest.mark.parametrize("limit_param", ["max_tokens", "max_completion_tokens"])
def test_a_reply_over_the_token_limit_is_cut_and_ends_by_length(client: openai.OpenAI, limit_param: str) -> None:
    response = ask(client, "a long request that makes a long echo", **{limit_param: 3})

    assert response.choices[0].message.content == "echo: a long"  # 3 tokens = 12 bytes
    assert response.choices[0].finish_reason == "length"
    assert response.usage.completion_tokens == 3


def test_a_cut_never_splits_a_character() -> None:
    def accented(system: str, messages: Sequence[Mapping[str, object]]) -> str:
        return "a" + "é" * 10  # é is 2 bytes, so 4 bytes end inside the second é

    with LocalProvider(reply=accented) as provider, client_for(provider) as client:
        response = ask(client, max_tokens=1)

    assert response.choices[0].message.content == "aé"
    assert response.choices[0].finish_reason == "length"


def test_a_reply_within_the_token_limit_ends_with_stop(client: openai.OpenAI) -> None:
    response = ask(client, "hi", max_tokens=2)  # "echo: hi" is 8 bytes = 2 tokens

    assert response.choices[0].message.content == "echo: hi"
    assert response.choices[0].finish_reason == "stop"


def test_valid_sampling_params_are_accepted_and_do_not_change_the_deterministic_reply(client: openai.OpenAI) -> None:
    response = ask(client, "hi", temperature=0.2, top_p=0.9, seed=7, stop=["\n"])

    assert response.choices[0].message.content == "echo: hi"


def test_an_unknown_top_level_param_is_400_unrecognized_request_argument(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as raised:
        ask(client, "hi", extra_body={"top_k": 5})

    assert raised.value.body == {
        "message": "Unrecognized request argument supplied: top_k",
        "type": "invalid_request_error",
        "param": None,
        "code": None,
    }


# --- prefix cache ----------------------------------------------------------------------------------

# A system prompt long enough to be cached on its own: 4 + ceil(4400 / 4) = 1104 tokens.
LONG_SYSTEM = {"role": "system", "content": "You play a small game. " + "x" * (4400 - 23)}


def test_cached_tokens_are_the_shared_prefix_rounded_down_to_128_from_1024(client: openai.OpenAI) -> None:
    first = [LONG_SYSTEM, user("first move")]
    second = [*first, assistant("echo: first move"), user("second move")]

    fresh = client.chat.completions.create(model="local-model", messages=first)
    grown = client.chat.completions.create(model="local-model", messages=second)

    shared = estimate_messages_tokens(first)
    assert shared == 1104 + 7
    assert fresh.usage.prompt_tokens_details.cached_tokens == 0
    assert grown.usage.prompt_tokens_details.cached_tokens == 1024  # 1111 rounded down to 8 * 128


def test_a_shared_prefix_under_1024_tokens_is_not_cached(client: openai.OpenAI) -> None:
    first = [SYSTEM, user("first move")]
    client.chat.completions.create(model="local-model", messages=first)

    grown = client.chat.completions.create(
        model="local-model", messages=[*first, assistant("ok"), user("second move " + "y" * 4400)]
    )

    assert grown.usage.prompt_tokens > 1024
    assert grown.usage.prompt_tokens_details.cached_tokens == 0


def test_a_repeated_prompt_reports_whole_128_token_blocks() -> None:
    messages = [LONG_SYSTEM, user("z" * 1000)]  # 1104 + 4 + 250 = 1358 tokens
    with LocalProvider(reply=echo_last_message) as provider, client_for(provider) as client:
        client.chat.completions.create(model="local-model", messages=messages)
        again = client.chat.completions.create(model="local-model", messages=messages)

    assert again.usage.prompt_tokens == 1358
    assert again.usage.prompt_tokens_details.cached_tokens == 1280


def test_cached_tokens_are_zero_for_an_unseen_prefix_or_another_model(client: openai.OpenAI) -> None:
    client.chat.completions.create(model="local-model", messages=[LONG_SYSTEM, user("move")])

    other_system = client.chat.completions.create(
        model="local-model", messages=[{"role": "system", "content": "Other rules." + "x" * 4400}, user("move")]
    )
    other_model = client.chat.completions.create(model="other-model", messages=[LONG_SYSTEM, user("move")])

    assert other_system.usage.prompt_tokens_details.cached_tokens == 0
    assert other_model.usage.prompt_tokens_details.cached_tokens == 0


def test_an_edited_message_ends_the_cached_prefix(client: openai.OpenAI) -> None:
    long_turn = "move left " + "w" * 4000
    client.chat.completions.create(model="local-model", messages=[LONG_SYSTEM, user(long_turn), assistant("ok")])

    edited_turn = [LONG_SYSTEM, user(long_turn.replace("left", "right")), assistant("ok")]
    edited = client.chat.completions.create(model="local-model", messages=edited_turn)

    assert edited.usage.prompt_tokens > 2048
    assert edited.usage.prompt_tokens_details.cached_tokens == 1024  # LONG_SYSTEM alone


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_deepseek_reports_a_repeated_prefix_as_cache_hits_in_64_token_units_with_no_1024_minimum(stream: bool) -> None:
    messages = [SYSTEM, user("z" * 1000)]  # 264 tokens: 256 of them in whole 64-token units

    def usage(client: openai.OpenAI) -> openai.types.CompletionUsage:
        if not stream:
            return client.chat.completions.create(model="deepseek-reasoner", messages=messages).usage
        streamed = client.chat.completions.create(
            model="deepseek-reasoner", messages=messages, stream=True, stream_options={"include_usage": True}
        )
        return list(streamed)[-1].usage

    with LocalProvider(reply=echo_last_message) as provider:
        client = openai.OpenAI(base_url=f"{provider.base_url}/deepseek/v1", api_key="test-key", max_retries=0)
        fresh, repeated = usage(client), usage(client)

    assert estimate_messages_tokens(messages) == repeated.prompt_tokens == 264
    assert fresh.model_extra == {"prompt_cache_hit_tokens": 0, "prompt_cache_miss_tokens": 264}
    assert repeated.model_extra == {"prompt_cache_hit_tokens": 256, "prompt_cache_miss_tokens": 8}
    assert repeated.prompt_tokens_details.cached_tokens == 256


# --- context window --------------------------------------------------------------------------------


def test_a_request_over_the_context_window_is_rejected_with_openais_error() -> None:
    messages = [SYSTEM, user("x" * 80)]
    prompt_tokens = estimate_messages_tokens(messages)
    with LocalProvider(context_window=prompt_tokens + 9, reply=echo_last_message) as provider:
        with client_for(provider) as client, pytest.raises(openai.BadRequestError) as raised:
            client.chat.completions.create(model="local-model", messages=messages, max_tokens=10)

    error = raised.value
    assert error.code == "context_length_exceeded"
    assert error.param == "messages"
    assert error.type == "invalid_request_error"
    assert error.body["message"] == (
        f"This model's maximum context length is {prompt_tokens + 9} tokens. However, you requested "
        f"{prompt_tokens + 10} tokens ({prompt_tokens} in the messages, 10 in the completion). "
        "Please reduce the length of the messages or completion."
    )


def test_a_request_that_exactly_fills_the_context_window_is_served() -> None:
    messages = [SYSTEM, user("x" * 80)]
    window = estimate_messages_tokens(messages) + 10
    with LocalProvider(context_window=window, reply=echo_last_message) as provider:
        with client_for(provider) as client:
            response = client.chat.completions.create(model="local-model", messages=messages, max_tokens=10)

    assert response.choices[0].finish_reason == "length"


# --- rejected requests -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer"}, {"Authorization": "Basic dGVzdDprZXk="}],
    ids=["no-header", "bearer-without-key", "not-bearer"],
)
def test_a_request_without_a_bearer_key_is_401_and_not_admitted(
    provider: LocalProvider, headers: Mapping[str, str]
) -> None:
    body = {"model": "local-model", "messages": [user("hi")]}
    response = post_raw(provider, json.dumps(body).encode(), headers)

    assert response.status_code == 401
    assert response.json()["error"]["code"] == "invalid_api_key"
    assert response.json()["error"]["type"] == "invalid_request_error"
    assert provider.request_log == []


VALID = {"model": "local-model", "messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"messages": VALID["messages"]}, "model"),
        ({**VALID, "model": 3}, "model"),
        ({"model": "local-model"}, "messages"),
        ({**VALID, "messages": []}, "messages"),
        ({**VALID, "messages": "hi"}, "messages"),
        ({**VALID, "messages": ["hi"]}, "messages[0]"),
        ({**VALID, "messages": [{"role": "robot", "content": "hi"}]}, "messages[0].role"),
        ({**VALID, "messages": [user("hi"), {"role": "assistant", "content": None}]}, "messages.[1].content"),
        ({**VALID, "messages": [user([])]}, "messages[0].content"),
        ({**VALID, "messages": [user([{"type": "input_text", "text": "hi"}])]}, "messages[0].content[0].type"),
        (
            {**VALID, "messages": [{"role": "system", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
            "messages[0].content[0].type",
        ),
        (
            {**VALID, "messages": [user([{"type": "image_url", "image_url": {}}])]},
            "messages[0].content[0].image_url.url",
        ),
        ({**VALID, "messages": [user([{"type": "text", "text": 5}])]}, "messages[0].content[0].text"),
        ({**VALID, "max_tokens": 0}, "max_tokens"),
        ({**VALID, "max_tokens": "10"}, "max_tokens"),
        ({**VALID, "max_tokens": True}, "max_tokens"),
        ({**VALID, "max_completion_tokens": -1}, "max_completion_tokens"),
        ({**VALID, "max_tokens": 5, "max_completion_tokens": 5}, "max_tokens"),
        ({**VALID, "stream": "yes"}, "stream"),
        ({**VALID, "stream_options": {"include_usage": True}}, "stream_options"),
        ({**VALID, "stream": True, "stream_options": {"include_usage": 1}}, "stream_options.include_usage"),
    ],
)
def test_an_invalid_body_is_400_naming_the_param(provider: LocalProvider, body: dict[str, object], param: str) -> None:
    response = post_raw(provider, json.dumps(body).encode(), {"Authorization": "Bearer test-key"})

    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"
    assert response.json()["error"]["param"] == param


def test_the_sdk_raises_bad_request_naming_the_param(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as raised:
        client.chat.completions.create(model="local-model", messages=[])

    assert raised.value.param == "messages"


@pytest.mark.parametrize("content", [b"not json", b"[1, 2]"], ids=["not-json", "not-an-object"])
def test_a_body_that_is_not_a_json_object_is_400_and_not_admitted(provider: LocalProvider, content: bytes) -> None:
    response = post_raw(provider, content, {"Authorization": "Bearer test-key"})

    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"
    assert provider.request_log == []


def test_an_unknown_path_is_a_json_404(client: openai.OpenAI, provider: LocalProvider) -> None:
    with pytest.raises(openai.NotFoundError) as raised:
        client.models.list()
    wrong_method = httpx2.get(provider.openai_base_url + "/chat/completions")

    assert raised.value.body["message"] == "Invalid URL (GET /v1/models)"
    assert wrong_method.status_code == 404
    assert wrong_method.json()["error"]["message"] == "Invalid URL (GET /v1/chat/completions)"


def test_a_reply_function_that_fails_is_a_500() -> None:
    def broken(system: str, messages: Sequence[Mapping[str, object]]) -> str:
        raise RuntimeError("policy bug")

    with LocalProvider(reply=broken) as provider, client_for(provider) as client:
        with pytest.raises(openai.InternalServerError) as raised:
            ask(client)

    assert raised.value.status_code == 500


# --- faults ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize(
    ("kind", "error_class", "status", "error_type"),
    [
        ("rate_limit", openai.RateLimitError, 429, "requests"),
        ("server_error", openai.InternalServerError, 500, "server_error"),
        ("overloaded", openai.InternalServerError, 503, "overloaded_error"),
    ],
)
def test_a_status_fault_fails_only_its_scheduled_request(
    kind: str, error_class: type[openai.APIStatusError], status: int, error_type: str, stream: bool
) -> None:
    send = ask_streamed if stream else ask
    with LocalProvider(faults=[Fault(at=2, kind=kind)], reply=echo_last_message) as provider:
        with client_for(provider) as client:
            send(client)
            with pytest.raises(error_class) as raised:
                send(client)
            send(client)

    assert raised.value.status_code == status
    assert raised.value.type == error_type
    assert len(provider.request_log) == 3


def test_a_rate_limit_says_retry_now() -> None:
    with LocalProvider(faults=[Fault(at=1, kind="rate_limit")], reply=echo_last_message) as provider:
        with client_for(provider) as client, pytest.raises(openai.RateLimitError) as raised:
            ask(client)

    assert raised.value.response.headers["retry-after"] == "0"
    assert raised.value.code == "rate_limit_exceeded"


@pytest.mark.parametrize(
    ("kind", "content", "finish_reason"),
    [
        ("refusal", "", "content_filter"),
        ("truncation", "echo: hel", "length"),  # the first half of "echo: hello world!"
        ("pause_turn", "echo: hello world!", "length"),  # no pause here: the whole reply, ended as truncated
        ("empty", "", "stop"),
        ("malformed", MALFORMED_REPLY, "stop"),
    ],
)
def test_a_content_fault_shapes_only_its_scheduled_reply(kind: str, content: str, finish_reason: str) -> None:
    with LocalProvider(faults=[Fault(at=2, kind=kind)], reply=echo_last_message) as provider:
        with client_for(provider) as client:
            before = ask(client, "hello world!")
            faulted = ask(client, "hello world!")
            after = ask(client, "hello world!")

    assert faulted.choices[0].message.content == content
    assert faulted.choices[0].finish_reason == finish_reason
    assert faulted.usage.completion_tokens == estimate_text_tokens(content)
    for served in (before, after):
        assert served.choices[0].message.content == "echo: hello world!"
        assert served.choices[0].finish_reason == "stop"


@pytest.mark.parametrize(
    ("kind", "content", "finish_reason"),
    [
        ("refusal", "", "content_filter"),
        ("truncation", "echo: hel", "length"),
        ("pause_turn", "echo: hello world!", "length"),
        ("malformed", MALFORMED_REPLY, "stop"),
    ],
)
def test_a_content_fault_shapes_a_streamed_reply(kind: str, content: str, finish_reason: str) -> None:
    with LocalProvider(faults=[Fault(at=1, kind=kind)], reply=echo_last_message) as provider:
        with client_for(provider) as client:
            chunks = ask_streamed(client, "hello world!")

    assert streamed_text(chunks) == content
    assert finish_reasons(chunks) == [finish_reason]
    assert chunks[-1].usage.completion_tokens == estimate_text_tokens(content)


def test_a_context_overflow_fault_is_context_length_exceeded_for_that_request_only() -> None:
    with LocalProvider(faults=[Fault(at=1, kind="context_overflow")], reply=echo_last_message) as provider:
        with client_for(provider) as client:
            with pytest.raises(openai.BadRequestError) as raised:
                ask(client)
            assert raised.value.code == "context_length_exceeded"
            assert ask(client).choices[0].message.content == "echo: hello world"


def test_a_cut_stream_raises_a_connection_error_after_its_first_chunks() -> None:
    received: list[ChatCompletionChunk] = []
    with LocalProvider(faults=[Fault(at=1, kind="stream_cut")], reply=echo_last_message) as provider:
        with client_for(provider) as client:
            stream = client.chat.completions.create(
                model="local-model",
                messages=[user("hello world")],
                stream=True,
                stream_options={"include_usage": True},
            )
            with pytest.raises(openai.APIConnectionError) as raised:
                for chunk in stream:
                    received.append(chunk)
            recovered = ask(client, "hello world")

    assert isinstance(raised.value.__cause__, httpx2.RemoteProtocolError)
    assert len(received) == 2
    assert received[0].choices[0].delta.role == "assistant"
    assert "echo: hello world".startswith(streamed_text(received))
    assert finish_reasons(received) == []
    assert recovered.choices[0].message.content == "echo: hello world"


def test_a_cut_non_streamed_request_gets_no_response() -> None:
    with LocalProvider(faults=[Fault(at=2, kind="stream_cut")], reply=echo_last_message) as provider:
        with client_for(provider) as client:
            ask(client)
            with pytest.raises(openai.APIConnectionError) as raised:
                ask(client)
            recovered = ask(client)

    assert isinstance(raised.value.__cause__, httpx2.RemoteProtocolError)
    assert recovered.id == "chatcmpl-local-3"


def test_a_fault_must_name_a_request_ordinal_and_a_known_kind() -> None:
    with pytest.raises(ValueError):
        Fault(at=0, kind="empty")
    with pytest.raises(ValueError):
        Fault(at=1, kind="meteor_strike")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        FaultSchedule([Fault(at=1, kind="empty"), Fault(at=1, kind="refusal")])


def test_a_scheduled_fault_is_taken_once() -> None:
    schedule = FaultSchedule([Fault(at=2, kind="empty")])

    assert schedule.take(1) is None
    assert schedule.take(2) == Fault(at=2, kind="empty")
    assert schedule.take(2) is None


# --- request log -----------------------------------------------------------------------------------


def test_the_request_log_records_every_admitted_body_in_order_faulted_or_not() -> None:
    with LocalProvider(faults=[Fault(at=1, kind="server_error")], reply=echo_last_message) as provider:
        with client_for(provider) as client:
            with pytest.raises(openai.InternalServerError):
                ask(client, "first")
            ask(client, "second", temperature=0.5, max_tokens=20)

    assert provider.request_log == [
        {"model": "local-model", "messages": [SYSTEM, user("first")]},
        {"model": "local-model", "messages": [SYSTEM, user("second")], "temperature": 0.5, "max_tokens": 20},
    ]


# --- server lifecycle ------------------------------------------------------------------------------


def test_connections_are_kept_alive_between_requests(provider: LocalProvider) -> None:
    port = int(provider.base_url.rsplit(":", 1)[1])
    connection = http.client.HTTPConnection("127.0.0.1", port)
    body = json.dumps({"model": "local-model", "messages": [user("hi")]})
    headers = {"Authorization": "Bearer test-key", "Content-Type": "application/json"}
    try:
        connection.request("POST", "/v1/chat/completions", body, headers)
        first = connection.getresponse()
        first.read()
        socket_after_first = connection.sock  # http.client drops its socket when a response closes it
        connection.request("POST", "/v1/chat/completions", body, headers)
        second = connection.getresponse()
        second.read()
        socket_after_second = connection.sock
    finally:
        connection.close()

    assert (first.status, second.status) == (200, 200)
    assert socket_after_first is not None
    assert socket_after_second is socket_after_first


def test_a_stopped_provider_refuses_connections_and_frees_its_port() -> None:
    provider = LocalProvider(reply=echo_last_message).start()
    port = int(provider.base_url.rsplit(":", 1)[1])
    with client_for(provider) as client:
        ask(client)  # leaves a kept-alive connection open
        provider.stop()
        provider.stop()
        with pytest.raises(openai.APIConnectionError):
            ask(client)

    with LocalProvider(reply=echo_last_message, port=port) as again:
        assert again.base_url == f"http://127.0.0.1:{port}"


def test_two_providers_get_different_free_ports() -> None:
    with LocalProvider(reply=echo_last_message) as first, LocalProvider(reply=echo_last_message) as second:
        urls = {first.base_url, second.base_url}
        with client_for(first) as first_client, client_for(second) as second_client:
            ask(first_client, "one")
            ask(second_client, "two")

    assert len(urls) == 2
    assert [body["messages"][-1] for body in first.request_log] == [user("one")]
    assert [body["messages"][-1] for body in second.request_log] == [user("two")]


def test_base_url_needs_a_running_provider() -> None:
    with pytest.raises(RuntimeError):
        _ = LocalProvider(reply=echo_last_message).base_url


def test_a_shared_prefix_is_not_read_again_yet_what_follows_it_is_checked(provider: LocalProvider) -> None:
    base = provider.base_url
    history = [LONG_SYSTEM, user("first move"), {"role": "assistant", "content": "ok", "reasoning_content": "hm"}]
    with openai.OpenAI(base_url=base + "/open-weight/v1", api_key="k", max_retries=0) as open_weight:
        grown = open_weight.chat.completions.create(model="m", messages=history + [user("second")])
        again = open_weight.chat.completions.create(model="m", messages=history + [user("second"), user("third")])
        assert again.usage.prompt_tokens == grown.usage.prompt_tokens + estimate_messages_tokens([user("third")])
        with pytest.raises(openai.BadRequestError, match="Additional properties are not allowed"):
            open_weight.chat.completions.create(model="m", messages=history + [{**user("x"), "name": 3, "extra": 1}])
    # The same messages on a server that does not take reasoning_content: its own cache, so refused.
    with client_for(provider) as openai_client, pytest.raises(openai.BadRequestError, match="reasoning_content"):
        openai_client.chat.completions.create(model="m", messages=history + [user("second")])


def test_the_sdks_own_reply_message_replayed_as_it_came_is_accepted(client: openai.OpenAI) -> None:
    """`messages.append(choice.message)`, the common idiom: the SDK sends the message back with the
    `annotations: []` and `refusal: null` the reply carried, which the real service takes."""
    messages: list = [SYSTEM, user("hello world")]
    first = client.chat.completions.create(model="local-model", messages=messages)
    messages += [first.choices[0].message, user("and again")]
    second = client.chat.completions.create(model="local-model", messages=messages)
    assert second.choices[0].message.content


def test_replayed_annotations_that_are_not_an_array_are_refused(client: openai.OpenAI) -> None:
    replayed = {"role": "assistant", "content": "hi", "annotations": "none"}
    with pytest.raises(openai.BadRequestError, match="messages\\[2\\].annotations"):
        client.chat.completions.create(model="local-model", messages=[SYSTEM, user("x"), replayed, user("y")])
