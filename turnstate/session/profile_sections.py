"""The sections of a run profile (environment, agent, runtime, client, request, pricing), each a
pydantic model with every key described, and the bounds they share.

profile.py composes them into a Profile and checks what spans sections; the profile reference in
docs/profiles.md is generated from these models (reports/reference.py), so a key's description here is
its documentation. The rules a profile keeps are profile.py's docstring.
"""

from __future__ import annotations

import json
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator

from turnstate.adapters.contract import (
    DEFAULT_MAX_REPLY_BYTES,
    OutputLimitParam,
    RequestSettings,
)
from turnstate.adapters.tokens import MIN_CONTEXT_TOKENS
from turnstate.durable.layout import RUN_META, TOOL_RESULTS
from turnstate.durable.tool_results import PAGE_CHARS
from turnstate.local_provider.faults import FaultKind, first_repeated_ordinal
from turnstate.local_provider.server import DEFAULT_CONTEXT_WINDOW
from turnstate.session.scaffold import ActionMode
from turnstate.session.settings_file import Contradiction
from turnstate.strategies import STRATEGIES
from turnstate.strategies.offload import DEFAULT_KEEP_RECENT_PER_TOOL, DEFAULT_MIN_SAVINGS_CHARS
from turnstate.strategies.strategy import Backoff

LOCAL = "local"

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


class Section(BaseModel):
    # strict: YAML already has types, so a value of the wrong one is a mistake to name, not to coerce.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


class EnvironmentConfig(Section):
    name: str = Field(
        default="beacon_grid",
        description="a registered environment id: the built-in `beacon_grid`, `catalog_hunt` (a game with a read-only "
        "tool) or `arc_agi3` (real ARC-AGI-3 games, docs/arc-agi-3.md), or an id an installed package registers "
        "(Adding an environment, docs/extending.md). Never a file path, a module path or a URL: a name that looks "
        "like one is refused, and nothing is loaded from it. An unregistered id is refused naming the registered ones",
    )
    seed: int = Field(default=0, description="the same seed always gives the same game")
    options: dict[str, Any] = Field(
        default_factory=dict,
        description="the environment's own, checked by its factory; `beacon_grid`: `levels` (1-1000, default 3; a "
        "level takes about 7 turns), `width` (7-15, default 9), `height` (5-11, default 7), `render` (`text`, "
        "`image` or `both`, default `text`: `image` sends the grid as a PNG in the ARC-AGI-3 palette, its legend line "
        "in the text, which needs an adapter whose API takes images; with `agent.action_mode: tools` the image "
        "comes in the action's tool result), `scale` (1-32 px a cell, default 8); `catalog_hunt`: `levels` "
        "(1-1000, default 3; a level takes 2 turns when played well), `pages` (5-500, default 40); `arc_agi3`: "
        "docs/arc-agi-3.md. A third-party environment's are checked by its factory, and its error is named with its id",
    )


class BackoffConfig(Section):
    """How long a transient failure waits before its retry; the defaults are Backoff's."""

    base_seconds: float = Field(
        default=Backoff.base_seconds,
        gt=0,
        le=MAX_WAIT_SECONDS,
        description="the wait before the first retry of a transient failure; it doubles with each retry, with jitter",
    )
    max_seconds: float = Field(
        default=Backoff.max_seconds,
        gt=0,
        le=MAX_WAIT_SECONDS,
        description="the cap on one wait, a provider's `Retry-After` included; at least `base_seconds`",
    )
    max_total_seconds: float = Field(
        default=Backoff.max_total_seconds, ge=0, description="the bound on all the waits of one turn"
    )

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


class AgentConfig(Section):
    max_actions: int = Field(
        default=80, ge=1, description="accepted actions before the run stops (`max_actions` outcome)"
    )
    max_retries: int = Field(
        default=3,
        ge=0,
        description="retries per turn after a transient failure, refusal, truncation or invalid action",
    )
    max_context_length: int = Field(
        ge=MIN_CONTEXT_TOKENS,
        le=MAX_CONTEXT_TOKENS,
        description="the harness's context budget in estimated tokens; must exceed every output cap "
        "(`request.max_output_tokens`, `runtime.compaction.summary_max_output_tokens`)",
    )
    trim_low_water: float = Field(
        default=DEFAULT_TRIM_LOW_WATER,
        gt=0,
        le=1,
        description="manual_rolling: once the window passes the budget, the oldest whole turns go until it is at most "
        "this fraction of the prompt budget (`max_context_length` less `request.max_output_tokens`), so its prefix "
        "(and a provider's prompt cache of it) stays the same for many turns; `1` trims only what must go, moving "
        "the prefix every turn",
    )
    backoff: BackoffConfig = Field(
        default=BackoffConfig(), description="how long a transient failure waits before its retry"
    )
    action_mode: ActionMode = Field(
        default="text",
        description="how the model acts: one `ACTION: <name> [values]` line in its reply (`text`), or exactly one call "
        "of the environment's actions offered as function tools (`tools`; each with the JSON Schema of its "
        "arguments, and the call's result carries the next frame). An adapter whose reasoning is replayed only "
        "beside tool calls (`deepseek.chat_completions.v1`) needs `tools`",
    )
    max_tool_rounds: int = Field(
        default=8,
        ge=1,
        le=1000,
        description="replies in a row that only call read-only tools before one must act; past it such a reply is "
        "rejected",
    )
    max_actions_baseline_multiplier: float | None = Field(
        default=None,
        gt=0,
        le=100,
        description="a per-level budget, as the ARC-AGI-3 benchmarking harness sets it (its "
        "`MAX_ACTIONS_BASELINE_MULTIPLIER`, 5.0 in its configs): each level gets ceil(multiplier x its human "
        "baseline) accepted actions, RESETs included, and one that spends them unfinished ends the run "
        "(`level_budget` outcome; a resume goes on with what the level spent). Only for games whose "
        "`metadata.json` gives `baseline_actions`; refused elsewhere",
    )


DEFAULT_TRIGGER_TOKENS = 175_000
"""When a compaction by a call of its own starts if the profile does not say: the last accepted
action's completed context (its reported input plus output tokens) reaching this."""


DEFAULT_SUMMARY_HEADROOM_TOKENS = 1024
"""What validation keeps free for a harness summary's request beyond the trigger and the output cap."""

SUMMARY_KEYS = ("summary_input_headroom_tokens", "summary_max_output_tokens", "fork")
# What each strategy accepts as runtime.compaction.strategy, as its record says, for that key's description.
COMPACTION_BY_STRATEGY = "; ".join(f"{name}: {', '.join(record.compaction)}" for name, record in STRATEGIES.items())


class CompactionConfig(Section):
    strategy: str = Field(
        default="none",
        description="how the strategy compacts: `none`, `native` (the adapter's provider-native compaction, inline or "
        "by a call of its own: the table of adapters says which) or `harness_summary` (the model's summary, "
        "installed by the harness; the adapter must be able to continue from one). The strategy must accept it "
        f"({COMPACTION_BY_STRATEGY})",
    )
    trigger_tokens: int | None = Field(
        default=None,
        ge=1,
        description="for a compaction by a call of its own (native by a call, or `harness_summary`) only, refused "
        "otherwise: compact when the last accepted action's reported input plus output tokens reach it (the accepted "
        "items' estimate stands in if the provider reported none). Below `agent.max_context_length`; with "
        "`harness_summary`, it plus `request.max_output_tokens` plus the headroom must fit "
        f"`agent.max_context_length`. Absent: {DEFAULT_TRIGGER_TOKENS}. `{RUN_META}` records the policy with its "
        "defaults",
    )
    summary_input_headroom_tokens: int = Field(
        default=DEFAULT_SUMMARY_HEADROOM_TOKENS,
        ge=0,
        description="`harness_summary` only: room kept for the summary request beyond the trigger and the output cap",
    )
    summary_max_output_tokens: int | None = Field(
        default=None,
        ge=1,
        description="a compaction by a call of its own (a harness summary, or a native one by a call): its request's "
        "output cap; below `agent.max_context_length`, and the trigger plus it must fit `agent.max_context_length` "
        "(a compaction request holds at least the history that reached the trigger). Absent: "
        "`request.max_output_tokens`",
    )
    fork: bool | None = Field(
        default=None,
        description="`harness_summary` only: whether a summary request may fork the latest action request; absent: "
        "the adapter's default, else `true`",
    )


class ToolResultOffloadConfig(Section):
    """Seed 003's stale tool-result offload: present turns it on, each key its default when absent."""

    keep_recent_per_tool: int = Field(
        default=DEFAULT_KEEP_RECENT_PER_TOOL,
        ge=1,
        description="a tool result with at least this many newer results of the same tool goes out as a pointer",
    )
    min_savings_chars: int = Field(
        default=DEFAULT_MIN_SAVINGS_CHARS,
        ge=0,
        description="a result whose replacement saves fewer characters than this stays whole",
    )


class RuntimeConfig(Section):
    adapter_id: str = Field(
        description="a registered adapter id (the table of adapters lists them, with the strategies each implements)"
    )
    strategy: str = Field(
        description=f"the strategy machine that carries the state: {', '.join(f'`{name}`' for name in STRATEGIES)}; "
        "the adapter must implement it"
    )
    compaction: CompactionConfig = Field(
        default=CompactionConfig(), description="how the strategy compacts the history, and when"
    )
    tool_result_offload: ToolResultOffloadConfig | None = Field(
        default=None,
        description="seed 003's stale tool-result offload (strategies/offload.py), on when given (`{}` takes the "
        "defaults); manual_rolling and continuous_conversation only. Each action request is a projection: a tool "
        "result with at least `keep_recent_per_tool` newer results of the same tool goes out as a pointer, "
        '`[tool result offloaded: <tool>, ref tr-<16 hex>, <n> chars. Call read_tool_result with {"ref": "tr-..."} '
        "to read it.]`, a pure function of the tool, the content digest and the length, so it is byte-identical on "
        "every later request and the prompt cache breaks once per result. Error results, `read_tool_result` pages, "
        "results no reply has read yet and replacements saving fewer than `min_savings_chars` characters stay whole; "
        "opaque items are never touched; the accepted state always keeps every result whole. The full text is "
        f"written once to `{TOOL_RESULTS}/<ref>.txt` in the run folder, and the session offers `read_tool_result` "
        f"(`ref`, `offset`) to page it back {PAGE_CHARS} characters at a time. A summary forks the latest action "
        "request only when it was not projected (a fork would summarize pointers): otherwise it takes the independent form",
    )


class FaultConfig(Section):
    at: int = Field(
        ge=1, description="1-based ordinal of the model request that gets the fault, at most one per request"
    )
    kind: FaultKind = Field(description="what that request gets; local_provider/faults.py says what each kind does")
    retry_after_seconds: float | None = Field(
        default=None,
        gt=0,
        le=MAX_WAIT_SECONDS,
        description="`rate_limit` only: the 429 sends it as `retry-after`, and the provider refuses every request "
        "until it has passed",
    )


class LocalProviderConfig(Section):
    context_window: int | None = Field(
        default=None,
        ge=MIN_CONTEXT_TOKENS,
        description=f"the local provider's window; it (absent: {DEFAULT_CONTEXT_WINDOW}) must be at least "
        "`agent.max_context_length`",
    )
    faults: tuple[FaultConfig, ...] = Field(
        default=(),
        strict=False,  # a YAML list; strict mode alone would accept only a tuple. The faults themselves stay strict
        description="faults to inject, each at the model request it names",
    )
    recording: str | None = Field(
        default=None,
        min_length=1,
        description="the path of a recording of a winning ARC-AGI-3 play (the toolkit's JSONL, as the ARC-AGI-3 "
        "agents write it), or a folder of them, one per game, which the local model then plays (its game's), "
        "knowing where it is only from the state the strategy carries (local_provider/recording_policy.py; "
        "docs/arc-agi-3.md); checked at validation, line by line, against `environment.options.game_id`",
    )

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


MAX_PER_MINUTE = 1e9  # far above any provider's tier: beyond it a rate is a typo


class RateLimitConfig(Section):
    """A provider's rate limit, shared by every run of this user on this machine that sends to the same
    URL and model (a sweep's runs, each process and Ray worker): they wait their turn instead of
    drawing 429s (turnstate/session/rate_limit.py)."""

    requests_per_minute: float | None = Field(
        default=None, gt=0, le=MAX_PER_MINUTE, description="the requests a minute the provider allows"
    )
    tokens_per_minute: float | None = Field(
        default=None,
        gt=0,
        le=MAX_PER_MINUTE,
        description="the tokens a minute it allows; a request counts its estimated input tokens and its output "
        "cap until its usage is known, then what it used",
    )

    @model_validator(mode="after")
    def _limits_something(self) -> RateLimitConfig:
        if self.requests_per_minute is None and self.tokens_per_minute is None:
            raise Contradiction(
                "client.rate_limit",
                "it limits nothing",
                "give requests_per_minute, tokens_per_minute or both, or remove it",
            )
        return self


class ClientConfig(Section):
    base_url: str = Field(
        default=LOCAL,
        description=f"`{LOCAL}`, which starts the embedded provider for the run, or an http(s) URL with a host",
    )
    base_url_env: str | None = Field(
        default=None,
        description="an environment variable that, when set, holds the URL to use instead of `base_url` (then the "
        "default), such as `LLAMA_BASE_URL` for a server wherever it listens; its value must be an http(s) URL with "
        f"a host; refused with `base_url: {LOCAL}`",
    )
    api_key_env: str | None = Field(
        default=None,
        description="the environment variable holding the key; required for a remote URL. The key itself is never "
        "in a profile or an artifact",
    )
    timeout_seconds: float = Field(
        default=120.0,
        gt=0,
        le=MAX_WAIT_SECONDS,
        description="a deadline for each whole request (connect, first byte, the whole body, streamed or not, action "
        "and compaction alike); a request past it is a transient `DeadlineExceeded` failure, retried by the backoff "
        "rules. Host name lookup is not bounded by it",
    )
    max_reply_bytes: int = Field(
        default=DEFAULT_MAX_REPLY_BYTES,
        ge=MIN_REPLY_BYTES,
        le=MAX_REPLY_BYTES,
        description="the largest reply or stream a request may read; a larger one is a malformed reply "
        "(`ReplyTooLarge`), so an endless stream ends there instead of growing memory",
    )
    local: LocalProviderConfig | None = Field(
        default=None, description=f"the embedded local provider's settings; only with `base_url: {LOCAL}`"
    )
    rate_limit: RateLimitConfig | None = Field(
        default=None,
        description="the provider's rate limit, shared by the runs that send to this URL and model; only with a "
        f"URL (the embedded provider, `base_url: {LOCAL}`, is each run's own)",
    )

    @model_validator(mode="after")
    def _base_url_is_local_or_a_url(self) -> ClientConfig:
        if not self.is_local and not is_http_url(self.base_url):
            raise Contradiction(
                "client.base_url",
                f"{self.base_url!r} is neither 'local' nor an http(s) URL with a host",
                "use local, or the provider's URL such as https://api.openai.com/v1",
            )
        if self.rate_limit is not None and self.is_local:
            raise Contradiction(
                "client.rate_limit",
                "the embedded local provider is each run's own, so there is no limit to share",
                "remove it, or serve the provider (turnstate serve) and give base_url its URL",
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


class RequestConfig(Section):
    model: str = Field(description="the model name sent to the provider; not empty or blank")
    max_output_tokens: int = Field(
        ge=1,
        description="sent in the field `request.output_limit_param` names; at least 16 on the Responses adapters "
        "(OpenAI's floor), and below `agent.max_context_length`",
    )
    output_limit_param: OutputLimitParam = Field(
        default=RequestSettings.output_limit_param,
        description="OpenAI's own endpoint wants `max_completion_tokens` (its reasoning models reject `max_tokens`); "
        "many compatible servers know only `max_tokens`",
    )
    stream: bool = Field(
        default=False,
        description="stream the reply (with `stream_options.include_usage`); the adapter still waits for the full "
        "text and usage",
    )
    temperature: float | None = Field(
        default=None,
        ge=0,
        le=2,
        description="the sampling temperature; refused for an adapter whose SDK call cannot send one",
    )
    options: dict[str, Any] = Field(
        default_factory=dict,
        description="settings only the selected adapter's API has, checked by the adapter for the strategy; each "
        "adapter's are listed under its id in the profile reference (docs/profiles.md)",
    )
    extra_body: dict[str, JsonValue] = Field(
        default_factory=dict,
        description=f"body fields a server takes beyond the API's own, as JSON of at most {EXTRA_BODY_BYTES} bytes, "
        "sent as given beside the adapter's: llama.cpp's `grammar`, `json_schema`, `cache_prompt`, `seed`; vLLM's "
        "`structured_outputs`, `chat_template_kwargs` (such as `{enable_thinking: false}`). A field the adapter "
        "sets itself (`model`, `messages`, `max_tokens`, `stream`, an option's field...) is refused, naming where it "
        f"comes from; Gemini Interactions takes none. Recorded with the settings in `{RUN_META}`",
    )
    action_grammar: Literal["plain", "thinking"] | None = Field(
        default=None,
        description="a GBNF grammar of the environment's actions, sent in llama.cpp's `grammar` field (Chat "
        "Completions and Responses adapters; text actions), so that a small model can write only valid `ACTION:` "
        "lines, each argument one its schema allows; `thinking` first allows a `<think>...</think>` of at most 120 "
        "characters, which llama-server returns apart as the reasoning when its chat template knows thinking. "
        "Refused beside `request.extra_body.grammar`, and by a session that offers tools (no reply could call one)",
    )

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


class PricingConfig(Section):
    input: float = Field(default=0.0, ge=0, le=MAX_PRICE_PER_MILLION, description="USD per million input tokens")
    output: float = Field(default=0.0, ge=0, le=MAX_PRICE_PER_MILLION, description="USD per million output tokens")
