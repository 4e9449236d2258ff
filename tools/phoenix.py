#!/usr/bin/env python3
"""Arize Phoenix, a real OpenTelemetry backend that nobody here wrote, for the trace tests (issue 36).

Usage (Python 3.10 or later, standard library only):

    python tools/phoenix.py install        # into the cache, once (about a minute, 860 MB)
    python tools/phoenix.py serve [--port N]  # run it in the foreground

or, from Python with tools/ on sys.path:

    from phoenix import running_phoenix
    with running_phoenix() as phoenix:
        phoenix.traces_url          # OTLP/HTTP (protobuf): what OTEL_EXPORTER_OTLP_TRACES_ENDPOINT names
        phoenix.spans("project")    # every span it stored for a project, from its REST API

Phoenix is installed from PyPI into a virtual environment of its own,
`$XDG_CACHE_HOME/turnstate-phoenix/arize-phoenix-<version>/` (~/.cache when unset), never into the
project's: it pins its own versions of the provider SDKs and pydantic. The folder counts as
installed once the file `installed` is in it, written after pip finished, so a killed install is done
again. A server keeps its spans in a temporary working folder of its own (SQLite), removed when it stops.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from served import Served, free_port

VERSION = "20.26.1"  # the release the trace tests were written against
START_SECONDS = 90  # its first start migrates its database: about 10 s on two quiet cores
PAGE = 1000  # spans a REST call returns at most


def home() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "turnstate-phoenix" / f"arize-phoenix-{VERSION}"


def executable() -> Path | None:
    """The installed `phoenix` command, or None when it is not (yet) installed."""
    folder = home()
    return folder / "bin" / "phoenix" if (folder / "installed").is_file() else None


def install() -> Path:
    """Install Phoenix into the cache unless it is there; its `phoenix` command."""
    found = executable()
    if found is not None:
        return found
    folder = home()
    shutil.rmtree(folder, ignore_errors=True)  # a killed install's leftovers
    folder.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    pip = [str(folder / "bin" / "pip"), "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, f"arize-phoenix=={VERSION}"], check=True)
    (folder / "installed").write_text(f"arize-phoenix {VERSION}\n")
    return folder / "bin" / "phoenix"


@dataclass
class Phoenix(Served):
    """A started Phoenix: its REST API at `base_url`, OTLP/HTTP at `traces_url`."""

    @property
    def traces_url(self) -> str:
        return f"{self.base_url}/v1/traces"

    def spans(self, project: str) -> list[dict[str, Any]]:
        """Every span Phoenix stored for `project` ([] while it has none), in its REST API's shape."""
        found: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            query = {"limit": str(PAGE), **({"cursor": cursor} if cursor else {})}
            url = f"{self.base_url}/v1/projects/{urllib.parse.quote(project)}/spans?{urllib.parse.urlencode(query)}"
            try:
                with urllib.request.urlopen(url, timeout=30) as reply:
                    page = json.loads(reply.read())
            except urllib.error.HTTPError as error:
                if error.code == 404:  # no span of the project has arrived yet
                    return []
                raise
            found += page["data"]
            cursor = page.get("next_cursor")
            if not cursor:
                return found

    def post(self, body: bytes) -> int:
        """POST an OTLP/protobuf ExportTraceServiceRequest; the HTTP status."""
        request = urllib.request.Request(
            self.traces_url, data=body, headers={"Content-Type": "application/x-protobuf"}, method="POST"
        )
        with urllib.request.urlopen(request, timeout=30) as reply:
            return int(reply.status)


@contextlib.contextmanager
def running_phoenix(command: Path | None = None, port: int | None = None) -> Iterator[Phoenix]:
    """Phoenix serving on 127.0.0.1 (a free port unless given) with a new, empty working folder; stopped on exit."""
    command = command or install()
    with tempfile.TemporaryDirectory(prefix="phoenix-") as work:
        port = port or free_port()
        env = {
            **os.environ,
            "PHOENIX_WORKING_DIR": work,
            "PHOENIX_HOST": "127.0.0.1",
            "PHOENIX_PORT": str(port),
            "PHOENIX_GRPC_PORT": str(free_port()),
            "PHOENIX_TELEMETRY_ENABLED": "false",
        }
        log = Path(work) / "phoenix.log"
        with log.open("wb") as output:
            process = subprocess.Popen(
                [str(command), "serve"],
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        phoenix = Phoenix(process, port, log)
        try:
            phoenix.wait_answering("phoenix", "/healthz", START_SECONDS)
            yield phoenix
        finally:
            phoenix.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("install", help="install Phoenix into the cache")
    serve = commands.add_parser("serve", help="run Phoenix in the foreground")
    serve.add_argument("--port", type=int, default=6006)
    arguments = parser.parse_args()
    if arguments.command == "install":
        print(install())
        return
    with running_phoenix(port=arguments.port) as phoenix:
        print(f"phoenix: {phoenix.base_url} (OTLP: {phoenix.traces_url}); Ctrl-C stops it", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            phoenix.process.wait()


if __name__ == "__main__":
    main()
