"""The public ARC-AGI-3 preview games (ls20, ft09) in ../shared/arc-agi-3, and the profiles that play
them on the embedded local provider's recording model (client.local.recording): one per strategy and
compaction variant, each from a shipped local profile with the settings that fit 64 x 64 frames
(about 1,100 estimated tokens each) into a window that compacts many times over a game. The tests
and bench/arc_games.py share them; the files are read where they are, never copied."""

from __future__ import annotations

from pathlib import Path

from turnstate.session.profile import PROFILES_DIR, Profile, load_profile

REPO = Path(__file__).resolve().parents[2]
ARC = REPO.parent / "shared" / "arc-agi-3"  # the games and recordings, where CI has them
RECORDINGS = {"ls20": "ls20-cb3b57cc.jsonl", "ft09": "ft09-9ab2447a.jsonl"}
LEVELS = {"ls20": 7, "ft09": 6}  # each game's win_levels
RECORDED_ACTIONS = {"ls20": 489, "ft09": 164}
WINDOW = 32768  # the local provider's context window: about 28 frames, so no game fits whole
CONTEXT = 16000  # agent.max_context_length: manual_rolling's window, about 14 frames
TRIGGER = 12000  # the compacting variants' threshold: ls20 compacts about 48 times
REASONING = {
    "store": False,
    "include": ["reasoning.encrypted_content"],
    "reasoning": {"effort": "medium", "summary": "auto"},
}
CONTINUOUS = {**REASONING, "reasoning": {**REASONING["reasoning"], "context": "auto"}}
# Each variant, named <strategy>.<compaction>.<wire>: the shipped profile it starts from, and the
# keys it sets (each replaces the section's key whole).
VARIANTS: dict[str, tuple[str, dict[str, dict[str, object]]]] = {
    "manual_rolling.chat": ("local-manual-rolling", {}),
    # The server keeps the chain; `truncation: auto` drops its oldest turns once it outgrows the window.
    "previous_response_id.responses": (
        "local-openai-previous-response-id",
        {"request": {"options": {**REASONING, "store": True, "truncation": "auto"}}},
    ),
    "continuous.none.responses": (
        "local-openai-continuous",
        {"runtime": {"compaction": {"strategy": "none"}}, "request": {"options": CONTINUOUS}},
    ),
    "continuous.native_inline.responses": (
        "local-openai-continuous",
        {
            "request": {
                "options": {**CONTINUOUS, "context_management": [{"type": "compaction", "compact_threshold": TRIGGER}]}
            }
        },
    ),
    "continuous.native_call.messages": (
        "local-anthropic-continuous",
        {"runtime": {"compaction": {"strategy": "native", "trigger_tokens": TRIGGER}}},
    ),
    **{
        f"continuous.harness_summary.{wire}": (
            base,
            {"runtime": {"compaction": {"strategy": "harness_summary", "trigger_tokens": TRIGGER}}},
        )
        for wire, base in (
            ("responses", "local-openai-harness-summary"),
            ("interactions", "local-gemini-harness-summary"),
            ("open_weight", "local-open-source-continuous"),
        )
    },
}


def arc_profile(variant: str, game: str, arc: Path = ARC, **agent: object) -> Profile:
    """The variant's profile playing `game` from `arc` (a folder laid out as ../shared/arc-agi-3) on
    the local provider's recording model; `agent` keys override the agent section's."""
    base, changes = VARIANTS[variant]
    data = load_profile(PROFILES_DIR / f"{base}.yaml").model_dump()
    data["id"] = f"arc-{game}-{variant.replace('.', '-').replace('_', '-')}"
    data["environment"] = {
        "name": "arc_agi3",
        "seed": 0,
        "options": {"game_id": game, "environments_dir": str(arc / "environment_files")},
    }
    recording = str(arc / "recordings" / RECORDINGS[game])
    data["client"]["local"] = {**(data["client"]["local"] or {}), "recording": recording, "context_window": WINDOW}
    data["agent"] |= {"max_actions": 1000, "max_context_length": CONTEXT, **agent}
    for section, values in changes.items():
        data[section] |= values
    return Profile.model_validate(data)
