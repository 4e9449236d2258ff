"""A run traced live: its spans (turnstate/durable/traces.py) sent, as the run goes, to the OTLP
endpoint that the OpenTelemetry SDK's standard variables name.

Tracing is on when `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT` is set
(and neither `OTEL_SDK_DISABLED=true` nor `OTEL_TRACES_EXPORTER=none` says no); the exporter reads
the rest of its variables itself (headers, timeout, compression, OTEL_SERVICE_NAME and
OTEL_RESOURCE_ATTRIBUTES). Message content is in the spans only with
`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`. It needs the otel extra (the
OpenTelemetry SDK and its OTLP/HTTP exporter, which speaks http/protobuf): nothing of it is imported
unless tracing is on, and a run that asks for tracing without it is refused before it starts.

The spans are built from the run folder's own lines, read as they are written: after each turn
commits, the lines written since are turned into spans and handed to the SDK's batch processor;
when the session closes, the run's span follows, with run_meta.json's totals, and everything is
flushed. A session without a run folder has no records to build spans from, and no trace. A
resumed run's process sends a run span of its own (`run resume N`), the parent of what it adds.
Spans that the endpoint did not take are counted and named in a warning when the run ends: a trace
that did not arrive never fails the run, and is never silent.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, cast

from turnstate.durable.jsonl import whole_part
from turnstate.durable.layout import CALLS, EVENTS
from turnstate.durable.traces import (
    ROOT,
    RunFacts,
    Span,
    SpanBuilder,
    run_meta,
    span_id,
    trace_id,
)
from turnstate.session.endpoint import RunSetupError

ENDPOINTS: Final = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
PROTOCOLS: Final = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
CONTENT: Final = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
INSTALL: Final = "pip install 'turnstate[otel]'"

log = logging.getLogger(__name__)


class TracesUnavailable(RunSetupError):
    """Tracing was asked for and cannot be done here; the message says why and what to do."""


@dataclass(frozen=True)
class Tracing:
    """Tracing as the environment asks for it: where to (for messages) and whether with content."""

    endpoint: str
    content: bool


def configured(environ: Mapping[str, str]) -> Tracing | None:
    """The tracing `environ` asks for (None: none), or TracesUnavailable when it cannot be done: the
    SDK is not installed, or the protocol asked for is not http/protobuf."""
    endpoint = next((environ[name] for name in ENDPOINTS if environ.get(name)), None)
    off = environ.get("OTEL_SDK_DISABLED", "").lower() == "true" or environ.get("OTEL_TRACES_EXPORTER") == "none"
    if endpoint is None or off:
        return None
    named = next((name for name in PROTOCOLS if environ.get(name)), None)
    if named is not None and environ[named] != "http/protobuf":
        raise TracesUnavailable(
            f"{named}={environ[named]}: turnstate sends traces over OTLP/HTTP with protobuf; "
            f"fix: set {named}=http/protobuf (and an endpoint that takes it), or unset it"
        )
    try:
        import opentelemetry.exporter.otlp.proto.http.trace_exporter  # noqa: F401
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError:
        variable = next(name for name in ENDPOINTS if environ.get(name))
        raise TracesUnavailable(
            f"{variable} is set, but the OpenTelemetry SDK is not installed; fix: {INSTALL}, or unset {variable}"
        ) from None
    return Tracing(endpoint, environ.get(CONTENT, "").lower() == "true")


class LiveTraces:
    """The live trace of the run in `run_dir` (see the module docstring): `turn_committed` after each
    commit, `close` once, when the session closes (after its last run_meta.json)."""

    def __init__(self, tracing: Tracing, run_dir: Path, *, resumes: int) -> None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        self.tracing, self.run_dir = tracing, run_dir
        self.started = time.time_ns()
        self.run = RunFacts.of(run_meta(run_dir))
        self.root = ROOT if resumes == 0 else f"{ROOT} resume {resumes}"
        self.builder = SpanBuilder(self.run, content=tracing.content, root=self.root)
        self._read, self._lines = {EVENTS: 0, CALLS: 0}, {EVENTS: 1, CALLS: 1}
        self._new_spans(
            EVENTS
        )  # a resumed run's earlier events (its calls' names, its verdicts): known, not sent again
        self._read[CALLS], self._lines[CALLS] = _whole_lines(run_dir / CALLS)
        self._resource = Resource.create({"service.name": "turnstate"})
        self._exporter = _Counting(OTLPSpanExporter())
        self._processor = BatchSpanProcessor(cast(Any, self._exporter))  # SpanExporter's methods, not its class (lazy)
        self._closed = False

    def turn_committed(self) -> None:
        """Send the spans of the lines written since the last time."""
        for span in self._new_spans():
            self._send(span)

    def close(self) -> None:
        """The last lines' spans and the run's span (run_meta.json as it stands), every span flushed
        to the endpoint; a warning names any it did not take."""
        if self._closed:
            return
        self._closed = True
        try:
            spans = self._new_spans()
            spans += self.builder.finish(run_meta(self.run_dir), start=self.started, end=time.time_ns())
            for span in spans:
                self._send(span)
        finally:
            self._processor.shutdown()  # flushes every span it holds, then stops its thread
        exporter = self._exporter
        if exporter.refused:
            log.warning(
                "traces: %d of %d spans of %s were not taken by %s; the run's records hold them all "
                "(turnstate export %s --otlp FILE)",
                exporter.refused,
                exporter.sent,
                self.run.run_id,
                self.tracing.endpoint,
                self.run_dir,
            )

    def _new_spans(self, *names: str) -> list[Span]:
        """The spans of the lines written since the last time to each of `names` (default: both)."""
        spans: list[Span] = []
        for name in names or (EVENTS, CALLS):  # the events first (SpanBuilder)
            path = self.run_dir / name
            try:
                with path.open("rb") as file:
                    file.seek(self._read[name])
                    content = file.read()
            except FileNotFoundError:
                continue
            whole = whole_part(content)  # a line still being written waits
            first = self._lines[name]
            self._read[name] += len(whole)
            self._lines[name] += whole.count(b"\n")
            spans += self.builder.lines(name, whole, path, first)
        return spans

    def _send(self, span: Span) -> None:
        self._processor.on_end(sdk_span(self.run.run_id, span, self._resource))


def sdk_span(run_id: str, span: Span, resource: Any) -> Any:
    """`span` as the OpenTelemetry SDK's ReadableSpan, with the ids durable/traces.py derives."""
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

    trace = int(trace_id(run_id), 16)

    def context(key: str) -> SpanContext:
        return SpanContext(trace, int(span_id(run_id, key), 16), is_remote=False, trace_flags=TraceFlags(1))

    return ReadableSpan(
        name=span.name,
        context=context(span.key),
        parent=context(span.parent) if span.parent is not None else None,
        resource=resource,
        attributes=dict(span.attributes),
        kind=SpanKind.CLIENT if span.kind == "client" else SpanKind.INTERNAL,
        status=Status(StatusCode.ERROR, span.error) if span.error is not None else Status(StatusCode.UNSET),
        start_time=span.start,
        end_time=span.end,
        instrumentation_scope=InstrumentationScope("turnstate"),
    )


def _whole_lines(path: Path) -> tuple[int, int]:
    """How many bytes of the file at `path` are whole lines, and the number the next line will have."""
    try:
        whole = whole_part(path.read_bytes())
    except FileNotFoundError:
        return 0, 1
    return len(whole), whole.count(b"\n") + 1


class _Counting:
    """An exporter that counts the spans handed to it and those its endpoint did not take."""

    def __init__(self, exporter: Any) -> None:
        self.exporter, self.sent, self.refused = exporter, 0, 0

    def export(self, spans: Any) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        self.sent += len(spans)
        result = self.exporter.export(spans)
        if result is not SpanExportResult.SUCCESS:
            self.refused += len(spans)
        return result

    def shutdown(self) -> None:
        self.exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return bool(self.exporter.force_flush(timeout_millis))
