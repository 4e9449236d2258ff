"""A throwaway PostgreSQL server for the tests and benches of the PostgreSQL checkpoint store: Debian's
`postgresql` package's initdb into a temporary folder, run as an unprivileged user (initdb refuses
root: as root the cluster belongs to the package's `postgres` user), listening on a loopback port with
password authentication, stopped and deleted at the end. `.ci/run` installs the package; without it
(or psycopg) the tests skip, saying so."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

USER = "turnstate"
PASSWORD = "throwaway-password-7c1e"


def _bin_folder() -> Path | None:
    for candidate in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (candidate / "initdb").exists():
            return candidate
    found = shutil.which("initdb")
    return Path(found).resolve().parent if found else None


def binary(name: str) -> str:
    """The path of one of the server's programs (psql, pg_dump): those of the newest installed server."""
    folder = _bin_folder()
    if folder is None:
        raise RuntimeError("PostgreSQL is not installed (Debian: apt-get install postgresql)")
    return str(folder / name)


def new_database(server_url: str, name: str) -> str:
    """A database `name` made on the server of `server_url` (an admin's URL); its URL."""
    import psycopg

    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    return urlunsplit(urlsplit(server_url)._replace(path=f"/{name}"))


def unavailable() -> str | None:
    """Why no server can start here, or None."""
    if importlib.util.find_spec("psycopg") is None:
        return "psycopg is not installed (pip install -e '.[postgres]' in turnstate's checkout)"
    if _bin_folder() is None:
        return "PostgreSQL is not installed (Debian: apt-get install postgresql); .ci/run installs it"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root, and there is no `postgres` user to run the server as"
    return None


def _children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (a server's backends and workers)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # it ended meanwhile
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class ThrowawayServer:
    """A running server: its URL (database `postgres`, user USER with PASSWORD), and `stop` / `start`
    for a test of a database that goes away mid-run."""

    url: str  # over loopback TCP
    socket_url: str  # over the server's unix socket
    _control: Callable[[str], None]

    def stop(self) -> None:
        self._control("stop")

    def start(self) -> None:
        self._control("start")

    def freeze(self) -> None:
        """The server and each of its backends stopped (SIGSTOP), as a hung host is: its kernel still
        accepts connections and acknowledges every packet, and nothing answers."""
        self._control("freeze")

    def thaw(self) -> None:
        self._control("thaw")


@contextlib.contextmanager
def throwaway_server(fsync: bool = False) -> Iterator[ThrowawayServer]:
    """A server for the block, deleted after it. Without `fsync` (the tests) the server never waits for
    its disk; a bench measures with it."""
    problem = unavailable()
    if problem is not None:
        raise RuntimeError(problem)
    binaries = _bin_folder()
    assert binaries is not None
    folder = Path(tempfile.mkdtemp(prefix="turnstate-postgres-"))
    as_user: list[str] = []
    if os.geteuid() == 0:
        account = pwd.getpwnam("postgres")
        os.chown(folder, account.pw_uid, account.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    data, password_file, port = folder / "data", folder / "password", _free_port()
    password_file.write_text(PASSWORD)
    if as_user:
        os.chown(password_file, account.pw_uid, account.pw_gid)

    def run(*command: str) -> None:
        subprocess.run([*as_user, *command], check=True, capture_output=True, cwd=folder)

    options = f"-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories={folder}"
    options += "" if fsync else " -c fsync=off"  # commits still reach the OS: a server's kill loses none

    def control(verb: str) -> None:
        pg_ctl = [str(binaries / "pg_ctl"), "-D", str(data), "-w"]
        if verb == "start":
            run(*pg_ctl, "-o", options, "-l", str(folder / "log"), "start")
        elif verb == "stop":
            run(*pg_ctl, "-m", "immediate", "stop")
        else:
            server = int((data / "postmaster.pid").read_text().split()[0])
            family = [server, *_children(server)]
            for pid in family if verb == "freeze" else reversed(family):
                os.kill(pid, signal.SIGSTOP if verb == "freeze" else signal.SIGCONT)

    try:
        run(
            str(binaries / "initdb"), "-D", str(data), "-U", USER, f"--pwfile={password_file}",
            "--auth=scram-sha-256", "--encoding=UTF8", "--locale=C.UTF-8", "--no-sync",
        )  # fmt: skip
        control("start")
        try:
            yield ThrowawayServer(
                f"postgresql://{USER}:{PASSWORD}@127.0.0.1:{port}/postgres",
                f"postgresql://{USER}:{PASSWORD}@/postgres?host={folder}&port={port}",
                control,
            )
        finally:
            try:
                control("stop")
            except subprocess.CalledProcessError:
                pass  # a test stopped it already
    finally:
        shutil.rmtree(folder, ignore_errors=True)
