"""Hostile profile files: whatever a file holds, loading it ends within a second in one line naming
the file, the key path and the fix, never a hang, a traceback or memory growth. Each case once
through load_profile, and through `turnstate validate` and `turnstate run` in a subprocess."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from turnstate.session.profile import DEFAULT_PROFILE, load_profile
from turnstate.session.settings_file import ProfileError

BASE = DEFAULT_PROFILE.read_bytes()
CLI = [sys.executable, "-m", "turnstate.cli"]
# How much longer than the CLI's own start a hostile file may take: a second for the load, and half
# a second for the noise of a shared machine.
CLI_MARGIN_SECONDS = 1.5


def billion_laughs() -> bytes:
    """Nine levels of nine aliases: 1.2 kB that expands to 9^9 values."""
    levels = ["  l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    levels += [f"  l{n}: &l{n} [{', '.join([f'*l{n - 1}'] * 9)}]" for n in range(1, 9)]
    return BASE + b"lol:\n" + "\n".join(levels).encode() + b"\n"


def with_seed(text: str) -> bytes:
    return BASE.replace(b"seed: 0", f"seed: {text}".encode())


# (case id, file bytes, the key path the one line names, a fragment of its problem or fix)
# fmt: off
HOSTILE = [
    ("billion laughs", billion_laughs(), "lol.l1.0", "the alias *l0 (line "),
    ("recursive alias", BASE + b"loop: &loop [*loop]\n", "loop.0", "a profile takes no YAML aliases; fix: write the value out in full where it is used"),
    ("5000-deep list", BASE + b"deep: " + b"[" * 5000 + b"]" * 5000 + b"\n", "deep...", "nested more than 64 levels deep"),
    ("5000-digit integer", with_seed("9" * 5000), "environment.seed", "99999999999999999999... (5000 characters) is too long to be a whole number"),
    ("non-UTF-8 byte", BASE.replace(b"id: local-manual-rolling", b"id: local-manual-rolling # \xff"), "(top level)", "not UTF-8 text: byte 0xff at offset"),
    ("NUL byte", BASE + b"\x00", "(top level)", f"not UTF-8 text: a NUL byte at offset {len(BASE)}"),
]
IN_PROCESS_ONLY = [
    ("100-deep block mapping", BASE + b"deep:\n" + b"".join(b"  " * n + b"a:\n" for n in range(1, 100)) + b"  " * 100 + b"a: 1\n", "deep.a.a.a...", "nested more than 64 levels deep"),
    ("5000-deep mapping", BASE + b"deep: " + b"{a: " * 5000 + b"1" + b"}" * 5000 + b"\n", "deep.a.a.a...", "nested more than 64 levels deep"),
    ("whole number beyond 64 bits", with_seed(str(2**64)), "environment.seed", "18446744073709551616 is out of range (whole numbers here fit in 64 bits); fix: use a smaller number"),
    ("5000-digit hexadecimal", with_seed("0x" + "f" * 5000), "environment.seed", "is too long to be a whole number"),
    ("timestamp with month 13", with_seed("2001-13-45"), "environment.seed", "a value of YAML type timestamp (line 7)"),
    ("int tag on text", with_seed("!!int abc"), "environment.seed", "'abc' cannot be read as a whole number; fix: correct the value, or remove its tag"),
    ("bool tag on text", with_seed("!!bool maybe"), "environment.seed", "'maybe' cannot be read as true or false"),
    ("float tag on text", with_seed("!!float abc"), "environment.seed", "'abc' cannot be read as a number"),
    ("binary value", with_seed("!!binary aGVsbG8="), "environment.seed", "a value of YAML type binary"),
    ("a mapping tagged as text", with_seed("!!str {a: 1}"), "environment.seed", "a value of YAML type str"),
    ("number overflowing to .inf", BASE.replace(b"input: 1.25", b"input: 1e400"), "pricing.input", "1e400 is not a finite number"),
    ("65 KiB of comments", BASE + b"#" * (65 * 1024) + b"\n", "(top level)", "the file is larger than 64 KiB"),
]
# fmt: on
ALL = HOSTILE + IN_PROCESS_ONLY


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Fails the test with TimeoutError if the block runs longer (a hang would stall the suite)."""

    def expire(signum: int, frame: object) -> None:
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def write(tmp_path: Path, name: str, content: bytes) -> Path:
    path = tmp_path / f"{name.replace(' ', '-')}.yaml"
    path.write_bytes(content)
    return path


def assert_names_it(line: str, path: Path, key_path: str, fragment: str) -> None:
    assert line.startswith(f"{path}: {key_path}: "), line
    assert "; fix: " in line
    assert fragment in line


@pytest.mark.parametrize(("content", "key_path", "fragment"), [case[1:] for case in ALL], ids=[case[0] for case in ALL])
def test_a_hostile_profile_is_one_line_naming_the_file_within_a_second(tmp_path, content, key_path, fragment):
    path = write(tmp_path, "hostile", content)
    started = time.monotonic()
    with deadline(5), pytest.raises(ProfileError) as caught:
        load_profile(path)
    assert time.monotonic() - started < 1.0
    (line,) = str(caught.value).splitlines()
    assert_names_it(line, path, key_path, fragment)


@pytest.fixture(scope="module")
def startup(tmp_path_factory) -> dict[str, float]:
    """How long each command takes to refuse an ordinary bad profile: the time to start the CLI,
    which a hostile profile may exceed by less than a second."""
    path = tmp_path_factory.mktemp("ordinary") / "unknown-key.yaml"
    path.write_bytes(BASE + b"colour: blue\n")
    times = {}
    for command in ("validate", "run"):
        started = time.monotonic()
        result = subprocess.run([*CLI, command, str(path)], capture_output=True, text=True, timeout=60)
        times[command] = time.monotonic() - started
        assert result.returncode == 1 and "colour: unknown key" in result.stderr, result.stderr
    return times


def cli(*args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    try:
        result = subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail(f"turnstate {' '.join(args)} still running after 30 s")
    return result, time.monotonic() - started


def test_validate_names_each_hostile_file_in_one_line_and_exits_1_within_a_second_of_starting(tmp_path, startup):
    paths = [write(tmp_path, name, content) for name, content, _, _ in HOSTILE]
    result, elapsed = cli("validate", *map(str, paths))
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == len(HOSTILE), result.stderr
    for line, path, (_, _, key_path, fragment) in zip(lines, paths, HOSTILE, strict=True):
        assert_names_it(line, path, key_path, fragment)
    assert elapsed < startup["validate"] + CLI_MARGIN_SECONDS


@pytest.mark.parametrize(
    ("content", "key_path", "fragment"), [case[1:] for case in HOSTILE], ids=[c[0] for c in HOSTILE]
)
def test_run_refuses_a_hostile_profile_in_one_line_and_exits_1_within_a_second_of_starting(
    tmp_path, startup, content, key_path, fragment
):
    path = write(tmp_path, "hostile", content)
    result, elapsed = cli("run", str(path), "--out", str(tmp_path / "runs"))
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert_names_it(line, path, key_path, fragment)
    assert elapsed < startup["run"] + CLI_MARGIN_SECONDS
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
