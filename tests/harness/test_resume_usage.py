"""Usage across a resume, counted from outside the resume's own bookkeeping (issue 30).

test_resume.py checks a resumed run's totals against the uninterrupted run's plus the resume's own
`lost_calls` and `lost_usage`: a resume that counts a call twice, and says so in those same figures,
passes it. Here every figure comes from somewhere the resume does not write it: calls.jsonl, one
line per provider call as it returned (the killed child's lines, then the resumed run's); the
uninterrupted run of the same profile, which never resumed; and the kill point, which says how many
paid calls the resume must play again. run_meta.json and the report must agree with all three."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from turnstate.adapters.contract import Usage
from turnstate.durable.checkpoints import KEY_VARIABLE
from turnstate.durable.layout import CALLS
from turnstate.reports.folder import write_report
from turnstate.session.profile import PROFILES_DIR, load_profile
from turnstate.session.run_profile import run_profile
from turnstate.session.runner import Runner
from turnstate.session.session import Point

from .test_resume import VARIANTS, baseline_calls, killed_run, same_tokens
from .test_run import read_meta

# (variant, the point the child is killed at, its count, the calls it paid for that the resume plays again)
CASES: list[tuple[str, Point, int, int]] = [
    ("manual_rolling", "after_reply", 4, 1),  # the reply came back; its turn never committed
    ("manual_rolling", "after_commit", 4, 0),  # the turn's checkpoint holds every call so far
    ("native_call", "after_reply", 9, 2),  # the turn compacted first: its compaction call and its reply
]


def journal(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / CALLS).read_text().splitlines()]


def tokens(usage: dict) -> tuple[int, int, int]:
    """What a replayed call costs again exactly: a resumed run's prompt cache is colder, so its cached
    input may be less (test_resume.same_tokens)."""
    return usage["input_tokens"], usage["output_tokens"], usage["reasoning_tokens"]


def summed(lines: list[dict]) -> Usage:
    return sum((Usage.from_dict(line["usage"]) for line in lines), Usage())


def report_totals(run_dir: Path) -> tuple[str, str]:
    """The report's provider calls and tokens rows, as the page shows them."""
    page = write_report(run_dir).read_text()
    calls = re.search(r"<th>provider calls</th><td>(\d+) ", page)
    shown = re.search(r"<th>tokens in / cached / out</th><td>([^<]*)</td>", page)
    assert calls and shown, "the report shows no totals"
    return calls[1], shown[1]


@pytest.fixture(autouse=True)
def no_variable_set(monkeypatch):
    monkeypatch.delenv(KEY_VARIABLE, raising=False)


@pytest.mark.parametrize(("variant", "point", "count", "replayed"), CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_a_resumed_run_counts_each_call_once_as_its_journal_the_uninterrupted_run_and_the_kill_point_say(
    tmp_path, variant, point, count, replayed
):
    profile = load_profile(PROFILES_DIR / VARIANTS[variant])
    baseline = Runner(profile, tmp_path / "baseline").run()
    assert baseline.outcome == "win", baseline.failure
    played = journal(baseline.artifacts)
    run_dir = killed_run(profile, tmp_path / "runs", point, count)
    before = journal(run_dir)  # what the child paid for before it was killed
    resumed = Runner(run_profile(run_dir), run_dir.parent).resume(run_dir)
    assert resumed.outcome == baseline.outcome
    calls, meta = journal(run_dir), read_meta(run_dir)

    # The journal: one line a call, numbered 1, 2, 3 ... with no gap and none twice.
    assert [line["call"] for line in calls] == list(range(1, len(calls) + 1))
    assert calls[: len(before)] == before  # the resume appends, never rewrites
    # The uninterrupted run: the child played its first calls, the resume the rest of them, after
    # playing again the calls of the turn the kill interrupted, and nothing more.
    assert [tokens(line["usage"]) for line in before] == [tokens(line["usage"]) for line in played[: len(before)]]
    assert len(calls) == len(played) + replayed
    again = played[len(before) - replayed :]
    assert [tokens(line["usage"]) for line in calls[len(before) :]] == [tokens(line["usage"]) for line in again]
    lost = summed(before[len(before) - replayed :])
    assert same_tokens(summed(calls), baseline.usage + lost)

    # run_meta.json and the report count what the journal holds, exactly.
    assert meta["provider_calls"] == len(calls) == baseline_calls(baseline) + replayed
    assert Usage.from_dict(meta["usage"]) == resumed.usage == summed(calls)
    (resume,) = meta["resumes"]
    assert (resume["lost_calls"], Usage.from_dict(resume["lost_usage"])) == (replayed, lost)
    total = summed(calls)
    assert report_totals(run_dir) == (
        str(len(calls)),
        " / ".join(f"{n:,}" for n in (total.input_tokens, total.cached_input_tokens, total.output_tokens))
        + (f" (reasoning {total.reasoning_tokens:,})" if total.reasoning_tokens else ""),
    )
