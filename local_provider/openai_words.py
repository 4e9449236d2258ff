"""What every OpenAI-style wire of the local provider says as api.openai.com says it: the errors the
server answers for every wire, the 400 bodies of a refused request (message, param, code), and the
documented prompt-caching rule. Chat Completions and Responses share them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from turnstate.local_provider.exchange import SharedError
from turnstate.local_provider.prefix_cache import CacheRule

# OpenAI's prompt caching (API guide, and the cookbook's "Prompt Caching 201"): only prompts of 1,024
# tokens or more are cached, and cache hits come in increments of 128 tokens. So a prefix seen before
# reports its length rounded down to a multiple of 128, and 0 below 1,024.
PROMPT_CACHING = CacheRule(min_tokens=1024, increment=128)


def cache_reads_and_writes(prompt_tokens: int, matched_tokens: int) -> tuple[int, int]:
    """(cached_tokens, cache_write_tokens) of a prompt whose first `matched_tokens` a recent request
    already sent: the cache serves that prefix and stores the rest of what is cacheable, both in
    PROMPT_CACHING's units. Recorded (test_openai_prompt_cache, Chat and Responses alike): a first
    request of 4,020 tokens read 0 and wrote 4,012; the same request again read 4,012 and wrote 0."""
    cached = PROMPT_CACHING.reported(matched_tokens)
    return cached, PROMPT_CACHING.reported(prompt_tokens) - cached


# kind -> (status, message, type, code), as api.openai.com answers them; {detail} is error_reply's.
SHARED_ERRORS: Mapping[str, tuple[int, str, str, str | None]] = {
    "missing_api_key": (
        401,
        "You didn't provide an API key. You need to provide your API key in an Authorization header "
        "using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
        "invalid_request_error",
        "invalid_api_key",
    ),
    "invalid_api_key": (
        401,
        "Incorrect API key provided: {detail}. You can find your API key at https://platform.openai.com/account/api-keys.",
        "invalid_request_error",
        "invalid_api_key",
    ),
    "unsupported_content_type": (
        400,
        "Unsupported content type: '{detail}'. This API method only accepts 'application/json' requests, "
        "but you specified the header 'Content-Type: {detail}'. Please try again with a supported content type.",
        "invalid_request_error",
        "unsupported_content_type",
    ),
    "unparseable_body": (
        400,
        "We could not parse the JSON body of your request. The OpenAI API expects a JSON object as the request body.",
        "invalid_request_error",
        None,
    ),
    "rate_limit": (429, "Rate limit reached for requests", "requests", "rate_limit_exceeded"),
    "server_error": (500, "The server had an error while processing your request.", "server_error", None),
    "overloaded": (503, "The engine is currently overloaded. Please try again later.", "overloaded_error", None),
}


def error_reply(kind: SharedError, detail: str = "") -> tuple[int, dict[str, object]]:
    status, message, error_type, code = SHARED_ERRORS[kind]
    shown = masked_api_key(detail) if kind == "invalid_api_key" else detail
    return status, error_body(message.format(detail=shown), error_type=error_type, code=code)


def masked_api_key(key: str) -> str:
    """The key as OpenAI's 401 quotes it: its first 8 and last 4 characters around one asterisk per
    hidden character. A key of 12 characters or fewer is quoted whole, as the service does."""
    if len(key) <= 12:
        return key
    return key[:8] + "*" * (len(key) - 12) + key[-4:]


def error_body(
    message: str,
    *,
    error_type: str = "invalid_request_error",
    param: str | None = None,
    code: str | None = None,
) -> dict[str, object]:
    return {"error": {"message": message, "type": error_type, "param": param, "code": code}}


class InvalidParam(ValueError):
    """A request field the real service would reject with 400; `param` as its error names it, or None."""

    def __init__(self, param: str | None, message: str, code: str | None = "invalid_value") -> None:
        super().__init__(message)
        self.param = param
        self.message = message
        self.code = code


def unknown(param: str) -> InvalidParam:
    return InvalidParam(param, f"Unknown parameter: '{param}'.", code="unknown_parameter")


def missing(param: str) -> InvalidParam:
    return InvalidParam(param, f"Missing required parameter: '{param}'.", code="missing_required_parameter")


def missing_or_invalid_type(param: str, expected: str, value: object) -> InvalidParam:
    return missing(param) if value is None else invalid_type(param, expected, value)


def invalid_type(param: str, expected: str, value: object) -> InvalidParam:
    message = f"Invalid type for '{param}': expected {expected}, but got {json_type(value)} instead."
    return InvalidParam(param, message, code="invalid_type")


def invalid_value(param: str, value: object, supported: Sequence[str]) -> InvalidParam:
    return InvalidParam(param, f"Invalid value: {value!r}. Supported values are: {listed(supported)}.")


def listed(choices: Sequence[str]) -> str:
    """'a'; 'a' and 'b'; 'a', 'b', and 'c' — as the real service lists supported values."""
    quoted = [f"'{choice}'" for choice in choices]
    if len(quoted) < 3:
        return " and ".join(quoted)
    return ", ".join(quoted[:-1]) + ", and " + quoted[-1]


def empty_array(param: str) -> InvalidParam:
    message = (
        f"Invalid '{param}': empty array. Expected an array with minimum length 1, but got an empty array instead."
    )
    return InvalidParam(param, message, code="empty_array")


def json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a decimal"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def check_decimal(body: Mapping[str, object], name: str, low: int, high: int) -> None:
    value = body.get(name)
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise invalid_type(name, "a decimal", value)
    if value > high:
        message = f"Invalid '{name}': decimal above maximum value. Expected a value <= {high}, but got {value} instead."
        raise InvalidParam(name, message, code="decimal_above_max_value")
    if value < low:
        message = f"Invalid '{name}': decimal below minimum value. Expected a value >= {low}, but got {value} instead."
        raise InvalidParam(name, message, code="decimal_below_min_value")


def optional_bool(body: Mapping[str, object], name: str, *, prefix: str = "") -> bool | None:
    """An optional boolean; `prefix` is the path of the object that holds it, as the error names it."""
    value = body.get(name)
    if value is not None and not isinstance(value, bool):
        raise invalid_type(prefix + name, "a boolean", value)
    return value if isinstance(value, bool) else None


def optional_int(
    body: Mapping[str, object], name: str, *, minimum: int, maximum: int | None = None, prefix: str = ""
) -> int | None:
    """An optional integer within [minimum, maximum]; `prefix` as for optional_bool."""
    value = body.get(name)
    param = prefix + name
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid_type(param, "an integer", value)
    if value < minimum:
        message = (
            f"Invalid '{param}': integer below minimum value. Expected a value >= {minimum}, but got {value} instead."
        )
        raise InvalidParam(param, message, code="integer_below_min_value")
    if maximum is not None and value > maximum:
        message = (
            f"Invalid '{param}': integer above maximum value. Expected a value <= {maximum}, but got {value} instead."
        )
        raise InvalidParam(param, message, code="integer_above_max_value")
    return value
