"""Responses request validation: each invalid body is a 400 naming the param as api.openai.com does,
and every field the installed SDK can send is known."""

from __future__ import annotations

import json
import typing
from collections.abc import Iterator, Mapping
from typing import Any

import httpx2
import openai
import pytest
from openai.types.responses import (
    ResponseReasoningItemParam,
    response_compact_params,
    response_create_params,
    response_text_config_param,
    tool_param,
)

from turnstate.local_provider.responses_request import (
    COMPACT_PARAMS,
    COMPACT_SERVICE_TIERS,
    CREATE_PARAMS,
    ITEM_STATUSES,
    SERVICE_TIERS,
    TEXT_FORMAT_TYPES,
    TOOL_CHOICE_MODES,
    TOOL_CHOICE_TYPES,
    TOOL_TYPES,
    VERBOSITY_VALUES,
)
from turnstate.local_provider.server import LocalProvider

from .test_policy import EXAMPLE_ROWS, frame_text
from .test_responses import MODEL, client_for

VALID: dict[str, Any] = {"model": MODEL, "input": "hi"}


def message(role: str, content: object, **extra: object) -> dict[str, object]:
    return {"role": role, "content": content, **extra}


def output_text(text: str = "x", **extra: object) -> dict[str, object]:
    return {"type": "output_text", "text": text, "annotations": [], **extra}


@pytest.fixture
def provider() -> Iterator[LocalProvider]:
    with LocalProvider() as running:
        yield running


def post(provider: LocalProvider, body: Mapping[str, object], path: str = "/responses") -> httpx2.Response:
    headers = {"Authorization": "Bearer test-key", "Content-Type": "application/json"}
    return httpx2.post(provider.openai_base_url + path, content=json.dumps(body).encode(), headers=headers)


def test_the_known_params_are_exactly_what_the_installed_sdk_sends() -> None:
    create = set(typing.get_type_hints(response_create_params.ResponseCreateParamsBase)) | {"stream"}
    compact = set(typing.get_type_hints(response_compact_params.ResponseCompactParams))

    assert CREATE_PARAMS == create
    assert COMPACT_PARAMS == compact


def test_an_unknown_top_level_param_is_400_unknown_parameter(provider: LocalProvider) -> None:
    with client_for(provider) as client, pytest.raises(openai.BadRequestError) as raised:
        client.responses.create(model=MODEL, input="hi", extra_body={"top_k": 5})

    assert raised.value.body == {
        "message": "Unknown parameter: 'top_k'.",
        "type": "invalid_request_error",
        "param": "top_k",
        "code": "unknown_parameter",
    }


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"input": "hi"}, "model"),
        ({**VALID, "model": 3}, "model"),
        ({"model": MODEL}, "input"),
        ({**VALID, "input": 5}, "input"),
        ({**VALID, "input": ["hi"]}, "input[0]"),
        ({**VALID, "input": [{"content": "hi"}]}, "input[0].role"),
        ({**VALID, "input": [message("robot", "hi")]}, "input[0].role"),
        ({**VALID, "input": [message("user", None)]}, "input[0].content"),
        ({**VALID, "input": [message("user", "hi", id=1)]}, "input[0].id"),
        ({**VALID, "input": [message("user", "hi", phase="final_answer")]}, "input[0].phase"),
        ({**VALID, "input": [message("user", [output_text()])]}, "input[0].content[0].type"),
        ({**VALID, "input": [message("user", [{"type": "input_text"}])]}, "input[0].content[0].text"),
        ({**VALID, "input": [message("user", [{"type": "input_text", "text": "x", "x": 1}])]}, "input[0].content[0].x"),
        ({**VALID, "input": [message("assistant", [{"type": "input_text", "text": "x"}])]}, "input[0].content[0].type"),
        (
            {**VALID, "input": [message("assistant", [{"type": "output_text", "text": "x"}])]},
            "input[0].content[0].annotations",
        ),
        ({**VALID, "input": [{"type": "reasoning", "summary": []}]}, "input[0].id"),
        ({**VALID, "input": [{"type": "reasoning", "id": "rs_1"}]}, "input[0].summary"),
        (
            {**VALID, "input": [{"type": "reasoning", "id": "rs_1", "summary": [], "status": "done"}]},
            "input[0].status",
        ),
        (
            {**VALID, "input": [{"type": "reasoning", "id": "rs_1", "summary": [{"text": "x"}]}]},
            "input[0].summary[0].type",
        ),
        (
            {**VALID, "input": [{"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": 5}]},
            "input[0].encrypted_content",
        ),
        ({**VALID, "input": [{"type": "compaction", "id": "cmp_1"}]}, "input[0].encrypted_content"),
        (
            {**VALID, "input": [{"type": "compaction", "encrypted_content": "x", "created_by": "me"}]},
            "input[0].created_by",
        ),
        ({**VALID, "input": [{"type": "function_call", "name": "f", "arguments": "{}"}]}, "input[0].call_id"),
        ({**VALID, "input": [{"type": "function_call_output", "call_id": "c"}]}, "input[0].output"),
        ({**VALID, "input": [{"type": "web_search_call", "id": "ws_1"}]}, "input[0].type"),
        ({**VALID, "include": ["reasoning.everything"]}, "include[0]"),
        ({**VALID, "include": "reasoning.encrypted_content"}, "include"),
        ({**VALID, "reasoning": {"summary": "long"}}, "reasoning.summary"),
        ({**VALID, "reasoning": {"effort": "extreme"}}, "reasoning.effort"),
        ({**VALID, "reasoning": {"budget": 5}}, "reasoning.budget"),
        ({**VALID, "store": "no"}, "store"),
        ({**VALID, "stream": 1}, "stream"),
        ({**VALID, "background": True}, "background"),
        ({**VALID, "temperature": 2.5}, "temperature"),
        ({**VALID, "top_p": -0.1}, "top_p"),
        ({**VALID, "max_output_tokens": 15}, "max_output_tokens"),
        ({**VALID, "max_output_tokens": "64"}, "max_output_tokens"),
        ({**VALID, "context_management": {"type": "compaction"}}, "context_management"),
        ({**VALID, "context_management": [{"type": "summarize"}]}, "context_management[0].type"),
        ({**VALID, "context_management": [{"compact_threshold": 5}]}, "context_management[0].type"),
        (
            {**VALID, "context_management": [{"type": "compaction", "compact_threshold": 0}]},
            "context_management[0].compact_threshold",
        ),
        ({**VALID, "context_management": [{"type": "compaction", "threshold": 5}]}, "context_management[0].threshold"),
        ({**VALID, "truncation": "sometimes"}, "truncation"),
        ({**VALID, "stream_options": {"include_obfuscation": False}}, "stream_options"),
        ({**VALID, "previous_response_id": 5}, "previous_response_id"),
        ({**VALID, "conversation": "conv_1"}, "conversation"),
        ({**VALID, "instructions": ["be brief"]}, "instructions"),
        ({**VALID, "tools": [{"name": "f"}]}, "tools[0].type"),
        ({**VALID, "tools": [{"type": "function", "name": "f", "strict": "yes"}]}, "tools[0].strict"),
        ({**VALID, "tools": [{"type": "function", "name": "f", "parameters": "{}"}]}, "tools[0].parameters"),
        ({**VALID, "tool_choice": {"name": "f"}}, "tool_choice.type"),
        ({**VALID, "tool_choice": 1}, "tool_choice"),
        ({**VALID, "text": {"format": {}}}, "text.format.type"),
        ({**VALID, "text": {"style": "plain"}}, "text.style"),
        ({**VALID, "metadata": {str(key): "v" for key in range(17)}}, "metadata"),
        ({**VALID, "metadata": {"k" * 65: "v"}}, "metadata." + "k" * 65),
        ({**VALID, "metadata": {"run": "x" * 513}}, "metadata.run"),
    ],
)
def test_an_invalid_body_is_400_naming_the_param(provider: LocalProvider, body: dict[str, object], param: str) -> None:
    response = post(provider, body)

    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param


def test_the_words_follow_the_service(provider: LocalProvider) -> None:
    created_by = post(
        provider, {**VALID, "input": [{"type": "compaction", "encrypted_content": "x", "created_by": "me"}]}
    )
    low = post(provider, {**VALID, "max_output_tokens": 15})
    missing = post(provider, {"input": "hi"})

    assert created_by.json()["error"] == {
        "message": "Unknown parameter: 'input[0].created_by'.",
        "type": "invalid_request_error",
        "param": "input[0].created_by",
        "code": "unknown_parameter",
    }
    assert low.json()["error"]["message"] == (
        "Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 16, but got 15 instead."
    )
    assert missing.json()["error"]["message"] == "Missing required parameter: 'model'."


def test_a_valid_request_is_served_and_its_settings_echoed(provider: LocalProvider) -> None:
    served = post(provider, {**VALID, "temperature": 0.2, "top_p": 0.5, "metadata": {"run": "x"}, "store": False})

    assert served.status_code == 200
    body = served.json()
    assert (body["temperature"], body["top_p"], body["metadata"], body["store"]) == (0.2, 0.5, {"run": "x"}, False)


def test_every_accepted_input_form_is_read(provider: LocalProvider) -> None:
    """Short and typed messages, content parts, system and developer messages, tool items."""
    frame = frame_text(EXAMPLE_ROWS, beacon="C")
    body = {
        "model": MODEL,
        "input": [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Play well."}]},
            message("user", "Earlier question"),
            message("assistant", [output_text("Earlier answer")], phase="final_answer"),
            {"type": "function_call", "call_id": "c1", "name": "look", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "nothing"},
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": frame}],
                "status": "completed",
            },
        ],
    }

    response = post(provider, body)

    assert response.status_code == 200, response.text
    text = response.json()["output"][1]["content"][0]["text"]
    assert "heading for door C (beacon seen)" in text


def test_a_string_input_is_one_user_message(provider: LocalProvider) -> None:
    response = post(provider, {"model": MODEL, "input": frame_text(EXAMPLE_ROWS, beacon="B")})

    assert "heading for door B" in response.json()["output"][1]["content"][0]["text"]


def test_an_item_reference_reads_a_stored_item(provider: LocalProvider) -> None:
    first = post(provider, {"model": MODEL, "input": frame_text(EXAMPLE_ROWS, beacon="C")}).json()
    reasoning_id, message_id = (item["id"] for item in first["output"])
    references = [{"type": "item_reference", "id": reasoning_id}, {"type": "item_reference", "id": message_id}]
    dark = message("user", frame_text(EXAMPLE_ROWS, beacon="dark"))

    response = post(provider, {"model": MODEL, "input": [*references, dark]})
    unknown = post(provider, {"model": MODEL, "input": [{"type": "item_reference", "id": "msg_nope"}]})

    assert "heading for door C (beacon seen)" in response.json()["output"][1]["content"][0]["text"]
    assert unknown.status_code == 404
    assert unknown.json()["error"]["param"] == "input"


# --- spec values, through the SDK ------------------------------------------------------------------


def literal_values(hint: object) -> set[str]:
    """Every string a Literal (possibly Optional, Required or in a Union) allows."""
    if typing.get_origin(hint) is typing.Literal:
        return {value for value in typing.get_args(hint) if isinstance(value, str)}
    return set().union(*(literal_values(arg) for arg in typing.get_args(hint)))


def test_the_accepted_values_are_the_installed_sdks() -> None:
    create = typing.get_type_hints(response_create_params.ResponseCreateParamsBase)
    compact = typing.get_type_hints(response_compact_params.ResponseCompactParams)
    text = typing.get_type_hints(response_text_config_param.ResponseTextConfigParam)
    choice_objects = typing.get_args(create["tool_choice"])[1:]

    assert set(SERVICE_TIERS) == literal_values(create["service_tier"])
    assert set(COMPACT_SERVICE_TIERS) == literal_values(compact["service_tier"])
    assert set(TOOL_TYPES) == {literal for tool in typing.get_args(tool_param.ToolParam) for literal in tool_type(tool)}
    assert set(TOOL_CHOICE_MODES) == literal_values(typing.get_args(create["tool_choice"])[0])
    assert set(TOOL_CHOICE_TYPES) == {literal for choice in choice_objects for literal in tool_type(choice)}
    assert set(TEXT_FORMAT_TYPES) == {literal for fmt in typing.get_args(text["format"]) for literal in tool_type(fmt)}
    assert set(VERBOSITY_VALUES) == literal_values(text["verbosity"])
    assert set(ITEM_STATUSES) == literal_values(typing.get_type_hints(ResponseReasoningItemParam)["status"])


def tool_type(typed_dict: object) -> set[str]:
    return literal_values(typing.get_type_hints(typed_dict)["type"])


@pytest.mark.parametrize(
    ("settings", "param", "code"),
    [
        ({"service_tier": "gold"}, "service_tier", "invalid_value"),
        ({"tools": [{"type": "bogus"}]}, "tools[0].type", "invalid_value"),
        ({"tools": [{"type": "function", "parameters": {}}]}, "tools[0].name", "missing_required_parameter"),
        ({"tool_choice": "sometimes"}, "tool_choice", "invalid_value"),
        ({"tool_choice": {"type": "tool"}}, "tool_choice.type", "invalid_value"),
        ({"text": {"format": {"type": "xml"}}}, "text.format.type", "invalid_value"),
        ({"text": {"verbosity": "loud"}}, "text.verbosity", "invalid_value"),
        ({"metadata": {"run": 7}}, "metadata.run", "invalid_type"),
    ],
    ids=lambda value: value if isinstance(value, str) else None,
)
def test_a_spec_invalid_setting_is_a_400_naming_its_param(
    provider: LocalProvider, settings: dict[str, Any], param: str, code: str
) -> None:
    with client_for(provider) as client, pytest.raises(openai.BadRequestError) as raised:
        client.responses.create(model=MODEL, input="hi", **settings)

    assert isinstance(raised.value.body, dict)
    assert (raised.value.body["type"], raised.value.body["param"], raised.value.body["code"]) == (
        "invalid_request_error",
        param,
        code,
    )


def test_the_words_of_a_spec_invalid_setting_follow_the_service(provider: LocalProvider) -> None:
    with client_for(provider) as client:
        with pytest.raises(openai.BadRequestError) as tier:
            client.responses.create(model=MODEL, input="hi", service_tier="gold")  # type: ignore[arg-type]
        with pytest.raises(openai.BadRequestError) as metadata:
            client.responses.create(model=MODEL, input="hi", metadata={"run": 7})  # type: ignore[dict-item]

    assert tier.value.body == {
        "message": "Invalid value: 'gold'. Supported values are: 'auto', 'default', 'flex', 'scale', 'priority', "
        "'fast', and 'ultrafast'.",
        "type": "invalid_request_error",
        "param": "service_tier",
        "code": "invalid_value",
    }
    assert isinstance(metadata.value.body, dict)
    assert (
        metadata.value.body["message"]
        == "Invalid type for 'metadata.run': expected a string, but got an integer instead."
    )


def test_the_compact_endpoint_takes_its_own_service_tiers(provider: LocalProvider) -> None:
    """Its spec type is ServiceTierEnum, without scale and ultrafast."""
    with client_for(provider) as client:
        served = client.responses.compact(model=MODEL, input="hi", service_tier="flex")
        with pytest.raises(openai.BadRequestError) as raised:
            client.responses.compact(model=MODEL, input="hi", extra_body={"service_tier": "scale"})

    assert served.object == "response.compaction"
    assert isinstance(raised.value.body, dict) and raised.value.body["param"] == "service_tier"


def test_every_spec_valid_setting_is_served(provider: LocalProvider) -> None:
    settings: dict[str, Any] = {
        "service_tier": "priority",
        "tools": [{"type": "function", "name": "look", "parameters": None, "strict": None}, {"type": "web_search"}],
        "tool_choice": {"type": "function", "name": "look"},
        "text": {"format": {"type": "json_object"}, "verbosity": "low"},
        "metadata": {str(key): "v" * 512 for key in range(16)},
    }
    with client_for(provider) as client:
        response = client.responses.create(model=MODEL, input="hi", **settings)

    assert response.status == "completed"
    assert response.text is not None and response.text.verbosity == "low"


SCHEMA = {
    "type": "object",
    "properties": {"door": {"type": "string"}},
    "required": ["door"],
    "additionalProperties": False,
}
OPEN_SCHEMA = {"type": "object", "properties": {"door": {"type": "string"}}}


@pytest.mark.parametrize(
    ("tool", "strict"),
    [
        ({"type": "function", "name": "enter", "parameters": SCHEMA}, True),
        ({"type": "function", "name": "enter", "parameters": OPEN_SCHEMA}, False),
        ({"type": "function", "name": "enter", "parameters": SCHEMA, "strict": False}, False),
        ({"type": "function", "name": "enter", "parameters": OPEN_SCHEMA, "strict": None}, False),
        ({"type": "function", "name": "wait"}, True),
    ],
    ids=["compatible", "open schema", "strict false", "strict null", "no parameters"],
)
def test_an_echoed_function_tool_carries_strict(provider: LocalProvider, tool: dict[str, Any], strict: bool) -> None:
    """The response's FunctionTool requires strict; omitted, it is what Responses applied: strict
    when the schema is strict-compatible, else not (the spec's FunctionToolParam.strict)."""
    with client_for(provider) as client:
        response = client.responses.create(model=MODEL, input="hi", tools=[tool])

    echoed = response.tools[0].model_dump(mode="json", exclude_unset=True)
    assert echoed == {
        "type": "function",
        "name": tool["name"],
        "description": None,
        "parameters": tool.get("parameters"),
        "strict": strict,
    }
