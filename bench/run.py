"""Every performance figure, each beside its goal: the table bench/README.md and closing notes copy.

Each measurement runs in a process of its own (so each peak RSS is that measurement's), through the
scripts beside this one with --json:

    long_run.py          harness cost per turn, wall over the floor, artifacts, the provider's time
                         and memory, per strategy and regime
    cache_share.py       cached share of input with trimming and compaction
    overflow_recovery.py summary requests in a forced deep recovery
    throughput.py        concurrent runs against one provider
    tool_offload.py      input and cached share with the stale tool-result offload off and on, and
                         the harness's time per turn with tools against without
    durable_runs.py      what checkpoints and the journals cost a turn, wall over the floor with them,
                         resume time and checkpoint bytes at 1000 and 3000 turns

    python bench/run.py [--quick]

--quick runs shorter versions (300 instead of 1000 and 3000 turns) to check the script itself; its
figures are not the ones the goals name. The whole run takes about 26 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from durable_runs import table as durable_rows  # beside this script
from long_run import MARKS, end_mean, mean_up_to

HERE = Path(__file__).resolve().parent
CHAT = "profiles/local-manual-rolling.yaml"  # manual_rolling over Chat Completions
CONTINUOUS = "profiles/local-open-source-continuous.yaml"  # continuous_conversation, harness summaries
PAIRS = 3  # runs of wall over the floor, each alternating with its own floor; the median is reported
MEMORY_FOLDER = "/dev/shm"  # a tmpfs on Linux


def script(name: str, *arguments: object) -> Any:
    """Run bench/<name> with --json in a fresh process; its figures."""
    command = [sys.executable, str(HERE / name), *map(str, arguments), "--json"]
    print(f"  running {' '.join(command[1:])}", file=sys.stderr, flush=True)
    done = subprocess.run(command, capture_output=True, text=True, check=True, cwd=HERE.parent)
    return json.loads(done.stdout)


def long_run(profile: str, turns: int, regime: str, *flags: str) -> dict[str, Any]:
    return script("long_run.py", profile, "--turns", turns, "--regime", regime, *flags)


def at_turn(values: list[float], turn: int) -> str:
    mean = mean_up_to(values, turn)
    return "-" if mean is None else f"{mean:.2f}"


def wall_over_floor(run: dict[str, Any]) -> float:
    return float(run["wall_seconds"] / run["floor_wall_seconds"])


@dataclass(frozen=True)
class Row:
    figure: str
    measured: str
    goal: str
    met: bool | None  # None: a figure reported without a goal of its own


def rows(quick: bool) -> list[Row]:
    long, longest = (300, 300) if quick else (1000, 3000)
    table: list[Row] = []

    # 1. Harness cost per turn, flat in the history; wall over the floor.
    runs = {
        ("manual_rolling", "window"): long_run(CHAT, longest, "window", "--no-floor"),
        ("manual_rolling", "wide"): long_run(CHAT, long, "wide", "--no-floor"),
        ("continuous_conversation", "window"): long_run(CONTINUOUS, long, "window", "--no-floor"),
        # Its provider in a process of its own: the memory figure is the harness's alone.
        ("continuous_conversation", "wide"): long_run(CONTINUOUS, longest, "wide", "--no-floor", "--provider-process"),
    }
    for (strategy, regime), run in runs.items():
        harness = run["harness_ms"]
        first, last = end_mean(harness, False), end_mean(harness, True)
        marks = " / ".join(at_turn(harness, turn) for turn in MARKS)
        table.append(
            Row(
                f"{strategy} {regime}, {run['turns']} turns: harness ms per turn at 10 / 100 / 1000 / 3000",
                marks,
                "-",
                None,
            )
        )
        table.append(
            Row(
                f"{strategy} {regime}: harness per turn, last 100 / first 100",
                f"{last:.2f} / {first:.2f} ms = {last / first:.2f}",
                "<= 1.3 (wide)",
                last / first <= 1.3 if regime == "wide" else None,
            )
        )
    # The median of PAIRS runs, each alternating with its own floor; with the artifacts in runs/,
    # where `turnstate run` writes them, and in memory, where creating and fsyncing a step file costs
    # little. Last, a figure without a goal: the step records rendered but not written, so what is
    # left is the harness's own work, and the difference is what the step files cost.
    places: list[tuple[str, tuple[str, ...], bool]] = [("artifacts in runs/", (), True)]
    if Path(MEMORY_FOLDER).is_dir():
        places.append(("artifacts in tmpfs", ("--artifacts-in", MEMORY_FOLDER), True))
    places.append(("step records not written", ("--unwritten-steps",), False))
    for regime in ("window", "wide"):
        for place, where, judged in places:
            paired = sorted((long_run(CHAT, long, regime, *where) for _ in range(PAIRS)), key=wall_over_floor)
            run = paired[len(paired) // 2]
            ratios = ", ".join(f"{wall_over_floor(each):.2f}" for each in paired)
            table.append(
                Row(
                    f"manual_rolling {regime}, {run['turns']} turns, {place}: "
                    f"turnstate wall / floor wall, median of {PAIRS}",
                    f"{run['wall_seconds']:.1f} / {run['floor_wall_seconds']:.1f} s = {wall_over_floor(run):.2f} "
                    f"({ratios})",
                    "<= 1.15" if judged else "-",
                    wall_over_floor(run) <= 1.15 if judged else None,
                )
            )

    # 2. Artifacts; 3. the local provider; 5. memory.
    wide = runs[("manual_rolling", "wide")]
    table.append(
        Row(
            f"manual_rolling wide, {wide['turns']} turns: artifact bytes",
            f"{wide['artifact_bytes'] / 1e6:.2f} MB (last step {wide['last_step_bytes'] / 1e3:.1f} kB)",
            "<= 13 MB (1/20 of 261 MB)",
            wide["artifact_bytes"] <= 261e6 / 20,
        )
    )
    service = end_mean(wide["service_ms"], True)
    table.append(Row("local provider's own time per call, last 100 (wide)", f"{service:.2f} ms", "< 5 ms", service < 5))
    table.append(
        Row(
            "process peak RSS, provider included (wide)",
            f"{wide['peak_rss_mb']:.0f} MB",
            "< 100 MB",
            wide["peak_rss_mb"] < 100,
        )
    )
    deep = runs[("continuous_conversation", "wide")]
    # The baseline is the process after its first turns (everything a turn loads, a state of a few kB);
    # the RSS before the run is printed beside it.
    allowance = 3 * deep["state_bytes"] / 2**20 + deep["warm_rss_mb"]
    table.append(
        Row(
            f"continuous wide, {deep['turns']} turns: harness process peak RSS vs 3 x state + baseline",
            f"{deep['peak_rss_mb']:.1f} MB vs 3 x {deep['state_bytes'] / 2**20:.2f} + {deep['warm_rss_mb']:.1f} MB "
            f"(after 10 turns; {deep['baseline_rss_mb']:.1f} MB before the run)",
            f"<= {allowance:.1f} MB",
            deep["peak_rss_mb"] <= allowance,
        )
    )

    # 4. The SDK's transform: provider time per call through `create` and through `client.post`.
    short = 300
    created = long_run(CHAT, short, "wide", "--no-floor", "--through-create")
    posted = long_run(CHAT, short, "wide", "--no-floor")
    table.append(
        Row(
            f"provider per call, last 100 of {short} wide turns: create / client.post",
            f"{end_mean(created['provider_ms'], True):.1f} / {end_mean(posted['provider_ms'], True):.1f} ms",
            "client.post where it keeps the SDK",
            None,
        )
    )

    # 6. Cache-friendliness.
    for share in script("cache_share.py", "--turns", 300):
        goal, met = "-", None
        if share["scenario"].startswith("manual_rolling, low-water"):
            goal, met = ">= 0.85", share["share"] >= 0.85
        elif share["scenario"].startswith("continuous"):
            goal, met = ">= 0.95 kept", share["kept_prefix_share"] >= 0.95
        summary = f", summaries {share['summary_share']:.3f}" if share["summary_share"] is not None else ""
        table.append(
            Row(
                f"cached share, {share['scenario']}, {share['budget']} budget",
                f"{share['share']:.3f} (kept prefix {share['kept_prefix_share']:.3f} of a possible "
                f"{share['kept_prefix_ceiling']:.3f}, {share['prefix_moves']} moves{summary})",
                goal,
                met,
            )
        )

    # 7. Overflow recovery.
    for figure in script("overflow_recovery.py", "--turns", 10, 100, 300 if quick else 1000):
        table.append(
            Row(
                f"summary requests, forced deep recovery after {figure['turns']} turns",
                str(figure["summary_requests"]),
                f"<= ceil(log2 n) + 2 = {figure['bound']}",
                figure["summary_requests"] <= figure["bound"],
            )
        )

    # 8. Throughput.
    throughput = script("throughput.py", "--runs", 16, "--concurrency", 8)
    table.append(
        Row(
            "8 concurrent runs on one provider: runs per minute; provider's CPU share",
            f"{throughput['runs_per_minute']:.1f}; {throughput['provider_cpu_share']:.3f}",
            "provider not the bottleneck",
            throughput["provider_cpu_share"] < 0.5 and throughput["failed_runs"] == 0,
        )
    )

    # 9. Tools: the stale tool-result offload over a long catalog_hunt run, and what tools cost.
    tools = script("tool_offload.py", "--levels", 50 if quick else 150)
    off, on = tools["offload_off"], tools["offload_on"]
    table.append(
        Row(
            f"catalog_hunt, {on['turns']} turns: input tokens per turn, last 100, offload off / on",
            f"{off['input_per_turn_last']:.0f} / {on['input_per_turn_last']:.0f} = {tools['input_cut_last']:.2f}x",
            ">= 3x",
            tools["input_cut_last"] >= 3,
        )
    )
    table.append(
        Row(
            f"catalog_hunt, {on['turns']} turns, offload on: cached share, last 100 (whole run)",
            f"{on['cached_share_last']:.3f} ({on['cached_share_all']:.3f}); off {off['cached_share_last']:.3f}",
            ">= 0.85",
            on["cached_share_last"] >= 0.85,
        )
    )
    table.append(
        Row(
            "beacon_grid, manual_rolling: harness ms per turn, action tools / action lines, median of 3",
            f"{tools['harness_ms_tools']:.2f} / {tools['harness_ms_text']:.2f} = {tools['tools_over_text']:.2f}x",
            "<= 1.3x",
            tools["tools_over_text"] <= 1.3,
        )
    )

    # 10. Durable runs: checkpoints, the journals and resume (its own table, each row beside its goal).
    durable = script("durable_runs.py", *(["--quick"] if quick else []))
    table.extend(Row(*row) for row in durable_rows(durable))
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="short runs, to check the script")
    args = parser.parse_args()
    table = rows(args.quick)
    print("| figure | measured | goal | met |")
    print("|---|---|---|---|")
    for row in table:
        met = "-" if row.met is None else ("yes" if row.met else "no")
        print(f"| {row.figure} | {row.measured} | {row.goal} | {met} |")


if __name__ == "__main__":
    main()
