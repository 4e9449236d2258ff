"""The seeds' rules that the harness keeps (issue 30), each a test: which runs write compaction
records, a harness summary's output cap and fork settings from the profile to the wire, the refusal
of harness summaries on Anthropic, the model and system prompt a session keeps, and the settings the
real-service profiles must keep.

Profile rules are checked at validation; the rest on short runs of the local profiles, on the
embedded local provider or on one whose request log a test reads (`sent_bodies`)."""

from __future__ import annotations

import json
from hashlib import sha256
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import yaml

from turnstate import Session
from turnstate.adapters.anthropic_messages import MessagesAdapter
from turnstate.adapters.contract import ModelRequest, ModelResponse, ProviderError
from turnstate.durable.checkpoints import CheckpointError
from turnstate.durable.layout import compaction_name
from turnstate.environments import make_environment
from turnstate.local_provider.server import LocalProvider
from turnstate.session.profile import PROFILES_DIR, Profile, load_profile, parse_profile
from turnstate.session.runner import Runner, RunResult
from turnstate.session.settings_file import ProfileError
from turnstate.strategies.compaction import HarnessSummary
from turnstate.strategies.summary import SUMMARIZER_SYSTEM, SUMMARY_INSTRUCTION

from .test_profile import DELETE, profile_text, shipped
from .test_run import (
    ANTHROPIC_CONTINUOUS,
    CONTINUOUS,
    GEMINI,
    HARNESS_SUMMARY,
    XAI_CONTINUOUS,
    read_compactions,
    read_meta,
    with_changes,
)

SHORT = {"max_actions": 10}  # each local compaction profile compacts once in its first 10 actions
TEST_KEY = "TURNSTATE_TEST_KEY"


class Sent(NamedTuple):
    result: RunResult
    bodies: list[dict]


def sent_bodies(profile: Profile, out: Path, base_url: str = "openai_base_url", **changes: dict) -> Sent:
    """A short run of `profile` pointed at a local provider as a remote service, and every model
    request body it sent, from the provider's log."""
    with LocalProvider() as provider:
        remote = {"base_url": getattr(provider, base_url), "api_key_env": TEST_KEY}
        result = Runner(with_changes(profile, client=remote, agent=SHORT, **changes), out).run()
        assert result.outcome == "max_actions", result.failure
        return Sent(result, list(provider.request_log))


def summary_bodies(bodies: list[dict]) -> list[dict]:
    return [body for body in bodies if SUMMARY_INSTRUCTION in json.dumps(body["input"][-1])]


@pytest.fixture
def test_key(monkeypatch):
    monkeypatch.setenv(TEST_KEY, "test-key")


# -- compaction_NNN.json ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "profile", [CONTINUOUS, XAI_CONTINUOUS, ANTHROPIC_CONTINUOUS, HARNESS_SUMMARY], ids=lambda profile: profile.id
)
def test_compaction_records_are_written_for_harness_summaries_only_never_for_native_compaction(tmp_path, profile):
    result = Runner(with_changes(profile, agent=SHORT), tmp_path).run()
    assert result.compactions >= 1  # it compacted
    summaries = result.compactions if profile.runtime.compaction.strategy == "harness_summary" else 0
    written = sorted(path.name for path in result.artifacts.glob("compaction_*.json"))
    assert written == [compaction_name(number) for number in range(1, summaries + 1)]


# -- the summary's output cap ----------------------------------------------------------------------

SHIPPED_YAML = {path.stem: yaml.safe_load(path.read_text()) for path in sorted(PROFILES_DIR.glob("*.yaml"))}
SUMMARY_PROFILES = [
    name
    for name, data in SHIPPED_YAML.items()
    if data["runtime"].get("compaction", {}).get("strategy") == "harness_summary"
]


@pytest.mark.parametrize("name", SUMMARY_PROFILES)
def test_a_harness_summarys_output_cap_is_the_action_requests_when_the_profile_omits_it(name):
    profile = load_profile(PROFILES_DIR / f"{name}.yaml")
    assert profile.runtime.compaction.summary_max_output_tokens is None  # the shipped profiles omit it
    compaction = profile.strategy_settings("Play.").compaction
    assert isinstance(compaction, HarnessSummary)
    assert compaction.max_output_tokens == profile.compaction_policy()["max_output_tokens"]
    assert compaction.max_output_tokens == profile.request.max_output_tokens


def test_run_meta_records_the_defaulted_summary_cap(tmp_path):
    game = make_environment("beacon_grid", seed=0, options={"levels": 3})
    with Session(HARNESS_SUMMARY, actions=game.actions, out_dir=tmp_path) as session:
        meta = read_meta(session.run_dir)  # written as the session opens
    policy = meta["runtime"]["compaction"]
    assert policy["kind"] == "harness_summary"
    assert policy["max_output_tokens"] == HARNESS_SUMMARY.request.max_output_tokens == 256


@pytest.mark.parametrize(("given", "sent"), [(None, 256), (100, 100)], ids=["omitted", "given"])
def test_each_summary_request_is_sent_with_the_summary_cap_and_each_action_request_with_its_own(
    tmp_path, test_key, given, sent
):
    runtime = {"compaction": {**HARNESS_SUMMARY.runtime.compaction.model_dump(), "summary_max_output_tokens": given}}
    _, bodies = sent_bodies(HARNESS_SUMMARY, tmp_path, runtime={**HARNESS_SUMMARY.runtime.model_dump(), **runtime})
    summaries = summary_bodies(bodies)
    assert summaries and {body["max_output_tokens"] for body in summaries} == {sent}
    actions = [body for body in bodies if body not in summaries]
    assert {body["max_output_tokens"] for body in actions} == {256}


# -- runtime.compaction.fork -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "fork"), [({}, True), ({"fork": True}, True), ({"fork": False}, False)], ids=["omitted", "true", "false"]
)
def test_the_fork_setting_reaches_the_strategy_and_run_meta_and_is_on_when_omitted(given, fork):
    compaction = {"strategy": "harness_summary", "trigger_tokens": 1500, **given}
    profile = parse_profile(profile_text(shipped("local-openai-harness-summary"), runtime__compaction=compaction))
    assert profile.strategy_settings("Play.").compaction.fork is fork
    assert profile.compaction_policy()["fork"] is fork


@pytest.mark.parametrize("profile", [HARNESS_SUMMARY, GEMINI], ids=lambda profile: profile.id)
def test_with_fork_false_every_summary_is_an_independent_request_under_the_summarizers_system_prompt(
    tmp_path, test_key, profile
):
    runtime = {**profile.runtime.model_dump(), "compaction": {**profile.runtime.compaction.model_dump(), "fork": False}}
    base_url = "openai_base_url" if profile is HARNESS_SUMMARY else "base_url"
    result, bodies = sent_bodies(profile, tmp_path, base_url, runtime=runtime)
    system = "instructions" if profile is HARNESS_SUMMARY else "system_instruction"
    summaries = summary_bodies(bodies)
    assert summaries and all(body[system] == SUMMARIZER_SYSTEM and len(body["input"]) == 1 for body in summaries)
    actions = [body for body in bodies if body not in summaries]
    (action_system,) = {body[system] for body in actions}  # the task's own, on every action request
    assert action_system != SUMMARIZER_SYSTEM
    (record,) = read_compactions(result.artifacts)
    assert [attempt["summary_input"]["form"] for attempt in record["attempts"]] == ["independent"]
    assert read_meta(result.artifacts)["runtime"]["compaction"]["fork"] is False


# -- no harness summary on Anthropic ---------------------------------------------------------------


class RecordingMessages(MessagesAdapter):
    """The Anthropic adapter, on the local provider's Messages wire, keeping every request it is asked
    to send: a harness summary would be an ordinary `call` of it."""

    asked: list[ModelRequest]

    def call(self, request: ModelRequest) -> ModelResponse | ProviderError:
        self.asked.append(request)
        return super().call(request)


def test_a_session_whose_adapter_cannot_continue_from_a_summary_refuses_one_before_any_provider_call(tmp_path):
    """A profile cannot say so (validation refuses it: test_profile), so the adapter is injected."""
    asked: list[ModelRequest] = []

    def anthropic(endpoint: Any) -> RecordingMessages:
        adapter = RecordingMessages.connect(endpoint, ANTHROPIC_CONTINUOUS.request_settings())
        adapter.asked = asked
        return adapter

    result = Runner(with_changes(HARNESS_SUMMARY, agent=SHORT), tmp_path, adapter_factory=anthropic).run()
    assert asked and not [request for request in asked if request.system == SUMMARIZER_SYSTEM]
    assert not [request for request in asked if SUMMARY_INSTRUCTION in json.dumps(request.items[-1])]
    assert result.outcome == "failed_closed" and result.compactions == 0
    assert "cannot continue from a harness summary" in (result.failure or "")


# -- the model and the system prompt of a session ---------------------------------------------------


def test_every_request_of_a_session_has_its_one_model_and_system_prompt_compaction_requests_included(
    tmp_path, test_key
):
    _, bodies = sent_bodies(ANTHROPIC_CONTINUOUS, tmp_path, "base_url")
    assert any("compaction" in body for body in bodies)  # a native compaction request was among them
    assert {(body["model"], body["system"]) for body in bodies} == {
        (ANTHROPIC_CONTINUOUS.request.model, bodies[0]["system"])
    }


def played_session(tmp_path: Path, turns: int = 2) -> Path:
    """A run folder of the local Anthropic profile whose session accepted `turns` actions, then closed."""
    game = make_environment("beacon_grid", seed=0, options={"levels": 3})
    frame = game.reset()
    with Session(ANTHROPIC_CONTINUOUS, actions=game.actions, out_dir=tmp_path) as session:
        for _ in range(turns):
            turn = session.observe(frame.text)
            session.accept(turn.action)
            frame = game.step(turn.action)
        assert any(block["type"] == "thinking" for item in session.accepted_state.items for block in item["content"])
        return session.run_dir


OTHER_MODEL = with_changes(ANTHROPIC_CONTINUOUS, request={"model": "claude-sonnet-4-6"})


def test_a_resume_under_another_model_is_refused_unless_it_is_a_switch(tmp_path):
    run_dir = played_session(tmp_path)
    game = make_environment("beacon_grid", seed=0, options={"levels": 3})
    with pytest.raises(CheckpointError, match="profile_digest: was "):
        with Session(OTHER_MODEL, actions=game.actions, resume=run_dir):
            pass


def test_a_switch_to_another_model_drops_the_continuation_so_no_signed_thinking_reaches_the_new_model(tmp_path):
    run_dir = played_session(tmp_path)
    game = make_environment("beacon_grid", seed=0, options={"levels": 3})
    with Session(OTHER_MODEL, actions=game.actions, resume=run_dir, switch=True) as session:
        assert session.resumed.continuation == "rebuilt from the projection"
        blocks = [block for item in session.accepted_state.items for block in item["content"]]
    assert len(session.accepted_state.turns) == 2 and blocks
    assert all(block["type"] == "text" and "signature" not in block for block in blocks)


def test_a_resume_under_another_system_prompt_is_refused_unless_it_is_a_switch(tmp_path):
    run_dir = played_session(tmp_path)
    game = make_environment("beacon_grid", seed=0, options={"levels": 3})
    with pytest.raises(CheckpointError, match="system_prompt_digest: was [0-9a-f]{64}, now [0-9a-f]{64}"):
        with Session(ANTHROPIC_CONTINUOUS, actions=game.actions, resume=run_dir, system_prompt="Play."):
            pass
    with Session(ANTHROPIC_CONTINUOUS, actions=game.actions, resume=run_dir, switch=True, system_prompt="Play.") as s:
        s.accept(s.observe(game.reset().text).action)
        assert s.checkpoints is not None and s.checkpoints.meta.system_prompt_digest == sha256(b"Play.").hexdigest()


# -- the real-service profiles ---------------------------------------------------------------------

REMOTE_PROFILES = [
    name for name, data in SHIPPED_YAML.items() if data.get("client", {}).get("base_url", "local") != "local"
]

# (shipped profile, change, key path the refusal names)
# fmt: off
REQUIRED = [
    # OpenAI continuous: stateless, encrypted reasoning, the model's own reasoning context and summaries,
    # and native compaction as its inline setting
    ("openai-gpt-5.6-sol", {"request__options__store": DELETE}, "request.options.store"),
    ("openai-gpt-5.6-sol", {"request__options__include": DELETE}, "request.options.include"),
    ("openai-gpt-5.6-sol", {"request__options__reasoning__context": DELETE}, "request.options.reasoning.context"),
    ("openai-gpt-5.6-sol", {"request__options__reasoning__summary": DELETE}, "request.options.reasoning.summary"),
    ("openai-gpt-5.6-sol", {"request__options__context_management": DELETE}, "request.options.context_management"),
    # xAI continuous: stateless, encrypted reasoning
    ("xai-grok-continuous", {"request__options__store": DELETE}, "request.options.store"),
    ("xai-grok-continuous", {"request__options__include": DELETE}, "request.options.include"),
    # Gemini continuous: thought summaries as the reply's reasoning
    ("gemini-3.8-flash", {"request__options__generation_config__thinking_summaries": DELETE}, "request.options.generation_config.thinking_summaries"),
    # DeepSeek thinking acts through its tool; an open-weight server's reasoning field is named
    ("deepseek-thinking", {"agent__action_mode": DELETE}, "agent.action_mode"),
    ("glm-5.3-flash", {"request__options__reasoning_field": DELETE}, "request.options.reasoning_field"),
    ("qwen3.8-27b", {"request__options__reasoning_field": DELETE}, "request.options.reasoning_field"),
    # every real service needs its key
    *[(name, {"client__api_key_env": DELETE}, "client.api_key_env") for name in REMOTE_PROFILES],
]
AVOIDED = [
    # what the seed says a continuous profile must avoid
    ("openai-gpt-5.6-sol", {"request__options__store": True}, "request.options.store"),
    ("openai-gpt-5.6-sol", {"request__options__previous_response_id": "resp_1"}, "request.options.previous_response_id"),
    ("openai-gpt-5.6-sol", {"request__options__conversation": "conv_1"}, "request.options.conversation"),
    ("openai-gpt-5.6-sol", {"request__options__background": True}, "request.options.background"),
    ("xai-grok-continuous", {"request__options__context_management": [{"type": "compaction", "compact_threshold": 150000}]}, "request.options.context_management"),
    ("gemini-3.8-flash", {"request__options__store": True}, "request.options.store"),
    ("gemini-3.8-flash", {"request__options__previous_interaction_id": "i_1"}, "request.options.previous_interaction_id"),
    ("anthropic-opus-5-low-provider-adapter", {"request__options__context_management": {"edits": [{"type": "compact_20260112", "pause_after_compaction": True}]}}, "request.options.context_management"),
    ("anthropic-opus-5-low-provider-adapter", {"request__options__betas": ["compact-2026-01-12"]}, "request.options.betas"),
    ("anthropic-opus-5-low-provider-adapter", {"request__options__thinking": {"type": "enabled", "budget_tokens": 2048}}, "request.options.thinking.type"),
    ("anthropic-opus-5-low-provider-adapter", {"runtime__compaction__strategy": "harness_summary"}, "runtime.compaction.strategy"),
]
# fmt: on


def refusal_id(case: tuple[str, dict, str]) -> str:
    name, change, key_path = case
    return f"{name} {'without' if DELETE in change.values() else 'with'} {key_path}"


@pytest.mark.parametrize(
    ("name", "change", "key_path"), [*REQUIRED, *AVOIDED], ids=[refusal_id(case) for case in [*REQUIRED, *AVOIDED]]
)
def test_a_real_service_profile_without_a_required_setting_or_with_an_avoided_one_is_refused_naming_it(
    name, change, key_path
):
    assert load_profile(PROFILES_DIR / f"{name}.yaml")  # the shipped profile itself is valid
    with pytest.raises(ProfileError) as caught:
        parse_profile(profile_text(shipped(name), **change), source=f"profiles/{name}.yaml")
    (line,) = str(caught.value).splitlines()
    assert line.startswith(f"profiles/{name}.yaml: {key_path}: ") and "; fix: " in line


# The settings the seed names for each checked-in real-service profile, as dotted paths into its YAML.
# Validation requires those above; the Anthropic profile's thinking display, betas and prices are
# choices validation leaves open, so this pin is what keeps them.
# fmt: off
SHIPPED = {
    "openai-gpt-5.6-sol": {
        "runtime.adapter_id": "openai.responses.v1", "runtime.strategy": "continuous_conversation",
        "request.options.store": False, "request.options.include": ["reasoning.encrypted_content"],
        "request.options.reasoning.context": "auto", "request.options.reasoning.summary": "auto",
        "request.options.reasoning.effort": "max",
        "request.options.context_management": [{"type": "compaction", "compact_threshold": 175000}],
    },
    "anthropic-opus-5-low-provider-adapter": {
        "runtime.adapter_id": "anthropic.messages.v1", "runtime.strategy": "continuous_conversation",
        "request.model": "claude-opus-5", "request.options.thinking": {"type": "adaptive", "display": "summarized"},
        "request.options.output_config": {"effort": "low"}, "request.stream": True,
        "request.max_output_tokens": 128000, "agent.max_context_length": 1000000,
        "runtime.compaction": {"strategy": "native", "trigger_tokens": 175000},  # under the normal output cap
        "agent.max_actions": 600,  # 5x the 120-action baseline
        "request.options.cache_control": {"type": "ephemeral"},  # no ttl: Anthropic's default 5 minutes
        "request.options.betas": ["compact-2026-09-04", "thinking-token-count-2026-05-13"],
        "pricing.input": 5.0, "pricing.output": 25.0, "client.api_key_env": "ANTHROPIC_API_KEY",
    },
    "gemini-3.8-flash": {
        "runtime.adapter_id": "google.interactions.v1", "runtime.strategy": "continuous_conversation",
        "request.options": {"generation_config": {"thinking_summaries": "auto"}},  # store false is always sent
    },
    "xai-grok-continuous": {
        "runtime.adapter_id": "xai.responses.v1",
        "request.options": {"store": False, "include": ["reasoning.encrypted_content"]},  # no inline compaction
        "runtime.compaction.strategy": "native",
    },
}
# fmt: on


def at_path(data: Any, path: str) -> Any:
    for key in path.split("."):
        data = data[key]
    return data


@pytest.mark.parametrize(
    ("name", "path", "value"),
    [(name, path, value) for name, settings in SHIPPED.items() for path, value in settings.items()],
    ids=[f"{name} {path}" for name, settings in SHIPPED.items() for path in settings],
)
def test_a_real_service_profile_keeps_the_setting_the_seed_names(name, path, value):
    assert at_path(shipped(name), path) == value
