"""A run killed between its folder's making and its first run_meta.json leaves an orphan (a folder with
a run id for a name, no run_meta.json and no accepted turn); the next `turnstate run` into the same
folder removes it, and never a folder another run is opening, a user's own folder, a damaged run or a
link. The kills are real SIGKILLs of a forked child, at its first write of run_meta.json."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from turnstate.durable.layout import CHECKPOINT_FILE, RUN_META, new_run_id, step_name
from turnstate.durable.writer import ArtifactWriter
from turnstate.session.profile import DEFAULT_PROFILE, load_profile
from turnstate.session.runner import ORPHAN_AGE_SECONDS, Runner, remove_orphans

PROFILE = load_profile(DEFAULT_PROFILE)
CLI = [sys.executable, "-m", "turnstate.cli"]


def opened_until_run_meta(out: Path, then: Callable[[], None]) -> int:
    """A forked child that plays a new run into `out` and calls `then` at the session's first write of
    run_meta.json, before it is written; the child's pid."""
    pid = os.fork()
    if pid == 0:  # the child: never returns to pytest
        try:
            write_json = ArtifactWriter.write_json

            def stop_at_run_meta(writer: ArtifactWriter, name: str, data: object, **options: bool) -> Path:
                if name == RUN_META:
                    then()
                return write_json(writer, name, data, **options)

            ArtifactWriter.write_json = stop_at_run_meta  # type: ignore[method-assign]
            Runner(PROFILE, out).run()
        finally:
            os._exit(3)  # run_meta.json was never written
    return pid


def sigkill_self() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def assert_killed(pid: int) -> None:
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, status


def killed_before_run_meta(out: Path) -> Path:
    """The orphan a run SIGKILLed just before its first run_meta.json leaves in `out`."""
    assert_killed(opened_until_run_meta(out, sigkill_self))
    (orphan,) = out.iterdir()
    assert not (orphan / RUN_META).exists() and (orphan / CHECKPOINT_FILE).is_file()  # made, then killed
    return orphan


def age(*paths: Path) -> None:
    """Make `paths` look unchanged for twice ORPHAN_AGE_SECONDS (the time a rerun may come after)."""
    then = time.time() - 2 * ORPHAN_AGE_SECONDS
    for path in paths:
        os.utime(path, (then, then), follow_symlinks=False)


def run_cli(out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, "run", "--out", str(out)], capture_output=True, text=True, timeout=120)


def test_a_rerun_after_a_kill_before_the_first_run_meta_removes_the_orphan_and_leaves_one_run(tmp_path):
    out = tmp_path / "runs"
    orphan = killed_before_run_meta(out)
    age(orphan)
    done = run_cli(out)
    assert done.returncode == 0, done.stderr
    (run_dir,) = out.iterdir()  # the new run's, and no other
    assert run_dir != orphan
    assert json.loads((run_dir / RUN_META).read_text())["outcome"] == "win"


def test_an_orphan_is_removed_only_once_unchanged_for_the_orphan_age(tmp_path):
    orphan = killed_before_run_meta(tmp_path)
    changed = orphan.stat().st_mtime
    assert remove_orphans(tmp_path, now=changed + ORPHAN_AGE_SECONDS - 1) == []
    assert orphan.is_dir()
    assert remove_orphans(tmp_path, now=changed + ORPHAN_AGE_SECONDS + 1) == [orphan]
    assert not orphan.exists()


def test_a_folder_another_run_is_opening_is_never_removed_however_old_it_looks(tmp_path):
    out = tmp_path / "runs"
    reached, go_on = os.pipe(), os.pipe()

    def wait_for_the_test() -> None:
        os.write(reached[1], b"x")
        os.read(go_on[0], 1)  # until the test lets it go
        sigkill_self()

    opener = opened_until_run_meta(out, wait_for_the_test)
    try:
        assert os.read(reached[0], 1) == b"x"  # the child's opening holds its folder, without run_meta.json
        (opening,) = out.iterdir()
        age(opening)
        done = run_cli(out)
        assert done.returncode == 0, done.stderr
        assert opening.is_dir() and (opening / CHECKPOINT_FILE).is_file()  # left to the run making it
        assert len(list(out.iterdir())) == 2
    finally:
        os.write(go_on[1], b"x")
        assert_killed(opener)
    age(opening)
    done = run_cli(out)  # no opening in flight now: the killed one is an orphan
    assert done.returncode == 0, done.stderr
    assert not opening.exists() and len(list(out.iterdir())) == 2  # the two finished runs


def test_a_users_folders_a_damaged_run_and_links_beside_the_runs_are_never_taken_for_orphans(tmp_path):
    """`--out DIR` may be a folder of the user's: only a folder named as a run id, with no run_meta.json
    and no step record, is an orphan."""
    notes = tmp_path / "notes"
    notes.mkdir()
    damaged = tmp_path / new_run_id(PROFILE.id)  # a run that lost its run_meta.json, not its turns
    damaged.mkdir()
    (damaged / step_name(1)).write_text("{}")
    target = tmp_path / "elsewhere"
    target.mkdir()
    link = tmp_path / new_run_id("linked")
    link.symlink_to(target, target_is_directory=True)
    file = tmp_path / new_run_id("a-file")
    file.write_text("")
    orphan = tmp_path / new_run_id(PROFILE.id + "-2")  # named as new_run_id names a run, as the session does
    orphan.mkdir()
    (orphan / CHECKPOINT_FILE).write_bytes(b"")
    age(notes, damaged, target, link, file, orphan)
    assert remove_orphans(tmp_path) == [orphan]
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(
        path.name for path in (notes, damaged, target, link, file)
    )


def test_a_given_out_folder_stays_where_it_is_with_the_run_inside_it(tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "keep.txt").write_text("the user's")
    inode = out.stat().st_ino
    result = Runner(PROFILE, out).run()
    assert out.stat().st_ino == inode and (out / "keep.txt").read_text() == "the user's"
    assert result.artifacts is not None and result.artifacts.parent == out
    assert (result.artifacts / RUN_META).is_file()
