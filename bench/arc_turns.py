"""What a turn of ls20 costs through each strategy, beside what the game itself costs: the toolkit's
own step time (the recording stepped on the toolkit alone), turnstate's wall per turn (the harness,
the embedded local provider and its recording model, and the toolkit's step), the bytes each turn
leaves on disk (the run folder: turnstate's records, and the toolkit's own JSONL recording in it),
and how long a run killed at turn 400 takes to resume (from `resume` to its first provider call:
the checkpoint and records read, the journal replayed through the toolkit, its recording rewritten).

    python bench/arc_turns.py [--arc ../shared/arc-agi-3] [--game ls20] [--kill-at 400] [--variants NAME ...]

Needs Python 3.12 with the arc extra (as .ci/arc installs it) and the games and recordings in that
folder (never copied into the project)."""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from tests.environments.arc_preview import RECORDINGS, VARIANTS, arc_profile  # noqa: E402 - the tests' own table
from tests.harness.test_resume import killed_run  # noqa: E402 - the kill tests' own SIGKILL
from turnstate.durable.layout import ENVIRONMENT_RECORDINGS  # noqa: E402
from turnstate.local_provider.recording_policy import read_recording  # noqa: E402
from turnstate.session.profile import Profile  # noqa: E402
from turnstate.session.runner import Runner  # noqa: E402

SWEPT = ("manual_rolling.chat", "previous_response_id.responses", "continuous.native_inline.responses")


def toolkit_step_ms(arc: Path, game: str, recordings: Path | None) -> float:
    """The toolkit alone: the recording's actions stepped on a fresh game (writing its own JSONL
    recording into `recordings`, as a run has it, unless None), mean milliseconds a step."""
    import logging

    import arc_agi
    from arcengine import GameAction

    from turnstate.environments.arc_agi3 import parse_action

    arcade = arc_agi.Arcade(
        operation_mode=arc_agi.OperationMode.OFFLINE,
        environments_dir=str(arc / "environment_files"),
        logger=logging.Logger("quiet", logging.WARNING),
        **({} if recordings is None else {"recordings_dir": str(recordings)}),
    )
    wrapper = arcade.make(game, seed=0, save_recording=recordings is not None)
    took = []
    for action in read_recording(arc / "recordings" / RECORDINGS[game])[1]:
        name, cell = parse_action(action)
        started = time.perf_counter()
        wrapper.step(GameAction[name], data=cell)
        took.append(time.perf_counter() - started)
    return statistics.mean(took) * 1000


def folder_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def ms_to_ready(profile: Profile, run_dir: Path) -> float:
    """Resume the run in `run_dir` to its end; the milliseconds until its first provider call."""
    ready: list[float] = []

    def on_point(point: str) -> None:
        if point == "before_provider_call":
            ready.append(time.perf_counter())

    started = time.perf_counter()
    Runner(profile, run_dir.parent, on_point=on_point).resume(run_dir)
    return (ready[0] - started) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arc", type=Path, default=REPO.parent / "shared" / "arc-agi-3")
    parser.add_argument("--game", default="ls20", choices=sorted(RECORDINGS))
    parser.add_argument("--kill-at", type=int, default=400)
    parser.add_argument("--variants", nargs="+", default=list(SWEPT), choices=sorted(VARIANTS))
    arguments = parser.parse_args()
    if not arguments.arc.is_dir():
        print(f"no ARC-AGI-3 games in {arguments.arc}: pass --arc", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as recordings:
        alone, recorded = (toolkit_step_ms(arguments.arc, arguments.game, where) for where in (None, Path(recordings)))
    print(f"toolkit step alone ({arguments.game}): {alone:.1f} ms; writing its JSONL recording: {recorded:.1f} ms")
    print(
        "| variant | turns | wall per turn | bytes per turn (turnstate / toolkit recording) | "
        f"resume at turn {arguments.kill_at} |"
    )
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as scratch:
        for variant in arguments.variants:
            profile = arc_profile(variant, arguments.game, arguments.arc)
            started = time.perf_counter()
            result = Runner(profile, Path(scratch) / variant / "whole").run()
            per_turn = (time.perf_counter() - started) / result.turns * 1000
            assert result.artifacts is not None
            recorded = folder_bytes(result.artifacts / ENVIRONMENT_RECORDINGS)
            own = folder_bytes(result.artifacts) - recorded
            run_dir = killed_run(profile, Path(scratch) / variant / "killed", "after_commit", arguments.kill_at)
            resume_ms = ms_to_ready(profile, run_dir)
            print(
                f"| {variant} | {result.turns} | {per_turn:.1f} ms | {own / result.turns / 1024:.1f} KiB / "
                f"{recorded / result.turns / 1024:.1f} KiB | {resume_ms:.0f} ms |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
