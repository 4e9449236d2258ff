"""What is installed and whether a profile is valid (`turnstate list` and `turnstate validate`), read
from where validation reads it: the profiles folder, the adapter registry, the strategy records and
the environment registry."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from turnstate.adapters.registry import ADAPTERS
from turnstate.environments import environment_ids, unmet_requirement
from turnstate.reports.text import nested
from turnstate.session.profile import load_profile, resolve_profile, shipped_profiles
from turnstate.session.profile_sections import ClientConfig, CompactionConfig
from turnstate.session.settings_file import ProfileError
from turnstate.strategies import STRATEGIES


def catalog() -> dict[str, list[dict[str, Any]]]:
    """The shipped profiles, the registered adapters with their review status, the strategies with
    their compaction kinds, and the environments."""
    return {
        "profiles": [profile_entry(name, path) for name, path in shipped_profiles().items()],
        "adapters": [
            {
                "id": descriptor.adapter_id,
                "review_status": descriptor.review_status,
                "provider": descriptor.provider,
                "api_surface": descriptor.api_surface,
                "version": descriptor.version,
                "strategies": list(descriptor.strategies),
            }
            for descriptor in ADAPTERS.values()
        ],
        "strategies": [
            {"name": name, "compaction_kinds": list(strategy.specs), "compaction": list(strategy.compaction)}
            for name, strategy in STRATEGIES.items()
        ],
        "environments": [{"id": name} for name in environment_ids()],
    }


def profile_entry(name: str, path: Path) -> dict[str, Any]:
    """A shipped profile as `list` shows it, its settings read from its YAML as written (compaction
    is its runtime.compaction.strategy), not validated: validation imports every adapter's SDK,
    seconds for a listing, and the suite validates every shipped profile."""
    entry: dict[str, Any] = {"name": name, "path": str(path)}
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, yaml.YAMLError) as error:
        return entry | {"error": f"cannot read it ({type(error).__name__})"}
    compaction = nested(data, "runtime", "compaction", "strategy")
    base_url = nested(data, "client", "base_url")
    needs = unmet_requirement(str(nested(data, "environment", "name")))
    return (
        entry
        | ({"needs": needs} if needs else {})
        | {
            "adapter": str(nested(data, "runtime", "adapter_id")),
            "strategy": str(nested(data, "runtime", "strategy")),
            "compaction": str(compaction if compaction is not None else CompactionConfig().strategy),
            "endpoint": str(base_url if base_url is not None else ClientConfig().base_url),
        }
    )


def profile_check(given: Path) -> tuple[dict[str, Any], ProfileError | None]:
    """One profile's validation (a path, or a shipped profile's name): as `validate --json` reports
    it (its file, whether it is valid, and each problem's key, problem and fix), and the error."""
    result: dict[str, Any] = {"profile": str(given), "file": None, "valid": True, "problems": []}
    try:
        result["file"] = str(resolve_profile(given))
        load_profile(result["file"])
    except ProfileError as error:
        problems = [{"key": key or None, "problem": problem, "fix": fix} for key, problem, fix in error.problems]
        return result | {"valid": False, "problems": problems}, error
    return result, None
