"""Long runs: how the harness's cost per turn, the artifacts and the process's memory grow with the history.

Plays one long beacon_grid game (enough levels for TURNS accepted actions) from a profile, in two
regimes: "window800" (the profile's small window, so requests stay small) and "wide" (a window that
never trims, so every request carries the whole history, as continuous conversation does between
compactions). For each it prints the harness time per turn excluding the provider's (first 100 turns
against the last 100, and their ratio), the provider time per call over the last 100 turns, the
artifact bytes (and the first and last step record's size), and the process's peak RSS. Figures are
printed, never asserted; compare them side by side within one run.

    python bench/long_run.py [PROFILE] [--turns N] [--regime window800|wide|both]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import tempfile
import time
from pathlib import Path

from turnstate.adapters.contract import Endpoint, ModelRequest, ModelResponse, ProviderAdapter, ProviderError
from turnstate.harness.profile import DEFAULT_PROFILE, Profile, load_profile
from turnstate.harness.runner import Runner, StepProgress

TURNS_PER_LEVEL = 7  # a beacon_grid level takes about this many accepted actions
WIDE_WINDOW = 2_000_000


class TimedAdapter:
    """The profile's adapter, with the time of each call recorded (the provider's share of a turn)."""

    def __init__(self, inner: ProviderAdapter) -> None:
        self.inner = inner
        self.transcript = inner.transcript
        self.native_compaction = inner.native_compaction
        self.summary_compaction = inner.summary_compaction
        self.seconds: list[float] = []

    def call(self, request: ModelRequest) -> ModelResponse | ProviderError:
        started = time.perf_counter()
        try:
            return self.inner.call(request)
        finally:
            self.seconds.append(time.perf_counter() - started)

    def compact(self, request: ModelRequest) -> ModelResponse | ProviderError:
        return self.inner.compact(request)


def long_profile(profile: Profile, turns: int, regime: str) -> Profile:
    data = profile.model_dump()
    data["environment"]["options"] = {**(data["environment"]["options"] or {}), "levels": min(1000, turns // 3)}
    data["agent"]["max_actions"] = turns
    if regime == "wide":
        data["agent"]["max_context_length"] = WIDE_WINDOW
        data["client"]["local"] = {**(data["client"].get("local") or {}), "context_window": WIDE_WINDOW}
    return Profile.model_validate(data)


def measure(profile: Profile, turns: int, regime: str) -> None:
    run_profile = long_profile(profile, turns, regime)
    adapters: list[TimedAdapter] = []
    step_ends: list[float] = []

    def factory(endpoint: Endpoint) -> ProviderAdapter:
        adapter_class = Runner(run_profile, Path()).descriptor.load()
        timed = TimedAdapter(adapter_class.connect(endpoint, run_profile.request_settings()))
        adapters.append(timed)
        return timed  # type: ignore[return-value]

    def on_step(progress: StepProgress) -> None:
        step_ends.append(time.perf_counter())

    with tempfile.TemporaryDirectory() as out:
        started = time.perf_counter()
        result = Runner(run_profile, Path(out), adapter_factory=factory, on_step=on_step).run()
        calls = adapters[0].seconds
        steps = sorted(result.artifacts.glob("step_*.json"))
        sizes = [path.stat().st_size for path in steps]
        total_bytes = sum(path.stat().st_size for path in result.artifacts.iterdir())
    walls = [end - begin for begin, end in zip([started, *step_ends], step_ends, strict=False)]
    # One call per turn unless a turn retried; the harness's share is the turn's wall less its calls.
    harness = [wall - call for wall, call in zip(walls, calls, strict=False)]
    window = min(100, len(harness) // 2) or 1
    first, last = statistics.mean(harness[:window]), statistics.mean(harness[-window:])
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{regime}: {result.turns} turns ({result.outcome}), {result.usage.input_tokens:,} input tokens")
    print(f"  harness per turn, excluding the provider: median {statistics.median(harness) * 1000:.2f} ms")
    print(f"  first {window} vs last {window}: {first * 1000:.2f} vs {last * 1000:.2f} ms (ratio {last / first:.2f})")
    print(f"  provider per call, last {window}: {statistics.mean(calls[-window:]) * 1000:.2f} ms")
    print(
        f"  artifacts: {total_bytes / 1e6:.1f} MB (step 1: {sizes[0] / 1e3:.1f} kB, last step: {sizes[-1] / 1e3:.1f} kB)"
    )
    print(f"  process peak RSS so far: {peak_mb:.0f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("profile", nargs="?", default=str(DEFAULT_PROFILE))
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--regime", choices=["window800", "wide", "both"], default="both")
    args = parser.parse_args()
    profile = load_profile(args.profile)
    for regime in ["window800", "wide"] if args.regime == "both" else [args.regime]:
        measure(profile, args.turns, regime)


if __name__ == "__main__":
    main()
