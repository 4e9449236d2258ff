"""The command line: a bad input is one line on stderr and exit 1 (click's own usage errors exit 2),
never a traceback; SIGTERM stops a run as Ctrl-C does, with run_meta.json written."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import openai
import pytest
import yaml
from click.testing import CliRunner, Result

from turnstate.cli import main
from turnstate.durable.artifacts import sent_messages
from turnstate.durable.layout import step_name
from turnstate.local_provider import policy
from turnstate.local_provider.server import LocalProvider
from turnstate.session.profile import DEFAULT_PROFILE
from turnstate.strategies import STRATEGIES

CLI = [sys.executable, "-m", "turnstate.cli"]
REPO = Path(__file__).resolve().parents[2]


def cli(*args: str, timeout: float = 60, **options) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, **options)


def invoke(*args: str) -> Result:
    """The command in-process; an exception other than the command's own exit fails the test."""
    result = CliRunner().invoke(main, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


def assert_one_line_error(returncode: int, stderr: str, *fragments: str) -> None:
    assert returncode == 1, stderr
    assert "Traceback" not in stderr
    (line,) = stderr.strip().splitlines()
    assert line.startswith("error: ")
    for fragment in fragments:
        assert fragment in line


def write_profile(path: Path, **sections: dict) -> Path:
    data = yaml.safe_load(DEFAULT_PROFILE.read_text())
    for section, changes in sections.items():
        data[section] = {**(data.get(section) or {}), **changes}
    path.write_text(yaml.safe_dump(data))
    return path


# validate


def test_validate_exits_0_for_good_and_1_naming_the_key_for_bad(tmp_path):
    bad = write_profile(tmp_path / "bad.yaml", agent={"max_retries": "three"})
    good = cli("validate", str(DEFAULT_PROFILE))
    assert good.returncode == 0, good.stderr
    assert "ok" in good.stdout
    failed = cli("validate", str(DEFAULT_PROFILE), str(bad))
    assert failed.returncode == 1
    assert f"{bad}: agent.max_retries:" in failed.stderr


def test_validate_names_each_profile_that_is_not_utf_8_and_goes_on_to_check_the_rest(tmp_path):
    text = DEFAULT_PROFILE.read_text().replace("id: local-manual-rolling", "id: local-manual-rolling  # café")
    latin1, utf16, last = tmp_path / "latin1.yaml", tmp_path / "utf16.yaml", tmp_path / "last.yaml"
    latin1.write_bytes(text.encode("latin-1"))
    utf16.write_bytes(text.encode("utf-16"))
    last.write_text(text, encoding="utf-8")
    offset = text.index("é")  # Latin-1 spends one byte per character
    line = text.count("\n", 0, offset) + 1
    done = cli("validate", str(latin1), str(utf16), str(last))
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines() == [
        f"{latin1}: (top level): not UTF-8 text: byte 0xe9 at offset {offset} (line {line}); "
        "fix: save the file as UTF-8",
        f"{utf16}: (top level): the file is UTF-16 (it starts with a UTF-16 byte order mark); fix: save the file as UTF-8",
    ]
    assert done.stdout == f"{last}: ok\n"


# run


def test_run_out_under_a_file_is_one_line(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    result = invoke("run", "--out", str(blocker / "runs"))
    assert_one_line_error(result.exit_code, result.stderr, f"--out {blocker / 'runs'}: cannot create the folder")


@contextmanager
def slow_run(tmp_path: Path, seconds_per_reply: float, *, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL):
    """`turnstate run` in a subprocess against a provider that takes `seconds_per_reply` per reply,
    playing 9 levels, so that it is still running when a test signals it; yields (process, out)."""

    def slow_reply(system, messages):
        time.sleep(seconds_per_reply)
        return policy.reply(system, messages)

    with LocalProvider(reply=slow_reply) as provider:
        profile = write_profile(
            tmp_path / "slow.yaml",
            environment={"options": {"levels": 9}},
            agent={"max_actions": 500},
            client={"base_url": provider.openai_base_url, "api_key_env": "TURNSTATE_TEST_KEY"},
        )
        out = tmp_path / "runs"
        env = {**os.environ, "TURNSTATE_TEST_KEY": "sk-test-slow-run"}
        command = [*CLI, "run", str(profile), "--out", str(out)]
        process = subprocess.Popen(command, stdout=stdout, stderr=stderr, text=True, env=env)
        try:
            yield process, out
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()


def wait_for_step(process: subprocess.Popen, out: Path, step: int) -> None:
    deadline = time.monotonic() + 30
    while not list(out.glob(f"*/{step_name(step)}")):
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, f"step {step} was not written within 30 s"
        time.sleep(0.005)


def test_sigterm_stops_a_run_as_ctrl_c_does_and_run_meta_records_it(tmp_path):
    """SIGTERM after the first step must end the run with run_meta.json (outcome interrupted), exit
    130 and no traceback."""
    with slow_run(tmp_path, 0.2, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as (process, out):
        wait_for_step(process, out, 1)
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=30)
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert "interrupted" in stderr
    (run_dir,) = out.iterdir()
    meta = json.loads((run_dir / "run_meta.json").read_text())
    assert meta["outcome"] == "interrupted"
    assert 1 <= meta["accepted_actions"] < 82  # 82 actions win all 9 levels


# serve


def test_serve_on_a_port_already_taken_is_one_line():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = cli("serve", "--port", str(port), timeout=30)
    assert_one_line_error(done.returncode, done.stderr, f"--port {port}: cannot listen on 127.0.0.1:{port}", "fix: ")


@pytest.mark.parametrize("window", ["0", "-5", "255"])
def test_serve_rejects_a_context_window_below_256(window):
    # A subprocess with a timeout: a window that is wrongly accepted starts a server that never returns.
    done = cli("serve", "--context-window", window, timeout=30)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "Invalid value for '--context-window'" in done.stderr and ">=256" in done.stderr


def test_serve_accepts_a_context_window_of_256():
    process = subprocess.Popen([*CLI, "serve", "--context-window", "256"], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        assert process.stdout.readline().startswith("local provider on http://127.0.0.1:")
    finally:
        process.terminate()
        process.communicate(timeout=30)


def test_serve_with_a_rate_answers_429_with_a_retry_after_above_it():
    process = subprocess.Popen([*CLI, "serve", "--requests-per-minute", "60"], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        base_url = line.split("OpenAI-compatible base_url: ")[1].rstrip(")\n")
        client = openai.OpenAI(base_url=base_url, api_key="sk-local", max_retries=0)
        ask = {"model": "local-policy-1", "messages": [{"role": "user", "content": "hello"}]}
        client.chat.completions.create(**ask)  # the bucket holds one request
        with pytest.raises(openai.RateLimitError) as refused:
            client.chat.completions.create(**ask)
        assert 0 < float(refused.value.response.headers["retry-after-ms"]) <= 1000  # one a second
    finally:
        process.terminate()
        process.communicate(timeout=30)


# diagrams


def test_diagrams_check_from_another_folder_says_there_are_none(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = invoke("diagrams", "--check")
    assert_one_line_error(
        result.exit_code, result.stderr, "no diagrams in diagrams; run from the repository root or pass --out"
    )


def test_diagrams_check_of_a_folder_without_dot_files_says_so(tmp_path):
    (tmp_path / "notes.txt").write_text("")
    result = invoke("diagrams", "--check", "--out", str(tmp_path))
    assert_one_line_error(result.exit_code, result.stderr, f"no diagrams in {tmp_path}")


def transition(source: str = "Accepted", trigger: str = "ObservationArrived", dest: str = "AwaitingReply") -> str:
    return json.dumps({"machine": "manual_rolling", "source": source, "trigger": trigger, "dest": dest})


# (the log's text, or None for no log; what the one-line error must say)
# fmt: off
BAD_LOGS = [
    (None, "missing; fix: pass a run folder that `turnstate run` wrote"),
    ("", "no transitions recorded; nothing to draw"),
    (transition() + "\n" + '{"machine": "manual_ro' + "\n" + transition() + "\n", "line 2 is not JSON"),
    (transition() + "\n" + "not json\n", "line 2 is not JSON"),
    ('{"event": "ObservationArrived", "at": 3}\n', "line 1 is not a transition record (needs machine, source, trigger, dest as text)"),
    ('["manual_rolling", "Accepted", "ObservationArrived", "AwaitingReply"]\n', "line 1 is not a transition record"),
    (json.dumps({"machine": "manual_rolling", "source": "Accepted", "trigger": 3, "dest": "AwaitingReply"}) + "\n", "line 1 is not a transition record"),
    (transition() + "\n" + json.dumps({"machine": "chess", "source": "a", "trigger": "b", "dest": "c"}) + "\n", "line 2 names machine 'chess', which is not declared (declared: manual_rolling, previous_response_id, continuous_conversation)"),
    (b"\xff\xfe{}\n", "line 1 is not JSON"),
]
# fmt: on


@pytest.mark.parametrize(("log", "problem"), BAD_LOGS)
def test_diagrams_of_a_run_with_a_missing_torn_or_foreign_log_is_one_line(tmp_path, log, problem):
    if isinstance(log, bytes):
        (tmp_path / "transitions.jsonl").write_bytes(log)
    elif log is not None:
        (tmp_path / "transitions.jsonl").write_text(log)
    result = invoke("diagrams", "--run", str(tmp_path))
    assert_one_line_error(result.exit_code, result.stderr, f"error: {tmp_path / 'transitions.jsonl'}: {problem}")
    assert not (tmp_path / "manual_rolling.svg").exists()


def test_diagrams_of_a_killed_run_skip_its_torn_last_line_with_a_warning(tmp_path):
    log = transition() + "\n" + transition("AwaitingReply", "ProviderReplied", "Provisional") + "\n" + '{"mach'
    (tmp_path / "transitions.jsonl").write_text(log)
    result = invoke("diagrams", "--run", str(tmp_path))
    assert result.exit_code == 0, result.stderr
    assert result.stderr == (
        f"warning: {tmp_path / 'transitions.jsonl'}: line 3 is a half-written last record (a killed run); skipped\n"
    )
    dot = (tmp_path / "manual_rolling.dot").read_text()
    assert "ObservationArrived  ×1 /" in dot and "ProviderReplied  ×1 /" in dot


def test_diagrams_of_a_run_warn_about_transitions_the_table_no_longer_has(tmp_path):
    log = transition() + "\n" + transition("Accepted", "Vanished", "Nowhere") + "\n"
    (tmp_path / "transitions.jsonl").write_text(log)
    result = invoke("diagrams", "--run", str(tmp_path))
    assert result.exit_code == 0, result.stderr
    assert "warning: 1 transitions of manual_rolling are not rows of its current table" in result.stderr
    assert (tmp_path / "manual_rolling.svg").exists()


def harness_summary_run(run_dir: Path, meta: dict | None) -> None:
    """A harness-summary turn that compacted once (with a retry inside Compacting) before its reply."""
    fired = [
        ("Accepted", "ObservationArrived", "AwaitingReply"),
        ("AwaitingReply", "ProviderReplied", "Provisional"),
        ("Provisional", "ActionAccepted", "CompactionScheduled"),
        ("CompactionScheduled", "ObservationArrived", "Compacting_Summarizing"),
        ("Compacting_Summarizing", "ProviderFailed", "Compacting_Summarizing"),
        ("Compacting_Summarizing", "CompactionReplied", "Compacting_Summarized"),
        ("Compacting_Summarized", "Done", "AwaitingReply"),
    ]
    records = [{"machine": "continuous_conversation", "source": s, "trigger": t, "dest": d} for s, t, d in fired]
    (run_dir / "transitions.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))
    if meta is not None:
        (run_dir / "run_meta.json").write_text(json.dumps(meta))


HARNESS_SUMMARY_META = {"strategy": "continuous_conversation", "runtime": {"compaction": {"kind": "harness_summary"}}}


def test_diagrams_of_a_run_draw_only_the_configuration_it_ran_with_its_counts(tmp_path):
    harness_summary_run(tmp_path, HARNESS_SUMMARY_META)
    result = invoke("diagrams", "--run", str(tmp_path))
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
    assert [path.name for path in tmp_path.glob("*.dot")] == ["continuous_conversation.harness_summary.dot"]
    dot = (tmp_path / "continuous_conversation.harness_summary.dot").read_text()
    assert "compaction_call" not in dot and "request_compaction" not in dot  # a machine it could not enter
    assert "Done  ×1 /" in dot  # counted from the nested final state it fired from
    assert "ProviderFailed [is_retryable_at_once &amp; has_retries_left]  ×1" in dot  # inside Summarizing
    assert "ContextOverflowed [can_summarize_overflow]  ×0 /" in dot


def test_diagrams_of_a_run_without_run_meta_draw_every_configuration_with_a_warning(tmp_path):
    harness_summary_run(tmp_path, meta=None)
    result = invoke("diagrams", "--run", str(tmp_path))
    assert result.exit_code == 0, result.stderr
    (warning,) = result.stderr.splitlines()
    assert warning == (
        f"warning: no {tmp_path / 'run_meta.json'} (the run was killed before writing it?), so which compaction it "
        "ran is unknown: drawing every configuration of continuous_conversation"
    )
    dot = (tmp_path / "continuous_conversation.dot").read_text()
    assert "compaction_call" in dot and "Done  ×1 /" in dot


# (run_meta.json's text; what the one-line error must say)
BAD_METAS = [
    ('{"strategy": "continuous_conversa', "not a run's metadata (not JSON)"),
    ("[]", "names no strategy and runtime.compaction.kind turnstate draws"),
    ('{"strategy": "continuous_conversation"}', "names no strategy and runtime.compaction.kind turnstate draws"),
    (
        json.dumps({"strategy": "chess", "runtime": {"compaction": {"kind": "none"}}}),
        "names no strategy and runtime.compaction.kind turnstate draws (it draws: manual_rolling (none), "
        "previous_response_id (none), continuous_conversation (none, native_inline, native_call, harness_summary))",
    ),
    (json.dumps({"strategy": "manual_rolling", "runtime": {"compaction": {"kind": "harness_summary"}}}), "names no"),
]


@pytest.mark.parametrize(("meta", "problem"), BAD_METAS)
def test_diagrams_of_a_run_with_a_broken_or_foreign_run_meta_is_one_line(tmp_path, meta, problem):
    harness_summary_run(tmp_path, meta=None)
    (tmp_path / "run_meta.json").write_text(meta)
    result = invoke("diagrams", "--run", str(tmp_path))
    assert_one_line_error(result.exit_code, result.stderr, f"{tmp_path / 'run_meta.json'}: {problem}")
    assert not list(tmp_path.glob("*.dot"))


def test_diagrams_of_a_run_whose_log_names_another_machine_than_its_meta_is_one_line(tmp_path):
    harness_summary_run(tmp_path, {"strategy": "manual_rolling", "runtime": {"compaction": {"kind": "none"}}})
    result = invoke("diagrams", "--run", str(tmp_path))
    assert_one_line_error(result.exit_code, result.stderr, "line 1 names machine 'continuous_conversation'")


@pytest.mark.parametrize("profile", sorted((REPO / "profiles").glob("*.yaml")), ids=lambda path: path.name)
def test_diagrams_of_a_profile_draw_the_one_configuration_it_assembles(tmp_path, profile):
    from turnstate.machine.diagrams import to_dot
    from turnstate.session.profile import load_profile
    from turnstate.strategies import MACHINES

    loaded = load_profile(profile)
    strategy, kind = loaded.runtime.strategy, loaded.compaction().kind
    name = strategy if len(STRATEGIES[strategy].specs) == 1 else f"{strategy}.{kind}"
    result = invoke("diagrams", "--profile", str(profile), "--out", str(tmp_path))
    assert result.exit_code == 0, result.stderr
    assert [path.name for path in sorted(tmp_path.iterdir())] == [f"{name}.dot", f"{name}.svg"]
    dot = (tmp_path / f"{name}.dot").read_text()
    assert dot == to_dot({name: MACHINES[name]})  # as diagrams/ draws it, without the links to tests
    drawn_machines = {other.name for spec in [MACHINES[name]] for other in spec.nested.values()}
    for other in ("compaction_call", "harness_summary"):  # only the compaction machine it can enter
        assert (f"Compacting: {other}" in dot) == (other in drawn_machines)


def test_diagrams_of_a_profile_default_to_the_current_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = invoke("diagrams", "--profile", str(REPO / "profiles" / "local-xai-continuous.yaml"))
    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "continuous_conversation.native_call.svg").is_file()


def test_diagrams_of_a_profile_that_is_not_one_says_why(tmp_path):
    (tmp_path / "notes.yaml").write_text("- a list\n")
    result = invoke("diagrams", "--profile", str(tmp_path / "notes.yaml"))
    assert result.exit_code == 1
    assert f"{tmp_path / 'notes.yaml'}: (top level): the profile must be a mapping of keys" in result.stderr
    assert "Traceback" not in result.stderr


def test_diagrams_take_one_of_check_profile_and_run(tmp_path):
    result = invoke("diagrams", "--check", "--profile", str(DEFAULT_PROFILE))
    assert result.exit_code == 2
    assert "--check, --profile and --run each draw something else: pass one of them" in result.stderr


@pytest.mark.parametrize("kill_after_steps", [1, 4, 9])
def test_after_sigkill_every_artifact_is_whole_and_the_log_is_not_behind_the_steps(tmp_path, kill_after_steps):
    with slow_run(tmp_path, 0.01) as (process, out):
        wait_for_step(process, out, kill_after_steps)
        process.kill()
        process.wait(timeout=30)
    (run_dir,) = out.iterdir()
    steps = [json.loads(path.read_text()) for path in sorted(run_dir.glob("step_*.json"))]  # none is torn
    assert len(steps) >= kill_after_steps
    log = (run_dir / "transitions.jsonl").read_text()
    whole_lines = log if log.endswith("\n") else log[: log.rfind("\n") + 1]  # a kill may cut the last line
    whole = [json.loads(line) for line in whole_lines.splitlines()]
    for step in steps:  # each names its own lines of the log, which hold what it fired
        first, count = step["transitions"]["first"], step["transitions"]["count"]
        fired = whole[first - 1 : first - 1 + count]
        assert len(fired) == count >= 2, f"step {step['step']}'s transitions are not in the log"
        assert fired[-1]["trigger"] == "ActionAccepted", fired


# show


def test_show_json_prints_a_steps_request_rebuilt_from_the_records_and_names_a_missing_step(tmp_path):
    assert cli("run", "--out", str(tmp_path)).returncode == 0
    (run_dir,) = tmp_path.iterdir()
    shown = invoke("show", str(run_dir), "--step", "5", "--json")
    assert shown.exit_code == 0 and json.loads(shown.output) == sent_messages(run_dir, 5)
    assert json.loads(shown.output)[0]["role"] == "system" and "LEVEL" in json.loads(shown.output)[-1]["content"]
    missing = cli("show", str(run_dir), "--step", "999", "--json")
    assert_one_line_error(missing.returncode, missing.stderr, f"{run_dir} recorded no step 999; its steps are 1-")


def test_show_of_a_step_whose_earlier_record_is_missing_names_that_file(tmp_path):
    step_file(tmp_path, 2, delta(1))
    done = invoke("show", str(tmp_path), "--step", "2")
    assert_one_line_error(done.exit_code, done.stderr, f"{tmp_path / step_name(1)}: missing", "fix:")


# What the terminal shows passes the run's redaction (issue 18)

KEY = "sk-test-terminal-0123456789abcdef"


def key_as_action(system, messages) -> str:
    return f"I will press the key.\nACTION: {KEY}"  # a model tricked into naming the API key as its action


def test_a_reply_that_names_the_api_key_as_its_action_is_redacted_on_the_terminal_as_in_run_meta(tmp_path):
    with LocalProvider(reply=key_as_action) as provider:
        client = {"base_url": provider.openai_base_url, "api_key_env": "TURNSTATE_TEST_KEY"}
        profile = write_profile(tmp_path / "key.yaml", client=client)
        # A wide terminal, so that the summary table prints the failure on one line.
        env = {**os.environ, "TURNSTATE_TEST_KEY": KEY, "COLUMNS": "400"}
        done = cli("run", str(profile), "--out", str(tmp_path / "runs"), env=env)
    assert done.returncode == 1, done.stderr
    assert KEY not in done.stdout + done.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    failure = json.loads((run_dir / "run_meta.json").read_text())["failure"]
    assert failure == "no valid action, retries exhausted (last: unknown action '[redacted]')"
    assert failure in done.stdout  # the summary table shows the failure as run_meta.json has it


def test_a_crash_shows_its_traceback_with_the_key_redacted_and_where_the_run_is_recorded(tmp_path, monkeypatch):
    from turnstate.session import scaffold

    def crash(text, *rest):
        raise RuntimeError(f"cannot read {text!r}")

    monkeypatch.setattr(scaffold, "parse_reply", crash)
    monkeypatch.setenv("TURNSTATE_TEST_KEY", KEY)
    with LocalProvider(reply=key_as_action) as provider:
        client = {"base_url": provider.openai_base_url, "api_key_env": "TURNSTATE_TEST_KEY"}
        result = invoke("run", str(write_profile(tmp_path / "key.yaml", client=client)), "--out", str(tmp_path))
    (run_dir,) = (path for path in tmp_path.iterdir() if path.is_dir())
    assert result.exit_code == 1
    assert KEY not in result.output + result.stderr
    assert (
        "Traceback" in result.stderr
        and "RuntimeError: cannot read 'I will press the key.\\nACTION: [redacted]'" in (result.stderr)
    )
    meta = run_dir / "run_meta.json"
    assert result.stderr.splitlines()[-1] == f"error: the run crashed (RuntimeError); the run is recorded in {meta}"
    assert json.loads(meta.read_text())["outcome"] == "crashed"


# A signal while run_meta.json is written (issue 18)

SIGNALLING_RUN = """
import os, signal, sys
from turnstate.durable.writer import ArtifactWriter
from turnstate.cli import main

meta_signal, step, *arguments = sys.argv[1:]
write_whole, write_step = ArtifactWriter._write_whole, ArtifactWriter.write_step

def write_whole_signalled(self, target, content, **options):
    if target.name == "run_meta.json" and b'"outcome": "running"' not in content:  # the record of its ending
        os.kill(os.getpid(), getattr(signal, meta_signal))
    write_whole(self, target, content, **options)

def write_step_signalled(self, index, record):
    if index == int(step):
        os.kill(os.getpid(), signal.SIGTERM)
    return write_step(self, index, record)

ArtifactWriter._write_whole = write_whole_signalled
ArtifactWriter.write_step = write_step_signalled
main(arguments)
"""


@pytest.mark.parametrize(
    ("meta_signal", "sigterm_at_step", "outcome", "accepted"),
    [
        ("SIGTERM", 0, "max_actions", 3),  # a run that ended, signalled while it writes its record
        ("SIGINT", 2, "interrupted", 2),  # an interrupted run, signalled again while it writes its record
    ],
    ids=["finished run", "interrupted run"],
)
def test_a_signal_while_run_meta_is_written_waits_until_it_is_whole_and_the_terminal_names_it(
    tmp_path, meta_signal, sigterm_at_step, outcome, accepted
):
    profile = write_profile(tmp_path / "short.yaml", agent={"max_actions": 3})
    out = tmp_path / "runs"
    command = [sys.executable, "-c", SIGNALLING_RUN, meta_signal, str(sigterm_at_step), "run", str(profile)]
    done = subprocess.run([*command, "--out", str(out)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 130, done.stderr
    (run_dir,) = out.iterdir()
    meta = run_dir / "run_meta.json"
    assert meta.is_file() and not list(run_dir.glob(".*.tmp"))
    recorded = json.loads(meta.read_text())
    assert (recorded["outcome"], recorded["accepted_actions"]) == (outcome, accepted)
    assert len(list(run_dir.glob("step_*.json"))) == accepted
    assert done.stderr.strip().splitlines() == [f"interrupted; the run is recorded in {meta}"]


def test_an_interrupt_before_the_run_folder_exists_says_nothing_was_recorded(tmp_path, monkeypatch):
    from turnstate.session import session

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(session, "open_endpoint", interrupted)
    result = CliRunner().invoke(main, ["run", "--out", str(tmp_path)])
    assert result.exit_code == 130
    assert result.stderr == "interrupted; no run had started, so nothing was recorded\n"
    assert list(tmp_path.iterdir()) == []


# show on a corrupted run folder (issue 18)


def step_file(run_dir: Path, step: int, request) -> None:
    (run_dir / step_name(step)).write_text(json.dumps({"step": step, "request": request}))


def delta(after_step, dropped=0, added=None) -> dict:
    return {"after_step": after_step, "dropped": dropped, "added": [] if added is None else added}


FIRST = delta(None, added=[{"role": "system", "content": "Play."}, {"role": "user", "content": "frame 1"}])
# (the records of steps 1 and 2 when `show --step 2` reads them; the file and problem the error names)
# fmt: off
CORRUPTED = {
    "after_step points at its own step": ({1: FIRST, 2: delta(2)}, 2, "request.after_step is 2, not null or an earlier step than 2"),
    "after_step points at a later step": ({1: delta(2), 2: delta(1)}, 1, "request.after_step is 2, not null or an earlier step than 1"),
    "after_step is text": ({1: FIRST, 2: delta("1")}, 2, "request.after_step is '1', not null or an earlier step than 2"),
    "after_step is a fraction": ({1: FIRST, 2: delta(1.5)}, 2, "request.after_step is 1.5, not null or an earlier step than 2"),
    "after_step is a boolean": ({1: FIRST, 2: delta(True)}, 2, "request.after_step is True, not null or an earlier step than 2"),
    "after_step is zero": ({1: FIRST, 2: delta(0)}, 2, "request.after_step is 0, not null or an earlier step than 2"),
    "dropped is text": ({1: FIRST, 2: delta(1, dropped="2")}, 2, "request.dropped is '2', not a count of messages"),
    "dropped is negative": ({1: FIRST, 2: delta(1, dropped=-1)}, 2, "request.dropped is -1, not a count of messages"),
    "added is text": ({1: FIRST, 2: delta(1, added="frame")}, 2, "request.added is not a list of messages"),
    "added holds text": ({1: FIRST, 2: delta(1, added=["frame"])}, 2, "request.added is not a list of messages"),
    "request is a list": ({1: FIRST, 2: [1]}, 2, "request is a list, not an object"),
}
# fmt: on


@pytest.mark.parametrize(("records", "bad_step", "problem"), CORRUPTED.values(), ids=CORRUPTED.keys())
def test_show_on_a_corrupted_step_record_is_one_line_naming_the_file_and_the_fix(tmp_path, records, bad_step, problem):
    for step, request in records.items():
        step_file(tmp_path, step, request)
    done = cli("show", str(tmp_path), "--step", "2", timeout=30)  # a chain that loops must not hang
    assert_one_line_error(
        done.returncode,
        done.stderr,
        f"{tmp_path / step_name(bad_step)}: {problem} (a corrupted record); fix: restore the run folder",
    )
