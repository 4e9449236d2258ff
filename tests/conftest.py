"""Fixtures every layer's tests share."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest


class FakeClock:
    """Monotonic seconds that pass only when someone sleeps: the runner's waits and the local
    provider's rate-limit window, driven without a real second going by."""

    def __init__(self) -> None:
        self.seconds = 1000.0
        self.slept: list[float] = []

    def now(self) -> float:
        return self.seconds

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.seconds += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A throwaway PostgreSQL server for the session (tests/postgres_server.py); the test skips, saying
    why, where none can start."""
    from tests.postgres_server import throwaway_server, unavailable

    problem = unavailable()
    if problem is not None:
        pytest.skip(f"no PostgreSQL server: {problem}")
    with throwaway_server() as server:
        yield server.url


@pytest.fixture(autouse=True)
def checkpoints_setting_kept() -> Iterator[None]:
    """TURNSTATE_CHECKPOINTS as it was before the test: `--checkpoints` in an in-process command, and a
    sweep's run played here, set it for the process, which would move later tests' runs to a database."""
    before = os.environ.get("TURNSTATE_CHECKPOINTS")
    yield
    if before is None:
        os.environ.pop("TURNSTATE_CHECKPOINTS", None)
    else:
        os.environ["TURNSTATE_CHECKPOINTS"] = before


@pytest.fixture(autouse=True, scope="session")
def local_provider_services(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The embedded provider's services (turnstate/session/endpoint.py local_service_dir) in the session's
    temporary folder, never the user's state folder; subprocesses inherit it."""
    os.environ["XDG_STATE_HOME"] = str(tmp_path_factory.mktemp("state_home"))


SERVED_KEY_VARIABLE = "TURNSTATE_SERVED_TEST_KEY"


@pytest.fixture(autouse=True, scope="session")
def served_provider_key() -> None:
    """A key for profiles that reach a local provider a test serves (any key but sk-invalid is
    taken), set before any sweep starts its forkserver, whose environment every later run inherits."""
    os.environ[SERVED_KEY_VARIABLE] = "sk-local"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test parametrized with a shipped profile that names arc_agi3 is skipped, saying why, on an
    install without the ARC-AGI-3 toolkit (tests/arc_extra.py)."""
    from .arc_extra import REASON, needs_toolkit

    for item in items:
        callspec = getattr(item, "callspec", None)
        values = callspec.params.values() if callspec is not None else ()
        named = [value for value in values if isinstance(value, (str, Path)) and needs_toolkit(value)]
        if named:
            item.add_marker(pytest.mark.skip(reason=f"{Path(named[0]).stem} {REASON}"))
