"""What the Gemini Interactions wire says as generativelanguage.googleapis.com says it: its error
shape, the errors the server answers for every wire, and the documented implicit-caching minimum.

Every Google API error is `{"error": {"code": <HTTP status>, "message": ..., "status": <google.rpc
code name>}}`, with `details` when the service adds them (an ErrorInfo for a rejected API key). A
refused request is a 400 INVALID_ARGUMENT whose message names the offending field, in the wording of
Google's JSON front end: `Invalid JSON payload received. Unknown name "x": Cannot find field.`, or
`Invalid value at 'generation_config.temperature' (TYPE_FLOAT), "hot"`.

The key errors are the service's own, not a 401: a request without a key is 403 PERMISSION_DENIED,
and a key the service does not know is 400 INVALID_ARGUMENT with reason API_KEY_INVALID.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from turnstate.local_provider.exchange import SharedError
from turnstate.local_provider.prefix_cache import CacheRule

# Implicit caching (Gemini API "Context caching" guide): on by default; a repeated prompt prefix is
# billed as cached only once the prompt is at least the model's minimum, 4,096 tokens for the
# current models. No granularity is documented, so every matched token counts.
IMPLICIT_CACHING = CacheRule(min_tokens=4096, increment=1)

STATUS_NAMES: Mapping[int, str] = {
    400: "INVALID_ARGUMENT",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}

API_KEY_INVALID: Mapping[str, object] = {
    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
    "reason": "API_KEY_INVALID",
    "domain": "googleapis.com",
    "metadata": {"service": "generativelanguage.googleapis.com"},
}

# kind -> (status, message), as the Gemini API answers them; {detail} is error_reply's.
SHARED_ERRORS: Mapping[str, tuple[int, str]] = {
    "missing_api_key": (
        403,
        "Method doesn't allow unregistered callers (callers without established identity). "
        "Please use API Key or other form of API consumer identity to call this API.",
    ),
    "invalid_api_key": (400, "API key not valid. Please pass a valid API key."),
    "unsupported_content_type": (
        400,
        "Invalid JSON payload received. Unexpected Content-Type '{detail}': the request body must be application/json.",
    ),
    "unparseable_body": (400, "Invalid JSON payload received. Unexpected token."),
    "rate_limit": (429, "Resource has been exhausted (e.g. check quota)."),
    "server_error": (
        500,
        "An internal error has occurred. Please retry or report in "
        "https://developers.generativeai.google/guide/troubleshooting",
    ),
    "overloaded": (503, "The model is overloaded. Please try again later."),
}


def error_reply(kind: SharedError, detail: str = "") -> tuple[int, dict[str, object]]:
    status, message = SHARED_ERRORS[kind]
    details = [API_KEY_INVALID] if kind == "invalid_api_key" else []
    return status, error_body(message.format(detail=detail), status, details)


def error_body(message: str, status: int = 400, details: Sequence[Mapping[str, object]] = ()) -> dict[str, object]:
    error: dict[str, object] = {"code": status, "message": message, "status": STATUS_NAMES[status]}
    if details:
        error["details"] = [dict(detail) for detail in details]
    return {"error": error}


class InvalidRequest(ValueError):
    """A request the service refuses: `message` names the field; `status` is 400, or 404 for a
    reference to something the service does not have."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


def unknown_field(name: str, parent: str = "") -> InvalidRequest:
    where = f" at '{parent}'" if parent else ""
    return InvalidRequest(f'Invalid JSON payload received. Unknown name "{name}"{where}: Cannot find field.')


def invalid_value(path: str, expected: str, value: object) -> InvalidRequest:
    """`expected` is a proto type (TYPE_STRING, TYPE_INT32, TYPE_ENUM ...) or what the value must be."""
    return InvalidRequest(f"Invalid value at '{path}' ({expected}), {_quoted(value)}")


def field_required(path: str) -> InvalidRequest:
    return InvalidRequest(f"Field '{path}' is required.")


def _quoted(value: object) -> str:
    """A value as an error message quotes it: JSON for a scalar, only the kind of anything larger."""
    return json.dumps(value) if isinstance(value, (str, int, float, bool)) or value is None else type(value).__name__
