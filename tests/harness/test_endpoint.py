"""The profile's client settings reach every adapter through its Endpoint."""

from __future__ import annotations

import pytest

from turnstate.session.endpoint import open_endpoint
from turnstate.session.profile_sections import ClientConfig


@pytest.mark.parametrize("base_url", ["local", "https://api.example.test/v1"])
def test_the_deadline_and_the_reply_cap_reach_the_endpoint(base_url, monkeypatch):
    monkeypatch.setenv("TURNSTATE_TEST_KEY", "test-key")
    remote = {} if base_url == "local" else {"api_key_env": "TURNSTATE_TEST_KEY"}
    client = ClientConfig(base_url=base_url, timeout_seconds=7.5, max_reply_bytes=4096, **remote)
    with open_endpoint(client) as endpoint:
        assert (endpoint.timeout_seconds, endpoint.max_reply_bytes) == (7.5, 4096)
