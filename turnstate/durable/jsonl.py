"""Append-only JSON-lines files a killed run leaves behind: whole lines, or a torn last one.

A line is written in one write and flushed to the operating system, so a kill tears at most the
last line. Reopening such a file to append must cut the torn line first, or the next line would be
glued to it and lost with it.
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import BinaryIO


class LinkedFileError(Exception):
    """A run file that is a symbolic link: its writes would land outside the run folder."""


def open_append(path: Path) -> BinaryIO:
    """`path` opened to append, made if missing, and refused if it is a symbolic link (a run's
    journals and logs, like its checkpoint store, are its own files, never a link out of it)."""
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise LinkedFileError(
                f"{path}: a symbolic link, and a run writes its records in its own folder only; fix: replace it "
                "with the file it points to"
            ) from None
        raise
    return os.fdopen(descriptor, "ab")


def open_cut(path: Path) -> BinaryIO:
    """`path` opened to append (open_append), a torn last line cut off first, so that the next line
    is not glued to it."""
    return open_counted(path)[0]


def open_counted(path: Path) -> tuple[BinaryIO, int]:
    """`path` opened as open_cut opens it, and how many whole lines it holds: the number of the line
    the next write ends."""
    file = open_append(path)  # first: a link is refused before anything is read or cut
    return file, whole_lines(path)[0].count(b"\n")


def whole_part(content: bytes) -> bytes:
    """The part of a JSON-lines file's `content` that is whole lines, each ending in its newline: a
    torn last line (or one still being written) is left out."""
    return content[: content.rfind(b"\n") + 1]


def whole_lines_of(content: bytes) -> list[bytes]:
    """The whole lines of a JSON-lines file's `content`, newlines dropped: a torn last line (no newline
    ends it) is left out. Split on newlines alone, as `open_counted` counts them."""
    return whole_part(content).split(b"\n")[:-1]


def whole_lines(path: Path) -> tuple[bytes, bool]:
    """The file's whole lines (b"" for a missing file), a torn last line cut off the file itself,
    and whether one was."""
    try:
        content = path.read_bytes()
    except FileNotFoundError:
        return b"", False
    whole = whole_part(content)
    if len(whole) < len(content):
        os.truncate(path, len(whole))
    return whole, len(whole) < len(content)


class AppendedLines:
    """A JSON-lines file opened to append: a torn last line cut off first, each line flushed to the
    operating system as it is written (a killed process loses at most that line), fsynced on close."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = open_cut(path)

    def write(self, record: object) -> None:
        self._file.write(json.dumps(record, separators=(",", ":")).encode() + b"\n")
        self._file.flush()

    def close(self) -> None:
        if not self._file.closed:
            try:
                self._file.flush()
                os.fsync(self._file.fileno())
            finally:
                self._file.close()
