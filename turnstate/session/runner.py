"""The runner: `turnstate run`'s agent loop, a user of the session API (turnstate/session/session.py).

observe -> the session's turn -> an action parsed from it (or a tool round)? accept it, else reject
it (the session asks again from the unchanged accepted state) -> step the accepted action and answer
the reply's tool calls, in order: an action call with the frame it led to, a read-only call with the
environment's answer (an error result when it refuses the call). The session performs what the
machine decides and writes the records; the runner plays the game and says how the run ended.

A GAME_OVER frame arrives without a model call: the runner resets the game itself, and the reset
frame prompts the next call, with the GAME_OVER frame replayed first (buffered in the accepted state,
or, when the action was a tool call, as that call's result).

Durable: every side effect (an action, a reset) is performed once, under the key of the accepted step
it comes from, on the game journaled in the run folder (turnstate/durable/side_effects.py), and its receipt is
recorded for the next checkpoint. `resume` rebuilds the game from its journal and carries out the
reply the last checkpoint accepted (settling what the kill left half done) before it plays on.
"""

from __future__ import annotations

import fcntl
import gc
import math
import os
import shutil
import stat
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext, suppress
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from turnstate.adapters.contract import Endpoint, Input, ProviderAdapter, ToolCall, ToolResult, ToolSpec, UserInput
from turnstate.adapters.registry import descriptor_for
from turnstate.durable.cursor import AcceptedReply
from turnstate.durable.layout import ENVIRONMENT_RECORDINGS, JOURNAL, RUN_ID, RUN_META, recorded_steps
from turnstate.durable.redaction import Redactor
from turnstate.durable.resume import ResumeError
from turnstate.durable.side_effects import REFUSED, JournaledEnvironment, action_key, reset_key
from turnstate.environments import RESET, Environment, Frame, GameState, make_environment
from turnstate.environments.protocol import RecordingEnvironment, ToolEnvironment, ToolRefused
from turnstate.session.interrupts import raise_pending
from turnstate.session.profile import Profile
from turnstate.session.run_meta import RunResult, signals_deferred
from turnstate.session.session import FailedClosed, Point, Session
from turnstate.strategies.offload import READ_TOOL_RESULT

__all__ = ["RunResult", "Runner", "StepProgress", "signals_deferred"]


@dataclass
class StepProgress:
    step: int
    action: str
    level: int
    levels: int
    failed_attempts: int


class Runner:
    def __init__(
        self,
        profile: Profile,
        out_dir: Path,
        adapter_factory: Callable[[Endpoint], ProviderAdapter] | None = None,
        on_step: Callable[[StepProgress], None] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        on_point: Callable[[Point], None] | None = None,
    ) -> None:
        """`on_point` is called at each named point of a turn (session.POINTS), where the kill
        tests stop a run."""
        self.profile = profile
        self.on_point = on_point
        self.out_dir = Path(out_dir)
        self.descriptor = descriptor_for(profile.runtime.adapter_id)
        self.adapter_factory = adapter_factory
        self.on_step = on_step
        self.sleep = sleep  # how the session performs the machine's waits; tests pass a fake clock's
        # What a caller that shows anything of the run (an error, a traceback) passes it through: the
        # run's redaction, once its endpoint is open (nothing secret is known before).
        self.redactor = Redactor()
        self.run_dir: Path | None = None  # the run's folder, once it is made

    def run(self) -> RunResult:
        """Play a new run from the profile, its folder made under `out_dir`'s opening lock."""
        session = Session(self.profile, out_dir=self.out_dir, **self._session_options())
        return self._run(session, opening_lock(self.out_dir))

    def resume(self, run_dir: Path, *, switch: bool = False, from_records: bool = False) -> RunResult:
        """Go on with the run in `run_dir` from its last checkpoint (the runner's profile is the run's
        own, or with `switch` another adapter, model or strategy for the same game; with
        `from_records`, from the run's records when its checkpoint store was damaged): the game is
        rebuilt from its journal, the last accepted action is performed unless it was, and play goes
        on, writing on in the same folder."""
        self.run_dir = Path(run_dir)  # the run is there before the session opens it
        options = self._session_options()
        refusal = getattr(self.environment, "resume_refusal", None)  # an environment whose plays cannot be rebuilt
        if refusal:
            raise ResumeError(f"{run_dir}: {refusal}; fix: start the run again")
        session = Session(self.profile, resume=run_dir, switch=switch, from_records=from_records, **options)
        return self._run(session)

    def _session_options(self) -> dict[str, Any]:
        profile = self.profile
        self.environment = make_environment(
            profile.environment.name, profile.environment.seed, profile.environment.options
        )
        actions: tuple[str | ToolSpec, ...] = self.environment.actions
        tools: tuple[ToolSpec, ...] = ()
        if isinstance(self.environment, ToolEnvironment):
            actions, tools = self.environment.action_tools, self.environment.tools
        return {
            "actions": actions,
            "tools": tools,
            "adapter_factory": self.adapter_factory,
            "sleep": self.sleep,
            "on_point": self.on_point,
        }

    def _run(self, session: Session, opening: AbstractContextManager[None] | None = None) -> RunResult:
        with ExitStack() as stack:
            with opening or nullcontext():  # a new run's: held from its folder's making to its first run_meta.json
                stack.enter_context(session)
            self.redactor, self.run_dir = session.redactor, session.run_dir
            with self._world(session) as (world, frame):
                outcome, failure = self._play(session, world, frame)
            scorecard = getattr(self.environment, "scorecard", None)  # a game's own score (arc_agi3's toolkit)
            if callable(scorecard):
                session.record_environment_scorecard(scorecard())
            return session.finish(outcome, failure, levels_won=session.levels_won)

    @contextmanager
    def _world(self, session: Session) -> Iterator[tuple[JournaledEnvironment, Frame]]:
        """The game, its actions journaled in the run folder (turnstate/durable/side_effects.py): reset for a
        new run, rebuilt from its journal for a resumed one; and the frame it is at."""
        assert session.run_dir is not None  # a runner's session always writes its run folder
        journal = session.run_dir / JOURNAL
        if isinstance(self.environment, RecordingEnvironment):
            self.environment.record_into(session.run_dir / ENVIRONMENT_RECORDINGS)
        if session.resumed is not None:
            applied = [fact["key"] for fact in session.facts if fact.get("kind") == "receipt" and fact["applied"]]
            world, frame = JournaledEnvironment.reopen(self.environment, journal, applied)
        else:
            frame = self.environment.reset()
            world = JournaledEnvironment(self.environment, journal)
        try:
            yield world, frame
        finally:
            world.close()

    def _play(self, session: Session, world: JournaledEnvironment, frame: Frame) -> tuple[str, str | None]:
        """Play until a win, the action budget, a level's budget or a failed-closed turn; a resumed run
        first carries out the reply its last checkpoint accepted (the kill may have come before its action)."""
        self.level_budget = LevelBudget.of(self.environment, self.profile.agent.max_actions_baseline_multiplier)
        self.level_budget.restore(frame.level, session.facts)
        observation, results = frame.input, list[ToolResult]()
        if session.resumed_reply is not None:
            carried = self._carry_out(session, world, session.resumed_reply)
            if isinstance(carried, Ending):
                return carried.outcome, None
            observation, results = carried
        while session.accepted_actions < self.profile.agent.max_actions:
            raise_pending()
            try:
                accepted = _accepted_turn(session, observation, results)
            except FailedClosed as failed:
                return "failed_closed", failed.reason
            carried = self._carry_out(session, world, accepted)
            if isinstance(carried, Ending):
                return carried.outcome, None
            observation, results = carried
        return "max_actions", None

    def _carry_out(
        self, session: Session, world: JournaledEnvironment, accepted: AcceptedReply
    ) -> tuple[Input, list[ToolResult]] | Ending:
        """Perform what an accepted reply asks, each side effect exactly once (under its step's key),
        and answer its calls, in order: the next observation and results, or how the run ended."""
        observation: Input = ""
        results: list[ToolResult] = []
        frame: Frame | None = None
        for call in accepted.tool_calls:  # in the reply's order; the action's is stepped in its place
            started = time.time_ns()
            if call.name == READ_TOOL_RESULT:
                result = session.read_tool_result(call)
            elif call != accepted.action_call:
                result = _answered(world.environment, call)
            else:
                frame, refusal = _stepped(session, world, accepted)
                images = () if refusal is not None else frame.images
                result = ToolResult(
                    call.id, call.name, refusal or frame.text, is_error=refusal is not None, images=images
                )
            results.append(replace(result, ran=(started, time.time_ns())))
        if accepted.action is None:
            return observation, results  # a tool round: the model reads the results and is asked again
        if accepted.action_call is None:
            frame, refusal = _stepped(session, world, accepted)
            observation = frame.input if refusal is None else UserInput(f"{refusal}\n\n{frame.text}", frame.images)
        assert frame is not None
        if self.on_step:
            shown = session.redactor.text(accepted.action)
            progress = StepProgress(session.accepted_actions, shown, frame.level, frame.levels, session.failed_attempts)
            self.on_step(progress)
        if frame.state is GameState.WIN:
            session.levels_won = frame.level
            return Ending("win")
        session.levels_won = frame.level - 1
        if self.level_budget.spent(session, frame):
            return Ending("level_budget")
        if frame.state is GameState.GAME_OVER:
            if accepted.action_call is None:  # else the GAME_OVER frame is the action call's result
                session.buffer(frame.input)
            frame = _performed(session, world, reset_key(accepted.step), RESET)
            observation = frame.input
        return observation, results


@dataclass(frozen=True)
class Ending:
    outcome: str  # win or level_budget (the action budget and a failed-closed turn end the loop itself)


@dataclass
class LevelBudget:
    """The per-level action budget (agent.max_actions_baseline_multiplier): a level gets
    ceil(multiplier x its human baseline) accepted actions, RESETs included, counted across its
    restarts; one that spends them unfinished ends the run, as the ARC-AGI-3 benchmarking harness
    ends it. The count is a fact of each checkpoint, so a resumed run goes on with what its level spent."""

    budgets: tuple[int, ...]  # per level, from 1; empty: no budget
    level: int = 1
    spent_here: int = 0

    @classmethod
    def of(cls, environment: object, multiplier: float | None) -> LevelBudget:
        baselines = getattr(environment, "level_baselines", None)
        if multiplier is None or not callable(baselines):  # the profile's validation refused the second
            return cls(())
        return cls(tuple(math.ceil(multiplier * baseline) for baseline in baselines()))

    def restore(self, level: int, facts: Sequence[Mapping[str, Any]]) -> None:
        """Start at `level`, with what the last checkpoint says that level spent."""
        counted = [fact for fact in facts if fact.get("kind") == LEVEL_ACTIONS]
        self.level, self.spent_here = level, 0
        if counted and counted[-1]["level"] == level:
            self.spent_here = counted[-1]["actions"]

    def spent(self, session: Session, frame: Frame) -> bool:
        """Count the accepted action that led to `frame`; whether its level has spent its budget."""
        if not self.budgets:
            return False
        if frame.level != self.level:  # a level won: the next one starts its own count
            self.level, self.spent_here = frame.level, 0
        else:
            self.spent_here += 1
        session.record_fact({"kind": LEVEL_ACTIONS, "level": self.level, "actions": self.spent_here})
        budget = self.budgets[self.level - 1] if self.level <= len(self.budgets) else None
        return budget is not None and self.spent_here >= budget


LEVEL_ACTIONS = "level_actions"  # the checkpoint fact of what the current level has spent


def _accepted_turn(session: Session, observation: Input, results: list[ToolResult]) -> AcceptedReply:
    """One turn: the session's replies, rejected until one acts or is a tool round, which is accepted."""
    turn = session.observe(observation, results)
    while turn.problem is not None:
        turn = session.reject(turn.problem)
    return session.accept(turn.action)


def _stepped(session: Session, world: JournaledEnvironment, accepted: AcceptedReply) -> tuple[Frame, str | None]:
    """The frame the accepted action led to, or the unchanged frame and why the environment refused it
    (the action was accepted from the model, so the refusal is what it reads next)."""
    assert accepted.action is not None
    key = action_key(accepted.step)
    try:
        return _performed(session, world, key, accepted.action, accepted.reasoning), None
    except ValueError as refused:
        session.record_fact({"kind": "receipt", "key": key, "applied": False})
        return world.environment.observe(), f"{REFUSED}: {refused}"


def _performed(
    session: Session, world: JournaledEnvironment, key: str, action: str, reasoning: str | None = None
) -> Frame:
    """`action` performed once under `key`, its receipt recorded for the next checkpoint."""
    frame, settled = world.perform(key, action, reasoning)
    if not settled:
        session.point("after_side_effect")
    session.record_fact({"kind": "receipt", "key": key, "applied": True, "settled": settled})
    return frame


def _answered(environment: Environment, call: ToolCall) -> ToolResult:
    """A read-only tool's answer, or the environment's refusal as an error result."""
    if not isinstance(environment, ToolEnvironment):
        return ToolResult(call.id, call.name, f"there is no tool {call.name!r}", is_error=True)
    try:
        return ToolResult(call.id, call.name, environment.call_tool(call.name, call.arguments))
    except ToolRefused as refused:
        return ToolResult(call.id, call.name, str(refused), is_error=True)


ORPHAN_AGE_SECONDS = 60.0
"""How long a run folder must have gone unchanged, without run_meta.json, before a run takes it for an
orphan: a session writes run_meta.json within milliseconds of making the folder. The opening lock
already covers runners; the age covers a Session opened by library code, which takes no lock."""


@contextmanager
def opening_lock(parent: Path) -> Iterator[None]:
    """Held, shared, from the making of a run's folder in `parent` to its first run_meta.json: a kill
    in that window leaves an orphan, which a rerun would leave beside its own folder. Before it, taken
    exclusively when no other run is opening here, to remove the orphans (a folder without
    run_meta.json is then no runner's opening in progress). An flock on the folder itself: it adds no
    file to a folder given with --out, and the kernel drops it when its process dies, SIGKILL included.
    (The folder is not made under another name and renamed into place once run_meta.json is in it:
    the session goes on writing into it by path, its step records and checkpoint journal included.)"""
    parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # another run is opening here, or the file system locks no folder (NFS): no removal
            pass
        else:
            remove_orphans(parent)
        with suppress(OSError):  # where no run can take the lock exclusively, none removes anything
            fcntl.flock(descriptor, fcntl.LOCK_SH)  # waits only for another run's removal of orphans
        yield
    finally:
        os.close(descriptor)


def remove_orphans(parent: Path, now: float | None = None, age: float = ORPHAN_AGE_SECONDS) -> list[Path]:
    """Remove the run folders in `parent` that a kill (or a failed opening) left before their first
    run_meta.json, and return them; for the caller holding the opening lock exclusively, or the one
    player of a folder (a sweep's planned run, which passes `age` 0). An orphan is a folder, not a
    link, named as a run id, holding neither run_meta.json nor a step record (so no accepted turn),
    unchanged for `age` seconds: a user's own folder beside the runs is never one, nor is a damaged
    run that lost its run_meta.json."""
    cutoff = (time.time() if now is None else now) - age
    removed = []
    for folder in parent.iterdir():
        try:
            info = folder.lstat()
            orphan = (
                stat.S_ISDIR(info.st_mode)
                and info.st_mtime <= cutoff
                and RUN_ID.fullmatch(folder.name) is not None
                and not (folder / RUN_META).exists()
                and not recorded_steps(folder)
            )
            if orphan:
                shutil.rmtree(folder)
                removed.append(folder)
        except OSError:  # unreadable, or gone: not this run's to remove
            continue
    return removed


def freeze_startup_objects() -> None:
    """Leave what exists once the profile is loaded (modules, the adapter's SDK) out of garbage
    collection: a long run's collections otherwise walk them again and again (in a wide 1000-turn
    run, 2 ms of the local provider's 5 ms per call). For a process that runs one agent, as this
    command is; a library caller decides for its own process."""
    gc.collect()
    gc.freeze()
