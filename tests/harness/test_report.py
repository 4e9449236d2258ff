"""`turnstate report`: the SVG plots as plain functions, the reading of a run's and a sweep's files
with its errors, and the pages built from real runs on the local provider (tests/harness/
test_report_browser.py loads them in a browser)."""

from __future__ import annotations

import json
import math
import re
import shutil
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from turnstate.cli import main
from turnstate.reports.folder import ReportError, write_report
from turnstate.reports.plots import Marker, Rule, Series, interval_bars, number, strips, ticks, timeline
from turnstate.session.profile import DEFAULT_PROFILE, Profile, load_profile, resolve_profile
from turnstate.session.runner import Runner
from turnstate.sweeps.plan import summarize

SVG = "{http://www.w3.org/2000/svg}"
HOSTILE = "<script>alert('x')</script> & \"quoted\""


def parsed(svg: str) -> ElementTree.Element:
    """The plot as XML: it must be well-formed, whatever its labels held."""
    return ElementTree.fromstring(svg)


def coordinates(svg: str) -> list[float]:
    """Every number in the plot's geometry attributes and paths."""
    values = re.findall(r'\s(?:x|y|x1|x2|y1|y2|cx|cy|r|width|height|points|d)="([^"]*)"', svg)
    return [float(found) for value in values for found in re.findall(r"-?[\d.]+(?:e-?\d+)?|nan|inf", value)]


# The plots


@pytest.mark.parametrize("low, high", [(0, 1), (0, 11461), (0, 0.0178), (1, 1000), (3, 3), (0, 0)])
def test_ticks_are_round_values_from_the_low_end_that_cover_the_high_end(low, high):
    found = ticks(low, high)
    assert found[0] <= low and found[-1] >= high
    steps = {round(b - a, 12) for a, b in zip(found, found[1:], strict=False)}
    (step,) = steps
    assert round(step / 10 ** math.floor(math.log10(step)), 9) in (1, 2, 5)
    assert 2 <= len(found) <= 12


@pytest.mark.parametrize(
    "value, shown",
    [
        (0, "0"),
        (950, "950"),
        (12345, "12.3k"),
        (4_100_000, "4.1M"),
        (0.0178, "0.0178"),
        (0.0042, "0.0042"),
        (22.333, "22.3"),
    ],
)
def test_a_figure_is_shown_compactly(value, shown):
    assert number(value) == shown


def test_a_timeline_draws_its_series_markers_and_rules_under_its_id_with_a_tooltip_each():
    svg = timeline(
        "plot-x",
        "tokens",
        [1, 2, 3],
        [Series("input", [10, 20, 30], "#111", area=True), Series("output", [1, 2, 3], "#222")],
        markers=[Marker(2, "fault", "#f00", "step 2: transient")],
        rules=[Rule(3, "compaction", "#0f0", "step 3: compaction by summary")],
        hover=lambda index: f"turn {index + 1}",
    )
    root = parsed(svg)
    assert root.get("id") == "plot-x"
    titles = [element.text for element in root.iter(f"{SVG}title")]
    assert {"input", "output", "step 2: transient", "step 3: compaction by summary", "turn 1", "turn 3"} <= set(titles)
    assert len(root.findall(f".//{SVG}polygon")) == 1 and len(root.findall(f".//{SVG}polyline")) == 1
    assert [text.text for text in root.iter(f"{SVG}text") if text.text in ("input", "fault", "compaction")] == [
        "input",
        "fault",
        "compaction",
    ]  # the legend names each kind


@pytest.mark.parametrize(
    "turns, values",
    [([1], [0]), ([5], [7]), ([1, 2], [0, 0]), (list(range(1, 1001)), [100] * 1000)],
    ids=["one turn of nothing", "one turn", "all zero", "a thousand turns"],
)
def test_a_timeline_has_only_finite_coordinates_whatever_its_turns_and_values(turns, values):
    svg = timeline(
        "plot-x", "t", turns, [Series("input", values, "#111", area=True)], markers=[Marker(turns[0], "k", "#f00", "n")]
    )
    found = coordinates(svg)
    assert found and all(math.isfinite(value) for value in found)


def test_a_timeline_with_too_many_rules_to_read_draws_them_as_ticks_above_the_plot():
    turns = list(range(1, 301))
    few = parsed(
        timeline("p", "t", turns, [Series("s", [1] * 300, "#111")], rules=[Rule(10, "compaction", "#0f0", "c")])
    )
    many_rules = [Rule(turn, "compaction", "#0f0", f"c{turn}") for turn in range(3, 300, 3)]
    many = parsed(timeline("p", "t", turns, [Series("s", [1] * 300, "#111")], rules=many_rules))
    dashed = [line for line in many.iter(f"{SVG}line") if line.get("stroke-dasharray")]
    assert dashed == [] and len([line for line in many.iter(f"{SVG}line") if line.get("stroke") == "#0f0"]) == 99 + 1
    assert len([line for line in few.iter(f"{SVG}line") if line.get("stroke-dasharray")]) == 2  # the rule, its legend


def test_every_text_a_plot_is_given_is_escaped():
    plots = [
        timeline("a", HOSTILE, [1], [Series(HOSTILE, [1], "#111")], markers=[Marker(1, HOSTILE, "#f00", HOSTILE)]),
        interval_bars("b", HOSTILE, [HOSTILE], [0.5], [(0.2, 0.8)]),
        strips("c", HOSTILE, [HOSTILE], [[1.0, 2.0]]),
    ]
    for svg in plots:
        root = parsed(svg)
        assert "<script" not in svg and not list(root.iter("script")) and not list(root.iter(f"{SVG}script"))
        assert HOSTILE in {element.text for element in root.iter(f"{SVG}title")}


def test_a_label_too_long_for_its_column_is_cut_and_whole_in_its_tooltip():
    label = "a-profile-name-" * 40
    root = parsed(strips("s", "t", [label], [[1.0]]))
    shown = [text.text for text in root.iter(f"{SVG}text") if text.text and text.text.startswith("a-profile")]
    assert shown and shown[0].endswith("…") and len(shown[0]) < len(label)
    assert label in [element.text for element in root.iter(f"{SVG}title")]


def test_interval_bars_draw_a_whisker_only_where_a_row_has_an_interval():
    root = parsed(interval_bars("b", "t", ["with", "without"], [0.5, 1.0], [(0.25, 0.75), None]))
    (whisker,) = root.iter(f"{SVG}path")
    assert whisker.find(f"{SVG}title").text == "with: 50%  [25%, 75%]"
    assert "100%" in [text.text for text in root.iter(f"{SVG}text")]


def test_a_difference_is_drawn_against_zero_as_a_dot_without_a_bar():
    root = parsed(interval_bars("d", "t", ["a − b"], [-0.25], [(-0.5, 0.1)], domain=(-1, 1), bars=False))
    assert not list(root.iter(f"{SVG}rect"))
    assert any(line.get("stroke") == "#333" for line in root.iter(f"{SVG}line"))  # the zero line


def test_strips_draw_a_dot_per_run_and_the_mean_as_a_tick():
    root = parsed(strips("s", "t", ["p1", "p2"], [[1.0, 3.0], []]))
    assert len(list(root.iter(f"{SVG}circle"))) == 2
    assert "mean 2" in [text.text for text in root.iter(f"{SVG}text")]


# A run's page


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real run folder: the default profile with a rate limit, a malformed reply and a refusal
    (each retried), on the local provider."""
    data = yaml.safe_load(DEFAULT_PROFILE.read_text())
    faults = [{"at": 3, "kind": "rate_limit"}, {"at": 7, "kind": "malformed"}, {"at": 12, "kind": "refusal"}]
    data["client"]["local"] = {"faults": faults}
    result = Runner(Profile.model_validate(data), tmp_path_factory.mktemp("runs")).run()
    assert result.outcome == "win" and result.artifacts is not None
    return result.artifacts


@pytest.fixture
def run_dir(played: Path, tmp_path: Path) -> Path:
    """A copy of the played run, for a test to change."""
    return Path(shutil.copytree(played, tmp_path / played.name))


def assert_self_contained(page: str) -> None:
    assert "<script" not in page and "<link" not in page and " src=" not in page
    hrefs = re.findall(r'href="([^"]*)"', page)
    assert all(not re.match(r"[a-z]+:", href) and not href.startswith("/") for href in hrefs), hrefs


def test_a_run_page_holds_its_summary_its_plots_and_the_run_on_its_machine(run_dir):
    path = write_report(run_dir)
    assert path == run_dir / "report.html"
    page = path.read_text()
    assert_self_contained(page)
    for svg_id in ("plot-tokens", "plot-output", "diagram-manual_rolling"):
        assert f'id="{svg_id}"' in page
    assert '<span class="win">win</span>' in page
    assert "<th>retries by kind</th><td>1 rejected reply, 1 transient, 1 refusal</td>" in page
    assert "(transition counts of one run)" in page and "×" in page  # the rows' counts


def test_a_run_page_marks_each_retry_as_a_rejected_reply_or_a_provider_fault(run_dir):
    meta = json.loads((run_dir / "run_meta.json").read_text())
    tokens = parsed(re.search(r'<svg id="plot-tokens".*?</svg>', write_report(run_dir).read_text(), re.S)[0])
    notes = [element.text for circle in tokens.iter(f"{SVG}circle") for element in circle.iter(f"{SVG}title")]
    rejected = [text for text in notes if "action_rejected" in text]
    faults = [text for text in notes if re.match(r"step \d+: (transient|refusal)", text)]
    assert len(rejected) + len(faults) == meta["failed_attempts"] == 3
    assert len(rejected) == 1 and "no 'ACTION: <name>' line" in rejected[0]
    assert [text.split(":")[0] for text in faults] == ["step 3", "step 10"]  # the rate limit, the refusal


def test_a_run_page_marks_each_turn_whose_request_dropped_the_oldest_messages(run_dir):
    trimmed = [
        record["step"]
        for path in sorted(run_dir.glob("step_*.json"))
        if (record := json.loads(path.read_text()))["request"]["dropped"]
    ]
    tokens = parsed(re.search(r'<svg id="plot-tokens".*?</svg>', write_report(run_dir).read_text(), re.S)[0])
    notes = [element.text for circle in tokens.iter(f"{SVG}circle") for element in circle.iter(f"{SVG}title")]
    marked = [int(text.split(":")[0].removeprefix("step ")) for text in notes if "dropped the oldest" in text]
    assert trimmed and marked == trimmed


def test_a_run_that_failed_closed_marks_its_last_turns_attempts_and_the_failure_on_both_plots(tmp_path):
    data = yaml.safe_load(DEFAULT_PROFILE.read_text())
    data["client"]["local"] = {"faults": [{"at": at, "kind": "malformed"} for at in (9, 10, 11, 12)]}
    result = Runner(Profile.model_validate(data), tmp_path).run()
    assert result.outcome == "failed_closed" and result.artifacts is not None
    page = write_report(result.artifacts).read_text()
    assert "<th>retries by kind</th><td>4 rejected replies</td>" in page
    plots = [parsed(svg) for svg in re.findall(r'<svg id="plot-(?:tokens|output)".*?</svg>', page, re.S)]
    assert len(plots) == 2
    failed = [title.text for title in plots[0].iter(f"{SVG}title") if title.text and title.text.startswith("turn 9:")]
    assert failed == [f"turn 9: {result.failure}"]
    for plot in plots:  # one turn axis, to the failed turn
        assert "9" in [text.text for text in plot.iter(f"{SVG}text")]


def test_a_run_page_marks_compactions_on_the_timeline(tmp_path):
    result = Runner(load_profile(resolve_profile(Path("local-openai-harness-summary"))), tmp_path).run()
    assert result.artifacts is not None and result.compactions > 0
    page = write_report(result.artifacts).read_text()
    tokens = parsed(re.search(r'<svg id="plot-tokens".*?</svg>', page, re.S)[0])
    rules = [line for line in tokens.iter(f"{SVG}line") if line.find(f"{SVG}title") is not None]
    assert len(rules) == result.compactions
    assert all("compaction by summary" in line.find(f"{SVG}title").text for line in rules)
    assert 'id="diagram-continuous_conversation-harness_summary"' in page


def test_a_run_killed_before_its_run_meta_is_reported_from_its_steps(run_dir):
    (run_dir / "run_meta.json").unlink()
    page = write_report(run_dir).read_text()
    assert "no run_meta.json: the run was killed before it wrote one" in page
    assert 'id="plot-tokens"' in page


def test_a_key_a_record_repeats_is_redacted_on_the_page(run_dir, monkeypatch):
    monkeypatch.setenv("REPORT_TEST_KEY", "sk-report-0123456789")
    meta = json.loads((run_dir / "run_meta.json").read_text())
    meta["settings"]["client"]["api_key_env"] = "REPORT_TEST_KEY"
    meta["failure"] = "the provider said sk-report-0123456789"
    (run_dir / "run_meta.json").write_text(json.dumps(meta))
    page = write_report(run_dir).read_text()
    assert "sk-report-0123456789" not in page and "the provider said [redacted]" in page


def test_a_records_text_is_escaped_on_the_page(run_dir):
    step = run_dir / "step_000002.json"
    record = json.loads(step.read_text())
    record["action"] = HOSTILE
    step.write_text(json.dumps(record))
    page = write_report(run_dir).read_text()
    assert "<script>alert" not in page and "&lt;script&gt;alert" in page


def corrupt(path: Path, content: str) -> None:
    path.write_text(content)


@pytest.mark.parametrize(
    "name, content, problem",
    [
        ("run_meta.json", "{not json", "run_meta.json: not JSON"),
        ("run_meta.json", "[1, 2]", "run_meta.json: not a run's metadata"),
        ("step_000004.json", "", "step_000004.json: not JSON"),
        (
            "step_000004.json",
            '{"step": 4, "usage": {"input_tokens": "many"}}',
            "step_000004.json: usage is not a record",
        ),
        ("step_000004.json", '{"usage": {}}', "step_000004.json: not a step record"),
        ("events.jsonl", '{"kind": "user_input"}\n', "events.jsonl: line 1"),
        ("calls.jsonl", "{}\nnot json\n", "calls.jsonl: line 2 is not JSON"),
        (
            "transitions.jsonl",
            '{"machine": "manual_rolling"}\n',
            "transitions.jsonl: line 1 is not a transition record",
        ),
    ],
)
def test_a_run_file_the_report_cannot_read_is_one_error_naming_it(run_dir, name, content, problem):
    corrupt(run_dir / name, content)
    with pytest.raises(ReportError) as raised:
        write_report(run_dir)
    message = str(raised.value)
    assert message.startswith(str(run_dir)) and problem in message and "\n" not in message
    assert not (run_dir / "report.html").exists()


# A sweep's page


def result_line(run_id: str, profile: str, outcome: str = "win", **more: Any) -> dict[str, Any]:
    line = {"run_id": run_id, "profile": profile, "environment": "beacon_grid", "seed": 0, "repetition": 0}
    figures = {"levels": 3, "turns": 21, "tokens_in": 10738, "tokens_cached": 0, "tokens_out": 441, "cost": 0.0178}
    return line | {"outcome": outcome} | figures | {"retries": 0, "compactions": 0, "wall_seconds": 0.2} | more


@pytest.fixture
def sweep(played: Path, tmp_path: Path) -> Path:
    """A sweep folder of two copies of the played run, under two profiles, as `turnstate sweep` writes it."""
    folder = tmp_path / "sweep"
    results = []
    for profile, outcome in (("with-compaction", "win"), ("without", "max_actions")):
        shutil.copytree(played, folder / "runs" / profile)
        results.append(result_line(profile, profile, outcome, run_dir=f"runs/{profile}"))
    (folder / "sweep.json").write_text(json.dumps({"name": "nightly", "profiles": ["with-compaction", "without"]}))
    write_lines(folder / "results.jsonl", results)
    summary = [
        {
            "profile": "with-compaction",
            "runs": 1,
            "wins": 1,
            "success_rate": 1.0,
            "success_low": 0.2,
            "success_high": 1.0,
        },
        {"profile": "without", "runs": 1, "wins": 0, "success_rate": 0.0, "mean_cost": 0.0178, "mean_turns": 21},
    ]
    summary[0]["comparisons"] = [{"a": "with-compaction", "b": "without", "difference": 1.0, "low": 0.1, "high": 1.0}]
    (folder / "summary.json").write_text(json.dumps(summary))
    return folder


def write_lines(path: Path, lines: list[Any]) -> None:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_a_sweep_page_compares_its_profiles_and_links_each_runs_own_page_which_it_writes(sweep):
    page = write_report(sweep).read_text()
    assert_self_contained(page)
    assert "<h1>turnstate sweep nightly</h1>" in page
    for svg_id in ("plot-success", "plot-tokens", "plot-cost", "plot-turns", "plot-comparisons"):
        assert f'id="{svg_id}"' in page
    for profile in ("with-compaction", "without"):
        assert f'<a href="runs/{profile}/report.html">{profile}</a>' in page
        assert 'id="plot-tokens"' in (sweep / "runs" / profile / "report.html").read_text()
    assert "+100 pp" in page and "+10 pp – +100 pp" in page  # the comparison and its interval


def test_a_sweep_page_leaves_a_runs_up_to_date_page_as_it_is(sweep):
    write_report(sweep)
    run_page = sweep / "runs" / "without" / "report.html"
    run_page.write_text("kept")
    write_report(sweep)
    assert run_page.read_text() == "kept"


def test_a_sweep_without_its_summary_derives_runs_wins_and_means_and_says_it_has_no_intervals(sweep):
    (sweep / "summary.json").unlink()
    page = write_report(sweep).read_text()
    assert "no summary.json" in page and "without intervals" in page
    assert "no comparisons in the summary" in page
    assert 'id="plot-success"' in page


def test_a_sweep_summary_as_an_object_of_profiles_and_comparisons_is_read_too(sweep):
    summary = json.loads((sweep / "summary.json").read_text())
    comparisons = summary[0].pop("comparisons")
    (sweep / "summary.json").write_text(json.dumps({"profiles": summary, "comparisons": comparisons}))
    assert 'id="plot-comparisons"' in write_report(sweep).read_text()


def test_a_sweep_of_several_environments_shows_each_profile_and_comparison_per_environment(sweep):
    """summary.json as turnstate/sweeps/plan.py writes it for two environments."""
    rows = [
        result_line(f"{profile}-{game}", profile, outcome, environment=game, run_dir=f"runs/{profile}")
        for profile, game, outcome in (
            ("with-compaction", "beacon_grid", "win"),
            ("without", "beacon_grid", "win"),
            ("with-compaction", "arc_agi3", "win"),
            ("without", "arc_agi3", "failed_closed"),
        )
    ]
    write_lines(sweep / "results.jsonl", rows)
    (sweep / "summary.json").write_text(json.dumps(summarize(rows, [("with-compaction", "without")])))
    page = write_report(sweep).read_text()
    assert 'id="environments"' in page
    assert page.count("<td>arc_agi3</td>") >= 3  # two profiles, one comparison (and the runs table)
    assert "+100 pp" in page and "+0 pp" in page and "+50 pp" in page  # on arc_agi3, beacon_grid, and all


def test_a_figure_that_is_not_finite_is_shown_as_unknown_and_never_plotted(sweep):
    (sweep / "summary.json").write_text(
        '[{"profile": "with-compaction", "runs": 1, "wins": 1, "success_rate": 1.0, "mean_cost": NaN, "success_low": Infinity, "success_high": 1.0}]'
    )
    page = write_report(sweep).read_text()
    success = re.search(r'<svg id="plot-success".*?</svg>', page, re.S)[0]
    assert all(math.isfinite(value) for value in coordinates(success))
    assert "nan" not in page.lower().replace("nanosecond", "")


def test_a_run_the_sweep_never_started_is_named_by_its_key_and_a_profile_without_ended_runs_has_no_value(sweep):
    never = result_line(None, "capped", "not_started", key="capped.beacon_grid.s0.r1", run_dir=None, turns=0)
    write_lines(sweep / "results.jsonl", [*map(json.loads, (sweep / "results.jsonl").read_text().splitlines()), never])
    summary = json.loads((sweep / "summary.json").read_text())
    summary.append({"profile": "capped", "planned": 1, "runs": 0, "wins": 0, "success_rate": None, "success_low": None})
    (sweep / "summary.json").write_text(json.dumps(summary))
    page = write_report(sweep).read_text()
    assert "<td>capped.beacon_grid.s0.r1</td>" in page and "not_started" in page
    success = parsed(re.search(r'<svg id="plot-success".*?</svg>', page, re.S)[0])
    assert "no value" in [text.text for text in success.iter(f"{SVG}text")]
    assert all(math.isfinite(value) for value in coordinates(ElementTree.tostring(success, encoding="unicode")))


def test_a_sweeps_id_titles_its_page_when_it_has_no_name(sweep):
    (sweep / "sweep.json").write_text(json.dumps({"id": "compaction", "profiles": ["a"]}))
    assert "<h1>turnstate sweep compaction</h1>" in write_report(sweep).read_text()


def test_a_run_dir_outside_the_sweep_folder_is_neither_linked_nor_written_to(sweep, played):
    outside = sweep.parent / "elsewhere"
    shutil.copytree(played, outside)
    write_lines(sweep / "results.jsonl", [result_line("escaping", "p", run_dir="../elsewhere")])
    (sweep / "summary.json").unlink()
    page = write_report(sweep).read_text()
    assert "run_dir ../elsewhere is not inside the sweep folder; not linked" in page
    assert not (outside / "report.html").exists()


@pytest.mark.parametrize(
    "name, content, problem",
    [
        (
            "results.jsonl",
            '{"run_id": "a", "profile": "p", "outcome": "win"}\n{oops\n',
            "results.jsonl: line 2 is not JSON",
        ),
        ("results.jsonl", '{"run_id": "a", "outcome": "win"}\n', "results.jsonl: line 1 has no profile"),
        ("results.jsonl", '["a"]\n', "results.jsonl: line 1 is not a JSON object"),
        (
            "results.jsonl",
            '{"run_id": "a", "profile": "p", "outcome": "win", "cost": "cheap"}\n',
            'line 1: cost is "cheap", not a number',
        ),
        ("summary.json", '{"profile": "p"}', "summary.json: not a list of per-profile objects"),
        (
            "summary.json",
            '[{"profile": "p", "runs": 2}]',
            "summary.json: item 0 has no wins (needs profile, runs, wins)",
        ),
        (
            "summary.json",
            '[{"profile": "p", "runs": 1, "wins": 1, "success_rate": 1, "comparisons": {}}]',
            "item 0.comparisons is not a list",
        ),
        ("summary.json", '{"profiles": [], "comparisons": [{"a": "x"}]}', "comparisons.0 has no b, difference"),
        ("sweep.json", "name: nightly", "sweep.json: not JSON"),
    ],
)
def test_a_sweep_file_the_report_cannot_read_is_one_error_naming_it(sweep, name, content, problem):
    corrupt(sweep / name, content)
    with pytest.raises(ReportError) as raised:
        write_report(sweep)
    message = str(raised.value)
    assert message.startswith(str(sweep / name)) and problem in message and "\n" not in message


def test_a_sweep_folder_without_results_says_to_run_the_sweep(sweep):
    (sweep / "results.jsonl").unlink()
    with pytest.raises(ReportError, match=r"results.jsonl: missing; fix: run the sweep"):
        write_report(sweep)


# The command


def invoke(*args: str) -> Result:
    result = CliRunner().invoke(main, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


def test_report_prints_the_path_of_the_page_it_wrote(run_dir):
    result = invoke("report", str(run_dir))
    assert result.exit_code == 0 and result.stdout == f"{run_dir / 'report.html'}\n"


@pytest.mark.parametrize(
    "make, problem",
    [
        (lambda folder: folder / "missing", "not a folder"),
        (lambda folder: folder, "neither a run folder (no run_meta.json or step records) nor a sweep folder"),
    ],
    ids=["no folder", "an empty folder"],
)
def test_report_on_a_folder_that_is_no_run_and_no_sweep_is_one_line_and_exit_1(tmp_path, make, problem):
    result = invoke("report", str(make(tmp_path)))
    assert result.exit_code == 1 and "Traceback" not in result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"error: {make(tmp_path)}") and problem in line


def test_report_on_the_folder_runs_are_written_to_names_a_run_in_it(played):
    result = invoke("report", str(played.parent))
    assert result.exit_code == 1 and f"as {played.name}: pass one" in result.stderr


def test_report_on_a_corrupted_run_is_one_line_naming_the_file_and_exit_1(run_dir):
    corrupt(run_dir / "step_000003.json", "{")
    result = invoke("report", str(run_dir))
    assert result.exit_code == 1
    assert (
        result.stderr
        == f"error: {run_dir / 'step_000003.json'}: not JSON; fix: restore the run folder as `turnstate run` wrote it\n"
    )


def test_turnstate_run_writes_the_report_and_prints_its_path_last(tmp_path):
    result = invoke("run", "--out", str(tmp_path))
    assert result.exit_code == 0, result.stderr
    (run_dir,) = tmp_path.iterdir()
    assert result.stdout.splitlines()[-1] == f"report: {run_dir / 'report.html'}"
    assert 'id="plot-tokens"' in (run_dir / "report.html").read_text()
