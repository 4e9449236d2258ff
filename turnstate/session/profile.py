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

import difflib
import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import Field, PrivateAttr, model_validator

from turnstate.adapters.contract import (
    ProviderAdapter,
    RequestBounds,
    RequestSettings,
    ToolSpec,
)
from turnstate.adapters.registry import UnknownAdapter, descriptor_for
from turnstate.durable.accounting import Prices
from turnstate.durable.layout import ID_PATTERN, RUN_META
from turnstate.local_provider.server import DEFAULT_CONTEXT_WINDOW
from turnstate.session.profile_checks import (
    check_action_grammar,
    check_environment,
    check_extra_body,
    check_images,
    check_recording,
)
from turnstate.session.profile_sections import (
    DEFAULT_TRIGGER_TOKENS,
    SUMMARY_KEYS,
    AgentConfig,
    ClientConfig,
    CompactionConfig,
    EnvironmentConfig,
    PricingConfig,
    RequestConfig,
    RuntimeConfig,
    Section,
)
from turnstate.session.settings_file import Contradiction, Override, ProfileError, load_settings, parse_settings
from turnstate.session.shipped import PROFILES_DIR, shipped_names
from turnstate.strategies import STRATEGIES
from turnstate.strategies.compaction import Compaction, HarnessSummary, NativeByCall, NativeInline, NoCompaction
from turnstate.strategies.offload import Offload
from turnstate.strategies.strategy import StrategySettings

DEFAULT_PROFILE = PROFILES_DIR / "local-manual-rolling.yaml"


class Profile(Section):
    id: str = Field(
        min_length=1,
        pattern=ID_PATTERN,
        description=f"the config id, recorded in `{RUN_META}` and used in the run id",
    )
    environment: EnvironmentConfig = Field(default=EnvironmentConfig(), description="the game the agent plays")
    agent: AgentConfig = Field(description="how the agent plays: its budgets, its retries and how it acts")
    runtime: RuntimeConfig = Field(
        description="the adapter and the strategy machine that carries the state, with its compaction"
    )
    client: ClientConfig = Field(
        default=ClientConfig(), description="where the requests go: the endpoint, its key and its bounds"
    )
    request: RequestConfig = Field(description="what every model request sends")
    pricing: PricingConfig = Field(
        default=PricingConfig(),
        description="prices for the cost estimate only; nothing is written into provider-reported usage",
    )

    _overrides: tuple[str, ...] = PrivateAttr(default=())

    @property
    def overrides(self) -> tuple[str, ...]:
        """The `--set KEY=VALUE` overrides the profile was loaded with, as given (its settings hold them)."""
        return self._overrides

    def overridden(self, overrides: Sequence[Override | str]) -> Profile:
        """The profile, remembering that it was loaded with `overrides` (a copy: profiles are frozen)."""
        copy = self.model_copy()
        copy._overrides = tuple(item if isinstance(item, str) else f"{item[0]}={item[1]}" for item in overrides)
        return copy

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
        check_images(self.environment, adapter.image_limits is not None, descriptor.adapter_id)
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
        resume can tell the profile it continues under from the one it was written with. Without
        `client.rate_limit`: how fast the calls go is not what a checkpoint holds, so a resume may
        change it (and a run written before the key existed keeps its digest)."""
        return hashlib.sha256(self.model_dump_json(exclude={"client": {"rate_limit"}}).encode("utf-8")).hexdigest()

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
    return {name: PROFILES_DIR / f"{name}.yaml" for name in shipped_names()}


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
    close = difflib.get_close_matches(path.name.removesuffix(".yaml"), shipped, n=1)
    guess = f"did you mean {close[0]}? " if close else ""
    fix = f"{guess}pass a profile's path, or the name of a shipped one: {', '.join(shipped)}"
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


def load_profile(path: str | Path, overrides: Sequence[Override] = ()) -> Profile:
    """The profile file at `path`, with `overrides` (`--set KEY=VALUE`) set in it before it is
    validated; the profile remembers them (`overrides`, which run_meta.json records)."""
    profile = load_settings(path, Profile, overrides)
    return profile.overridden(overrides) if overrides else profile


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
