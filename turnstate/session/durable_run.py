"""A session's durable run: the checkpoint store, the event log and the usage journal of a run that
writes artifacts, opened for a new run or resumed from its last checkpoint, and a checkpoint per
accepted turn.

What it knows of the store is the store's protocol (durable/checkpoints/protocol.py), opened through
stores.open_run_store; what a checkpoint holds of the session's is typed (durable/cursor.py). A resume
is decided here and handed back as one value (`Opened`): the machine it goes on with, the cursor the
session's counts and ledger are restored from, the facts and the reply the caller carries out, and
the resume as run_meta.json records it. The rules a resume keeps are durable/resume.py's."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Collection, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from turnstate.adapters.contract import Transcript, Usage
from turnstate.adapters.registry import AdapterDescriptor
from turnstate.durable.accounting import Ledger, UsageJournal
from turnstate.durable.checkpoints import (
    SWITCHABLE,
    Checkpoint,
    CheckpointMeta,
    CheckpointStore,
    DamagedStore,
    ProjectionMark,
    RestoredCheckpoint,
    open_run_store,
    set_aside_run_store,
)
from turnstate.durable.cursor import AcceptedReply, Cursor, CursorError, RunCounts
from turnstate.durable.events import EventLog
from turnstate.durable.images import ImageFiles, MissingImage
from turnstate.durable.layout import CALLS, EVENTS, IMAGES, step_name
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
    run_meta,
    with_calls_as_text,
)
from turnstate.machine.engine import LiveMachine
from turnstate.session import scaffold
from turnstate.session.performer import ReplyRules
from turnstate.session.profile import Profile
from turnstate.session.run_profile import run_profile
from turnstate.strategies.state import RuntimeState
from turnstate.strategies.strategy import ProjectedTurn, Strategy, StrategyModel, StrategySettings

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
    # Provider calls of that turn (calls.jsonl): paid for, so counted, but played again; each lost call
    # is listed by the first resume that finds it, so the resumes' lost calls add up (a resume killed
    # before its first checkpoint leaves the next one the same calls after the same checkpoint).
    lost_calls: int
    lost_usage: dict[str, Any]
    calls_through: int  # the calls the journal held at this resume: what the next one has listed already
    # Steps the checkpoints hold whose step_NNNNNN.json the kill took while it was being written (the
    # records are written beside the run, not before its checkpoint): their facts are in the
    # checkpoint store and events.jsonl, their readable records are lost.
    lost_records: list[int]
    torn_lines: list[str]  # the journals and logs whose torn last line (a kill mid-write) was cut off
    switched: dict[str, Any] | None  # a model switch: from, to, what it dropped
    # A resume from the run's records (--from-records): the damage it went on past, and where the
    # damaged checkpoint store was set aside.
    from_records: dict[str, Any] | None = None


@dataclass(frozen=True)
class Opened:
    """A durable run opened: the machine the session plays with and, for a resume, what it goes on from."""

    machine: LiveMachine[StrategyModel]
    cursor: Cursor | None = None  # the checkpoint's, which the session's counts and ledger restore
    facts: tuple[dict[str, Any], ...] = ()  # every durable fact the checkpoint holds
    reply: AcceptedReply | None = None  # the reply it accepted, for the caller to carry out
    results_as_input: tuple[str, ...] = ()  # call ids whose results open the next turn as text
    lost: tuple[Usage, ...] = ()  # calls made after the checkpoint: paid for, counted once
    resumed: Resumed | None = None  # this resume
    resumes: tuple[dict[str, Any], ...] = ()  # every resume of the run, this one last, as run_meta.json lists them

    def restore(self, counts: RunCounts, ledger: Ledger) -> None:
        """The counts and the ledger as the checkpoint's cursor has them, with the calls made after
        it counted once (as the next step's)."""
        if self.cursor is not None:
            counts.take(self.cursor.counts)
            ledger.total, ledger.calls = self.cursor.usage, self.cursor.provider_calls
        for usage in self.lost:
            ledger.record_call(usage)


@dataclass(frozen=True)
class Opening:
    """How a run folder is opened: for a new run, or with `resume` from its last checkpoint; `switch`
    accepts another adapter, model or strategy (SWITCHABLE); `from_records` goes on from the run's
    records past a damaged store."""

    resume: bool = False
    switch: bool = False
    from_records: bool = False


class DurableRun:
    """The durable part of a session that writes artifacts into `run_dir` (see the module docstring),
    opened as `opening` says."""

    def __init__(
        self,
        profile: Profile,
        descriptor: AdapterDescriptor,
        run_dir: Path,
        stack: ExitStack,
        opening: Opening,
        rules: ReplyRules,
    ) -> None:
        self.profile, self.descriptor, self.run_dir, self._stack = profile, descriptor, run_dir, stack
        self.resume, self.switch, self.from_records = opening.resume, opening.switch, opening.from_records
        self._rules = rules  # how the accepted reply of a records-built checkpoint is read
        self.store: CheckpointStore | None = None
        self.events: EventLog | None = None
        self.usage: UsageJournal | None = None
        self._from_damage: dict[str, Any] | None = None  # what a resume from the records recovered from
        self._facts: list[dict[str, Any]] = []  # recorded since the last checkpoint

    def open(
        self,
        strategy: Strategy,
        settings: StrategySettings,
        transcript: Transcript,
        redactor: Redactor,
        torn: list[str],
    ) -> Opened:
        """The checkpoint store, the event log, the usage journal and the machine: a new run's, or a
        resumed one's as its last checkpoint left them (see `_resumed`)."""
        run_dir = self.run_dir
        previous: dict[str, Any] = {}  # run_meta.json as the resumed run last wrote it
        if self.resume:
            previous = run_meta(run_dir)
            self._check_resumable(previous)
            self.switch = self.switch or _interrupted_switch(previous, self.profile.digest())
        restored, cursor, cut = None, None, 0
        if not self.resume:
            self.store = self._open_store(settings.system_prompt)
        else:
            self.store, restored = self._resumed_store(settings.system_prompt, previous)
            cursor = _cursor_of(run_dir, restored)
            self._check_budget_left(cursor)  # before anything is cut
            cut = cut_events(run_dir / EVENTS, _logged_through(restored))
        self.events = self._stack.enter_context(EventLog(run_dir / EVENTS, redact=redactor.text))
        lost = tuple(UsageJournal.calls_after(run_dir / CALLS, cursor.provider_calls if cursor else 0))
        self.usage = UsageJournal(run_dir / CALLS)
        self._stack.callback(self.usage.close)
        if not self.resume:
            return Opened(strategy.start(settings, transcript, None, None))
        earlier = tuple(previous.get("resumes", []))
        return self._resumed(strategy, settings, transcript, restored, cursor, cut, lost, torn, earlier)

    def _resumed(
        self,
        strategy: Strategy,
        settings: StrategySettings,
        transcript: Transcript,
        restored: RestoredCheckpoint | None,
        cursor: Cursor | None,
        cut: int,
        lost: tuple[Usage, ...],
        torn: list[str],
        earlier: tuple[dict[str, Any], ...],
    ) -> Opened:
        """Go on from the last checkpoint: the machine in the state it rested in, on the accepted
        state the continuation keeps, or, without it (no key, or a switch to another adapter, model
        or strategy, which drops it), on one rebuilt from the conversation's projection; the counts
        and the ledger as the checkpoint's cursor has them, so nothing is counted twice; the event
        log cut back to the checkpoint (durable/resume.py); the `lost` calls (made after the
        checkpoint, in the turn the kill interrupted) counted once, as the next step's; and this resume
        after the `earlier` ones run_meta.json lists."""
        assert self.store is not None and self.events is not None
        switched = self.store.switched_from
        counts = cursor.counts if cursor is not None else None
        if restored is not None and counts is not None and self.events.last_seq == _logged_through(restored):
            # the checkpoint's own event is missing
            self.events.checkpoint(turn=counts.turn, step=counts.step, checkpoint_id=str(restored.sequence))
        facts = restored.facts if restored is not None else ()
        reply = AcceptedReply.last_of(facts)
        machine, continuation, (dropped_turns, from_summary), results_as_input = self._resumed_machine(
            strategy, settings, transcript, restored, cursor, switched, reply
        )
        step = counts.step if counts is not None else 0
        counted = cursor.provider_calls if cursor is not None else 0
        listed = max(0, int(earlier[-1].get("calls_through", 0)) - counted) if earlier else 0
        resumed = Resumed(
            checkpoint=restored.sequence if restored else 0,
            step=step,
            turn=counts.turn if counts is not None else 0,
            continuation=continuation,
            dropped_turns=dropped_turns,
            from_summary=from_summary,
            cut_events=cut,
            lost_calls=len(lost[listed:]),
            lost_usage=sum(lost[listed:], Usage()).to_dict(),
            calls_through=counted + len(lost),
            lost_records=_missing_records(self.run_dir, step),
            torn_lines=torn,
            switched=None if switched is None else _switch_record(switched, self.store.meta),
            from_records=self._from_damage,
        )
        return Opened(machine, cursor, facts, reply, results_as_input, lost, resumed, (*earlier, asdict(resumed)))

    def _resumed_machine(
        self,
        strategy: Strategy,
        settings: StrategySettings,
        transcript: Transcript,
        restored: RestoredCheckpoint | None,
        cursor: Cursor | None,
        switched: CheckpointMeta | None,
        reply: AcceptedReply | None,
    ) -> tuple[LiveMachine[StrategyModel], str, tuple[int, int | None], tuple[str, ...]]:
        """The machine a resume goes on with, how its accepted state was made, what a rebuild made it
        from (the turns it left out, the summary it starts from), and the calls whose results open the
        next turn as text: fresh without a checkpoint; on the continuation, in the state it rested in;
        else on a state rebuilt from the projection, in CompactionScheduled when a compaction is due."""
        if restored is None or cursor is None:
            return (
                strategy.start(settings, transcript, None, None),
                "none (no turn was accepted: the run starts again)",
                (0, None),
                (),
            )
        if restored.state is not None and switched is None:
            machine = strategy.start(settings, transcript, restored.state, cursor.machine_state)
            return machine, "restored", (0, None), ()
        offered = [tool.name for tool in settings.tools]
        events = checkpointed_events(self.run_dir, restored.projection)
        turns, from_summary = self._history(events, cursor, switched is not None, offered)
        results_as_input: tuple[str, ...] = ()
        if turns and reply is not None and reply.tool_calls:  # the caller answers them next (Session._answers)
            turns[-1] = with_calls_as_text(turns[-1], reply.action_call, reply.action)
            results_as_input = tuple(call.id for call in reply.tool_calls)
        rebuilt = strategy.rebuild(settings, transcript, turns)
        due = rebuilt.compaction_due or (switched is None and cursor.machine_state == SCHEDULED)
        at = SCHEDULED if due and SCHEDULED in strategy.specs[settings.compaction.kind].state_paths() else None
        return (
            strategy.start(settings, transcript, rebuilt.state, at),
            "rebuilt from the projection",
            (rebuilt.dropped_turns, from_summary),
            results_as_input,
        )

    def _check_resumable(self, meta: Mapping[str, Any]) -> None:
        """A run that ended (its run_meta.json, `meta`, says so) has nothing to resume, and a switch
        keeps the game it plays."""
        ended = meta.get("outcome")
        if ended in ENDED:
            raise ResumeError(f"{self.run_dir}: the run ended ({ended}); there is nothing to resume")
        if self.switch and self.profile.environment != run_profile(self.run_dir).environment:
            raise ResumeError(
                f"{self.run_dir}: a switch changes the adapter, model or strategy, not the game; "
                "fix: give the profile the run's environment section"
            )

    def _check_budget_left(self, cursor: Cursor | None) -> None:
        """A switch's profile brings its own agent.max_actions: one the run has already spent would
        end the resumed run at once, as if it had run out, so it is refused naming both numbers."""
        budget, spent = self.profile.agent.max_actions, cursor.counts.accepted_actions if cursor else 0
        if self.switch and spent >= budget:
            raise ResumeError(
                f"{self.run_dir}: the switch's agent.max_actions {budget} is spent: the run has accepted {spent} "
                f"actions; fix: give the profile a max_actions above {spent}"
            )

    def _history(
        self, events: Sequence[Mapping[str, Any]], cursor: Cursor, switched: bool, offered: Collection[str]
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
        try:
            turns = projected_turns(events, offered if switched else None, ImageFiles(self.run_dir).read)
        except MissingImage as lost:
            raise ResumeError(
                f"cannot rebuild the accepted state from the records: an image a past turn showed is lost: {lost}; "
                f"fix: restore {IMAGES}/ from a copy of the run folder"
            ) from None
        counts = cursor.counts
        if cursor.window_turns and not switched and counts.compactions == 0:
            return turns[-cursor.window_turns :], None
        number = counts.summaries
        summarized = number > 0 and number == counts.compactions
        summary = committed_summary(self.run_dir, number) if summarized else None
        if summary is None or not summary.excluded_turns < summary.step <= len(turns):
            return turns, None
        first, *rest = turns[summary.step - 1 - summary.excluded_turns :]  # turn k is step k's
        return [replace(first, inputs=(summary.bridge, *first.inputs)), *rest], number

    def _resumed_store(
        self, system_prompt: str, previous: Mapping[str, Any]
    ) -> tuple[CheckpointStore, RestoredCheckpoint | None]:
        """The store a resume goes on from and its last checkpoint, once the run's records agree with
        it. When they do not, or the store cannot be read whole, the resume is refused, unless it goes
        on from the records (`from_records`): the damaged store is then set aside (checkpoints rule
        10) and a new one holds the checkpoint the records make (resume.position_from_records), whose
        state is rebuilt from the projection. What only the old store held is lost: the continuation,
        a caller's own facts, the exact count of failed attempts."""
        store: CheckpointStore | None = None
        try:
            store = self._open_store(system_prompt)
            restored = store.latest()
            damage = _records_disagree(self.run_dir, restored, previous)
        except DamagedStore as error:
            if not self.from_records:
                raise
            restored, damage = None, [str(error)]
        if not damage:
            assert store is not None
            return store, restored
        if not self.from_records:
            raise _damaged(self.run_dir, damage)
        if store is not None:
            store.close()
        position = position_from_records(self.run_dir)
        aside = set_aside_run_store(self.run_dir)
        after = position.checkpoint - 1 if position is not None else 0
        store = self._open_store(system_prompt, numbered_after=after)
        if position is not None:
            facts = [self._accepted_fact(position).as_fact()]
            store.commit(Checkpoint(position.cursor.to_record(), None, facts, position.projection))
        self._from_damage = {"damage": list(damage), "set_aside": aside}
        return store, store.latest()

    def _accepted_fact(self, position: RecordsPosition) -> AcceptedReply:
        """The accepted reply the records' last checkpoint held, as its fact would have kept it: the
        call that named its action read from its calls as the live turn read it."""
        reply = position.reply
        if reply is None:
            return AcceptedReply(position.cursor.counts.step, None, None, ())
        rules = self._rules
        parsed = scaffold.parse_reply(reply.text, position.calls, rules.actions, rules.tool_names, rules.action_mode)
        return AcceptedReply(reply.step, reply.action, parsed.action_call, position.calls)

    def _open_store(self, system_prompt: str, numbered_after: int | None = None) -> CheckpointStore:
        """The run's checkpoint store: made for a new run, opened for a resumed one, refusing a
        checkpoint of another configuration or system prompt unless the session switches (then it may
        differ in adapter, model, strategy and system prompt: SWITCHABLE)."""
        meta = CheckpointMeta(
            self.descriptor.adapter_id,
            self.descriptor.version,
            self.profile.runtime.strategy,
            self.profile.digest(),
            hashlib.sha256(system_prompt.encode()).hexdigest(),
        )
        store = open_run_store(
            self.run_dir,
            meta,
            accept=SWITCHABLE if self.switch else (),
            create=not self.resume or numbered_after is not None,
            numbered_after=numbered_after or 0,
        )
        self._stack.callback(store.close)
        return store

    def record_fact(self, fact: Mapping[str, Any]) -> None:
        """A durable fact of the session's caller, committed with the next checkpoint."""
        self._facts.append(dict(fact))

    def checkpoint(self, accepted: AcceptedReply, cursor: Cursor, state: RuntimeState) -> None:
        """Commit an accepted turn (durable/checkpoints: one transaction), then its checkpoint event:
        the facts recorded since the last checkpoint (the receipts of the side effects the last turn
        led to), then the accepted reply as a durable fact, the intent its action and calls are
        performed from; the cursor; and the accepted state. The provider's opaque state (encrypted
        reasoning, signatures) is kept only sealed: never in plain text in the run folder, like every
        artifact; without a key a resume rebuilds it from the projection."""
        assert self.store is not None and self.events is not None
        facts, self._facts = [*self._facts, accepted.as_fact()], []
        kept = state if self.store.encrypts_continuation else None
        number = self.store.commit(Checkpoint(cursor.to_record(), kept, facts, self.events.mark()))
        self.events.checkpoint(turn=cursor.counts.turn, step=cursor.counts.step, checkpoint_id=str(number))


def _cursor_of(run_dir: Path, restored: RestoredCheckpoint | None) -> Cursor | None:
    """The restored checkpoint's cursor, typed (None without a checkpoint)."""
    if restored is None:
        return None
    try:
        return Cursor.from_record(restored.cursor)
    except CursorError as error:
        raise ResumeError(f"{run_dir}: {error}") from None


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
