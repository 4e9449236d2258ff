"""The README's Python API example runs as written, on the embedded local provider."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_api_example_plays_the_game_to_a_win_and_writes_its_artifacts(tmp_path, monkeypatch):
    section = README.read_text(encoding="utf-8").split("## Python API", 1)[1]
    example = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert example, "the README's Python API section has no python example"
    monkeypatch.chdir(tmp_path)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(example.group(1), "README.md", "exec"), {})
    outcome, actions = printed.getvalue().split()[:2]
    assert outcome == "WIN" and int(actions) > 0
    (run,) = (tmp_path / "runs").iterdir()
    assert (run / "run_meta.json").is_file() and len(list(run.glob("step_*.json"))) == int(actions)
