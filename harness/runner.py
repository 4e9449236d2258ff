"""The runner: the agent loop that performs what the machines decide.

observe -> render input -> the strategy machine builds a request -> the adapter calls the provider ->
parse the action -> the machine commits (or retries from the unchanged accepted state) -> submit the
action to the environment. The machine emits effects; the runner performs each one (one method per
effect) and feeds the outcome back as the next event, so every decision stays in the machine's
table. It checks nothing the profile's validation already did, and it builds no record itself: it
hands what happened to harness/artifacts.py and writes what that returns.

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
    ModelRequest,
    ModelResponse,
    ProviderAdapter,
    ProviderError,
    Usage,
)
from turnstate.adapters.registry import descriptor_for
from turnstate.harness import scaffold
from turnstate.harness.accounting import Ledger
from turnstate.harness.artifacts import (
    FAILED_TURN,
    SUMMARY_INPUT,
    ArtifactWriter,
    Attempt,
    CallKind,
    Redactor,
    compaction_name,
    compaction_record,
    failed_turn_record,
    new_run_id,
    request_delta,
    run_totals,
    step_record,
    summary_input,
)
from turnstate.harness.endpoint import open_endpoint
from turnstate.harness.environments import (
    Environment,
    Frame,
    GameState,
    make_environment,
)
from turnstate.harness.profile import Profile
from turnstate.machine.engine import Effect, Event, LiveMachine
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
class _Turn:
    """One turn's bookkeeping while its effects are performed."""

    history_before: int  # the accepted history's size in items when the turn opened
    attempts: list[Attempt] = field(default_factory=list)  # its provider calls, in order
    summary: tuple[int, ReportSummary] | None = None  # the harness summary it committed: its number and report
    action: str | None = None
    failure: str | None = None


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
        turn = _Turn(self.machine.model.accepted.item_count)
        effects = deque(self._fire(ObservationArrived(observation)))
        while effects:
            next_event = self._perform(effects.popleft(), turn)
            if next_event is not None:
                effects.extend(self._fire(next_event))
        self.failed_attempts += sum(attempt.failed for attempt in turn.attempts)
        if turn.action is not None:
            with _signals_deferred():  # the step's record and its count, together or not at all
                self._write_step(index, turn.action, turn)
                self.accepted = index
        else:
            self._write_failed_turn(index, turn)
        return turn.action, turn.failure

    def _fire(self, event: Event) -> list[Any]:
        """Fire `event` and log every transition it fired: a nested machine's, then its parent's on
        the `Done` that the nested machine's final state fires at once."""
        already = len(self.machine.fired)
        effects = self.machine.fire(event)
        for fired in self.machine.fired[already:]:
            self.writer.log_transition(fired.as_log())
        return effects

    def _perform(self, effect: Effect, turn: _Turn) -> Event | None:
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
                return self._parse(effect, turn)
            case WaitBeforeRetry():
                return self._wait(effect, turn)
            case SubmitAction():
                return self._submit(effect, turn)
            case FailClosed():
                return self._fail_closed(effect, turn)
        raise TypeError(f"runner cannot perform effect {effect!r}")

    def _call_provider(self, effect: CallProvider, turn: _Turn) -> Event:
        """The action request."""
        return self._call(self.adapter.call, effect.request, "action", turn)

    def _call_compaction(self, effect: CallCompaction, turn: _Turn) -> Event:
        """A native compaction call, asked to replace the whole accepted history it is sent."""
        return self._call(self.adapter.compact, effect.request, "compaction", turn, len(effect.request.items))

    def _call_summary(self, effect: CallSummary, turn: _Turn) -> Event:
        """A harness summary, an ordinary call of the adapter. Its input is written to SUMMARY_INPUT
        before the call, so a kill during the call keeps it, and every attempt's record repeats it."""
        disclosed = summary_input(effect.summary_pass)
        self.writer.write_json(SUMMARY_INPUT, {"turn": self.turns, "attempt": len(turn.attempts) + 1, **disclosed})
        return self._call(self.adapter.call, effect.request, "summary", turn, effect.summarized_items, disclosed)

    def _call(
        self,
        call: Callable[[ModelRequest], ModelResponse | ProviderError],
        request: ModelRequest,
        kind: CallKind,
        turn: _Turn,
        summarized_items: int | None = None,
        disclosed: dict[str, Any] | None = None,
    ) -> Event:
        """One provider call of any kind: timed, its usage billed to the turn, the opaque values of its
        reply known to the redactor, and its attempt added to the turn's."""
        started = time.perf_counter()
        outcome = call(request)
        self.provider_seconds += time.perf_counter() - started
        self.ledger.record_call(outcome.usage)
        if isinstance(outcome, ModelResponse):
            self.writer.redactor.learn(outcome.native_items)  # before any record could repeat them
            replied = "replied" if kind == "action" else "compacted"
            attempt = Attempt(kind, request, replied, outcome.usage, outcome.text, outcome.reasoning_summary)
            attempt.compaction_items = _compaction_items(self.adapter, outcome)
        else:
            attempt = Attempt(kind, request, outcome.kind.value, outcome.usage, diagnostics=dict(outcome.diagnostics))
        attempt.summarized_items, attempt.summary_input = summarized_items, disclosed
        turn.attempts.append(attempt)
        return outcome_event(outcome, compaction=kind != "action")

    def _report_summary(self, effect: ReportSummary, turn: _Turn) -> Event | None:
        """compaction_NNN.json for a harness summary that committed with this turn's action; the
        step's record points to it."""
        self.summaries += 1
        record = compaction_record(
            self.summaries, effect, turn.attempts, cost=self.ledger.cost, redact=self.writer.redactor.text
        )
        self.writer.write_json(compaction_name(self.summaries), record)
        turn.summary = (self.summaries, effect)
        return None

    def _parse(self, effect: ParseAction, turn: _Turn) -> Event:
        """Read the action from the reply of the turn's latest call."""
        response, attempt = effect.response, turn.attempts[-1]
        parsed = scaffold.parse_action(response.text, self.environment.actions, response.tool_actions)
        if parsed.action is None:
            attempt.outcome, attempt.problem = "action_rejected", parsed.problem
            return ActionRejected(parsed.problem or "invalid action")
        attempt.outcome = "accepted"
        return ActionAccepted(parsed.action)

    def _wait(self, effect: WaitBeforeRetry, turn: _Turn) -> Event:
        """The wait the machine asked for after the latest attempt, recorded on it."""
        turn.attempts[-1].waited_seconds = effect.seconds
        self.sleep(effect.seconds)
        return BackoffElapsed()

    def _submit(self, effect: SubmitAction, turn: _Turn) -> Event | None:
        """The turn's action, submitted to the environment once the turn is recorded."""
        turn.action = effect.action
        return None

    def _fail_closed(self, effect: FailClosed, turn: _Turn) -> Event | None:
        """Why the turn ends without an action; failed_turn.json and run_meta.json record it."""
        turn.failure = effect.reason
        return None

    def _write_step(self, index: int, action: str, turn: _Turn) -> None:
        usage = self.ledger.take_for_step()
        record = step_record(
            index,
            self._request_record(index, turn.attempts[-1].request),
            action,
            turn.attempts,
            usage=usage,
            history=(turn.history_before, self.machine.model.accepted.item_count),
            summary=turn.summary,
            transitions=[transition.as_log() for transition in self.machine.take_fired()],
            cost=self.ledger.cost,
            redact=self.writer.redactor.text,
        )
        self.compactions += record["compaction"] is not None
        self.writer.write_step(index, record)

    def _request_record(self, index: int, request: ModelRequest) -> dict[str, Any]:
        """What is new in this step's request since the previous step's (artifacts.request_delta)."""
        record = request_delta(self.last_sent, request, self.adapter.transcript.readable)
        self.last_sent = (index, request)
        return record

    def _write_failed_turn(self, index: int, turn: _Turn) -> None:
        """Why the turn failed closed, in a record of its own that run_meta.json names."""
        self.writer.sync_transitions()
        record = failed_turn_record(
            index,
            turn.failure,
            turn.attempts,
            usage=self.ledger.unattributed,
            transitions=[transition.as_log() for transition in self.machine.take_fired()],
            redact=self.writer.redactor.text,
        )
        self.writer.write_json(FAILED_TURN, record)
        self.failed_turn_record = FAILED_TURN

    def _write_meta(self, meta: dict[str, Any], result: RunResult) -> None:
        totals = run_totals(result, provider_calls=self.ledger.calls, failed_turn=self.failed_turn_record)
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


def _compaction_items(adapter: ProviderAdapter, response: ModelResponse) -> int:
    """How many of a reply's native items are compaction items, as the adapter's transcript knows them."""
    latest = adapter.transcript.latest_compaction
    return sum(1 for item in response.native_items if latest([item]) == 0)
