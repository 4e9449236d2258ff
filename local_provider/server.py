"""The embedded local provider: a strict stand-in for real model APIs, over real HTTP on loopback.

Real SDKs reach it through base_url, so every adapter is exercised through its real client library.
The server owns what all wire protocols share, and does it in this order for each request:

    route by (method, path)  -> unknown: 404
    check the API key        -> missing, or INVALID_API_KEY: 401, in the wire's words
    check the Content-Type   -> not application/json: 400, in the wire's words
    parse the JSON body      -> not a JSON object: 400, in the wire's words
    admit it                 -> log the body, number it (its ordinal), take its scheduled fault
    rate limited?            -> 429 while a rate_limit fault's retry-after has not passed, or
                                above the rate it enforces (`rate`, enforced_rate.py)
    status fault?            -> 429 / 500 / 503, in the wire's words
    the route's wire module  -> validates its own format, asks the Exchange for the model's
                                Completion, answers with JSON or a server-sent event stream

A wire module (chat_completions, ...) only translates; the model behind every wire is the same
ReplyFn, the same token estimate, the same prefix cache and the same fault schedule.
"""

from __future__ import annotations

import json
import math
import socket
import socketserver
import sys
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from urllib.parse import urlsplit

import orjson

from turnstate.adapters.rate_buckets import Rate
from turnstate.local_provider.enforced_rate import EnforcedRate
from turnstate.local_provider.exchange import Exchange, Model, ProviderState, ReplyFn, SseEvent, Thinker, Thoughtless
from turnstate.local_provider.faults import HTML_PAGE, STATUS_FAULTS, Clock, Fault, FaultSchedule, RateLimitWindow
from turnstate.local_provider.prefix_cache import PrefixCache
from turnstate.local_provider.routes import ROUTES
from turnstate.local_provider.service import Service

DEFAULT_CONTEXT_WINDOW = 8192
DEFAULT_REQUEST_LOG_SIZE = 100
"""How many of the latest request bodies a provider keeps for inspection (tests, `turnstate serve`)."""

SERVICE_TIMES_KEPT = 1000
"""How many of the latest requests' service times a provider keeps (for benchmarks)."""

INVALID_API_KEY = "sk-invalid"
"""The one key the provider treats as wrong (401 invalid_api_key); any other non-empty key is accepted."""

JSON_MEDIA_TYPE = "application/json"

# How often the accept loop looks for a stop request: stop() waits up to this long, once per provider,
# and test suites start one provider per test.
SHUTDOWN_POLL_SECONDS = 0.01


class LocalProvider:
    """The local provider's HTTP server, run on a daemon thread; a context manager starts and stops it."""

    def __init__(
        self,
        *,
        context_window: int = DEFAULT_CONTEXT_WINDOW,
        faults: Sequence[Fault] = (),
        reply: ReplyFn | None = None,
        model: Model | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        clock: Clock = time.monotonic,
        request_log_size: int = DEFAULT_REQUEST_LOG_SIZE,
        service_dir: Path | None = None,
        rate: Rate | None = None,
    ) -> None:
        """`service_dir` keeps the provider's service (its keys and stored conversations, service.py)
        in that folder, for a later provider on the same folder to continue what this one issued; by
        default it lives in memory and ends with this provider."""
        self.context_window = context_window
        # The latest admitted request bodies: a ring, so a long run's provider keeps a bounded few.
        self._request_log: deque[dict[str, object]] = deque(maxlen=request_log_size)
        self._admitted = 0  # model requests admitted so far: the next one's ordinal is this plus one
        self._service_seconds: deque[float] = deque(maxlen=SERVICE_TIMES_KEPT)
        # The deterministic policy by default, imported only when wanted; a test passes its own reply,
        # which then also answers reasoning wires, without private thoughts; or another model whole
        # (the recording player, client.local.recording).
        self._reply: ReplyFn
        self._thinker: Thinker
        if model is not None:
            self._reply, self._thinker = model.reply, model
        else:
            self._reply, self._thinker = _policy() if reply is None else (reply, Thoughtless(reply))
        self._service = Service(service_dir)
        self._state = ProviderState(self._service)  # what the wires keep between requests, made anew at start
        self._faults = FaultSchedule(faults)
        self._rate_limit = RateLimitWindow(clock)
        self._enforced = EnforcedRate(rate, clock) if rate is not None else None
        self._prefix_cache = PrefixCache()
        self._address = (host, port)
        self._admit_lock = threading.Lock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def request_log(self) -> list[dict[str, object]]:
        """The latest admitted model request bodies (at most `request_log_size`), oldest first."""
        with self._admit_lock:
            return list(self._request_log)

    @property
    def service_seconds(self) -> list[float]:
        """The CPU time each of the latest requests took to serve, from its body read to its reply
        sent (its thread's time: wall time would count waits for the interpreter's lock, which an
        embedded provider shares with its client)."""
        return list(self._service_seconds)

    def start(self) -> LocalProvider:
        if self._server is not None:
            raise RuntimeError("the local provider is already running")
        self._service.open()  # a ServiceStateError says why its folder cannot be used
        self._state = ProviderState(self._service)
        try:
            self._server = _Server(self._address, provider=self)
        except BaseException:
            self._service.close()
            raise
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": SHUTDOWN_POLL_SECONDS},
            name=f"turnstate-local-provider-{self._server.server_port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop accepting, close every open connection and free the port; safe to call twice."""
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is None or thread is None:
            return
        server.shutdown()
        server.server_close()
        server.close_connections()
        thread.join()
        self._service.close()

    def __enter__(self) -> LocalProvider:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError("the local provider is not running; call start() first")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def openai_base_url(self) -> str:
        return self.base_url + "/v1"

    def serve_until_interrupted(self) -> None:
        """Serve in the foreground until Ctrl-C (for `turnstate serve`), then stop."""
        if self._server is None:
            self.start()
        thread = self._thread
        try:
            # A timed join keeps the main thread responsive to KeyboardInterrupt.
            while thread is not None and thread.is_alive():
                thread.join(timeout=0.5)
        except KeyboardInterrupt:
            pass
        finally:
            self.stop()

    def _admit(self, body: dict[str, object]) -> tuple[int, Fault | None]:
        """Log `body`, give it the next ordinal, and take the fault scheduled for that ordinal."""
        with self._admit_lock:
            self._request_log.append(body)
            self._admitted += 1
            ordinal = self._admitted
        return ordinal, self._faults.take(ordinal)

    @property
    def refused_over_rate(self) -> int:
        """How many requests the rate it enforces refused so far (0 without one)."""
        return 0 if self._enforced is None else self._enforced.refused

    def _rate_limit_wait(self, fault: Fault | None, body_bytes: int) -> float | None:
        """Seconds a 429 asks the client to wait, or None if the request is not rate limited.

        A rate_limit fault with retry_after_seconds opens a window in which every request is refused,
        whatever fault it was scheduled for; one without says "retry now" (0) and closes nothing. A
        request past both is held to the enforced rate, if there is one.
        """
        if fault is not None and fault.retry_after_seconds is not None:  # only a rate_limit fault has one
            self._rate_limit.open(fault.retry_after_seconds)
        rate_limited = fault is not None and fault.kind == "rate_limit"
        remaining = self._rate_limit.remaining()
        if rate_limited or remaining > 0:
            return remaining
        return None if self._enforced is None else self._enforced.admit(body_bytes)


def _policy() -> tuple[ReplyFn, Thinker]:
    """The real policy, as a chat model's reply function and as a reasoning model."""
    from turnstate.local_provider import policy

    return policy.reply, policy


class TrackingServer(ThreadingHTTPServer):
    """A threading HTTP server that knows its open keep-alive connections (its handler tracks and
    untracks each), so it can close them and their handler threads end with the server."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        super().__init__(address, handler)

    def track(self, connection: socket.socket) -> None:
        with self._connections_lock:
            self._connections.add(connection)

    def untrack(self, connection: socket.socket) -> None:
        with self._connections_lock:
            self._connections.discard(connection)

    def close_connections(self) -> None:
        """Shut down idle keep-alive connections so their handler threads end with the server."""
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # the peer already closed it


class _Server(TrackingServer):
    """The local provider's server: it knows its provider."""

    def __init__(self, address: tuple[str, int], *, provider: LocalProvider) -> None:
        self.provider = provider
        super().__init__(address, _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind also resolves the host's FQDN, a DNS lookup a loopback server never needs.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name, self.server_port = str(host), int(port)

    def handle_error(self, request: object, client_address: object) -> None:
        # A client that hangs up is normal (a cut stream, an SDK closing early); anything else is a bug
        # in the provider and is printed with its traceback.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)  # type: ignore[arg-type]


class TrackedHandler(BaseHTTPRequestHandler):
    """HTTP/1.1 with keep-alive, each connection tracked by its TrackingServer while it is open."""

    protocol_version = "HTTP/1.1"
    server: TrackingServer

    def setup(self) -> None:
        super().setup()
        # Headers and body go out as separate small writes; without NODELAY, Nagle's algorithm and
        # the client's delayed ACK hold each response back ~40 ms.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.track(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.untrack(self.connection)

    def log_message(self, format: str, *args: object) -> None:
        """Silent: a server serving a test run must not write a line per request to stderr."""


class _Handler(TrackedHandler):
    """JSON carries Content-Length, event streams use chunked encoding."""

    server: _Server

    def do_POST(self) -> None:
        self._dispatch()

    do_GET = do_PUT = do_PATCH = do_DELETE = do_POST

    def _dispatch(self) -> None:
        self._responded = False
        raw = self._read_body()
        started = time.thread_time()
        try:
            self._serve(raw)
        finally:
            self.server.provider._service_seconds.append(time.thread_time() - started)

    def _serve(self, raw: bytes) -> None:
        route = ROUTES.get((self.command, urlsplit(self.path).path))
        if route is None:
            self.write_json(404, _invalid_url_body(self.command, self.path), {})
            return
        api_key = route.api_key(self.headers)
        if not api_key:
            self.write_json(*route.wire.error_reply("missing_api_key"), {})
            return
        if api_key == INVALID_API_KEY:
            self.write_json(*route.wire.error_reply("invalid_api_key", api_key), {})
            return
        content_type = self.headers.get("Content-Type") or ""
        if content_type.partition(";")[0].strip().lower() != JSON_MEDIA_TYPE:
            self.write_json(*route.wire.error_reply("unsupported_content_type", content_type), {})
            return
        body = _json_object(raw)
        if body is None:
            self.write_json(*route.wire.error_reply("unparseable_body"), {})
            return
        provider = self.server.provider
        ordinal, fault = provider._admit(body)
        wait = provider._rate_limit_wait(fault, len(raw))
        if wait is not None:
            self.write_json(*route.wire.error_reply("rate_limit"), _retry_after_headers(wait))
            return
        if fault is not None and fault.kind in STATUS_FAULTS:
            self.write_json(*route.wire.error_reply(fault.kind), {})  # type: ignore[arg-type]
            return
        if fault is not None and fault.kind == "html_page":
            self.write_raw(200, "text/html; charset=utf-8", HTML_PAGE, {})
            return
        try:
            exchange = Exchange(
                self,
                body,
                ordinal,
                fault,
                context_window=provider.context_window,
                prefix_cache=provider._prefix_cache,
                reply=provider._reply,
                api_key=api_key,
                thinker=provider._thinker,
                state=provider._state,
            )
            route.wire.handle(exchange)
        except Exception:
            if not self._responded:
                self.write_json(*route.wire.error_reply("server_error"), {})
            raise

    def _read_body(self) -> bytes:
        length = self.headers.get("Content-Length")
        if length is None:
            if "Transfer-Encoding" in self.headers:
                # A chunked request body is not read, so the connection cannot carry another request.
                self.close_connection = True
            return b""
        return self.rfile.read(int(length))

    def write_json(self, status: int, body: Mapping[str, object], headers: Mapping[str, str]) -> None:
        self.write_raw(status, JSON_MEDIA_TYPE, json.dumps(body).encode("utf-8"), headers)

    def write_raw(self, status: int, content_type: str, data: bytes, headers: Mapping[str, str]) -> None:
        self._responded = True
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def write_sse(self, events: Iterable[SseEvent], cut_after: int | None) -> None:
        self._responded = True
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        # The events are ready at once, so they go out in one write: a chunk each, as a stream.
        chunks = []
        for sent, event in enumerate(events):
            if sent == cut_after:
                self.close_connection = True
                break
            chunks.append(_chunk(_sse_frame(event)))
        else:
            chunks.append(_chunk(b""))  # the zero-length chunk that ends the body
        self.wfile.write(b"".join(chunks))

    def drop_connection(self) -> None:
        self._responded = True
        self.close_connection = True


def _chunk(data: bytes) -> bytes:
    """One chunk of a chunked HTTP body."""
    return b"%x\r\n%s\r\n" % (len(data), data)


def _json_object(raw: bytes) -> dict[str, object] | None:
    """The body as a JSON object, or None. orjson reads strict JSON (no NaN or Infinity, which
    Python's own parser takes) about three times as fast, and a long run's bodies are large."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _retry_after_headers(wait: float) -> dict[str, str]:
    """`retry-after` in whole seconds (rounded up, as HTTP requires) and `retry-after-ms`, which the
    OpenAI SDK reads first; a wait of 0 says only `retry-after: 0`."""
    if wait <= 0:
        return {"retry-after": "0"}
    return {"retry-after": str(math.ceil(wait)), "retry-after-ms": str(math.ceil(wait * 1000))}


def _sse_frame(event: SseEvent) -> bytes:
    """Field lines then a blank line; values are single-line (JSON payloads are dumped without newlines)."""
    return ("".join(f"{field}: {value}\n" for field, value in event.items()) + "\n").encode("utf-8")


def _invalid_url_body(method: str, path: str) -> dict[str, object]:
    """OpenAI's answer to an unknown endpoint; other SDKs only need some JSON with a 404."""
    message = f"Invalid URL ({method} {path})"
    return {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}}
