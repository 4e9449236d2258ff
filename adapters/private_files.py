"""Files that hold secrets or opaque provider state must be the user's alone: one check of that, for
every place that keeps them (the checkpoint store, the local provider's service folder).

A folder others may write lets them plant a file the owner's program then reads (a SQLite -wal file,
a key); a file others may read leaks what it holds. So a private folder is a folder, owned by the
user, with no group or other permission bits (0700), and a private file likewise a regular file, never
a link (0600). Each caller words its own error around the problem this returns.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


def private_problem(path: Path, info: os.stat_result, *, folder: bool) -> str | None:
    """What keeps `path` (whose `lstat`/`stat` is `info`) from being private, with the fix; None if it is."""
    kind, mode = ("folder", 0o700) if folder else ("regular file", 0o600)
    is_kind = stat.S_ISDIR(info.st_mode) if folder else stat.S_ISREG(info.st_mode)
    if not is_kind:
        return f"not a {kind}"
    if info.st_uid != os.geteuid():
        return f"belongs to user {info.st_uid}, not to you"
    if info.st_mode & 0o077:
        return (
            f"must be owner-only ({mode:04o}), and it is {stat.S_IMODE(info.st_mode):04o}; fix: chmod {mode:o} {path}"
        )
    return None
