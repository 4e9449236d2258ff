"""Every text a report writes is escaped (issue 30): a run's and a sweep's texts are a model's, a
provider's and a user's words, and turnstate/reports/page.py's rule is that none of them becomes
markup. test_report.py checks an action and the plots; here each place a page writes text (its
title, its subtitle, the summary's facts and the outcome, the notes, each table's cells, the links,
the plots' tooltips, the sweep's definition) gets a hostile string of its own, and the page must
hold each one escaped (quotes too: a link's address is an attribute) and none of them as markup.
A reply's text and its reasoning summary are never shown at all (report_run.py: figures and short
texts only)."""

from __future__ import annotations

import json
import shutil
from html import escape
from pathlib import Path

import pytest

from turnstate.reports.folder import write_report
from turnstate.session.profile import DEFAULT_PROFILE, load_profile
from turnstate.session.runner import Runner

from .test_report import assert_self_contained, result_line, write_lines
from .test_run import with_changes

# A folder's name: no slash, so no closing tag; an element with a handler instead.
FOLDER = "run <svg onload=alert('folder')> & \"folder\""


def hostile(place: str) -> str:
    return f"<script>alert('{place}')</script> & \"{place}\""


def escaped_in_json(text: str) -> str:
    """`text` as a page shows it inside a value it writes as JSON (a resume's details), escaped."""
    return escape(json.dumps(text, ensure_ascii=False)[1:-1])


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A short run with a rejected reply (a malformed fault), so its records have a retry to show."""
    faults = {"local": {"faults": [{"at": 2, "kind": "malformed"}]}}
    profile = with_changes(load_profile(DEFAULT_PROFILE), agent={"max_actions": 4}, client=faults)
    result = Runner(profile, tmp_path_factory.mktemp("runs")).run()
    assert result.artifacts is not None and result.failed_attempts == 1
    return result.artifacts


def edit(path: Path, change) -> None:
    record = json.loads(path.read_text())
    change(record)
    path.write_text(json.dumps(record))


def hostile_run(played: Path, folder: Path) -> Path:
    """A copy of the played run, named FOLDER, with a hostile string in every text its page shows."""
    run_dir = Path(shutil.copytree(played, folder / FOLDER))

    def meta(record: dict) -> None:
        record |= {"config_id": hostile("profile id"), "adapter_id": hostile("adapter")}
        record |= {"outcome": hostile("outcome"), "failure": hostile("failure"), "failed_turn": "failed_turn.json"}
        record["runtime"]["compaction"]["kind"] = hostile("compaction kind")
        record["settings"]["environment"]["name"] = hostile("environment")
        record["settings"]["request"]["model"] = hostile("model")
        record["resumes"] = [{"step": 2, "continuation": hostile("continuation"), "lost_calls": 0}]

    def step(record: dict) -> None:
        record |= {
            "action": hostile("action"),
            "response_text": hostile("reply"),
            "reasoning_summary": hostile("summary"),
        }
        record["retries"][0] |= {"problem": hostile("retry problem"), "response_text": hostile("rejected reply")}
        record["compaction"] = {"by": hostile("compaction by"), "kept": hostile("compaction detail")}
        record["compaction_calls"] = [{"outcome": hostile("compaction call"), "problem": hostile("its problem")}]

    edit(run_dir / "run_meta.json", meta)
    edit(run_dir / "step_000002.json", step)
    failed = {"turn": 5, "failure": hostile("failed turn"), "attempts": [{"outcome": hostile("failed attempt")}]}
    (run_dir / "failed_turn.json").write_text(json.dumps(failed))
    for torn in ("events.jsonl", "transitions.jsonl"):  # each a note that names the file, so the folder
        with (run_dir / torn).open("a") as file:
            file.write('{"torn')
    return run_dir


SHOWN = [  # every place that takes a string of its own on a run's page
    "profile id", "adapter", "compaction kind", "outcome", "failure", "environment", "model", "continuation",
    "action", "retry problem", "compaction by", "compaction detail", "compaction call", "its problem",
    "failed turn", "failed attempt",
]  # fmt: skip
NEVER_SHOWN = ["reply", "summary", "rejected reply"]


def assert_no_markup(page: str) -> None:
    assert_self_contained(page)  # no <script (nor <link, nor src=)
    assert "<svg onload" not in page and "alert('" not in page


def test_every_text_a_runs_page_shows_is_escaped_and_a_replys_text_is_never_shown(played, tmp_path):
    run_dir = hostile_run(played, tmp_path)
    page = write_report(run_dir).read_text()
    assert_no_markup(page)
    missing = [place for place in SHOWN if escape(hostile(place)) not in page]
    assert not missing, f"not shown escaped: {missing}"
    assert escaped_in_json(hostile("continuation")) in page  # the resume's details, as JSON, in the table
    assert (
        f"<title>turnstate run {escape(FOLDER)}</title>" in page and f"<h1>turnstate run {escape(FOLDER)}</h1>" in page
    )
    notes = [f'<p class="note">{escape(f"{run_dir / name}: line")}' for name in ("events.jsonl", "transitions.jsonl")]
    assert all(note in page for note in notes)  # the torn lines' notes, naming the folder
    assert f"`turnstate show {escape(str(run_dir))} --step N`" in page  # the files section
    for place in NEVER_SHOWN:
        assert escape(hostile(place)) not in page and hostile(place) not in page, place


def test_every_text_a_sweeps_page_shows_is_escaped_its_links_addresses_too(played, tmp_path):
    sweep = tmp_path / "sweep"
    shutil.copytree(played, sweep / "runs" / FOLDER)
    profile = hostile("profile")
    results = [
        result_line(hostile("run id"), profile, hostile("sweep outcome"), run_dir=f"runs/{FOLDER}")
        | {"environment": hostile("sweep environment"), "game": hostile("game"), "error": hostile("error")},
        result_line(hostile("missing run"), profile, run_dir=f"runs/{hostile('missing')}"),
    ]
    write_lines(sweep / "results.jsonl", results)
    (sweep / "sweep.json").write_text(json.dumps({"name": hostile("sweep name"), "note": hostile("definition")}))
    comparison = {"a": hostile("a"), "b": hostile("b"), "difference": 0.5}
    summary = {
        "profiles": [{"profile": profile, "runs": 2, "wins": 1, "success_rate": 0.5, "comparisons": [comparison]}],
        "by_environment": [{"environment": hostile("by environment"), "profile": profile, "runs": 2, "wins": 1}],
    }
    (sweep / "summary.json").write_text(json.dumps(summary))
    page = write_report(sweep).read_text()
    assert_no_markup(page)
    places = ["profile", "run id", "sweep outcome", "sweep environment", "game", "error", "a", "b", "by environment"]
    missing = [place for place in places if escape(hostile(place)) not in page]
    assert not missing, f"not shown escaped: {missing}"
    assert f"<title>turnstate sweep {escape(hostile('sweep name'))}</title>" in page
    assert escaped_in_json(hostile("definition")) in page  # sweep.json, shown as it is
    assert f'<a href="{escape(f"runs/{FOLDER}/report.html")}">{escape(hostile("run id"))}</a>' in page
    assert escape(f"run {hostile('missing run')}: no run folder at runs/{hostile('missing')}") in page  # a note
    assert_no_markup((sweep / "runs" / FOLDER / "report.html").read_text())  # the run's page it wrote
