"""Environments by registered id: built-in, or from an installed package's `turnstate.environments`
entry point, never from a path, a module or a URL a profile names.

Each test installs its distributions on the fly, as pip would lay them out (a `<name>.dist-info`
folder holding METADATA and entry_points.txt beside the module) in a temporary folder put on
sys.path; nothing is pip-installed. The module is tests/harness/thirdparty/turnstate_corridor.py, a
small game of its own written against the protocol's types alone.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from turnstate.durable.artifacts import sent_messages
from turnstate.environments import (
    ENTRY_POINT_GROUP,
    EnvironmentConfigError,
    EnvironmentWarning,
    Receipt,
    environment_ids,
    make_environment,
)
from turnstate.environments.beacon_grid import BeaconGrid
from turnstate.session.profile import DEFAULT_PROFILE, load_profile, parse_profile
from turnstate.session.runner import Runner
from turnstate.session.settings_file import ProfileError

CORRIDOR_SOURCE = Path(__file__).parent / "thirdparty" / "turnstate_corridor.py"
# A module that leaves a mark when imported: a test that must import nothing asserts there is none
# (a module that raised instead would leave no trace in sys.modules to check).
TRIPWIRE_SOURCE = """\
from pathlib import Path

Path(__file__).with_name("tripwire-imported").write_text("imported")


def make(seed, options):
    raise AssertionError("never built")
"""
THIRD_PARTY_MODULES = ("turnstate_corridor", "turnstate_tripwire")


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A folder on sys.path holding the third-party modules, where tests install distributions."""
    folder = tmp_path / "site"
    folder.mkdir()
    shutil.copy(CORRIDOR_SOURCE, folder)
    (folder / "turnstate_tripwire.py").write_text(TRIPWIRE_SOURCE)
    monkeypatch.syspath_prepend(str(folder))
    yield folder
    for module in THIRD_PARTY_MODULES:
        sys.modules.pop(module, None)
    importlib.invalidate_caches()


def install(site: Path, distribution: str, entry_points: dict[str, str]) -> None:
    """Lay out an installed distribution's metadata, its entry points in turnstate's group."""
    info = site / f"{distribution.replace('-', '_')}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: 0.1\n")
    lines = "".join(f"{name} = {value}\n" for name, value in entry_points.items())
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{lines}")
    importlib.invalidate_caches()  # importlib.metadata caches what each sys.path folder holds


def profile_naming(name: str, levels: int = 2) -> str:
    """The default profile's text with its environment named `name` (quoted as JSON, which YAML reads)."""
    text = DEFAULT_PROFILE.read_text()
    assert "  name: beacon_grid\n" in text and "    levels: 3\n" in text
    return text.replace("  name: beacon_grid\n", f"  name: {json.dumps(name)}\n").replace(
        "    levels: 3\n", f"    levels: {levels}\n"
    )


def refusal(text: str, source: str = "profiles/mine.yaml") -> str:
    with pytest.raises(ProfileError) as caught:
        parse_profile(text, source=source)
    return str(caught.value)


def test_an_environment_an_installed_package_registers_wins_a_run_from_its_profile(site, tmp_path):
    install(site, "turnstate-corridor", {"corridor": "turnstate_corridor:make"})
    path = tmp_path / "local-corridor.yaml"
    path.write_text(profile_naming("corridor", levels=2))
    result = Runner(load_profile(path), tmp_path / "runs").run()
    assert result.outcome == "win" and result.levels_won == 2
    first_request = json.dumps(sent_messages(result.artifacts, 1))
    assert "#@....AB#" in first_request  # the corridor's own first frame, as the model read it
    meta = json.loads((result.artifacts / "run_meta.json").read_text())
    assert meta["settings"]["environment"]["name"] == "corridor"


def test_the_installed_environment_keeps_the_protocol_observing_and_receipting_as_beacon_grid_does(site):
    install(site, "turnstate-corridor", {"corridor": "turnstate_corridor:make"})
    env = make_environment("corridor", 0, {"levels": 1})
    first = env.reset()
    assert env.observe() == first and env.receipts() == ()
    env.step("ACTION3")
    for _ in range(5):
        frame = env.step("ACTION4")
    assert "STANDING ON: door A" in frame.text
    assert env.receipts(since=5) == (Receipt(6, "ACTION4", "player moved"),)
    assert env.receipts()[0] == Receipt(1, "ACTION3", "nothing")


def test_listing_the_ids_reads_installed_names_and_imports_no_third_party_code(site):
    install(site, "turnstate-corridor", {"corridor": "turnstate_corridor:make"})
    install(site, "turnstate-tripwire", {"tripwire": "turnstate_tripwire:make"})
    assert environment_ids() == ["arc_agi3", "beacon_grid", "catalog_hunt", "corridor", "tripwire"]
    assert not (site / "tripwire-imported").exists()
    assert not set(THIRD_PARTY_MODULES) & set(sys.modules)


def test_a_third_party_module_is_imported_only_when_its_id_is_named(site):
    install(site, "turnstate-corridor", {"corridor": "turnstate_corridor:make"})
    install(site, "turnstate-tripwire", {"tripwire": "turnstate_tripwire:make"})
    make_environment("corridor", 0)
    assert "turnstate_corridor" in sys.modules
    assert not (site / "tripwire-imported").exists()


def test_a_profile_naming_an_unregistered_environment_is_refused_listing_the_registered_ids(site):
    install(site, "turnstate-corridor", {"corridor": "turnstate_corridor:make"})
    message = refusal(profile_naming("chess"), source="profiles/chess.yaml")
    assert message.startswith(
        "profiles/chess.yaml: environment.name: unknown environment 'chess'; "
        "registered environments: arc_agi3, beacon_grid, catalog_hunt, corridor; fix: "
    )
    assert "\n" not in message


@pytest.mark.parametrize(
    ("name", "looks_like"),
    [
        ("./turnstate_tripwire.py", "a file path"),
        ("turnstate_tripwire.py", "a file path"),
        ("/opt/games/turnstate_tripwire", "a file path"),
        ("C:\\games\\turnstate_tripwire", "a file path"),
        ("~/turnstate_tripwire", "a file path"),
        ("turnstate_tripwire:make", "a module path"),
        ("turnstate_tripwire.make", "a module path"),
        ("https://example.com/turnstate_tripwire.py", "a URL"),
        ("file:///tmp/turnstate_tripwire.py", "a URL"),
        ("git+https://example.com/games.git", "a URL"),
    ],
)
def test_a_name_that_looks_like_a_path_module_or_url_is_refused_and_nothing_is_loaded(site, name, looks_like):
    install(site, "turnstate-tripwire", {"tripwire": "turnstate_tripwire:make"})
    message = refusal(profile_naming(name))
    assert f"profiles/mine.yaml: environment.name: {name!r} looks like {looks_like}; " in message
    assert "nothing is loaded from a path, a module or a URL" in message
    assert "use a registered id (arc_agi3, beacon_grid, catalog_hunt, tripwire)" in message
    assert not (site / "tripwire-imported").exists()


def test_a_name_that_is_no_id_at_all_is_refused_saying_what_an_id_is():
    with pytest.raises(EnvironmentConfigError, match="'beacon grid' is not an environment id .letters, digits"):
        make_environment("beacon grid", 0)


def test_a_third_party_factory_that_raises_is_one_clear_profile_error_naming_the_id(site):
    install(site, "turnstate-corridor", {"broken": "turnstate_corridor:broken"})
    message = refusal(profile_naming("broken"))
    assert message.startswith(
        "profiles/mine.yaml: environment.options: environment 'broken' (entry point 'turnstate_corridor:broken') "
        "failed to build: KeyError: 'corridor map\\nnot found'; fix: "
    )
    assert "\n" not in message


def test_validating_a_profile_whose_factory_raises_prints_one_line_and_no_traceback(site, tmp_path):
    install(site, "turnstate-corridor", {"broken": "turnstate_corridor:broken"})
    path = tmp_path / "broken.yaml"
    path.write_text(profile_naming("broken"))
    paths = [str(site), *filter(None, [os.environ.get("PYTHONPATH")])]
    done = subprocess.run(
        [sys.executable, "-m", "turnstate.cli", "validate", str(path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(paths)},
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr + done.stdout
    assert f"{path}: environment.options: environment 'broken' (entry point 'turnstate_corridor:broken')" in (
        done.stderr + done.stdout
    )


def test_a_third_party_module_that_cannot_be_imported_is_named_with_its_entry_point(site):
    install(site, "turnstate-missing", {"missing": "turnstate_missing_module:make"})
    with pytest.raises(EnvironmentConfigError) as caught:
        make_environment("missing", 0)
    assert str(caught.value) == (
        "environment 'missing' (entry point 'turnstate_missing_module:make') could not be imported: "
        "ModuleNotFoundError: No module named 'turnstate_missing_module'"
    )
    assert caught.value.key == "name"


def test_a_factory_whose_result_is_not_an_environment_is_refused_naming_what_it_lacks(site):
    install(site, "turnstate-corridor", {"shapeless": "turnstate_corridor:not_an_environment"})
    with pytest.raises(
        EnvironmentConfigError, match="built a dict that lacks the environment protocol's reset, observe"
    ):
        make_environment("shapeless", 0)


def test_a_third_party_option_error_is_named_under_environment_options_with_the_id(site):
    install(site, "turnstate-corridor", {"corridor": "turnstate_corridor:make"})
    message = refusal(profile_naming("corridor", levels=99))
    assert message.startswith(
        "profiles/mine.yaml: environment.options: environment 'corridor': corridor option 'levels' must be"
    )


def test_a_built_in_id_wins_over_an_entry_point_of_the_same_name_with_a_warning(site):
    install(site, "turnstate-corridor", {"beacon_grid": "turnstate_corridor:make"})
    with pytest.warns(EnvironmentWarning, match="'beacon_grid' is a built-in environment, which always wins"):
        env = make_environment("beacon_grid", 0)
    assert isinstance(env, BeaconGrid)
    assert "turnstate_corridor" not in sys.modules
    with pytest.warns(EnvironmentWarning):
        assert environment_ids() == ["arc_agi3", "beacon_grid", "catalog_hunt"]


def test_an_id_two_installed_packages_register_is_refused_naming_both(site):
    install(site, "turnstate-corridor", {"corridor": "turnstate_corridor:make"})
    install(site, "turnstate-tripwire", {"corridor": "turnstate_tripwire:make"})
    assert environment_ids() == ["arc_agi3", "beacon_grid", "catalog_hunt", "corridor"]
    with pytest.raises(EnvironmentConfigError, match="'corridor' is registered by 2 installed packages") as caught:
        make_environment("corridor", 0)
    assert "turnstate_corridor:make" in str(caught.value) and "turnstate_tripwire:make" in str(caught.value)
    assert not (site / "tripwire-imported").exists()


def test_an_entry_point_whose_name_is_no_id_is_ignored_with_a_warning(site):
    install(site, "turnstate-corridor", {"corridor.v2": "turnstate_corridor:make"})
    with pytest.warns(EnvironmentWarning, match="'corridor.v2' .* its name is not an environment id"):
        assert environment_ids() == ["arc_agi3", "beacon_grid", "catalog_hunt"]


def test_the_old_import_path_of_the_plugin_api_still_works_for_one_release_and_says_it_is_deprecated():
    """A game package written against turnstate.harness.environments (before the house was cut into
    floors) imports unchanged, its names the same objects, with a DeprecationWarning naming the new path."""
    script = (
        "import warnings\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    from turnstate.harness.environments import Frame, make_environment\n"
        "    from turnstate.harness.environments.protocol import Receipt\n"
        "import turnstate.environments as new\n"
        "assert Frame is new.Frame and make_environment is new.make_environment and Receipt is new.Receipt\n"
        "print([str(w.message) for w in caught if w.category is DeprecationWarning])\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "import turnstate.environments instead" in done.stdout
