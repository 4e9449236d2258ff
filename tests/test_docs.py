"""The documentation: docs/ builds with `mkdocs build --strict` (a broken link between pages fails it), a
page's `::: docstring MODULE` line shows that module's docstring or fails the build naming the module
(docs/hooks.py), the docs' copies of the README's commands and example are the README's, and every
repository path the README and the docs name exists."""

from __future__ import annotations

import glob
import importlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parent.parent
DOCS = REPOSITORY / "docs"
PAGES = sorted(DOCS.glob("*.md"))

needs_mkdocs = pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None,
    reason="mkdocs is not installed, so the docs were not built: `.venv/bin/pip install -e '.[test]'` brings it",
)


def mkdocs_build(config_dir: Path, site_dir: Path, extra_path: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = None if extra_path is None else {**os.environ, "PYTHONPATH": str(extra_path)}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site_dir)],
        cwd=config_dir,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


@needs_mkdocs
def test_the_docs_build_strict_with_every_docstring_they_name(tmp_path):
    built = mkdocs_build(REPOSITORY, tmp_path / "site")
    assert built.returncode == 0, built.stdout + built.stderr
    design = (tmp_path / "site" / "design" / "index.html").read_text(encoding="utf-8")
    rules = importlib.import_module("turnstate.strategies.retry").__doc__ or ""
    assert rules.strip().splitlines()[0] in design  # the page shows the module's docstring, from the module


@needs_mkdocs
@pytest.mark.parametrize(
    ("module", "problem"),
    [("turnstate.no_such_module", "does not import"), ("undocumented_module", "has no docstring")],
)
def test_a_docstring_directive_the_code_cannot_answer_fails_the_build_naming_the_module(tmp_path, module, problem):
    shutil.copy(REPOSITORY / "mkdocs.yml", tmp_path / "mkdocs.yml")
    shutil.copytree(DOCS, tmp_path / "docs")
    page = tmp_path / "docs" / "index.md"
    page.write_text(page.read_text(encoding="utf-8") + f"\n::: docstring {module}\n", encoding="utf-8")
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "undocumented_module.py").write_text("VALUE = 1\n", encoding="utf-8")
    built = mkdocs_build(tmp_path, tmp_path / "site", extra_path=lib)
    output = built.stdout + built.stderr
    assert built.returncode != 0, output
    assert module in output and problem in output and "index.md" in output, output


def fenced(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.+?)\n```", text, flags=re.DOTALL)


def test_the_docs_quick_start_and_api_example_are_the_readmes():
    readme = (REPOSITORY / "README.md").read_text(encoding="utf-8")
    quick_start = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    index = (DOCS / "index.md").read_text(encoding="utf-8").split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert fenced(index, "sh") == fenced(quick_start, "sh")
    api = readme.split("## Python API", 1)[1]
    assert fenced((DOCS / "python-api.md").read_text(encoding="utf-8"), "python")[0] == fenced(api, "python")[0]


# A repository path as the README and the docs write it: a top-level folder, then the rest of the path.
FOLDERS = r"\.ci|adapters|bench|diagrams|docs|local_provider|machine|profiles|strategies|sweeps|tests|tools|turnstate"
PATH = re.compile(rf"(?<![\w./-])((?:{FOLDERS})/[\w./-]*)(.?)")
EXAMPLES = {"profiles/x.yaml"}  # an error message's example, not a file


def named_paths(text: str) -> set[str]:
    paths = set()
    for match in PATH.finditer(text):
        path, after = match.group(1).rstrip(".-"), match.group(2)
        paths.add(path + "*" if after in "<{|*" and after else path)
    return paths - EXAMPLES


def test_every_repository_path_the_readme_and_the_docs_name_exists():
    missing: dict[str, list[str]] = {}
    for document in [REPOSITORY / "README.md", REPOSITORY / "mkdocs.yml", *PAGES]:
        for path in named_paths(document.read_text(encoding="utf-8")):
            if not glob.glob(str(REPOSITORY / path)):
                missing.setdefault(document.relative_to(REPOSITORY).as_posix(), []).append(path)
    assert not missing, f"paths named but not in the repository: {missing}"


def test_the_readmes_links_into_the_docs_reach_a_page_and_its_heading():
    readme = (REPOSITORY / "README.md").read_text(encoding="utf-8")
    for target in re.findall(r"\]\((docs/[^)\s]*)\)", readme):
        page, _, anchor = target.partition("#")
        path = REPOSITORY / page
        assert path.is_file() or (path / "index.md").is_file(), target
        if anchor:
            headings = re.findall(r"^#+ (.+)$", path.read_text(encoding="utf-8"), flags=re.MULTILINE)
            assert anchor in {slug(heading) for heading in headings}, target


def slug(heading: str) -> str:
    """The anchor MkDocs (Python-Markdown's toc) and GitHub both give a heading of plain words."""
    words = re.sub(r"[^\w\s-]", "", heading.replace("`", "")).strip().lower()
    return re.sub(r"[\s]+", "-", words)
