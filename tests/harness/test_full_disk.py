"""A disk that fills up under a run, and a folder it cannot write (issue 30): one line saying which
file and the fix, never a traceback; run_meta.json says what ended the run, even on the full disk; and
once there is room, the run resumes to its win. Real file systems: a tmpfs of 150 KiB, and a
read-only one (mounting needs root, as CI has; without it these skip, saying so)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from turnstate.cli import main

from .test_resume import long_default_profile

FULL = ("database or disk is full", "No space left on device")  # SQLite's words, the kernel's


@pytest.fixture
def mounted(tmp_path):
    mounts: list[Path] = []

    def mount(options: str) -> Path:
        point = tmp_path / f"mount{len(mounts)}"
        point.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(point)], capture_output=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.decode().strip()}")
        mounts.append(point)
        return point

    yield mount
    for point in mounts:
        subprocess.run(["umount", str(point)], check=False)


@pytest.fixture
def long_profile(tmp_path) -> Path:
    return long_default_profile(tmp_path, levels=8)


def test_a_disk_that_fills_up_ends_the_run_in_one_line_and_run_meta_says_why_and_it_resumes_once_there_is_room(
    mounted, long_profile, tmp_path
):
    full = mounted("size=150k")
    ran = CliRunner().invoke(main, ["run", str(long_profile), "--out", str(full)])
    assert ran.exit_code == 1
    (line,) = ran.stderr.splitlines()
    assert line.startswith("error: ") and "Traceback" not in ran.output
    assert any(words in line for words in FULL), line
    (run_dir,) = full.iterdir()
    meta = json.loads((run_dir / "run_meta.json").read_text())
    assert meta["outcome"] == "crashed" and any(words in meta["failure"] for words in FULL)  # not "running"
    roomy = tmp_path / "roomy"
    roomy.mkdir(mode=0o700)
    shutil.copytree(run_dir, roomy / run_dir.name)  # the room, made
    resumed = CliRunner().invoke(main, ["resume", str(roomy / run_dir.name), "--json"])
    assert resumed.exit_code == 0, resumed.output
    assert json.loads(resumed.stdout)["outcome"] == "win"


def test_a_read_only_out_folder_is_one_line_naming_it_and_the_fix(mounted, long_profile):
    read_only = mounted("ro,size=1m")
    ran = CliRunner().invoke(main, ["run", str(long_profile), "--out", str(read_only)])
    assert ran.exit_code == 1
    (line,) = ran.stderr.splitlines()
    assert line.startswith(f"error: cannot write {read_only}/") and "(Read-only file system)" in line
    assert "fix: make the folder writable, or pass another --out, then run it again" in line
    assert "no run had started" in line
