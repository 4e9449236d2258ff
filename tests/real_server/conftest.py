"""A real llama.cpp llama-server with SmolLM2-135M (tools/llama_server.py), and a recording proxy in
front of it, for the tests of this folder: what the real server sent is the truth they check against.

The server is built once into a cache folder (`python tools/llama_server.py build`: about 7 minutes on
two cores; .ci/run builds it before the tests). Where it is not built the tests skip, saying so: a
newcomer's `pytest` does not compile a server behind their back.
"""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.tools import tool

KEY = "x"  # llama-server started without --api-key takes any key


llama_server = tool("llama_server")


@dataclass
class Exchange:
    """One request through the proxy and the server's reply, as bytes went by."""

    path: str
    request: dict[str, Any]
    status: int
    body: bytes

    def events(self) -> list[dict[str, Any]]:
        """A streamed reply's server-sent events' data, `[DONE]` left out."""
        found = []
        for line in self.body.decode().splitlines():
            if line.startswith("data: ") and line != "data: [DONE]":
                found.append(json.loads(line.removeprefix("data: ")))
        return found

    def reply(self) -> dict[str, Any]:
        return json.loads(self.body)


@dataclass
class RecordingProxy:
    """An HTTP proxy on a loopback port that forwards to the server and keeps every exchange."""

    upstream_port: int
    exchanges: list[Exchange] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def model_calls(self) -> list[Exchange]:
        return [exchange for exchange in self.exchanges if exchange.path.startswith("/v1/")]

    def start(self) -> None:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
                sent = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                upstream = http.client.HTTPConnection("127.0.0.1", proxy.upstream_port, timeout=300)
                headers = {"Content-Type": "application/json", "Authorization": "Bearer " + KEY}
                upstream.request("POST", self.path, sent, headers)
                reply = upstream.getresponse()
                self.send_response(reply.status)
                for name, value in reply.getheaders():
                    if name.lower() not in ("content-length", "transfer-encoding", "connection"):
                        self.send_header(name, value)
                self.send_header("Connection", "close")
                self.end_headers()
                received = bytearray()
                while chunk := reply.read1(65536):
                    received += chunk
                    self.wfile.write(chunk)
                    self.wfile.flush()
                upstream.close()
                proxy.exchanges.append(Exchange(self.path, json.loads(sent or b"{}"), reply.status, bytes(received)))

            def log_message(self, *arguments: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


@pytest.fixture(scope="session")
def llama() -> Iterator[Any]:
    """The running server (the template that renders tools and thinking: see tools/llama_server.py)."""
    if not (llama_server.server_dir() / "llama-server").is_file():
        pytest.skip(
            f"llama-server is not built in {llama_server.server_dir()}: run `.venv/bin/python tools/llama_server.py build` "
            "(about 7 minutes on two cores; .ci/run builds it) to run the tests against the real server"
        )
    with llama_server.running_server(tools=True) as server:
        yield server


@pytest.fixture
def proxy(llama: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[RecordingProxy]:
    """A recording proxy in front of the server, which the shipped llama profiles reach through their
    LLAMA_BASE_URL (the OpenAI wires' /v1 root; the Messages profile names the root itself)."""
    recording = RecordingProxy(llama.port)
    recording.start()
    monkeypatch.setenv("LLAMA_KEY", KEY)
    yield recording
    recording.stop()
