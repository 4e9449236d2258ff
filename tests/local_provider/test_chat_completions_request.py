"""The Chat Completions wire accepts exactly what api.openai.com accepts, and rejects the rest in its words.

Each case was once wrong in one direction: laxer (a 200 where the real service answers 400) or
stricter (a 400 where it answers 200). Requests go through the real openai SDK, or raw httpx2 where
the SDK would not send them; the expected error bodies quote the real service's replies.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence

import httpx2
import openai
import pytest
from openai.types.chat import completion_create_params

from turnstate.adapters.images import data_url
from turnstate.adapters.tokens import estimate_messages_tokens, estimate_text_tokens
from turnstate.environments.frame_image import frame_to_png
from turnstate.local_provider.chat_completions_request import KNOWN_PARAMS
from turnstate.local_provider.server import LocalProvider

HI = [{"role": "user", "content": "hi"}]
TOOL_CALL = {"id": "call_1", "type": "function", "function": {"name": "move", "arguments": '{"to": "up"}'}}
MOVE_TOOL = {"type": "function", "function": {"name": "move", "parameters": {"type": "object"}}}


def echo_last_message(system: str, messages: Sequence[Mapping[str, object]]) -> str:
    return f"echo: {messages[-1]['content']}"


@pytest.fixture
def provider() -> Iterator[LocalProvider]:
    with LocalProvider(reply=echo_last_message) as running:
        yield running


@pytest.fixture
def client(provider: LocalProvider) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=provider.openai_base_url, api_key="test-key", max_retries=0) as sdk_client:
        yield sdk_client


def rejection(client: openai.OpenAI, **params: object) -> dict[str, object]:
    """The error body of a request the wire must answer with 400."""
    params.setdefault("model", "local-model")
    params.setdefault("messages", HI)
    with pytest.raises(openai.BadRequestError) as raised:
        client.chat.completions.create(**params)
    assert isinstance(raised.value.body, dict)
    return raised.value.body


def post(provider: LocalProvider, body: object, content_type: str | None = "application/json") -> httpx2.Response:
    headers = {"Authorization": "Bearer test-key"}
    if content_type is not None:
        headers["Content-Type"] = content_type
    return httpx2.post(provider.openai_base_url + "/chat/completions", content=json.dumps(body), headers=headers)


# --- laxer than the real service: each of these was a 200 ----------------------------------------


def test_the_known_params_are_exactly_the_sdks_create_params() -> None:
    sdk_params = set(completion_create_params.CompletionCreateParamsBase.__annotations__) | {"stream"}
    assert KNOWN_PARAMS == sdk_params


@pytest.mark.parametrize(
    ("params", "error"),
    [
        (
            {"extra_body": {"top_k": 40}},
            ("Unrecognized request argument supplied: top_k", None, None),
        ),
        (
            {"temperature": 5},
            (
                "Invalid 'temperature': decimal above maximum value. Expected a value <= 2, but got 5 instead.",
                "temperature",
                "decimal_above_max_value",
            ),
        ),
        (
            {"temperature": -0.5},
            (
                "Invalid 'temperature': decimal below minimum value. Expected a value >= 0, but got -0.5 instead.",
                "temperature",
                "decimal_below_min_value",
            ),
        ),
        (
            {"temperature": "hot"},
            (
                "Invalid type for 'temperature': expected a decimal, but got a string instead.",
                "temperature",
                "invalid_type",
            ),
        ),
        (
            {"top_p": 1.5},
            (
                "Invalid 'top_p': decimal above maximum value. Expected a value <= 1, but got 1.5 instead.",
                "top_p",
                "decimal_above_max_value",
            ),
        ),
        (
            {"n": 129},
            (
                "Invalid 'n': integer above maximum value. Expected a value <= 128, but got 129 instead.",
                "n",
                "integer_above_max_value",
            ),
        ),
        (
            {"n": 0},
            (
                "Invalid 'n': integer below minimum value. Expected a value >= 1, but got 0 instead.",
                "n",
                "integer_below_min_value",
            ),
        ),
        (
            {"messages": [{"role": "user", "content": "hi", "id": "msg_1"}]},
            ("Additional properties are not allowed ('id' was unexpected) - 'messages.0'", None, None),
        ),
        (
            {"messages": [*HI, {"role": "assistant", "content": "ok", "parsed": None, "notes": ""}]},
            ("Additional properties are not allowed ('parsed', 'notes' were unexpected) - 'messages.1'", None, None),
        ),
        (
            {
                "messages": [
                    *HI,
                    {"role": "assistant", "content": None, "tool_calls": [TOOL_CALL]},
                    {"role": "tool", "content": "moved"},
                ]
            },
            (
                "Missing parameter 'tool_call_id': messages with role 'tool' must have a 'tool_call_id'.",
                "messages.[2].tool_call_id",
                None,
            ),
        ),
        (
            {"tools": "yes"},
            ("Invalid type for 'tools': expected an array, but got a string instead.", "tools", "invalid_type"),
        ),
        (
            {"tools": [{"type": "function"}]},
            ("Missing required parameter: 'tools[0].function'.", "tools[0].function", "missing_required_parameter"),
        ),
        (
            {"response_format": {"type": "bogus"}},
            (
                "Invalid value: 'bogus'. Supported values are: 'json_object', 'json_schema', and 'text'.",
                "response_format.type",
                "invalid_value",
            ),
        ),
        (
            {"response_format": "json"},
            (
                "Invalid type for 'response_format': expected an object, but got a string instead.",
                "response_format",
                "invalid_type",
            ),
        ),
        (
            {"response_format": {"type": "json_schema"}},
            (
                "Missing required parameter: 'response_format.json_schema'.",
                "response_format.json_schema",
                "missing_required_parameter",
            ),
        ),
        (
            {"messages": [{"role": "robot", "content": "hi"}]},
            (
                "Invalid value: 'robot'. Supported values are: "
                "'system', 'assistant', 'user', 'function', 'tool', and 'developer'.",
                "messages[0].role",
                "invalid_value",
            ),
        ),
    ],
    ids=[
        "unknown-param",
        "temperature-above-2",
        "temperature-below-0",
        "temperature-a-string",
        "top_p-above-1",
        "n-above-128",
        "n-zero",
        "unknown-message-key",
        "unknown-message-keys",
        "tool-message-without-tool_call_id",
        "tools-a-string",
        "tool-without-function",
        "response_format-unknown-type",
        "response_format-a-string",
        "json_schema-without-schema",
        "unknown-role",
    ],
)
def test_a_request_the_real_service_rejects_is_400_in_its_words(
    client: openai.OpenAI, params: dict[str, object], error: tuple[str, str | None, str | None]
) -> None:
    message, param, code = error
    assert rejection(client, **params) == {
        "message": message,
        "type": "invalid_request_error",
        "param": param,
        "code": code,
    }


def test_the_first_offending_field_wins(provider: LocalProvider) -> None:
    unknown_first = post(provider, {"model": "m", "messages": HI, "temperature": 5, "foo": 1})
    messages_before_temperature = post(provider, {"temperature": 5, "model": "m", "messages": []})

    assert unknown_first.json()["error"]["message"] == "Unrecognized request argument supplied: foo"
    assert messages_before_temperature.json()["error"]["param"] == "messages"


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
def test_a_body_not_sent_as_json_is_400_unsupported_content_type(
    provider: LocalProvider, content_type: str | None
) -> None:
    response = post(provider, {"model": "local-model", "messages": HI}, content_type)

    shown = content_type or ""
    assert response.status_code == 400
    assert response.json()["error"] == {
        "message": f"Unsupported content type: '{shown}'. This API method only accepts 'application/json' "
        f"requests, but you specified the header 'Content-Type: {shown}'. Please try again with a supported "
        "content type.",
        "type": "invalid_request_error",
        "param": None,
        "code": "unsupported_content_type",
    }
    assert provider.request_log == []


def test_json_with_a_charset_is_json(provider: LocalProvider) -> None:
    response = post(provider, {"model": "local-model", "messages": HI}, "Application/JSON; charset=utf-8")

    assert response.status_code == 200


@pytest.mark.parametrize("constant", ["NaN", "Infinity"])
def test_a_body_with_a_non_json_number_is_unparseable(provider: LocalProvider, constant: str) -> None:
    raw = '{"model": "local-model", "messages": [{"role": "user", "content": "hi"}], "temperature": %s}' % constant
    response = httpx2.post(
        provider.openai_base_url + "/chat/completions",
        content=raw,
        headers={"Authorization": "Bearer test-key", "Content-Type": "application/json"},
    )

    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith("We could not parse the JSON body of your request.")


# --- n choices -------------------------------------------------------------------------------------


def test_n_returns_n_choices_and_bills_every_one(client: openai.OpenAI) -> None:
    response = client.chat.completions.create(model="local-model", messages=HI, n=3)

    assert [choice.index for choice in response.choices] == [0, 1, 2]
    assert {choice.message.content for choice in response.choices} == {"echo: hi"}
    assert {choice.finish_reason for choice in response.choices} == {"stop"}
    assert response.usage is not None
    assert response.usage.completion_tokens == 3 * estimate_text_tokens("echo: hi")


def test_a_stream_with_n_carries_each_choice_by_index(client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(
        model="local-model", messages=HI, n=2, stream=True, stream_options={"include_usage": True}
    )
    texts: dict[int, str] = {}
    finished: list[int] = []
    chunks = list(stream)
    for chunk in chunks:
        for choice in chunk.choices:
            texts[choice.index] = texts.get(choice.index, "") + (choice.delta.content or "")
            if choice.finish_reason:
                finished.append(choice.index)

    assert texts == {0: "echo: hi", 1: "echo: hi"}
    assert finished == [0, 1]
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 2 * estimate_text_tokens("echo: hi")


# --- stricter than the real service: each of these was a 400 -------------------------------------


def test_developer_messages_instruct_the_model_like_system_messages() -> None:
    seen: list[tuple[str, list[dict[str, object]]]] = []

    def record(system: str, messages: Sequence[Mapping[str, object]]) -> str:
        seen.append((system, [dict(message) for message in messages]))
        return "ok"

    messages = [
        {"role": "developer", "content": "rule one"},
        {"role": "system", "content": "rule two"},
        {"role": "developer", "content": [{"type": "text", "text": "rule three"}], "name": "ops"},
        {"role": "user", "content": "go"},
    ]
    with LocalProvider(reply=record) as provider:
        with openai.OpenAI(base_url=provider.openai_base_url, api_key="k", max_retries=0) as client:
            client.chat.completions.create(model="local-model", messages=messages)

    assert seen == [("rule one\nrule two\nrule three", [{"role": "user", "content": "go"}])]


def test_an_image_part_is_accepted_read_as_no_text_without_a_legend_and_counted(client: openai.OpenAI) -> None:
    image = {"type": "image_url", "image_url": {"url": data_url(frame_to_png([[0, 5], [5, 0]])), "detail": "low"}}
    content = [{"type": "text", "text": "what is "}, image, {"type": "text", "text": "this?"}]
    response = client.chat.completions.create(model="local-model", messages=[{"role": "user", "content": content}])

    assert response.choices[0].message.content == "echo: what is \nthis?"  # the image ends a line, and shows nothing
    assert response.usage is not None
    assert response.usage.prompt_tokens == estimate_messages_tokens([{"role": "user", "content": content}])
    assert response.usage.prompt_tokens > estimate_messages_tokens([{"role": "user", "content": "what is this?"}])


@pytest.mark.parametrize("content", [{"content": None}, {}], ids=["content-null", "content-absent"])
def test_a_tool_call_turn_replays_with_null_content_and_a_tool_result(
    client: openai.OpenAI, content: dict[str, object]
) -> None:
    messages = [
        *HI,
        {"role": "assistant", **content, "tool_calls": [TOOL_CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": "moved up"},
    ]
    response = client.chat.completions.create(model="local-model", messages=messages, tools=[MOVE_TOOL])

    assert response.choices[0].message.content == "echo: moved up"


def test_an_assistant_without_content_or_tool_calls_is_still_rejected(client: openai.OpenAI) -> None:
    body = rejection(client, messages=[*HI, {"role": "assistant", "content": None}])

    assert body["message"] == "Invalid value for 'content': expected a string, got null."
    assert body["param"] == "messages.[1].content"


def test_well_formed_optional_params_are_accepted(client: openai.OpenAI) -> None:
    response = client.chat.completions.create(
        model="local-model",
        messages=HI,
        tools=[MOVE_TOOL],
        tool_choice="auto",
        response_format={"type": "json_object"},
        presence_penalty=-2,
        frequency_penalty=2,
        user="tester",
        store=False,
        metadata={"run": "1"},
    )

    assert response.choices[0].message.content == "echo: hi"


# --- reasoning models take max_completion_tokens only ----------------------------------------------


@pytest.mark.parametrize("model", ["o1-mini", "o3", "o4-mini", "gpt-5", "gpt-5-mini"])
def test_a_reasoning_model_rejects_max_tokens_as_openai_does(client: openai.OpenAI, model: str) -> None:
    body = rejection(client, model=model, max_tokens=16)
    served = client.chat.completions.create(model=model, messages=HI, max_completion_tokens=16)

    assert body == {
        "message": "Unsupported parameter: 'max_tokens' is not supported with this model. "
        "Use 'max_completion_tokens' instead.",
        "type": "invalid_request_error",
        "param": "max_tokens",
        "code": "unsupported_parameter",
    }
    assert served.choices[0].message.content == "echo: hi"


@pytest.mark.parametrize("model", ["gpt-4o", "local-model"])
def test_other_models_take_either_output_limit(client: openai.OpenAI, model: str) -> None:
    for limit in ("max_tokens", "max_completion_tokens"):
        response = client.chat.completions.create(model=model, messages=HI, **{limit: 2})
        assert response.choices[0].message.content == "echo: hi"
