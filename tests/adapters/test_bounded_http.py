"""The bounded HTTP client every adapter hands its SDK (adapters/bounded_http.py), over plain httpx2:
the rules that the adapter matrix in test_hostile_servers.py relies on, each checked alone."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx2
import pytest

from turnstate.adapters.bounded_http import BoundedClient, ReplyTooLarge
from turnstate.adapters.contract import DeadlineExceeded, ReplyRefused
from turnstate.local_provider.server import LocalProvider

from ..hostile_server import HostileServer, Hostility

PATH = "/v1/chat/completions"
BODY = {"model": "local-policy-1", "messages": [{"role": "user", "content": "LEVEL 1/1"}], "max_tokens": 64}
HEADERS = {"Authorization": "Bearer test-key"}


@pytest.fixture(scope="module")
def provider() -> Iterator[LocalProvider]:
    with LocalProvider() as provider:
        yield provider


def marked(error: BaseException, mark: type[Exception]) -> bool:
    """Whether `mark` is among `error` and the exceptions it was raised from."""
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, mark):
            return True
        cause = cause.__cause__ or cause.__context__
    return False


def post(client: httpx2.Client, base_url: str) -> httpx2.Response:
    return client.post(base_url + PATH, json=BODY, headers=HEADERS)


def failure_after(client: httpx2.Client, base_url: str) -> tuple[BaseException, float]:
    started = time.monotonic()
    with pytest.raises(httpx2.HTTPError) as raised:
        post(client, base_url)
    return raised.value, time.monotonic() - started


@pytest.mark.parametrize("hostility", ["stall", "trickle_head", "trickle"])
def test_a_request_ends_at_its_deadline_however_its_bytes_come(provider, hostility: Hostility):
    with HostileServer(provider.base_url, hostility) as hostile:
        error, seconds = failure_after(BoundedClient(0.5, 1 << 20), hostile.base_url)
    assert marked(error, DeadlineExceeded) and 0.45 < seconds < 1.0


def test_a_blocked_read_waits_only_the_time_left_not_a_whole_read_timeout(provider):
    # A byte every 0.8 s: each read alone is within the 1 s timeout, so only the time left ends the
    # read that started at 0.8 s, at 1.0 s (a read timeout of its own would let it run to 1.6 s).
    with HostileServer(provider.base_url, "trickle", interval=0.8) as hostile:
        error, seconds = failure_after(BoundedClient(1.0, 1 << 20), hostile.base_url)
    assert marked(error, DeadlineExceeded) and seconds < 1.4


def test_a_body_read_after_the_send_keeps_the_requests_deadline(provider):
    client = BoundedClient(0.3, 1 << 20)
    request = client.build_request("POST", provider.base_url + PATH, json=BODY, headers=HEADERS)
    response = client.send(request, stream=True)
    time.sleep(0.4)
    with pytest.raises(Exception) as raised:
        response.read()
    assert marked(raised.value, DeadlineExceeded)


@pytest.mark.parametrize("hostility", ["endless", "oversized"])
def test_a_reply_past_the_cap_stops_being_read(provider, hostility: Hostility):
    with HostileServer(provider.base_url, hostility) as hostile:
        error, seconds = failure_after(BoundedClient(30.0, 64 * 1024), hostile.base_url)
    assert marked(error, ReplyRefused) and marked(error, ReplyTooLarge) and seconds < 5


def test_a_compressed_reply_is_refused_and_none_is_asked_for(provider):
    with HostileServer(provider.base_url, "gzip") as hostile:
        error, _ = failure_after(BoundedClient(5.0, 1 << 20), hostile.base_url)
        honest = post(BoundedClient(5.0, 1 << 20), provider.base_url)
    assert marked(error, ReplyRefused)
    assert honest.request.headers["Accept-Encoding"] == "identity" and honest.status_code == 200


def test_a_client_whose_request_passed_its_deadline_serves_the_next_one_in_full(provider):
    client = BoundedClient(0.5, 1 << 20)
    with HostileServer(provider.base_url, "stall") as hostile:
        failure_after(client, hostile.base_url)
    started = time.monotonic()
    assert post(client, provider.base_url).status_code == 200
    assert post(client, provider.base_url).status_code == 200  # over the kept-alive connection
    assert time.monotonic() - started < 0.5


def test_a_proxy_from_the_environment_is_used_and_bounded(provider, monkeypatch):
    with HostileServer(provider.base_url, "stall") as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.base_url)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        error, seconds = failure_after(BoundedClient(0.5, 1 << 20), "http://provider.invalid")
    assert marked(error, DeadlineExceeded) and seconds < 1.0


def test_a_request_sent_with_a_shorter_timeout_of_its_own_keeps_that_as_its_deadline(provider):
    # google-genai sends each continuation hop of one call the time the call has left.
    client = BoundedClient(5.0, 1 << 20)
    with HostileServer(provider.base_url, "trickle") as hostile:
        started = time.monotonic()
        with pytest.raises(httpx2.HTTPError) as raised:
            client.post(hostile.base_url + PATH, json=BODY, headers=HEADERS, timeout=0.5)
    assert marked(raised.value, DeadlineExceeded) and time.monotonic() - started < 1.0
