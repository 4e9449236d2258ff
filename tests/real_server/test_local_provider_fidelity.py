"""The local provider held against the real server: the same request to llama-server and to the local
provider's same wire, whole and streamed, and every field the real server's reply carries (a path
through its JSON, list positions folded) and every streamed event type it sends must be in the local
provider's too, but for the fields llama.cpp adds of its own (LLAMA_ONLY: the README's quirk list,
not the local provider's business). A difference nobody listed fails here."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest

from tests.real_server.conftest import KEY
from turnstate.local_provider.server import LocalProvider
from turnstate.session.endpoint import LOCAL_API_KEY

MODEL = "local-policy-1"
USER = "LEVEL 1/1 | STATE NOT_FINISHED\nWhich action?"
REQUESTS: dict[str, tuple[str, dict[str, Any]]] = {
    "chat": (
        "/v1/chat/completions",
        {"model": MODEL, "max_tokens": 16, "messages": [{"role": "user", "content": USER}]},
    ),
    "responses": (
        "/v1/responses",
        {"model": MODEL, "max_output_tokens": 64, "input": [{"role": "user", "content": USER}]},
    ),
    "messages": ("/v1/messages", {"model": MODEL, "max_tokens": 16, "messages": [{"role": "user", "content": USER}]}),
}
STREAMED = {
    "chat": {"stream": True, "stream_options": {"include_usage": True}},
    "responses": {"stream": True},
    "messages": {"stream": True},
}
CACHED = {
    "chat": "prompt_tokens_details.cached_tokens",
    "responses": "input_tokens_details.cached_tokens",
    "messages": "cache_read_input_tokens",
}
# What llama.cpp sends that the APIs it imitates do not: its timings, and Chat's fingerprint of its build.
LLAMA_ONLY = {
    "chat": {
        "timings",
        "timings.cache_n",
        "timings.prompt_n",
        "timings.prompt_ms",
        "timings.prompt_per_token_ms",
        "timings.prompt_per_second",
        "timings.predicted_n",
        "timings.predicted_ms",
        "timings.predicted_per_token_ms",
        "timings.predicted_per_second",
        "system_fingerprint",
    },
    "responses": {"timings"},
    "messages": set(),
}


def paths(value: Any, prefix: str = "") -> set[str]:
    """Every field path in a JSON value: `choices[].message.content`; a timings object counts as one."""
    found: set[str] = set()
    if isinstance(value, dict):
        for key, item in value.items():
            path = f"{prefix}.{key}" if prefix else key
            found.add(path)
            if not path.endswith("timings"):
                found |= paths(item, path)
    elif isinstance(value, list):
        for item in value:
            found |= paths(item, prefix + "[]")
    return found


def exchange(base_url: str, wire: str, key: str, stream: bool) -> tuple[set[str], set[str]]:
    """(the reply's field paths, its streamed event types) for the wire's request."""
    path, body = REQUESTS[wire]
    headers = {"Authorization": f"Bearer {key}", "x-api-key": key, "anthropic-version": "2023-06-01"}
    sent = json.dumps({**body, **(STREAMED[wire] if stream else {})}).encode()
    request = urllib.request.Request(base_url + path, sent, {**headers, "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as reply:  # a status other than 200 raises, with its body
        text = reply.read().decode()
    if not stream:
        return paths(json.loads(text)), set()
    lines = [line for line in text.splitlines() if line.startswith("data: ") and line != "data: [DONE]"]
    events = [json.loads(line.removeprefix("data: ")) for line in lines]
    return set().union(*(paths(event) for event in events)), {event.get("type", "chunk") for event in events}


@pytest.fixture(scope="module")
def local() -> Any:
    with LocalProvider() as provider:
        yield provider


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("wire", list(REQUESTS))
def test_the_local_provider_sends_every_field_and_event_the_real_server_sends(wire, stream, llama, local):
    real_fields, real_events = exchange(llama.base_url, wire, KEY, stream)
    local_fields, local_events = exchange(local.base_url, wire, LOCAL_API_KEY, stream)
    assert any(field.endswith("usage." + CACHED[wire]) for field in real_fields)  # the comparison has substance
    assert sorted(real_fields - local_fields - LLAMA_ONLY[wire]) == []
    assert sorted(real_events - local_events) == []
