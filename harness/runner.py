"""The runner: the agent loop that performs what the machines decide.

observe -> render input -> the strategy machine builds a request -> the adapter calls the provider ->
parse the action -> the machine commits (or retries from the unchanged accepted state) -> submit the
action to the environment. The machine emits effects; the runner performs each one and feeds the
outcome back as the next event, so every decision stays in the machine's table.

A GAME_OVER frame arrives without a model call: the runner buffers it in the accepted state, resets
the game itself, and the reset frame prompts the next call, with the buffered frame replayed first.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from turnstate.adapters.contract import (
    Endpoint,
    ErrorKind,
    ModelRequest,
    ModelResponse,
    ProviderAdapter,
    ProviderError,
    Usage,
)
from turnstate.adapters.registry import descriptor_for
from turnstate.harness import scaffold
from turnstate.harness.accounting import Ledger
from turnstate.harness.artifacts import ArtifactWriter, Redactor, fitted, new_run_id, request_delta
from turnstate.harness.endpoint import open_endpoint
from turnstate.harness.environments import (
    Environment,
    Frame,
    GameState,
    make_environment,
)
from turnstate.harness.profile import Profile
from turnstate.machine.engine import Event, Fired, LiveMachine
from turnstate.strategies import STRATEGIES
from turnstate.strategies.events import (
    ActionAccepted,
    ActionRejected,
    BackoffElapsed,
    CallCompaction,
    CallProvider,
    CallSummary,
    FailClosed,
    InputBuffered,
    ObservationArrived,
    ParseAction,
    ReportSummary,
    SubmitAction,
    WaitBeforeRetry,
    outcome_event,
)
from turnstate.strategies.state import RuntimeState
from turnstate.strategies.strategy import StrategyModel

RESET = "RESET"
FAILED_TURN = "failed_turn.json"  # the attempts of the turn that failed closed, referenced from run_meta.json
SUMMARY_INPUT = "summary_input.json"  # the latest harness summary call's input, written before the call


@dataclass
class RunResult:
    run_id: str
    artifacts: Path
    outcome: str  # win | max_actions | failed_closed
    failure: str | None
    turns: int  # observations the model was asked to act on, including a turn that failed closed
    accepted_actions: int
    failed_attempts: int
    levels_won: int
    compactions: int  # committed, of every kind
    usage: Usage
    unattributed_usage: Usage
    cost: float
    wall_seconds: float
    provider_seconds: float
    # The last accepted state, in memory only: it may hold opaque provider state.
    accepted_state: RuntimeState


@dataclass
class StepProgress:
    step: int
    action: str
    level: int
    levels: int
    failed_attempts: int


@dataclass
class _Attempt:
    """One provider call within a step, as the step record shows it."""

    request: ModelRequest
    outcome: str
    usage: Usage
    response_text: str | None = None
    reasoning_summary: str | None = None
    problem: str | None = None
    diagnostics: dict[str, Any] = field(default_factory=dict)
    waited_seconds: float = 0.0  # the wait the machine asked for after this attempt, before the next
    summarized_items: int | None = None  # a compaction call's: how many accepted items it was asked to replace
    compaction_items: int = 0  # how many compaction items the reply returned (a call's, or an inline one's)
    # A harness summary's input, told before the call (its lane and form, how many turns it summarizes
    # and how many recent ones it left out to fit), so the record of a failed attempt keeps it too.
    summary_input: dict[str, Any] | None = None

    def record(self, redact: Callable[[str], str]) -> dict[str, Any]:
        texts, cut = fitted({"response_text": self.response_text}, redact)
        return {
            "outcome": self.outcome,
            **({"summary_input": self.summary_input} if self.summary_input is not None else {}),
            "problem": self.problem,
            "diagnostics": self.diagnostics,
            "usage": self.usage.to_dict(),
            **texts,
            **({"cut": cut} if cut else {}),
            "waited_seconds": round(self.waited_seconds, 3),
        }


class Runner:
    def __init__(
        self,
        profile: Profile,
        out_dir: Path,
        adapter_factory: Callable[[Endpoint], ProviderAdapter] | None = None,
        on_step: Callable[[StepProgress], None] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.profile = profile
        self.out_dir = Path(out_dir)
        self.descriptor = descriptor_for(profile.runtime.adapter_id)
        self._adapter_factory = adapter_factory or self._connect_registered_adapter
        self.on_step = on_step
        self.sleep = sleep  # how the runner performs the machine's waits; tests pass a fake clock's
        # What a caller that shows anything of the run (an error, a traceback) passes it through: the
        # run's redaction, once its endpoint is open (nothing secret is known before).
        self.redactor = Redactor()
        self.run_dir: Path | None = None  # the run's folder, once it is made

    def _connect_registered_adapter(self, endpoint: Endpoint) -> ProviderAdapter:
        adapter_class = self.descriptor.load()
        return adapter_class.connect(endpoint, self.profile.request_settings())

    def run(self) -> RunResult:
        profile = self.profile
        with open_endpoint(profile.client) as endpoint:
            adapter = self._adapter_factory(endpoint)
            environment = make_environment(
                profile.environment.name, profile.environment.seed, profile.environment.options
            )
            self.redactor = Redactor(secrets=(endpoint.api_key,))
            writer = ArtifactWriter(self.out_dir, new_run_id(profile.id), self.redactor)
            self.run_dir = writer.path
            try:
                loop = _Loop(profile, adapter, environment, writer, self.on_step, self.sleep)
                return loop.play(self._meta_base(endpoint))
            finally:
                writer.close()

    def _meta_base(self, endpoint: Endpoint) -> dict[str, Any]:
        descriptor = self.descriptor
        return {
            "adapter_id": descriptor.adapter_id,
            "strategy": self.profile.runtime.strategy,
            "config_id": self.profile.id,
            # The profile never holds a key, only the name of the variable that does.
            "settings": self.profile.model_dump(mode="json"),
            # The validated compaction policy, its defaults filled in, where the seed names it.
            "runtime": {"compaction": self.profile.compaction_policy()},
            "endpoint": "local" if endpoint.is_local else endpoint.base_url,
            "implementation_path": descriptor.implementation_path,
            "adapter_version": descriptor.version,
            "review_status": descriptor.review_status,
            "harness_commit": os.environ.get("ARC_HARNESS_COMMIT_SHA") or None,
        }


class _Loop:
    """One run's mutable bookkeeping, kept apart from the Runner's configuration."""

    def __init__(
        self,
        profile: Profile,
        adapter: ProviderAdapter,
        environment: Environment,
        writer: ArtifactWriter,
        on_step: Callable[[StepProgress], None] | None,
        sleep: Callable[[float], None],
    ) -> None:
        self.profile = profile
        self.adapter = adapter
        self.environment = environment
        self.writer = writer
        self.on_step = on_step
        self.sleep = sleep
        self.ledger = Ledger(profile.prices())
        system = scaffold.system_prompt(environment.actions, adapter.action_tool)
        strategy = STRATEGIES[profile.runtime.strategy]
        self.machine: LiveMachine[StrategyModel] = strategy.start(
            profile.strategy_settings(system), adapter.transcript, None
        )
        self.provider_seconds = 0.0
        self.failed_attempts = 0
        self.turns = self.accepted = self.levels_won = 0
        self.failed_turn_record: str | None = None
        self.summaries = 0  # harness summaries committed, numbering compaction_NNN.json
        self.compactions = 0  # compactions of every kind committed (inline, by a call, harness summaries)
        self.last_sent: tuple[int, ModelRequest] | None = None  # the previous step and its request
        self.continuation: dict[str, Any] | None = None  # the summary the step being written committed

    def play(self, meta: dict[str, Any]) -> RunResult:
        """Play until a win, the action budget or a failed-closed turn. run_meta.json is written
        whatever happens, an interrupt or a crash included, so no accepted step goes unaccounted;
        an interrupt that arrives while it is written waits until it is whole."""
        started = time.perf_counter()
        recorded = False
        try:
            outcome, failure = self._play_until_done()
            with _signals_deferred():
                result = self._result(outcome, failure, started)
                self._write_meta(meta, result)
                recorded = True
            return result
        except BaseException as error:
            if not recorded:  # an interrupt after the record was written leaves it as it is
                outcome = "interrupted" if isinstance(error, KeyboardInterrupt) else "crashed"
                with _signals_deferred():
                    self._write_meta(meta, self._result(outcome, type(error).__name__, started))
            raise

    def _play_until_done(self) -> tuple[str, str | None]:
        frame = self.environment.reset()
        while self.accepted < self.profile.agent.max_actions:
            self.turns += 1
            action, failure = self._turn(self.accepted + 1, scaffold.render_observation(frame))
            if action is None:
                return "failed_closed", failure
            frame = self.environment.step(action)
            if self.on_step:
                shown = self.writer.redactor.text(action)
                self.on_step(StepProgress(self.accepted, shown, frame.level, frame.levels, self.failed_attempts))
            if frame.state is GameState.WIN:
                self.levels_won = frame.level
                return "win", None
            self.levels_won = frame.level - 1
            if frame.state is GameState.GAME_OVER:
                frame = self._reset_after_game_over(frame)
        return "max_actions", None

    def _result(self, outcome: str, failure: str | None, started: float) -> RunResult:
        return RunResult(
            run_id=self.writer.path.name,
            artifacts=self.writer.path,
            outcome=outcome,
            failure=None if failure is None else self.writer.redactor.text(failure),  # as run_meta.json has it
            turns=self.turns,
            accepted_actions=self.accepted,
            failed_attempts=self.failed_attempts,
            levels_won=self.levels_won,
            compactions=self.compactions,
            usage=self.ledger.total,
            unattributed_usage=self.ledger.unattributed,
            cost=self.ledger.cost(self.ledger.total),
            wall_seconds=time.perf_counter() - started,
            provider_seconds=self.provider_seconds,
            accepted_state=self.machine.model.accepted,
        )

    def _reset_after_game_over(self, frame: Frame) -> Frame:
        self._fire(InputBuffered(scaffold.render_observation(frame)))
        return self.environment.step(RESET)

    def _turn(self, index: int, observation: str) -> tuple[str | None, str | None]:
        """Drive the machine through one turn; return (accepted action, None) or (None, failure)."""
        self.machine.take_fired()  # between turns (a buffered input): in the transition log, not in a step
        history_before = self.machine.model.accepted.item_count
        attempts: list[_Attempt] = []
        effects = deque(self._fire(ObservationArrived(observation)))
        action = failure = None
        while effects:
            effect = effects.popleft()
            if isinstance(effect, CallProvider):
                next_event = self._call(effect.request, attempts)
            elif isinstance(effect, CallCompaction):
                next_event = self._call(effect.request, attempts, compaction=True)
            elif isinstance(effect, CallSummary):
                next_event = self._call(effect.request, attempts, compaction=True, summary=effect)
            elif isinstance(effect, ReportSummary):
                self._write_compaction(effect, attempts)
                next_event = None
            elif isinstance(effect, ParseAction):
                next_event = self._parse(effect.response, attempts[-1])
            elif isinstance(effect, WaitBeforeRetry):
                attempts[-1].waited_seconds = effect.seconds
                self.sleep(effect.seconds)
                next_event = BackoffElapsed()
            elif isinstance(effect, SubmitAction):
                action, next_event = effect.action, None
            elif isinstance(effect, FailClosed):
                failure, next_event = effect.reason, None
            else:
                raise TypeError(f"runner cannot perform effect {effect!r}")
            if next_event is not None:
                effects.extend(self._fire(next_event))
        self.failed_attempts += sum(1 for attempt in attempts if attempt.outcome not in ("accepted", "compacted"))
        if action is not None:
            with _signals_deferred():  # the step's record and its count, together or not at all
                self._write_step(index, action, attempts, self.machine.take_fired(), history_before)
                self.accepted = index
        else:
            self._write_failed_turn(index, failure, attempts, self.machine.take_fired())
        return action, failure

    def _fire(self, event: Event) -> list[Any]:
        effects = self.machine.fire(event)
        fired = self.machine.fired[-1]
        self.writer.log_transition(fired.as_log())
        return effects

    def _call(
        self,
        request: ModelRequest,
        attempts: list[_Attempt],
        *,
        compaction: bool = False,
        summary: CallSummary | None = None,
    ) -> Event:
        """One provider call: an action request's, a native compaction call's (`compaction`) or a
        harness summary's (`summary`, an ordinary call); its usage is billed to the turn either way."""
        summary_input = None if summary is None else self._disclose_summary_input(summary, len(attempts) + 1)
        started = time.perf_counter()
        outcome: ModelResponse | ProviderError
        if summary is not None and self.adapter.summary_compaction is None:
            outcome = _no_summary_compaction(self.adapter)  # refused before any call
        elif compaction and summary is None:
            outcome = self.adapter.compact(request)
        else:
            outcome = self.adapter.call(request)
        self.provider_seconds += time.perf_counter() - started
        self.ledger.record_call(outcome.usage)
        if isinstance(outcome, ModelResponse):
            self.writer.redactor.learn(outcome.native_items)  # before any record could repeat them
            replied = "compacted" if compaction else "replied"
            attempt = _Attempt(request, replied, outcome.usage, outcome.text, outcome.reasoning_summary)
            attempt.compaction_items = _compaction_items(self.adapter, outcome)
        else:
            attempt = _Attempt(request, outcome.kind.value, outcome.usage, diagnostics=dict(outcome.diagnostics))
        if compaction:
            attempt.summarized_items = len(request.items) if summary is None else summary.summarized_items
        attempt.summary_input = summary_input
        attempts.append(attempt)
        return outcome_event(outcome, compaction=compaction)

    def _disclose_summary_input(self, summary: CallSummary, attempt: int) -> dict[str, Any]:
        """A harness summary's input (seed 003's fidelity disclosure: its lane and form, the turns it
        summarizes and those it leaves out to fit), written to SUMMARY_INPUT before the call, so a kill
        during the call keeps it; every attempt's record repeats it."""
        summarized = summary.summary_pass
        disclosed = {
            "lane": summarized.lane,
            "form": "fork" if summarized.fork else "independent",
            "summarized_turns": summarized.summarized_turns,
            "excluded_turns": summarized.excluded_turns,
        }
        self.writer.write_json(SUMMARY_INPUT, {"turn": self.turns, "attempt": attempt, **disclosed})
        return disclosed

    def _write_compaction(self, record: ReportSummary, attempts: list[_Attempt]) -> None:
        """compaction_NNN.json for a harness summary that committed with this turn's action, and the
        continuation the step records; no opaque provider state is in either."""
        self.summaries += 1
        calls = _compaction_calls(attempts)
        summarized = record.summary_pass
        usage = sum((attempt.usage for attempt in calls), Usage())
        self.writer.write_json(
            f"compaction_{self.summaries:03d}.json",
            {
                "compaction": self.summaries,
                "lane": summarized.lane,
                "trigger_tokens": record.trigger_tokens,
                "summary": record.summary,
                "items_before": record.items_before,
                "items_after": record.items_after,
                "summarized_turns": summarized.summarized_turns,
                "excluded_turns": summarized.excluded_turns,
                "overflow_recoveries": record.overflow_recoveries,
                "attempts": [attempt.record(self.writer.redactor.text) for attempt in calls],
                "usage": usage.to_dict(),
                "cost_estimate": self.ledger.cost(usage),
            },
        )
        self.continuation = {"compaction": self.summaries, "summary": record.summary, "bridge": record.bridge}

    def _parse(self, response: ModelResponse, attempt: _Attempt) -> Event:
        parsed = scaffold.parse_action(response.text, self.environment.actions, response.tool_actions)
        if parsed.action is None:
            attempt.outcome, attempt.problem = "action_rejected", parsed.problem
            return ActionRejected(parsed.problem or "invalid action")
        attempt.outcome = "accepted"
        return ActionAccepted(parsed.action)

    def _write_step(
        self, index: int, action: str, attempts: list[_Attempt], fired: list[Fired], history_before: int
    ) -> None:
        accepted = attempts[-1]
        usage = self.ledger.take_for_step()
        compaction = _compaction_record(attempts, self.ledger)
        self.compactions += compaction is not None
        texts, cut = fitted(
            {"response_text": accepted.response_text, "reasoning_summary": accepted.reasoning_summary},
            self.writer.redactor.text,
        )
        self.writer.write_step(
            index,
            {
                "step": index,
                "request": self._request_record(index, accepted.request),
                **texts,
                **({"cut": cut} if cut else {}),
                "action": action,
                "usage": usage.to_dict(),
                "cost_estimate": self.ledger.cost(usage),
                "retries": [attempt.record(self.writer.redactor.text) for attempt in attempts[:-1]],
                # The accepted history's size in items before this turn and after its commit (pruned or compacted).
                "history": {"items_before": history_before, "items_after": self.machine.model.accepted.item_count},
                "compaction": compaction,
                **({"continuation": self.continuation} if self.continuation is not None else {}),
                "transitions": [transition.as_log() for transition in fired],
            },
        )
        self.continuation = None

    def _request_record(self, index: int, request: ModelRequest) -> dict[str, Any]:
        """What is new in this step's request since the previous step's (artifacts.request_delta)."""
        record = request_delta(self.last_sent, request, self.adapter.transcript.readable)
        self.last_sent = (index, request)
        return record

    def _write_failed_turn(self, index: int, failure: str | None, attempts: list[_Attempt], fired: list[Fired]) -> None:
        """Why the turn failed closed, attempt by attempt (allowlisted diagnostics only), in a record of its own."""
        self.writer.sync_transitions()
        self.writer.write_json(
            FAILED_TURN,
            {
                "turn": index,
                "failure": failure,
                "attempts": [attempt.record(self.writer.redactor.text) for attempt in attempts],
                "usage": self.ledger.unattributed.to_dict(),
                "transitions": [transition.as_log() for transition in fired],
            },
        )
        self.failed_turn_record = FAILED_TURN

    def _write_meta(self, meta: dict[str, Any], result: RunResult) -> None:
        totals = _totals(result, self.ledger) | {"failed_turn": self.failed_turn_record}
        self.writer.write_json("run_meta.json", meta | totals)


@contextmanager
def _signals_deferred() -> Iterator[None]:
    """Hold Ctrl-C and SIGTERM until the block is done (a kill that can be caught arrives after it),
    so that an interrupted run's run_meta.json never counts a step it did not record, or the reverse.

    Held by Python-level handlers that note the signal and raise it again once the block is done.
    Blocking it with pthread_sigmask would not do: that holds only the main thread, and the kernel
    hands a process's signal to any other thread (rich's progress display runs one), whose C handler
    still has Python run the main thread's handler at once."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    held = (signal.SIGINT, signal.SIGTERM)
    previous = {signum: signal.signal(signum, lambda signum, frame: caught.append(signum)) for signum in held}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for caught_signal in caught:
            signal.raise_signal(caught_signal)


def _no_summary_compaction(adapter: ProviderAdapter) -> ProviderError:
    """What the runner answers, without a call, when a machine asks an adapter that cannot continue
    from a harness summary for one (validation refuses such a profile first)."""
    return ProviderError(
        ErrorKind.FATAL, Usage(), {"error_class": "NoSummaryCompaction", "cause": type(adapter).__name__}
    )


def _compaction_calls(attempts: list[_Attempt]) -> list[_Attempt]:
    """A turn's compaction calls (a native one's or a harness summary's), failed ones included."""
    return [attempt for attempt in attempts if attempt.summarized_items is not None]


def _compaction_items(adapter: ProviderAdapter, response: ModelResponse) -> int:
    """How many of a reply's native items are compaction items, as the adapter's transcript knows them."""
    latest = adapter.transcript.latest_compaction
    return sum(1 for item in response.native_items if latest([item]) == 0)


def _compaction_record(attempts: list[_Attempt], ledger: Ledger) -> dict[str, Any] | None:
    """The compaction a step committed, if any, never its payload: how it was made (`inline` in the
    accepted reply, by a `call` of its own, or a harness `summary`), how many compaction items came
    back, how many accepted items it replaced (a call's or a summary's; an inline one replaces all
    before it, which `history` shows), and the usage of the turn's compaction calls alone (already
    in the step's usage; an inline compaction's is not reported apart) with its configured-price cost."""
    accepted = attempts[-1]
    calls = _compaction_calls(attempts)
    compacted = [attempt for attempt in calls if attempt.outcome == "compacted"]
    if compacted:
        usage = sum((attempt.usage for attempt in calls), Usage())
        committed = compacted[-1]
        return {
            "by": "call" if committed.summary_input is None else "summary",
            "items_returned": committed.compaction_items,
            "summarized_items": committed.summarized_items,
            "usage": usage.to_dict(),
            "cost_estimate": ledger.cost(usage),
        }
    if accepted.compaction_items:
        return {
            "by": "inline",
            "items_returned": accepted.compaction_items,
            "summarized_items": None,
            "usage": None,
            "cost_estimate": None,
        }
    return None


def _totals(result: RunResult, ledger: Ledger) -> dict[str, Any]:
    return {
        "outcome": result.outcome,
        "failure": result.failure,
        "turns": result.turns,
        "accepted_actions": result.accepted_actions,
        "failed_attempts": result.failed_attempts,
        "levels_won": result.levels_won,
        "provider_calls": ledger.calls,
        "compactions": result.compactions,
        "usage": result.usage.to_dict(),
        "unattributed_usage": result.unattributed_usage.to_dict(),
        "cost_estimate": result.cost,
        "wall_seconds": round(result.wall_seconds, 3),
        "provider_seconds": round(result.provider_seconds, 3),
    }
