"""A run as an Inspect evaluation log (`turnstate export RUN_DIR --inspect FILE`), in Inspect's own log
types (inspect_ai.log, the `inspect` extra), so that `inspect view` opens it beside other evaluations.

The run is one evaluation of its profile (the task) with one sample:
- the sample's messages are the conversation as it was accepted: each observation and buffered input,
  each accepted reply with its tool calls, each tool result; rejected replies are not in it;
- its events are the run's provider calls in order, each a model event with the request the call's
  step sent (as `turnstate show --json` gives it; a compaction or summary call's input is the history,
  so its input is left empty), the reply, the usage and the verdict on it (in the event's metadata),
  and each timed tool execution as a tool event;
- its scores are the run's: `won` (1 for a win, else 0) and `levels_won`;
- its usage is run_meta.json's, in Inspect's terms: Inspect's `input_tokens` excludes the cache reads
  and writes, which turnstate's includes.
A run still going is a log that started, an interrupted one was cancelled, one that failed closed or
crashed ended in error with its failure.

Everything in it is read from the run's records, which were written redacted, and passes the run's
redactor again: no opaque provider state and no key."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import cached_property
from itertools import takewhile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

from turnstate.durable.artifacts import StepRecordError, sent_requests
from turnstate.durable.events import AnyEvent, AssistantMessageEvent, ToolCallEvent, ToolResultEvent, UserInputEvent
from turnstate.durable.layout import CALLS, EVENTS, recorded_steps
from turnstate.durable.traces import RunFacts, TraceError, call_lines, event_lines, record_bytes, run_meta
from turnstate.durable.writer import write_exported
from turnstate.reports.text import run_redactor

if TYPE_CHECKING:
    from inspect_ai.event import ModelEvent, ToolEvent
    from inspect_ai.log import EvalLog
    from inspect_ai.model import ChatMessage, ChatMessageAssistant, ModelUsage

FORMATS: Final[dict[str, Literal["eval", "json"]]] = {
    ".eval": "eval",
    ".json": "json",
}  # Inspect's two log formats, by the file's suffix
INSTALL: Final = "the Inspect export needs inspect-ai; fix: .venv/bin/pip install -e '.[inspect]'"
SCORER: Final = "turnstate"
ERROR_OUTCOMES: Final = ("failed_closed", "crashed", "error")
READABLE_ROLE: Final = "turnstate.role"  # a request's message of a role Inspect lacks (reasoning, compaction) says it


class InspectExportError(Exception):
    """A run folder, or a log file, the export cannot use; the message names it and the fix."""


def export_inspect(run_dir: Path, path: Path) -> int:
    """Write the run in `run_dir` to `path` as an Inspect evaluation log (.eval, Inspect's default, or
    .json; written whole: a file beside it, then renamed); how many events its sample holds."""
    log_format = FORMATS.get(path.suffix)
    if log_format is None:
        raise InspectExportError(
            f"{path}: Inspect reads logs named *.eval or *.json; fix: name a file ending in .eval (Inspect's default)"
        )
    try:
        from inspect_ai.log import write_eval_log
    except ImportError:
        raise InspectExportError(INSTALL) from None
    log = inspect_log(run_dir)
    try:
        write_exported(path, lambda partial: write_eval_log(log, str(partial), format=log_format))
    except OSError as error:
        raise InspectExportError(
            f"{path}: cannot be written ({error.strerror}); fix: name a file in a folder you can write"
        ) from None
    return sum(len(sample.events) for sample in log.samples or ())


def inspect_log(run_dir: Path) -> EvalLog:
    """The run in `run_dir` as an Inspect EvalLog (the module's mapping), from its records as they stand."""
    try:
        records = _RunLog.read(run_dir)
    except (TraceError, StepRecordError) as error:
        raise InspectExportError(str(error)) from None
    try:
        return records.log()
    except (ValueError, TypeError) as error:  # pydantic's ValidationError is a ValueError
        problem = str(error).splitlines()[0]
        raise InspectExportError(
            f"{run_dir}: its records do not make an Inspect log ({problem}); fix: restore the run folder as "
            "`turnstate run` wrote it"
        ) from None


@dataclass
class _RunLog:
    """A run's records, read for its log: run_meta.json, its events and provider calls, and the request
    each recorded step sent."""

    run_dir: Path
    meta: dict[str, Any]
    events: list[AnyEvent]
    calls: list[dict[str, Any]]
    requests: dict[int, list[dict[str, Any]]]
    facts: RunFacts = field(init=False)

    def __post_init__(self) -> None:
        self.facts = RunFacts.of(self.meta)

    @classmethod
    def read(cls, run_dir: Path) -> _RunLog:
        meta = run_meta(run_dir)
        redactor = run_redactor(meta)
        events = list(event_lines(record_bytes(run_dir, EVENTS), run_dir / EVENTS))
        calls = list(call_lines(record_bytes(run_dir, CALLS), run_dir / CALLS))
        requests = {
            step: redactor.scrub(messages) for step, messages in sent_requests(run_dir, recorded_steps(run_dir)).items()
        }
        return cls(run_dir, redactor.scrub(meta), events, calls, requests)

    @property
    def model(self) -> str:
        """The model as Inspect names one: its provider, a slash, its name."""
        return f"{self.facts.provider}/{self.facts.model}"

    def log(self) -> EvalLog:
        from inspect_ai.log import (
            EvalConfig,
            EvalDataset,
            EvalError,
            EvalLog,
            EvalPlan,
            EvalPlanStep,
            EvalResults,
            EvalSample,
            EvalSpec,
            EvalStats,
        )
        from inspect_ai.model import GenerateConfig, ModelOutput
        from inspect_ai.scorer import Score

        meta, facts = self.meta, self.facts
        settings = meta.get("settings") or {}
        environment = settings.get("environment") or {}
        started, completed = self.bounds
        usage = {self.model: inspect_usage(meta.get("usage") or {}, meta.get("cost_estimate"))}
        messages = self._messages()
        replies = [message for message in messages if message.role == "assistant"]
        won = meta.get("outcome") == "win"
        scores = {
            "won": Score(value=1 if won else 0, answer=str(meta.get("outcome")), explanation=_ending(meta)),
            "levels_won": Score(value=int(meta.get("levels_won") or 0)),
        }
        failure = meta.get("failure")
        error = (
            EvalError(message=str(failure or meta.get("outcome")), traceback="", traceback_ansi="")
            if meta.get("outcome") in ERROR_OUTCOMES
            else None
        )
        sample = EvalSample(
            id=facts.run_id,
            epoch=1,
            input=list(takewhile(lambda message: message.role in ("system", "user"), messages)) or "",
            target="",
            messages=messages,
            output=ModelOutput(model=self.model, choices=[_choice(replies[-1])] if replies else []),
            scores=scores,
            metadata=_present(
                meta, "outcome", "strategy", "turns", "accepted_actions", "failed_attempts", "compactions"
            ),
            events=[*self._model_events(), *self._tool_events()],
            model_usage=usage,
            started_at=_iso(started),
            completed_at=_iso(completed),
            total_time=meta.get("wall_seconds"),
            working_time=meta.get("provider_seconds"),
            error=error,
        )
        sample.events.sort(key=lambda event: event.timestamp)
        request = settings.get("request") or {}
        spec = EvalSpec(
            run_id=facts.run_id,
            eval_id=facts.run_id,
            created=_iso(started),
            task=facts.profile,
            task_id=facts.profile,
            task_args={"environment": environment.get("name"), "seed": environment.get("seed")},
            solver=str(meta.get("strategy")),
            dataset=EvalDataset(name=environment.get("name"), samples=1, sample_ids=[facts.run_id]),
            model=self.model,
            model_generate_config=GenerateConfig(
                max_tokens=request.get("max_output_tokens"), temperature=request.get("temperature")
            ),
            model_base_url=meta.get("endpoint"),
            config=EvalConfig(epochs=1, message_limit=None),
            packages={"turnstate": _version()},
            metadata={"turnstate": _present(meta, "adapter_id", "strategy", "runtime", "settings", "resumes")},
        )
        results = EvalResults(
            total_samples=1,
            completed_samples=0 if meta.get("outcome") == "running" else 1,
            scores=[_eval_score(name, score.value) for name, score in scores.items()],
        )
        return EvalLog(
            status=_status(meta),
            eval=spec,
            plan=EvalPlan(
                name=SCORER, steps=[EvalPlanStep(solver=str(meta.get("strategy")), params=meta.get("runtime") or {})]
            ),
            results=results,
            stats=EvalStats(started_at=_iso(started), completed_at=_iso(completed), model_usage=usage),
            error=error,
            samples=[sample],
        )

    @cached_property
    def bounds(self) -> tuple[int, int]:
        """When the run started and last did something, in Unix nanoseconds: its calls' and tools' times,
        else run_meta.json's change time."""
        times = [moment for line in self.calls for moment in (line.get("started"), line.get("ended"))]
        times += [
            moment for event in self.events if isinstance(event, ToolResultEvent) and event.ran for moment in event.ran
        ]
        known = [moment for moment in times if isinstance(moment, int)]
        if not known:
            known = [os.stat(self.run_dir).st_mtime_ns]
        return min(known), max(known)

    def _messages(self) -> list[ChatMessage]:
        """The conversation as it was accepted: the system prompt of the first request, then each
        input, accepted reply (with its tool calls) and tool result, in order."""
        from inspect_ai.model import ChatMessageSystem, ChatMessageTool, ChatMessageUser

        first = self.requests[min(self.requests)] if self.requests else []
        messages: list[ChatMessage] = [
            ChatMessageSystem(content=str(message.get("content", "")))
            for message in first[:1]
            if message.get("role") == "system"
        ]
        for event in self.events:
            match event:
                case UserInputEvent():
                    messages.append(ChatMessageUser(content=event.text))
                case AssistantMessageEvent(status="accepted"):
                    messages.append(_reply(event, self.tool_calls.get(event.seq, []), self.model))
                case ToolResultEvent():
                    call = self.calls_by_id.get(event.call_id)
                    messages.append(
                        ChatMessageTool(
                            content=event.content,
                            tool_call_id=event.call_id,
                            function=call.name if call is not None else None,
                            error=_tool_error(event),
                        )
                    )
        return messages

    @cached_property
    def tool_calls(self) -> dict[int, list[ToolCallEvent]]:
        """Each reply's tool calls, by the number of its event."""
        calls: dict[int, list[ToolCallEvent]] = {}
        for event in self.events:
            if isinstance(event, ToolCallEvent):
                calls.setdefault(event.message, []).append(event)
        return calls

    @cached_property
    def calls_by_id(self) -> dict[str, ToolCallEvent]:
        """Each tool call, by its id (which its result names)."""
        return {call.call_id: call for calls in self.tool_calls.values() for call in calls}

    def _model_events(self) -> list[ModelEvent]:
        from inspect_ai.event import ModelEvent
        from inspect_ai.model import GenerateConfig, ModelOutput

        verdicts = {(e.turn, e.attempt): e for e in self.events if isinstance(e, AssistantMessageEvent)}
        last_step: dict[int, int] = {}  # a turn's last step: the request of its calls that name no reply
        for event in self.events:
            last_step[event.turn] = max(last_step.get(event.turn, 0), event.step)
        start = self.bounds[0]
        events = []
        for line in self.calls:
            if not isinstance(line.get("started"), int) or not isinstance(line.get("ended"), int):
                continue  # a line an older turnstate wrote says no time
            turn, attempt, kind = int(line["turn"]), int(line["attempt"]), str(line.get("kind", "action"))
            outcome = str(line.get("outcome", ""))
            verdict = verdicts.get((turn, attempt))
            step = verdict.step if verdict is not None else last_step.get(turn)
            action = kind == "action"
            usage = inspect_usage(line.get("usage") or {})
            seconds = (line["ended"] - line["started"]) / 1e9
            failed = outcome not in ("replied", "compacted")
            if verdict is not None:
                reply = _reply(verdict, self.tool_calls.get(verdict.seq, []), self.model)
                output = ModelOutput(model=self.model, choices=[_choice(reply)], usage=usage, time=seconds)
            else:
                output = ModelOutput(model=self.model, usage=usage, time=seconds, error=outcome if failed else None)
            metadata = {
                "turnstate.call": line["call"],
                "turnstate.call.kind": "retry" if action and attempt > 1 else kind,
                "turnstate.turn": turn,
                "turnstate.attempt": attempt,
                "turnstate.outcome": outcome,
                **({"turnstate.step": step} if step is not None else {}),
                **({"turnstate.verdict": verdict.status} if verdict is not None else {}),
                **({"turnstate.verdict.reason": verdict.reason} if verdict is not None and verdict.reason else {}),
                **({"turnstate.waited_on_limit": line["waited_on_limit"]} if line.get("waited_on_limit") else {}),
            }
            request = self.requests.get(step, []) if action and step is not None else []
            events.append(
                ModelEvent(
                    timestamp=_datetime(line["started"]),
                    completed=_datetime(line["ended"]),
                    working_start=(line["started"] - start) / 1e9,
                    working_time=seconds,
                    model=self.model,
                    input=[_message(message) for message in request],
                    tools=[],
                    tool_choice="auto",
                    config=GenerateConfig(),
                    output=output,
                    error=outcome if failed else None,
                    metadata=metadata,
                )
            )
        return events

    def _tool_events(self) -> list[ToolEvent]:
        from inspect_ai.event import ToolEvent

        start = self.bounds[0]
        events = []
        for event in self.events:
            if not isinstance(event, ToolResultEvent) or event.ran is None:
                continue
            call = self.calls_by_id.get(event.call_id)
            events.append(
                ToolEvent(
                    timestamp=_datetime(event.ran[0]),
                    completed=_datetime(event.ran[1]),
                    working_start=(event.ran[0] - start) / 1e9,
                    working_time=(event.ran[1] - event.ran[0]) / 1e9,
                    id=event.call_id,
                    function=call.name if call is not None else "",
                    arguments=call.arguments if call is not None else {},
                    result=event.content,
                    error=_tool_error(event),
                    metadata={"turnstate.turn": event.turn},
                )
            )
        return events


def inspect_usage(usage: Mapping[str, Any], cost: Any = None) -> ModelUsage:
    """turnstate's usage (input tokens including the cache reads and writes) in Inspect's terms (input
    tokens at full rate, without them)."""
    from inspect_ai.model import ModelUsage

    read, write = int(usage.get("cached_input_tokens", 0)), int(usage.get("cache_write_tokens", 0))
    inputs, outputs = int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0))
    return ModelUsage(
        input_tokens=inputs - read - write,
        output_tokens=outputs,
        total_tokens=inputs + outputs,
        input_tokens_cache_read=read or None,
        input_tokens_cache_write=write or None,
        reasoning_tokens=int(usage.get("reasoning_tokens", 0)) or None,
        total_cost=cost if isinstance(cost, (int, float)) else None,
    )


def _reply(event: AssistantMessageEvent, calls: Sequence[ToolCallEvent], model: str) -> ChatMessageAssistant:
    from inspect_ai.model import ChatMessageAssistant
    from inspect_ai.tool import ToolCall

    return ChatMessageAssistant(
        content=event.text,
        tool_calls=[ToolCall(id=call.call_id, function=call.name, arguments=dict(call.arguments)) for call in calls]
        or None,
        model=model,
        source="generate",
    )


def _choice(reply: Any) -> Any:
    from inspect_ai.model import ChatCompletionChoice

    return ChatCompletionChoice(message=reply, stop_reason="tool_calls" if reply.tool_calls else "stop")


def _message(message: Mapping[str, Any]) -> ChatMessage:
    """A readable message of a request (`turnstate show --json`'s) as Inspect's chat message: a role
    Inspect has as itself, a reasoning summary as the assistant's reasoning, any other item (a
    compaction, a call) as the assistant's, its readable role in the metadata."""
    from inspect_ai.model import (
        ChatMessageAssistant,
        ChatMessageSystem,
        ChatMessageTool,
        ChatMessageUser,
        Content,
        ContentReasoning,
    )

    content = message.get("content")
    text = content if isinstance(content, str) else "" if content is None else str(content)
    role = str(message.get("role"))
    if role == "system":
        return ChatMessageSystem(content=text)
    if role == "user":
        return ChatMessageUser(content=text)
    if role == "tool":
        return ChatMessageTool(content=text)
    if role == "assistant":
        return ChatMessageAssistant(content=text)
    said: str | list[Content] = [ContentReasoning(reasoning=text)] if role == "reasoning" else text
    return ChatMessageAssistant(content=said, metadata={READABLE_ROLE: role})


def _tool_error(event: ToolResultEvent) -> Any:
    from inspect_ai.tool import ToolCallError

    return ToolCallError("unknown", event.content) if event.is_error else None


def _eval_score(name: str, value: Any) -> Any:
    from inspect_ai.log import EvalMetric, EvalScore

    return EvalScore(name=name, scorer=SCORER, metrics={"mean": EvalMetric(name="mean", value=float(value))})


def _status(meta: Mapping[str, Any]) -> Literal["started", "success", "cancelled", "error"]:
    outcome = meta.get("outcome")
    if outcome == "running":
        return "started"
    if outcome == "interrupted":
        return "cancelled"
    return "error" if outcome in ERROR_OUTCOMES else "success"


def _ending(meta: Mapping[str, Any]) -> str:
    failure = meta.get("failure")
    return f"{meta.get('outcome')}: {failure}" if failure else str(meta.get("outcome"))


def _present(meta: Mapping[str, Any], *keys: str) -> dict[str, Any]:
    return {key: meta[key] for key in keys if meta.get(key) is not None}


def _datetime(nanoseconds: int) -> datetime:
    return datetime.fromtimestamp(nanoseconds / 1e9, tz=timezone.utc)


def _iso(nanoseconds: int) -> str:
    return _datetime(nanoseconds).isoformat()


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("turnstate")
    except PackageNotFoundError:
        return "unknown"
