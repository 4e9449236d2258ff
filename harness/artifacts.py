"""Run artifacts: runs/<run-id>/run_meta.json, step_NNN.json and transitions.jsonl.

Artifacts are for people and downstream tools, so they hold readable projections only. Two rules
are enforced here, at the one place every artifact is written, rather than trusted to each caller:
opaque provider state (encrypted content, signatures, redacted thinking) is dropped by key, and
secret values (API keys) are replaced wherever they appear.
"""

from __future__ import annotations

import json
import secrets as _random
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

OPAQUE_KEYS = frozenset({"encrypted_content", "signature", "thought_signature"})
REDACTED = "[redacted]"


def new_run_id(profile_id: str) -> str:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    return f"{profile_id}-{stamp}-{_random.token_hex(3)}"


def scrub(value: Any) -> Any:
    """A copy of `value` without opaque provider state."""
    if isinstance(value, dict):
        hidden = OPAQUE_KEYS | ({"data"} if value.get("type") == "redacted_thinking" else set())
        return {key: scrub(item) for key, item in value.items() if key not in hidden}
    if isinstance(value, (list, tuple)):
        return [scrub(item) for item in value]
    return value


class ArtifactWriter:
    def __init__(self, root: Path, run_id: str, secrets: tuple[str, ...] = ()) -> None:
        self.path = Path(root) / run_id
        self.path.mkdir(parents=True, exist_ok=False)
        self._secrets = tuple(secret for secret in secrets if secret)
        self._transitions = (self.path / "transitions.jsonl").open("a", encoding="utf-8")

    def write_json(self, name: str, data: Any) -> Path:
        target = self.path / name
        target.write_text(self._render(data, indent=2) + "\n", encoding="utf-8")
        return target

    def write_step(self, index: int, record: dict[str, Any]) -> Path:
        return self.write_json(f"step_{index:03d}.json", record)

    def log_transition(self, record: dict[str, Any]) -> None:
        self._transitions.write(self._render(record) + "\n")

    def close(self) -> None:
        self._transitions.close()

    def _render(self, data: Any, indent: int | None = None) -> str:
        text = json.dumps(scrub(data), indent=indent, ensure_ascii=False)
        for secret in self._secrets:
            text = text.replace(secret, REDACTED)
        return text
