"""A hostile HTTP server for adapter tests: it forwards each request to an upstream server (the
embedded local provider) and answers with the upstream's own reply, delivered the way a hostile or
broken server would: never, a byte at a time, without end, oversized, compressed unasked, or with its
JSON rewritten.

The bytes are always the wire's own (a valid JSON body, or valid server-sent events), so an adapter
that read the reply as it came would succeed: only the hostility can make a call fail.
"""

from __future__ import annotations

import gzip
import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from http.client import HTTPConnection
from typing import Any, Literal
from urllib.parse import urlsplit

from turnstate.local_provider.server import TrackedHandler, TrackingServer

Rewrite = Callable[[Any], Any]
"""Takes a reply's JSON (a body, or one event's data) and returns what the server sends instead."""

Hostility = Literal["stall", "trickle", "trickle_head", "endless", "oversized", "gzip"] | Rewrite
"""stall: reads the request and never answers. trickle: the status line and headers at once, then
the body a byte per `interval`. trickle_head: every byte a byte per `interval`, from the status line
on. endless: the reply's first events, then one of its delta events again and again (a JSON body:
the body, then whitespace), never ending. oversized: the reply padded past `oversize_bytes` and still
valid (a JSON body followed by whitespace; a stream with a delta event repeated). gzip: the reply
gzip-compressed, though the client accepted no coding. A function: the reply's JSON rewritten."""

_FORWARDED_OUT = {"host", "connection", "content-length", "accept-encoding", "transfer-encoding"}
_BLOCK = 64 * 1024


@dataclass(frozen=True)
class _Reply:
    status: int
    content_type: str
    body: bytes

    @property
    def is_stream(self) -> bool:
        return self.content_type.startswith("text/event-stream")

    def events(self) -> list[bytes]:
        """The server-sent events of a stream, each with its blank line."""
        return [part + b"\n\n" for part in self.body.split(b"\n\n") if part.strip()]


class HostileServer:
    """A loopback server on a random port, run on daemon threads; a context manager starts and stops it."""

    def __init__(
        self, upstream: str, hostility: Hostility, *, interval: float = 0.05, oversize_bytes: int = 1 << 20
    ) -> None:
        self.upstream = urlsplit(upstream)
        self.hostility = hostility
        self.interval = interval
        self.oversize_bytes = oversize_bytes
        self.released = threading.Event()  # set (and replaced) to end every hostile reply under way
        self._server = _Server(("127.0.0.1", 0), self)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> HostileServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def release(self) -> None:
        """End every hostile reply under way (a stall, a trickle, an endless stream) and close its
        connection; later requests meet the hostility afresh."""
        released, self.released = self.released, threading.Event()
        released.set()
        self._server.close_connections()

    def forward(self, method: str, path: str, headers: dict[str, str], body: bytes) -> _Reply:
        connection = HTTPConnection(self.upstream.hostname or "127.0.0.1", self.upstream.port, timeout=30)
        try:
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            return _Reply(response.status, response.getheader("Content-Type") or "", response.read())
        finally:
            connection.close()


class _Server(TrackingServer):
    def __init__(self, address: tuple[str, int], hostile: HostileServer) -> None:
        self.hostile = hostile
        super().__init__(address, _Handler)

    def handle_error(self, request: object, client_address: object) -> None:
        """Silent: a client that gives up on a hostile reply hangs up mid-write, as it should."""


class _Handler(TrackedHandler):
    server: _Server

    def do_POST(self) -> None:
        hostile = self.server.hostile
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = {name: value for name, value in self.headers.items() if name.lower() not in _FORWARDED_OUT}
        released = hostile.released
        if hostile.hostility == "stall":
            released.wait()
            self.close_connection = True
            return
        reply = hostile.forward(self.command, self.path, headers, body)
        self.close_connection = True  # every hostile reply is the connection's last
        try:
            self._answer(hostile, reply, released)
        except (BrokenPipeError, ConnectionError):
            pass  # the client gave up, as a bounded client does

    do_GET = do_POST

    def _answer(self, hostile: HostileServer, reply: _Reply, released: threading.Event) -> None:
        hostility = hostile.hostility
        if callable(hostility):
            self._write([_head(reply, len(body := _rewritten(reply, hostility))), body])
        elif hostility == "gzip":
            body = gzip.compress(reply.body)
            self._write([_head(reply, len(body), "Content-Encoding: gzip"), body])
        elif hostility == "oversized":
            self._write([_head(reply, len(body := _padded(reply, hostile.oversize_bytes))), body])
        elif hostility == "trickle":
            self._write([_head(reply, len(reply.body))])
            self._write(_bytewise(reply.body, hostile.interval, released))
        elif hostility == "trickle_head":
            self._write(_bytewise(_head(reply, len(reply.body)) + reply.body, hostile.interval, released))
        elif hostility == "endless":
            self._write([_head(reply, None)])
            self._write(_endless(reply, released))
        else:
            raise ValueError(f"unknown hostility {hostility!r}")

    def _write(self, parts: Iterable[bytes]) -> None:
        for part in parts:
            self.wfile.write(part)


def _head(reply: _Reply, length: int | None, *extra: str) -> bytes:
    """The status line and headers; without a length, the body ends when the connection does."""
    lines = [f"HTTP/1.1 {reply.status} Hostile", f"Content-Type: {reply.content_type}", "Connection: close", *extra]
    lines += [f"Content-Length: {length}"] if length is not None else []
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _bytewise(data: bytes, interval: float, released: threading.Event) -> Iterator[bytes]:
    for index in range(len(data)):
        if released.wait(interval):
            return
        yield data[index : index + 1]


def _delta_index(events: list[bytes]) -> int:
    """The first event that carries a delta (a piece of the reply the client appends): repeating it
    keeps the stream valid."""
    for index, event in enumerate(events):
        data = _event_data(event)
        if isinstance(data, dict) and ("delta" in data or any("delta" in choice for choice in data.get("choices", []))):
            return index
    raise ValueError("a stream without a delta event")


def _endless(reply: _Reply, released: threading.Event) -> Iterator[bytes]:
    if reply.is_stream:
        events = reply.events()
        index = _delta_index(events)
        yield b"".join(events[: index + 1])
        block = events[index] * max(1, _BLOCK // len(events[index]))
    else:
        yield reply.body
        block = b" " * _BLOCK
    while not released.is_set():
        yield block


def _padded(reply: _Reply, size: int) -> bytes:
    if not reply.is_stream:
        return reply.body + b" " * size
    events = reply.events()
    index = _delta_index(events)
    repeats = size // len(events[index]) + 1
    return b"".join([*events[: index + 1], events[index] * repeats, *events[index + 1 :]])


def _event_data(event: bytes) -> Any:
    for line in event.decode().splitlines():
        if line.startswith("data:"):
            try:
                return json.loads(line[5:])
            except ValueError:
                return None
    return None


def _rewritten(reply: _Reply, rewrite: Rewrite) -> bytes:
    if not reply.is_stream:
        return json.dumps(rewrite(json.loads(reply.body))).encode()
    events = []
    for event in reply.events():
        lines = []
        for line in event.decode().splitlines():
            if line.startswith("data:") and line[5:].strip().startswith("{"):
                line = "data: " + json.dumps(rewrite(json.loads(line[5:])))
            lines.append(line)
        events.append(("\n".join(lines) + "\n\n").encode())
    return b"".join(events)


class Retype:
    """A rewrite that sets the field at `path` to `value` wherever the path leads to an object (a key)
    or a list (an index), creating a missing last key, or deletes it when `value` is DELETE. "*"
    stands for every item of a list. `applied` counts the places it changed, so a test can tell a
    path that is not in the reply from one the adapter ignored."""

    def __init__(self, path: tuple[str | int, ...], value: Any) -> None:
        self.path, self.value, self.applied = path, value, 0

    def __call__(self, data: Any) -> Any:
        self._set(data, self.path)
        return data

    def _set(self, node: Any, path: tuple[str | int, ...]) -> None:
        key, rest = path[0], path[1:]
        if key == "*":
            for index in range(len(node)) if isinstance(node, list) else []:
                self._set(node, (index, *rest))
        elif rest:
            if isinstance(node, dict) and key in node or isinstance(node, list) and _has_index(node, key):
                self._set(node[key], rest)  # type: ignore[index]
        elif isinstance(node, dict) and isinstance(key, str):
            if self.value is DELETE:
                self.applied += node.pop(key, DELETE) is not DELETE
            else:
                node[key], self.applied = self.value, self.applied + 1
        elif isinstance(node, list) and _has_index(node, key):
            node[key], self.applied = self.value, self.applied + 1  # type: ignore[index]

    def __repr__(self) -> str:
        return f"{'.'.join(map(str, self.path))}={'<deleted>' if self.value is DELETE else json.dumps(self.value)}"


DELETE: Any = object()
"""Retype's value that removes the field instead."""


def _has_index(node: list[Any], key: str | int) -> bool:
    return isinstance(key, int) and -len(node) <= key < len(node)


def elapsed(call: Callable[[], Any]) -> tuple[Any, float]:
    """What `call` returned, and how many seconds it took."""
    started = time.monotonic()
    outcome = call()
    return outcome, time.monotonic() - started


def each_object(data: Any, visit: Callable[[dict[str, Any]], None]) -> Any:
    """`visit` every JSON object in `data` (a reply, or one event's data), outermost first; `data` back."""
    if isinstance(data, dict):
        visit(data)
        for value in data.values():
            each_object(value, visit)
    elif isinstance(data, list):
        for value in data:
            each_object(value, visit)
    return data
