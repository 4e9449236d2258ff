"""The shipped llama-server profiles against a real llama.cpp llama-server with SmolLM2-135M (issue 31):
per profile and stream setting, the outcome, turns, tokens, the share of prompt tokens the server's
cache served, wall time, output tokens per second of provider time, and the harness's share of the
wall (wall less provider time). Figures are printed (or JSON with --json), never asserted.

Starts its own server through tools/llama_server.py (built once into the cache; `python
tools/llama_server.py build` first on a fresh machine), with the template that renders thinking.

    python bench/real_server.py [--actions 40] [--json]     # about 5 minutes on one server thread
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))

from llama_server import running_server  # noqa: E402 - beside the repository, not installed

from turnstate.session.profile import PROFILES_DIR, Profile, load_profile  # noqa: E402
from turnstate.session.runner import Runner  # noqa: E402

PROFILES = (
    "llama-chat-manual-rolling",
    "llama-open-weight-continuous",
    "llama-responses-continuous",
    "llama-messages-continuous",
)


def play(name: str, stream: bool, actions: int, base_url: str) -> dict[str, Any]:
    os.environ["LLAMA_BASE_URL"] = base_url + ("" if "messages" in name else "/v1")
    data = load_profile(PROFILES_DIR / f"{name}.yaml").model_dump()
    data["agent"]["max_actions"] = actions
    data["request"]["stream"] = stream
    with tempfile.TemporaryDirectory() as out:
        result = Runner(Profile.model_validate(data), Path(out)).run()
        meta = json.loads((result.artifacts / "run_meta.json").read_text())
    usage, wall, provider = meta["usage"], meta["wall_seconds"], meta["provider_seconds"]
    return {
        "profile": name,
        "stream": stream,
        "outcome": meta["outcome"],
        "failure": meta.get("failure"),
        "turns": meta["turns"],
        "accepted_actions": meta["accepted_actions"],
        "provider_calls": meta["provider_calls"],
        "input_tokens": usage["input_tokens"],
        "cached_share": usage["cached_input_tokens"] / usage["input_tokens"] if usage["input_tokens"] else 0.0,
        "output_tokens": usage["output_tokens"],
        "wall_seconds": wall,
        "output_tokens_per_second": usage["output_tokens"] / provider if provider else 0.0,
        "harness_share": (wall - provider) / wall if wall else 0.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--actions", type=int, default=40)
    parser.add_argument("--json", action="store_true")
    arguments = parser.parse_args()
    os.environ.setdefault("LLAMA_KEY", "x")
    with running_server(tools=True) as server:
        figures = [
            play(name, stream, arguments.actions, server.base_url) for name in PROFILES for stream in (False, True)
        ]
    if arguments.json:
        print(json.dumps(figures))
        return
    print(
        "| profile | stream | outcome | turns (accepted) | calls | tokens in / out | cached | wall | out tok/s | harness |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for row in figures:
        print(
            f"| {row['profile']} | {'yes' if row['stream'] else 'no'} | {row['outcome']} | {row['turns']} "
            f"({row['accepted_actions']}) | {row['provider_calls']} | {row['input_tokens']} / {row['output_tokens']} | "
            f"{row['cached_share']:.1%} | {row['wall_seconds']:.1f} s | {row['output_tokens_per_second']:.1f} | "
            f"{row['harness_share']:.2%} |"
        )


if __name__ == "__main__":
    main()
