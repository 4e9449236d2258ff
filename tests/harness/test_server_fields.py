"""What a profile sends a server beyond the API's own fields: `request.extra_body` (JSON, bounded,
never over a field the adapter sets), `request.action_grammar` (a GBNF grammar of the environment's
actions) and `client.base_url_env`. The real server's side is tests/real_server/."""

from __future__ import annotations

from dataclasses import replace

import pytest
import yaml

from turnstate.adapters.contract import ModelRequest, RequestSettings, ToolSpec, server_message
from turnstate.adapters.registry import descriptor_for
from turnstate.session import scaffold
from turnstate.session.endpoint import RunSetupError, open_endpoint
from turnstate.session.profile import PROFILES_DIR, parse_profile
from turnstate.session.session import Session
from turnstate.session.settings_file import ProfileError

WIRES = {  # a shipped profile of each adapter that takes extra fields
    "openai.chat_completions.v1": "llama-chat-manual-rolling",
    "open_source.chat_completions.v1": "llama-open-weight-continuous",
    "openai.responses.v1": "llama-responses-continuous",
    "anthropic.messages.v1": "llama-messages-continuous",
}


def shipped(name: str) -> dict:
    return yaml.safe_load((PROFILES_DIR / f"{name}.yaml").read_text())


def problems(data: dict) -> str:
    with pytest.raises(ProfileError) as raised:
        parse_profile(yaml.safe_dump(data), "x.yaml")
    return str(raised.value)


@pytest.mark.parametrize("adapter_id", list(WIRES))
def test_an_extra_field_the_adapter_sets_itself_is_refused_naming_where_it_comes_from(adapter_id):
    data = shipped(WIRES[adapter_id])
    data["request"]["extra_body"] = {"model": "other"}
    assert "request.extra_body.model: " in problems(data) and "from request.model" in problems(data)


def test_an_extra_field_an_option_sets_is_refused_naming_the_option():
    data = shipped("llama-responses-continuous")
    data["request"]["extra_body"] = {"store": True}
    assert "sets 'store' itself, from request.options.store" in problems(data)


def test_extra_fields_are_refused_where_the_api_takes_none_and_past_their_bound():
    gemini = yaml.safe_load((PROFILES_DIR / "local-gemini-harness-summary.yaml").read_text())
    gemini["request"]["extra_body"] = {"grammar": 'root ::= "x"'}
    assert "sends no extra body fields" in problems(gemini)
    data = shipped("llama-chat-manual-rolling")
    data["request"]["extra_body"] = {"json_schema": {"description": "x" * 20_000}}
    assert "past the 16384 a request's extra fields may add" in problems(data)


@pytest.mark.parametrize("adapter_id", list(WIRES))
def test_each_adapter_sends_the_extra_fields_beside_its_own_and_sets_no_field_it_does_not_declare(adapter_id):
    adapter = descriptor_for(adapter_id).load()
    settings = RequestSettings("m", 32, stream=True, temperature=0.0 if adapter.takes_temperature else None)
    extra = {"cache_prompt": True, "model": "not this"}  # a collision validation refuses: the adapter's wins
    built = adapter(None, replace(settings, extra_body=extra)).build_request(
        ModelRequest("system", ({"role": "user", "content": "hi"},), tools=(scaffold.action_tools(["UP"])[0],))
    )
    assert built["model"] == "m"
    assert set(built) - {"cache_prompt"} <= set(adapter.body_fields)
    assert built.get("cache_prompt") is (None if adapter_id == "anthropic.messages.v1" else True)


def test_the_action_grammar_lists_each_action_and_each_value_its_schema_allows():
    mark = ToolSpec(
        "MARK",
        "Mark a cell.",
        {
            "type": "object",
            "properties": {"x": {"type": "integer", "minimum": 0, "maximum": 2}, "colour": {"enum": ["red", 'b"lue']}},
        },
    )
    grammar = scaffold.action_grammar((*scaffold.action_tools(["UP", "RESET"]), mark))
    assert grammar == (
        'root ::= "ACTION: " action\n'
        'action ::= ("UP") | ("RESET") | ("MARK" " " ("0" | "1" | "2") " " ("red" | "b\\"lue"))\n'
    )
    assert 'root ::= "<think>" thought "</think>\\n" "ACTION: " action' in scaffold.action_grammar(
        (mark,), thinking=True
    )
    free = ToolSpec("SAY", "Say.", {"type": "object", "properties": {"text": {"type": "string"}}})
    with pytest.raises(ValueError, match="action SAY argument 'text'.*no enum or integer range"):
        scaffold.action_grammar((free,))


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"runtime": {"adapter_id": "anthropic.messages.v1"}}, "sends no grammar"),
        ({"agent": {"action_mode": "tools"}}, "agent.action_mode is tools"),
        (
            {"request": {"extra_body": {"grammar": 'root ::= "x"'}}},
            "request.extra_body.grammar: request.action_grammar sets",
        ),
    ],
    ids=["messages", "tools mode", "both"],
)
def test_an_action_grammar_is_refused_where_it_cannot_be_sent_or_would_be_sent_twice(change, expected):
    data = shipped("llama-chat-manual-rolling")
    for section, values in change.items():
        data[section] = {**data[section], **values}
    if change.get("runtime"):
        data["runtime"]["strategy"] = "continuous_conversation"
        data["client"]["base_url"] = "http://127.0.0.1:8080"
        del data["request"]["temperature"]
    assert expected in problems(data)


def test_an_action_grammar_beside_offered_tools_is_refused_before_any_call(monkeypatch):
    """A grammar holds every reply to an ACTION line, so no tool could be called (llama-server refuses
    the two together with a 400): the session refuses them before its first request."""
    monkeypatch.setenv("LLAMA_KEY", "x")
    monkeypatch.setenv("LLAMA_BASE_URL", "http://127.0.0.1:9/v1")  # nothing listens: no call is made
    profile = parse_profile((PROFILES_DIR / "llama-chat-manual-rolling.yaml").read_text())
    look = ToolSpec("look", "Look at a cell.", {"type": "object", "properties": {}})
    with (
        pytest.raises(RunSetupError, match=r"the tools offered \(look\) could never be called; remove request"),
        Session(profile, actions=("UP",), tools=(look,)),
    ):
        pass


def test_base_url_env_replaces_the_default_url_when_set_and_names_a_bad_value(monkeypatch):
    client = parse_profile((PROFILES_DIR / "llama-chat-manual-rolling.yaml").read_text()).client
    monkeypatch.setenv("LLAMA_KEY", "x")
    monkeypatch.delenv("LLAMA_BASE_URL", raising=False)
    with open_endpoint(client) as endpoint:
        assert endpoint.base_url == "http://127.0.0.1:8080/v1"
    monkeypatch.setenv("LLAMA_BASE_URL", "http://10.0.0.7:9000/v1")
    with open_endpoint(client) as endpoint:
        assert endpoint.base_url == "http://10.0.0.7:9000/v1"
    monkeypatch.setenv("LLAMA_BASE_URL", "10.0.0.7:9000")
    with (
        pytest.raises(RunSetupError, match="LLAMA_BASE_URL, which holds '10.0.0.7:9000', not an http"),
        open_endpoint(client),
    ):
        pass
    local = shipped("local-manual-rolling")
    local["client"]["base_url_env"] = "LLAMA_BASE_URL"
    assert "client.base_url_env: the embedded local provider has no URL to override" in problems(local)


def test_every_shipped_llama_profile_names_its_url_variable_and_a_loopback_default():
    for name in WIRES.values():
        client = shipped(name)["client"]
        assert client["base_url_env"] == "LLAMA_BASE_URL" and client["base_url"].startswith("http://127.0.0.1:8080")


def test_a_refusals_message_is_made_safe_for_the_console_its_opaque_runs_replaced_and_cut():
    opaque = "gAAAAABpQ2x5" * 4  # what encrypted state and keys look like: one long run of token characters
    said = server_message(400, f"Invalid encrypted_content {opaque} in input[3]\nsecond line")
    assert said == "HTTP 400: Invalid encrypted_content […] in input[3]"
    assert len(server_message(400, "word " * 100)) == len("HTTP 400: ") + 200
    assert server_message(404, "") == "HTTP 404"
