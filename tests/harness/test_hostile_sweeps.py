"""Hostile sweep files: whatever a sweep file holds (wrong types at each key, unknown keys, bad bytes,
broken YAML, profiles that are missing or invalid, environments the profiles' own checks refuse),
`turnstate sweep` refuses it with one line per problem naming the file, the key path and the fix:
never pydantic's multi-line dump, a traceback, or a line that names no file. Each case once through
load_sweep, and a share of them through the CLI in a subprocess."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from turnstate.session.profile import DEFAULT_PROFILE
from turnstate.sweeps.plan import SweepError, load_sweep

CLI = [sys.executable, "-m", "turnstate.cli"]
ONE = b"id: x\nprofiles: [local-manual-rolling]\n"  # a sweep file that plans, to add one bad key to
INVALID_PROFILE = DEFAULT_PROFILE.read_bytes().replace(b"max_actions: ", b"max_actions: -")  # one problem
DUMP_MARKERS = ("pydantic", "Traceback", "validation error for", "For further information")


def env(entry: bytes) -> bytes:
    return ONE + b"environments: [" + entry + b"]\n"


# (case id, file bytes, the key path its one line names, a fragment of its problem or fix)
# fmt: off
HOSTILE = [
    # pydantic's dump: the profiles' own check of each environment, raised as it came
    ("unknown environment", env(b"{name: no_such_game}"), "environments.0.name", "unknown environment 'no_such_game'"),
    ("path-like environment", env(b"{name: ../evil}"), "environments.0.name", "'../evil' looks like a file path"),
    ("option out of range", env(b"{options: {levels: -3}}"), "environments.0.options", "'levels' must be an integer from 1 to 1000, got -3 (seed 0); fix: "),
    ("option of the wrong type", env(b"{options: {levels: many}}"), "environments.0.options", "got 'many'"),
    ("unknown option", env(b"{options: {colour: red}}"), "environments.0.options", "beacon_grid has no option 'colour'"),
    ("bad option at the second seed's entry", env(b"{name: beacon_grid}, {seeds: [4], options: {width: 0}}"), "environments.1.options", "(seed 4)"),
    # a second line, "Tuple should have at least 1 item ... not 0", for a list that had its item
    ("a profile that is not text", ONE.replace(b"[local-manual-rolling]", b"[5]"), "profiles.0", "Input should be a valid string (got 5); fix: use a text value"),
    ("a profile that is null", ONE.replace(b"[local-manual-rolling]", b"[null]"), "profiles.0", "(got None)"),
    ("an environment that is text", env(b"beacon_grid"), "environments.0", "Input should be a valid dictionary"),
    ("an environment that is null", env(b"null"), "environments.0", "(got None)"),
    ("an environment's unknown key", env(b"{name: beacon_grid, seed: 3}"), "environments.0.seed", "unknown key; fix: did you mean `seeds`? remove it or correct the spelling (allowed here: name, options, seeds)"),
    ("an environment's name that is a number", env(b"{name: 5}"), "environments.0.name", "Input should be a valid string (got 5)"),
    ("options that are a list", env(b"{options: [1]}"), "environments.0.options", "Input should be a valid dictionary (got [1])"),
    ("seeds that are text", env(b"{seeds: abc}"), "environments.0.seeds", "Input should be a valid tuple (got 'abc'); fix: use a list"),
    ("seeds that are empty", env(b"{seeds: []}"), "environments.0.seeds", "at least 1 item"),
    ("a seed that is text", env(b"{seeds: ['1']}"), "environments.0.seeds.0", "Input should be a valid integer (got '1'); fix: use a whole number"),
    ("a seed that is true", env(b"{seeds: [true]}"), "environments.0.seeds.0", "(got True)"),
    ("a seed that is a float", env(b"{seeds: [1.5]}"), "environments.0.seeds.0", "(got 1.5)"),
    # one line each already, kept so
    ("empty file", b"", "(top level)", "must be a mapping of keys; fix: start with `id: ...`"),
    ("only a comment", b"# a sweep\n", "(top level)", "must be a mapping of keys"),
    ("a list at the top", b"- id: x\n- profiles: []\n", "(top level)", "must be a mapping of keys"),
    ("text at the top", b"sweep\n", "(top level)", "must be a mapping of keys"),
    ("non-UTF-8 byte", b"id: x\nprofiles: [\xff]\n", "(top level)", "not UTF-8 text: byte 0xff at offset 17 (line 2); fix: save the file as UTF-8"),
    ("NUL byte", ONE + b"\x00", "(top level)", "a NUL byte at offset"),
    ("UTF-16", ONE.decode().encode("utf-16"), "(top level)", "the file is UTF-16"),
    ("YAML syntax error", b"id: x\nprofiles: [a, b\n", "(top level)", "not valid YAML at line 3, column 1; fix: fix the YAML syntax there"),
    ("a tab as indentation", b"id: x\nprofiles:\n\t- local-manual-rolling\n", "(top level)", "not valid YAML at line 3"),
    ("a control character", b"id: x\x07\nprofiles: [local-manual-rolling]\n", "(top level)", "character #x0007 is not allowed"),
    ("two documents", ONE + b"---\nid: y\n", "(top level)", "not valid YAML"),
    ("a key given twice", b"id: x\nid: y\nprofiles: [local-manual-rolling]\n", "id", "given twice (line 1 and line 2); fix: keep one of them"),
    ("an unknown key", ONE + b"colour: red\n", "colour", "unknown key; fix: remove it or correct the spelling (allowed here: budget, checkpoints, compare, engine, environments, id, profiles, ray_address, repetitions)"),
    ("a key that is a number", ONE + b"1: a\n", "1", "Keys should be strings"),
    ("no id", b"profiles: [local-manual-rolling]\n", "id", "required key is missing; fix: add it"),
    ("an id that is a number", ONE.replace(b"id: x", b"id: 5"), "id", "Input should be a valid string (got 5)"),
    ("an id that is empty", ONE.replace(b"id: x", b"id: ''"), "id", "String should have at least 1 character"),
    ("an id that climbs out", ONE.replace(b"id: x", b"id: ../../etc"), "id", "String should match pattern"),
    ("an id that is the folder above", ONE.replace(b"id: x", b"id: .."), "id", "starting with a letter or digit"),
    ("an id that is an absolute path", ONE.replace(b"id: x", b"id: /tmp/x"), "id", "(got '/tmp/x')"),
    ("an id that is a timestamp", ONE.replace(b"id: x", b"id: 2001-01-01"), "id", "a value of YAML type timestamp (line 1)"),
    ("no profiles", b"id: x\n", "profiles", "required key is missing"),
    ("profiles that are text", ONE.replace(b"[local-manual-rolling]", b"local-manual-rolling"), "profiles", "Input should be a valid tuple"),
    ("profiles that are empty", ONE.replace(b"[local-manual-rolling]", b"[]"), "profiles", "at least 1 item"),
    ("a profile that does not exist", ONE.replace(b"[local-manual-rolling]", b"[nope.yaml]"), "profiles.0 (nope.yaml)", "no such file, nor a shipped profile of that name; fix: pass a profile's path"),
    ("a profile that is a folder", ONE.replace(b"[local-manual-rolling]", b"[/tmp]"), "profiles.0 (/tmp)", "cannot read the file (Is a directory); fix: check the path"),
    ("a profile that is invalid", ONE.replace(b"[local-manual-rolling]", b"[invalid.yaml]"), "profiles.0 (invalid.yaml)", "agent.max_actions: Input should be greater than or equal to 1 (got -"),
    ("a profile that is a sweep file", ONE.replace(b"[local-manual-rolling]", b"[other-sweep.yaml]"), "profiles.0 (other-sweep.yaml)", "this is a sweep file (it has `profiles:`)"),
    ("a profile named twice", ONE.replace(b"[local-manual-rolling]", b"[local-manual-rolling, local-manual-rolling]"), "profiles", "named twice; fix: name each profile once"),
    ("environments that are text", ONE + b"environments: beacon_grid\n", "environments", "Input should be a valid tuple"),
    ("environments that are empty", ONE + b"environments: []\n", "environments", "at least 1 item"),
    ("a seed beyond 64 bits", env(b"{seeds: [99999999999999999999999]}"), "environments.0.seeds.0", "is out of range (whole numbers here fit in 64 bits)"),
    ("repetitions that are text", ONE + b"repetitions: two\n", "repetitions", "Input should be a valid integer (got 'two'); fix: use a whole number"),
    ("repetitions that are 0", ONE + b"repetitions: 0\n", "repetitions", "greater than or equal to 1 (got 0); fix: raise the value"),
    ("repetitions that are 1e12", ONE + b"repetitions: 1e12\n", "repetitions", "Input should be a valid integer"),
    ("repetitions of 5000 digits", ONE + b"repetitions: " + b"9" * 5000 + b"\n", "repetitions", "(5000 characters) is too long to be a whole number"),
    ("repetitions that are .inf", ONE + b"repetitions: .inf\n", "repetitions", ".inf is not a finite number"),
    ("a budget that is null", ONE + b"budget: null\n", "budget", "Input should be a valid dictionary"),
    ("a budget's unknown key", ONE + b"budget: {inflight: 2}\n", "budget.inflight", "unknown key; fix: did you mean `in_flight`? remove it or correct the spelling (allowed here: cost_cap, in_flight)"),
    ("runs in flight beyond the bound", ONE + b"budget: {in_flight: 100000}\n", "budget.in_flight", "less than or equal to 512 (got 100000); fix: lower the value"),
    ("a negative cost cap", ONE + b"budget: {cost_cap: -1}\n", "budget.cost_cap", "raise the value"),
    ("a cost cap that is .nan", ONE + b"budget: {cost_cap: .nan}\n", "budget.cost_cap", ".nan is not a finite number"),
    ("an unknown engine", ONE + b"engine: slurm\n", "engine", "Input should be 'pool' or 'ray' (got 'slurm'); fix: use one of the listed values"),
    ("a ray address that is a list", ONE + b"ray_address: [a]\n", "ray_address", "Input should be a valid string"),
    ("comparisons that are text", ONE + b"compare: a\n", "compare", "Input should be a valid tuple"),
    ("a comparison's side that is a number", ONE + b"compare: [{a: local-manual-rolling, b: 2}]\n", "compare.0.b", "Input should be a valid string (got 2)"),
    ("a comparison without b", ONE + b"compare: [{a: local-manual-rolling}]\n", "compare.0.b", "required key is missing"),
    ("a comparison of a profile not swept", ONE + b"compare: [{a: local-manual-rolling, b: other}]\n", "compare.0.b", "'other' is not a profile of this sweep; fix: use one of local-manual-rolling"),
    ("an alias", b"id: &a x\nprofiles: [*a]\n", "profiles.0", "a profile takes no YAML aliases"),
    ("500-deep list", ONE + b"deep: " + b"[" * 500 + b"]" * 500 + b"\n", "deep...", "nested more than 64 levels deep"),
    ("65 KiB of comments", ONE + b"#" * (65 * 1024) + b"\n", "(top level)", "the file is larger than 64 KiB"),
    ("a profile given as a sweep", DEFAULT_PROFILE.read_bytes(), "(top level)", "this is a profile (it has `runtime:`); fix: run it with `turnstate run"),
]
# fmt: on
THROUGH_THE_CLI = (
    "unknown environment",
    "option out of range",
    "an environment's unknown key",
    "a seed that is text",
    "a profile that is invalid",
    "empty file",
    "non-UTF-8 byte",
    "an id that climbs out",
)


def write(tmp_path: Path, name: str, content: bytes) -> Path:
    """The sweep file, beside the profiles its cases name by a relative path."""
    (tmp_path / "invalid.yaml").write_bytes(INVALID_PROFILE)
    (tmp_path / "other-sweep.yaml").write_bytes(ONE)
    path = tmp_path / (name.replace(" ", "-").replace("'", "") + ".yaml")
    path.write_bytes(content)
    return path


def assert_one_clear_line(text: str, path: Path, key_path: str, fragment: str, prefix: str = "") -> None:
    for marker in DUMP_MARKERS:
        assert marker not in text, text
    (line,) = text.strip().splitlines()
    assert line.startswith(f"{prefix}{path}: {key_path}: "), line
    assert "; fix: " in line, line
    assert fragment in line, line


@pytest.mark.parametrize(
    ("content", "key_path", "fragment"), [case[1:] for case in HOSTILE], ids=[case[0] for case in HOSTILE]
)
def test_a_hostile_sweep_file_is_one_line_naming_the_file_the_key_and_the_fix(tmp_path, content, key_path, fragment):
    path = write(tmp_path, "hostile", content)
    with pytest.raises(SweepError) as caught:
        load_sweep(path)
    assert_one_clear_line(str(caught.value), path, key_path, fragment)


CLI_CASES = [case for case in HOSTILE if case[0] in THROUGH_THE_CLI]


@pytest.mark.parametrize(
    ("content", "key_path", "fragment"), [case[1:] for case in CLI_CASES], ids=[case[0] for case in CLI_CASES]
)
def test_turnstate_sweep_refuses_a_hostile_file_in_one_line_exits_1_and_starts_nothing(
    tmp_path, content, key_path, fragment
):
    path = write(tmp_path, "hostile", content)
    out = tmp_path / "out"
    done = subprocess.run(
        [*CLI, "sweep", str(path), "--out", str(out)], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert done.returncode == 1
    assert done.stdout == ""
    assert_one_clear_line(done.stderr, path, key_path, fragment, prefix="error: ")
    assert not out.exists()


def test_a_file_with_several_problems_is_one_line_for_each_every_line_naming_the_sweep_file(tmp_path):
    nulls = b"".join(f"{key}: null\n".encode() for key in ("id", "profiles", "environments", "budget", "engine"))
    path = write(tmp_path, "nulls", nulls)
    with pytest.raises(SweepError) as caught:
        load_sweep(path)
    lines = str(caught.value).splitlines()
    assert [line.split(": ")[1] for line in lines] == ["id", "profiles", "environments", "budget", "engine"]
    assert all(line.startswith(f"{path}: ") and "; fix: " in line for line in lines)


def test_each_problem_of_an_invalid_profile_is_a_line_naming_the_sweep_file_the_profile_and_the_fix(tmp_path):
    (tmp_path / "worse.yaml").write_bytes(INVALID_PROFILE + b"colour: red\n")
    path = write(tmp_path, "sweep", ONE.replace(b"[local-manual-rolling]", b"[worse.yaml]"))
    with pytest.raises(SweepError) as caught:
        load_sweep(path)
    lines = str(caught.value).splitlines()
    assert len(lines) == 2, lines
    for line, key in zip(lines, ("agent.max_actions", "colour"), strict=True):
        assert line.startswith(f"{path}: profiles.0 (worse.yaml): {tmp_path / 'worse.yaml'}: {key}: "), line
        assert "; fix: " in line
