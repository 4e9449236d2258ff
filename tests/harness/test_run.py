"""End-to-end runs from profiles on the embedded local provider: real SDK, real HTTP, real files."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from turnstate.durable import redaction
from turnstate.durable.artifacts import sent_messages, step_transitions
from turnstate.local_provider.exchange import MALFORMED_REPLY
from turnstate.local_provider.faults import Fault
from turnstate.local_provider.messages import COMPACTION_CONTENT
from turnstate.local_provider.server import INVALID_API_KEY, LocalProvider
from turnstate.session.interrupts import interruptible
from turnstate.session.profile import DEFAULT_PROFILE, PROFILES_DIR, Profile, load_profile
from turnstate.session.profile_sections import LocalProviderConfig
from turnstate.session.runner import Runner
from turnstate.strategies import manual_rolling
from turnstate.strategies.state import TurnSpan
from turnstate.strategies.summary import SUMMARY_INSTRUCTION, bridge_text

DEFAULT = load_profile(DEFAULT_PROFILE)


def with_changes(profile: Profile, **sections: dict) -> Profile:
    """The profile with some sections' keys changed, validated again as a whole."""
    data = profile.model_dump()
    for section, changes in sections.items():
        data[section] = {**(data[section] or {}), **changes}
    return Profile.model_validate(data)


def faults(*scheduled: tuple[int, str]) -> dict:
    return {"local": {"faults": [{"at": at, "kind": kind} for at, kind in scheduled]}}


def read_steps(run_dir: Path) -> list[dict]:
    """The step records, each with the request it sent rebuilt from the records (`messages_sent`)."""
    steps = [json.loads(path.read_text()) for path in sorted(run_dir.glob("step_*.json"))]
    return [step | {"messages_sent": sent_messages(run_dir, step["step"])} for step in steps]


def fired(run_dir: Path) -> list[tuple[str, str, str]]:
    """The (source, trigger, dest) of every transition in the run's log, in order."""
    lines = (run_dir / "transitions.jsonl").read_text().splitlines()
    return [(record["source"], record["trigger"], record["dest"]) for record in map(json.loads, lines)]


def read_meta(run_dir: Path) -> dict:
    return json.loads((run_dir / "run_meta.json").read_text())


def test_the_default_profile_runs_from_the_command_line_and_writes_artifacts(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "turnstate.cli", "run", "--out", str(tmp_path)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "outcome" in done.stdout and "win" in done.stdout
    (run_dir,) = tmp_path.iterdir()
    meta = read_meta(run_dir)
    assert meta["outcome"] == "win"
    assert meta["adapter_id"] == "openai.chat_completions.v1"
    assert meta["strategy"] == "manual_rolling"
    assert meta["config_id"] == "local-manual-rolling"
    assert meta["implementation_path"] == "adapters/chat_completions.py"
    assert meta["review_status"] == "unreviewed"
    assert meta["harness_commit"] is None
    steps = read_steps(run_dir)
    assert len(steps) == meta["accepted_actions"] == meta["turns"] > 0
    assert (run_dir / "transitions.jsonl").read_text().count("\n") >= 3 * len(steps)


def test_the_harness_commit_comes_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("ARC_HARNESS_COMMIT_SHA", "0123abc")
    result = Runner(with_changes(DEFAULT, agent={"max_actions": 1}), tmp_path).run()
    assert read_meta(result.artifacts)["harness_commit"] == "0123abc"


def test_usage_is_counted_once_per_call_and_the_steps_add_up_to_the_total(tmp_path):
    # A wide window, so that prompts pass OpenAI's 1,024-token caching minimum and prefixes stay stable.
    result = Runner(with_changes(DEFAULT, agent={"max_context_length": 4000}), tmp_path).run()
    steps = read_steps(result.artifacts)
    meta = read_meta(result.artifacts)
    for key in ("input_tokens", "cached_input_tokens", "output_tokens"):
        assert sum(step["usage"][key] for step in steps) == meta["usage"][key]
    assert meta["usage"]["cached_input_tokens"] > 0  # the replayed window is a cached prefix
    assert meta["cost_estimate"] == pytest.approx(
        (meta["usage"]["input_tokens"] * 1.25 + meta["usage"]["output_tokens"] * 10.0) / 1_000_000
    )


def test_the_run_wins_only_because_the_carry_forward_notes_survive_the_window(tmp_path, monkeypatch):
    monkeypatch.setattr(manual_rolling, "CARRY_FORWARD_INSTRUCTION", "Only your visible replies are carried.")
    forgetful = Runner(with_changes(DEFAULT, agent={"max_actions": 40}), tmp_path / "forgetful").run()
    assert forgetful.outcome == "max_actions"
    assert forgetful.levels_won < 3
    monkeypatch.undo()
    remembering = Runner(DEFAULT, tmp_path / "notes").run()
    assert remembering.outcome == "win"
    early_frame = read_steps(remembering.artifacts)[-1]["messages_sent"][1]["content"]
    assert "BEACON (level 3): dark" in early_frame  # the beacon frame itself had left the window


def test_a_game_over_frame_is_buffered_and_replayed_before_the_reset_frame(tmp_path, monkeypatch):
    monkeypatch.setattr(manual_rolling, "CARRY_FORWARD_INSTRUCTION", "Only your visible replies are carried.")
    result = Runner(with_changes(DEFAULT, agent={"max_actions": 40}), tmp_path).run()
    assert ("Accepted", "InputBuffered", "Accepted") in fired(result.artifacts)
    after_game_over = next(
        step for step in read_steps(result.artifacts) if "WRONG DOOR" in step["messages_sent"][-1]["content"]
    )
    last_input = after_game_over["messages_sent"][-1]["content"]
    assert last_input.index("STATE GAME_OVER") < last_input.index("STATE NOT_FINISHED")


def test_a_429_and_a_500_are_retried_from_the_accepted_state_after_a_backoff(tmp_path, clock):
    profile = with_changes(DEFAULT, client=faults((2, "rate_limit"), (3, "server_error")))
    result = Runner(profile, tmp_path, sleep=clock.sleep).run()
    assert result.outcome == "win"
    assert result.failed_attempts == 2
    step_2 = read_steps(result.artifacts)[1]
    assert [retry["outcome"] for retry in step_2["retries"]] == ["transient", "transient"]
    assert [retry["diagnostics"]["status"] for retry in step_2["retries"]] == [429, 500]
    triggers = [(t["source"], t["trigger"], t["dest"]) for t in step_transitions(result.artifacts, step_2)]
    assert triggers.count(("AwaitingReply", "ProviderFailed", "BackingOff")) == 2
    assert triggers.count(("BackingOff", "BackoffElapsed", "AwaitingReply")) == 2
    first, second = clock.slept  # base 0.25 s then 0.5 s, each with up to half taken off by jitter
    assert 0.125 <= first <= 0.25 and 0.25 <= second <= 0.5
    assert [retry["waited_seconds"] for retry in step_2["retries"]] == [round(first, 3), round(second, 3)]


def test_a_429_asking_for_a_second_is_waited_out_and_then_served(tmp_path, clock, monkeypatch):
    monkeypatch.setenv("TURNSTATE_TEST_KEY", "test-key")
    with LocalProvider(faults=[Fault(at=1, kind="rate_limit", retry_after_seconds=1.0)], clock=clock.now) as provider:
        profile = with_changes(
            DEFAULT,
            client={"base_url": provider.openai_base_url, "api_key_env": "TURNSTATE_TEST_KEY"},
            agent={"max_actions": 2},
        )
        result = Runner(profile, tmp_path, sleep=clock.sleep).run()
    assert result.accepted_actions == 2 and result.failed_attempts == 1
    assert clock.slept == [1.0]  # the provider's Retry-After, not the 0.25 s step


def test_a_server_that_is_not_there_fails_closed_naming_its_url_and_why(tmp_path, clock, monkeypatch):
    monkeypatch.setenv("TURNSTATE_TEST_KEY", "x")
    with socket.socket() as unused:  # a port nothing listens on: bound, never listening
        unused.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{unused.getsockname()[1]}/v1"
        profile = with_changes(DEFAULT, client={"base_url": url, "api_key_env": "TURNSTATE_TEST_KEY"})
        result = Runner(profile, tmp_path, sleep=clock.sleep).run()
    assert result.outcome == "failed_closed"
    assert result.failure == (
        f"transient provider failure (connection refused at {url}/chat/completions), retries exhausted"
    )


def test_exhausted_transient_failures_fail_closed_with_every_attempt_recorded(tmp_path, clock):
    profile = with_changes(DEFAULT, client=faults(*[(at, "overloaded") for at in (1, 2, 3, 4)]))
    result = Runner(profile, tmp_path, sleep=clock.sleep).run()
    assert result.outcome == "failed_closed" and "retries exhausted" in result.failure
    assert len(clock.slept) == 3
    record = json.loads((result.artifacts / "failed_turn.json").read_text())
    assert [attempt["diagnostics"]["status"] for attempt in record["attempts"]] == [503] * 4
    assert read_meta(result.artifacts)["provider_calls"] == 4


def test_a_reply_that_cannot_be_read_is_retried_and_the_run_goes_on(tmp_path, clock):
    profile = with_changes(DEFAULT, client=faults((1, "html_page"), (2, "garbled"), (3, "null_message")))
    result = Runner(profile, tmp_path, sleep=clock.sleep).run()
    assert result.outcome == "win"
    retries = read_steps(result.artifacts)[0]["retries"]
    assert [retry["outcome"] for retry in retries] == ["transient"] * 3
    # Streamed (the default profile): the HTML page holds no event at all; the others break mid-way.
    assert [retry["diagnostics"]["error_class"] for retry in retries] == [
        "IncompleteStream",
        "MalformedReply",
        "MalformedReply",
    ]
    assert read_meta(result.artifacts)["provider_calls"] == result.turns + 3


def test_broken_replies_until_the_retries_run_out_fail_closed_cleanly_and_keep_their_usage(tmp_path, clock):
    profile = with_changes(DEFAULT, client=faults(*[(at, "empty_choices") for at in (2, 3, 4, 5)]))
    result = Runner(profile, tmp_path, sleep=clock.sleep).run()
    assert result.outcome == "failed_closed"
    meta = read_meta(result.artifacts)
    assert meta["provider_calls"] == 5 and meta["accepted_actions"] == 1
    assert meta["unattributed_usage"]["input_tokens"] > 0  # the broken replies' usage is billed


def test_an_invalid_action_is_retried_and_its_usage_billed_to_the_accepted_step(tmp_path):
    profile = with_changes(DEFAULT, client=faults((1, "malformed")))
    result = Runner(profile, tmp_path).run()
    first = read_steps(result.artifacts)[0]
    (retry,) = first["retries"]
    assert retry["outcome"] == "action_rejected"
    assert "no 'ACTION: <name>' line" in retry["problem"]
    assert first["usage"]["input_tokens"] == retry["usage"]["input_tokens"] * 2  # same request twice
    assert result.outcome == "win"


def test_exhausted_retries_fail_closed_and_keep_every_failed_attempts_usage(tmp_path):
    profile = with_changes(DEFAULT, client=faults(*[(at, "malformed") for at in (3, 4, 5, 6)]))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "turnstate.cli",
            "run",
            str(_write(tmp_path, profile)),
            "--out",
            str(tmp_path / "runs"),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1
    assert "failed_closed" in done.stdout
    (run_dir,) = (tmp_path / "runs").iterdir()
    meta = read_meta(run_dir)
    assert meta["outcome"] == "failed_closed"
    assert "retries exhausted" in meta["failure"]
    assert meta["turns"] == 3
    assert meta["accepted_actions"] == 2 and len(read_steps(run_dir)) == 2  # no failed step is fabricated
    assert meta["provider_calls"] == 6
    assert meta["unattributed_usage"]["input_tokens"] > 0
    assert (
        meta["usage"]["input_tokens"]
        == sum(s["usage"]["input_tokens"] for s in read_steps(run_dir)) + meta["unattributed_usage"]["input_tokens"]
    )


def test_after_failing_closed_the_last_accepted_state_is_intact(tmp_path):
    profile = with_changes(DEFAULT, client=faults(*[(at, "malformed") for at in (3, 4, 5, 6)]))
    result = Runner(profile, tmp_path).run()
    assert result.outcome == "failed_closed"
    state = result.accepted_state
    last_step = read_steps(result.artifacts)[-1]
    assert state.items[-1] == {"role": "assistant", "content": last_step["response_text"]}
    assert state.items[-2] == last_step["messages_sent"][-1]
    assert "I am not sure what to do." not in state.to_json()  # no rejected reply leaked in
    assert len(state.turns) == 2 and state.pending == ()


def test_a_provider_overflow_drops_the_oldest_turn_and_the_run_goes_on(tmp_path):
    # A provider window below the harness's budget is refused by validation; built past it on purpose,
    # to stand for a provider that counts more tokens than the estimate.
    smaller_window = DEFAULT.client.model_copy(update={"local": LocalProviderConfig(context_window=600)})
    result = Runner(DEFAULT.model_copy(update={"client": smaller_window}), tmp_path).run()
    assert ("AwaitingReply", "ContextOverflowed", "AwaitingReply") in fired(result.artifacts)
    assert result.outcome == "win"


def test_a_remote_endpoint_reads_its_key_from_the_environment_and_never_writes_it(tmp_path, monkeypatch):
    secret = "sk-test-DO-NOT-WRITE-4242"
    monkeypatch.setenv("TURNSTATE_TEST_KEY", secret)
    # The model repeats the key it was sent (a leak_key fault), so an artifact would hold it unless redacted.
    with LocalProvider(faults=[Fault(at=2, kind="leak_key")]) as provider:
        profile = with_changes(
            DEFAULT,
            client={"base_url": provider.openai_base_url, "api_key_env": "TURNSTATE_TEST_KEY"},
            agent={"max_actions": 5},
        )
        result = Runner(profile, tmp_path).run()
    assert result.accepted_actions == 5
    for name, text in artifact_texts(result.artifacts).items():
        assert secret not in text, name
    assert "Authorization: Bearer [redacted]" in read_steps(result.artifacts)[1]["response_text"]
    assert read_meta(result.artifacts)["settings"]["client"]["api_key_env"] == "TURNSTATE_TEST_KEY"


def test_a_missing_key_variable_is_a_clear_error(tmp_path):
    profile = with_changes(
        DEFAULT, client={"base_url": "http://127.0.0.1:9/v1", "api_key_env": "TURNSTATE_UNSET_KEY_VAR"}
    )
    done = subprocess.run(
        [sys.executable, "-m", "turnstate.cli", "run", str(_write(tmp_path, profile)), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1
    assert "TURNSTATE_UNSET_KEY_VAR, which is not set" in done.stderr


def _write(tmp_path: Path, profile: Profile) -> Path:
    import yaml

    path = tmp_path / "profile.yaml"
    path.write_text(yaml.safe_dump(profile.model_dump(mode="json", exclude_none=True)))
    return path


def test_a_crash_mid_run_still_writes_run_meta_with_what_was_accepted(tmp_path):
    calls = []

    def on_step(step):
        calls.append(step)
        if step.step == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        Runner(DEFAULT, tmp_path, on_step=on_step).run()
    (run_dir,) = tmp_path.iterdir()
    meta = read_meta(run_dir)
    assert meta["outcome"] == "interrupted"
    assert meta["failure"] == "KeyboardInterrupt"
    assert meta["accepted_actions"] == 3 == len(read_steps(run_dir))
    assert meta["usage"]["input_tokens"] == sum(step["usage"]["input_tokens"] for step in read_steps(run_dir))


def test_an_interrupt_a_finalizer_swallows_still_stops_the_run_at_its_next_turn_and_prints_nothing(tmp_path, capfd):
    """The signal lands while the garbage collector closes a generator (a streamed HTTP body, in the
    sweep where this was seen): Python cannot raise it there and would print a traceback and play on."""

    def closing_body():
        try:
            yield
        finally:
            os.kill(os.getpid(), signal.SIGTERM)  # handled here, inside the finalizer
            time.sleep(0.01)

    def on_step(step):
        if step.step == 3:
            body = closing_body()
            next(body)
            del body  # closed now, by its finalizer: the KeyboardInterrupt cannot leave it

    with interruptible(signal.SIGTERM), pytest.raises(KeyboardInterrupt):
        Runner(DEFAULT, tmp_path, on_step=on_step).run()
    (run_dir,) = tmp_path.iterdir()
    meta = read_meta(run_dir)
    assert (meta["outcome"], meta["accepted_actions"]) == ("interrupted", 3)
    assert "Traceback" not in capfd.readouterr().err
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # put back


def test_the_step_record_shows_the_accepted_reply_never_a_rejected_one(tmp_path):
    result = Runner(with_changes(DEFAULT, client=faults((1, "malformed"))), tmp_path).run()
    first = read_steps(result.artifacts)[0]
    (rejected,) = first["retries"]
    assert rejected["response_text"] == MALFORMED_REPLY
    assert first["response_text"] != MALFORMED_REPLY and f"ACTION: {first['action']}" in first["response_text"]
    assert first["messages_sent"][-1]["content"].startswith("LEVEL 1/")


def test_refused_and_truncated_attempts_are_billed_to_the_step_that_follows(tmp_path):
    result = Runner(with_changes(DEFAULT, client=faults((1, "refusal"), (2, "truncation"))), tmp_path).run()
    first = read_steps(result.artifacts)[0]
    refused, truncated = first["retries"]
    assert (refused["outcome"], truncated["outcome"]) == ("refusal", "truncated")
    same_request = refused["usage"]["input_tokens"]
    assert same_request > 0 and truncated["usage"]["input_tokens"] == same_request
    assert truncated["usage"]["output_tokens"] > 0
    assert first["usage"]["input_tokens"] == 3 * same_request  # refusal + truncation + the accepted reply
    assert first["usage"]["output_tokens"] > truncated["usage"]["output_tokens"]
    meta = read_meta(result.artifacts)
    assert meta["provider_calls"] == meta["turns"] + 2
    assert meta["usage"]["input_tokens"] == sum(step["usage"]["input_tokens"] for step in read_steps(result.artifacts))


def test_a_turn_that_fails_closed_leaves_its_attempts_in_a_record_of_their_own(tmp_path, monkeypatch):
    monkeypatch.setenv("TURNSTATE_TEST_KEY", INVALID_API_KEY)
    with LocalProvider() as provider:
        profile = with_changes(
            DEFAULT, client={"base_url": provider.openai_base_url, "api_key_env": "TURNSTATE_TEST_KEY"}
        )
        result = Runner(profile, tmp_path).run()
    assert result.outcome == "failed_closed"
    meta = read_meta(result.artifacts)
    assert meta["failed_turn"] == "failed_turn.json"
    record_text = (result.artifacts / "failed_turn.json").read_text()
    record = json.loads(record_text)
    (attempt,) = record["attempts"]
    assert attempt["outcome"] == "fatal"
    assert attempt["diagnostics"] == {
        "error_class": "AuthenticationError",
        "status": 401,
        "error_type": "invalid_request_error",
        "code": "invalid_api_key",
        "request_id": None,
    }
    assert "Incorrect API key" not in record_text and INVALID_API_KEY not in record_text  # never the message
    assert record["failure"] == meta["failure"] and record["turn"] == 1


def test_a_run_that_does_not_fail_names_no_failed_turn(tmp_path):
    result = Runner(with_changes(DEFAULT, agent={"max_actions": 2}), tmp_path).run()
    assert read_meta(result.artifacts)["failed_turn"] is None
    assert not (result.artifacts / "failed_turn.json").exists()


# OpenAI Responses on the local provider: the strategies that carry opaque provider state.

CONTINUOUS = load_profile(PROFILES_DIR / "local-openai-continuous.yaml")
PREVIOUS_RESPONSE_ID = load_profile(PROFILES_DIR / "local-openai-previous-response-id.yaml")
XAI_CONTINUOUS = load_profile(PROFILES_DIR / "local-xai-continuous.yaml")
ANTHROPIC_CONTINUOUS = load_profile(PROFILES_DIR / "local-anthropic-continuous.yaml")
HARNESS_SUMMARY = load_profile(PROFILES_DIR / "local-openai-harness-summary.yaml")
OPEN_SOURCE = load_profile(PROFILES_DIR / "local-open-source-continuous.yaml")
DEEPSEEK = load_profile(PROFILES_DIR / "local-deepseek-continuous.yaml")
GEMINI = load_profile(PROFILES_DIR / "local-gemini-harness-summary.yaml")


def artifact_texts(run_dir: Path) -> dict[str, str]:
    """Every file of a run folder as text, the checkpoint store's binary pages included (what any
    secret or opaque value, all ASCII, would show as there), and the files of its subfolders."""
    return {
        str(path.relative_to(run_dir)): path.read_bytes().decode("utf-8", "replace")
        for path in run_dir.rglob("*")
        if path.is_file()
    }


@pytest.mark.parametrize(
    "profile",
    [CONTINUOUS, PREVIOUS_RESPONSE_ID, XAI_CONTINUOUS, ANTHROPIC_CONTINUOUS, HARNESS_SUMMARY, GEMINI],
    ids=lambda profile: profile.id,
)
def test_a_native_state_profile_wins_and_no_opaque_state_reaches_an_artifact(tmp_path, profile):
    result = Runner(profile, tmp_path).run()
    assert result.outcome == "win" and result.levels_won == 3
    opaque = [
        str(part.get("encrypted_content") or part.get("signature"))
        for item in result.accepted_state.items
        for part in [item, *(item.get("content") if isinstance(item.get("content"), list) else [])]
        if part.get("encrypted_content") or part.get("signature")
    ]
    assert opaque or profile is PREVIOUS_RESPONSE_ID  # continuous carries opaque state in memory ...
    for name, text in artifact_texts(result.artifacts).items():  # ... and never writes it
        assert '"encrypted_content":' not in text and '"signature":' not in text, name  # as keys, never
        assert not any(blob in text for blob in opaque), name


def test_a_continuous_run_compacts_natively_and_the_hidden_fact_survives_the_compaction(tmp_path):
    result = Runner(CONTINUOUS, tmp_path).run()
    assert result.outcome == "win"
    steps = read_steps(result.artifacts)
    compacted = [step["step"] for step in steps if any(m["role"] == "compaction" for m in step["messages_sent"])]
    assert compacted, "the threshold must have been crossed at least once"
    assert result.accepted_state.items[0]["type"] == "compaction"  # nothing before the latest one is kept
    first_compaction = compacted[0]
    later_levels = [step for step in steps if step["step"] >= first_compaction]
    assert later_levels and result.levels_won == 3  # levels were still won after history was compacted


def test_a_replay_that_drops_reasoning_items_does_not_win(tmp_path, monkeypatch):
    from turnstate.adapters.responses import ResponsesItems

    keep_all = ResponsesItems.reply_items
    monkeypatch.setattr(
        ResponsesItems,
        "reply_items",
        lambda self, response: [item for item in keep_all(self, response) if item.get("type") != "reasoning"],
    )
    result = Runner(with_changes(CONTINUOUS, agent={"max_actions": 40}), tmp_path).run()
    assert result.outcome != "win"


def test_a_commit_that_drops_the_kept_messages_of_a_compacted_window_does_not_win(tmp_path, monkeypatch):
    from turnstate.strategies.continuous_conversation import ContinuousConversation

    def lossy_commit(self, event):  # the old rule: everything before the latest compaction item goes
        items = self.accepted.items
        cut = self.transcript.latest_compaction(items)
        if cut:
            kept = items[cut:]
            self.accepted = self.accepted.replace(payload={"items": kept}, turns=[TurnSpan(start=0, end=len(kept))])

    monkeypatch.setattr(ContinuousConversation, "keep_from_latest_compaction", lossy_commit)
    result = Runner(with_changes(XAI_CONTINUOUS, agent={"max_actions": 40}), tmp_path).run()
    assert result.outcome != "win"


def test_an_expired_handle_fails_the_previous_response_id_run_closed_by_its_named_transition(tmp_path):
    result = Runner(with_changes(PREVIOUS_RESPONSE_ID, client=faults((3, "expire_handle"))), tmp_path).run()
    assert result.outcome == "failed_closed"
    assert "no longer knows the response handle" in result.failure
    assert ("AwaitingReply", "HandleExpired", "FailedClosed") in fired(result.artifacts)
    assert result.accepted_actions == 2 and result.accepted_state.payload["previous_response_id"]
    record = json.loads((result.artifacts / "failed_turn.json").read_text())
    assert record["attempts"][0]["diagnostics"]["status"] == 404


def compaction_steps(run_dir: Path) -> list[dict]:
    return [step for step in read_steps(run_dir) if any(c["outcome"] == "compacted" for c in step["compaction_calls"])]


def outcomes(attempts: list[dict]) -> list[str]:
    return [attempt["outcome"] for attempt in attempts]


def test_an_xai_run_compacts_by_a_separate_call_billed_to_the_turn_it_belongs_to(tmp_path):
    result = Runner(XAI_CONTINUOUS, tmp_path).run()
    assert result.outcome == "win" and result.levels_won == 3
    steps = compaction_steps(result.artifacts)
    assert steps, "the history must have passed the trigger at least once"
    step = steps[0]
    (compaction,) = step["compaction_calls"]
    assert step["retries"] == []  # a compaction call is no retry ...
    assert step["usage"]["input_tokens"] > compaction["usage"]["input_tokens"] > 0  # both calls billed here
    assert result.failed_attempts == 0  # ... and no failed attempt
    record = step["compaction"]
    assert record["by"] == "call" and record["items_returned"] == 1 and record["usage"] == compaction["usage"]
    prices = XAI_CONTINUOUS.pricing
    usage = compaction["usage"]
    assert record["cost_estimate"] == pytest.approx(
        (usage["input_tokens"] * prices.input + usage["output_tokens"] * prices.output) / 1e6
    )
    assert read_meta(result.artifacts)["compactions"] == len(steps)
    assert any(trigger == "CompactionReplied" for _, trigger, _ in fired(result.artifacts))


@pytest.fixture(scope="module")
def first_xai_compaction(tmp_path_factory) -> int:
    """The step of an xAI run's first compacting turn."""
    result = Runner(XAI_CONTINUOUS, tmp_path_factory.mktemp("xai")).run()
    return compaction_steps(result.artifacts)[0]["step"]


@pytest.mark.parametrize(
    ("fault", "failed"),
    [("malformed", "action_rejected"), ("server_error", "transient")],
    ids=["rejected", "transient"],
)
def test_an_action_that_fails_after_a_compaction_call_compacts_the_unchanged_history_again(
    tmp_path, clock, first_xai_compaction, fault, failed
):
    step = first_xai_compaction
    action_request = step + 1  # the ordinal of the first compacting turn's action request
    profile = with_changes(XAI_CONTINUOUS, client=faults((action_request, fault)))
    result = Runner(profile, tmp_path, sleep=clock.sleep).run()
    assert result.outcome == "win"
    record = read_steps(result.artifacts)[step - 1]
    assert outcomes(record["retries"]) == [failed]
    compactions = record["compaction_calls"]
    assert outcomes(compactions) == ["compacted", "compacted"]
    assert compactions[0]["usage"]["input_tokens"] == compactions[1]["usage"]["input_tokens"]  # the same history again


def assert_compaction_calls_apart_from_retries(result, step: int, failed: list[str]) -> None:
    """Step `step` lists its failed compaction calls, then the one that compacted, as compaction calls;
    its action request was accepted at once, so it has no retry."""
    assert result.outcome == "win"
    record = read_steps(result.artifacts)[step - 1]
    assert outcomes(record["compaction_calls"]) == [*failed, "compacted"]
    assert record["retries"] == []
    assert result.failed_attempts == len(failed)  # a failed compaction call is a failed attempt, one that compacted not


def test_a_failed_native_compaction_call_is_recorded_as_a_compaction_call_never_as_a_retry(
    tmp_path, clock, first_xai_compaction
):
    step = first_xai_compaction  # its compaction call is the run's request number `step`
    profile = with_changes(XAI_CONTINUOUS, client=faults((step, "server_error")))
    result = Runner(profile, tmp_path, sleep=clock.sleep).run()
    assert_compaction_calls_apart_from_retries(result, step, ["transient"])


def test_failed_summary_calls_are_recorded_as_compaction_calls_never_as_retries(tmp_path):
    overflows = faults((9, "context_overflow"), (10, "context_overflow"))  # the ninth turn's summary, then half of it
    result = Runner(with_changes(HARNESS_SUMMARY, client=overflows), tmp_path).run()
    assert_compaction_calls_apart_from_retries(result, 9, ["context_overflow", "context_overflow"])


def test_a_retry_after_an_invalid_action_resends_exactly_the_accepted_history(tmp_path, monkeypatch):
    monkeypatch.setenv("TURNSTATE_TEST_KEY", "test-key")
    with LocalProvider(faults=[Fault(at=3, kind="malformed")]) as provider:
        remote = {"base_url": provider.openai_base_url, "api_key_env": "TURNSTATE_TEST_KEY"}
        result = Runner(with_changes(CONTINUOUS, client=remote, agent={"max_actions": 4}), tmp_path).run()
        rejected_request, retried_request = provider.request_log[2:4]
    assert result.accepted_actions == 4
    assert read_steps(result.artifacts)[2]["retries"][0]["outcome"] == "action_rejected"
    assert retried_request == rejected_request  # no item of the rejected reply reached the retry


def test_an_anthropic_run_compacts_on_demand_at_least_twice_and_wins(tmp_path):
    result = Runner(ANTHROPIC_CONTINUOUS, tmp_path).run()
    assert result.outcome == "win" and result.levels_won == 3
    assert len(compaction_steps(result.artifacts)) >= 2
    first_block = result.accepted_state.items[0]["content"][0]
    assert first_block["type"] == "compaction" and first_block["signature"]  # the latest one, replayed first
    step = read_steps(result.artifacts)[compaction_steps(result.artifacts)[0]["step"] - 1]
    sent = step["messages_sent"]  # the readable projection: the summary, then what came after it
    assert [message["role"] for message in sent[:3]] == ["system", "assistant", "user"]
    assert sent[1]["content"] == COMPACTION_CONTENT and len(sent) == 3  # nothing summarized away reappears


def test_an_anthropic_action_that_fails_after_a_compaction_compacts_again_and_every_call_is_billed_once(tmp_path):
    first = Runner(ANTHROPIC_CONTINUOUS, tmp_path / "first").run()
    step = compaction_steps(first.artifacts)[0]["step"]
    result = Runner(
        with_changes(ANTHROPIC_CONTINUOUS, client=faults((step + 1, "malformed"))), tmp_path / "second"
    ).run()
    assert result.outcome == "win"
    steps = read_steps(result.artifacts)
    assert outcomes(steps[step - 1]["retries"]) == ["action_rejected"]
    calls = steps[step - 1]["compaction_calls"]
    assert outcomes(calls) == ["compacted", "compacted"]
    # The unchanged accepted history, compacted again (more of it read from the cache the second time).
    assert calls[0]["usage"]["input_tokens"] == calls[1]["usage"]["input_tokens"]
    compaction = steps[step - 1]["compaction"]
    assert compaction["summarized_items"] == 2 * (step - 1)  # every accepted turn's two messages
    assert compaction["usage"]["input_tokens"] == calls[0]["usage"]["input_tokens"] + calls[1]["usage"]["input_tokens"]
    assert all(
        s["compaction"] is None
        for s in steps
        if s["step"] not in {c["step"] for c in compaction_steps(result.artifacts)}
    )
    billed = steps[step - 1]["usage"]["input_tokens"]
    failed_and_compacting = [*steps[step - 1]["retries"], *calls]
    assert billed > sum(attempt["usage"]["input_tokens"] for attempt in failed_and_compacting) > 0  # and the action
    meta = read_meta(result.artifacts)
    assert sum(s["usage"]["total_tokens"] for s in steps) == meta["usage"]["total_tokens"]  # each call once
    assert meta["provider_calls"] == len(steps) + sum(len(s["retries"]) + len(s["compaction_calls"]) for s in steps)


def test_run_meta_records_the_compaction_policy_with_its_defaults_under_runtime(tmp_path):
    result = Runner(with_changes(ANTHROPIC_CONTINUOUS, agent={"max_actions": 1}), tmp_path).run()
    assert read_meta(result.artifacts)["runtime"]["compaction"] == {
        "strategy": "native",
        "kind": "native_call",  # the adapter's native way; a harness summary's would add headroom and fork
        "trigger_tokens": 1500,
        "max_output_tokens": 2048,
        "max_context_length": 8000,
    }


def test_a_refusal_whose_text_names_an_action_executes_nothing(tmp_path, clock):
    refusals = faults(*[(at, "refusal") for at in (2, 3, 4, 5)])  # every attempt of the second turn
    result = Runner(with_changes(ANTHROPIC_CONTINUOUS, client=refusals), tmp_path, sleep=clock.sleep).run()
    assert result.outcome == "failed_closed" and result.accepted_actions == 1
    assert len(read_steps(result.artifacts)) == 1 and len(result.accepted_state.items) == 2
    record = json.loads((result.artifacts / "failed_turn.json").read_text())
    assert [attempt["outcome"] for attempt in record["attempts"]] == ["refusal"] * 4
    assert {json.dumps(attempt["diagnostics"], sort_keys=True) for attempt in record["attempts"]} == {
        '{"finish_reason": "refusal", "stop_details": {"category": null, "type": "refusal"}}'
    }
    assert "explanation" not in (result.artifacts / "failed_turn.json").read_text()


def test_a_stream_cut_after_the_compaction_block_commits_nothing(tmp_path, clock):
    first = Runner(ANTHROPIC_CONTINUOUS, tmp_path / "first").run()
    step = compaction_steps(first.artifacts)[0]["step"]
    cuts = faults(*[(step + n, "stream_cut") for n in range(4)])  # the compaction request and its three retries
    result = Runner(with_changes(ANTHROPIC_CONTINUOUS, client=cuts), tmp_path / "second", sleep=clock.sleep).run()
    assert result.outcome == "failed_closed" and result.accepted_actions == step - 1
    items = result.accepted_state.items
    assert len(items) == 2 * (step - 1)  # every accepted turn, and no compaction block among them
    assert all(block["type"] != "compaction" for item in items for block in item["content"])
    record = json.loads((result.artifacts / "failed_turn.json").read_text())
    assert [attempt["outcome"] for attempt in record["attempts"]] == ["transient"] * 4
    assert record["usage"]["input_tokens"] > 0  # what the cut calls reported is kept


# Harness summaries (continuous_conversation with runtime.compaction.strategy: harness_summary).


def read_compactions(run_dir: Path) -> list[dict]:
    return [json.loads(path.read_text()) for path in sorted(run_dir.glob("compaction_*.json"))]


@pytest.mark.parametrize("profile", [HARNESS_SUMMARY, OPEN_SOURCE, DEEPSEEK, GEMINI], ids=lambda profile: profile.id)
def test_a_harness_summary_run_compacts_at_least_twice_wins_and_records_each_compaction_once(tmp_path, profile):
    result = Runner(profile, tmp_path).run()
    assert result.outcome == "win" and result.levels_won == 3
    compactions, steps = read_compactions(result.artifacts), read_steps(result.artifacts)
    assert len(compactions) >= 2
    system = steps[0]["messages_sent"][0]["content"]  # the model is told the one way its adapter reads actions
    assert ("calling exactly one of the action tools" in system) is (profile is DEEPSEEK)
    assert ("'ACTION: <name>'" in system) is (profile is not DEEPSEEK)
    continued = [step for step in steps if "continuation" in step]
    assert [step["continuation"]["compaction"] for step in continued] == [c["compaction"] for c in compactions]
    for step, compaction in zip(continued, compactions, strict=True):
        assert step["continuation"]["bridge"] == bridge_text(compaction["summary"])
        assert step["messages_sent"][1]["content"] == step["continuation"]["bridge"]  # the exact bridge sent
        assert "NOTES: level" in compaction["summary"] and compaction["lane"] == "trigger"
        # The completed context that scheduled it, at or past the configured threshold.
        assert compaction["completed_context_tokens"] >= profile.runtime.compaction.trigger_tokens
        assert "trigger_tokens" not in compaction  # the threshold is run_meta.json's alone
        # The bridge; acting through tools, the unread turn after it (the call, and its result: the frame).
        assert compaction["items_after"] == (3 if profile is DEEPSEEK else 1)
        assert (
            step["compaction"]["by"] == "summary" and step["compaction"]["cost_estimate"] == compaction["cost_estimate"]
        )
        assert step["compaction"]["usage"] == compaction["usage"]  # the breakdown kept on the action's step ...
        assert step["usage"]["input_tokens"] > compaction["usage"]["input_tokens"] > 0  # ... inside its usage
        (attempt,) = compaction["attempts"]
        assert attempt["summary_input"]["form"] == "fork"
    # The fork's prefix is served from the provider's cache, where it is past the caching minimum
    # (Gemini's implicit caching starts at 4,096 tokens, more than these runs ever send).
    cached = [compaction["usage"]["cached_input_tokens"] for compaction in compactions]
    assert any(cached) if profile is not GEMINI else not any(cached)
    meta = read_meta(result.artifacts)
    assert sum(step["usage"]["total_tokens"] for step in steps) == meta["usage"]["total_tokens"]  # each call once
    policy = meta["runtime"]["compaction"]
    assert policy["kind"] == "harness_summary" and policy["fork"] is True


def test_the_fork_sends_the_latest_action_requests_exact_prefix(tmp_path, monkeypatch):
    monkeypatch.setenv("TURNSTATE_TEST_KEY", "test-key")
    with LocalProvider() as provider:
        remote = {"base_url": provider.openai_base_url, "api_key_env": "TURNSTATE_TEST_KEY"}
        Runner(with_changes(HARNESS_SUMMARY, client=remote, agent={"max_actions": 10}), tmp_path).run()
        log = list(provider.request_log)
    (at,) = [n for n, body in enumerate(log) if SUMMARY_INSTRUCTION in json.dumps(body["input"][-1])][:1]
    action, summary = log[at - 1], log[at]
    assert summary["instructions"] == action["instructions"]
    assert summary["input"][: len(action["input"])] == action["input"]  # byte for byte, so the cache serves it


def test_an_action_overflow_summarizes_and_sends_the_action_once_more(tmp_path):
    result = Runner(with_changes(HARNESS_SUMMARY, client=faults((5, "context_overflow"))), tmp_path).run()
    assert result.outcome == "win"
    step = read_steps(result.artifacts)[4]
    assert outcomes(step["retries"]) == ["context_overflow"]
    assert outcomes(step["compaction_calls"]) == ["compacted"]
    first = read_compactions(result.artifacts)[0]
    assert first["lane"] == "action_overflow" and first["completed_context_tokens"] is None
    assert first["attempts"][0]["summary_input"]["form"] == "independent"  # the overflow lanes never fork


def test_a_second_action_overflow_fails_closed_and_nothing_is_committed(tmp_path):
    overflows = faults((5, "context_overflow"), (7, "context_overflow"))  # the action, then its one retry
    result = Runner(with_changes(HARNESS_SUMMARY, client=overflows), tmp_path).run()
    assert result.outcome == "failed_closed" and result.accepted_actions == 4
    record = json.loads((result.artifacts / "failed_turn.json").read_text())
    assert [attempt["outcome"] for attempt in record["attempts"]] == [
        "context_overflow",
        "compacted",
        "context_overflow",
    ]
    assert not read_compactions(result.artifacts) and len(result.accepted_state.turns) == 4


def test_a_summary_overflow_recovers_with_fewer_turns_and_keeps_the_rest_verbatim(tmp_path):
    overflows = faults((9, "context_overflow"), (10, "context_overflow"))  # the summary, then half of it
    result = Runner(with_changes(HARNESS_SUMMARY, client=overflows), tmp_path).run()
    assert result.outcome == "win"  # the kept turns' encrypted reasoning replayed as issued
    first = read_compactions(result.artifacts)[0]
    assert (first["lane"], first["summarized_turns"], first["excluded_turns"]) == ("summary_overflow", 2, 6)
    assert first["overflow_recoveries"] == 2 and first["items_after"] == 1 + 6 * 3
    inputs = [attempt["summary_input"] for attempt in first["attempts"]]
    assert [entry["summarized_turns"] for entry in inputs] == [8, 4, 2]  # disclosed on the failed attempts too


def test_a_failed_summary_commits_nothing_and_fails_closed(tmp_path, clock):
    refusals = faults(*[(at, "refusal") for at in (9, 10, 11, 12)])  # every attempt of the first summary
    result = Runner(with_changes(HARNESS_SUMMARY, client=refusals), tmp_path, sleep=clock.sleep).run()
    assert result.outcome == "failed_closed" and result.accepted_actions == 8
    state = result.accepted_state
    assert len(state.turns) == 8 and "Summary of the conversation" not in json.dumps(state.items)
    assert not read_compactions(result.artifacts)
    meta = read_meta(result.artifacts)
    assert meta["unattributed_usage"]["input_tokens"] > 0  # the refused summaries are billed


def test_an_open_weight_replay_that_drops_the_reasoning_strings_is_taken_and_forgets_the_beacon(tmp_path, monkeypatch):
    """The server keeps no state to check a replay against (local_provider/chat_reasoning.py rule 1): no
    request is refused, and the model, reading no reasoning, guesses door A where the beacon showed B."""
    from turnstate.adapters.chat_completions import ChatMessages

    keep_all = ChatMessages.reply_items
    monkeypatch.setattr(
        ChatMessages,
        "reply_items",
        lambda self, response: [{"role": "assistant", "content": item["content"]} for item in keep_all(self, response)],
    )
    result = Runner(OPEN_SOURCE, tmp_path).run()
    sent = [message["content"] for step in read_steps(result.artifacts) for message in step["messages_sent"]]
    assert result.failed_attempts == 0 and "BEACON (level 1): B" in sent[1]
    assert any("YOU ENTERED DOOR A: WRONG DOOR" in str(content) for content in sent)


def test_each_step_records_only_what_its_request_added_and_every_request_rebuilds_exactly(tmp_path, monkeypatch):
    monkeypatch.setenv("TURNSTATE_TEST_KEY", "test-key")
    with LocalProvider() as provider:
        remote = {"base_url": provider.openai_base_url, "api_key_env": "TURNSTATE_TEST_KEY"}
        result = Runner(with_changes(DEFAULT, client=remote), tmp_path).run()
        received = [body["messages"] for body in provider.request_log]
    assert result.failed_attempts == 0 and len(received) == result.accepted_actions > 10
    for step in range(1, result.accepted_actions + 1):
        assert sent_messages(result.artifacts, step) == received[step - 1]  # as the provider received it
    records = [json.loads(path.read_text())["request"] for path in sorted(result.artifacts.glob("step_*.json"))]
    assert records[0]["after_step"] is None and len(records[0]["added"]) == 2  # the system prompt and the frame
    later = records[1:]
    assert all(record["after_step"] == number for number, record in enumerate(later, start=1))
    assert all(len(record["added"]) == 2 for record in later)  # the previous reply and the new frame only
    assert any(record["dropped"] for record in later)  # the window trimmed whole turns, and the record says so


def test_a_signal_during_a_held_block_arrives_after_it_even_when_another_thread_takes_it():
    """A step's record and its count go together: SIGTERM (here sent from another thread, as the
    kernel may hand it to any thread) interrupts only after the held block is done."""
    import os
    import signal
    import threading
    import time

    from turnstate.session import runner

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    def send_when_asked():
        asked.wait(timeout=10)
        os.kill(os.getpid(), signal.SIGTERM)

    previous = signal.signal(signal.SIGTERM, interrupt)
    finished = []
    asked = threading.Event()
    # Started before the block, as rich's progress thread is: a thread started inside would inherit
    # a blocked signal mask and hide the difference.
    sender = threading.Thread(target=send_when_asked)
    sender.start()
    try:
        with pytest.raises(KeyboardInterrupt), runner.signals_deferred():
            asked.set()
            sender.join()
            time.sleep(0.05)  # an unheld handler would have run by now
            finished.append("block")
        assert finished == ["block"]
        assert signal.getsignal(signal.SIGTERM) is interrupt  # restored
    finally:
        signal.signal(signal.SIGTERM, previous)


# Opaque values echoed by a provider, and texts cut to fit (issue 18)


def received_blobs(items) -> list[str]:
    """The encrypted_content and signatures in `items`, opaque values the run has received."""
    parts = [
        part
        for item in items
        for part in [item, *(item.get("content") or [] if isinstance(item.get("content"), list) else [])]
    ]
    return [
        str(part.get("encrypted_content") or part.get("signature"))
        for part in parts
        if part.get("encrypted_content") or part.get("signature")
    ]


def echoing(profile: Profile, change):
    """An adapter factory: the profile's own adapter (real SDK, local provider), each of whose
    outcomes is `change(outcome, blobs)`, `blobs` being the opaque values its request replayed."""
    from turnstate.adapters.registry import descriptor_for

    class Echoing(descriptor_for(profile.runtime.adapter_id).load()):
        def call(self, request):
            return change(super().call(request), received_blobs(request.items))

    return lambda endpoint: Echoing.connect(endpoint, profile.request_settings())


@pytest.mark.parametrize("profile", [CONTINUOUS, ANTHROPIC_CONTINUOUS, GEMINI], ids=lambda profile: profile.id)
def test_an_opaque_value_the_provider_echoes_into_a_reply_is_redacted_in_the_step_record(tmp_path, profile):
    from dataclasses import replace

    from turnstate.durable.redaction import REDACTED

    echoed: list[str] = []

    def echo_once(outcome, blobs):
        if blobs and not echoed:
            echoed.append(blobs[-1])
            return replace(outcome, text=f"{outcome.text}\nI recall {blobs[-1]}")
        return outcome

    short = with_changes(profile, agent={"max_actions": 3})  # the echo comes in the second turn
    result = Runner(short, tmp_path, adapter_factory=echoing(short, echo_once)).run()
    assert result.accepted_actions == 3 and echoed
    for name, text in artifact_texts(result.artifacts).items():
        assert echoed[0] not in text, name
    (echoing_step,) = [step for step in read_steps(result.artifacts) if "I recall" in step["response_text"]]
    assert echoing_step["response_text"].endswith(f"I recall {REDACTED}")


def test_an_opaque_value_in_an_errors_code_or_named_as_the_action_is_redacted_everywhere(tmp_path):
    from dataclasses import replace

    from turnstate.adapters.contract import ErrorKind, ModelResponse, ProviderError

    echoed: list[str] = []

    def refuse_with_the_blob(outcome, blobs):
        if not blobs or not isinstance(outcome, ModelResponse):
            return outcome
        echoed.append(blobs[-1])
        if len(echoed) == 1:  # the provider answers with the blob as its error code, and is retried ...
            return ProviderError(ErrorKind.TRANSIENT, outcome.usage, {"status": 500, "code": blobs[-1]})
        return replace(outcome, text=f"ACTION: {blobs[-1]}")  # ... then the model names it as its action

    result = Runner(CONTINUOUS, tmp_path, adapter_factory=echoing(CONTINUOUS, refuse_with_the_blob)).run()
    assert result.outcome == "failed_closed" and echoed
    failure = "no valid action, retries exhausted (last: unknown action '[redacted]')"
    assert result.failure == read_meta(result.artifacts)["failure"] == failure
    record = json.loads((result.artifacts / "failed_turn.json").read_text())
    assert record["attempts"][0]["diagnostics"] == {"status": 500, "code": "[redacted]"}
    for name, text in artifact_texts(result.artifacts).items():
        assert not any(blob in text for blob in echoed), name


def test_a_reply_cut_to_fit_the_action_record_keeps_no_part_of_the_key(tmp_path):
    from dataclasses import replace

    from turnstate.adapters.chat_completions import ChatCompletionsAdapter
    from turnstate.adapters.contract import ModelResponse
    from turnstate.durable.artifacts import fitted
    from turnstate.session.endpoint import LOCAL_API_KEY

    reply_text = "x" * 20_000  # past the 16 KB action record
    kept = len(fitted({"response_text": reply_text})[0]["response_text"].rsplit("\n[cut", 1)[0])
    # The key straddles the cut: its first 12 characters fall in the head a cut keeps.
    straddling = reply_text[: kept - 12] + LOCAL_API_KEY + reply_text[kept - 12 + len(LOCAL_API_KEY) :]

    class KeyAtTheCut(ChatCompletionsAdapter):
        def call(self, request):
            reply = super().call(request)
            return replace(reply, text=straddling + "\n" + reply.text) if isinstance(reply, ModelResponse) else reply

    profile = with_changes(DEFAULT, agent={"max_actions": 1})
    connect = lambda endpoint: KeyAtTheCut.connect(endpoint, profile.request_settings())  # noqa: E731
    result = Runner(profile, tmp_path, adapter_factory=connect).run()
    (step,) = read_steps(result.artifacts)
    assert step["cut"] == ["response_text"]
    assert LOCAL_API_KEY[:8] not in (result.artifacts / "step_000001.json").read_text()


def test_the_progress_shows_an_action_as_the_step_record_has_it_redacted(tmp_path, monkeypatch):
    monkeypatch.setenv("TURNSTATE_TEST_KEY", "ACTION1")  # a key that is also an action's name
    monkeypatch.setattr(redaction, "MIN_SECRET_CHARS", 1)  # redacted by value, however short (it is no placeholder)
    shown = []
    with LocalProvider() as provider:
        client = {"base_url": provider.openai_base_url, "api_key_env": "TURNSTATE_TEST_KEY"}
        profile = with_changes(DEFAULT, client=client, agent={"max_actions": 12})
        result = Runner(profile, tmp_path, on_step=lambda step: shown.append(step.action)).run()
    recorded = [step["action"] for step in read_steps(result.artifacts)]
    assert "[redacted]" in recorded and "ACTION1" not in recorded
    assert shown == recorded
