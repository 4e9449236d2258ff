"""Append-only JSON-lines files a killed run leaves behind: whole lines, or a torn last one.

A line is written in one write and flushed to the operating system, so a kill tears at most the
last line. Reopening such a file to append must cut the torn line first, or the next line would be
glued to it and lost with it.
"""

from __future__ import annotations

import os
from pathlib import Path


def whole_lines(path: Path) -> tuple[bytes, bool]:
    """The file's whole lines (b"" for a missing file), a torn last line cut off the file itself,
    and whether one was."""
    try:
        content = path.read_bytes()
    except FileNotFoundError:
        return b"", False
    whole = content.rfind(b"\n") + 1
    if whole < len(content):
        os.truncate(path, whole)
    return content[:whole], whole < len(content)
