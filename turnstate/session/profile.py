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
import math
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar
from urllib.parse import urlsplit

import yaml
from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError, model_validator

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
from turnstate.session.scaffold import ActionMode
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
MAX_PROFILE_BYTES = 64 * 1024
"""A profile is a page of settings (the shipped ones are under 2 kB); the bound keeps reading and parsing
any file named by mistake (a log, /dev/zero) well under a second."""
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
            raise _Contradiction(
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
            raise _Contradiction(
                "client.local.faults",
                f"more than one fault at request {repeated}",
                "give each request at most one fault",
            )
        for index, fault in enumerate(self.faults):
            if fault.retry_after_seconds is not None and fault.kind != "rate_limit":
                raise _Contradiction(
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
            raise _Contradiction(
                "client.base_url",
                f"{self.base_url!r} is neither 'local' nor an http(s) URL with a host",
                "use local, or the provider's URL such as https://api.openai.com/v1",
            )
        if self.base_url_env is not None and self.is_local:
            raise _Contradiction(
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
            raise _Contradiction("request.model", "the model name is empty", "give the model name the provider expects")
        try:
            size = len(json.dumps(self.extra_body, allow_nan=False, ensure_ascii=False).encode())
        except ValueError:
            raise _Contradiction(
                "request.extra_body", "holds a number JSON cannot carry (NaN or infinity)", "give finite numbers"
            ) from None
        if size > EXTRA_BODY_BYTES:
            raise _Contradiction(
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
            raise _Contradiction("runtime.adapter_id", str(error.args[0]), "use a registered id") from None
        record = STRATEGIES.get(self.runtime.strategy)
        if record is None:
            raise _Contradiction(
                "runtime.strategy",
                f"unknown strategy {self.runtime.strategy!r}",
                f"use one of: {', '.join(STRATEGIES)}",
            )
        if record.name not in descriptor.strategies:
            raise _Contradiction(
                "runtime.strategy",
                f"adapter {descriptor.adapter_id!r} does not implement {record.name!r}",
                f"use one of: {', '.join(descriptor.strategies)}",
            )
        if self.runtime.compaction.strategy not in record.compaction:
            raise _Contradiction(
                "runtime.compaction.strategy",
                f"{record.name} does not compose with compaction {self.runtime.compaction.strategy!r}",
                f"use one of: {', '.join(record.compaction)}",
            )
        adapter = descriptor.load()
        if self.request.temperature is not None and not adapter.takes_temperature:
            raise _Contradiction(
                "request.temperature",
                f"adapter {descriptor.adapter_id!r} cannot send a temperature (its SDK's call takes none)",
                "remove it",
            )
        _check_extra_body(self.request.extra_body, adapter.body_fields, descriptor.adapter_id)
        _check_action_grammar(self, adapter.grammar_field, descriptor.adapter_id)
        option_problems = adapter.check_options(
            self.request.options, record.name, self.runtime.compaction.strategy, self.request.model
        )
        if option_problems:
            path, problem, fix = option_problems[0]
            raise _Contradiction(f"request.options.{path}", problem, fix)
        _check_compaction(self.runtime.compaction, adapter, descriptor.adapter_id)
        if self.runtime.tool_result_offload is not None and record.name == "previous_response_id":
            raise _Contradiction(
                "runtime.tool_result_offload",
                "previous_response_id keeps the conversation on the provider's server: there is no request "
                "history to project",
                "remove it, or use manual_rolling or continuous_conversation",
            )
        if adapter.acts_through_tools and self.agent.action_mode != "tools":
            raise _Contradiction(
                "agent.action_mode",
                f"adapter {descriptor.adapter_id!r} acts only by calling the action tools "
                "(its reasoning is replayed only beside tool calls)",
                "set agent.action_mode: tools",
            )
        for key, cap in self._output_caps():
            if cap >= self.agent.max_context_length:
                raise _Contradiction(
                    key,
                    f"{cap} leaves no room for the prompt in agent.max_context_length {self.agent.max_context_length}",
                    "make it smaller than agent.max_context_length",
                )
        self._check_trigger()
        limits = adapter.check_limits(
            RequestBounds(tuple(self._output_caps()), self.agent.max_context_length, self.request.options)
        )
        if limits:
            raise _Contradiction(*limits[0])
        if self.client.local is not None and not self.client.is_local:
            raise _Contradiction(
                "client.local",
                "local provider settings given but client.base_url is not 'local'",
                "remove client.local",
            )
        if self.client.is_local:
            given = self.client.local.context_window if self.client.local is not None else None
            window = given if given is not None else DEFAULT_CONTEXT_WINDOW
            if window < self.agent.max_context_length:
                raise _Contradiction(
                    "client.local.context_window",
                    f"the local provider's window {window}{'' if given is not None else ' (its default)'} "
                    f"cannot hold agent.max_context_length {self.agent.max_context_length}",
                    "make it at least agent.max_context_length, or lower agent.max_context_length",
                )
        if not self.client.is_local and not self.client.api_key_env:
            raise _Contradiction(
                "client.api_key_env",
                "a remote base_url needs a key",
                "name the environment variable that holds the API key",
            )
        _check_environment(self.environment, self.agent.max_actions_baseline_multiplier)
        if self.client.local is not None and self.client.local.recording is not None:
            _check_recording(self.client.local.recording, self.environment)
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
            raise _Contradiction(
                "runtime.compaction.trigger_tokens",
                f"{trigger}{default} is not below agent.max_context_length {capacity}",
                "set it lower, so compaction starts before the context is full",
            )
        output, headroom = self.request.max_output_tokens, self.runtime.compaction.summary_input_headroom_tokens
        if isinstance(compaction, HarnessSummary) and trigger + output + headroom > capacity:
            raise _Contradiction(
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
            raise _Contradiction(
                "runtime.compaction.trigger_tokens",
                f"{trigger}{default} + {key} {cap} = {trigger + cap} exceeds agent.max_context_length {capacity}, "
                "and a compaction request holds at least the history that reached the trigger",
                f"set it at most {capacity - cap}, or lower {key}",
            )

    def request_settings(self) -> RequestSettings:
        return RequestSettings(**self.request.model_dump(exclude={"action_grammar"}))

    def prices(self) -> Prices:
        return Prices(input_per_million=self.pricing.input, output_per_million=self.pricing.output)


def _check_extra_body(extra: Mapping[str, Any], body_fields: Mapping[str, str] | None, adapter_id: str) -> None:
    """request.extra_body adds fields beside the adapter's, never over them, and only where the API takes any."""
    if not extra:
        return
    if body_fields is None:
        raise _Contradiction("request.extra_body", f"adapter {adapter_id!r} sends no extra body fields", "remove it")
    for name in extra:
        if name in body_fields:
            raise _Contradiction(
                f"request.extra_body.{name}",
                f"{adapter_id} sets {name!r} itself, from {body_fields[name]}",
                f"remove it from request.extra_body; set it through {body_fields[name]}",
            )


def _check_action_grammar(profile: Profile, grammar_field: str | None, adapter_id: str) -> None:
    """request.action_grammar needs a wire that carries a grammar, text actions, and its field free."""
    if profile.request.action_grammar is None:
        return
    if grammar_field is None:
        raise _Contradiction(
            "request.action_grammar",
            f"adapter {adapter_id!r} sends no grammar (no server of its API takes one)",
            "remove it, or use a Chat Completions or Responses adapter against llama-server",
        )
    if profile.agent.action_mode != "text":
        raise _Contradiction(
            "request.action_grammar", "a grammar shapes ACTION lines, and agent.action_mode is tools", "remove one"
        )
    if grammar_field in profile.request.extra_body:
        raise _Contradiction(
            f"request.extra_body.{grammar_field}",
            f"request.action_grammar sets {grammar_field!r} itself",
            "remove one of the two",
        )


def _check_compaction(compaction: CompactionConfig, adapter: type[ProviderAdapter], adapter_id: str) -> None:
    """Native compaction needs an adapter that has one, a harness summary one that can continue from
    it; a trigger is the setting of a compaction by a call of its own alone (inline compaction is
    triggered by the request's own option), and the summary settings are harness_summary's."""
    if compaction.strategy == "native" and adapter.native_compaction is None:
        raise _Contradiction(
            "runtime.compaction.strategy", f"adapter {adapter_id!r} has no native compaction", "set it to none"
        )
    if compaction.strategy == "harness_summary" and adapter.summary_compaction is None:
        fix = "use native" if adapter.native_compaction is not None else "set it to none"
        raise _Contradiction(
            "runtime.compaction.strategy", f"adapter {adapter_id!r} cannot continue from a harness summary", fix
        )
    by_call = (compaction.strategy == "native" and adapter.native_compaction == "call") or (
        compaction.strategy == "harness_summary"
    )
    if not by_call and compaction.trigger_tokens is not None:
        raise _Contradiction(
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
                raise _Contradiction(f"runtime.compaction.{key}", f"{problem} compaction has it", "remove it")


class _Contradiction(ValueError):
    def __init__(self, path: str, problem: str, fix: str) -> None:
        super().__init__(f"{problem}")
        self.path, self.problem, self.fix = path, problem, fix


def _check_environment(environment: EnvironmentConfig, multiplier: float | None) -> None:
    """Build the environment once, so an unregistered or path-like id, a package that fails to load
    or a bad option is named here, under the key it concerns, before any run starts; and, for a
    per-level budget, check that the game gives its levels' baselines."""
    from turnstate.environments import EnvironmentConfigError, make_environment

    try:
        built = make_environment(environment.name, environment.seed, environment.options)
    except EnvironmentConfigError as error:
        raise _Contradiction(f"environment.{error.key}", str(error), error.fix) from None
    if multiplier is None:
        return
    baselines = getattr(built, "level_baselines", None)
    if not callable(baselines):
        raise _Contradiction(
            "agent.max_actions_baseline_multiplier",
            f"environment {environment.name} gives no human baseline per level (ARC-AGI-3 games' metadata.json does)",
            "remove it, or play an arc_agi3 game",
        )
    if not baselines():
        raise _Contradiction(
            "agent.max_actions_baseline_multiplier",
            f"game {environment.options.get('game_id')}'s metadata.json gives no baseline_actions",
            "add baseline_actions (the human baseline per level) to the game's metadata.json, or remove it",
        )


def _check_recording(recording: str, environment: EnvironmentConfig) -> None:
    """A recording the local model can play: readable, well formed, and of the game being played."""
    game_id = environment.options.get("game_id")
    if environment.name != "arc_agi3" or not isinstance(game_id, str):
        raise _Contradiction(
            RECORDING_KEY,
            f"a recording plays an ARC-AGI-3 game, and environment.name is {environment.name}",
            "use environment.name: arc_agi3 with the recording's game_id, or remove the recording",
        )
    recorded_actions(recording, game_id)


RECORDING_KEY = "client.local.recording"


def recorded_actions(recording: str, game_id: str) -> tuple[str, ...]:
    """The moves the local model plays in game `game_id` from `client.local.recording`: a recording
    file's, or of a folder of recordings (its *.jsonl files, each read), the one of that game (so a
    sweep over games names one folder). A ValueError naming the problem and, as `fix`, what to do."""
    from turnstate.environments.arc_agi3 import game_of, same_game
    from turnstate.local_provider.recording_policy import RecordingError, read_recording

    path = Path(recording).expanduser()
    fix = "point it at a recording of the game (the toolkit's JSONL, one recorded action a line), or a folder of them"
    files = sorted(path.glob("*.jsonl")) if path.is_dir() else [path]
    if not files:
        raise _Contradiction(RECORDING_KEY, f"{path}: a folder that holds no recording (*.jsonl)", fix)
    try:
        read = [(file, *read_recording(file)) for file in files]
    except RecordingError as error:
        raise _Contradiction(RECORDING_KEY, str(error), fix) from None
    chosen = [(file, actions) for file, recorded, actions in read if same_game(recorded, game_id)]
    if len(chosen) == 1:
        return chosen[0][1]
    if chosen:
        names = ", ".join(file.name for file, _ in chosen)
        raise _Contradiction(
            RECORDING_KEY,
            f"{path} holds {len(chosen)} recordings of game {game_id} ({names}), and the model plays one",
            "keep one recording of each game in the folder",
        )
    if path.is_dir():
        games = ", ".join(sorted({recorded for _, recorded, _ in read}))
        raise _Contradiction(
            RECORDING_KEY,
            f"{path} holds recordings of {games}, none of game {game_id} (environment.options.game_id)",
            f"add a recording of {game_id} to the folder, or play one of its games",
        )
    recorded = read[0][1]
    raise _Contradiction(
        RECORDING_KEY,
        f"{recording} records game {recorded}, and environment.options.game_id is {game_id}",
        f"play game_id: {game_of(recorded)}, or name a recording of {game_id}",
    )


_Settings = TypeVar("_Settings", bound=BaseModel)


class ProfileError(ValueError):
    """Every problem of one profile file, each as `file: key.path: problem; fix: ...`."""

    def __init__(self, source: str, problems: list[tuple[str, str, str]]) -> None:
        self.source = source
        self.problems = problems
        lines = [f"{source}: {path or '(top level)'}: {problem}; fix: {fix}" for path, problem, fix in problems]
        super().__init__("\n".join(lines))


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


def load_settings(path: str | Path, model: type[_Settings]) -> _Settings:
    """A YAML settings file (a profile, a sweep) read with the profile's rules and validated as `model`."""
    path = Path(path)
    try:
        with path.open("rb") as file:
            raw = file.read(MAX_PROFILE_BYTES + 1)  # no more: the path may be a log, or /dev/zero
    except OSError as error:
        raise ProfileError(str(path), [("", f"cannot read the file ({error.strerror})", "check the path")]) from None
    if len(raw) > MAX_PROFILE_BYTES:
        problem = f"the file is larger than {MAX_PROFILE_BYTES // 1024} KiB, far more than any profile"
        raise ProfileError(str(path), [("", problem, "check the path: a profile is a page of settings")])
    return parse_settings(_decode(raw, str(path)), str(path), model)


_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def _decode(raw: bytes, source: str) -> str:
    if raw.startswith(_UTF16_BOMS):
        raise ProfileError(
            source, [("", "the file is UTF-16 (it starts with a UTF-16 byte order mark)", _SAVE_AS_UTF8)]
        )
    if b"\x00" in raw:  # valid UTF-8, but YAML allows no NUL: UTF-16 without its mark, or not text
        offset = raw.index(b"\x00")
        problem = (
            f"not UTF-8 text: a NUL byte at offset {offset} (UTF-16 without a byte order mark, or not a text file)"
        )
        raise ProfileError(source, [("", problem, _SAVE_AS_UTF8)])
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        byte = raw[error.start]
        line = raw.count(b"\n", 0, error.start) + 1
        problem = f"not UTF-8 text: byte 0x{byte:02x} at offset {error.start} (line {line})"
        raise ProfileError(source, [("", problem, _SAVE_AS_UTF8)]) from None


_SAVE_AS_UTF8 = "save the file as UTF-8"


def parse_profile(text: str, source: str = "<profile>") -> Profile:
    return parse_settings(text, source, Profile)


# The kinds of settings file, by the model that reads each: what it is, the key only it has, and the
# command that takes it; a file of one kind given to the other's command is named as what it is.
FILE_KINDS = {
    "Profile": ("a profile", "runtime", "turnstate run"),
    "Sweep": ("a sweep file", "profiles", "turnstate sweep"),
}


def parse_settings(text: str, source: str, model: type[_Settings]) -> _Settings:
    try:
        data = yaml.load(text, Loader=_ProfileLoader)  # a SafeLoader: builds plain data only
    except _Refused as error:
        raise ProfileError(source, error.problems) from None
    except yaml.YAMLError as error:
        raise ProfileError(
            source, [("", f"not valid YAML at {_where(error, text)}", "fix the YAML syntax there")]
        ) from None
    if not isinstance(data, dict):
        raise ProfileError(source, [("", "the profile must be a mapping of keys", "start with `id: ...`")])
    for kind, (what, marker, command) in FILE_KINDS.items():
        own_marker = FILE_KINDS.get(model.__name__, ("", "", ""))[1]
        if kind != model.__name__ and marker in data and own_marker not in data:
            raise ProfileError(
                source, [("", f"this is {what} (it has `{marker}:`)", f"run it with `{command} {source}`")]
            )
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise ProfileError(source, validation_problems(error, model)) from None


def validation_problems(error: ValidationError, model: type[BaseModel]) -> list[tuple[str, str, str]]:
    """pydantic's errors as ProfileError's (key path, problem, fix), one per problem: the one
    translation of a ValidationError of any settings file (its str is a many-line dump). A list given
    enough items but left short by those that failed is not a problem of its own: pydantic reports it
    too ("at least 1 item after validation, not 0"), beside the items, which are named already."""
    items = error.errors()
    problems = [_explain(item, model) for item in items if not _short_by_failed_items(item)]
    return problems or [_explain(item, model) for item in items]


def _short_by_failed_items(item: Any) -> bool:
    given, context = item.get("input"), item.get("ctx") or {}
    return item["type"] == "too_short" and isinstance(given, (list, tuple)) and len(given) >= context["min_length"]


def _where(error: yaml.YAMLError, text: str) -> str:
    mark = getattr(error, "problem_mark", None)
    if mark is not None:
        return f"line {mark.line + 1}, column {mark.column + 1}"
    if isinstance(error, yaml.reader.ReaderError):  # a character YAML does not allow
        return f"line {text.count(chr(10), 0, error.position) + 1} (character #x{error.character:04x} is not allowed)"
    return "unknown position"


# Numbers with an exponent, as YAML 1.2 reads them. YAML 1.1, which PyYAML follows, wants a dot and
# a signed exponent (1.0e+12), so `1e12` would be the text "1e12", and strict types would then
# reject every timeout written that way.
_EXPONENT_FLOAT = re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$")
_YAML_TAG = "tag:yaml.org,2002:"
_MERGE_TAG = f"{_YAML_TAG}merge"
# The YAML types a profile takes, by node kind: what JSON holds, so every artifact that records a
# setting is JSON. A timestamp, binary, set or ordered map is named instead of reaching a model.
_JSON_TAGS: dict[type[yaml.Node], frozenset[str]] = {
    yaml.ScalarNode: frozenset(f"{_YAML_TAG}{name}" for name in ("str", "int", "float", "bool", "null")),
    yaml.MappingNode: frozenset({f"{_YAML_TAG}map"}),
    yaml.SequenceNode: frozenset({f"{_YAML_TAG}seq"}),
}
_READ_AS = {"int": "a whole number", "float": "a number", "bool": "true or false"}
MAX_NESTING = 64  # levels of mappings and lists; a profile's settings are a few levels deep
MAX_NUMBER_CHARS = 1000  # longer number text is refused unread (Python reads 4300 digits at most)
INT_LIMIT = 2**63  # whole numbers fit in 64 bits, so any arithmetic or record of them stays exact


class _Refused(yaml.YAMLError):
    """What the loader refuses, as (key path, problem, fix) for ProfileError."""

    def __init__(self, problems: list[tuple[str, str, str]]) -> None:
        super().__init__(problems)
        self.problems = problems


class _ProfileLoader(yaml.SafeLoader):
    """SafeLoader for profiles, bounded in time and memory whatever the file holds:

    - no aliases (`*name`): no profile needs one, and aliases are how a 1 kB file expands to 10^9
      values (the "billion laughs"), or refers to itself;
    - at most MAX_NESTING levels, since composing a node recurses once per level;
    - every value of a JSON type (_JSON_TAGS), numbers readable and in range, before any is built,
      so a 5000-digit whole number, `.inf` or `!!int abc` is named with its key path;
    - a key given twice in one mapping is an error (PyYAML would keep the last one silently, so
      the first section would not apply);
    - `1e12` is a number, as in YAML 1.2.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._path: list[str] = []  # the key path of the node being composed
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        """PyYAML passes a mapping value's key node, or a list item's index, as `index` (None for a
        key or the document)."""
        steps = [str(index)] if isinstance(index, int) else [_key_name(index)] if isinstance(index, yaml.Node) else []
        event = self.peek_event()
        line = event.start_mark.line + 1
        if isinstance(event, yaml.AliasEvent):
            problem = f"the alias *{event.anchor} (line {line}): a profile takes no YAML aliases"
            raise _Refused([(".".join([*self._path, *steps]), problem, "write the value out in full where it is used")])
        if self._depth >= MAX_NESTING:  # a key counts too: it may be a mapping
            raise self._too_deep(line)
        self._path += steps
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1
            del self._path[len(self._path) - len(steps) :]

    def fetch_flow_collection_start(self, TokenClass: Any) -> None:
        """The scanner keeps a possible key for each open `[` or `{` and looks them all over for every
        token, so flow nesting is bounded here, ahead of the composer: 5000 `[` would take seconds."""
        if self.flow_level >= MAX_NESTING:
            raise self._too_deep(self.get_mark().line + 1)
        super().fetch_flow_collection_start(TokenClass)

    def _too_deep(self, line: int) -> _Refused:
        problem = f"nested more than {MAX_NESTING} levels deep (line {line})"
        fix = "flatten it: a profile's settings are a few levels deep"
        return _Refused([(".".join(self._path[:4]) + "...", problem, fix)])

    def get_single_data(self) -> Any:
        node = self.get_single_node()
        if node is None:
            return None
        problems = list(_node_problems(self, node, ()))
        if problems:
            raise _Refused(problems)
        return self.construct_document(node)


_ProfileLoader.add_implicit_resolver(f"{_YAML_TAG}float", _EXPONENT_FLOAT, list("-+.0123456789"))


def _key_name(key: yaml.Node) -> str:
    return str(key.value) if isinstance(key, yaml.ScalarNode) else key.tag


def _node_problems(loader: yaml.SafeLoader, node: yaml.Node, path: tuple[str, ...]) -> Iterator[tuple[str, str, str]]:
    """(key path, problem, fix) for every value construction would crash on, lose or make
    non-JSON, and every key repeated in one mapping. Linear: the loader refused every alias."""
    where = ".".join(path)
    if node.tag not in _JSON_TAGS[type(node)]:
        shown = node.tag.removeprefix(_YAML_TAG)
        problem = f"a value of YAML type {shown} (line {node.start_mark.line + 1})"
        yield where, problem, "write text, a number, true or false, a list or a mapping, without a tag"
    elif isinstance(node, yaml.ScalarNode):
        found = _scalar_problem(loader, node)
        if found is not None:
            yield where, *found
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            yield from _node_problems(loader, item, (*path, str(index)))
    else:
        first_line: dict[tuple[str, str], int] = {}
        for key, value in node.value:
            name = _key_name(key)
            if key.tag != _MERGE_TAG:
                yield from _node_problems(loader, key, path)
                if isinstance(key, yaml.ScalarNode) and (key.tag, name) in first_line:
                    lines = f"line {first_line[key.tag, name] + 1} and line {key.start_mark.line + 1}"
                    yield ".".join((*path, name)), f"given twice ({lines})", "keep one of them"
                first_line.setdefault((key.tag, name), key.start_mark.line)
            yield from _node_problems(loader, value, (*path, name))


def _scalar_problem(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> tuple[str, str] | None:
    """Why a number or boolean cannot be a setting: unreadable, out of range, or not finite (JSON
    has no .inf or .nan, so an artifact that recorded one would not be JSON)."""
    kind = node.tag.removeprefix(_YAML_TAG)
    if kind not in _READ_AS:
        return None
    text = node.value if len(node.value) <= 40 else f"{node.value[:20]}... ({len(node.value)} characters)"
    if len(node.value) > MAX_NUMBER_CHARS:
        return f"{text} is too long to be {_READ_AS[kind]}", "use a shorter value"
    try:
        value = loader.yaml_constructors[node.tag](loader, node)
    except (ValueError, KeyError):
        return f"{text!r} cannot be read as {_READ_AS[kind]}", "correct the value, or remove its tag"
    if kind == "int" and not -INT_LIMIT <= value < INT_LIMIT:
        return f"{text} is out of range (whole numbers here fit in 64 bits)", "use a smaller number"
    if kind == "float" and not math.isfinite(value):
        return f"{text} is not a finite number", "use a finite number"
    return None


def _explain(item: Any, model: type[BaseModel]) -> tuple[str, str, str]:
    context = item.get("ctx") or {}
    contradiction = context.get("error")
    if isinstance(contradiction, _Contradiction):
        return contradiction.path, contradiction.problem, contradiction.fix
    location = tuple(item["loc"])
    path = ".".join(str(part) for part in location)
    kind = item["type"]
    if kind == "extra_forbidden":
        allowed = ", ".join(_allowed_keys(location[:-1], model))
        return path, "unknown key", f"remove it or correct the spelling (allowed here: {allowed})"
    if kind == "missing":
        return path, "required key is missing", "add it"
    got = item.get("input")
    return path, f"{item['msg']} (got {got!r})", _FIXES.get(kind, "see the profile reference in docs/profiles.md")


_FIXES = {
    "finite_number": "use a finite number",
    "less_than": "lower the value",
    "tuple_type": "use a list",
    "list_type": "use a list",
    "int_parsing": "use a whole number",
    "int_type": "use a whole number",
    "int_from_float": "use a whole number",
    "float_parsing": "use a number",
    "float_type": "use a number",
    "bool_parsing": "use true or false",
    "bool_type": "use true or false",
    "string_type": "use a text value",
    "literal_error": "use one of the listed values",
    "greater_than_equal": "raise the value",
    "greater_than": "raise the value",
    "less_than_equal": "lower the value",
    "model_type": "use a mapping of keys",
    "dict_type": "use a mapping of keys",
    "string_pattern_mismatch": "use letters, digits, '.', '_' or '-', starting with a letter or digit",
    "string_too_short": "give a non-empty value",
}


def _allowed_keys(location: tuple[Any, ...], settings: type[BaseModel]) -> list[str]:
    model: Any = settings
    for part in location:
        if isinstance(part, int):
            continue
        annotation = model.model_fields[part].annotation
        model = next(
            (
                arg
                for arg in (getattr(annotation, "__args__", None) or (annotation,))
                if isinstance(arg, type) and issubclass(arg, BaseModel)
            ),
            annotation,
        )
    return sorted(model.model_fields)
