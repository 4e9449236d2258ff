"""Profiles: every shipped profile validates; bad ones are rejected naming file, key path and fix."""

from __future__ import annotations

import pytest
import yaml

from turnstate.local_provider.faults import Fault
from turnstate.session import endpoint
from turnstate.session.profile import DEFAULT_PROFILE, PROFILES_DIR, load_profile, parse_profile
from turnstate.session.settings_file import ProfileError
from turnstate.strategies.compaction import NativeByCall
from turnstate.strategies.strategy import Backoff

BASE = yaml.safe_load(DEFAULT_PROFILE.read_text())
# continuous_conversation over Responses with harness summaries (the changes of one test case)
SUMMARY = {
    "runtime__adapter_id": "openai.responses.v1",
    "runtime__strategy": "continuous_conversation",
    "runtime__compaction__strategy": "harness_summary",
    "request__options": {
        "store": False,
        "include": ["reasoning.encrypted_content"],
        "reasoning": {"summary": "auto", "context": "auto"},
    },
}


def profile_text(base: dict | None = None, **sections) -> str:
    """`base` (the default profile if None) with each `section__key` set to its value, or deleted."""
    data = {key: (value if not isinstance(value, dict) else dict(value)) for key, value in (base or BASE).items()}
    for path, value in sections.items():
        *parents, leaf = path.split("__")
        target = data
        for parent in parents:
            target[parent] = dict(target.get(parent) or {})
            target = target[parent]
        if value is DELETE:
            del target[leaf]
        else:
            target[leaf] = value
    return yaml.safe_dump(data)


DELETE = object()


@pytest.mark.parametrize("path", sorted(PROFILES_DIR.glob("*.yaml")), ids=lambda path: path.name)
def test_every_shipped_profile_is_valid(path):
    assert load_profile(path).id


# (change, key path the error must name, text it must contain: the fix or the contradiction)
# fmt: off
REJECTED = [
    ({"agent__max_retrys": 3}, "agent.max_retrys", "remove it or correct the spelling (allowed here: action_mode, backoff, max_actions, max_actions_baseline_multiplier, max_context_length, max_retries, max_tool_rounds, trim_low_water)"),
    ({"runtime__compaction__trigger": 5}, "runtime.compaction.trigger", "allowed here: fork, strategy, summary_input_headroom_tokens"),
    ({"colour": "blue"}, "colour", "allowed here: agent, client, environment, id, pricing, request, runtime"),
    ({"agent__max_retries": "three"}, "agent.max_retries", "use a whole number"),
    ({"request__stream": "maybe"}, "request.stream", "use true or false"),
    ({"runtime__strategy": "rolling"}, "runtime.strategy", "unknown strategy 'rolling'; fix: use one of: manual_rolling, previous_response_id, continuous_conversation"),
    ({"runtime__state": "manual_rolling"}, "runtime.state", "unknown key"),
    ({"request__model": DELETE}, "request.model", "add it"),
    ({"agent": DELETE}, "agent", "add it"),
    ({"client__local": {"faults": [{"at": 0, "kind": "rate_limit"}]}}, "client.local.faults.0.at", "raise the value"),
    # contradictions between settings
    ({"runtime__adapter_id": "acme.chat.v9"}, "runtime.adapter_id", "'acme.chat.v9' is not registered"),
    ({"runtime__compaction__strategy": "native"}, "runtime.compaction.strategy", "manual_rolling does not compose with compaction 'native'; fix: use one of: none"),
    ({"request__max_output_tokens": 5000}, "request.max_output_tokens", "leaves no room for the prompt"),
    ({"client__base_url": "https://api.example.test/v1", "client__local": {"context_window": 4096}}, "client.local", "base_url is not 'local'"),
    ({"client__base_url": "https://api.example.test/v1"}, "client.api_key_env", "a remote base_url needs a key"),
    ({"environment__options": {"levles": 2}}, "environment.options", "levles"),
    ({"environment__name": "chess"}, "environment.name", "unknown environment 'chess'"),
    ({"client__local": {"faults": [{"at": 2, "kind": "empty"}, {"at": 2, "kind": "refusal"}]}}, "client.local.faults", "more than one fault at request 2"),
    # runtime.compaction: native needs an adapter that compacts; a trigger belongs to compaction by call alone,
    # and its default (175,000) must be below the context budget too
    ({"runtime__adapter_id": "openai.responses.v1", "runtime__strategy": "continuous_conversation", "runtime__compaction__strategy": "native", "request__options": {"store": False, "include": ["reasoning.encrypted_content"], "reasoning": {"summary": "auto", "context": "auto"}, "context_management": [{"type": "compaction", "compact_threshold": 900}]}, "runtime__compaction__trigger_tokens": 500}, "runtime.compaction.trigger_tokens", "only a compaction by a call of its own has a trigger here"),
    ({"runtime__adapter_id": "xai.responses.v1", "runtime__strategy": "continuous_conversation", "runtime__compaction__strategy": "native", "request__options": {"store": False, "include": ["reasoning.encrypted_content"]}}, "runtime.compaction.trigger_tokens", "175000 (its default) is not below agent.max_context_length 800"),
    ({"runtime__adapter_id": "xai.responses.v1", "runtime__strategy": "continuous_conversation", "runtime__compaction__strategy": "native", "runtime__compaction__trigger_tokens": 900, "request__options": {"store": False, "include": ["reasoning.encrypted_content"]}}, "runtime.compaction.trigger_tokens", "900 is not below agent.max_context_length 800"),
    ({"runtime__adapter_id": "xai.responses.v1", "runtime__strategy": "continuous_conversation", "request__options": {"store": False, "include": ["reasoning.encrypted_content"], "context_management": [{"type": "compaction", "compact_threshold": 500}]}}, "request.options.context_management", "xAI compacts by a separate /responses/compact call, not inline"),
    ({"runtime__compaction__trigger_tokens": 500}, "runtime.compaction.trigger_tokens", "only a compaction by a call of its own has a trigger here"),
    ({"runtime__adapter_id": "openai.responses.v1", "runtime__strategy": "continuous_conversation", "runtime__compaction__strategy": "native", "runtime__compaction__summary_max_output_tokens": 64, "request__options": {"store": False, "include": ["reasoning.encrypted_content"], "reasoning": {"summary": "auto", "context": "auto"}, "context_management": [{"type": "compaction", "compact_threshold": 500}]}}, "runtime.compaction.summary_max_output_tokens", "only a compaction by a call compaction has it"),
    # harness_summary: an adapter that can continue from it; room for the output cap and the headroom
    ({"runtime__adapter_id": "anthropic.messages.v1", "runtime__strategy": "continuous_conversation", "runtime__compaction__strategy": "harness_summary"}, "runtime.compaction.strategy", "adapter 'anthropic.messages.v1' cannot continue from a harness summary; fix: use native"),
    ({**SUMMARY, "runtime__compaction__trigger_tokens": 300}, "runtime.compaction.trigger_tokens", "300 + request.max_output_tokens 128 + runtime.compaction.summary_input_headroom_tokens 1024 = 1452 exceeds agent.max_context_length 800; fix: raise agent.max_context_length above 1152"),
    ({**SUMMARY, "runtime__compaction__trigger_tokens": 300, "runtime__compaction__summary_input_headroom_tokens": 500}, "runtime.compaction.trigger_tokens", "= 928 exceeds agent.max_context_length 800; fix: set it at most 172"),
    ({"runtime__adapter_id": "xai.responses.v1", "runtime__strategy": "continuous_conversation", "runtime__compaction__strategy": "native", "runtime__compaction__trigger_tokens": 500, "runtime__compaction__fork": False, "request__options": {"store": False, "include": ["reasoning.encrypted_content"]}}, "runtime.compaction.fork", "only a harness_summary compaction has it"),
    # a per-level budget needs a game that gives its levels' human baselines
    ({"agent__max_actions_baseline_multiplier": 5.0}, "agent.max_actions_baseline_multiplier", "environment beacon_grid gives no human baseline per level"),
    ({"agent__max_actions_baseline_multiplier": 0}, "agent.max_actions_baseline_multiplier", "greater than 0"),
    # request.options: the adapter's own settings, checked by the adapter for the strategy
    ({"request__options": {"reasoning": {"effort": "high"}}}, "request.options.reasoning", "Chat Completions takes no request.options"),
    ({"runtime__adapter_id": "openai.responses.v1", "runtime__strategy": "continuous_conversation", "request__options": {"store": True}}, "request.options.store", "continuous conversation is stateless on the server; fix: set store: false"),
    ({"runtime__adapter_id": "openai.responses.v1", "runtime__strategy": "continuous_conversation", "request__options": {"store": False, "include": ["reasoning.encrypted_content"], "reasoning": {"summary": "auto", "context": "auto"}, "truncation": "auto"}}, "request.options.truncation", "the server would drop the oldest of the items the strategy replays, unseen by it; fix: remove it"),
    ({"runtime__adapter_id": "openai.responses.v1", "runtime__strategy": "previous_response_id", "request__options": {"truncation": "sometimes"}}, "request.options.truncation", "'auto' or 'disabled'"),
    # strict types: YAML already typed the value, so a wrong type is named, never coerced
    ({"agent__max_actions": True}, "agent.max_actions", "(got True); fix: use a whole number"),
    ({"agent__max_retries": "5"}, "agent.max_retries", "(got '5'); fix: use a whole number"),
    ({"agent__max_context_length": 800.0}, "agent.max_context_length", "(got 800.0); fix: use a whole number"),
    ({"request__stream": "yes"}, "request.stream", "(got 'yes'); fix: use true or false"),
    ({"request__max_output_tokens": "128"}, "request.max_output_tokens", "use a whole number"),
    ({"request__temperature": True}, "request.temperature", "use a number"),
    ({"environment__seed": False}, "environment.seed", "use a whole number"),
    ({"client__local": {"faults": [{"at": "1", "kind": "empty"}]}}, "client.local.faults.0.at", "use a whole number"),
    # no .inf or .nan anywhere: JSON artifacts cannot hold them
    ({"pricing__input": float("inf")}, "pricing.input", ".inf is not a finite number; fix: use a finite number"),
    ({"pricing__output": float("-inf")}, "pricing.output", "-.inf is not a finite number"),
    ({"environment__options": {"levels": float("nan")}}, "environment.options.levels", ".nan is not a finite number"),
    ({"pricing__input": 1e300}, "pricing.input", "lower the value"),
    # settings that would only fail once the run is under way
    ({"client__timeout_seconds": 1e12}, "client.timeout_seconds", "less than or equal to 3600"),
    ({"client__base_url": "not a url", "client__api_key_env": "KEY"}, "client.base_url", "'not a url' is neither 'local' nor an http(s) URL with a host"),
    ({"client__base_url": "https://", "client__api_key_env": "KEY"}, "client.base_url", "nor an http(s) URL with a host"),
    ({"client__base_url": "ftp://api.example.test", "client__api_key_env": "KEY"}, "client.base_url", "nor an http(s) URL"),
    ({"client__base_url": "http://api.example.test:port/v1", "client__api_key_env": "KEY"}, "client.base_url", "nor an http(s) URL"),
    ({"request__model": ""}, "request.model", "the model name is empty"),
    ({"request__model": "   "}, "request.model", "the model name is empty"),
    ({"client__local": {"context_window": 512}}, "client.local.context_window", "the local provider's window 512 cannot hold agent.max_context_length 800"),
    ({"agent__max_context_length": 9000}, "client.local.context_window", "window 8192 (its default) cannot hold agent.max_context_length 9000"),
    # agent.backoff
    ({"agent__backoff": {"base_seconds": 0}}, "agent.backoff.base_seconds", "raise the value"),
    ({"agent__backoff": {"max_seconds": 0.5, "base_seconds": 1}}, "agent.backoff.max_seconds", "0.5 is below agent.backoff.base_seconds 1.0"),
    ({"agent__backoff": {"max_seconds": 1e6}}, "agent.backoff.max_seconds", "lower the value"),
    ({"agent__backoff": {"max_total_seconds": -1}}, "agent.backoff.max_total_seconds", "raise the value"),
    ({"agent__backoff": {"base_seconds": "1"}}, "agent.backoff.base_seconds", "use a number"),
    ({"agent__backoff": {"base_second": 1}}, "agent.backoff.base_second", "allowed here: base_seconds, max_seconds, max_total_seconds"),
    # request.output_limit_param
    ({"request__output_limit_param": "max_output_tokens"}, "request.output_limit_param", "'max_tokens' or 'max_completion_tokens'"),
    # runtime.tool_result_offload: whole numbers, a kept result per tool at least
    ({"runtime__tool_result_offload": {"keep_recent_per_tool": 0}}, "runtime.tool_result_offload.keep_recent_per_tool", "raise the value"),
    ({"runtime__tool_result_offload": {"keep_recent_per_tool": 2.5}}, "runtime.tool_result_offload.keep_recent_per_tool", "use a whole number"),
    ({"runtime__tool_result_offload": {"min_savings_chars": -1}}, "runtime.tool_result_offload.min_savings_chars", "raise the value"),
    ({"runtime__tool_result_offload": {"min_savings_chars": float("inf")}}, "runtime.tool_result_offload.min_savings_chars", "not a finite number"),
    ({"runtime__tool_result_offload": {"keep_recent": 3}}, "runtime.tool_result_offload.keep_recent", "allowed here: keep_recent_per_tool, min_savings_chars"),
    # client.local.faults[].retry_after_seconds
    ({"client__local": {"faults": [{"at": 1, "kind": "server_error", "retry_after_seconds": 1}]}}, "client.local.faults.0.retry_after_seconds", "only a rate_limit fault sends Retry-After"),
    ({"client__local": {"faults": [{"at": 1, "kind": "rate_limit", "retry_after_seconds": 0}]}}, "client.local.faults.0.retry_after_seconds", "raise the value"),
    ({"client__local": {"faults": [{"at": 1, "kind": "rate_limit", "retry_after_seconds": "1"}]}}, "client.local.faults.0.retry_after_seconds", "use a number"),
    # client.rate_limit: a served provider's, and limiting something
    ({"client__rate_limit": {"requests_per_minute": 60}}, "client.rate_limit", "each run's own, so there is no limit to share"),
    ({"client__base_url": "https://api.example.test/v1", "client__api_key_env": "KEY", "client__rate_limit": {}}, "client.rate_limit", "it limits nothing"),
    ({"client__base_url": "https://api.example.test/v1", "client__api_key_env": "KEY", "client__rate_limit": {"requests_per_minute": 0}}, "client.rate_limit.requests_per_minute", "raise the value"),
    ({"client__base_url": "https://api.example.test/v1", "client__api_key_env": "KEY", "client__rate_limit": {"requests_per_second": 1}}, "client.rate_limit.requests_per_second", "allowed here: requests_per_minute, tokens_per_minute"),
]
# fmt: on


@pytest.mark.parametrize(("change", "key_path", "text"), REJECTED)
def test_a_bad_or_contradictory_setting_is_named_with_its_path_and_fix(change, key_path, text):
    with pytest.raises(ProfileError) as caught:
        parse_profile(profile_text(**change), source="profiles/bad.yaml")
    message = str(caught.value)
    assert f"profiles/bad.yaml: {key_path}:" in message
    assert "; fix: " in message
    assert text in message


def shipped(name: str) -> dict:
    return yaml.safe_load((PROFILES_DIR / f"{name}.yaml").read_text())


REMOTE = {"client__base_url": "https://api.example.test/v1", "client__api_key_env": "KEY"}
# Values a provider refuses once the run is under way (each passed validation before): (shipped
# profile changed, change, key path the error must name, text it must contain)
# fmt: off
PROVIDER_LIMITS = [
    # every output cap fits the context budget, a compaction request's own too
    ("local-openai-harness-summary", {"runtime__compaction__summary_max_output_tokens": 10**30}, "runtime.compaction.summary_max_output_tokens", "1000000000000000000000000000000 is out of range (whole numbers here fit in 64 bits)"),
    ("local-openai-harness-summary", {"runtime__compaction__summary_max_output_tokens": 10**12}, "runtime.compaction.summary_max_output_tokens", "1000000000000 leaves no room for the prompt in agent.max_context_length 8000; fix: make it smaller than agent.max_context_length"),
    ("local-anthropic-continuous", {"runtime__compaction__summary_max_output_tokens": 8000}, "runtime.compaction.summary_max_output_tokens", "8000 leaves no room for the prompt"),
    ("local-anthropic-continuous", {"runtime__compaction__summary_max_output_tokens": 7000}, "runtime.compaction.trigger_tokens", "1500 + runtime.compaction.summary_max_output_tokens 7000 = 8500 exceeds agent.max_context_length 8000, and a compaction request holds at least the history that reached the trigger; fix: set it at most 1000"),
    ("local-openai-harness-summary", {"runtime__compaction__summary_max_output_tokens": 7000}, "runtime.compaction.trigger_tokens", "1500 + runtime.compaction.summary_max_output_tokens 7000 = 8500 exceeds"),
    ("local-manual-rolling", {"agent__max_context_length": 10**9, **REMOTE}, "agent.max_context_length", "less than or equal to 100000000"),
    # Anthropic: budget_tokens is enabled thinking's, and below every request's max_tokens
    ("local-anthropic-continuous", {"request__options__thinking": {"type": "enabled", "budget_tokens": 4096}}, "request.options.thinking.budget_tokens", "4096 is not below request.max_output_tokens 2048, and thinking counts toward a request's max_tokens; fix: make it at most 2047"),
    ("local-anthropic-continuous", {"request__options__thinking": {"type": "enabled", "budget_tokens": 1500}, "runtime__compaction__summary_max_output_tokens": 1024}, "request.options.thinking.budget_tokens", "1500 is not below runtime.compaction.summary_max_output_tokens 1024, and thinking counts toward a request's max_tokens; fix: raise runtime.compaction.summary_max_output_tokens above it"),
    ("local-anthropic-continuous", {"request__options__thinking": {"type": "enabled"}}, "request.options.thinking.budget_tokens", "thinking type enabled needs a budget; fix: add one of at least 1024"),
    ("local-anthropic-continuous", {"request__options__thinking": {"type": "adaptive", "budget_tokens": 1024}}, "request.options.thinking.budget_tokens", "thinking type adaptive takes no budget; fix: remove it, or set type: enabled"),
    # OpenAI Responses: the output floor, and compact_threshold's minimum and room for the output cap
    ("local-openai-continuous", {"request__max_output_tokens": 8}, "request.max_output_tokens", "8 is below the Responses API's floor of 16 output tokens; fix: make it at least 16"),
    ("local-openai-harness-summary", {"runtime__compaction__summary_max_output_tokens": 15}, "runtime.compaction.summary_max_output_tokens", "15 is below the Responses API's floor of 16"),
    ("local-xai-continuous", {"request__max_output_tokens": 8}, "request.max_output_tokens", "below the Responses API's floor of 16"),
    ("local-openai-continuous", {"request__options__context_management": [{"type": "compaction", "compact_threshold": 500}]}, "request.options.context_management.0.compact_threshold", "500 is below the Responses API's minimum of 1000; fix: make it at least 1000"),
    ("local-openai-continuous", {"request__options__context_management": [{"type": "compaction", "compact_threshold": 7900}]}, "request.options.context_management.0.compact_threshold", "7900 + request.max_output_tokens 256 = 8156 exceeds agent.max_context_length 8000, so a request just below it would not fit; fix: set it at most 7744"),
    # the offload projects a request history the harness sends, which previous_response_id has not
    ("local-openai-previous-response-id", {"runtime__tool_result_offload": {}}, "runtime.tool_result_offload", "previous_response_id keeps the conversation on the provider's server: there is no request history to project; fix: remove it, or use manual_rolling or continuous_conversation"),
    # frames drawn as images need an API that takes images, as user input or in an action's tool result
    ("local-deepseek-continuous", {"environment__options": {"render": "image"}}, "environment.options.render", "render 'image' sends frames as images, and the API of adapter 'deepseek.chat_completions.v1' takes none; fix: use render: text, or an adapter whose API takes images"),
    ("local-deepseek-continuous", {"environment__options": {"render": "both"}, "agent__action_mode": "tools"}, "environment.options.render", "render 'both' sends frames as images, and the API of adapter 'deepseek.chat_completions.v1' takes none"),
    ("local-manual-rolling", {"environment__options": {"render": "pixels"}}, "environment.options", "beacon_grid option 'render' must be one of text, image, both, got 'pixels'"),
    ("local-manual-rolling", {"environment__options": {"render": "image", "scale": 0}}, "environment.options", "beacon_grid option 'scale'"),
    # DeepSeek acts through the action tools; a profile must say so, and the modes are named
    ("local-deepseek-continuous", {"agent__action_mode": "text"}, "agent.action_mode", "adapter 'deepseek.chat_completions.v1' acts only by calling the action tools (its reasoning is replayed only beside tool calls); fix: set agent.action_mode: tools"),
    ("local-manual-rolling", {"agent__action_mode": "tool"}, "agent.action_mode", "'text' or 'tools'"),
    ("local-manual-rolling", {"agent__max_tool_rounds": 0}, "agent.max_tool_rounds", "raise the value"),
    # Anthropic: the SDK's Messages API takes no temperature; Opus 5 thinks adaptively only
    ("local-anthropic-continuous", {"request__temperature": 0.5}, "request.temperature", "adapter 'anthropic.messages.v1' cannot send a temperature (its SDK's call takes none); fix: remove it"),
    ("local-anthropic-continuous", {"request__model": "claude-opus-5", "request__options__thinking": {"type": "enabled", "budget_tokens": 1024}}, "request.options.thinking.type", "claude-opus-5 refuses it: thinking.type.enabled is not supported for this model"),
    # Gemini: the sampling range the service checks
    ("local-gemini-harness-summary", {"request__options__generation_config": {"thinking_summaries": "auto", "temperature": 5.0}}, "request.options.generation_config.temperature", "5.0 is outside Gemini's range 0-2; fix: use a value from 0 to 2"),
]
# fmt: on


@pytest.mark.parametrize(("name", "change", "key_path", "text"), PROVIDER_LIMITS)
def test_a_value_the_provider_would_refuse_mid_run_is_named_at_validation(name, change, key_path, text):
    with pytest.raises(ProfileError) as caught:
        parse_profile(profile_text(shipped(name), **change), source="p.yaml")
    (line,) = str(caught.value).splitlines()
    assert line.startswith(f"p.yaml: {key_path}: ")
    assert text in line


@pytest.mark.parametrize(
    "change",
    [
        {"request__options__thinking": {"type": "enabled", "budget_tokens": 2047}},
        {
            "request__options__thinking": {"type": "enabled", "budget_tokens": 1024},
            "runtime__compaction__summary_max_output_tokens": 1025,
        },
        {"runtime__compaction__summary_max_output_tokens": 6500},
    ],
)
def test_values_just_inside_the_provider_limits_are_valid(change):
    assert parse_profile(profile_text(shipped("local-anthropic-continuous"), **change))


def test_the_largest_reply_a_request_may_read_defaults_to_16_mib_and_is_kept_as_given():
    assert load_profile(DEFAULT_PROFILE).client.max_reply_bytes == 16 * 1024 * 1024
    assert parse_profile(profile_text(client__max_reply_bytes=1024)).client.max_reply_bytes == 1024
    assert parse_profile(profile_text(client__max_reply_bytes=2**30)).model_dump()["client"]["max_reply_bytes"] == 2**30


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1023, "greater than or equal to 1024 (got 1023); fix: raise the value"),
        (2**30 + 1, "less than or equal to 1073741824 (got 1073741825); fix: lower the value"),
        ("16MiB", "(got '16MiB'); fix: use a whole number"),
        (1e6, "(got 1000000.0); fix: use a whole number"),
    ],
)
def test_a_reply_cap_outside_1_kib_to_1_gib_is_named(value, text):
    with pytest.raises(ProfileError, match=r"^p.yaml: client.max_reply_bytes: ") as caught:
        parse_profile(profile_text(client__max_reply_bytes=value), source="p.yaml")
    assert text in str(caught.value)


def test_broken_yaml_names_the_line():
    with pytest.raises(
        ProfileError,
        match=r"p.yaml: \(top level\): not valid YAML at line \d+, column \d+; fix: fix the YAML syntax there",
    ):
        parse_profile("id: x\nagent: [unclosed\n", source="p.yaml")


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(ProfileError, match="cannot read the file"):
        load_profile(tmp_path / "nope.yaml")


def test_a_key_given_twice_is_named_with_both_lines():
    text = DEFAULT_PROFILE.read_text() + "agent:\n  max_actions: 3\n"
    first = text.splitlines().index("agent:") + 1
    again = len(text.splitlines()) - 1
    with pytest.raises(ProfileError) as caught:
        parse_profile(text, source="p.yaml")
    assert str(caught.value) == f"p.yaml: agent: given twice (line {first} and line {again}); fix: keep one of them"


def test_a_key_given_twice_inside_a_section_is_named_with_its_path():
    text = "id: x\nagent:\n  max_actions: 3\n  max_actions: 4\n"
    with pytest.raises(ProfileError, match=r"^p.yaml: agent.max_actions: given twice \(line 3 and line 4\)"):
        parse_profile(text, source="p.yaml")


def test_keys_merged_from_an_anchor_may_be_overridden():
    text = DEFAULT_PROFILE.read_text().replace("  max_retries: 3\n", "  <<: {max_retries: 1}\n  max_retries: 3\n")
    assert parse_profile(text).agent.max_retries == 3


def test_a_non_finite_number_is_named_where_yaml_writes_it():
    text = DEFAULT_PROFILE.read_text().replace("input: 1.25", "input: .inf")
    with pytest.raises(
        ProfileError, match=r"p.yaml: pricing.input: .inf is not a finite number; fix: use a finite number"
    ):
        parse_profile(text, source="p.yaml")


def test_an_exponent_is_a_number_as_in_yaml_1_2():
    """YAML 1.1 reads 1e2 as text, which strict types would then reject as not a number."""
    text = DEFAULT_PROFILE.read_text().replace("base_url: local", "base_url: local\n  timeout_seconds: 1e2")
    assert parse_profile(text).client.timeout_seconds == 100.0
    with pytest.raises(ProfileError, match=r"client.timeout_seconds: .*less than or equal to 3600"):
        parse_profile(text.replace("1e2", "1e12"))


def test_a_latin_1_profile_is_named_with_the_byte_and_its_offset(tmp_path):
    text = DEFAULT_PROFILE.read_text().replace("id: local-manual-rolling", "id: local-manual-rolling  # café")
    path = tmp_path / "latin1.yaml"
    path.write_bytes(text.encode("latin-1"))
    offset = text.encode("latin-1").index(b"\xe9")
    with pytest.raises(ProfileError) as caught:
        load_profile(path)
    assert str(caught.value).startswith(f"{path}: (top level): not UTF-8 text: byte 0xe9 at offset {offset} (line ")
    assert str(caught.value).endswith("; fix: save the file as UTF-8")


@pytest.mark.parametrize(
    ("encoding", "problem"),
    [
        ("utf-16", "the file is UTF-16 (it starts with a UTF-16 byte order mark)"),
        ("utf-16-le", "not UTF-8 text: a NUL byte at offset 1"),
    ],
)
def test_a_utf_16_profile_is_named(tmp_path, encoding, problem):
    path = tmp_path / "wide.yaml"
    path.write_bytes(DEFAULT_PROFILE.read_text().encode(encoding))
    with pytest.raises(ProfileError, match="fix: save the file as UTF-8") as caught:
        load_profile(path)
    assert f"{path}: (top level): {problem}" in str(caught.value)


def test_a_utf_8_byte_order_mark_is_accepted(tmp_path):
    path = tmp_path / "bom.yaml"
    path.write_bytes(DEFAULT_PROFILE.read_text().encode("utf-8-sig"))
    assert load_profile(path).id == "local-manual-rolling"


def test_backoff_defaults_come_from_the_backoff_record():
    settings = load_profile(DEFAULT_PROFILE).strategy_settings("Play.")
    assert settings.backoff == Backoff()


def test_backoff_settings_reach_the_strategy():
    text = profile_text(agent__backoff={"base_seconds": 0.5, "max_seconds": 2, "max_total_seconds": 0})
    settings = parse_profile(text).strategy_settings("Play.")
    assert settings.backoff == Backoff(base_seconds=0.5, max_seconds=2.0, max_total_seconds=0.0)


def test_the_output_limit_param_defaults_to_max_completion_tokens_and_reaches_the_request_settings():
    assert load_profile(DEFAULT_PROFILE).request_settings().output_limit_param == "max_completion_tokens"
    chosen = parse_profile(profile_text(request__output_limit_param="max_tokens"))
    assert chosen.request_settings().output_limit_param == "max_tokens"


def test_a_rate_limit_faults_retry_after_reaches_the_local_provider(monkeypatch):
    given: dict = {}

    class Recorder:
        def __init__(self, **options):
            given.update(options)

        def __enter__(self):
            return self

        def __exit__(self, *exc_info):
            return None

        base_url = "http://127.0.0.1:1"

    monkeypatch.setattr(endpoint, "LocalProvider", Recorder)
    faults = [{"at": 2, "kind": "rate_limit", "retry_after_seconds": 1.5}, {"at": 3, "kind": "empty"}]
    profile = parse_profile(profile_text(client__local={"faults": faults}))
    with endpoint.open_endpoint(profile.client):
        pass
    assert given["faults"] == [Fault(at=2, kind="rate_limit", retry_after_seconds=1.5), Fault(at=3, kind="empty")]


def test_a_native_compaction_call_takes_its_own_output_cap_and_the_policy_records_it(tmp_path):
    anthropic = yaml.safe_load((PROFILES_DIR / "local-anthropic-continuous.yaml").read_text())
    anthropic["runtime"]["compaction"]["summary_max_output_tokens"] = 512
    path = tmp_path / "capped.yaml"
    path.write_text(yaml.safe_dump(anthropic))
    profile = load_profile(path)
    assert profile.strategy_settings("Play.").compaction == NativeByCall(
        trigger_tokens=anthropic["runtime"]["compaction"]["trigger_tokens"], max_output_tokens=512
    )
    assert profile.compaction_policy()["max_output_tokens"] == 512


def test_the_offload_is_off_unless_given_and_its_defaults_are_the_seeds():
    assert parse_profile(profile_text(), source="p.yaml").offload() is None
    given = parse_profile(profile_text(runtime__tool_result_offload={}), source="p.yaml").offload()
    assert (given.keep_recent_per_tool, given.min_savings_chars) == (3, 2000)


def test_a_sweep_file_given_as_a_profile_is_named_as_one_with_the_command_that_takes_it(tmp_path):
    path = tmp_path / "sweep.yaml"
    path.write_text("id: s\nprofiles: [local-manual-rolling]\n")
    with pytest.raises(ProfileError) as caught:
        load_profile(path)
    assert str(caught.value) == (
        f"{path}: (top level): this is a sweep file (it has `profiles:`); fix: run it with `turnstate sweep {path}`"
    )


@pytest.mark.parametrize("given", [".", "..", ".hidden"])
def test_an_id_that_is_a_path_of_its_own_is_refused(given):
    with pytest.raises(ProfileError) as caught:
        parse_profile(profile_text(shipped("local-manual-rolling"), id=given), source="p.yaml")
    assert "p.yaml: id: " in str(caught.value) and "starting with a letter or digit" in str(caught.value)
