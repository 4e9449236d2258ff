"""Run profiles: YAML files validated with pydantic.

Every error names the file, the key path and the fix. Unknown keys are errors (a misspelt key that
is silently ignored is a setting that silently does not apply), and so are settings that contradict
each other or name an adapter the registry does not know.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from turnstate.adapters.contract import RequestSettings
from turnstate.adapters.registry import UnknownAdapter, descriptor_for
from turnstate.harness.accounting import Prices
from turnstate.local_provider.faults import FaultKind, first_repeated_ordinal
from turnstate.strategies import STRATEGIES
from turnstate.strategies.record import StrategySettings

LOCAL = "local"
PROFILES_DIR = Path(__file__).resolve().parent.parent / "profiles"
DEFAULT_PROFILE = PROFILES_DIR / "local-manual-rolling.yaml"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EnvironmentConfig(_Section):
    name: str = "beacon_grid"
    seed: int = 0
    options: dict[str, Any] = Field(default_factory=dict)


class AgentConfig(_Section):
    max_actions: int = Field(default=80, ge=1)
    max_retries: int = Field(default=3, ge=0)
    max_context_length: int = Field(ge=256)


class CompactionConfig(_Section):
    strategy: str = "none"  # a compaction machine the strategy accepts (its record says which)


class RuntimeConfig(_Section):
    adapter_id: str
    strategy: str
    compaction: CompactionConfig = CompactionConfig()


class FaultConfig(_Section):
    at: int = Field(ge=1, description="1-based ordinal of the model request that gets the fault")
    kind: FaultKind


class LocalProviderConfig(_Section):
    context_window: int | None = Field(default=None, ge=256)
    faults: tuple[FaultConfig, ...] = ()

    @model_validator(mode="after")
    def _one_fault_per_request(self) -> LocalProviderConfig:
        repeated = first_repeated_ordinal(fault.at for fault in self.faults)
        if repeated is not None:
            raise _Contradiction(
                "client.local.faults",
                f"more than one fault at request {repeated}",
                "give each request at most one fault",
            )
        return self


class ClientConfig(_Section):
    base_url: str = LOCAL
    api_key_env: str | None = None
    timeout_seconds: float = Field(default=120.0, gt=0)
    local: LocalProviderConfig | None = None

    @property
    def is_local(self) -> bool:
        return self.base_url == LOCAL


class RequestConfig(_Section):
    model: str
    max_output_tokens: int = Field(ge=1)
    stream: bool = False
    temperature: float | None = Field(default=None, ge=0, le=2)


class PricingConfig(_Section):
    input: float = Field(default=0.0, ge=0, description="USD per million input tokens")
    output: float = Field(default=0.0, ge=0, description="USD per million output tokens")


class Profile(_Section):
    id: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
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
        if self.request.max_output_tokens >= self.agent.max_context_length:
            raise _Contradiction(
                "request.max_output_tokens",
                f"{self.request.max_output_tokens} leaves no room for the prompt in "
                f"agent.max_context_length {self.agent.max_context_length}",
                "make it smaller than agent.max_context_length",
            )
        if self.client.local is not None and not self.client.is_local:
            raise _Contradiction(
                "client.local",
                "local provider settings given but client.base_url is not 'local'",
                "remove client.local",
            )
        if not self.client.is_local and not self.client.api_key_env:
            raise _Contradiction(
                "client.api_key_env",
                "a remote base_url needs a key",
                "name the environment variable that holds the API key",
            )
        _check_environment(self.environment)
        return self

    # The plain settings the leaves receive; built here, once, so no leaf knows the profile.

    def strategy_settings(self, system_prompt: str) -> StrategySettings:
        return StrategySettings(
            adapter_id=self.runtime.adapter_id,
            system_prompt=system_prompt,
            max_retries=self.agent.max_retries,
            max_context_length=self.agent.max_context_length,
            max_output_tokens=self.request.max_output_tokens,
            compaction=self.runtime.compaction.strategy,
        )

    def request_settings(self) -> RequestSettings:
        return RequestSettings(**self.request.model_dump())

    def prices(self) -> Prices:
        return Prices(input_per_million=self.pricing.input, output_per_million=self.pricing.output)


class _Contradiction(ValueError):
    def __init__(self, path: str, problem: str, fix: str) -> None:
        super().__init__(f"{problem}")
        self.path, self.problem, self.fix = path, problem, fix


def _check_environment(environment: EnvironmentConfig) -> None:
    from turnstate.harness.environments import EnvironmentConfigError, make_environment

    try:
        make_environment(environment.name, environment.seed, environment.options)
    except EnvironmentConfigError as error:
        raise _Contradiction("environment", str(error), "see the environment options in README.md") from None


class ProfileError(ValueError):
    """Every problem of one profile file, each as `file: key.path: problem; fix: ...`."""

    def __init__(self, source: str, problems: list[tuple[str, str, str]]) -> None:
        self.source = source
        self.problems = problems
        lines = [f"{source}: {path or '(top level)'}: {problem}; fix: {fix}" for path, problem, fix in problems]
        super().__init__("\n".join(lines))


def load_profile(path: str | Path) -> Profile:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ProfileError(str(path), [("", f"cannot read the file ({error.strerror})", "check the path")]) from None
    return parse_profile(text, source=str(path))


def parse_profile(text: str, source: str = "<profile>") -> Profile:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "unknown position"
        raise ProfileError(source, [("", f"not valid YAML at {where}", "fix the YAML syntax there")]) from None
    if not isinstance(data, dict):
        raise ProfileError(source, [("", "the profile must be a mapping of keys", "start with `id: ...`")])
    try:
        return Profile.model_validate(data)
    except ValidationError as error:
        raise ProfileError(source, [_explain(item) for item in error.errors()]) from None


def _explain(item: Any) -> tuple[str, str, str]:
    context = item.get("ctx") or {}
    contradiction = context.get("error")
    if isinstance(contradiction, _Contradiction):
        return contradiction.path, contradiction.problem, contradiction.fix
    location = tuple(item["loc"])
    path = ".".join(str(part) for part in location)
    kind = item["type"]
    if kind == "extra_forbidden":
        allowed = ", ".join(_allowed_keys(location[:-1]))
        return path, "unknown key", f"remove it or correct the spelling (allowed here: {allowed})"
    if kind == "missing":
        return path, "required key is missing", "add it"
    got = item.get("input")
    return path, f"{item['msg']} (got {got!r})", _FIXES.get(kind, "see the profile reference in README.md")


_FIXES = {
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
    "string_pattern_mismatch": "use letters, digits, '.', '_' or '-'",
    "string_too_short": "give a non-empty value",
}


def _allowed_keys(location: tuple[Any, ...]) -> list[str]:
    model: Any = Profile
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
