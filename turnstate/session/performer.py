"""The part of a session that performs what its strategy machine asks: one method per effect, each
outcome fed back to the machine as the next event, so every decision stays in the machine's table;
and the records a turn leaves (its step record, a harness summary's record, the turn that failed
closed), built by durable/artifacts.py and written by the run's writer.

It shares the session's counts (RunCounts) and ledger: what it performs is counted where the
session's cursor reads it."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from turnstate.adapters.contract import (
    ErrorKind,
    ModelRequest,
    ModelResponse,
    ProviderAdapter,
    ProviderError,
    ToolCall,
    ToolResult,
    ToolSpec,
    Usage,
    UserInput,
)
from turnstate.adapters.images import ImagePart
from turnstate.durable.accounting import CallFacts, Ledger, UsageJournal
from turnstate.durable.artifacts import (
    Attempt,
    CallKind,
    compaction_record,
    failed_turn_record,
    request_delta,
    step_record,
    summary_input,
)
from turnstate.durable.cursor import RunCounts
from turnstate.durable.events import EventLog, Status
from turnstate.durable.images import ImageFiles
from turnstate.durable.layout import FAILED_TURN, SUMMARY_INPUT, compaction_name
from turnstate.durable.redaction import Redactor
from turnstate.durable.tool_results import ToolResultStore
from turnstate.durable.transition_log import TransitionLines
from turnstate.durable.writer import ArtifactWriter
from turnstate.machine.engine import Effect, Event, LiveMachine
from turnstate.session import scaffold
from turnstate.session.profile_sections import AgentConfig
from turnstate.session.rate_limit import NOT_PACED, Pacing
from turnstate.strategies.events import (
    BackoffElapsed,
    CallCompaction,
    CallProvider,
    CallSummary,
    FailClosed,
    ParseAction,
    ReportSummary,
    SubmitAction,
    WaitBeforeRetry,
    outcome_event,
)
from turnstate.strategies.strategy import StrategyModel
from turnstate.strategies.turn import check_answers


@dataclass(frozen=True)
class Turn:
    """The model's reply to the open turn, held provisionally until the caller accepts or rejects it.
    It never holds the provider's opaque state (encrypted reasoning, signatures)."""

    text: str
    action: str | None  # the action parsed from the reply, as the environment steps it (`MARK 3 5`)
    problem: str | None  # why the reply cannot be accepted (None: it acts, or it is a tool round)
    tool_calls: tuple[ToolCall, ...]  # every call the reply made, in order: each needs a result
    action_call: ToolCall | None  # the call that named the action (action_mode tools)
    reasoning_summary: str | None
    usage: Usage  # this reply's usage (the turn's other calls are in the session's ledger)
    attempt: int  # which of the turn's provider calls answered, from 1

    @property
    def is_tool_round(self) -> bool:
        """The reply only called read-only tools: accept it, answer its calls, and observe again."""
        return self.action is None and self.problem is None


@dataclass
class OpenTurn:
    """The open turn's bookkeeping while its effects are performed."""

    history_before: int  # the accepted history's size in items when the turn opened
    attempts: list[Attempt] = field(default_factory=list)  # its provider calls, in order
    summary: tuple[int, ReportSummary] | None = None  # the harness summary it committed: its number and report
    held: Turn | None = None  # the reply waiting for the caller's verdict
    action: str | None = None
    failure: str | None = None


@dataclass(frozen=True)
class ReplyRules:
    """How a held reply is read: the action space, the read-only tools offered, how the model acts,
    and how many tool rounds in a row it may take."""

    actions: tuple[ToolSpec, ...]
    tool_names: tuple[str, ...]
    action_mode: scaffold.ActionMode
    max_tool_rounds: int

    @classmethod
    def of(cls, actions: tuple[ToolSpec, ...], tools: Sequence[ToolSpec], agent: AgentConfig) -> ReplyRules:
        """The rules of a session offering `actions` and the read-only `tools`, with the profile's agent settings."""
        return cls(actions, tuple(tool.name for tool in tools), agent.action_mode, agent.max_tool_rounds)


@dataclass
class RunFiles:
    """The run folder's files a turn writes to (none for a session without artifacts)."""

    writer: ArtifactWriter | None = None
    events: EventLog | None = None
    usage: UsageJournal | None = None
    images: ImageFiles | None = None


class Performer:
    """Performs a session's effects (see the module docstring). `machine` is the session's, set once it
    is started or resumed; `on_point` is called at the named points of a turn (session.POINTS)."""

    machine: LiveMachine[StrategyModel]

    def __init__(
        self,
        adapter: ProviderAdapter,
        counts: RunCounts,
        ledger: Ledger,
        redactor: Redactor,
        rules: ReplyRules,
        tool_results: ToolResultStore,
        files: RunFiles,
        on_point: Callable[[Any], None],
        sleep: Callable[[float], None],
        pacing: Pacing | None = None,
    ) -> None:
        self.adapter, self.counts, self.ledger, self.redactor = adapter, counts, ledger, redactor
        self.rules, self.tool_results, self.files = rules, tool_results, files
        self._on_point, self._sleep, self.pacing = on_point, sleep, pacing
        self.provider_seconds = 0.0
        self.rate_limit_seconds = 0.0  # waited on the shared rate limit before calls
        self.server_message: str | None = None  # the last fatal refusal's words (RunResult.server_message)
        self.failed_turn: str | None = None  # the failed turn's record, once written
        self.failure: str | None = None  # why the turn that failed closed did
        self._last_sent: tuple[int, ModelRequest] | None = None  # the previous step and its request
        self.results_as_input: tuple[str, ...] = ()  # call ids, in order: see `answers`

    def perform_all(self, event: Event, turn: OpenTurn) -> None:
        """Fire `event` and perform every effect that follows, each outcome fired in turn."""
        effects = deque(self.fire(event))
        while effects:
            next_event = self._perform(effects.popleft(), turn)
            if next_event is not None:
                effects.extend(self.fire(next_event))

    def fire(self, event: Event) -> list[Any]:
        """Fire `event` and log every transition it fired: a nested machine's, then its parent's on
        the `Done` that the nested machine's final state fires at once."""
        already = len(self.machine.fired)
        effects = self.machine.fire(event)
        if self.files.writer is not None:
            for fired in self.machine.fired[already:]:
                self.files.writer.log_transition(fired.as_log())
        return effects

    def _perform(self, effect: Effect, turn: OpenTurn) -> Event | None:
        """Perform one effect of the turn; the event that reports its outcome, if it has one."""
        match effect:
            case CallProvider():
                return self._call_provider(effect, turn)
            case CallCompaction():
                return self._call_compaction(effect, turn)
            case CallSummary():
                return self._call_summary(effect, turn)
            case ReportSummary():
                return self._report_summary(effect, turn)
            case ParseAction():
                return self._hold(effect, turn)
            case WaitBeforeRetry():
                return self._wait(effect, turn)
            case SubmitAction():
                turn.action = effect.action
                return None
            case FailClosed():
                turn.failure = effect.reason
                return None
        raise TypeError(f"session cannot perform effect {effect!r}")

    def _call_provider(self, effect: CallProvider, turn: OpenTurn) -> Event:
        """The action request, once the full text of every result it offloads is stored."""
        for ref, text in effect.offloaded:
            self.tool_results.put(ref, text)
        return self._call(self.adapter.call, effect.request, "action", turn)

    def _call_compaction(self, effect: CallCompaction, turn: OpenTurn) -> Event:
        """A native compaction call, asked to replace the whole accepted history it is sent."""
        return self._call(self.adapter.compact, effect.request, "compaction", turn, len(effect.request.items))

    def _call_summary(self, effect: CallSummary, turn: OpenTurn) -> Event:
        """A harness summary, an ordinary call of the adapter. Its input is written to SUMMARY_INPUT
        before the call, so a kill during the call keeps it, and every attempt's record repeats it.
        An adapter that cannot continue from a summary (validation refuses such a profile; an adapter
        given to the session directly can still be one) fails the turn closed with no call sent."""
        if self.adapter.summary_compaction is None:
            cannot = f"{type(self.adapter).__name__} cannot continue from a harness summary; use native compaction"
            refused = ProviderError(ErrorKind.FATAL, diagnostics={"detail": cannot})
            turn.attempts.append(
                Attempt("summary", effect.request, refused.kind.value, Usage(), diagnostics=dict(refused.diagnostics))
            )
            return outcome_event(refused, compaction=True)
        disclosed = summary_input(effect.summary_pass)
        if self.files.writer is not None:
            attempt = len(turn.attempts) + 1
            self.files.writer.write_json(SUMMARY_INPUT, {"turn": self.counts.turn, "attempt": attempt, **disclosed})
        return self._call(self.adapter.call, effect.request, "summary", turn, effect.summarized_items, disclosed)

    def _call(
        self,
        call: Callable[[ModelRequest], ModelResponse | ProviderError],
        request: ModelRequest,
        kind: CallKind,
        turn: OpenTurn,
        summarized_items: int | None = None,
        disclosed: dict[str, Any] | None = None,
    ) -> Event:
        """One provider call of any kind: timed, its usage billed to the turn, the opaque values of its
        reply known to the redactor, and its attempt added to the turn's; within the shared rate limit,
        if the profile has one."""
        self._on_point("before_provider_call" if kind == "action" else "during_compaction")
        paced = self.pacing.before(request) if self.pacing is not None else NOT_PACED
        started, started_at = time.perf_counter(), time.time_ns()
        outcome = call(request)
        self.provider_seconds += time.perf_counter() - started
        if self.pacing is not None:
            self.pacing.after(paced, outcome)
        self.rate_limit_seconds += paced.waited
        self.ledger.record_call(outcome.usage)
        replied = "replied" if kind == "action" else "compacted"
        came_out = replied if isinstance(outcome, ModelResponse) else outcome.kind.value
        if self.files.usage is not None:
            waited = round(paced.waited, 3)
            facts = CallFacts(self.counts.turn, len(turn.attempts) + 1, came_out, started_at, time.time_ns(), waited)
            self.files.usage.record(self.ledger.calls, kind, outcome.usage, facts)
        if kind == "action" and isinstance(outcome, ModelResponse):
            self._on_point("after_reply")
        if isinstance(outcome, ModelResponse):
            self.redactor.learn(outcome.native_items)  # before any record could repeat them
            attempt = Attempt(kind, request, came_out, outcome.usage, outcome.text, outcome.reasoning_summary)
            attempt.compaction_items = _compaction_items(self.adapter, outcome)
        else:
            attempt = Attempt(kind, request, outcome.kind.value, outcome.usage, diagnostics=dict(outcome.diagnostics))
            self.server_message = outcome.server_message or self.server_message
            if self.files.events is not None and kind == "action" and outcome.kind is ErrorKind.REFUSAL:
                self.files.events.assistant_message(
                    turn=self.counts.turn,
                    step=self.counts.step + 1,
                    text="",
                    status="refused",
                    attempt=len(turn.attempts) + 1,
                    reason="the provider refused to answer",
                )
        attempt.summarized_items, attempt.summary_input = summarized_items, disclosed
        turn.attempts.append(attempt)
        return outcome_event(outcome, compaction=kind != "action")

    def _report_summary(self, effect: ReportSummary, turn: OpenTurn) -> Event | None:
        """compaction_NNN.json for a harness summary that committed with this turn's action; the
        step's record points to it."""
        self.counts.summaries += 1
        number = self.counts.summaries
        if self.files.writer is not None:
            record = compaction_record(
                number,
                effect,
                turn.attempts,
                step=self.counts.step + 1,  # the step it commits with
                cost=self.ledger.cost,
                redact=self.redactor.text,
            )
            self.files.writer.write_json(compaction_name(number), record)
        turn.summary = (number, effect)
        return None

    def _hold(self, effect: ParseAction, turn: OpenTurn) -> Event | None:
        """The reply waits for the caller's verdict, with the action parsed from it if there is one;
        a tool round past the profile's `max_tool_rounds` has a problem instead."""
        response, rules = effect.response, self.rules
        parsed = scaffold.parse_reply(
            response.text, response.tool_calls, rules.actions, rules.tool_names, rules.action_mode
        )
        problem = parsed.problem
        if parsed.is_tool_round and self.counts.tool_rounds >= rules.max_tool_rounds:
            problem = f"{self.counts.tool_rounds} tool rounds in a row without an action (agent.max_tool_rounds)"
        turn.held = Turn(
            text=response.text,
            action=parsed.action,
            problem=problem,
            tool_calls=response.tool_calls,
            action_call=parsed.action_call,
            reasoning_summary=response.reasoning_summary,
            usage=response.usage,
            attempt=len(turn.attempts),
        )
        return None

    def _wait(self, effect: WaitBeforeRetry, turn: OpenTurn) -> Event:
        """The wait the machine asked for after the latest attempt, recorded on it."""
        turn.attempts[-1].waited_seconds = effect.seconds
        self._sleep(effect.seconds)
        return BackoffElapsed()

    def answers(self, results: tuple[ToolResult, ...]) -> tuple[tuple[ToolResult, ...], tuple[ToolResult, ...]]:
        """The results that answer the accepted state's calls (checked: one per call, in order), and
        those that come as input instead: a resume without the continuation wrote the last reply's
        calls into it as text (resume.with_calls_as_text), so their results (texts and images) are
        read as the next input, in order, ahead of the observation."""
        if not self.results_as_input:
            check_answers(self.machine.model.accepted, results)
            return results, ()
        given = tuple(result.call_id for result in results)
        if given != self.results_as_input:
            raise ValueError(
                f"the resumed reply's tool calls are {', '.join(self.results_as_input)}; "
                f"pass one result for each, in that order (got {', '.join(given) or 'none'})"
            )
        self.results_as_input = ()
        return (), results

    # The records.

    def log_inputs(self, results: Sequence[ToolResult], observation: UserInput) -> None:
        """The open turn's inputs in events.jsonl: the results of the last reply's calls, then the
        observation, the images of each kept in input_images/ and named by digest."""
        events, turn, step = self.files.events, self.counts.turn, self.counts.step + 1
        if events is not None:
            for result in results:
                events.tool_result(turn=turn, step=step, result=result, images=self._kept(result.images))
            if observation.text or observation.images:
                images = self._kept(observation.images)
                events.user_input(turn=turn, step=step, text=observation.text, source="observation", images=images)

    def log_buffered(self, given: UserInput) -> None:
        """A buffered input in events.jsonl, as the next turn's, which it opens."""
        if self.files.events is not None:
            turn, step, images = self.counts.turn + 1, self.counts.step + 1, self._kept(given.images)
            self.files.events.user_input(turn=turn, step=step, text=given.text, source="buffered", images=images)

    def _kept(self, images: Sequence[ImagePart]) -> tuple[str, ...]:
        return self.files.images.keep(images) if self.files.images is not None else ()

    def log_reply(self, held: Turn, status: Status, **verdict: str | None) -> None:
        """The held reply, with its verdict, and the calls it made, in events.jsonl: an accepted one
        as the step it just committed, a rejected one as the step its turn would commit."""
        if self.files.events is None:
            return
        step = self.counts.step if status == "accepted" else self.counts.step + 1
        message = self.files.events.assistant_message(
            turn=self.counts.turn, step=step, text=held.text, status=status, attempt=held.attempt, **verdict
        )
        for call in held.tool_calls:
            self.files.events.tool_call(message, call)

    def write_step(self, index: int, action: str | None, calls: Sequence[ToolCall], turn: OpenTurn) -> None:
        """The committed turn's step record (written on the writer's thread), and its compaction counted."""
        usage = self.ledger.take_for_step()
        record = step_record(
            index,
            self._request_record(index, turn.attempts[-1].request),
            action,
            calls,
            turn.attempts,
            usage=usage,
            history=(turn.history_before, self.machine.model.accepted.item_count),
            summary=turn.summary,
            transitions=self._step_transitions(),
            cost=self.ledger.cost,
            redact=self.redactor.text,
        )
        self.counts.compactions += record["compaction"] is not None
        if self.files.writer is not None:
            self.files.writer.write_step(index, record)

    def _step_transitions(self) -> TransitionLines:
        """Where the step's transitions are in transitions.jsonl (`fire` logged each as it fired)."""
        fired = len(self.machine.take_fired())
        writer = self.files.writer
        return writer.last_transitions(fired) if writer is not None else TransitionLines(0, fired)

    def _request_record(self, index: int, request: ModelRequest) -> dict[str, Any]:
        """What is new in this step's request since the previous step's (artifacts.request_delta)."""
        events = self.files.events
        logged = events.logged if events is not None else (lambda text: None)
        record = request_delta(self._last_sent, request, self.adapter.transcript.readable, logged)
        self._last_sent = (index, request)
        return record

    def fail_turn(self, turn: OpenTurn) -> None:
        """The turn failed closed: counted, and its record written (run_meta.json names it)."""
        self.counts.failed_attempts += sum(attempt.failed for attempt in turn.attempts)
        self.failed_turn, self.failure = FAILED_TURN, turn.failure
        if self.files.events is not None:
            reason = turn.failure or "the machine stopped"
            self.files.events.assistant_message(
                turn=self.counts.turn,
                step=self.counts.step + 1,
                text="",
                status="failed",
                attempt=len(turn.attempts),
                reason=reason,
                record=FAILED_TURN,
            )
        writer = self.files.writer
        if writer is None:
            return
        writer.sync_transitions()
        record = failed_turn_record(
            self.counts.step + 1,
            turn.failure,
            turn.attempts,
            usage=self.ledger.unattributed,
            transitions=[transition.as_log() for transition in self.machine.take_fired()],
            redact=self.redactor.text,
        )
        writer.write_json(FAILED_TURN, record)


def _compaction_items(adapter: ProviderAdapter, response: ModelResponse) -> int:
    """How many of a reply's native items are compaction items, as the adapter's transcript knows them."""
    latest = adapter.transcript.latest_compaction
    return sum(1 for item in response.native_items if latest([item]) == 0)
