"""A session: one agent's accepted state carried across its turns, driven by your own loop.

    with Session(profile, actions=("LEFT", "RIGHT")) as session:
        turn = session.observe("You see a door on the left.")
        while turn.action is None:            # the reply named no valid action
            turn = session.reject(turn.problem)
        session.accept(turn.action)           # only now does the turn commit

A reply may call tools: the read-only tools the session offers (`tools`) and, with `agent.action_mode:
tools`, the actions themselves. Accepting a reply commits its calls; their results (`ToolResult`, one
per call, in order) are passed to the next `observe`, which adds them to that reply's turn before the
new observation. A reply that only called read-only tools is a tool round: accepted without an action
(`Turn.is_tool_round`), its results answered, and the model asked again with no new observation.

A session opens the profile's endpoint (the embedded local provider for a local profile) and its
adapter, and starts the profile's strategy machine. `observe` opens a turn: the machine builds the
request, and the session performs what the machine asks (compaction calls, retries of failed calls,
waits) until a reply is held provisionally, which it returns as a `Turn`. Nothing commits until the
caller accepts; a rejected turn asks again from the unchanged accepted state, and a turn that cannot
go on raises `FailedClosed`, the accepted state intact. It is the loop `turnstate run` plays: the
runner is a user of this class.

A Session is the API a caller uses, composed of three parts:
- its Performer (session/performer.py) performs what the machine emits, one method per effect, and
  feeds each outcome back as the next event, so every decision stays in the machine's table; it
  checks the results the caller answers calls with, and writes the records of each turn (step
  records, compaction records, the failed turn, the events, the transition log), which
  durable/artifacts.py builds;
- its DurableRun (session/durable_run.py), with an `out_dir`, makes each accepted reply a checkpoint
  before `accept` returns, so before its caller performs anything, and with `resume=run_dir` goes on
  from the last checkpoint (a kill, a crash, or with `switch` another adapter, model or strategy;
  docs/durable-runs.md); the events go to events.jsonl and each call's usage to calls.jsonl;
- its RunMeta (session/run_meta.py) keeps how the run ended and its RunResult, and writes
  run_meta.json as the run opens and whatever ends it, an interrupt or a crash included.
The session itself opens the endpoint and the parts, and keeps the turn open between `observe` and
the caller's verdict.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import replace
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, get_args

from turnstate.adapters.contract import (
    Endpoint,
    Input,
    ProviderAdapter,
    ToolCall,
    ToolResult,
    ToolSpec,
    Usage,
    taken_input,
    taken_results,
)
from turnstate.adapters.registry import descriptor_for
from turnstate.durable.accounting import Ledger
from turnstate.durable.checkpoints import CheckpointStore
from turnstate.durable.cursor import AcceptedReply, Cursor, RunCounts
from turnstate.durable.images import ImageFiles
from turnstate.durable.layout import new_run_id, step_name
from turnstate.durable.redaction import Redactor
from turnstate.durable.resume import run_id_of, torn_files
from turnstate.durable.tool_results import READ_TOOL_RESULT_SPEC, ToolResultStore
from turnstate.durable.writer import ArtifactWriter
from turnstate.environments.protocol import readable_reasoning
from turnstate.machine.engine import Event, LiveMachine
from turnstate.session import live_traces, rate_limit, scaffold
from turnstate.session.durable_run import DurableRun, Opened, Opening, Resumed
from turnstate.session.endpoint import connect_adapter, local_service_dir, open_endpoint, recorded_game
from turnstate.session.performer import OpenTurn, Performer, ReplyRules, RunFiles, Turn
from turnstate.session.profile import Profile
from turnstate.session.run_meta import Ending, RunMeta, RunResult, run_fields, signals_deferred
from turnstate.strategies import STRATEGIES
from turnstate.strategies.events import (
    ActionAccepted,
    ActionRejected,
    InputBuffered,
    ObservationArrived,
    ToolsAnswered,
)
from turnstate.strategies.state import RuntimeState
from turnstate.strategies.strategy import Strategy, StrategyModel, StrategySettings

__all__ = ["POINTS", "FailedClosed", "Point", "RunResult", "Session", "Turn", "signals_deferred"]


class FailedClosed(Exception):
    """The turn failed for good: no retry is left, or the failure cannot be retried. The accepted
    state is as the last accepted turn left it; `usage` is what the failed turn's calls used."""

    def __init__(self, reason: str, usage: Usage) -> None:
        super().__init__(reason)
        self.reason = reason
        self.usage = usage


Point = Literal[
    "before_provider_call",
    "after_reply",
    "during_compaction",
    "after_commit",
    "after_compaction_commit",
    "after_side_effect",
    "after_resume",
]
"""The named points of a turn where `on_point` is called (the kill tests stop a run at each):
before an action request is sent; after its reply, before the caller's verdict commits it; as a
compaction or summary request is sent; after an accepted turn's checkpoint, before its action is
performed (after_compaction_commit: a turn that compacted); after an action's side effect, before
its receipt (the runner's); once a resumed or switched session is ready, before its first call."""
POINTS: tuple[Point, ...] = get_args(Point)


def _nowhere(point: Point) -> None:
    """The default `on_point`: nothing happens at a named point."""


class _Count:
    """A Session attribute that is one of its run's counts (Session.counts), read and set there."""

    def __init__(self, field: str | None = None) -> None:
        self.field = field

    def __set_name__(self, owner: type, name: str) -> None:
        self.field = self.field or name

    def __get__(self, session: Any, owner: type | None = None) -> int:
        return int(getattr(session.counts, str(self.field)))

    def __set__(self, session: Any, value: int) -> None:
        setattr(session.counts, str(self.field), value)


class Session:
    """One agent's runtime state across its turns (see the module docstring). Use it as a context
    manager: leaving it closes the provider connection and the embedded local provider, and writes
    run_meta.json when the session writes artifacts."""

    machine: LiveMachine[StrategyModel]  # the strategy's machine, started as the session is entered
    performer: Performer  # what performs the machine's effects, likewise
    meta: RunMeta  # the run's account: its result, and run_meta.json, likewise
    # The run's counts a caller reads (and a runner's levels_won, which it sets), kept in `counts`.
    steps, turns = _Count("step"), _Count("turn")
    accepted_actions, failed_attempts, levels_won = _Count(), _Count(), _Count()

    def __init__(
        self,
        profile: Profile,
        *,
        actions: Sequence[str | ToolSpec] = (),
        tools: Sequence[ToolSpec] = (),
        system_prompt: str | None = None,
        out_dir: Path | str | None = None,
        resume: Path | str | None = None,
        switch: bool = False,
        from_records: bool = False,
        adapter_factory: Callable[[Endpoint], ProviderAdapter] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        on_point: Callable[[Point], None] | None = None,
    ) -> None:
        """`actions` is the action space a reply's action is parsed from (and, without a
        `system_prompt`, what the default system prompt asks for): names, or ToolSpecs for actions
        with arguments; `tools` are read-only tools every request offers, whose calls the caller
        answers; `out_dir` is where <out_dir>/<run-id>/ is written (None: no artifacts); `resume` is
        instead a run folder to go on from its last checkpoint (`Session.resumed` says where), with
        `profile` the run's own (session/run_profile.py `run_profile`) or, with `switch`, another adapter,
        model or strategy, and with `from_records` from the run's records when its checkpoint store was
        damaged (see durable_run.DurableRun); `sleep` performs the machine's waits; `on_point` is called at each named
        point of a turn (POINTS), where the kill tests stop a run."""
        if resume is not None and out_dir is not None:
            raise ValueError("a session writes a new run (out_dir) or resumes one (resume), not both")
        self.profile = profile
        self.actions = scaffold.action_tools(actions)
        # The read-only tools every request offers: the caller's, and the one that reads offloaded results back.
        self.tools = (*tools, *([READ_TOOL_RESULT_SPEC] if profile.offload() is not None else []))
        self.descriptor = descriptor_for(profile.runtime.adapter_id)
        self._system_prompt = system_prompt
        self._out_dir = None if out_dir is None else Path(out_dir)
        self._resume_dir = None if resume is None else Path(resume)
        self._opening = Opening(resume is not None, switch, from_records)  # how the run folder opens
        self._says_running = False  # run_meta.json says the run is running: its end must say how it ended
        self._on_point = on_point or _nowhere
        self._service: Path | None = None  # the embedded provider's service folder (a local run's)
        self.files = RunFiles()  # the run folder's writer, log and usage journal, once the session opens them
        self.resumed: Resumed | None = None  # where a resumed session went on from
        self.resumed_reply: AcceptedReply | None = None  # the reply its last checkpoint accepted
        self.facts: tuple[dict[str, Any], ...] = ()  # the durable facts a resumed session's checkpoint holds
        connect = partial(connect_adapter, profile, self.descriptor, self.actions, self.tools)
        self._adapter_factory = adapter_factory or connect
        self.sleep = sleep
        # What a caller that shows anything of the session (an error, a traceback) passes it through:
        # its redaction, once its endpoint is open (nothing secret is known before).
        self.redactor = Redactor()
        self.run_dir: Path | None = None  # the session's artifacts folder, once it is made
        self.run_id = ""  # the run's id: its folder's name when it was made (run_meta.json keeps it)
        self._stack = ExitStack()
        self._tracing: live_traces.Tracing | None = None
        self._traces: live_traces.LiveTraces | None = None
        self.durable: DurableRun | None = None  # the run's checkpoints, log and journal, likewise
        self._turn: OpenTurn | None = None
        self.ledger = Ledger(profile.prices())
        self.counts = RunCounts()  # where the run is: what its checkpoints' cursor keeps

    @property
    def action_mode(self) -> scaffold.ActionMode:
        return self.profile.agent.action_mode

    # Opening and closing.

    def __enter__(self) -> Session:
        try:
            run_dir = self._resume_dir
            if run_dir is None and self._out_dir is not None:
                run_dir = self._out_dir / new_run_id(self.profile.id)
            if run_dir is not None:  # a resumed run keeps the id it started under, whatever its folder's name now
                self.run_id = run_dir.name if self._resume_dir is None else run_id_of(run_dir)
                self._tracing = live_traces.configured(os.environ)  # refused before anything is made
            local = run_dir is not None and self.profile.client.is_local
            self._service = local_service_dir(self.run_id) if local else None
            opened = open_endpoint(self.profile.client, self._service, recorded_game(self.profile))
            endpoint = self.endpoint = self._stack.enter_context(opened)
            self.adapter = self._adapter_factory(endpoint)
            self.redactor = Redactor(secrets=(endpoint.api_key,))
            resuming = self._opening.resume
            torn = torn_files(run_dir) if run_dir is not None and resuming else []  # before any opener cuts them
            if run_dir is not None:
                writer = self.files.writer = ArtifactWriter(
                    run_dir.parent, run_dir.name, self.redactor, existing=resuming
                )
                self._stack.callback(writer.close)
                self.run_dir = writer.path
            self.tool_results = ToolResultStore(self.run_dir)
            self.files.images = ImageFiles(self.run_dir) if self.run_dir is not None else None
            system = self._system_prompt or scaffold.system_prompt(self.actions, self.action_mode, self.tools)
            offered = (*(self.actions if self.action_mode == "tools" else ()), *self.tools)
            settings = self.profile.strategy_settings(system, offered)
            strategy = STRATEGIES[self.profile.runtime.strategy]
            rules = ReplyRules.of(self.actions, self.tools, self.profile.agent)
            self.performer = Performer(
                self.adapter,
                self.counts,
                self.ledger,
                self.redactor,
                rules,
                self.tool_results,
                self.files,
                self._on_point,
                self.sleep,
                rate_limit.pacing(self.profile, endpoint, self.adapter, self.run_dir),
            )
            fields = run_fields(self.profile, self.descriptor, self.run_id, endpoint)
            self.meta = RunMeta(self.performer, self.run_id, self.run_dir, fields)
            if self.run_dir is None:
                self.machine = self.performer.machine = strategy.start(settings, self.adapter.transcript, None, None)
            else:
                self._open_durable_run(self.run_dir, strategy, settings, torn)
        except BaseException as error:
            try:
                if self._says_running:  # a Ctrl-C held while run_meta.json was written lands here
                    self.meta.end(error)
            finally:
                self._stack.close()
            raise
        self.meta.started = time.perf_counter()
        return self

    def _open_durable_run(self, run_dir: Path, strategy: Strategy, settings: StrategySettings, torn: list[str]) -> None:
        """The durable run's store, log, journal and machine (durable_run.DurableRun.open), then
        run_meta.json, saying the run is running, so a run killed at any point names its profile."""
        self.durable = DurableRun(
            self.profile, self.descriptor, run_dir, self._stack, self._opening, self.performer.rules
        )
        opened = self.durable.open(strategy, settings, self.adapter.transcript, self.redactor, torn)
        self.files.events, self.files.usage = self.durable.events, self.durable.usage
        self._restore(opened)
        with signals_deferred():
            self.meta.write(outcome="running")
            self._says_running = True
        if self._tracing is not None:
            resumes = len(opened.resumes) if opened.resumed is not None else 0
            self._traces = live_traces.LiveTraces(self._tracing, run_dir, resumes=resumes)
            self._stack.callback(self._traces.close)  # after the last run_meta.json (__exit__)

    def _restore(self, opened: Opened) -> None:
        """A resumed session as its last checkpoint left it: the counts and the ledger as the cursor
        has them (with the calls made after it counted once, as the next step's), its facts and the
        reply it accepted for the caller to carry out, and the resume in run_meta.json."""
        self.machine = self.performer.machine = opened.machine
        opened.restore(self.counts, self.ledger)  # in place: the performer counts into the same objects
        self.facts, self.resumed_reply = opened.facts, opened.reply
        self.performer.results_as_input = opened.results_as_input
        if opened.resumed is not None:
            self.resumed = opened.resumed
            self.meta.record("resumes", list(opened.resumes))
            self._on_point("after_resume")

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        try:
            self.meta.end(error)
        finally:
            self._stack.close()
        if self.meta.ended_for_good and self._service is not None:
            shutil.rmtree(self._service, ignore_errors=True)  # nothing can resume the run: its service goes

    def finish(self, outcome: str, failure: str | None = None, *, levels_won: int = 0) -> RunResult:
        """End the session with its outcome (a runner's win, max_actions or failed_closed): the
        result, and run_meta.json when the session writes artifacts, together or not at all."""
        return self.meta.finish(Ending(outcome, failure, levels_won))

    def result(self) -> RunResult:
        """The run as it stands, or as it ended (run_meta.RunMeta.result)."""
        return self.meta.result()

    @property
    def checkpoints(self) -> CheckpointStore | None:
        """The run's checkpoint store (None for a session without artifacts)."""
        return self.durable.store if self.durable is not None else None

    @property
    def accepted_state(self) -> RuntimeState:
        """The last accepted state (serializable with `to_json`; it may hold opaque provider state, so
        keep it where the provider's data may be kept)."""
        return self.machine.model.accepted

    # The caller's loop.

    def observe(self, observation: Input = "", results: Sequence[ToolResult] = ()) -> Turn:
        """Open a turn on `observation` (text, or a `UserInput` with images; with any inputs buffered
        before it), after the `results` of the last accepted reply's tool calls (one per call, in the
        calls' order; an action's carries the next frame, so the observation may then be empty);
        return the reply held for the caller's verdict. Raises FailedClosed if the turn cannot get one."""
        if self._turn is not None:
            raise RuntimeError("a turn is open: accept or reject its reply before the next observation")
        given = taken_input(observation, self.adapter.image_limits, self.descriptor.adapter_id)
        logged = taken_results(results, self.adapter.image_limits, self.descriptor.adapter_id)
        results, as_input = self.performer.answers(logged)  # before anything fires or is counted
        if not given.text and not given.images and not logged:
            raise ValueError("nothing to observe: pass an observation, or the results of the last reply's calls")
        self.counts.turn += 1
        self.performer.log_inputs(logged, given)
        text = "\n\n".join([*(result.content for result in as_input), *([given.text] if given.text else [])])
        images = (*(image for result in as_input for image in result.images), *given.images)
        if results:
            self.performer.fire(ToolsAnswered(results))
        self.machine.take_fired()  # between turns (a buffered input): in the transition log, not in a step
        self._turn = OpenTurn(self.accepted_state.item_count)
        return self._drive(ObservationArrived(text, images))

    def accept(self, action: str | None = None) -> AcceptedReply:
        """Commit the held reply with `action` (default: the action parsed from it), or as a tool
        round when it only called tools; the results of its calls go to the next `observe`. Returns
        the reply as committed: the intent the caller performs its action and calls from."""
        turn = self._open_turn()
        held = turn.held
        assert held is not None
        chosen = action if action is not None else held.action
        if chosen is None and not held.is_tool_round:
            raise ValueError(f"the held reply cannot be accepted ({held.problem}): reject it, or pass the action")
        turn.attempts[-1].outcome = "accepted"
        self.performer.perform_all(ActionAccepted(chosen), turn)
        compactions = self.counts.compactions
        with signals_deferred():  # the step's record and its count, together or not at all
            self.counts.step += 1
            self.counts.accepted_actions += chosen is not None
            self.counts.tool_rounds = 0 if chosen is not None else self.counts.tool_rounds + 1
            self.counts.failed_attempts += sum(attempt.failed for attempt in turn.attempts)
            self.performer.write_step(self.counts.step, chosen, held.tool_calls, turn)
            self.performer.log_reply(held, "accepted", action=chosen, record=step_name(self.counts.step))
            reasoning = readable_reasoning(self.redactor.text(held.reasoning_summary or ""))
            accepted = AcceptedReply(self.counts.step, chosen, held.action_call, held.tool_calls, reasoning)
            self._checkpoint(accepted)
        self._turn = None
        if self._traces is not None:
            self._traces.turn_committed()
        self._on_point("after_commit" if self.counts.compactions == compactions else "after_compaction_commit")
        return accepted

    def reject(self, reason: str | None = None) -> Turn:
        """Discard the held reply and ask again from the unchanged accepted state; return the next
        reply. Raises FailedClosed when the turn has no retry left."""
        turn = self._open_turn()
        held = turn.held
        reason = reason or (held.problem if held else None) or "rejected by the caller"
        attempt = turn.attempts[-1]
        attempt.outcome, attempt.problem = "action_rejected", reason
        if held is not None:
            self.performer.log_reply(held, "rejected", reason=reason)
        return self._drive(ActionRejected(reason))

    def read_tool_result(self, call: ToolCall) -> ToolResult:
        """The answer to a `read_tool_result` call (offered when the profile offloads stale tool
        results): a page of the offloaded result its ref names, or an error result saying why not."""
        return self.tool_results.answer(call)

    def buffer(self, given: Input) -> None:
        """An input that arrives without a model call (a GAME_OVER frame; text, or a `UserInput` with
        images): it waits in the accepted state and opens the next turn, ahead of its observation."""
        if self._turn is not None:
            raise RuntimeError("a turn is open: accept or reject its reply before buffering an input")
        waiting = taken_input(given, self.adapter.image_limits, self.descriptor.adapter_id)
        self.performer.log_buffered(waiting)
        self.performer.fire(InputBuffered(waiting.text, waiting.images))

    def point(self, point: Point) -> None:
        """A named point of the caller's (after_side_effect), reported to the session's `on_point`."""
        self._on_point(point)

    def record_environment_scorecard(self, scorecard: Mapping[str, Any]) -> None:
        """A game's own account of the run (arc_agi3's: the ARC-AGI-3 toolkit's scorecard, kept
        small), written into run_meta.json as `environment_scorecard` with its next write."""
        if self.files.writer is not None:
            self.meta.record("environment_scorecard", dict(scorecard))

    def record_fact(self, fact: Mapping[str, Any]) -> None:
        """A durable fact of the caller's (a side effect's receipt, a user constraint: a JSON object
        with a `kind`), committed with the next checkpoint, and kept by every one after it."""
        if "kind" not in fact:
            raise ValueError("a fact names its kind")
        if self.durable is not None:
            self.durable.record_fact(fact)

    def _checkpoint(self, accepted: AcceptedReply) -> None:
        """The accepted turn made durable before the caller performs its action or answers its calls
        (durable_run.DurableRun.checkpoint), with the cursor: where the run is, small, written whole."""
        if self.durable is not None:
            window = len(self.accepted_state.turns)  # the accepted turns its window holds
            cursor = Cursor(replace(self.counts), self.machine.path, window, self.ledger.total, self.ledger.calls)
            self.durable.checkpoint(accepted, cursor, self.accepted_state)

    # The turn's effects, performed by the performer.

    def _open_turn(self) -> OpenTurn:
        if self._turn is None or self._turn.held is None:
            raise RuntimeError("no reply is held: observe first")
        return self._turn

    def _drive(self, event: Event) -> Turn:
        """Fire `event` and perform what follows until a reply is held for the caller's verdict."""
        turn = self._turn
        assert turn is not None
        turn.held = None
        self.performer.perform_all(event, turn)
        if turn.held is not None:
            return turn.held
        self.performer.fail_turn(turn)
        self._turn = None
        raise FailedClosed(self.redactor.text(turn.failure or "the machine stopped"), self.ledger.unattributed)
