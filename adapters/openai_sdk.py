"""What every adapter built on the openai SDK shares: the client, and how its errors are classified.

Chat Completions, OpenAI Responses and xAI's Responses surface all reach their service through the
same SDK, so its error classes, status codes and headers mean the same to each of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import openai

from turnstate.adapters.bounded_http import bounded_client
from turnstate.adapters.contract import (
    LLAMA_CPP_CONTEXT_OVERFLOW,
    Endpoint,
    ErrorKind,
    ProviderError,
    Usage,
    fatal_message,
    retry_after_seconds,
)

_TRANSIENT_STATUS = {408, 409, 429}


def client_for(endpoint: Endpoint, local_prefix: str = "/v1") -> openai.OpenAI:
    """An SDK client for `endpoint`, with the SDK's own retries off: the harness owns retries, and
    the SDK's would hide failures from the machine. Its HTTP client bounds each request by the
    endpoint's deadline and reply cap (adapters/bounded_http.py). On the embedded local provider the
    client speaks to the server under `local_prefix` (an open-weight server's is not OpenAI's)."""
    base_url = f"{endpoint.base_url}{local_prefix}" if endpoint.is_local else endpoint.base_url
    return openai.OpenAI(
        base_url=base_url,
        api_key=endpoint.api_key,
        max_retries=0,
        timeout=endpoint.timeout_seconds,
        http_client=bounded_client(endpoint),
    )


def classify(error: Exception) -> ProviderError:
    """An SDK exception as one of the error kinds, with allowlisted diagnostics only."""
    diagnostics: dict[str, Any] = {"error_class": type(error).__name__}
    if isinstance(error, openai.APIStatusError):
        diagnostics |= {
            "status": error.status_code,
            "error_type": error.type,
            "code": error.code,
            "request_id": error.request_id,
        }
        wait = retry_after_seconds(error.response.headers)
        kind = _status_kind(error)
        body = error.body if isinstance(error.body, Mapping) else {}  # the reply's `error` object
        said = fatal_message(kind, error.status_code, body.get("message", error.message))
        return ProviderError(kind, Usage(), diagnostics, retry_after_seconds=wait, server_message=said)
    # Connection refused or cut, timeouts, a stream broken mid-way: the same request may succeed.
    return ProviderError(ErrorKind.TRANSIENT, Usage(), diagnostics)


def _status_kind(error: openai.APIStatusError) -> ErrorKind:
    if error.status_code == 400 and _is_context_overflow(error):
        return ErrorKind.CONTEXT_OVERFLOW
    if error.status_code == 404 and error.code == "previous_response_not_found":
        return ErrorKind.EXPIRED_HANDLE
    if error.status_code in _TRANSIENT_STATUS or error.status_code >= 500:
        return ErrorKind.TRANSIENT
    return ErrorKind.FATAL


def _is_context_overflow(error: openai.APIStatusError) -> bool:
    # OpenAI says so with a code, llama.cpp with a type; vLLM and other open-weight servers only in the message.
    return (
        error.code == "context_length_exceeded"
        or error.type == LLAMA_CPP_CONTEXT_OVERFLOW
        or "maximum context length" in str(error.message).lower()
    )
