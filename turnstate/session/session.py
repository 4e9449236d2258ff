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

The machine emits effects; the session performs each one (one method per effect) and feeds the
outcome back as the next event, so every decision stays in the machine's table. It builds no record
itself: with an `out_dir` it hands what happened to turnstate/durable/artifacts.py and writes what that returns
(step records, compaction records, the failed turn, the transition log, and run_meta.json, written
whatever ends the session, an interrupt or a crash included).

Durable: with an `out_dir`, each accepted reply is a checkpoint (turnstate/durable/checkpoints.py) before
`accept` returns, so before its caller performs anything; the events go to events.jsonl and each
call's usage to calls.jsonl. `Session(profile, resume=run_dir)` goes on from the last checkpoint (a
kill, a crash, or with `switch` another adapter, model or strategy): see `_resume`, and
docs/durable-runs.md.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, get_args

from turnstate.adapters.contract import (
    Endpoint,
    ErrorKind,
    ModelRequest,
    ModelResponse,
    ProviderAdapter,
    ProviderError,
    ToolCall,
    ToolResult,
    ToolSpec,
    Usage,
)
from turnstate.adapters.registry import descriptor_for
from turnstate.durable.accounting import Ledger, UsageJournal
from turnstate.durable.artifacts import (
    Attempt,
    CallKind,
    compaction_record,
    failed_turn_record,
    request_delta,
    run_totals,
    step_record,
    summary_input,
)
from turnstate.durable.checkpoints import (
    SWITCHABLE,
    Checkpoint,
    CheckpointError,
    CheckpointMeta,
    CheckpointStore,
    DamagedStore,
    ProjectionMark,
    RestoredCheckpoint,
    open_run_store,
    set_aside_run_store,
)
from turnstate.durable.events import EventLog, EventLogError, Status
from turnstate.durable.layout import (
    CALLS,
    EVENTS,
    FAILED_TURN,
    RUN_META,
    SUMMARY_INPUT,
    compaction_name,
    new_run_id,
    step_name,
)
from turnstate.durable.redaction import Redactor
from turnstate.durable.resume import (
    RecordsPosition,
    ResumeError,
    checkpointed_events,
    committed_summary,
    cut_events,
    position_from_records,
    projected_turns,
    records_ahead,
    run_id_of,
    run_meta,
    torn_files,
    with_calls_as_text,
)
from turnstate.durable.side_effects import JournalError
from turnstate.durable.tool_results import READ_TOOL_RESULT_SPEC, ToolResultStore
from turnstate.durable.transition_log import TransitionLines
from turnstate.durable.writer import ArtifactWriter
from turnstate.environments.protocol import ToolRefused, readable_reasoning
from turnstate.machine.engine import Effect, Event, LiveMachine
from turnstate.session import scaffold
from turnstate.session.endpoint import RunSetupError, local_service_dir, open_endpoint
from turnstate.session.profile import Profile
from turnstate.session.run_profile import run_profile
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
    ToolsAnswered,
    WaitBeforeRetry,
    outcome_event,
)
from turnstate.strategies.state import RuntimeState
from turnstate.strategies.strategy import ProjectedTurn, Strategy, StrategyModel, StrategySettings
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


class FailedClosed(Exception):
    """The turn failed for good: no retry is left, or the failure cannot be retried. The accepted
    state is as the last accepted turn left it; `usage` is what the failed turn's calls used."""

    def __init__(self, reason: str, usage: Usage) -> None:
        super().__init__(reason)
        self.reason = reason
        self.usage = usage


@dataclass
class RunResult:
    run_id: str
    artifacts: Path | None
    outcome: str  # win | max_actions | failed_closed | finished (a session its caller ended)
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
    # A run that failed closed on a refusal: the server's words (made safe, redacted), for the
    # console only; run_meta.json keeps the classified failure, never a provider's message.
    server_message: str | None = None


@dataclass(frozen=True)
class AcceptedReply:
    """An accepted reply as its checkpoint's fact keeps it: the intent its action and calls are
    performed from, so a resumed caller performs what the kill left undone, and nothing twice."""

    step: int
    action: str | None  # None: a tool round
    action_call: ToolCall | None
    tool_calls: tuple[ToolCall, ...]
    # The reply's readable reasoning, redacted and bounded (protocol.readable_reasoning), for an
    # environment that keeps it beside the action (RecordingEnvironment); never opaque state.
    reasoning: str | None = None

    def as_fact(self) -> dict[str, Any]:
        return {
            "kind": "accepted",
            "step": self.step,
            "action": self.action,
            "action_call": None if self.action_call is None else self.action_call.id,
            "tool_calls": [
                {"id": call.id, "name": call.name, "arguments": dict(call.arguments)} for call in self.tool_calls
            ],
            "reasoning": self.reasoning,
        }

    @classmethod
    def last_of(cls, facts: Sequence[Mapping[str, Any]]) -> AcceptedReply | None:
        """The last accepted reply among `facts` (None before the first)."""
        fact = next((fact for fact in reversed(facts) if fact.get("kind") == "accepted"), None)
        if fact is None:
            return None
        calls = tuple(ToolCall(call["id"], call["name"], call["arguments"]) for call in fact["tool_calls"])
        action_call = next((call for call in calls if call.id == fact["action_call"]), None)
        return cls(fact["step"], fact["action"], action_call, calls, fact.get("reasoning"))


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


ENDED = ("win", "max_actions", "level_budget")  # the outcomes a run cannot be resumed from
SCHEDULED = "CompactionScheduled"  # the state between turns of a machine whose next turn compacts first


@dataclass(frozen=True)
class Resumed:
    """Where a resumed session went on from, as run_meta.json's `resumes` lists it."""

    checkpoint: int  # the checkpoint it went on from (0: none, the run started again)
    step: int  # the last step that checkpoint holds
    turn: int
    continuation: str  # "restored", or how the accepted state was made without it
    dropped_turns: int  # the oldest turns a rebuilt state left out to fit the context budget
    from_summary: int | None  # the run's harness summary a rebuilt state starts from (its compaction_NNN)
    cut_events: int  # events.jsonl lines after the checkpoint, of the turn the kill interrupted
    lost_calls: int  # provider calls of that turn (calls.jsonl): paid for, so counted, but played again
    lost_usage: dict[str, Any]
    # Steps the checkpoints hold whose step_NNNNNN.json the kill took while it was being written (the
    # records are written beside the run, not before its checkpoint): their facts are in the
    # checkpoint store and events.jsonl, their readable records are lost.
    lost_records: list[int]
    torn_lines: list[str]  # the journals and logs whose torn last line (a kill mid-write) was cut off
    switched: dict[str, Any] | None  # a model switch: from, to, what it dropped
    # A resume from the run's records (--from-records): the damage it went on past, and where the
    # damaged checkpoint store was set aside.
    from_records: dict[str, Any] | None = None


def _missing_records(run_dir: Path, steps: int) -> list[int]:
    """The steps up to `steps` whose step record the run folder lacks (one listing of the folder)."""
    present = set(os.listdir(run_dir))
    return [step for step in range(1, steps + 1) if step_name(step) not in present]


def _interrupted_switch(meta: Mapping[str, Any], digest: str) -> bool:
    """Whether the run's last resume switched to the profile with `digest`: a kill before that switch's
    first checkpoint left the store the old configuration's, and resuming it is that switch again."""
    resumes = meta.get("resumes") or [{}]
    switched = resumes[-1].get("switched") if isinstance(resumes[-1], dict) else None
    return isinstance(switched, dict) and switched.get("to", {}).get("profile_digest") == digest


def _logged_through(restored: RestoredCheckpoint | None) -> int:
    """The sequence number of the last event a checkpoint holds (0: none)."""
    return restored.projection.through if restored is not None else 0


def _records_disagree(run_dir: Path, restored: RestoredCheckpoint | None, meta: Mapping[str, Any]) -> list[str]:
    """How the run's other records are ahead of its checkpoints, or its event log behind them
    (resume.records_ahead): what refuses a resume before anything is cut or played."""
    return records_ahead(
        run_dir,
        checkpoint=restored.sequence if restored else 0,
        step=restored.cursor["step"] if restored else 0,
        projection=restored.projection if restored else ProjectionMark(),
        meta=meta,
    )


def _damaged(run_dir: Path, problems: Sequence[str]) -> ResumeError:
    return ResumeError(
        f"{run_dir}: cannot resume: the run's records disagree with its checkpoints: {'; '.join(problems)}. "
        "A checkpoint store behind the records was damaged (a deleted or cut -wal file, a truncated or altered "
        "database), and going on from it would play again what the run already did; fix: restore the run "
        "folder whole from a backup, or go on from the run's records with `turnstate resume --from-records` "
        f"(the accepted state rebuilt from {EVENTS}, without the provider's opaque state), or start the run "
        "again with `turnstate run`. Nothing was played and no record was cut"
    )


def _switch_record(before: CheckpointMeta, after: CheckpointMeta) -> dict[str, Any]:
    """A switch as run_meta.json records it: the configuration before and after (the fields a switch
    may change, in the meta's order), and what it dropped."""
    switchable = [name for name in asdict(before) if name in SWITCHABLE]
    return {
        "from": {name: getattr(before, name) for name in switchable},
        "to": {name: getattr(after, name) for name in switchable},
        "dropped": "the continuation (the old adapter's opaque state): rebuilt from the projection",
    }


@dataclass
class _OpenTurn:
    """The open turn's bookkeeping while its effects are performed."""

    history_before: int  # the accepted history's size in items when the turn opened
    attempts: list[Attempt] = field(default_factory=list)  # its provider calls, in order
    summary: tuple[int, ReportSummary] | None = None  # the harness summary it committed: its number and report
    held: Turn | None = None  # the reply waiting for the caller's verdict
    action: str | None = None
    failure: str | None = None


class Session:
    """One agent's runtime state across its turns (see the module docstring). Use it as a context
    manager: leaving it closes the provider connection and the embedded local provider, and writes
    run_meta.json when the session writes artifacts."""

    machine: LiveMachine[StrategyModel]  # the strategy's machine, started as the session is entered

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
        `profile` the run's own (turnstate/durable/resume.py `run_profile`) or, with `switch`, another adapter,
        model or strategy, and with `from_records` from the run's records when its checkpoint store was
        damaged (see `_resumed_checkpoints`); `sleep` performs the machine's waits; `on_point` is called at each named
        point of a turn (POINTS), where the kill tests stop a run."""
        if resume is not None and out_dir is not None:
            raise ValueError("a session writes a new run (out_dir) or resumes one (resume), not both")
        self.profile = profile
        self.actions = scaffold.action_tools(actions)
        # The read-only tools every request offers: the caller's, and the one that reads offloaded results back.
        self.tools = (*tools, *([READ_TOOL_RESULT_SPEC] if profile.offload() is not None else []))
        self.action_mode = profile.agent.action_mode
        self.descriptor = descriptor_for(profile.runtime.adapter_id)
        self._system_prompt = system_prompt
        self._out_dir = None if out_dir is None else Path(out_dir)
        self._resume_dir = None if resume is None else Path(resume)
        self._switch = switch
        self._from_records = from_records
        self._from_damage: dict[str, Any] | None = None  # what a resume from the records recovered from
        self._on_point = on_point or _nowhere
        self._results_as_input: tuple[str, ...] = ()  # call ids, in order: see `_answers`
        self._service: Path | None = None  # the embedded provider's service folder (a local run's)
        self._usage_journal: UsageJournal | None = None  # calls.jsonl, when the session writes artifacts
        self.resumed: Resumed | None = None  # where a resumed session went on from
        self.resumed_reply: AcceptedReply | None = None  # the reply its last checkpoint accepted
        self.facts: tuple[dict[str, Any], ...] = ()  # the durable facts a resumed session's checkpoint holds
        self._facts: list[dict[str, Any]] = []  # recorded since the last checkpoint
        self._adapter_factory = adapter_factory or self._connect_registered_adapter
        self.sleep = sleep
        # What a caller that shows anything of the session (an error, a traceback) passes it through:
        # its redaction, once its endpoint is open (nothing secret is known before).
        self.redactor = Redactor()
        self.run_dir: Path | None = None  # the session's artifacts folder, once it is made
        self.run_id = ""  # the run's id: its folder's name when it was made (run_meta.json keeps it)
        self._stack = ExitStack()
        self._writer: ArtifactWriter | None = None
        self.events: EventLog | None = None  # events.jsonl, when the session writes artifacts
        self.checkpoints: CheckpointStore | None = None  # checkpoints.sqlite3, likewise
        self._turn: _OpenTurn | None = None
        self._finished: tuple[str, str | None, int] | None = None
        self._started = time.perf_counter()
        self.ledger = Ledger(profile.prices())
        self.provider_seconds = 0.0
        self.turns = self.accepted_actions = self.failed_attempts = 0
        self.steps = 0  # committed replies (actions and tool rounds), numbering step_NNNNNN.json
        self.tool_rounds = 0  # tool rounds since the last accepted action
        self.summaries = 0  # harness summaries committed, numbering compaction_NNN.json
        self.compactions = 0  # compactions of every kind committed (inline, by a call, harness summaries)
        self.failed_turn: str | None = None  # the failed turn's record, once written
        self.failure: str | None = None  # why the turn that failed closed did
        self.levels_won = 0  # for a caller that plays levels: what run_meta.json records if the session ends early
        self._last_sent: tuple[int, ModelRequest] | None = None  # the previous step and its request
        self._torn: list[str] = []  # a resumed run's files with a torn last line, as it found them
        self._server_message: str | None = None  # the last fatal refusal's words (RunResult.server_message)

    def _connect_registered_adapter(self, endpoint: Endpoint) -> ProviderAdapter:
        adapter, settings, grammar = (
            self.descriptor.load(),
            self.profile.request_settings(),
            self.profile.request.action_grammar,
        )
        if grammar is not None and adapter.grammar_field is not None:  # the profile's validation checked the two agree
            if self.tools:  # llama-server refuses the two together, and rightly: no reply could call a tool
                raise RunSetupError(
                    f"request.action_grammar holds every reply to an ACTION line, so the tools offered "
                    f"({', '.join(tool.name for tool in self.tools)}) could never be called; "
                    "remove request.action_grammar to offer tools"
                )
            try:
                text = scaffold.action_grammar(self.actions, thinking=grammar == "thinking")
            except ValueError as error:
                raise RunSetupError(f"request.action_grammar: {error}; remove it for this environment") from None
            settings = replace(settings, extra_body={**settings.extra_body, adapter.grammar_field: text})
        return adapter.connect(endpoint, settings)

    # Opening and closing.

    def __enter__(self) -> Session:
        try:
            run_dir = self._resume_dir
            if run_dir is None and self._out_dir is not None:
                run_dir = self._out_dir / new_run_id(self.profile.id)
            if run_dir is not None:  # a resumed run keeps the id it started under, whatever its folder's name now
                self.run_id = run_dir.name if self._resume_dir is None else run_id_of(run_dir)
            local = run_dir is not None and self.profile.client.is_local
            self._service = local_service_dir(self.run_id) if local else None
            game_id = self.profile.environment.options.get("game_id")  # an ARC-AGI-3 game's, for a local recording
            opened = open_endpoint(self.profile.client, self._service, game_id if isinstance(game_id, str) else None)
            endpoint = self.endpoint = self._stack.enter_context(opened)
            self.adapter = self._adapter_factory(endpoint)
            self.redactor = Redactor(secrets=(endpoint.api_key,))
            if run_dir is not None:
                exists = self._resume_dir is not None
                self._torn = torn_files(run_dir) if exists else []  # before any opener cuts them
                self._writer = ArtifactWriter(run_dir.parent, run_dir.name, self.redactor, existing=exists)
                self._stack.callback(self._writer.close)
                self.run_dir = self._writer.path
                self._meta = self._meta_base(endpoint)
            self.tool_results = ToolResultStore(self.run_dir)
            system = self._system_prompt or scaffold.system_prompt(self.actions, self.action_mode, self.tools)
            offered = (*(self.actions if self.action_mode == "tools" else ()), *self.tools)
            settings = self.profile.strategy_settings(system, offered)
            strategy = STRATEGIES[self.profile.runtime.strategy]
            if self.run_dir is None:
                self.machine = strategy.start(settings, self.adapter.transcript, None, None)
            else:
                self._open_durable_run(self.run_dir, strategy, settings)
        except BaseException:
            self._stack.close()
            raise
        self._started = time.perf_counter()
        return self

    def _open_durable_run(self, run_dir: Path, strategy: Strategy, settings: StrategySettings) -> None:
        """The checkpoint store, the event log and the machine of a run that writes artifacts: a new
        run's, or a resumed one's as its last checkpoint left them (see `_resume`); then run_meta.json,
        saying the run is running, so a run killed at any point names its profile."""
        previous: dict[str, Any] = {}  # run_meta.json as the resumed run last wrote it
        if self._resume_dir is not None:
            previous = run_meta(run_dir)
            self._check_resumable(run_dir, previous)
            self._switch = self._switch or _interrupted_switch(previous, self.profile.digest())
        restored = None
        if self._resume_dir is None:
            self.checkpoints = self._open_checkpoints(run_dir, settings.system_prompt)
        else:
            self.checkpoints, restored = self._resumed_checkpoints(run_dir, settings.system_prompt, previous)
            self._check_budget_left(run_dir, restored)
            cut = cut_events(run_dir / EVENTS, _logged_through(restored))
        self.events = self._stack.enter_context(EventLog(run_dir / EVENTS, redact=self.redactor.text))
        lost = UsageJournal.calls_after(run_dir / CALLS, restored.cursor["provider_calls"] if restored else 0)
        self._usage_journal = UsageJournal(run_dir / CALLS)
        self._stack.callback(self._usage_journal.close)
        if self._resume_dir is None:
            self.machine = strategy.start(settings, self.adapter.transcript, None, None)
        else:
            self._resume(strategy, settings, restored, cut, lost, previous)
        with signals_deferred():
            self._write_meta(self.result(), outcome="running")

    def _resume(
        self,
        strategy: Strategy,
        settings: StrategySettings,
        restored: RestoredCheckpoint | None,
        cut: int,
        lost: Sequence[Usage],
        previous: Mapping[str, Any],
    ) -> None:
        """Go on from the last checkpoint: the machine in the state it rested in, on the accepted
        state the continuation keeps, or, without it (no key, or a switch to another adapter, model
        or strategy, which drops it), on one rebuilt from the conversation's projection; the counts
        and the ledger as the checkpoint's cursor has them, so nothing is counted twice; the event
        log cut back to the checkpoint (turnstate/durable/resume.py); the `lost` calls (made after the
        checkpoint, in the turn the kill interrupted) counted once, as the next step's; and the
        resume in run_meta.json, after those `previous` lists."""
        assert self.checkpoints is not None and self.events is not None and self._writer is not None
        switched = self.checkpoints.switched_from
        if restored is not None:
            self._restore_cursor(restored)
            if self.events.last_seq == _logged_through(restored):  # the checkpoint's own event is missing
                self.events.checkpoint(turn=self.turns, step=self.steps, checkpoint_id=str(restored.sequence))
        self.machine, continuation, (dropped_turns, from_summary) = self._resumed_machine(
            strategy, settings, restored, switched
        )
        for usage in lost:
            self.ledger.record_call(usage)
        self.resumed = Resumed(
            checkpoint=restored.sequence if restored else 0,
            step=self.steps,
            turn=self.turns,
            continuation=continuation,
            dropped_turns=dropped_turns,
            from_summary=from_summary,
            cut_events=cut,
            lost_calls=len(lost),
            lost_usage=sum(lost, Usage()).to_dict(),
            lost_records=_missing_records(self._writer.path, self.steps),
            torn_lines=self._torn,
            switched=None if switched is None else _switch_record(switched, self.checkpoints.meta),
            from_records=self._from_damage,
        )
        self._meta["resumes"] = [*previous.get("resumes", []), asdict(self.resumed)]
        self._on_point("after_resume")

    def _resumed_machine(
        self,
        strategy: Strategy,
        settings: StrategySettings,
        restored: RestoredCheckpoint | None,
        switched: CheckpointMeta | None,
    ) -> tuple[LiveMachine[StrategyModel], str, tuple[int, int | None]]:
        """The machine a resume goes on with, how its accepted state was made, and what a rebuild made
        it from (the turns it left out, the summary it starts from): fresh without a checkpoint; on the
        continuation, in the state it rested in; else on a state rebuilt from the projection, in
        CompactionScheduled when a compaction is due."""
        transcript = self.adapter.transcript
        if restored is None:
            return (
                strategy.start(settings, transcript, None, None),
                "none (no turn was accepted: the run starts again)",
                (0, None),
            )
        if restored.state is not None and switched is None:
            machine = strategy.start(settings, transcript, restored.state, restored.cursor["machine_state"])
            return machine, "restored", (0, None)
        offered = [tool.name for tool in settings.tools]
        assert self._writer is not None
        events = checkpointed_events(self._writer.path, restored.projection)
        turns, from_summary = self._history(events, restored.cursor, switched is not None, offered)
        reply = self.resumed_reply  # restored from the checkpoint's facts first (`_resume`)
        if turns and reply is not None and reply.tool_calls:  # the caller answers them next: see `_answers`
            turns[-1] = with_calls_as_text(turns[-1], reply.action_call, reply.action)
            self._results_as_input = tuple(call.id for call in reply.tool_calls)
        rebuilt = strategy.rebuild(settings, transcript, turns)
        due = rebuilt.compaction_due or (switched is None and restored.cursor["machine_state"] == SCHEDULED)
        at = SCHEDULED if due and SCHEDULED in strategy.specs[settings.compaction.kind].state_paths() else None
        return (
            strategy.start(settings, transcript, rebuilt.state, at),
            "rebuilt from the projection",
            (rebuilt.dropped_turns, from_summary),
        )

    def _check_resumable(self, run_dir: Path, meta: Mapping[str, Any]) -> None:
        """A run that ended (its run_meta.json, `meta`, says so) has nothing to resume, and a switch
        keeps the game it plays."""
        ended = meta.get("outcome")
        if ended in ENDED:
            raise ResumeError(f"{run_dir}: the run ended ({ended}); there is nothing to resume")
        if self._switch and self.profile.environment != run_profile(run_dir).environment:
            raise ResumeError(
                f"{run_dir}: a switch changes the adapter, model or strategy, not the game; "
                "fix: give the profile the run's environment section"
            )

    def _check_budget_left(self, run_dir: Path, restored: RestoredCheckpoint | None) -> None:
        """A switch's profile brings its own agent.max_actions: one the run has already spent would
        end the resumed run at once, as if it had run out, so it is refused naming both numbers."""
        budget, spent = self.profile.agent.max_actions, restored.cursor["accepted_actions"] if restored else 0
        if self._switch and spent >= budget:
            raise ResumeError(
                f"{run_dir}: the switch's agent.max_actions {budget} is spent: the run has accepted {spent} actions; "
                f"fix: give the profile a max_actions above {spent}"
            )

    def _history(
        self, events: Sequence[Mapping[str, Any]], cursor: Mapping[str, Any], switched: bool, offered: Collection[str]
    ) -> tuple[list[ProjectedTurn], int | None]:
        """The projected turns a state is rebuilt from, and the harness summary they start from:
        - for the same configuration, when no compaction ever replaced turns, exactly the turns its
          window held (the cursor's `window_turns`), so the run goes on as it would have;
        - when every compaction was a harness summary (plain text the run recorded, unlike a native
          compaction's opaque items), the window as its latest summary left it: that summary's bridge,
          opening the first of the turns it kept, then every turn after, so no fact it kept is lost;
        - else every turn, which the rebuild fits to the context budget, compacting first where the
          strategy can (strategies/projection.py): a native compaction's summary was opaque, in the
          continuation, so the projection stands for it.
        After a switch, a past call of a tool the session does not offer is text (resume.projected_turns)."""
        turns = projected_turns(events, offered if switched else None)
        window = cursor.get("window_turns", 0)
        if window and not switched and cursor["compactions"] == 0:
            return turns[-window:], None
        number = cursor["summaries"]
        summarized = number > 0 and number == cursor["compactions"]
        summary = committed_summary(self.run_dir, number) if summarized and self.run_dir is not None else None
        if summary is None or not summary.excluded_turns < summary.step <= len(turns):
            return turns, None
        first, *rest = turns[summary.step - 1 - summary.excluded_turns :]  # turn k is step k's
        return [replace(first, inputs=(summary.bridge, *first.inputs)), *rest], number

    def _restore_cursor(self, restored: RestoredCheckpoint) -> None:
        """The counts and the ledger as the checkpoint's cursor (`_cursor`) has them, its facts, and
        the reply it accepted, for the caller to carry out."""
        cursor = restored.cursor
        self.steps, self.turns = cursor["step"], cursor["turn"]
        self.accepted_actions, self.failed_attempts = cursor["accepted_actions"], cursor["failed_attempts"]
        self.tool_rounds, self.levels_won = cursor["tool_rounds"], cursor["levels_won"]
        self.summaries, self.compactions = cursor["summaries"], cursor["compactions"]
        self.ledger.total, self.ledger.calls = Usage.from_dict(cursor["usage"]), cursor["provider_calls"]
        self.facts = restored.facts
        self.resumed_reply = AcceptedReply.last_of(restored.facts)

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        try:
            if self._writer is not None and self._finished is None:  # else finish() wrote run_meta.json
                if error is None:
                    self._finished = (
                        "failed_closed" if self.failed_turn else "finished",
                        self.failure,
                        self.levels_won,
                    )
                else:
                    outcome = "interrupted" if isinstance(error, KeyboardInterrupt) else "crashed"
                    self._finished = (outcome, _what_ended(error), self.levels_won)
                with signals_deferred():
                    self._write_meta(self.result())
        finally:
            self._stack.close()
        if self._finished is not None and self._finished[0] in ENDED and self._service is not None:
            shutil.rmtree(self._service, ignore_errors=True)  # nothing can resume the run: its service goes

    def finish(self, outcome: str, failure: str | None = None, *, levels_won: int = 0) -> RunResult:
        """End the session with its outcome (a runner's win, max_actions or failed_closed): the
        result, and run_meta.json when the session writes artifacts, together or not at all."""
        with signals_deferred():
            self._finished = (outcome, failure, levels_won)
            result = self.result()
            if self._writer is not None:
                self._write_meta(result)
        return result

    def result(self) -> RunResult:
        outcome, failure, levels_won = self._finished or ("finished", None, 0)
        return RunResult(
            run_id=self.run_id,
            artifacts=self.run_dir,
            outcome=outcome,
            failure=None if failure is None else self.redactor.text(failure),  # as run_meta.json has it
            turns=self.turns,
            accepted_actions=self.accepted_actions,
            failed_attempts=self.failed_attempts,
            levels_won=levels_won,
            compactions=self.compactions,
            usage=self.ledger.total,
            unattributed_usage=self.ledger.unattributed,
            cost=self.ledger.cost(self.ledger.total),
            wall_seconds=time.perf_counter() - self._started,
            provider_seconds=self.provider_seconds,
            accepted_state=self.accepted_state,
            server_message=(
                self.redactor.text(self._server_message)
                if outcome == "failed_closed" and self._server_message
                else None
            ),
        )

    @property
    def accepted_state(self) -> RuntimeState:
        """The last accepted state (serializable with `to_json`; it may hold opaque provider state, so
        keep it where the provider's data may be kept)."""
        return self.machine.model.accepted

    # The caller's loop.

    def observe(self, observation: str = "", results: Sequence[ToolResult] = ()) -> Turn:
        """Open a turn on `observation` (with any inputs buffered before it), after the `results` of
        the last accepted reply's tool calls (one per call, in the calls' order; an action's carries
        the next frame, so the observation may then be empty); return the reply held for the
        caller's verdict. Raises FailedClosed if the turn cannot get one."""
        if self._turn is not None:
            raise RuntimeError("a turn is open: accept or reject its reply before the next observation")
        logged = tuple(results)
        results, as_input = self._answers(logged)  # before anything fires or is counted
        if not observation and not logged:
            raise ValueError("nothing to observe: pass an observation, or the results of the last reply's calls")
        self.turns += 1
        if self.events is not None:
            for result in logged:
                self.events.tool_result(turn=self.turns, step=self.steps + 1, result=result)
            if observation:
                self.events.user_input(turn=self.turns, step=self.steps + 1, text=observation, source="observation")
        observation = "\n\n".join([*as_input, *([observation] if observation else [])])
        if results:
            self._fire(ToolsAnswered(results))
        self.machine.take_fired()  # between turns (a buffered input): in the transition log, not in a step
        self._turn = _OpenTurn(self.accepted_state.item_count)
        return self._drive(ObservationArrived(observation))

    def _answers(self, results: tuple[ToolResult, ...]) -> tuple[tuple[ToolResult, ...], list[str]]:
        """The results that answer the accepted state's calls (checked: one per call, in order), and
        the texts of those that come as input instead: a resume without the continuation wrote the
        last reply's calls into it as text (resume.with_calls_as_text), so their results are read as
        the next input, in order, ahead of the observation."""
        if not self._results_as_input:
            check_answers(self.accepted_state, results)
            return results, []
        given = tuple(result.call_id for result in results)
        if given != self._results_as_input:
            raise ValueError(
                f"the resumed reply's tool calls are {', '.join(self._results_as_input)}; "
                f"pass one result for each, in that order (got {', '.join(given) or 'none'})"
            )
        self._results_as_input = ()
        return (), [result.content for result in results]

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
        self._perform_all(ActionAccepted(chosen), turn)
        compactions = self.compactions
        with signals_deferred():  # the step's record and its count, together or not at all
            self.steps += 1
            self.accepted_actions += chosen is not None
            self.tool_rounds = 0 if chosen is not None else self.tool_rounds + 1
            self.failed_attempts += sum(attempt.failed for attempt in turn.attempts)
            self._write_step(self.steps, chosen, held.tool_calls, turn)
            self._log_reply(held, "accepted", action=chosen, record=step_name(self.steps))
            reasoning = readable_reasoning(self.redactor.text(held.reasoning_summary or ""))
            accepted = AcceptedReply(self.steps, chosen, held.action_call, held.tool_calls, reasoning)
            self._checkpoint(accepted)
        self._turn = None
        self._on_point("after_commit" if self.compactions == compactions else "after_compaction_commit")
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
            self._log_reply(held, "rejected", reason=reason)
        return self._drive(ActionRejected(reason))

    def read_tool_result(self, call: ToolCall) -> ToolResult:
        """The answer to a `read_tool_result` call (offered when the profile offloads stale tool
        results): a page of the offloaded result its ref names, or an error result saying why not."""
        try:
            return ToolResult(call.id, call.name, self.tool_results.read(call.arguments))
        except ToolRefused as refused:
            return ToolResult(call.id, call.name, str(refused), is_error=True)

    def buffer(self, text: str) -> None:
        """An input that arrives without a model call (a GAME_OVER frame): it waits in the accepted
        state and opens the next turn, ahead of its observation."""
        if self._turn is not None:
            raise RuntimeError("a turn is open: accept or reject its reply before buffering an input")
        if self.events is not None:  # it opens the next turn
            self.events.user_input(turn=self.turns + 1, step=self.steps + 1, text=text, source="buffered")
        self._fire(InputBuffered(text))

    def _resumed_checkpoints(
        self, run_dir: Path, system_prompt: str, previous: Mapping[str, Any]
    ) -> tuple[CheckpointStore, RestoredCheckpoint | None]:
        """The store a resume goes on from and its last checkpoint, once the run's records agree with
        it. When they do not, or the store cannot be read whole, the resume is refused, unless it goes
        on from the records (`from_records`): the damaged store is then set aside (checkpoints.py, rule
        10) and a new one holds the checkpoint the records make (resume.position_from_records), whose
        state is rebuilt from the projection. What only the old store held is lost: the continuation,
        a caller's own facts, the exact count of failed attempts."""
        store: CheckpointStore | None = None
        try:
            store = self._open_checkpoints(run_dir, system_prompt)
            restored = store.latest()
            damage = _records_disagree(run_dir, restored, previous)
        except DamagedStore as error:
            if not self._from_records:
                raise
            restored, damage = None, [str(error)]
        if not damage:
            assert store is not None
            return store, restored
        if not self._from_records:
            raise _damaged(run_dir, damage)
        if store is not None:
            store.close()
        position = position_from_records(run_dir)
        aside = set_aside_run_store(run_dir)
        after = position.checkpoint - 1 if position is not None else 0
        store = self._open_checkpoints(run_dir, system_prompt, numbered_after=after)
        if position is not None:
            facts = [self._accepted_fact(position).as_fact()]
            store.commit(Checkpoint(position.cursor, None, facts, position.projection))
        self._from_damage = {"damage": list(damage), "set_aside": aside.name}
        return store, store.latest()

    def _accepted_fact(self, position: RecordsPosition) -> AcceptedReply:
        """The accepted reply the records' last checkpoint held, as its fact would have kept it: the
        call that named its action read from its calls as the live turn read it."""
        reply = position.reply
        if reply is None:
            return AcceptedReply(position.cursor["step"], None, None, ())
        tool_names = [tool.name for tool in self.tools]
        parsed = scaffold.parse_reply(reply.text, position.calls, self.actions, tool_names, self.action_mode)
        return AcceptedReply(reply.step, reply.action, parsed.action_call, position.calls)

    def _open_checkpoints(
        self, run_dir: Path, system_prompt: str, numbered_after: int | None = None
    ) -> CheckpointStore:
        """The run's checkpoint store: made for a new run, opened for a resumed one, refusing a
        checkpoint of another configuration or system prompt unless the session switches (then it may
        differ in adapter, model, strategy and system prompt: SWITCHABLE)."""
        descriptor = self.descriptor
        meta = CheckpointMeta(
            descriptor.adapter_id,
            descriptor.version,
            self.profile.runtime.strategy,
            self.profile.digest(),
            hashlib.sha256(system_prompt.encode()).hexdigest(),
        )
        store = open_run_store(
            run_dir,
            meta,
            accept=SWITCHABLE if self._switch else (),
            create=self._resume_dir is None or numbered_after is not None,
            numbered_after=numbered_after or 0,
        )
        self._stack.callback(store.close)
        return store

    def _checkpoint(self, accepted: AcceptedReply) -> None:
        """The accepted turn made durable before the caller performs its action or answers its calls
        (turnstate/durable/checkpoints.py): the facts recorded since the last checkpoint (`record_fact`: the
        receipts of the side effects the last turn led to), then the accepted reply as a durable
        fact, the intent its action and calls are performed from; the cursor; the event log's mark (the
        projection is the log, up to it); and, with the continuation kept, the accepted state sealed;
        then the checkpoint's own event."""
        if self.checkpoints is None or self.events is None:
            return
        facts, self._facts = [*self._facts, accepted.as_fact()], []
        # The provider's opaque state (encrypted reasoning, signatures) is kept only sealed: never in
        # plain text in the run folder, like every artifact; a resume then rebuilds from the projection.
        state = self.accepted_state if self.checkpoints.encrypts_continuation else None
        number = self.checkpoints.commit(Checkpoint(self._cursor(), state, facts, self.events.mark()))
        self.events.checkpoint(turn=self.turns, step=self.steps, checkpoint_id=str(number))

    def point(self, point: Point) -> None:
        """A named point of the caller's (after_side_effect), reported to the session's `on_point`."""
        self._on_point(point)

    def record_environment_scorecard(self, scorecard: Mapping[str, Any]) -> None:
        """A game's own account of the run (arc_agi3's: the ARC-AGI-3 toolkit's scorecard, kept
        small), written into run_meta.json as `environment_scorecard` with its next write."""
        if self._writer is not None:
            self._meta["environment_scorecard"] = dict(scorecard)

    def record_fact(self, fact: Mapping[str, Any]) -> None:
        """A durable fact of the caller's (a side effect's receipt, a user constraint: a JSON object
        with a `kind`), committed with the next checkpoint, and kept by every one after it."""
        if "kind" not in fact:
            raise ValueError("a fact names its kind")
        self._facts.append(dict(fact))

    def _cursor(self) -> dict[str, Any]:
        """Where the run is, as a checkpoint's cursor: small, written whole with every checkpoint."""
        return {
            "step": self.steps,
            "turn": self.turns,
            "accepted_actions": self.accepted_actions,
            "failed_attempts": self.failed_attempts,
            "tool_rounds": self.tool_rounds,
            "levels_won": self.levels_won,
            "summaries": self.summaries,
            "compactions": self.compactions,
            "machine_state": self.machine.path,
            "window_turns": len(self.accepted_state.turns),  # the accepted turns its window holds
            "usage": self.ledger.total.to_dict(),
            "provider_calls": self.ledger.calls,
        }

    def _log_reply(self, held: Turn, status: Status, **verdict: str | None) -> None:
        """The held reply, with its verdict, and the calls it made, in events.jsonl: an accepted one
        as the step it just committed, a rejected one as the step its turn would commit."""
        if self.events is None:
            return
        step = self.steps if status == "accepted" else self.steps + 1
        message = self.events.assistant_message(
            turn=self.turns, step=step, text=held.text, status=status, attempt=held.attempt, **verdict
        )
        for call in held.tool_calls:
            self.events.tool_call(message, call)

    # The effects.

    def _open_turn(self) -> _OpenTurn:
        if self._turn is None or self._turn.held is None:
            raise RuntimeError("no reply is held: observe first")
        return self._turn

    def _drive(self, event: Event) -> Turn:
        """Fire `event` and perform what follows until a reply is held for the caller's verdict."""
        turn = self._turn
        assert turn is not None
        turn.held = None
        self._perform_all(event, turn)
        if turn.held is not None:
            return turn.held
        self._fail_turn(turn)
        raise FailedClosed(self.redactor.text(turn.failure or "the machine stopped"), self.ledger.unattributed)

    def _perform_all(self, event: Event, turn: _OpenTurn) -> None:
        effects = deque(self._fire(event))
        while effects:
            next_event = self._perform(effects.popleft(), turn)
            if next_event is not None:
                effects.extend(self._fire(next_event))

    def _fire(self, event: Event) -> list[Any]:
        """Fire `event` and log every transition it fired: a nested machine's, then its parent's on
        the `Done` that the nested machine's final state fires at once."""
        already = len(self.machine.fired)
        effects = self.machine.fire(event)
        if self._writer is not None:
            for fired in self.machine.fired[already:]:
                self._writer.log_transition(fired.as_log())
        return effects

    def _perform(self, effect: Effect, turn: _OpenTurn) -> Event | None:
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
                return self._submit(effect, turn)
            case FailClosed():
                return self._fail_closed(effect, turn)
        raise TypeError(f"session cannot perform effect {effect!r}")

    def _call_provider(self, effect: CallProvider, turn: _OpenTurn) -> Event:
        """The action request, once the full text of every result it offloads is stored."""
        for ref, text in effect.offloaded:
            self.tool_results.put(ref, text)
        return self._call(self.adapter.call, effect.request, "action", turn)

    def _call_compaction(self, effect: CallCompaction, turn: _OpenTurn) -> Event:
        """A native compaction call, asked to replace the whole accepted history it is sent."""
        return self._call(self.adapter.compact, effect.request, "compaction", turn, len(effect.request.items))

    def _call_summary(self, effect: CallSummary, turn: _OpenTurn) -> Event:
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
        if self._writer is not None:
            attempt = len(turn.attempts) + 1
            self._writer.write_json(SUMMARY_INPUT, {"turn": self.turns, "attempt": attempt, **disclosed})
        return self._call(self.adapter.call, effect.request, "summary", turn, effect.summarized_items, disclosed)

    def _call(
        self,
        call: Callable[[ModelRequest], ModelResponse | ProviderError],
        request: ModelRequest,
        kind: CallKind,
        turn: _OpenTurn,
        summarized_items: int | None = None,
        disclosed: dict[str, Any] | None = None,
    ) -> Event:
        """One provider call of any kind: timed, its usage billed to the turn, the opaque values of its
        reply known to the redactor, and its attempt added to the turn's."""
        self._on_point("before_provider_call" if kind == "action" else "during_compaction")
        started = time.perf_counter()
        outcome = call(request)
        self.provider_seconds += time.perf_counter() - started
        self.ledger.record_call(outcome.usage)
        if self._usage_journal is not None:
            self._usage_journal.record(self.ledger.calls, kind, outcome.usage)
        if kind == "action" and isinstance(outcome, ModelResponse):
            self._on_point("after_reply")
        if isinstance(outcome, ModelResponse):
            self.redactor.learn(outcome.native_items)  # before any record could repeat them
            replied = "replied" if kind == "action" else "compacted"
            attempt = Attempt(kind, request, replied, outcome.usage, outcome.text, outcome.reasoning_summary)
            attempt.compaction_items = _compaction_items(self.adapter, outcome)
        else:
            attempt = Attempt(kind, request, outcome.kind.value, outcome.usage, diagnostics=dict(outcome.diagnostics))
            self._server_message = outcome.server_message or self._server_message
            if self.events is not None and kind == "action" and outcome.kind is ErrorKind.REFUSAL:
                self.events.assistant_message(
                    turn=self.turns,
                    step=self.steps + 1,
                    text="",
                    status="refused",
                    attempt=len(turn.attempts) + 1,
                    reason="the provider refused to answer",
                )
        attempt.summarized_items, attempt.summary_input = summarized_items, disclosed
        turn.attempts.append(attempt)
        return outcome_event(outcome, compaction=kind != "action")

    def _report_summary(self, effect: ReportSummary, turn: _OpenTurn) -> Event | None:
        """compaction_NNN.json for a harness summary that committed with this turn's action; the
        step's record points to it."""
        self.summaries += 1
        if self._writer is not None:
            record = compaction_record(
                self.summaries,
                effect,
                turn.attempts,
                step=self.steps + 1,  # the step it commits with
                cost=self.ledger.cost,
                redact=self.redactor.text,
            )
            self._writer.write_json(compaction_name(self.summaries), record)
        turn.summary = (self.summaries, effect)
        return None

    def _hold(self, effect: ParseAction, turn: _OpenTurn) -> Event | None:
        """The reply waits for the caller's verdict, with the action parsed from it if there is one;
        a tool round past the profile's `max_tool_rounds` has a problem instead."""
        response = effect.response
        tool_names = [tool.name for tool in self.tools]
        parsed = scaffold.parse_reply(response.text, response.tool_calls, self.actions, tool_names, self.action_mode)
        problem = parsed.problem
        if parsed.is_tool_round and self.tool_rounds >= self.profile.agent.max_tool_rounds:
            problem = f"{self.tool_rounds} tool rounds in a row without an action (agent.max_tool_rounds)"
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

    def _wait(self, effect: WaitBeforeRetry, turn: _OpenTurn) -> Event:
        """The wait the machine asked for after the latest attempt, recorded on it."""
        turn.attempts[-1].waited_seconds = effect.seconds
        self.sleep(effect.seconds)
        return BackoffElapsed()

    def _submit(self, effect: SubmitAction, turn: _OpenTurn) -> Event | None:
        turn.action = effect.action
        return None

    def _fail_closed(self, effect: FailClosed, turn: _OpenTurn) -> Event | None:
        turn.failure = effect.reason
        return None

    # The records.

    def _write_step(self, index: int, action: str | None, calls: Sequence[ToolCall], turn: _OpenTurn) -> None:
        usage = self.ledger.take_for_step()
        record = step_record(
            index,
            self._request_record(index, turn.attempts[-1].request),
            action,
            calls,
            turn.attempts,
            usage=usage,
            history=(turn.history_before, self.accepted_state.item_count),
            summary=turn.summary,
            transitions=self._step_transitions(),
            cost=self.ledger.cost,
            redact=self.redactor.text,
        )
        self.compactions += record["compaction"] is not None
        if self._writer is not None:
            self._writer.write_step(index, record)

    def _step_transitions(self) -> TransitionLines:
        """Where the step's transitions are in transitions.jsonl (`_fire` logged each as it fired)."""
        fired = len(self.machine.take_fired())
        return self._writer.last_transitions(fired) if self._writer is not None else TransitionLines(0, fired)

    def _request_record(self, index: int, request: ModelRequest) -> dict[str, Any]:
        """What is new in this step's request since the previous step's (artifacts.request_delta)."""
        logged = self.events.logged if self.events is not None else (lambda text: None)
        record = request_delta(self._last_sent, request, self.adapter.transcript.readable, logged)
        self._last_sent = (index, request)
        return record

    def _fail_turn(self, turn: _OpenTurn) -> None:
        """The turn failed closed: counted, and its record written (run_meta.json names it)."""
        self.failed_attempts += sum(attempt.failed for attempt in turn.attempts)
        self._turn = None
        self.failed_turn, self.failure = FAILED_TURN, turn.failure
        if self.events is not None:
            reason = turn.failure or "the machine stopped"
            self.events.assistant_message(
                turn=self.turns,
                step=self.steps + 1,
                text="",
                status="failed",
                attempt=len(turn.attempts),
                reason=reason,
                record=FAILED_TURN,
            )
        if self._writer is None:
            return
        self._writer.sync_transitions()
        record = failed_turn_record(
            self.steps + 1,
            turn.failure,
            turn.attempts,
            usage=self.ledger.unattributed,
            transitions=[transition.as_log() for transition in self.machine.take_fired()],
            redact=self.redactor.text,
        )
        self._writer.write_json(FAILED_TURN, record)

    def _meta_base(self, endpoint: Endpoint) -> dict[str, Any]:
        descriptor = self.descriptor
        return {
            "run_id": self.run_id,
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

    def _write_meta(self, result: RunResult, outcome: str | None = None) -> None:
        """run_meta.json: the run's settings and totals, with its outcome (or `outcome`: "running")."""
        assert self._writer is not None
        if outcome is not None:
            result = replace(result, outcome=outcome)
        totals = run_totals(result, provider_calls=self.ledger.calls, failed_turn=self.failed_turn)
        self._writer.write_json(RUN_META, self._meta | totals, reserve=True)


def _what_ended(error: BaseException) -> str:
    """What run_meta.json names as the end of a session an exception ended: the exception's class, and
    for a file that could not be written (a full disk, a read-only folder) why and which."""
    if isinstance(error, OSError) and error.strerror:
        return f"{type(error).__name__}: {error.strerror}" + (f" ({error.filename})" if error.filename else "")
    if isinstance(error, (CheckpointError, EventLogError, JournalError)):  # their messages name the file
        return f"{type(error).__name__}: {error}"
    return type(error).__name__


@contextmanager
def signals_deferred() -> Iterator[None]:
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
