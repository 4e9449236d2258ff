"""Every provider request bounded in time and in size, whatever the SDK: the one HTTP client the
adapters hand their SDKs (openai, anthropic and google-genai all send through an httpx2 client).

The rules it keeps:
1. `Endpoint.timeout_seconds` is a deadline for the whole request, from the moment the SDK sends it
   to the last byte read: connect, TLS, writing the body, the first byte, every later byte of the
   body, streamed or not, redirects included. The SDKs' own timeout bounds each read alone, so a
   server that trickled a byte every half second kept a request going for minutes. A request the
   SDK sends with a shorter read timeout keeps that as its deadline (google-genai sends each
   continuation hop of one call the time the call has left). Name resolution is not bounded: the
   system resolver takes no timeout.
2. No socket operation waits longer than the time left. A network backend installed in each of the
   client's connection pools (the direct one and any proxy's) cuts the SDK's per-operation timeout to
   the time left, so a blocked read ends at the deadline, never a whole read timeout after it.
3. `Endpoint.max_reply_bytes` caps what one request may read from the connection (status line,
   headers and body, any redirect's included): past it the read stops and the connection is closed,
   so an endless stream or a huge body ends instead of growing the process.
4. Replies are asked for without content coding (`Accept-Encoding: identity`), so the bytes read are
   the bytes kept; a reply compressed anyway is refused, since its decoded size is not bounded by what
   was read (a few MiB of gzip can decode to gigabytes).
5. Each bound, when passed, raises an exception marked with the contract's `DeadlineExceeded` or
   `ReplyRefused`; the SDKs wrap it in their own timeout or connection errors, and `never_raising`
   finds the mark among the causes: a deadline is a transient `DeadlineExceeded`, a refused reply a
   malformed reply (both retried by the machine, after its backoff).
6. An SDK may be slow to digest what was read (google-genai builds a pydantic model class for every
   streamed event, ~20 ms each, so one 64 KiB read held ~5 s of work): the body reaches the SDK in
   pieces of at most PIECE_BYTES, the deadline checked before each, so the deadline is overrun by the
   digestion of one piece at most.

The deadline travels from the request to the sockets in a context variable, set only while this
client sends a request or reads its body, so pooled connections stay shared and each thread's
request keeps its own budget.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

import httpcore2
import httpx2

from turnstate.adapters.contract import DeadlineExceeded, Endpoint, ReplyRefused

T = TypeVar("T")

PIECE_BYTES = 1024
"""The most of a body an SDK is handed between two looks at the deadline (rule 6)."""


class DeadlinePassed(httpcore2.TimeoutException, DeadlineExceeded):
    """The request's deadline passed before this socket operation could finish."""


class ReplyTooLarge(httpcore2.ReadError, ReplyRefused):
    """The request read more than max_reply_bytes from its connection."""


class EncodedReply(httpx2.DecodingError, ReplyRefused):
    """A reply with a content coding, though none was accepted: its decoded size has no bound."""


@dataclass
class _Budget:
    """What one request has left: time until its monotonic deadline, and bytes to read."""

    deadline: float
    bytes_left: int

    def wait(self, timeout: float | None) -> tuple[float, bool]:
        """How long the next socket operation may wait (the SDK's own timeout cut to the time left),
        and whether the deadline is what limits it; raises DeadlinePassed when no time is left."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise DeadlinePassed("the request's deadline passed")
        if timeout is not None and timeout <= left:
            return timeout, False
        return left, True

    def spend(self, size: int) -> None:
        self.bytes_left -= size
        if self.bytes_left < 0:
            raise ReplyTooLarge("the reply passed max_reply_bytes")


_ACTIVE: ContextVar[_Budget | None] = ContextVar("turnstate_request_budget", default=None)


@contextmanager
def _spending(budget: _Budget) -> Iterator[None]:
    token = _ACTIVE.set(budget)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def _bounded(operation: Callable[[float | None], T], timeout: float | None) -> T:
    """Run one socket operation within the active request's time left (rule 2); a timeout the
    deadline imposed is the deadline passing. Outside any request (the pool's own housekeeping) the
    operation runs as asked."""
    budget = _ACTIVE.get()
    if budget is None:
        return operation(timeout)
    wait, by_deadline = budget.wait(timeout)
    try:
        return operation(wait)
    except httpcore2.TimeoutException as error:
        if by_deadline:
            raise DeadlinePassed("the request's deadline passed") from error
        raise


class _BoundedStream(httpcore2.NetworkStream):
    """A connection whose every read and write waits at most the time left, and whose reads are
    counted against the reply cap."""

    def __init__(self, stream: httpcore2.NetworkStream) -> None:
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        data = _bounded(lambda wait: self._stream.read(max_bytes, wait), timeout)
        budget = _ACTIVE.get()
        if budget is not None:
            budget.spend(len(data))
        return data

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        _bounded(lambda wait: self._stream.write(buffer, wait), timeout)

    def close(self) -> None:
        self._stream.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None) -> Any:
        return _BoundedStream(
            _bounded(lambda wait: self._stream.start_tls(ssl_context, server_hostname, wait), timeout)
        )

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _BoundedBackend(httpcore2.NetworkBackend):
    """The pool's own backend, with every connection it opens bounded."""

    def __init__(self, backend: httpcore2.NetworkBackend) -> None:
        self._backend = backend

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.NetworkStream:
        return _BoundedStream(
            _bounded(lambda wait: self._backend.connect_tcp(host, port, wait, local_address, socket_options), timeout)
        )

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore2.NetworkStream:
        return _BoundedStream(
            _bounded(lambda wait: self._backend.connect_unix_socket(path, wait, socket_options), timeout)
        )

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


class _BudgetedBody(httpx2.SyncByteStream):
    """A response body read under its request's budget, however long after the send it is read, and
    handed on in pieces of at most PIECE_BYTES with the deadline checked before each (rule 6)."""

    def __init__(self, body: httpx2.SyncByteStream, budget: _Budget) -> None:
        self._body = body
        self._budget = budget

    def __iter__(self) -> Iterator[bytes]:
        chunks = iter(self._body)
        while True:
            with _spending(self._budget):
                chunk = next(chunks, None)
            if chunk is None:
                return
            for start in range(0, len(chunk), PIECE_BYTES):
                self._budget.wait(None)
                yield chunk[start : start + PIECE_BYTES]

    def close(self) -> None:
        self._body.close()


def _bound_pool(transport: httpx2.BaseTransport) -> httpx2.BaseTransport:
    """Install the bounded backend in the transport's connection pool. httpx2 takes no backend as an
    argument, so this reaches the pool by its private names, and refuses loudly if they moved."""
    pool = getattr(transport, "_pool", None)
    backend = getattr(pool, "_network_backend", None)
    if not isinstance(backend, httpcore2.NetworkBackend):
        raise RuntimeError(f"this httpx2 release ({httpx2.__version__}) hides its connection pool's network backend")
    if not isinstance(backend, _BoundedBackend):
        pool._network_backend = _BoundedBackend(backend)  # type: ignore[union-attr]
    return transport


def _refuse_encoded(response: httpx2.Response) -> None:
    """Rule 4, for every response of a request (a redirect's too), before its body is read."""
    if response.headers.get("Content-Encoding", "").strip().lower() not in ("", "identity"):
        raise EncodedReply("a reply with a content coding, though none was accepted")


class BoundedClient(httpx2.Client):
    """An httpx2 client whose every request keeps its deadline and its reply cap (the rules above).
    Redirects are followed, as the openai and anthropic SDKs' own clients follow them."""

    def __init__(self, timeout_seconds: float, max_reply_bytes: int) -> None:
        self.timeout_seconds = timeout_seconds
        self.max_reply_bytes = max_reply_bytes
        super().__init__(timeout=timeout_seconds, follow_redirects=True, event_hooks={"response": [_refuse_encoded]})

    def _init_transport(self, *args: Any, **kwargs: Any) -> httpx2.BaseTransport:
        return _bound_pool(super()._init_transport(*args, **kwargs))

    def _init_proxy_transport(self, *args: Any, **kwargs: Any) -> httpx2.BaseTransport:
        return _bound_pool(super()._init_proxy_transport(*args, **kwargs))

    def send(self, request: httpx2.Request, *, stream: bool = False, **kwargs: Any) -> httpx2.Response:
        """Send under a fresh budget, kept by the body for as long as it is read. A request sent with a
        shorter read timeout of its own keeps that as its deadline: google-genai sends each
        continuation hop of one call the time the call has left."""
        own = (request.extensions.get("timeout") or {}).get("read")
        seconds = min(self.timeout_seconds, own) if isinstance(own, int | float) else self.timeout_seconds
        budget = _Budget(time.monotonic() + seconds, self.max_reply_bytes)
        request.headers["Accept-Encoding"] = "identity"
        with _spending(budget):
            response = super().send(request, stream=True, **kwargs)
        response.stream = _BudgetedBody(response.stream, budget)  # type: ignore[arg-type]
        if not stream:
            try:
                response.read()
            except BaseException:
                response.close()
                raise
        return response


def bounded_client(endpoint: Endpoint) -> BoundedClient:
    """The HTTP client for `endpoint`'s SDK: its deadline and reply cap on every request."""
    return BoundedClient(endpoint.timeout_seconds, endpoint.max_reply_bytes)
