"""What the Anthropic Messages wire says as api.anthropic.com says it: its error shape, the errors the
server answers for every wire, and the documented prompt-caching limits.

Every Anthropic error is `{"type": "error", "error": {"type": <error type>, "message": ...},
"request_id": ...}`; a refused request is a 400 `invalid_request_error` whose message starts with the
dotted path of the offending field (`max_tokens: Field required`), as the real service's validator
words it.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping

from turnstate.local_provider.exchange import SharedError

# Prompt caching (Anthropic's "Prompt caching" guide): a prefix is cached only up to a cache_control
# breakpoint, at most 4 breakpoints per request, and only once it is at least the model's minimum
# cacheable length (1,024 tokens for the Opus and Sonnet models).
MIN_CACHEABLE_TOKENS = 1024
MAX_BREAKPOINTS = 4

# kind -> (status, error type, message), as api.anthropic.com answers them; {detail} is error_reply's.
SHARED_ERRORS: Mapping[str, tuple[int, str, str]] = {
    "missing_api_key": (401, "authentication_error", "x-api-key header is required"),
    "invalid_api_key": (401, "authentication_error", "invalid x-api-key"),
    "unsupported_content_type": (
        400,
        "invalid_request_error",
        "Unsupported Content-Type '{detail}': the request body must be application/json",
    ),
    "unparseable_body": (400, "invalid_request_error", "The request body is not valid JSON."),
    "rate_limit": (
        429,
        "rate_limit_error",
        "This request would exceed the rate limit for your organization. Please try again later.",
    ),
    "server_error": (500, "api_error", "Internal server error"),
    "overloaded": (529, "overloaded_error", "Overloaded"),
}


def error_reply(kind: SharedError, detail: str = "") -> tuple[int, dict[str, object]]:
    status, error_type, message = SHARED_ERRORS[kind]
    return status, error_body(message.format(detail=detail), error_type)


def error_body(message: str, error_type: str = "invalid_request_error") -> dict[str, object]:
    return {
        "type": "error",
        "error": {"type": error_type, "message": message},
        "request_id": "req_" + secrets.token_hex(12),
    }


class InvalidRequest(ValueError):
    """A request the real service answers with 400 invalid_request_error; `message` names the field."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def field_required(path: str) -> InvalidRequest:
    return InvalidRequest(f"{path}: Field required")


def extra_input(path: str) -> InvalidRequest:
    return InvalidRequest(f"{path}: Extra inputs are not permitted")


def wrong_type(path: str, expected: str) -> InvalidRequest:
    return InvalidRequest(f"{path}: Input should be {expected}")
