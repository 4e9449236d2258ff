"""run_meta.json, the run's own account: what it is (its profile, adapter and endpoint) and how it
stands (its totals and outcome), and the RunResult those totals are made from.

- A session that writes artifacts writes it as the run opens, saying "running", so a run killed at
  any point names its profile; and again whatever ends it: `finish`, the end of its `with` block, an
  interrupt or a crash (`Ending.of_error` names the last two).
- Each write is whole (the writer's reserved, atomic write) and happens with the signals a kill can
  be caught by held (`signals_deferred`), so it never counts a step the run did not record, nor the
  reverse.
- The profile is kept as its settings, which name the variable that holds the key, never the key.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from turnstate.adapters.contract import Endpoint, Usage
from turnstate.adapters.registry import AdapterDescriptor
from turnstate.durable.artifacts import run_totals
from turnstate.durable.checkpoints import CheckpointError
from turnstate.durable.events import EventLogError
from turnstate.durable.layout import RUN_META
from turnstate.durable.side_effects import JournalError
from turnstate.session.durable_run import ENDED
from turnstate.session.performer import Performer
from turnstate.session.profile import Profile
from turnstate.strategies.state import RuntimeState


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
    rate_limit_seconds: float  # waited on the shared rate limit (client.rate_limit) before calls
    # The last accepted state, in memory only: it may hold opaque provider state.
    accepted_state: RuntimeState
    # A run that failed closed on a refusal: the server's words (made safe, redacted), for the
    # console only; run_meta.json keeps the classified failure, never a provider's message.
    server_message: str | None = None


@dataclass(frozen=True)
class Ending:
    """How a session ended: its outcome, why (a failure, or what ended it), and the levels it won."""

    outcome: str
    failure: str | None = None
    levels_won: int = 0

    @classmethod
    def of_error(cls, error: BaseException, levels_won: int) -> Ending:
        """A session an exception ended: interrupted (Ctrl-C, SIGTERM) or crashed, naming the exception's
        class, and for a file that could not be written (a full disk, a read-only folder) why and which."""
        outcome = "interrupted" if isinstance(error, KeyboardInterrupt) else "crashed"
        if isinstance(error, OSError) and error.strerror:
            what = f"{type(error).__name__}: {error.strerror}" + (f" ({error.filename})" if error.filename else "")
        elif isinstance(error, (CheckpointError, EventLogError, JournalError)):  # their messages name the file
            what = f"{type(error).__name__}: {error}"
        else:
            what = type(error).__name__
        return cls(outcome, what, levels_won)


def run_fields(profile: Profile, descriptor: AdapterDescriptor, run_id: str, endpoint: Endpoint) -> dict[str, Any]:
    """What run_meta.json says the run is: its profile, adapter and endpoint."""
    return {
        "run_id": run_id,
        "adapter_id": descriptor.adapter_id,
        "strategy": profile.runtime.strategy,
        "config_id": profile.id,
        # The profile never holds a key, only the name of the variable that does.
        "settings": profile.model_dump(mode="json"),
        # The validated compaction policy, its defaults filled in, where the seed names it.
        "runtime": {"compaction": profile.compaction_policy()},
        "endpoint": "local" if endpoint.is_local else endpoint.base_url,
        "implementation_path": descriptor.implementation_path,
        "adapter_version": descriptor.version,
        "review_status": descriptor.review_status,
        "harness_commit": os.environ.get("ARC_HARNESS_COMMIT_SHA") or None,
    } | ({"overrides": list(profile.overrides)} if profile.overrides else {})


class RunMeta:
    """A session's account of its run (see the module docstring): how it ended, the RunResult, and
    run_meta.json when the session writes artifacts (`fields`: what the run is, and what it records
    beside, its resumes and a game's scorecard). It reads the figures where the performer counts them."""

    def __init__(self, performer: Performer, run_id: str, run_dir: Path | None, fields: dict[str, Any]) -> None:
        self.performer, self.run_id, self.run_dir, self.fields = performer, run_id, run_dir, fields
        self.ending: Ending | None = None  # once `finish` or `end` said
        self.started = time.perf_counter()

    def record(self, key: str, value: Any) -> None:
        """A field the run adds (`resumes`, `environment_scorecard`), written with the next write."""
        self.fields[key] = value

    def result(self) -> RunResult:
        """The run as it stands, or as it ended."""
        performer, ending = self.performer, self.ending or Ending("finished")
        counts, ledger, redact = performer.counts, performer.ledger, performer.redactor.text
        server_message = performer.server_message if ending.outcome == "failed_closed" else None
        return RunResult(
            run_id=self.run_id,
            artifacts=self.run_dir,
            outcome=ending.outcome,
            failure=None if ending.failure is None else redact(ending.failure),  # as run_meta.json has it
            turns=counts.turn,
            accepted_actions=counts.accepted_actions,
            failed_attempts=counts.failed_attempts,
            levels_won=ending.levels_won,
            compactions=counts.compactions,
            usage=ledger.total,
            unattributed_usage=ledger.unattributed,
            cost=ledger.cost(ledger.total),
            wall_seconds=time.perf_counter() - self.started,
            provider_seconds=performer.provider_seconds,
            rate_limit_seconds=performer.rate_limit_seconds,
            accepted_state=performer.machine.model.accepted,
            server_message=redact(server_message) if server_message else None,
        )

    def write(self, result: RunResult | None = None, *, outcome: str | None = None) -> None:
        """run_meta.json, when the session writes artifacts: the fields and the totals of `result`
        (default: the run as it stands), with its outcome (or `outcome`: "running"), whole."""
        writer = self.performer.files.writer
        if writer is None:
            return
        result = result or self.result()
        if outcome is not None:
            result = replace(result, outcome=outcome)
        totals = run_totals(result, provider_calls=self.performer.ledger.calls, failed_turn=self.performer.failed_turn)
        writer.write_json(RUN_META, self.fields | totals, reserve=True)

    def finish(self, ending: Ending) -> RunResult:
        """The run ended as `ending` says (a runner's win, max_actions or failed_closed): its result,
        and run_meta.json, together or not at all."""
        with signals_deferred():
            self.ending = ending
            result = self.result()
            self.write(result)
        return result

    def end(self, error: BaseException | None) -> None:
        """The session is left (its `with` block ended, by `error` if any) without `finish`: it ended
        failed closed or finished as its last turn left it, or interrupted or crashed by `error`; for
        run_meta.json (a session without artifacts ends only when its caller says, by `finish`)."""
        if self.ending is not None or self.performer.files.writer is None:
            return
        levels_won, performer = self.performer.counts.levels_won, self.performer
        if error is not None:
            self.finish(Ending.of_error(error, levels_won))
        else:
            self.finish(Ending("failed_closed" if performer.failed_turn else "finished", performer.failure, levels_won))

    @property
    def ended_for_good(self) -> bool:
        """The run ended as nothing can resume it from (a win, or a budget spent)."""
        return self.ending is not None and self.ending.outcome in ENDED


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
