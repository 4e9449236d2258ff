"""The runner: `turnstate run`'s agent loop, a user of the session API (harness/session.py).

observe -> the session's turn -> an action parsed from it? accept it, else reject it (the session
asks again from the unchanged accepted state) -> submit the accepted action to the environment. The
session performs what the machine decides and writes the records; the runner plays the game and
says how the run ended.

A GAME_OVER frame arrives without a model call: the runner buffers it in the accepted state, resets
the game itself, and the reset frame prompts the next call, with the buffered frame replayed first.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from turnstate.adapters.contract import Endpoint, ProviderAdapter
from turnstate.adapters.registry import descriptor_for
from turnstate.harness.artifacts import Redactor
from turnstate.harness.environments import RESET, Environment, GameState, make_environment
from turnstate.harness.profile import Profile
from turnstate.harness.session import FailedClosed, RunResult, Session, signals_deferred

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
    ) -> None:
        self.profile = profile
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
        profile = self.profile
        environment = make_environment(profile.environment.name, profile.environment.seed, profile.environment.options)
        session = Session(
            profile,
            actions=environment.actions,
            out_dir=self.out_dir,
            adapter_factory=self.adapter_factory,
            sleep=self.sleep,
        )
        with session:
            self.redactor, self.run_dir = session.redactor, session.run_dir
            outcome, failure = self._play(session, environment)
            return session.finish(outcome, failure, levels_won=session.levels_won)

    def _play(self, session: Session, environment: Environment) -> tuple[str, str | None]:
        """Play until a win, the action budget or a failed-closed turn."""
        frame = environment.reset()
        while session.accepted_actions < self.profile.agent.max_actions:
            try:
                action = _accepted_action(session, frame.text)
            except FailedClosed as failed:
                return "failed_closed", failed.reason
            frame = environment.step(action)
            if self.on_step:
                shown = session.redactor.text(action)
                progress = StepProgress(
                    session.accepted_actions, shown, frame.level, frame.levels, session.failed_attempts
                )
                self.on_step(progress)
            if frame.state is GameState.WIN:
                session.levels_won = frame.level
                return "win", None
            session.levels_won = frame.level - 1
            if frame.state is GameState.GAME_OVER:
                session.buffer(frame.text)
                frame = environment.step(RESET)
        return "max_actions", None


def _accepted_action(session: Session, observation: str) -> str:
    """One turn: the session's replies, rejected until one names a valid action, which is accepted."""
    turn = session.observe(observation)
    while turn.action is None:
        turn = session.reject(turn.problem)
    session.accept(turn.action)
    return turn.action
