"""Damage nobody names (issue 30): a run killed mid-game whose folder is then hurt the way disks and
people hurt folders (a deleted or cut WAL, a truncated database, flipped bytes, a deleted or cut log
or journal, a line written twice). A resume never goes on silently from less than the run did: it
exits 1 with one line naming the record that disagrees, and plays nothing. A run folder that was
only killed still resumes (the kill tests in test_resume.py hold that for every strategy)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from turnstate.adapters.contract import Usage
from turnstate.cli import main
from turnstate.durable.checkpoints import KEY_VARIABLE
from turnstate.durable.layout import CALLS, CHECKPOINT_FILE, EVENTS, JOURNAL
from turnstate.durable.side_effects import Journaled, JournaledEnvironment, JournalError, read_journal
from turnstate.environments import make_environment
from turnstate.session.profile import DEFAULT_PROFILE, load_profile

from .test_resume import killed_run
from .test_run import with_changes

KILLED_AFTER = 24  # accepted turns, the last one's action not yet performed; the WAL holds every checkpoint (SQLite folds it back at 1000 pages)
WAL = CHECKPOINT_FILE + "-wal"


@pytest.fixture(scope="module")
def killed(tmp_path_factory) -> Path:
    """A run of the default profile (8 levels: long enough to kill mid-game) SIGKILLed in a forked
    child after KILLED_AFTER accepted turns, before SQLite folds the WAL back into the database."""
    os.environ.pop(KEY_VARIABLE, None)
    default = load_profile(DEFAULT_PROFILE)
    options = {**default.environment.options, "levels": 8}
    profile = with_changes(default, environment={"options": options}, agent={"max_actions": 1000})
    run_dir = killed_run(profile, tmp_path_factory.mktemp("killed") / "runs", "after_commit", KILLED_AFTER)
    assert (run_dir / WAL).stat().st_size > 0
    return run_dir


@pytest.fixture
def run_dir(killed, tmp_path) -> Path:
    """A copy of the killed run's folder, WAL and all, to damage."""
    copy = tmp_path / "runs" / killed.name
    copy.parent.mkdir(mode=0o700)
    shutil.copytree(killed, copy)
    return copy


def delete(name: str):
    def damage(run_dir: Path) -> None:
        (run_dir / name).unlink()

    return damage


def truncate_database(run_dir: Path) -> None:
    os.truncate(run_dir / CHECKPOINT_FILE, 0)


def cut_wal(run_dir: Path) -> None:
    wal = run_dir / WAL
    os.truncate(wal, wal.stat().st_size // 2)


def flip_wal_bytes(run_dir: Path) -> None:
    wal = run_dir / WAL
    content = bytearray(wal.read_bytes())
    middle = len(content) // 2
    content[middle : middle + 64] = bytes(byte ^ 0xFF for byte in content[middle : middle + 64])
    wal.write_bytes(bytes(content))


def cut_in_half(name: str):
    def damage(run_dir: Path) -> None:
        lines = (run_dir / name).read_bytes().splitlines(keepends=True)
        (run_dir / name).write_bytes(b"".join(lines[: len(lines) // 2]))

    return damage


def last_line_twice(name: str):
    def damage(run_dir: Path) -> None:
        lines = (run_dir / name).read_bytes().splitlines(keepends=True)
        (run_dir / name).write_bytes(b"".join([*lines, lines[-1]]))

    return damage


def one_letter_changed(name: str):
    """A letter of an early line changed for another (the file's length, and each line's, kept)."""

    def damage(run_dir: Path) -> None:
        content = bytearray((run_dir / name).read_bytes())
        at = content.index(b"heading for door")
        content[at] = ord("H")
        (run_dir / name).write_bytes(bytes(content))

    return damage


# (damage, the record the one-line error must name)
DAMAGES = {
    "wal deleted": (delete(WAL), f"{EVENTS} records checkpoint {KILLED_AFTER} (step {KILLED_AFTER})"),
    "wal cut": (cut_wal, f"{EVENTS} records checkpoint {KILLED_AFTER}"),
    "wal bytes flipped": (flip_wal_bytes, f"{EVENTS} records checkpoint {KILLED_AFTER}"),
    "database truncated": (truncate_database, f"{JOURNAL} journals the action of step {KILLED_AFTER - 1}"),
    "events deleted": (delete(EVENTS), f"{EVENTS} is missing, and the checkpoints hold the events through"),
    "events cut in half": (cut_in_half(EVENTS), "and the checkpoints hold the events through"),
    "events altered": (one_letter_changed(EVENTS), "events are not the ones the checkpoints hold"),
    "journal deleted": (delete(JOURNAL), "the checkpoints record 23 actions applied that the journal lacks"),
    "journal cut in half": (cut_in_half(JOURNAL), "actions applied that the journal lacks"),
    "journal line twice": (last_line_twice(JOURNAL), "line 24 journals 'step 23' again (first at line 23)"),
}


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_run_folder_is_refused_in_one_line_naming_what_disagrees_and_nothing_is_played(run_dir, damage):
    hurt, named = DAMAGES[damage]
    hurt(run_dir)
    calls = (run_dir / CALLS).read_bytes()
    steps = sorted(path.name for path in run_dir.glob("step_*.json"))
    resumed = CliRunner().invoke(main, ["resume", str(run_dir)])
    assert resumed.exit_code == 1, resumed.output
    (line,) = resumed.stderr.splitlines()
    assert line.startswith("error: ") and named in line, line
    assert (run_dir / CALLS).read_bytes() == calls  # no provider call was made
    assert sorted(path.name for path in run_dir.glob("step_*.json")) == steps


def test_the_undamaged_copy_resumes_and_wins(run_dir):
    """The damage, not the copy, is what the refusals above refuse."""
    resumed = CliRunner().invoke(main, ["resume", str(run_dir), "--json"])
    assert resumed.exit_code == 0, resumed.output
    meta = json.loads(resumed.stdout)
    assert meta["outcome"] == "win" and meta["resumes"][0]["checkpoint"] == KILLED_AFTER


# -- going on from the records, asked for explicitly (--from-records) --------------------------------

STORE_DAMAGES = ["wal deleted", "wal cut", "wal bytes flipped", "database truncated"]


@pytest.fixture(scope="module")
def undamaged(killed, tmp_path_factory) -> dict:
    """run_meta.json of the killed run resumed as it was: what a resume from the records must match."""
    copy = tmp_path_factory.mktemp("undamaged") / "runs" / killed.name
    copy.parent.mkdir(mode=0o700)
    shutil.copytree(killed, copy)
    resumed = CliRunner().invoke(main, ["resume", str(copy), "--json"])
    assert resumed.exit_code == 0, resumed.output
    return json.loads(resumed.stdout)


@pytest.mark.parametrize("damage", STORE_DAMAGES)
def test_from_records_goes_on_past_a_damaged_store_where_the_run_was_and_ends_as_the_undamaged_resume(
    run_dir, damage, undamaged
):
    """Nothing is played again: the resume starts after the last step the records hold, the game where
    the journal left it, every call counted once; the damaged store is kept aside, and the run's
    records are sound again, checkpoints numbered on from the log's."""
    DAMAGES[damage][0](run_dir)
    resumed = CliRunner().invoke(main, ["resume", str(run_dir), "--from-records", "--json"])
    assert resumed.exit_code == 0, resumed.output
    meta = json.loads(resumed.stdout)
    (resume,) = meta["resumes"]
    assert (resume["checkpoint"], resume["step"]) == (KILLED_AFTER, KILLED_AFTER)
    assert resume["from_records"]["damage"] and resume["continuation"] == "rebuilt from the projection"
    assert (run_dir / resume["from_records"]["set_aside"]).exists()
    assert "went on from the run's records past a damaged checkpoint store" in resumed.stderr
    for field in ("outcome", "accepted_actions", "levels_won", "provider_calls"):
        assert meta[field] == undamaged[field], field
    # every call counted once (the rebuilt window is not the restored one, so the tokens differ a little)
    journal = [json.loads(line) for line in (run_dir / CALLS).read_text().splitlines()]
    assert Usage.from_dict(meta["usage"]) == sum((Usage.from_dict(call["usage"]) for call in journal), Usage())
    assert journaled_keys(run_dir) == journaled_keys(Path(undamaged["run_folder"]))
    checked = check(run_dir)
    assert checked.exit_code == 0, checked.stderr


def journaled_keys(run_dir: Path) -> list[str]:
    return list(read_journal(run_dir / JOURNAL))


@pytest.mark.parametrize("damage", ["events deleted", "events cut in half", "journal deleted"])
def test_from_records_refuses_records_that_cannot_say_how_far_the_run_got(run_dir, damage):
    DAMAGES[damage][0](run_dir)
    DAMAGES["wal deleted"][0](run_dir)  # the store too: else the records agree with it or it refuses
    calls = (run_dir / CALLS).read_bytes()
    resumed = CliRunner().invoke(main, ["resume", str(run_dir), "--from-records"])
    assert resumed.exit_code == 1, resumed.output
    (line,) = resumed.stderr.splitlines()
    assert line.startswith("error: ") and "Traceback" not in resumed.output, line
    assert (run_dir / CALLS).read_bytes() == calls


def test_from_records_on_an_undamaged_run_is_the_ordinary_resume(run_dir):
    resumed = CliRunner().invoke(main, ["resume", str(run_dir), "--from-records", "--json"])
    assert resumed.exit_code == 0, resumed.output
    (resume,) = json.loads(resumed.stdout)["resumes"]
    assert resume["from_records"] is None and resume["continuation"] == "restored"


def test_the_refusal_of_a_damaged_store_names_the_flag_that_goes_on_from_the_records(run_dir):
    delete(WAL)(run_dir)
    resumed = CliRunner().invoke(main, ["resume", str(run_dir)])
    assert resumed.exit_code == 1 and "turnstate resume --from-records" in resumed.stderr


# -- the journal's own rules (turnstate/durable/side_effects.py rule 4) ----------------------------------------


def game():
    return make_environment("beacon_grid", seed=3, options={"levels": 2})


def journal_of(tmp_path: Path, *entries: tuple[str, str]) -> Path:
    path = tmp_path / JOURNAL
    path.write_text("".join(json.dumps({"key": key, "action": action}) + "\n" for key, action in entries))
    return path


def test_settling_a_key_for_another_action_than_the_one_journaled_under_it_is_refused(tmp_path):
    environment = game()
    action, other = environment.actions[:2]
    world, _ = JournaledEnvironment.reopen(environment, journal_of(tmp_path, ("step 1", action)))
    with pytest.raises(JournalError, match=f"step 1 journaled {action!r}, and the checkpoints ask it to perform"):
        world.perform("step 1", other)
    frame, settled = world.perform("step 1", action)
    assert settled and frame.text


def test_a_key_journaled_twice_is_refused_naming_both_lines(tmp_path):
    action = game().actions[0]
    path = journal_of(tmp_path, ("step 1", action), ("step 2", action), ("step 1", action))
    with pytest.raises(JournalError, match=r"line 3 journals 'step 1' again \(first at line 1\)"):
        read_journal(path)


def test_a_journal_missing_what_the_receipts_record_applied_is_refused(tmp_path):
    action = game().actions[0]
    path = journal_of(tmp_path, ("step 1", action))
    with pytest.raises(JournalError, match=r"record 1 actions applied that the journal lacks \(step 2\)"):
        JournaledEnvironment.reopen(game(), path, applied=["step 1", "step 2"])
    path.unlink()
    with pytest.raises(JournalError, match="it is missing"):
        JournaledEnvironment.reopen(game(), path, applied=["step 1"])


# -- events --check holds the log against the checkpoints and the step records ----------------------


def check(run_dir: Path):
    return CliRunner().invoke(main, ["events", str(run_dir), "--check"])


def test_events_check_says_a_log_cut_in_half_was_cut_where_it_said_sound_before(run_dir):
    cut_in_half(EVENTS)(run_dir)
    checked = check(run_dir)
    assert checked.exit_code == 1
    assert "and the checkpoints hold the events through" in checked.stderr and "events were cut" in checked.stderr
    assert "steps have a step record and a checkpoint and no accepted reply in the log" in checked.stderr
    assert "sound" not in checked.output


def test_events_check_says_a_log_altered_under_its_checkpoints_was_altered(run_dir):
    """Each line still parses and numbers on: only the checkpoints' digest of the log tells."""
    one_letter_changed(EVENTS)(run_dir)
    checked = check(run_dir)
    assert checked.exit_code == 1
    assert "events are not the ones the checkpoints hold (their SHA-256 differs): it was altered" in checked.stderr
    assert "sound" not in checked.output


def test_events_check_names_lines_lost_from_the_middle_of_the_log(run_dir):
    lines = (run_dir / EVENTS).read_bytes().splitlines(keepends=True)
    (run_dir / EVENTS).write_bytes(b"".join(lines[:10] + lines[15:]))
    checked = check(run_dir)
    assert checked.exit_code == 1
    assert "line 11: seq 16 follows seq 10 (line 10): 5 events are missing" in checked.stderr


def test_events_check_of_a_killed_runs_whole_log_is_sound(run_dir):
    checked = check(run_dir)
    assert checked.exit_code == 0, checked.stderr
    assert f"{KILLED_AFTER} checkpoints" in checked.stdout


@pytest.mark.parametrize("name", [EVENTS, JOURNAL, CALLS, "transitions.jsonl"])
def test_a_journal_or_log_that_is_a_link_out_of_the_run_folder_is_refused_and_never_written(run_dir, tmp_path, name):
    outside = tmp_path / "outside.jsonl"
    outside.write_bytes((run_dir / name).read_bytes())
    (run_dir / name).unlink()
    (run_dir / name).symlink_to(outside)
    before = outside.read_bytes()
    resumed = CliRunner().invoke(main, ["resume", str(run_dir)])
    assert resumed.exit_code == 1
    (line,) = resumed.stderr.splitlines()
    assert line == (
        f"error: {run_dir / name}: a symbolic link, and a run writes its records in its own folder only; "
        "fix: replace it with the file it points to"
    )
    assert outside.read_bytes() == before


@pytest.mark.parametrize("name", [EVENTS, JOURNAL, CALLS, "transitions.jsonl"])
def test_a_line_torn_by_a_kill_mid_write_is_cut_and_named_and_the_run_resumes_to_its_win(run_dir, name):
    with (run_dir / name).open("ab") as file:
        file.write(b'{"seq": 99')  # what a kill in the middle of the line's write leaves
    resumed = CliRunner().invoke(main, ["resume", str(run_dir), "--json"])
    assert resumed.exit_code == 0, resumed.output
    assert resumed.stderr.splitlines() == [f"note: cut a torn last line (a kill mid-write) off {name}"]
    meta = json.loads(resumed.stdout)
    assert meta["outcome"] == "win" and meta["resumes"][0]["torn_lines"] == [name]
    assert b'{"seq": 99' not in (run_dir / name).read_bytes()
    assert check(run_dir).exit_code == 0


class ExplainedGame:
    """beacon_grid as an environment that records why each action was chosen (RecordingEnvironment)."""

    def __init__(self) -> None:
        self.game = game()
        self.explained: list[tuple[str, str | None]] = []

    def __getattr__(self, name: str):
        return getattr(self.game, name)

    def record_into(self, folder: Path) -> None:
        self.folder = folder

    def step_explained(self, action: str, reasoning: str | None):
        self.explained.append((action, reasoning))
        return self.game.step(action)


def test_the_reasoning_an_action_was_stepped_with_is_journaled_and_replayed_with_it(tmp_path):
    """Rule 5: a recording environment's rebuilt record says again why; a plain one's journal holds no reasoning."""
    recording = ExplainedGame()
    recording.reset()
    action = recording.actions[0]
    world = JournaledEnvironment(recording, tmp_path / JOURNAL)
    world.perform("step 1", action, "the door is to the north")
    world.perform("step 2", action, None)
    world.close()
    assert read_journal(tmp_path / JOURNAL) == {
        "step 1": Journaled(action, "the door is to the north"),
        "step 2": Journaled(action, None),
    }
    rebuilt = ExplainedGame()
    JournaledEnvironment.reopen(rebuilt, tmp_path / JOURNAL, applied=["step 1", "step 2"])
    assert rebuilt.explained == [(action, "the door is to the north"), (action, None)]

    plain = game()
    plain.reset()
    world = JournaledEnvironment(plain, tmp_path / "plain.jsonl")
    world.perform("step 1", action, "never kept")
    world.close()
    assert json.loads((tmp_path / "plain.jsonl").read_text()) == {"key": "step 1", "action": action}
    (tmp_path / "bad.jsonl").write_text(json.dumps({"key": "step 1", "action": action, "reasoning": 7}) + "\n")
    with pytest.raises(JournalError, match="line 1 is not a journaled action"):
        read_journal(tmp_path / "bad.jsonl")
