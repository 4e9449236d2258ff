"""A run's OpenTelemetry spans, built from its records, in the GenAI semantic conventions.

One builder (`SpanBuilder`) turns a run folder's lines into spans, whoever asks: `turnstate export
RUN_DIR --otlp FILE` reads the whole folder (`run_spans`) and writes OTLP/JSON (`otlp_json`); a run
traced live (turnstate/session/live_traces.py) feeds it each line as the run writes it and hands
each span to the OpenTelemetry SDK. So the spans a backend receives live and the spans of an export
are the same spans, with the same ids.

The spans (the gen_ai.* attributes are the conventions'; turnstate.* are this library's):
- `invoke_agent {profile}`, the run: the conversation id (the run id), the agent (the profile), the
  provider and model, the run's usage as run_meta.json counts it, and how it ended.
- `chat {model}`, one per provider call (calls.jsonl), a child of the run: its usage (cached,
  cache-creation and reasoning tokens as the conventions name them), `turnstate.call.kind` (action,
  retry: an action call after another call of its turn, compaction, summary), its turn and attempt,
  how it came out (`turnstate.outcome`: replied, compacted, or the failure's error kind, which is
  also the span's error) and, for a reply the model was given a verdict on, that verdict
  (`turnstate.verdict`: accepted, rejected, refused, failed) with its reason.
- `execute_tool {tool}`, one per tool result the run timed (ToolResult.ran), a child of the run.

Content (the inputs a turn added, each reply's text, tool arguments and results) is in the spans only
when asked for (`content`), and then only as events.jsonl holds it: redacted as every artifact is.
No span holds opaque provider state or a key: the records they are built from never do.

Ids are derived from the run id (the trace) and each span's key in it, so an export made twice, or
after a live trace, names the same spans.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from turnstate.adapters.registry import ADAPTERS
from turnstate.durable.events import (
    AnyEvent,
    AssistantMessageEvent,
    ToolCallEvent,
    ToolResultEvent,
    UserInputEvent,
    parse_event,
)
from turnstate.durable.jsonl import whole_lines_of
from turnstate.durable.layout import CALLS, EVENTS, RUN_META
from turnstate.durable.writer import write_exported

Attribute = str | int | float | bool
SpanKind = Literal["internal", "client"]
ROOT: Final = "run"  # the key of the run's span
TIMED_CALL: Final = ("turn", "attempt", "started", "ended")  # what a calls.jsonl line with times says (CallFacts)

# The conventions' provider names where they name one (gen_ai.provider.name); else the adapter's own.
CONVENTION_PROVIDERS: Final = {"openai-compatible": "openai", "xai": "x_ai", "google": "gcp.gemini"}
USAGE_ATTRIBUTES: Final = {  # calls.jsonl's usage keys -> the conventions' attributes
    "input_tokens": "gen_ai.usage.input_tokens",
    "output_tokens": "gen_ai.usage.output_tokens",
    "cached_input_tokens": "gen_ai.usage.cache_read.input_tokens",
    "cache_write_tokens": "gen_ai.usage.cache_creation.input_tokens",
    "reasoning_tokens": "gen_ai.usage.reasoning.output_tokens",
}


@dataclass(frozen=True)
class Span:
    """One span, as any OpenTelemetry exporter sends it: `key` names it within its run (its id is
    derived from it), `parent` is its parent's key, times are Unix nanoseconds, and `error` (when
    set) is why it failed: the span's status is then ERROR with that description."""

    key: str
    parent: str | None
    name: str
    kind: SpanKind
    start: int
    end: int
    attributes: Mapping[str, Attribute]
    error: str | None = None


@dataclass(frozen=True)
class RunFacts:
    """What every span of a run says of it, from run_meta.json."""

    run_id: str
    profile: str
    adapter_id: str
    model: str

    @classmethod
    def of(cls, meta: Mapping[str, Any]) -> RunFacts:
        settings = meta.get("settings") or {}
        return cls(
            str(meta.get("run_id", "")),
            str(meta.get("config_id", "")),
            str(meta.get("adapter_id", "")),
            str((settings.get("request") or {}).get("model", "")),
        )

    @property
    def provider(self) -> str:
        descriptor = ADAPTERS.get(self.adapter_id)
        own = descriptor.provider if descriptor is not None else self.adapter_id.partition(".")[0]
        return CONVENTION_PROVIDERS.get(own, own)

    def common(self) -> dict[str, Attribute]:
        return {
            "gen_ai.conversation.id": self.run_id,
            "gen_ai.provider.name": self.provider,
            "gen_ai.request.model": self.model,
        }


def trace_id(run_id: str) -> str:
    """The run's trace id: 32 hex digits derived from its id."""
    return hashlib.sha256(f"turnstate trace {run_id}".encode()).hexdigest()[:32]


def span_id(run_id: str, key: str) -> str:
    """A span's id: 16 hex digits derived from the run id and the span's key."""
    return hashlib.sha256(f"turnstate span {run_id}\0{key}".encode()).hexdigest()[:16]


@dataclass
class _Turn:
    """What a turn's lines said so far: its inputs (for content), each attempt's verdict and text."""

    inputs: list[dict[str, Any]] = field(default_factory=list)
    verdicts: dict[int, AssistantMessageEvent] = field(default_factory=dict)


class SpanBuilder:
    """Spans from a run's lines: `event` each events.jsonl event, `call` each calls.jsonl line; each
    returns the spans it completed. Feed a turn's events before its calls, so that a call's span
    has the turn's inputs and the verdict on its reply. A provider call that replied and has no
    verdict yet waits for it (its assistant_message); `finish` returns the calls still waiting (a
    run that ended, or was killed, before a verdict) and the run's span."""

    def __init__(self, run: RunFacts, *, content: bool = False, root: str = ROOT) -> None:
        self.run, self.content, self.root = run, content, root
        self._turns: dict[int, _Turn] = {}
        self._waiting: dict[tuple[int, int], dict[str, Any]] = {}  # (turn, attempt) -> its call's line
        self._tools: dict[str, ToolCallEvent] = {}  # call id -> the call (its tool's name and arguments)
        self._bounds: tuple[int, int] | None = None  # the earliest start and latest end seen

    def call(self, line: Mapping[str, Any]) -> list[Span]:
        """A calls.jsonl line: its span, or none yet while its reply waits for a verdict (a line an
        older turnstate wrote says no time: it has no span)."""
        if not isinstance(line.get("started"), int) or not isinstance(line.get("ended"), int):
            return []
        where = (int(line["turn"]), int(line["attempt"]))
        verdict = self._turn(where[0]).verdicts.get(where[1])
        if line.get("kind") == "action" and line.get("outcome") == "replied" and verdict is None:
            self._waiting[where] = dict(line)
            return []
        return [self._chat(line, verdict)]

    def event(self, event: AnyEvent) -> list[Span]:
        """An event: the spans it completes (a verdict's call, a timed tool's execution)."""
        turn = self._turn(event.turn)
        match event:
            case AssistantMessageEvent():
                turn.verdicts[event.attempt] = event
                waiting = self._waiting.pop((event.turn, event.attempt), None)
                return [self._chat(waiting, event)] if waiting is not None else []
            case UserInputEvent():
                turn.inputs.append({"role": "user", "parts": [{"type": "text", "content": event.text}]})
            case ToolCallEvent():
                self._tools[event.call_id] = event
            case ToolResultEvent():
                response = {"type": "tool_call_response", "id": event.call_id, "response": event.content}
                turn.inputs.append({"role": "tool", "parts": [response]})
                if event.ran is not None:
                    return [self._tool(event, event.ran)]
        return []

    def finish(self, meta: Mapping[str, Any], *, start: int | None = None, end: int | None = None) -> list[Span]:
        """The calls still waiting for a verdict, then the run's span, with the usage and the ending
        of `meta` (run_meta.json as it stands). Its times are `start` and `end` (a live trace's), or
        else those of the spans it holds."""
        spans = [self._chat(line, None) for line in self._waiting.values()]
        self._waiting.clear()
        first, last = self._bounds or (start or 0, end or 0)
        usage = meta.get("usage") or {}
        attributes: dict[str, Attribute] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": self.run.profile,
            **self.run.common(),
            **_usage(usage),
            **_present(
                {
                    "turnstate.outcome": meta.get("outcome"),
                    "turnstate.strategy": meta.get("strategy"),
                    "turnstate.adapter_id": meta.get("adapter_id"),
                    "turnstate.turns": meta.get("turns"),
                    "turnstate.accepted_actions": meta.get("accepted_actions"),
                    "turnstate.failed_attempts": meta.get("failed_attempts"),
                    "turnstate.provider_calls": meta.get("provider_calls"),
                    "turnstate.levels_won": meta.get("levels_won"),
                }
            ),
        }
        failure = meta.get("failure")
        error = str(failure) if failure and meta.get("outcome") in ("failed_closed", "error") else None
        name = f"invoke_agent {self.run.profile}"
        spans.append(Span(self.root, None, name, "internal", start or first, end or last, attributes, error))
        return spans

    def lines(self, name: str, content: bytes, path: Path, first_line: int = 1) -> list[Span]:
        """The spans that the whole lines of `content` complete: a part of the run's file `name`
        (EVENTS or CALLS, read from `path`) whose first line is number `first_line`."""
        if name == EVENTS:
            return [span for event in event_lines(content, path, first_line) for span in self.event(event)]
        return [span for line in call_lines(content, path, first_line) for span in self.call(line)]

    def _turn(self, number: int) -> _Turn:
        return self._turns.setdefault(number, _Turn())

    def _seen(self, start: int, end: int) -> None:
        first, last = self._bounds or (start, end)
        self._bounds = (min(first, start), max(last, end))

    def _chat(self, line: Mapping[str, Any], verdict: AssistantMessageEvent | None) -> Span:
        turn, attempt, outcome = int(line["turn"]), int(line["attempt"]), str(line.get("outcome", ""))
        kind = str(line.get("kind", "action"))
        if kind == "action" and attempt > 1:
            kind = "retry"
        attributes: dict[str, Attribute] = {
            "gen_ai.operation.name": "chat",
            **self.run.common(),
            **_usage(line.get("usage") or {}),
            "turnstate.call.kind": kind,
            "turnstate.call.number": int(line["call"]),
            "turnstate.turn": turn,
            "turnstate.attempt": attempt,
            "turnstate.outcome": outcome,
        }
        if verdict is not None:
            attributes["turnstate.verdict"] = verdict.status
            if verdict.reason:
                attributes["turnstate.verdict.reason"] = verdict.reason
            if self.content:
                reply = [{"role": "assistant", "parts": [{"type": "text", "content": verdict.text}]}]
                attributes["gen_ai.output.messages"] = _json(reply)
        failed = outcome not in ("replied", "compacted")
        if failed:
            attributes["error.type"] = outcome
        if self.content and kind in ("action", "retry"):  # a compaction's input is the history, not the turn's
            attributes["gen_ai.input.messages"] = _json(self._turn(turn).inputs)
        self._seen(line["started"], line["ended"])
        name = f"chat {self.run.model}"
        key = f"call {line['call']}"
        return Span(
            key, self.root, name, "client", line["started"], line["ended"], attributes, outcome if failed else None
        )

    def _tool(self, result: ToolResultEvent, ran: tuple[int, int]) -> Span:
        call = self._tools.get(result.call_id)
        tool = call.name if call is not None else ""
        attributes: dict[str, Attribute] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.conversation.id": self.run.run_id,
            "gen_ai.tool.name": tool,
            "gen_ai.tool.call.id": result.call_id,
            "gen_ai.tool.type": "function",
            "turnstate.turn": result.turn,
        }
        if result.is_error:
            attributes["error.type"] = "tool_error"
        if self.content:
            attributes["gen_ai.tool.call.result"] = result.content
            if call is not None:
                attributes["gen_ai.tool.call.arguments"] = _json(call.arguments)
        self._seen(*ran)
        error = "the tool answered with an error" if result.is_error else None
        return Span(f"tool {result.call_id}", self.root, f"execute_tool {tool}", "internal", *ran, attributes, error)


def _usage(usage: Mapping[str, Any]) -> dict[str, Attribute]:
    return {name: int(usage.get(key, 0)) for key, name in USAGE_ATTRIBUTES.items()}


def _present(values: Mapping[str, Any]) -> dict[str, Attribute]:
    return {key: value for key, value in values.items() if isinstance(value, (str, int, float, bool))}


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class TraceError(Exception):
    """A run folder whose spans cannot be built; the message names the file and the fix."""


def run_meta(run_dir: Path) -> dict[str, Any]:
    """The run's run_meta.json, or TraceError naming what is wrong with it."""
    path = run_dir / RUN_META
    try:
        meta = json.loads(path.read_bytes())
    except FileNotFoundError:
        raise TraceError(f"{path}: missing; fix: pass a run folder (runs/<run-id>)") from None
    except (OSError, ValueError) as error:
        raise TraceError(f"{path}: cannot be read ({error}); fix: restore the file as the run wrote it") from None
    if not isinstance(meta, dict):
        raise TraceError(f"{path}: not a run's metadata; fix: restore the file as the run wrote it")
    return meta


def call_lines(content: bytes, path: Path, first_line: int = 1) -> Iterator[dict[str, Any]]:
    """The calls.jsonl lines in `content` (whole lines; `first_line` is the first one's number)."""
    for number, line in enumerate(whole_lines_of(content), first_line):
        try:
            entry = json.loads(line)
            if not isinstance(entry, dict) or not isinstance(entry.get("call"), int):
                raise ValueError("not a call")
            if "started" in entry and not all(isinstance(entry.get(key), int) for key in TIMED_CALL):
                raise ValueError("not a timed call")
        except ValueError:
            raise TraceError(
                f"{path}: line {number} is not a provider call; fix: restore the file as the run wrote it"
            ) from None
        yield entry


def event_lines(content: bytes, path: Path, first_line: int = 1) -> Iterator[AnyEvent]:
    """The events in `content` (whole lines; `first_line` is the first one's number)."""
    for number, line in enumerate(whole_lines_of(content), first_line):
        try:
            yield parse_event(line)
        except ValueError as error:
            raise TraceError(f"{path}: line {number}: {error}; fix: restore the file as the run wrote it") from None


def run_spans(run_dir: Path, meta: Mapping[str, Any], *, content: bool = False) -> list[Span]:
    """Every span of the run in `run_dir`, whose run_meta.json is `meta` (`run_meta`), as its records
    stand (a run still going, or killed, has a run span all the same, saying so in its outcome)."""
    builder = SpanBuilder(RunFacts.of(meta), content=content)
    spans: list[Span] = []
    for name in (EVENTS, CALLS):  # the events first: SpanBuilder
        spans += builder.lines(name, record_bytes(run_dir, name), run_dir / name)
    return spans + builder.finish(meta)


def record_bytes(run_dir: Path, name: str) -> bytes:
    """The bytes of the run's records file `name` (none for a file the run never wrote), or TraceError."""
    path = run_dir / name
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""
    except OSError as error:
        raise TraceError(f"{path}: cannot be read ({error.strerror}); fix: check its permissions") from None


# OTLP/JSON: the OTLP protobuf's JSON mapping, with the ids in hex and 64-bit integers as strings
# (the OTLP specification's JSON encoding), one ExportTraceServiceRequest a line, as the
# OpenTelemetry Collector's file exporter writes them.

SCOPE: Final = "turnstate"
OTLP_KINDS: Final = {"internal": 1, "client": 3}  # SpanKind: SPAN_KIND_INTERNAL, SPAN_KIND_CLIENT
STATUS_ERROR: Final = 2


def otlp_value(value: Attribute) -> dict[str, Any]:
    """An attribute's value as OTLP's AnyValue."""
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    return {"stringValue": value}


def otlp_json(run_id: str, spans: Iterable[Span], resource: Mapping[str, Attribute]) -> bytes:
    """The spans as one OTLP/JSON ExportTraceServiceRequest, a line ending in a newline."""
    trace = trace_id(run_id)
    encoded = []
    for span in spans:
        one: dict[str, Any] = {
            "traceId": trace,
            "spanId": span_id(run_id, span.key),
            "name": span.name,
            "kind": OTLP_KINDS[span.kind],
            "startTimeUnixNano": str(span.start),
            "endTimeUnixNano": str(span.end),
            "attributes": [{"key": key, "value": otlp_value(value)} for key, value in span.attributes.items()],
            "status": {"code": STATUS_ERROR, "message": span.error} if span.error is not None else {},
        }
        if span.parent is not None:
            one["parentSpanId"] = span_id(run_id, span.parent)
        encoded.append(one)
    request = {
        "resourceSpans": [
            {
                "resource": {"attributes": [{"key": k, "value": otlp_value(v)} for k, v in resource.items()]},
                "scopeSpans": [{"scope": {"name": SCOPE}, "spans": encoded}],
            }
        ]
    }
    return json.dumps(request, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def export_otlp(run_dir: Path, path: Path, *, content: bool = False) -> int:
    """Write the spans of the run in `run_dir` to `path` as OTLP/JSON (written whole: a file beside it,
    then renamed); how many spans it holds. TraceError names a record it could not read."""
    meta = run_meta(run_dir)
    spans = run_spans(run_dir, meta, content=content)
    written = otlp_json(str(meta.get("run_id", run_dir.name)), spans, {"service.name": SCOPE})
    try:
        write_exported(path, lambda partial: partial.write_bytes(written))
    except OSError as error:
        raise TraceError(
            f"{path}: cannot be written ({error.strerror}); fix: name a file in a folder you can write"
        ) from None
    return len(spans)
