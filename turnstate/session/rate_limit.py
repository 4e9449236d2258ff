"""The rate limit a profile's runs share (`client.rate_limit`).

Every run of this user on this machine that sends to the same URL and model takes its requests and
tokens from the same buckets (adapters/rate_buckets.py): a file in the state folder
(`rate_limits/`, one per URL and model), read and written under an exclusive fcntl lock, so a sweep's
processes and a local Ray's workers share it as surely as one process's calls do. A Ray cluster of
several machines shares it only where their state folders are one shared folder.

Before a call the run takes one request and what the call may use (the adapter's estimate of its
input and the request's output cap), waiting as long as the buckets say; after it, a reply's usage
gives back what it did not use. A reply that asks to wait (Retry-After) holds every run sharing the
limit as long, capped by `agent.backoff.max_seconds`, the longest one wait the profile allows.

The buckets hold half a second of the rate, where a provider holds about a second, so calls the
network delays unevenly still arrive within the provider's limit.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from turnstate.adapters.contract import (
    Endpoint,
    ModelRequest,
    ModelResponse,
    ProviderAdapter,
    ProviderError,
    RequestSettings,
)
from turnstate.adapters.rate_buckets import Buckets, Rate
from turnstate.durable.layout import RATE_LIMIT_WAIT
from turnstate.durable.state_home import state_home
from turnstate.session.endpoint import RunSetupError
from turnstate.session.profile import Profile

LIMITS_FOLDER = "rate_limits"
BURST_SECONDS = 0.5


@dataclass(frozen=True)
class Paced:
    """What a call took from the limit before it went: the tokens it reserved and the seconds it waited."""

    reserved: int
    waited: float


NOT_PACED = Paced(0, 0.0)  # a call without a shared limit


class SharedLimit:
    """The buckets of one URL and model in `folder`, shared through a locked file (module docstring)."""

    def __init__(
        self,
        key: str,
        rate: Rate,
        folder: Path,
        *,
        max_hold_seconds: float,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.rate, self.max_hold_seconds = rate, max_hold_seconds
        self.path = folder / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.json"
        self._clock, self._sleep = clock, sleep

    def acquire(self, tokens: int, waiting: Callable[[float], None] = lambda until: None) -> float:
        """Wait until a call of `tokens` may go and take its share; the seconds it waited. Before
        each wait, `waiting` is told until when (Unix seconds)."""
        started = self._clock()
        while True:
            with self._buckets() as buckets:
                wait = buckets.try_take(self.rate, tokens)
            if wait <= 0:
                return self._clock() - started
            waiting(self._clock() + wait)
            self._sleep(wait)

    def give_back(self, tokens: int) -> None:
        """Tokens a call reserved and did not use (negative: the ones it used beyond its reservation)."""
        with self._buckets() as buckets:
            buckets.give_back(self.rate, tokens)

    def hold(self, seconds: float) -> None:
        """No call of anyone sharing the limit for `seconds` (a provider's Retry-After), capped."""
        with self._buckets() as buckets:
            buckets.hold(buckets.at + min(seconds, self.max_hold_seconds))

    @contextmanager
    def _buckets(self) -> Iterator[Buckets]:
        """The buckets brought to now, under the file's lock; written back whole as the block ends."""
        descriptor = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX)
            text = os.pread(descriptor, 4096, 0)
            now = self._clock()
            try:
                buckets = Buckets.from_dict(json.loads(text), self.rate, now)
            except ValueError:  # new, or torn by a kill mid-write
                buckets = Buckets.full(self.rate, now)
            buckets.refill(self.rate, now)
            yield buckets
            data = json.dumps(buckets.to_dict()).encode()
            os.ftruncate(descriptor, 0)
            os.pwrite(descriptor, data, 0)
        finally:
            os.close(descriptor)  # and with it the lock


class Pacing:
    """A session's calls, kept within its profile's shared limit: `before` a call, `after` it. While a
    call waits, `marker` (the run folder's RATE_LIMIT_WAIT, when the run has a folder) says until when,
    for a sweep's live view; a marker a killed run left says a time gone by."""

    def __init__(
        self,
        limit: SharedLimit,
        settings: RequestSettings,
        estimate: Callable[[ModelRequest], int],
        marker: Path | None = None,
    ) -> None:
        self.limit, self._settings, self._estimate, self._marker = limit, settings, estimate, marker
        self._marked = False  # whether this call wrote the marker, which it then removes

    def before(self, request: ModelRequest) -> Paced:
        reserved = self._estimate(request) + request.output_cap(self._settings)
        waited = self.limit.acquire(reserved, self._waiting)
        if self._marked and self._marker is not None:
            self._marked = False
            with contextlib.suppress(OSError):
                self._marker.unlink(missing_ok=True)
        return Paced(reserved, waited)

    def _waiting(self, until: float) -> None:
        if self._marker is not None:
            with contextlib.suppress(OSError):  # a view's marker never fails a run (a full disk)
                self._marker.write_text(f"{until:.3f}\n")
                self._marked = True

    def after(self, paced: Paced, outcome: ModelResponse | ProviderError) -> None:
        """A reply gives back what it did not use; a failure keeps its reservation (the provider may
        have counted it), and one that asked to wait holds everyone sharing the limit."""
        if isinstance(outcome, ModelResponse):
            self.limit.give_back(paced.reserved - outcome.usage.input_tokens - outcome.usage.output_tokens)
        elif outcome.retry_after_seconds:
            self.limit.hold(outcome.retry_after_seconds)


def pacing(
    profile: Profile,
    endpoint: Endpoint,
    adapter: ProviderAdapter,
    run_dir: Path | None = None,
    folder: Path | None = None,
) -> Pacing | None:
    """The profile's calls to `endpoint` paced by its shared limit (None without `client.rate_limit`),
    its folder made and checked: one that cannot hold it is a RunSetupError before the run starts. A
    run in `run_dir` marks its waits there (Pacing)."""
    config = profile.client.rate_limit
    if config is None:
        return None
    folder = folder or state_home() / LIMITS_FOLDER
    rate = Rate(config.requests_per_minute, config.tokens_per_minute, BURST_SECONDS)
    key = f"{endpoint.base_url}|{profile.request.model}"
    limit = SharedLimit(key, rate, folder, max_hold_seconds=profile.agent.backoff.max_seconds)
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.close(os.open(limit.path, os.O_RDWR | os.O_CREAT, 0o600))  # the file every call locks
    except OSError as error:
        reason = error.strerror or errno.errorcode.get(error.errno or 0, "")
        raise RunSetupError(
            f"client.rate_limit: cannot keep the shared limit in {folder} ({reason}); "
            "fix: make the state folder writable, or set XDG_STATE_HOME to a folder you can write to"
        ) from None
    return Pacing(
        limit,
        profile.request_settings(),
        lambda request: adapter.transcript.estimate_tokens(request.items, request.system),
        run_dir / RATE_LIMIT_WAIT if run_dir is not None else None,
    )
