"""The runner: `turnstate run`'s agent loop, a user of the session API (harness/session.py).

observe -> the session's turn -> an action parsed from it (or a tool round)? accept it, else reject
it (the session asks again from the unchanged accepted state) -> step the accepted action and answer
the reply's tool calls, in order: an action call with the frame it led to, a read-only call with the
environment's answer (an error result when it refuses the call). The session performs what the
machine decides and writes the records; the runner plays the game and says how the run ended.

A GAME_OVER frame arrives without a model call: the runner resets the game itself, and the reset
frame prompts the next call, with the GAME_OVER frame replayed first (buffered in the accepted state,
or, when the action was a tool call, as that call's result).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from turnstate.adapters.contract import Endpoint, ProviderAdapter, ToolCall, ToolResult, ToolSpec
from turnstate.adapters.registry import descriptor_for
from turnstate.harness.artifacts import Redactor
from turnstate.harness.environments import RESET, Environment, Frame, GameState, make_environment
from turnstate.harness.environments.protocol import ToolEnvironment, ToolRefused
from turnstate.harness.profile import Profile
from turnstate.harness.session import FailedClosed, RunResult, Session, Turn, signals_deferred
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
        actions: tuple[str | ToolSpec, ...] = environment.actions
        tools: tuple[ToolSpec, ...] = ()
        if isinstance(environment, ToolEnvironment):
            actions, tools = environment.action_tools, environment.tools
        session = Session(
            profile,
            actions=actions,
            tools=tools,
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
        observation, results = frame.text, list[ToolResult]()
        while session.accepted_actions < self.profile.agent.max_actions:
            try:
                turn = _accepted_turn(session, observation, results)
            except FailedClosed as failed:
                return "failed_closed", failed.reason
            observation, results = "", list[ToolResult]()
            for call in turn.tool_calls:  # in the reply's order; the action's is stepped in its place
                if call.name == READ_TOOL_RESULT:
                    results.append(session.read_tool_result(call))
                    continue
                if call != turn.action_call:
                    results.append(_answered(environment, call))
                    continue
                frame, refusal = _stepped(environment, turn)
                results.append(ToolResult(call.id, call.name, refusal or frame.text, is_error=refusal is not None))
            if turn.action is None:
                continue  # a tool round: the model reads the results and is asked again
            if turn.action_call is None:
                frame, refusal = _stepped(environment, turn)
                observation = frame.text if refusal is None else f"{refusal}\n\n{frame.text}"
            if self.on_step:
                shown = session.redactor.text(turn.action)
                progress = StepProgress(
                    session.accepted_actions, shown, frame.level, frame.levels, session.failed_attempts
                )
                self.on_step(progress)
            if frame.state is GameState.WIN:
                session.levels_won = frame.level
                return "win", None
            session.levels_won = frame.level - 1
            if frame.state is GameState.GAME_OVER:
                if turn.action_call is None:  # else the GAME_OVER frame is the action call's result
                    session.buffer(frame.text)
                frame = environment.step(RESET)
                observation = frame.text
        return "max_actions", None


def _accepted_turn(session: Session, observation: str, results: list[ToolResult]) -> Turn:
    """One turn: the session's replies, rejected until one acts or is a tool round, which is accepted."""
    turn = session.observe(observation, results)
    while turn.problem is not None:
        turn = session.reject(turn.problem)
    session.accept(turn.action)
    return turn


def _stepped(environment: Environment, turn: Turn) -> tuple[Frame, str | None]:
    """The frame the turn's action led to, or the unchanged frame and why the environment refused it
    (the action was accepted from the model, so the refusal is what it reads next)."""
    assert turn.action is not None
    try:
        return environment.step(turn.action), None
    except ValueError as refused:
        return environment.observe(), f"The environment refused the action: {refused}"


def _answered(environment: Environment, call: ToolCall) -> ToolResult:
    """A read-only tool's answer, or the environment's refusal as an error result."""
    if not isinstance(environment, ToolEnvironment):
        return ToolResult(call.id, call.name, f"there is no tool {call.name!r}", is_error=True)
    try:
        return ToolResult(call.id, call.name, environment.call_tool(call.name, call.arguments))
    except ToolRefused as refused:
        return ToolResult(call.id, call.name, str(refused), is_error=True)
