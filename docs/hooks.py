"""MkDocs hook: rules live once, in a module's docstring, and a page shows them from there.

A line of a page that reads `::: docstring turnstate.durable.checkpoints` (alone on its line, indented
or not, outside a fenced block) is replaced by that module's docstring: a line naming the module and
its source file, then the docstring verbatim in a fenced text block (a docstring is plain text, not
Markdown). A module that does not import, or has no docstring, fails the build with an error naming
the module and the page, so a page can never show a rule the code no longer states.

A page with a generated reference (profiles.md, sweeps.md: turnstate/reports/reference.py) fails the
build if a key of its models has no description, or if its generated part is not what the models
give now; the error says to run `python -m turnstate.reports.reference --write`.

Registered in mkdocs.yml under `hooks:`; the modules are imported from the Python that runs mkdocs
(the repository's .venv, where turnstate is installed).
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError

DIRECTIVE = re.compile(r"^(?P<indent>[ \t]*)::: docstring (?P<module>[A-Za-z_][\w.]*)[ \t]*$")
FENCE = re.compile(r"^[ \t]*(```|~~~)")


def docstring_of(module_name: str, page: str) -> tuple[str, str | None]:
    """The module's docstring and its source file, or a PluginError naming the module and the page."""
    try:
        module = importlib.import_module(module_name)
    except Exception as error:  # any failure to import is the page's error, named
        raise PluginError(
            f"docs/{page}: '::: docstring {module_name}': the module {module_name} does not import "
            f"({type(error).__name__}: {error})"
        ) from error
    text = module.__doc__
    if not text or not text.strip():
        raise PluginError(f"docs/{page}: '::: docstring {module_name}': the module {module_name} has no docstring")
    return text.strip("\n"), getattr(module, "__file__", None)


def source_path(file: str | None, root: Path) -> str | None:
    """The module's file relative to the repository (the folder of mkdocs.yml), when it is in it."""
    if not file:
        return None
    try:
        return Path(file).resolve().relative_to(root).as_posix()
    except ValueError:
        return None


def rendered(module_name: str, text: str, path: str | None, indent: str) -> list[str]:
    """The docstring as Markdown: a line naming where it comes from, then a fenced text block."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    where = f"`{module_name}`" + (f" (`{path}`)" if path else "")
    lines = [f"*The module docstring of {where}:*", "", f"{fence}text", *text.splitlines(), fence]
    return [indent + line if line else "" for line in lines]


def check_generated_reference(markdown: str, page: str) -> None:
    """A PluginError naming each undescribed key and a stale generated part, if the page has one."""
    from turnstate.reports.reference import PAGES, page_problems

    if page in PAGES:
        problems = page_problems(page, markdown)
        if problems:
            raise PluginError("\n".join(problems))


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    check_generated_reference(markdown, page.file.src_uri)
    root = Path(config["config_file_path"]).resolve().parent
    out: list[str] = []
    fenced = False
    for line in markdown.split("\n"):
        if FENCE.match(line):
            fenced = not fenced
        match = None if fenced else DIRECTIVE.match(line)
        if match is None:
            out.append(line)
            continue
        module_name = match.group("module")
        text, file = docstring_of(module_name, page.file.src_uri)
        out.extend(rendered(module_name, text, source_path(file, root), match.group("indent")))
    return "\n".join(out)
