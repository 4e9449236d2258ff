"""Run profiles: YAML files validated with pydantic.

Every error names the file, the key path and the fix. Unknown keys are errors (a misspelt key that
is silently ignored is a setting that silently does not apply), and so are settings that contradict
each other or name an adapter the registry does not know. Types are strict (`true` is not 1 and
`"5"` is not 5), a key given twice is an error rather than the last one winning, and a setting that
would only fail once a run is under way (an unbounded timeout, a URL without a host, a local window
smaller than the harness's budget, a value the provider refuses) fails here instead. Whatever a file
holds, reading it is bounded in time and memory (_ProfileLoader), and every problem is one line.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import json
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator

from turnstate.adapters.contract import (
    DEFAULT_MAX_REPLY_BYTES,
    OutputLimitParam,
    ProviderAdapter,
    RequestBounds,
    RequestSettings,
    ToolSpec,
)
from turnstate.adapters.registry import UnknownAdapter, descriptor_for
from turnstate.adapters.tokens import MIN_CONTEXT_TOKENS
from turnstate.durable.accounting import Prices
from turnstate.durable.layout import ID_PATTERN
from turnstate.local_provider.faults import FaultKind, first_repeated_ordinal
from turnstate.local_provider.server import DEFAULT_CONTEXT_WINDOW
from turnstate.session.profile_checks import (
    check_action_grammar,
    check_environment,
    check_extra_body,
    check_recording,
)
from turnstate.session.scaffold import ActionMode
from turnstate.session.settings_file import Contradiction, ProfileError, load_settings, parse_settings
from turnstate.strategies import STRATEGIES
from turnstate.strategies.compaction import Compaction, HarnessSummary, NativeByCall, NativeInline, NoCompaction
from turnstate.strategies.offload import DEFAULT_KEEP_RECENT_PER_TOOL, DEFAULT_MIN_SAVINGS_CHARS, Offload
from turnstate.strategies.strategy import Backoff, StrategySettings

LOCAL = "local"
PROFILES_DIR = Path(str(importlib.resources.files("turnstate.profiles")))  # the shipped profiles, however installed
DEFAULT_PROFILE = PROFILES_DIR / "local-manual-rolling.yaml"

# The longest single wait a profile may ask for (a request timeout, one backoff wait, a scheduled
# Retry-After): beyond it a setting is a typo, and far beyond it the clock arithmetic overflows.
MAX_WAIT_SECONDS = 3600.0
MAX_PRICE_PER_MILLION = 1_000_000.0  # keeps the cost estimate finite for any token count a run can reach
MAX_CONTEXT_TOKENS = 100_000_000
"""The largest context budget a profile may give: ten times the largest window on offer (10M tokens).
Every token count a profile sends is bounded by it (the output caps and thresholds must fit it), so a
few zeros too many fail here rather than as a provider's 400 once the run is under way."""
MIN_REPLY_BYTES, MAX_REPLY_BYTES = 1024, 1024 * 1024 * 1024  # a reply's own framing; a gigabyte in memory
EXTRA_BODY_BYTES = 16 * 1024  # request.extra_body, as JSON: a few settings and a hand-written grammar


class _Section(BaseModel):
    # strict: YAML already has types, so a value of the wrong one is a mistake to name, not to coerce.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


class EnvironmentConfig(_Section):
    # A registered id (turnstate/environments/registry.py), never a path, a module or a URL.
    name: str = "beacon_grid"
    seed: int = 0
    options: dict[str, Any] = Field(default_factory=dict)


class BackoffConfig(_Section):
    """How long a transient failure waits before its retry; the defaults are Backoff's."""

    base_seconds: float = Field(default=Backoff.base_seconds, gt=0, le=MAX_WAIT_SECONDS)
    max_seconds: float = Field(default=Backoff.max_seconds, gt=0, le=MAX_WAIT_SECONDS)
    max_total_seconds: float = Field(default=Backoff.max_total_seconds, ge=0)

    @model_validator(mode="after")
    def _cap_holds_the_base(self) -> BackoffConfig:
        if self.max_seconds < self.base_seconds:
            raise Contradiction(
                "agent.backoff.max_seconds",
                f"{self.max_seconds} is below agent.backoff.base_seconds {self.base_seconds}, "
                "so no wait could be as long as the first",
                "make it at least agent.backoff.base_seconds",
            )
        return self

    def settings(self) -> Backoff:
        return Backoff(self.base_seconds, self.max_seconds, self.max_total_seconds)


DEFAULT_TRIM_LOW_WATER = 0.75


class AgentConfig(_Section):
    max_actions: int = Field(default=80, ge=1)
    max_retries: int = Field(default=3, ge=0)
    max_context_length: int = Field(ge=MIN_CONTEXT_TOKENS, le=MAX_CONTEXT_TOKENS)
    # manual_rolling: once the window passes max_context_length, the oldest whole turns are trimmed
    # until it is at most this fraction of the prompt budget, so its prefix (and a provider's prompt
    # cache of it) holds for many turns; 1 trims only what must go, moving the prefix every turn.
    trim_low_water: float = Field(default=DEFAULT_TRIM_LOW_WATER, gt=0, le=1)
    backoff: BackoffConfig = BackoffConfig()
    # How the model acts: an `ACTION:` line in its reply, or a call of one of the environment's
    # actions offered as function tools (turnstate/session/scaffold.py).
    action_mode: ActionMode = "text"
    # Replies in a row that only call read-only tools before one acts; past it a reply is rejected.
    max_tool_rounds: int = Field(default=8, ge=1, le=1000)
    # A per-level action budget of ceil(multiplier x the level's human baseline), as the ARC-AGI-3
    # benchmarking harness sets it (its MAX_ACTIONS_BASELINE_MULTIPLIER, 5.0 in its configs): a level
    # that spends its budget unfinished ends the run (`level_budget`). Only for games that give baselines.
    max_actions_baseline_multiplier: float | None = Field(default=None, gt=0, le=100)


DEFAULT_TRIGGER_TOKENS = 175_000
"""When a compaction by a call of its own starts if the profile does not say: the last accepted
action's completed context (its reported input plus output tokens) reaching this."""


DEFAULT_SUMMARY_HEADROOM_TOKENS = 1024
"""What validation keeps free for a harness summary's request beyond the trigger and the output cap."""

SUMMARY_KEYS = ("summary_input_headroom_tokens", "summary_max_output_tokens", "fork")


class CompactionConfig(_Section):
    strategy: str = "none"  # a compaction machine the strategy accepts (its record says which)
    # For a compaction by a call of its own (native by xAI or Anthropic, or a harness summary):
    # compact when the last accepted action's completed context reaches it; DEFAULT_TRIGGER_TOKENS
    # when omitted.
    trigger_tokens: int | None = Field(default=None, ge=1)
    # A compaction by a call of its own: its own output cap (default: the request's; xAI's
    # /responses/compact takes none). harness_summary only: room kept for the summary request
    # between the trigger plus the output cap and agent.max_context_length, and whether it may fork
    # the latest action request (default: the adapter's, else on).
    summary_input_headroom_tokens: int = Field(default=DEFAULT_SUMMARY_HEADROOM_TOKENS, ge=0)
    summary_max_output_tokens: int | None = Field(default=None, ge=1)
    fork: bool | None = None


class ToolResultOffloadConfig(_Section):
    """Seed 003's stale tool-result offload: present turns it on, each key its default when absent."""

    keep_recent_per_tool: int = Field(default=DEFAULT_KEEP_RECENT_PER_TOOL, ge=1)
    min_savings_chars: int = Field(default=DEFAULT_MIN_SAVINGS_CHARS, ge=0)


class RuntimeConfig(_Section):
    adapter_id: str
    strategy: str
    compaction: CompactionConfig = CompactionConfig()
    # Off unless given (strategies/offload.py): replace stale tool results in outgoing requests.
    tool_result_offload: ToolResultOffloadConfig | None = None


class FaultConfig(_Section):
    at: int = Field(ge=1, description="1-based ordinal of the model request that gets the fault")
    kind: FaultKind
    retry_after_seconds: float | None = Field(default=None, gt=0, le=MAX_WAIT_SECONDS)


class LocalProviderConfig(_Section):
    context_window: int | None = Field(default=None, ge=MIN_CONTEXT_TOKENS)
    # A YAML list; strict mode alone would accept only a tuple. The faults themselves stay strict.
    faults: tuple[FaultConfig, ...] = Field(default=(), strict=False)
    # A recording of a winning ARC-AGI-3 play (the toolkit's JSONL), which the local model then plays,
    # knowing where it is only from the state the strategy carries (local_provider/recording_policy.py).
    recording: str | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _faults_consistent(self) -> LocalProviderConfig:
        repeated = first_repeated_ordinal(fault.at for fault in self.faults)
        if repeated is not None:
            raise Contradiction(
                "client.local.faults",
                f"more than one fault at request {repeated}",
                "give each request at most one fault",
            )
        for index, fault in enumerate(self.faults):
            if fault.retry_after_seconds is not None and fault.kind != "rate_limit":
                raise Contradiction(
                    f"client.local.faults.{index}.retry_after_seconds",
                    f"only a rate_limit fault sends Retry-After, and this one is {fault.kind}",
                    "remove it or make the fault kind rate_limit",
                )
        return self


class ClientConfig(_Section):
    base_url: str = LOCAL
    # A variable that, when set, holds the base URL to use instead of base_url (then the default): a
    # server a user runs wherever it listens, such as llama.cpp's llama-server.
    base_url_env: str | None = None
    api_key_env: str | None = None
    timeout_seconds: float = Field(default=120.0, gt=0, le=MAX_WAIT_SECONDS)
    # The largest reply or stream one request may read: a larger one is a classified error, not a
    # process that grows with whatever a server sends.
    max_reply_bytes: int = Field(default=DEFAULT_MAX_REPLY_BYTES, ge=MIN_REPLY_BYTES, le=MAX_REPLY_BYTES)
    local: LocalProviderConfig | None = None

    @model_validator(mode="after")
    def _base_url_is_local_or_a_url(self) -> ClientConfig:
        if not self.is_local and not is_http_url(self.base_url):
            raise Contradiction(
                "client.base_url",
                f"{self.base_url!r} is neither 'local' nor an http(s) URL with a host",
                "use local, or the provider's URL such as https://api.openai.com/v1",
            )
        if self.base_url_env is not None and self.is_local:
            raise Contradiction(
                "client.base_url_env",
                "the embedded local provider has no URL to override",
                "remove it, or give base_url the server's default URL",
            )
        return self

    @property
    def is_local(self) -> bool:
        return self.base_url == LOCAL


def is_http_url(text: str) -> bool:
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number in range
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname) and text == text.strip()


class RequestConfig(_Section):
    model: str
    max_output_tokens: int = Field(ge=1)
    output_limit_param: OutputLimitParam = RequestSettings.output_limit_param
    stream: bool = False
    temperature: float | None = Field(default=None, ge=0, le=2)
    # Settings only the selected adapter's API has; the adapter checks them (check_options).
    options: dict[str, Any] = Field(default_factory=dict)
    # Body fields a server takes beyond the API's (llama.cpp's grammar, json_schema, cache_prompt;
    # vLLM's structured_outputs, chat_template_kwargs), sent as given: JSON, at most EXTRA_BODY_BYTES,
    # never a field the adapter sets itself (its body_fields).
    extra_body: dict[str, JsonValue] = Field(default_factory=dict)
    # A GBNF grammar of the environment's actions, in the adapter's grammar field (llama.cpp's
    # `grammar`), so that a small model can write only valid action lines: `plain` (the action line
    # alone) or `thinking` (after a short <think>...</think>, which the server's reasoning parser returns apart).
    action_grammar: Literal["plain", "thinking"] | None = None

    @model_validator(mode="after")
    def _model_is_named(self) -> RequestConfig:
        if not self.model.strip():
            raise Contradiction("request.model", "the model name is empty", "give the model name the provider expects")
        try:
            size = len(json.dumps(self.extra_body, allow_nan=False, ensure_ascii=False).encode())
        except ValueError:
            raise Contradiction(
                "request.extra_body", "holds a number JSON cannot carry (NaN or infinity)", "give finite numbers"
            ) from None
        if size > EXTRA_BODY_BYTES:
            raise Contradiction(
                "request.extra_body",
                f"is {size} bytes of JSON, past the {EXTRA_BODY_BYTES} a request's extra fields may add",
                "shorten it (a grammar that long is better generated: see request.action_grammar)",
            )
        return self


class PricingConfig(_Section):
    input: float = Field(default=0.0, ge=0, le=MAX_PRICE_PER_MILLION, description="USD per million input tokens")
    output: float = Field(default=0.0, ge=0, le=MAX_PRICE_PER_MILLION, description="USD per million output tokens")


class Profile(_Section):
    id: str = Field(min_length=1, pattern=ID_PATTERN)
    environment: EnvironmentConfig = EnvironmentConfig()
    agent: AgentConfig
    runtime: RuntimeConfig
    client: ClientConfig = ClientConfig()
    request: RequestConfig
    pricing: PricingConfig = PricingConfig()

    @model_validator(mode="after")
    def _consistent(self) -> Profile:
        # Each check raises with the key path first so that ProfileError can point at it.
        try:
            descriptor = descriptor_for(self.runtime.adapter_id)
        except UnknownAdapter as error:
            raise Contradiction("runtime.adapter_id", str(error.args[0]), "use a registered id") from None
        record = STRATEGIES.get(self.runtime.strategy)
        if record is None:
            raise Contradiction(
                "runtime.strategy",
                f"unknown strategy {self.runtime.strategy!r}",
                f"use one of: {', '.join(STRATEGIES)}",
            )
        if record.name not in descriptor.strategies:
            raise Contradiction(
                "runtime.strategy",
                f"adapter {descriptor.adapter_id!r} does not implement {record.name!r}",
                f"use one of: {', '.join(descriptor.strategies)}",
            )
        if self.runtime.compaction.strategy not in record.compaction:
            raise Contradiction(
                "runtime.compaction.strategy",
                f"{record.name} does not compose with compaction {self.runtime.compaction.strategy!r}",
                f"use one of: {', '.join(record.compaction)}",
            )
        adapter = descriptor.load()
        if self.request.temperature is not None and not adapter.takes_temperature:
            raise Contradiction(
                "request.temperature",
                f"adapter {descriptor.adapter_id!r} cannot send a temperature (its SDK's call takes none)",
                "remove it",
            )
        check_extra_body(self.request.extra_body, adapter.body_fields, descriptor.adapter_id)
        check_action_grammar(
            self.request.action_grammar,
            self.agent.action_mode,
            self.request.extra_body,
            adapter.grammar_field,
            descriptor.adapter_id,
        )
        option_problems = adapter.check_options(
            self.request.options, record.name, self.runtime.compaction.strategy, self.request.model
        )
        if option_problems:
            path, problem, fix = option_problems[0]
            raise Contradiction(f"request.options.{path}", problem, fix)
        _check_compaction(self.runtime.compaction, adapter, descriptor.adapter_id)
        if self.runtime.tool_result_offload is not None and record.name == "previous_response_id":
            raise Contradiction(
                "runtime.tool_result_offload",
                "previous_response_id keeps the conversation on the provider's server: there is no request "
                "history to project",
                "remove it, or use manual_rolling or continuous_conversation",
            )
        if adapter.acts_through_tools and self.agent.action_mode != "tools":
            raise Contradiction(
                "agent.action_mode",
                f"adapter {descriptor.adapter_id!r} acts only by calling the action tools "
                "(its reasoning is replayed only beside tool calls)",
                "set agent.action_mode: tools",
            )
        for key, cap in self._output_caps():
            if cap >= self.agent.max_context_length:
                raise Contradiction(
                    key,
                    f"{cap} leaves no room for the prompt in agent.max_context_length {self.agent.max_context_length}",
                    "make it smaller than agent.max_context_length",
                )
        self._check_trigger()
        limits = adapter.check_limits(
            RequestBounds(tuple(self._output_caps()), self.agent.max_context_length, self.request.options)
        )
        if limits:
            raise Contradiction(*limits[0])
        if self.client.local is not None and not self.client.is_local:
            raise Contradiction(
                "client.local",
                "local provider settings given but client.base_url is not 'local'",
                "remove client.local",
            )
        if self.client.is_local:
            given = self.client.local.context_window if self.client.local is not None else None
            window = given if given is not None else DEFAULT_CONTEXT_WINDOW
            if window < self.agent.max_context_length:
                raise Contradiction(
                    "client.local.context_window",
                    f"the local provider's window {window}{'' if given is not None else ' (its default)'} "
                    f"cannot hold agent.max_context_length {self.agent.max_context_length}",
                    "make it at least agent.max_context_length, or lower agent.max_context_length",
                )
        if not self.client.is_local and not self.client.api_key_env:
            raise Contradiction(
                "client.api_key_env",
                "a remote base_url needs a key",
                "name the environment variable that holds the API key",
            )
        check_environment(self.environment, self.agent.max_actions_baseline_multiplier)
        if self.client.local is not None and self.client.local.recording is not None:
            check_recording(self.client.local.recording, self.environment)
        return self

    # The plain settings the leaves receive; built here, once, so no leaf knows the profile.

    def strategy_settings(self, system_prompt: str, tools: tuple[ToolSpec, ...] = ()) -> StrategySettings:
        """The strategy's settings, with the system prompt and the function tools every request offers."""
        return StrategySettings(
            adapter_id=self.runtime.adapter_id,
            system_prompt=system_prompt,
            max_retries=self.agent.max_retries,
            max_context_length=self.agent.max_context_length,
            max_output_tokens=self.request.max_output_tokens,
            trim_low_water=self.agent.trim_low_water,
            compaction=self.compaction(),
            backoff=self.agent.backoff.settings(),
            tools=tools,
            offload=self.offload(),
        )

    def digest(self) -> str:
        """The SHA-256 of the validated profile (its defaults filled in): what a checkpoint records, so a
        resume can tell the profile it continues under from the one it was written with."""
        return hashlib.sha256(self.model_dump_json().encode("utf-8")).hexdigest()

    def offload(self) -> Offload | None:
        """The stale tool-result offload the strategy projects requests with, or None (off)."""
        config = self.runtime.tool_result_offload
        return None if config is None else Offload(config.keep_recent_per_tool, config.min_savings_chars)

    def compaction(self) -> Compaction:
        """The compaction the strategy runs with, typed, its defaults filled in: a trigger for a
        compaction by a call of its own (DEFAULT_TRIGGER_TOKENS when omitted), a compaction request's
        output cap (its own if set, else the request's), and a harness summary's headroom and fork
        (the profile's explicit value, else the adapter's default, else on)."""
        config = self.runtime.compaction
        adapter = descriptor_for(self.runtime.adapter_id).load()
        if config.strategy == "none":
            return NoCompaction()
        if config.strategy == "native" and adapter.native_compaction == "inline":
            return NativeInline()
        trigger = config.trigger_tokens if config.trigger_tokens is not None else DEFAULT_TRIGGER_TOKENS
        cap = config.summary_max_output_tokens or self.request.max_output_tokens
        if config.strategy == "native":
            return NativeByCall(trigger_tokens=trigger, max_output_tokens=cap)
        adapter_fork = adapter.summary_compaction.fork if adapter.summary_compaction is not None else None
        fork = next(value for value in (config.fork, adapter_fork, True) if value is not None)
        return HarnessSummary(trigger, cap, config.summary_input_headroom_tokens, fork)

    def compaction_policy(self) -> dict[str, Any]:
        """The validated compaction policy as run_meta.json records it, defaults included."""
        return {
            "strategy": self.runtime.compaction.strategy,
            **self.compaction().policy(),
            "max_context_length": self.agent.max_context_length,
        }

    def _output_caps(self) -> list[tuple[str, int]]:
        """Each output cap sent, with its key: the action request's, then a compaction request's own
        if the profile gives one (a compaction request without one is sent the action request's)."""
        own = self.runtime.compaction.summary_max_output_tokens
        compaction = [("runtime.compaction.summary_max_output_tokens", own)] if own is not None else []
        return [("request.max_output_tokens", self.request.max_output_tokens), *compaction]

    def _check_trigger(self) -> None:
        """A trigger (given or its default) leaves room below agent.max_context_length: for a harness
        summary, room for the output cap and the summary's headroom as well; for every compaction by a
        call, room for that request's own output cap beside the history that reached the trigger."""
        compaction = self.compaction()
        if not isinstance(compaction, NativeByCall | HarnessSummary):
            return
        trigger = compaction.trigger_tokens
        default = "" if self.runtime.compaction.trigger_tokens is not None else " (its default)"
        capacity = self.agent.max_context_length
        if not isinstance(compaction, HarnessSummary) and trigger >= capacity:
            raise Contradiction(
                "runtime.compaction.trigger_tokens",
                f"{trigger}{default} is not below agent.max_context_length {capacity}",
                "set it lower, so compaction starts before the context is full",
            )
        output, headroom = self.request.max_output_tokens, self.runtime.compaction.summary_input_headroom_tokens
        if isinstance(compaction, HarnessSummary) and trigger + output + headroom > capacity:
            raise Contradiction(
                "runtime.compaction.trigger_tokens",
                f"{trigger}{default} + request.max_output_tokens {output} + "
                f"runtime.compaction.summary_input_headroom_tokens {headroom} = {trigger + output + headroom} "
                f"exceeds agent.max_context_length {capacity}",
                f"set it at most {capacity - output - headroom}, or lower the output cap or the headroom"
                if capacity - output - headroom >= 1
                else f"raise agent.max_context_length above {output + headroom}, or lower the output cap or the headroom",
            )
        key, cap = self._output_caps()[-1]
        if trigger + cap > capacity:
            raise Contradiction(
                "runtime.compaction.trigger_tokens",
                f"{trigger}{default} + {key} {cap} = {trigger + cap} exceeds agent.max_context_length {capacity}, "
                "and a compaction request holds at least the history that reached the trigger",
                f"set it at most {capacity - cap}, or lower {key}",
            )

    def request_settings(self) -> RequestSettings:
        return RequestSettings(**self.request.model_dump(exclude={"action_grammar"}))

    def prices(self) -> Prices:
        return Prices(input_per_million=self.pricing.input, output_per_million=self.pricing.output)


def shipped_profiles() -> dict[str, Path]:
    """The profiles that install with the package, by name (the file name without `.yaml`)."""
    return {path.stem: path for path in sorted(PROFILES_DIR.glob("*.yaml"))}


def resolve_profile(given: str | Path) -> Path:
    """The profile file `given` names: a path that exists, as given (so a file in the current folder
    is never shadowed by a shipped name); else the shipped profile of that name, with or without
    `.yaml`, so `turnstate run local-openai-continuous` works from any folder."""
    path = Path(given)
    if path.exists():
        return path
    shipped = shipped_profiles()
    if len(path.parts) == 1 and path.name.removesuffix(".yaml") in shipped:
        return shipped[path.name.removesuffix(".yaml")]
    fix = f"pass a profile's path, or the name of a shipped one: {', '.join(shipped)}"
    raise ProfileError(str(given), [("", "no such file, nor a shipped profile of that name", fix)])


def profile_json_schema() -> dict[str, Any]:
    """The profiles' JSON Schema, generated from the models above so it cannot drift from what
    validation accepts, for an editor to complete and check a profile as it is typed. It is labelled
    draft-07: pydantic's output uses no keyword newer than draft 7 (a test holds this), and the YAML
    language server and VS Code's JSON service support draft 7 fully but warn on a 2020-12 label
    (redhat-developer/vscode-yaml#726). The registered adapter ids, strategies, compaction values
    and environment ids (those installed now) become enums, read from the registries validation
    reads. Contradictions between settings are beyond a schema: `turnstate validate` names them."""
    from turnstate.adapters.registry import ADAPTERS
    from turnstate.environments import environment_ids

    generated = Profile.model_json_schema()
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", **generated, "title": "turnstate profile"}
    compaction = dict.fromkeys(value for record in STRATEGIES.values() for value in record.compaction)
    choices = {
        ("RuntimeConfig", "adapter_id"): sorted(ADAPTERS),
        ("RuntimeConfig", "strategy"): list(STRATEGIES),
        ("CompactionConfig", "strategy"): list(compaction),
        ("EnvironmentConfig", "name"): environment_ids(),
    }
    for (model, key), values in choices.items():
        schema["$defs"][model]["properties"][key]["enum"] = values
    return schema


def load_profile(path: str | Path) -> Profile:
    return load_settings(path, Profile)


def parse_profile(text: str, source: str = "<profile>") -> Profile:
    return parse_settings(text, source, Profile)


def _check_compaction(compaction: CompactionConfig, adapter: type[ProviderAdapter], adapter_id: str) -> None:
    """Native compaction needs an adapter that has one, a harness summary one that can continue from
    it; a trigger is the setting of a compaction by a call of its own alone (inline compaction is
    triggered by the request's own option), and the summary settings are harness_summary's."""
    if compaction.strategy == "native" and adapter.native_compaction is None:
        raise Contradiction(
            "runtime.compaction.strategy", f"adapter {adapter_id!r} has no native compaction", "set it to none"
        )
    if compaction.strategy == "harness_summary" and adapter.summary_compaction is None:
        fix = "use native" if adapter.native_compaction is not None else "set it to none"
        raise Contradiction(
            "runtime.compaction.strategy", f"adapter {adapter_id!r} cannot continue from a harness summary", fix
        )
    by_call = (compaction.strategy == "native" and adapter.native_compaction == "call") or (
        compaction.strategy == "harness_summary"
    )
    if not by_call and compaction.trigger_tokens is not None:
        raise Contradiction(
            "runtime.compaction.trigger_tokens",
            "only a compaction by a call of its own has a trigger here",
            "remove it (OpenAI's inline compaction is request.options.context_management)",
        )
    if compaction.strategy != "harness_summary":
        defaults = CompactionConfig()
        for key in SUMMARY_KEYS:
            if key == "summary_max_output_tokens" and by_call:
                continue  # a native compaction call caps its output too
            if getattr(compaction, key) != getattr(defaults, key):
                problem = (
                    "only a compaction by a call" if key == "summary_max_output_tokens" else "only a harness_summary"
                )
                raise Contradiction(f"runtime.compaction.{key}", f"{problem} compaction has it", "remove it")
