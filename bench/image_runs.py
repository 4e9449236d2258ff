"""Frames as images (issue 34): what a 300-turn image run costs against the same run on text frames.

Plays beacon_grid with `render: image` and with `render: text`, for each wire that takes images, on the
embedded local provider, and prints per run:

- bytes on disk: the whole run folder, its input_images/ (each distinct frame once, however many requests
  sent it) and the checkpoints; beside them, the bytes of every image every request sent, which is
  what storing images inline would have cost;
- request build per turn: the adapter's `build_request` plus the JSON encoding of its body (what the
  SDK then sends), in milliseconds, the mean over the run's calls;
- the estimate's error: the harness's token estimate of each request (its transcript's
  `estimate_tokens`, the figure the window and the triggers read) against the input tokens the local
  provider counted for it, as the mean and the largest relative difference.

Figures are printed (or JSON with --json), never asserted:

    python bench/image_runs.py [--turns 300] [--json]      # about 3 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from long_run import long_profile  # beside this script

from turnstate.adapters.contract import ModelRequest, ProviderError
from turnstate.adapters.images import parse_data_url
from turnstate.adapters.registry import ADAPTERS
from turnstate.adapters.tokens import image_base64
from turnstate.durable.layout import IMAGES
from turnstate.session.profile import PROFILES_DIR, Profile, load_profile
from turnstate.session.runner import Runner

REPO = Path(__file__).resolve().parent.parent
# (profile, the window its image run needs: an image frame costs more than its rows as text)
WIRES = {
    "local-manual-rolling.yaml": 1600,  # Chat Completions, manual_rolling (OpenAI tiles)
    "local-openai-continuous.yaml": None,  # Responses, continuous with native compaction
    "local-anthropic-continuous.yaml": None,  # Messages (pixel area)
    "local-gemini-harness-summary.yaml": None,  # Interactions (a fixed budget an image)
}


@dataclass
class Calls:
    """What the wrapped adapter saw: each call's build time, estimate, counted input, images sent."""

    build_seconds: list[float] = field(default_factory=list)
    estimated: list[int] = field(default_factory=list)
    counted: list[int] = field(default_factory=list)
    image_bytes_sent: int = 0
    images_sent: int = 0


def sent_images(body: Any) -> Iterator[bytes]:
    """The bytes of every image part in a request body, wherever a wire puts it."""
    if isinstance(body, dict):
        encoded = image_base64(body)
        if encoded is not None:
            yield parse_data_url(f"data:image/png;base64,{encoded}")[1]
            return
        for value in body.values():
            yield from sent_images(value)
    elif isinstance(body, list):
        for value in body:
            yield from sent_images(value)


@contextmanager
def watched(adapter_class: type, calls: Calls) -> Iterator[None]:
    """`adapter_class` with its build_request timed and its calls' estimates and counts kept."""
    build, call = adapter_class.build_request, adapter_class.call

    def timed_build(self: Any, request: ModelRequest) -> dict[str, Any]:
        started = time.perf_counter()
        body = build(self, request)
        json.dumps(body, default=str)
        calls.build_seconds.append(time.perf_counter() - started)
        return body

    def counted_call(self: Any, request: ModelRequest) -> Any:
        reply = call(self, request)
        if not isinstance(reply, ProviderError) and reply.usage.input_tokens:
            body = build(self, request)
            for image in sent_images(body):
                calls.images_sent += 1
                calls.image_bytes_sent += len(image)
            calls.estimated.append(adapter_class.transcript.estimate_tokens(request.items, request.system))
            calls.counted.append(reply.usage.input_tokens)
        return reply

    adapter_class.build_request, adapter_class.call = timed_build, counted_call
    try:
        yield
    finally:
        adapter_class.build_request, adapter_class.call = build, call


def image_profile(name: str, turns: int, render: str) -> Profile:
    data = long_profile(load_profile(PROFILES_DIR / name), turns, "window").model_dump()
    data["environment"]["options"]["render"] = render
    window = WIRES[name]
    if window is not None:
        data["agent"]["max_context_length"] = window
        data["client"]["local"] = {**(data["client"].get("local") or {}), "context_window": max(window, 8192)}
    return Profile.model_validate(data)


def folder_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def play(name: str, turns: int, render: str) -> dict[str, Any]:
    profile = image_profile(name, turns, render)
    calls = Calls()
    adapter_class = ADAPTERS[profile.runtime.adapter_id].load()
    with tempfile.TemporaryDirectory() as out, watched(adapter_class, calls):
        started = time.perf_counter()
        result = Runner(profile, Path(out)).run()
        wall = time.perf_counter() - started
        run_dir = result.artifacts
        images = run_dir / IMAGES
        errors = [(estimate - count) / count for estimate, count in zip(calls.estimated, calls.counted, strict=True)]
        return {
            "profile": name,
            "adapter": profile.runtime.adapter_id,
            "render": render,
            "turns": result.turns,
            "outcome": result.outcome,
            "levels_won": result.levels_won,
            "wall_ms_per_turn": 1000 * wall / max(1, result.turns),
            "folder_bytes": folder_bytes(run_dir),
            "image_files": len(list(images.iterdir())) if images.exists() else 0,
            "image_file_bytes": folder_bytes(images) if images.exists() else 0,
            "checkpoint_bytes": sum(path.stat().st_size for path in run_dir.glob("checkpoints.sqlite3*")),
            "images_sent": calls.images_sent,
            "image_bytes_sent": calls.image_bytes_sent,
            "build_ms_per_call": 1000 * sum(calls.build_seconds) / max(1, len(calls.build_seconds)),
            "calls": len(calls.counted),
            "estimate_mean_error": sum(errors) / max(1, len(errors)),
            "estimate_worst_error": max(errors, key=abs, default=0.0),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--json", action="store_true")
    arguments = parser.parse_args()
    figures = []
    for name in WIRES:
        for render in ("image", "text"):
            print(f"  playing {name} ({render} frames)", file=sys.stderr, flush=True)
            figures.append(play(name, arguments.turns, render))
    if arguments.json:
        print(json.dumps(figures))
        return
    for figure in figures:
        print(json.dumps(asdict_rounded(figure)))


def asdict_rounded(figure: dict[str, Any]) -> dict[str, Any]:
    return {key: round(value, 4) if isinstance(value, float) else value for key, value in figure.items()}


if __name__ == "__main__":
    main()
