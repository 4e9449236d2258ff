"""What every report page shares: its frame and style, its tables, the errors of reading its inputs,
and writing it whole.

A page is one file with everything inline (style, SVG), no script and no address outside the page
but the relative links it makes to files beside it: it opens offline, from a copied folder, years on.
Every text a page shows passes `escape` (here, or in plots.py): a run's texts are a model's and
a provider's words, and must never become markup."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from html import escape
from pathlib import Path
from typing import Any

import orjson

from turnstate.durable.layout import REPORT

STYLE = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: #222;
       max-width: 1320px; margin: 24px auto; padding: 0 20px; }
h1 { font-size: 22px; margin-bottom: 2px; } h2 { font-size: 17px; margin-top: 32px;
     border-bottom: 1px solid #ddd; padding-bottom: 4px; } h3 { font-size: 14px; margin: 18px 0 4px; }
.sub { color: #666; margin-top: 0; } .note { color: #666; font-size: 13px; }
table { border-collapse: collapse; margin: 8px 0; font-size: 13px; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f4f4f4; } td.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
table.facts th { width: 230px; background: #f8f8f8; font-weight: 600; }
svg.plot { width: 100%; height: auto; display: block; }
.diagram { overflow-x: auto; border: 1px solid #eee; padding: 6px; }
.diagram svg { max-width: 100%; height: auto; }
.win { color: #2e7d32; font-weight: 600; } .bad { color: #c62828; font-weight: 600; }
div.wide { overflow-x: auto; } table.wide { font-size: 12px; } table.wide td, table.wide th { white-space: nowrap; padding: 2px 6px; }
pre { background: #f6f6f6; padding: 8px; overflow-x: auto; font-size: 12px; }
"""


class ReportError(Exception):
    """An input a report cannot be made from; the message is one line naming the file and the fix."""


def page(title: str, subtitle: str, sections: Iterable[str]) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>"
        f'<h1>{escape(title)}</h1><p class="sub">{escape(subtitle)}</p>' + "".join(sections) + "</body></html>\n"
    )


def section(heading: str, *parts: str, section_id: str = "") -> str:
    ident = f' id="{escape(section_id)}"' if section_id else ""
    return f"<section{ident}><h2>{escape(heading)}</h2>{''.join(parts)}</section>"


def note(text: str) -> str:
    return f'<p class="note">{escape(text)}</p>'


class Cell(str):
    """A table cell's HTML, already escaped (a link, a marked outcome): `table` leaves it as it is."""


def link(href: str, text: str) -> Cell:
    return Cell(f'<a href="{escape(href)}">{escape(text)}</a>')


def outcome(text: str) -> Cell:
    style = "win" if text == "win" else "bad" if text in ("failed", "failed_closed", "crashed") else ""
    return Cell(f'<span class="{style}">{escape(text)}</span>' if style else escape(text))


def table(header: Sequence[str], rows: Iterable[Sequence[Any]], numeric: Iterable[int] = (), wide: bool = False) -> str:
    """Rows under `header`; the columns in `numeric` right-aligned. A cell is escaped unless it is a
    `Cell`. A `wide` table keeps each cell on one line and scrolls sideways where the page is narrower."""
    numeric = set(numeric)
    head = "".join(f"<th>{escape(name)}</th>" for name in header)
    body = []
    for row in rows:
        cells = []
        for column, value in enumerate(row):
            shown = value if isinstance(value, Cell) else escape(display(value))
            cells.append(f'<td class="n">{shown}</td>' if column in numeric else f"<td>{shown}</td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    if wide:
        return f'<div class="wide"><table class="wide"><tr>{head}</tr>{"".join(body)}</table></div>'
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def facts(rows: Iterable[tuple[str, Any]]) -> str:
    """A two-column table of what and value, as a run's summary."""
    cells = (
        f"<tr><th>{escape(what)}</th><td>{value if isinstance(value, Cell) else escape(display(value))}</td></tr>"
        for what, value in rows
    )
    return f'<table class="facts">{"".join(cells)}</table>'


def display(value: Any) -> str:
    """A value as a table shows it: none as a dash, a float briefly, anything else as text or JSON."""
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def read_json(path: Path, fix: str) -> Any:
    """The JSON in `path`, or ReportError naming it (missing, unreadable or not JSON) and `fix`."""
    try:
        return _loads(path.read_bytes())
    except FileNotFoundError:
        raise ReportError(f"{path}: missing; fix: {fix}") from None
    except OSError as error:
        raise ReportError(f"{path}: cannot read it ({error.strerror}); fix: check its permissions") from None
    except ValueError:
        raise ReportError(f"{path}: not JSON; fix: {fix}") from None


def read_lines(path: Path, fix: str) -> list[tuple[int, Any]]:
    """Each whole line of a JSON-lines file with its number, or ReportError naming the file and the
    first line that is not JSON. A last line without its newline is one a kill tore: left out."""
    try:
        content = path.read_bytes()
    except FileNotFoundError:
        raise ReportError(f"{path}: missing; fix: {fix}") from None
    except OSError as error:
        raise ReportError(f"{path}: cannot read it ({error.strerror}); fix: check its permissions") from None
    lines = content[: content.rfind(b"\n") + 1].split(b"\n")
    read = []
    for number, line in enumerate(lines, 1):
        if line.strip():
            try:
                read.append((number, _loads(line)))
            except ValueError:
                raise ReportError(f"{path}: line {number} is not JSON; fix: {fix}") from None
    return read


def _loads(data: bytes) -> Any:
    """JSON, by orjson (a long run's records are read in a third of the time), or by the standard
    library for what only it reads: NaN and Infinity, which Python's json.dumps writes by default."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


def write_page(folder: Path, html: str) -> Path:
    """Write the page to folder/report.html whole or not at all (a temporary file renamed over it)."""
    target = folder / REPORT
    temporary = folder / f".{REPORT}.tmp"
    try:
        temporary.write_text(html, encoding="utf-8")
        os.replace(temporary, target)
    except OSError as error:
        raise ReportError(
            f"{target}: cannot write it ({error.strerror}); fix: pass a folder you can write to"
        ) from None
    return target
