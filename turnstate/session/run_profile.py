"""The profile a run folder was started with, and the profile a switch plays it with: what a resume
and a switch hand the session, read from run_meta.json's settings (durable/resume.py reads the rest)."""

from __future__ import annotations

import json
from pathlib import Path

from turnstate.durable.layout import RUN_META
from turnstate.durable.resume import ResumeError
from turnstate.session.profile import Profile, parse_profile
from turnstate.session.profile_sections import EnvironmentConfig
from turnstate.session.settings_file import ProfileError


def run_profile(run_dir: Path) -> Profile:
    """The profile the run was started with, as run_meta.json keeps it (validated, defaults filled)."""
    path = run_dir / RUN_META
    try:
        meta = json.loads(path.read_bytes())
        profile = parse_profile(json.dumps(meta["settings"]), source=str(path))
        overrides = meta.get("overrides") or []
        if not all(isinstance(item, str) for item in overrides):
            raise ValueError("its overrides are not a list of KEY=VALUE texts")
        return profile.overridden(overrides) if overrides else profile
    except FileNotFoundError:
        raise ResumeError(f"{path}: missing; fix: pass the folder of a run (runs/<run-id>/)") from None
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ResumeError(f"{path}: cannot read the run's profile from its settings ({error})") from None
    except ProfileError as error:
        raise ResumeError(f"{path}: the run's settings are not a valid profile: {error}") from None


def switched_profile(run: Profile, profile: Profile) -> tuple[Profile, str | None]:
    """`profile` for a switch of the run started with `run` (run_profile): a switch changes the
    adapter, model or strategy, never the game, so the profile plays the run's environment, whatever
    its own section says (a shipped profile has one); and a note saying so when they differ (None
    when they are the same). A profile that cannot play the run's game so (the game's frames are
    images, and its adapter's API takes none) is a ResumeError naming the key and the fix."""
    environment = run.environment
    if profile.environment == environment:
        return profile, None
    data = {**profile.model_dump(mode="json"), "environment": environment.model_dump(mode="json")}
    note = f"the switch plays the run's game ({_game(environment)}), not the profile's ({_game(profile.environment)})"
    try:
        return parse_profile(json.dumps(data), source=f"profile {profile.id!r} playing the run's game"), note
    except ProfileError as error:
        raise ResumeError(f"cannot switch: {error}") from None


def _game(environment: EnvironmentConfig) -> str:
    options = f", options {json.dumps(environment.options, sort_keys=True)}" if environment.options else ""
    return f"{environment.name}, seed {environment.seed}{options}"
