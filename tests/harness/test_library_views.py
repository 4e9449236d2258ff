"""What `show`, `events`, `diagrams` and `list` print is what library functions return: a caller
without a terminal gets the same text and data, and the same one-line errors as ReportError."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from turnstate.cli import main
from turnstate.durable.layout import EVENTS, RUN_META
from turnstate.reports.catalog import catalog, profile_check
from turnstate.reports.diagrams import draw_run, pictures, stale_diagrams
from turnstate.reports.events import event_log
from turnstate.reports.page import ReportError
from turnstate.reports.step import step_messages, step_text
from turnstate.session.profile import DEFAULT_PROFILE, load_profile
from turnstate.session.runner import Runner

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory) -> Path:
    result = Runner(load_profile(DEFAULT_PROFILE), tmp_path_factory.mktemp("runs")).run()
    assert result.outcome == "win" and result.artifacts is not None
    return result.artifacts


def printed(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def test_a_step_is_the_text_and_the_messages_show_prints(played):
    assert step_text(played, 2) + "\n" == printed("show", str(played), "--step", "2")
    assert step_messages(played, 2) == json.loads(printed("show", str(played), "--step", "2", "--json"))
    assert step_text(played, 2).startswith(f"step 2 of {played}")
    with pytest.raises(ReportError, match="recorded no step 999; its steps are 1-"):
        step_text(played, 999)


def test_the_event_log_is_the_text_events_prints_and_its_check_the_summary(played):
    shown = event_log(played)
    assert shown.text + "\n" == printed("events", str(played)) and shown.failure is None
    checked = event_log(played, check=True)
    assert (
        checked.text == "" and checked.summary is not None and checked.summary.startswith(f"{played / EVENTS}: sound")
    )
    with pytest.raises(ReportError, match="nowhere: not a folder; fix: pass a run folder"):
        event_log(played / "nowhere")


def test_a_run_is_drawn_on_the_configuration_it_ran_and_the_committed_diagrams_are_current(played, tmp_path):
    written, warnings = draw_run(played, tmp_path)
    ran = json.loads((played / RUN_META).read_text())["strategy"]
    assert [path.name for path in written] == [f"{ran}.svg"] and warnings == []
    assert stale_diagrams(REPO / "diagrams") == []
    assert ran in pictures()
    with pytest.raises(ReportError, match="no diagrams in"):
        stale_diagrams(tmp_path / "empty")


def test_the_catalog_is_what_list_prints_and_a_profile_check_what_validate_reports(tmp_path):
    listed = catalog()
    assert listed == json.loads(printed("list", "--json"))
    assert {"local-manual-rolling"} <= {entry["name"] for entry in listed["profiles"]}
    assert profile_check(DEFAULT_PROFILE) == (
        {"profile": str(DEFAULT_PROFILE), "file": str(DEFAULT_PROFILE), "valid": True, "problems": []},
        None,
    )
    bad = tmp_path / "bad.yaml"
    bad.write_text(DEFAULT_PROFILE.read_text().replace("max_actions:", "max_actions: -1\n  ignored:"))
    result, error = profile_check(bad)
    assert result["valid"] is False and error is not None and result["problems"][0]["key"]
