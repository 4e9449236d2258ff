"""Long runs: how the harness's cost per turn, the artifacts and memory grow with the history.

Plays one long beacon_grid game (enough levels for TURNS accepted actions) from a profile, against a
local provider the benchmark starts itself (so it can read the provider's own service times), in
one of two regimes: "window" (the profile's own window and compaction, so requests stay bounded;
harness summaries get a 32,000-token window and a 4,000-token trigger, so that they compact every
few hundred turns, as in the figures this script has always reported; long_games.py plays the
profiles as they are) or "wide" (a window that never trims and no compaction, so every request
carries the whole history).

Beside it, the floor: a minimal loop that makes the same SDK calls (the adapter's own `client.post`,
the stream read to its end) with the same messages, against a local provider of its own, doing
nothing else. The two alternate: every FLOOR_BLOCK turns the run pauses while the floor replays
those turns' requests, so a change in the machine's speed (these machines are noisy, from minute to
minute) falls on both alike. turnstate's wall (less the pauses) over the floor's is what the harness
adds.

Figures are printed (or written as JSON with --json, for bench/run.py), never asserted:

    python bench/long_run.py [PROFILE] [--turns N] [--regime window|wide] [--json] [--no-floor]
                             [--through-create] [--provider-process] [--artifacts-in DIR]
                             [--unwritten-steps]
"""

from __future__ import annotations

import argparse
import json
import math
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from array import array
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from openai import Stream
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from turnstate.adapters.contract import Endpoint, ModelRequest, ModelResponse, ProviderAdapter, ProviderError
from turnstate.adapters.json_bytes import json_bytes
from turnstate.durable.layout import step_name
from turnstate.durable.writer import ArtifactWriter
from turnstate.local_provider.server import LocalProvider
from turnstate.session.endpoint import LOCAL_API_KEY
from turnstate.session.profile import DEFAULT_PROFILE, Profile, load_profile
from turnstate.session.runner import Runner, freeze_startup_objects

TURNS_PER_LEVEL = 3  # levels enough that the game outlasts the turns (a level takes about 7)
WIDE_WINDOW = 10_000_000
RUNS = Path("runs")  # where `turnstate run` writes, under the current folder; a run's artifacts go there by default
LONG_SUMMARY_WINDOW, LONG_SUMMARY_TRIGGER = 32_000, 4_000  # harness summaries in the "window" regime
FLOOR_BLOCK = 50  # turns the run plays between the floor's replays of them (about a third of a second)
MARKS = (10, 100, 1000, 3000)  # the turns at which per-turn harness cost is reported
WARM_TURNS = 10  # after these the process has loaded everything a turn needs; the state is a few kB


class TimedAdapter:
    """The profile's adapter, with each call's time and request kept (the provider's share of a
    turn, and what the floor replays)."""

    def __init__(self, inner: ProviderAdapter, keep_requests: bool) -> None:
        self.inner = inner
        self.keep_requests = keep_requests  # for the floor; they cost memory, so not when measuring it
        self.transcript = inner.transcript
        self.native_compaction = inner.native_compaction
        self.summary_compaction = inner.summary_compaction
        self.acts_through_tools = inner.acts_through_tools
        self.seconds = array("d")  # unboxed: the benchmark's own bookkeeping stays out of the memory figures
        self.requests: list[ModelRequest] = []

    def call(self, request: ModelRequest) -> ModelResponse | ProviderError:
        if self.keep_requests:
            self.requests.append(request)
        return self._timed(self.inner.call, request)

    def compact(self, request: ModelRequest) -> ModelResponse | ProviderError:
        return self._timed(self.inner.compact, request)

    def _timed(
        self, send: Callable[[ModelRequest], ModelResponse | ProviderError], request: ModelRequest
    ) -> ModelResponse | ProviderError:
        started = time.perf_counter()
        try:
            return send(request)
        finally:
            self.seconds.append(time.perf_counter() - started)


def long_profile(profile: Profile, turns: int, regime: str) -> Profile:
    data = profile.model_dump()
    data["environment"]["options"] = {
        **(data["environment"]["options"] or {}),
        "levels": max(1, min(1000, math.ceil(turns / TURNS_PER_LEVEL))),
    }
    data["agent"]["max_actions"] = turns
    if regime == "wide":
        data["agent"]["max_context_length"] = WIDE_WINDOW
        data["client"]["local"] = {**(data["client"].get("local") or {}), "context_window": WIDE_WINDOW}
        data["runtime"]["compaction"] = {"strategy": "none"}
        # OpenAI's inline compaction is a request option, which needs runtime.compaction native.
        options = data["request"].get("options") or {}
        data["request"]["options"] = {key: value for key, value in options.items() if key != "context_management"}
    elif data["runtime"]["compaction"]["strategy"] == "harness_summary":
        # A compaction every few hundred turns, not every few: the per-turn figures measure the
        # history's growth, as they always have, not the summaries (long_games.py plays the profiles
        # as they are).
        data["agent"]["max_context_length"] = LONG_SUMMARY_WINDOW
        data["client"]["local"] = {**(data["client"].get("local") or {}), "context_window": LONG_SUMMARY_WINDOW}
        data["runtime"]["compaction"]["trigger_tokens"] = LONG_SUMMARY_TRIGGER
    return Profile.model_validate(data)


@dataclass
class LongRun:
    profile: str
    regime: str
    turns: int
    outcome: str
    input_tokens: int
    cached_tokens: int
    wall_seconds: float
    harness_ms: list[float]  # per turn, the turn's wall less its provider calls
    provider_ms: list[float]  # per call, inside adapter.call: SDK, HTTP and the provider
    service_ms: list[float]  # per request, the local provider's own time (the latest 1000)
    artifact_bytes: int
    first_step_bytes: int
    last_step_bytes: int
    peak_rss_mb: float
    baseline_rss_mb: float  # the process's RSS before the run: the interpreter, modules and SDK
    # Its peak RSS after the first turns: the interpreter with everything a turn loads or builds on
    # first use (the SDK's lazy modules and response models, the HTTP connection), before a history.
    warm_rss_mb: float
    state_bytes: int  # the last accepted state, serialized
    floor_wall_seconds: float | None = None


def end_mean(values: list[float], last: bool, window: int = 100) -> float:
    """The mean of the first or the last `window` values (of half of them, in a shorter run)."""
    window = min(window, max(1, len(values) // 2))
    return statistics.mean(values[-window:] if last else values[:window])


def mean_up_to(values: list[float], turn: int) -> float | None:
    """The mean over the 10 values up to `turn` (the first 10 for turn 10); None past the run's end."""
    if turn > len(values):
        return None
    return statistics.mean(values[max(0, turn - 10) : turn])


def through_create(adapter: Any) -> None:
    """Send a Chat Completions adapter's requests through the SDK's `create`, as it did before it
    used `client.post`: the same body, with the SDK's request transform over every message."""

    def read(body: dict[str, Any], seen: Any) -> Any:
        completion = adapter.client.chat.completions.create(**body)
        if body.get("stream"):
            return adapter._collect_stream(completion, seen)
        return adapter._normalize(completion, seen)

    adapter._read = read


@contextmanager
def step_files_unwritten() -> Iterator[None]:
    """Step records rendered as a run renders them, but not written: what writing the step files
    costs a run, by difference. A measurement only; no run is meant to go without them."""
    write_step = ArtifactWriter.write_step

    def render_only(writer: ArtifactWriter, index: int, record: dict[str, Any]) -> Path:
        writer._render(record, indent=True)
        return writer.path / step_name(index)

    ArtifactWriter.write_step = render_only  # type: ignore[method-assign]
    try:
        yield
    finally:
        ArtifactWriter.write_step = write_step  # type: ignore[method-assign]


@contextmanager
def serving(window: int, separate: bool) -> Iterator[tuple[str, Callable[[], list[float]]]]:
    """A local provider for the run: (its base URL, its service times). In this process, or with
    `separate` in a `turnstate serve` process of its own, so this process's memory is the harness's
    alone (its service times are then not read)."""
    if not separate:
        with LocalProvider(context_window=window, request_log_size=0) as provider:
            yield provider.base_url, lambda: provider.service_seconds
        return
    command = [sys.executable, "-m", "turnstate.cli", "serve", "--context-window", str(window)]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        base_url = re.search(r"on (http://\S+) ", server.stdout.readline())
        assert base_url is not None, "turnstate serve did not say where it listens"
        yield base_url.group(1), list
    finally:
        server.terminate()
        server.wait()


def measure(
    profile: Profile,
    turns: int,
    regime: str,
    floor: bool = True,
    create: bool = False,
    unwritten_steps: bool = False,
    separate_provider: bool = False,
    artifacts_parent: Path = RUNS,
) -> LongRun:
    baseline_mb = peak_rss_mb()
    run_profile = long_profile(profile, turns, regime)
    window = WIDE_WINDOW if regime == "wide" else run_profile.client.local and run_profile.client.local.context_window
    with_floor = floor and run_profile.runtime.adapter_id.endswith("chat_completions.v1")
    adapters: list[TimedAdapter] = []
    turn_walls = array("d")  # each turn's wall, the floor's pauses left out (unboxed, as TimedAdapter.seconds)
    turn_calls = array("d")  # each turn's provider calls: its action's, and any retry's or compaction's
    warm_mb: list[float] = []

    with serving(window or 8192, separate_provider) as (base_url, service_seconds), ExitStack() as stack:
        endpoint = Endpoint(base_url, LOCAL_API_KEY, is_local=True)
        replay = stack.enter_context(Floor(window or 8192)) if with_floor else None
        turn_started = time.perf_counter()
        calls_before = 0  # the calls made before the turn under way

        def on_step(_: Any) -> None:
            nonlocal turn_started, calls_before
            turn_walls.append(time.perf_counter() - turn_started)
            calls = adapters[0].seconds
            turn_calls.append(sum(calls[calls_before:]))
            calls_before = len(calls)
            if len(turn_walls) == WARM_TURNS:
                warm_mb.append(peak_rss_mb())
            if replay is not None and len(turn_walls) % FLOOR_BLOCK == 0:
                replay.catch_up(adapters[0])
            turn_started = time.perf_counter()

        def factory(_: Endpoint) -> ProviderAdapter:
            adapter_class = Runner(run_profile, Path()).descriptor.load()
            timed = TimedAdapter(adapter_class.connect(endpoint, run_profile.request_settings()), with_floor)
            if create:
                through_create(timed.inner)
            adapters.append(timed)
            return timed  # type: ignore[return-value]

        artifacts_parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=artifacts_parent) as out:
            with step_files_unwritten() if unwritten_steps else nullcontext():
                result = Runner(run_profile, Path(out), adapter_factory=factory, on_step=on_step).run()
            steps = sorted(result.artifacts.glob("step_*.json"))
            sizes = [path.stat().st_size for path in steps]
            total_bytes = sum(path.stat().st_size for path in result.artifacts.iterdir())
        paused = replay.seconds if replay else 0.0  # the run's wall counted these
        if replay is not None:
            replay.catch_up(adapters[0])  # the turns after the last block
        service = [seconds * 1000 for seconds in service_seconds()]
    timed = adapters[0]
    # The harness's share of a turn is the rest of it once its calls are taken away.
    harness = [(wall - calls) * 1000 for wall, calls in zip(turn_walls, turn_calls, strict=True)]
    return LongRun(
        profile=profile.id,
        regime=regime,
        turns=result.turns,
        outcome=result.outcome,
        input_tokens=result.usage.input_tokens,
        cached_tokens=result.usage.cached_input_tokens,
        wall_seconds=result.wall_seconds - paused,
        harness_ms=harness,
        provider_ms=[seconds * 1000 for seconds in timed.seconds],
        service_ms=service,
        artifact_bytes=total_bytes,
        first_step_bytes=sizes[0] if sizes else 0,
        last_step_bytes=sizes[-1] if sizes else 0,
        peak_rss_mb=peak_rss_mb(),
        baseline_rss_mb=baseline_mb,
        warm_rss_mb=warm_mb[0] if warm_mb else peak_rss_mb(),
        state_bytes=len(result.accepted_state.to_json()),
        floor_wall_seconds=replay.seconds if replay else None,
    )


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class Floor:
    """The floor: the run's Chat Completions calls with the same messages, encoded as the adapter
    encodes them, and nothing else, on a provider of its own. `catch_up` replays the requests the
    run has sent since the last replay (then forgets them) and adds its time to `seconds`."""

    def __init__(self, window: int) -> None:
        self.provider = LocalProvider(context_window=window, request_log_size=0)
        self.client: Any = None
        self.seconds = 0.0

    def __enter__(self) -> Floor:
        self.provider.__enter__()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.provider.__exit__(*exc_info)

    def catch_up(self, timed: TimedAdapter) -> None:
        started = time.perf_counter()
        adapter: Any = timed.inner
        if self.client is None:
            prefix = urlsplit(str(adapter.client.base_url)).path  # /v1, /open-weight/v1, ...
            self.client = adapter.client.with_options(base_url=self.provider.base_url + prefix)  # the same SDK client
        path, stream = "/chat/completions", adapter.settings.stream
        for request in timed.requests:
            content = json_bytes(adapter.build_request(request))  # the adapter's body, encoded as it encodes it
            if stream:
                for _ in self.client.post(
                    path, content=content, cast_to=ChatCompletion, stream=True, stream_cls=Stream[ChatCompletionChunk]
                ):
                    pass
            else:
                self.client.post(path, content=content, cast_to=ChatCompletion)
        timed.requests.clear()
        self.seconds += time.perf_counter() - started


def report(run: LongRun) -> None:
    first, last = end_mean(run.harness_ms, False), end_mean(run.harness_ms, True)
    print(f"{run.profile} {run.regime}: {run.turns} turns ({run.outcome}), {run.input_tokens:,} input tokens")
    print(f"  harness per turn, excluding the provider: median {statistics.median(run.harness_ms):.2f} ms")
    print(f"  first 100 vs last 100: {first:.2f} vs {last:.2f} ms (ratio {last / first:.2f})")
    at = {turn: mean_up_to(run.harness_ms, turn) for turn in MARKS}
    marks = ", ".join(f"turn {turn}: {mean:.2f} ms" for turn, mean in at.items() if mean is not None)
    print(f"  harness per turn at {marks}")
    print(f"  provider per call (SDK + HTTP + provider), last 100: {end_mean(run.provider_ms, True):.2f} ms")
    if run.service_ms:
        print(f"  local provider's own time per call, last 100: {end_mean(run.service_ms, True):.2f} ms")
    if run.floor_wall_seconds:
        print(
            f"  wall {run.wall_seconds:.1f} s, floor {run.floor_wall_seconds:.1f} s (ratio {run.wall_seconds / run.floor_wall_seconds:.3f})"
        )
    print(
        f"  artifacts: {run.artifact_bytes / 1e6:.2f} MB (step 1: {run.first_step_bytes / 1e3:.1f} kB, "
        f"last step: {run.last_step_bytes / 1e3:.1f} kB)"
    )
    print(
        f"  process peak RSS: {run.peak_rss_mb:.1f} MB (before the run: {run.baseline_rss_mb:.1f} MB; "
        f"after {WARM_TURNS} turns: {run.warm_rss_mb:.1f} MB; "
        f"accepted state: {run.state_bytes / 1e6:.2f} MB serialized)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("profile", nargs="?", default=str(DEFAULT_PROFILE))
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--regime", choices=["window", "wide"], default="wide")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    parser.add_argument("--no-floor", action="store_true", help="skip the floor loop")
    parser.add_argument("--through-create", action="store_true", help="call the SDK's create (Chat Completions)")
    parser.add_argument(
        "--unwritten-steps", action="store_true", help="render step records but do not write them (what they cost)"
    )
    parser.add_argument(
        "--provider-process", action="store_true", help="serve the provider from its own process (memory figures)"
    )
    parser.add_argument(
        "--artifacts-in",
        metavar="DIR",
        type=Path,
        default=RUNS,
        help="write the run's artifacts under DIR (default: runs/, as turnstate run does)",
    )
    args = parser.parse_args()
    profile = load_profile(args.profile)
    freeze_startup_objects()  # as `turnstate run` does
    run = measure(
        profile,
        args.turns,
        args.regime,
        floor=not args.no_floor,
        create=args.through_create,
        unwritten_steps=args.unwritten_steps,
        separate_provider=args.provider_process,
        artifacts_parent=args.artifacts_in,
    )
    if args.json:
        print(json.dumps(asdict(run)))
    else:
        report(run)


if __name__ == "__main__":
    main()
