"""What a run's records hold beyond the action (the runtime-state seed's rules): structural
descriptors of what was sent, history sizes, every kind of compaction on its step, fitted texts, and
a summary's input disclosed before its call. End-to-end on the local provider, real SDK and files."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest

from turnstate.adapters.chat_completions import ChatCompletionsAdapter
from turnstate.adapters.contract import ModelRequest, ModelResponse, ProviderError, Usage
from turnstate.adapters.responses import ResponsesAdapter
from turnstate.durable.artifacts import ACTION_METADATA_BYTES, StepRecordError, sent_messages, sent_requests
from turnstate.durable.layout import EVENTS, SUMMARY_INPUT
from turnstate.session.runner import Runner
from turnstate.strategies.summary import SUMMARY_INSTRUCTION

from .test_run import CONTINUOUS, DEFAULT, HARNESS_SUMMARY, read_meta, read_steps, with_changes

PADDING = "é" * 30_000  # 60 kB as UTF-8, far past the action record's 16 KB


class PaddedReplies(ChatCompletionsAdapter):
    """The default adapter, whose replies carry a long visible text after their ACTION line."""

    def call(self, request: ModelRequest) -> ModelResponse | object:
        reply = super().call(request)
        return replace(reply, text=reply.text + "\n" + PADDING) if isinstance(reply, ModelResponse) else reply


def test_a_long_visible_output_is_fitted_to_the_action_record_and_marked_cut(tmp_path):
    profile = with_changes(DEFAULT, agent={"max_actions": 2})
    connect = lambda endpoint: PaddedReplies.connect(endpoint, profile.request_settings())  # noqa: E731
    result = Runner(profile, tmp_path, adapter_factory=connect).run()
    assert result.accepted_actions == 2  # the action was read from the whole reply, before fitting
    for step in read_steps(result.artifacts):
        text = step["response_text"]
        assert step["cut"] == ["response_text"] and "\nACTION: " in text  # the head is kept
        mark = re.search(r"\n\[cut to fit the action record: (\d+) of (\d+) characters kept\]$", text)
        assert mark is not None and int(mark[1]) == len(text) - len(mark[0]) and int(mark[2]) > len(PADDING)
        assert len(json.dumps(text, ensure_ascii=False).encode()) <= ACTION_METADATA_BYTES


def test_every_step_names_the_items_it_sent_and_the_history_size_around_its_commit(tmp_path):
    result = Runner(with_changes(CONTINUOUS, agent={"max_actions": 3}), tmp_path).run()
    first, second, third = read_steps(result.artifacts)
    assert first["request"]["items_sent"] == 1 and first["request"]["input_items"] == [
        {"type": "message", "role": "user"}
    ]
    assert first["history"] == {"items_before": 0, "items_after": 3}  # the user message, reasoning, the reply
    described = second["request"]["input_items"]
    assert [item["type"] for item in described] == [
        "reasoning",
        "message",
        "message",
    ]  # the replayed reply, then the new input
    assert described[0]["id"].startswith("rs_") and described[1]["id"].startswith("msg_")
    assert second["request"]["items_sent"] == 4 and third["history"]["items_before"] == 6
    text = (result.artifacts / "step_000002.json").read_text()
    assert "encrypted_content" not in text  # descriptors, never bodies


def test_an_inline_compaction_is_on_its_step_and_run_meta_counts_every_compaction(tmp_path):
    result = Runner(CONTINUOUS, tmp_path).run()
    steps = read_steps(result.artifacts)
    compacted = [step for step in steps if step["compaction"] is not None]
    assert compacted, "the inline threshold must have been crossed"
    for step in compacted:
        assert step["compaction"] == {
            "by": "inline",
            "items_returned": 1,
            "summarized_items": None,
            "usage": None,  # not reported apart from the action's
            "cost_estimate": None,
        }
        assert step["history"]["items_after"] < step["history"]["items_before"]
    assert read_meta(result.artifacts)["compactions"] == len(compacted) == result.compactions


class KilledWhileSummarizing(ResponsesAdapter):
    """The harness-summary profile's adapter, killed (Ctrl-C) while its first summary call is out."""

    def call(self, request: ModelRequest) -> ModelResponse | object:
        if SUMMARY_INSTRUCTION in json.dumps(request.items[-1]):
            raise KeyboardInterrupt
        return super().call(request)


def test_a_summarys_input_is_disclosed_before_its_call_so_a_kill_during_the_call_keeps_it(tmp_path):
    profile = HARNESS_SUMMARY
    connect = lambda endpoint: KilledWhileSummarizing.connect(endpoint, profile.request_settings())  # noqa: E731
    with pytest.raises(KeyboardInterrupt):
        Runner(profile, tmp_path, adapter_factory=connect).run()
    (run_dir,) = tmp_path.iterdir()
    disclosed = json.loads((run_dir / SUMMARY_INPUT).read_text())
    meta = read_meta(run_dir)
    assert meta["outcome"] == "interrupted" and not list(run_dir.glob("compaction_*.json"))
    assert disclosed == {
        "turn": meta["accepted_actions"] + 1,
        "attempt": 1,
        "lane": "trigger",
        "form": "fork",
        "summarized_turns": meta["accepted_actions"],
        "excluded_turns": 0,
    }


class Tallied(ResponsesAdapter):
    """The harness-summary profile's adapter, adding up the usage each reply reported as it came."""

    tally = Usage()

    def call(self, request: ModelRequest) -> ModelResponse | ProviderError:
        outcome = super().call(request)
        Tallied.tally += outcome.usage
        return outcome


def test_every_call_is_billed_once_as_the_provider_reported_it_summaries_included(tmp_path, monkeypatch):
    monkeypatch.setattr(Tallied, "tally", Usage())
    profile = HARNESS_SUMMARY
    connect = lambda endpoint: Tallied.connect(endpoint, profile.request_settings())  # noqa: E731
    result = Runner(profile, tmp_path, adapter_factory=connect).run()
    assert result.compactions >= 2  # summaries were made, and billed
    meta = read_meta(result.artifacts)
    assert meta["usage"] == Tallied.tally.to_dict()
    steps = read_steps(result.artifacts)
    assert sum(step["usage"]["total_tokens"] for step in steps) == Tallied.tally.total_tokens


class Observed(ChatCompletionsAdapter):
    """The default adapter, keeping the readable messages of every request it sends."""

    sent: list[list[dict]] = []

    def call(self, request: ModelRequest) -> ModelResponse | ProviderError:
        Observed.sent.append([{"role": "system", "content": request.system}, *self.transcript.readable(request.items)])
        return super().call(request)


def test_a_step_record_names_the_events_that_hold_its_new_texts_and_show_gives_back_what_was_sent(tmp_path):
    """Each observation and reply is stored once, in events.jsonl: a step's request record names it."""
    Observed.sent = []
    connect = lambda endpoint: Observed.connect(endpoint, DEFAULT.request_settings())  # noqa: E731
    result = Runner(DEFAULT, tmp_path, adapter_factory=connect).run()
    steps = read_steps(result.artifacts)
    later = [message for step in steps[1:] for message in step["request"]["added"]]
    assert later and all("event" in message and "content" not in message for message in later)
    events = {event["seq"]: event for event in map(json.loads, (result.artifacts / EVENTS).read_text().splitlines())}
    assert {events[message["event"]]["kind"] for message in later} == {"user_input", "assistant_message"}
    assert [sent_messages(result.artifacts, step["step"]) for step in steps] == Observed.sent
    every = sent_requests(result.artifacts, [step["step"] for step in steps])  # all of them in one pass
    assert list(every.values()) == Observed.sent and list(every) == [step["step"] for step in steps]


def test_requests_rebuilt_in_one_pass_name_a_step_that_follows_one_the_folder_lacks(tmp_path):
    result = Runner(with_changes(DEFAULT, agent={"max_actions": 3}), tmp_path).run()
    with pytest.raises(StepRecordError, match=r"step_000003\.json: follows step 2, which the folder does not hold"):
        sent_requests(result.artifacts, [1, 3])


def test_a_step_record_naming_an_event_the_log_lacks_is_a_clear_error_naming_the_log(tmp_path):
    result = Runner(with_changes(DEFAULT, agent={"max_actions": 3}), tmp_path).run()
    log = result.artifacts / EVENTS
    log.write_bytes(b"".join(log.read_bytes().splitlines(keepends=True)[:2]))
    with pytest.raises(StepRecordError, match=r"events\.jsonl: holds no event \d+, whose text a step record names"):
        sent_messages(result.artifacts, 3)
