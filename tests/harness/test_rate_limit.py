"""The rate limit a sweep's runs share (client.rate_limit; turnstate/session/rate_limit.py): eight
runs in eight processes against one local provider that answers 429 above a rate, as a provider's
limiter does (local_provider/enforced_rate.py). With the shared limit no request is refused and the
waits are in the records; without it, the same sweep draws 429s."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from turnstate.adapters.contract import ModelRequest, RequestSettings
from turnstate.adapters.rate_buckets import Rate
from turnstate.durable.layout import RATE_LIMIT_WAIT
from turnstate.local_provider.server import LocalProvider
from turnstate.reports.folder import write_report
from turnstate.session.profile import PROFILES_DIR
from turnstate.session.rate_limit import Pacing, SharedLimit
from turnstate.sweeps.engines import Engine, PoolEngine, run_sweep
from turnstate.sweeps.plan import Plan, load_sweep

from ..conftest import SERVED_KEY_VARIABLE

REQUESTS_PER_MINUTE = 600  # ten a second: eight unpaced runs on the local provider ask many times that

EIGHT_RUNS = """
id: limited
profiles: [limited.yaml]
environments:
  - name: beacon_grid
    options: {levels: 1}
    seeds: [0, 1, 2, 3, 4, 5, 6, 7]
budget: {in_flight: 8}
"""


def eight_runs(
    folder: Path,
    base_url: str,
    limited: bool,
    engine: Callable[[Plan], Engine] = lambda plan: PoolEngine(plan.adapter_ids),
) -> list[dict]:
    """The eight runs' sweep against `base_url`, sharing the limit if `limited`, on `engine` (the pool)."""
    profile = yaml.safe_load((PROFILES_DIR / "local-manual-rolling.yaml").read_text())
    profile["client"] = {"base_url": base_url, "api_key_env": SERVED_KEY_VARIABLE}
    if limited:
        profile["client"]["rate_limit"] = {"requests_per_minute": REQUESTS_PER_MINUTE}
    (folder / "limited.yaml").write_text(yaml.safe_dump(profile))
    (folder / "sweep.yaml").write_text(EIGHT_RUNS)
    plan = load_sweep(folder / "sweep.yaml")
    return run_sweep(plan, folder / "out", engine(plan))


@pytest.fixture
def limited_provider():
    with LocalProvider(rate=Rate(requests_per_minute=REQUESTS_PER_MINUTE)) as provider:
        yield provider


def calls_of(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "calls.jsonl").read_text().splitlines()]


def test_eight_runs_sharing_the_limit_draw_no_429_and_record_their_waits(tmp_path, limited_provider):
    rows = eight_runs(tmp_path, limited_provider.openai_base_url, limited=True)
    assert_within_the_limit(tmp_path, rows, limited_provider)


def assert_within_the_limit(tmp_path: Path, rows: list[dict], limited_provider: LocalProvider) -> None:
    """No request refused, every run won without a retry, and the waits the limit made are in the records."""
    assert limited_provider.refused_over_rate == 0
    assert [row["outcome"] for row in rows] == ["win"] * 8 and all(row["retries"] == 0 for row in rows)
    run_dirs = [tmp_path / "out" / row["run_dir"] for row in rows]
    waits = {run_dir: [call["waited_on_limit"] for call in calls_of(run_dir)] for run_dir in run_dirs}
    assert sum(map(sum, waits.values())) > 1.0  # the limit held them back: about 6 s of calls asked at once
    for row, run_dir in zip(rows, run_dirs, strict=True):
        meta = json.loads((run_dir / "run_meta.json").read_text())
        assert meta["rate_limit_seconds"] == row["rate_limit_seconds"] == pytest.approx(sum(waits[run_dir]), abs=0.01)
    page = write_report(tmp_path / "out").read_text()
    assert "rate limit s" in page


def test_the_same_runs_without_the_shared_limit_draw_429s(tmp_path, limited_provider):
    rows = eight_runs(tmp_path, limited_provider.openai_base_url, limited=False)
    assert limited_provider.refused_over_rate > 0
    assert sum(row["retries"] for row in rows) > 0 and all(row["rate_limit_seconds"] == 0 for row in rows)


def sharing(folder: Path, rate: Rate) -> tuple[SharedLimit, SharedLimit]:
    """Two limits on one file, as two processes have them, on a clock that only sleeping moves."""
    now = [100.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    def limit() -> SharedLimit:
        return SharedLimit("url|model", rate, folder, max_hold_seconds=30, clock=lambda: now[0], sleep=sleep)

    return limit(), limit()


def test_a_retry_after_holds_every_run_sharing_the_limit_capped_by_the_longest_wait(tmp_path):
    first, second = sharing(tmp_path, Rate(requests_per_minute=600, burst_seconds=0.5))
    first.hold(5.0)
    assert second.acquire(1) == pytest.approx(5.0)
    first.hold(3600.0)
    assert second.acquire(1) == pytest.approx(30.0)


def test_tokens_one_run_reserved_keep_another_back_until_its_usage_gives_back_what_it_did_not_use(tmp_path):
    first, second = sharing(tmp_path, Rate(tokens_per_minute=600, burst_seconds=0.5))  # 10 a second, 5 held
    assert first.acquire(45) == 0.0  # a full bucket lets a larger call go, into debt: -40
    first.give_back(30)  # it used 15: -10
    assert second.acquire(5) == pytest.approx(1.5)  # 15 tokens at 10 a second


def test_a_paced_call_marks_its_run_folder_while_it_waits_and_clears_the_mark_once_it_goes(tmp_path):
    now = [100.0]
    seen: list[str] = []
    marker = tmp_path / RATE_LIMIT_WAIT

    def sleep(seconds: float) -> None:
        seen.append(marker.read_text())
        now[0] += seconds

    limit = SharedLimit(
        "url|model",
        Rate(requests_per_minute=60, burst_seconds=1.0),
        tmp_path,
        max_hold_seconds=30,
        clock=lambda: now[0],
        sleep=sleep,
    )
    pacing = Pacing(limit, RequestSettings(model="m", max_output_tokens=1), lambda request: 0, marker)
    request = ModelRequest("system", ())
    assert pacing.before(request).waited == 0.0 and not marker.exists()  # the bucket's one request
    assert pacing.before(request).waited == pytest.approx(1.0)
    assert seen == ["101.000\n"] and not marker.exists()  # it said until when, then went


TERMINAL_SWEEP = """
id: limited
profiles: [limited.yaml]
environments:
  - name: beacon_grid
    options: {levels: 1}
    seeds: [0, 1, 2, 3]
budget: {in_flight: 4}
"""


def on_a_terminal(command: list[str], cwd: Path) -> tuple[int, str]:
    """`command` run with a pseudo-terminal (160 columns wide) as its stdin, stdout and stderr, as a
    person's shell runs it; its exit code and everything it wrote, the terminal's control sequences left out."""
    main, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 160, 0, 0))  # 160 columns: no line wraps
    environment = {
        key: value for key, value in os.environ.items() if key not in ("COLUMNS", "LINES")
    }  # the size is the terminal's
    done = subprocess.Popen(command, cwd=cwd, stdin=child, stdout=child, stderr=child, env=environment)
    os.close(child)
    written = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # the command has ended and closed the terminal
            break
        if not chunk:
            break
        written += chunk
    os.close(main)
    return done.wait(timeout=120), re.sub(rb"\x1b\[[0-9;?]*[A-Za-z]|\r", b"", written).decode()


def test_a_sweep_on_a_terminal_shows_its_runs_as_they_go_and_those_waiting_on_the_limit(tmp_path):
    """Four runs against a provider that answers 429 above 240 requests a minute, sharing that limit:
    the live view says how many are done, running and waiting on the limit while they go, then its
    end; no run is refused, and no run folder keeps a marker."""
    with LocalProvider(rate=Rate(requests_per_minute=240)) as provider:
        profile = yaml.safe_load((PROFILES_DIR / "local-manual-rolling.yaml").read_text())
        profile["client"] = {
            "base_url": provider.openai_base_url,
            "api_key_env": SERVED_KEY_VARIABLE,
            "rate_limit": {"requests_per_minute": 240},
        }
        (tmp_path / "limited.yaml").write_text(yaml.safe_dump(profile))
        (tmp_path / "sweep.yaml").write_text(TERMINAL_SWEEP)
        code, shown = on_a_terminal(
            [sys.executable, "-m", "turnstate.cli", "sweep", "sweep.yaml", "--out", "out"], tmp_path
        )
        assert provider.refused_over_rate == 0
    assert code == 0, shown
    assert re.search(r"sweep limited: 4 runs: \d done, 0 failed, \d running \(\d waiting on the rate limit\)", shown)
    assert re.search(
        r"  local-manual-rolling\.beacon_grid\.s\d\.r1: step \d+/120, waiting on the rate limit, \d+ s", shown
    )
    assert re.search(r"\d+ s so far, (about \d+ s left|about to end)", shown)
    assert re.search(r"^sweep limited: 4 runs: 4 done, 0 failed, 0 running, 0 queued, in [\d.]+ s$", shown, re.M)
    assert not list((tmp_path / "out").rglob(RATE_LIMIT_WAIT))
