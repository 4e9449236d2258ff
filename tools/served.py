"""What the tools/ scripts that start a server share (standard library only): a free port, and a
started server process with its log, its address, a wait for it to answer, and its stop.

The scripts import it as a sibling: Python puts a script's own folder first on sys.path, and the
tests load the scripts with tools/ on it (tests/tools.py)."""

from __future__ import annotations

import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

STOP_GRACE = 5.0  # seconds between SIGTERM and SIGKILL


class SetupError(Exception):
    """A step that cannot go on; its message is the one line the command prints."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def tail(log: Path, lines: int = 30) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@dataclass
class Served:
    """A started server on 127.0.0.1: its process (in a session of its own), port and log."""

    process: subprocess.Popen[bytes]
    port: int
    log_path: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it has not exited after STOP_GRACE seconds."""
        if self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(STOP_GRACE)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def wait_answering(self, name: str, path: str, deadline: float) -> None:
        """Wait for GET `path` to answer 200; SetupError with the log's end if `name` exits or time runs out."""
        until = time.monotonic() + deadline
        while time.monotonic() < until:
            if (code := self.process.poll()) is not None:
                raise SetupError(
                    f"{name} exited {code} while starting; the end of {self.log_path}:\n{tail(self.log_path)}"
                )
            try:
                with urllib.request.urlopen(self.base_url + path, timeout=2) as reply:
                    if reply.status == 200:
                        return
            except (urllib.error.URLError, OSError):  # refused while it binds, 503 while it loads
                pass
            time.sleep(0.2)
        raise SetupError(
            f"{name} did not answer {path} within {deadline:.0f} s; the end of {self.log_path}:\n{tail(self.log_path)}"
        )
