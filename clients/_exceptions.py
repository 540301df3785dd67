"""The SDK's errors: one base, one class per HTTP status family, two transport failures."""

from __future__ import annotations

import re
from typing import Any

import httpx

from ._constants import REQUEST_ID_HEADER

# The package re-exports exactly these: make_status_error stays internal.
__all__ = [
    "DmlserveError",
    "APIError",
    "APIConnectionError",
    "APITimeoutError",
    "APIResponseValidationError",
    "APIStatusError",
    "BadRequestError",
    "AuthenticationError",
    "PermissionDeniedError",
    "NotFoundError",
    "PayloadTooLargeError",
    "UnsupportedMediaTypeError",
    "UnprocessableEntityError",
    "RateLimitError",
    "InternalServerError",
    "ServiceUnavailableError",
    "GatewayTimeoutError",
]


class DmlserveError(Exception):
    """Base of every error this SDK raises on purpose."""


class APIError(DmlserveError):
    """A call to the service failed; `request` is the last request sent."""

    message: str
    request: httpx.Request

    def __init__(self, message: str, request: httpx.Request) -> None:
        super().__init__(message)
        self.message = message
        self.request = request


class APIConnectionError(APIError):
    """No usable response arrived (refused, reset, DNS...); raised from the httpx error."""

    def __init__(self, request: httpx.Request, message: str = "Connection error.") -> None:
        super().__init__(message, request)


class APITimeoutError(APIConnectionError):
    """The request ran past the client's timeout; raised from the httpx error."""

    def __init__(self, request: httpx.Request) -> None:
        super().__init__(request, "Request timed out.")


class APIResponseValidationError(APIError):
    """The service answered 2xx with a body this SDK cannot read (bad framing, bad tensor)."""

    response: httpx.Response
    status_code: int

    def __init__(self, message: str, response: httpx.Response) -> None:
        super().__init__(message, response.request)
        self.response = response
        self.status_code = response.status_code


class APIStatusError(APIError):
    """The service answered 4xx or 5xx.

    `/v1` errors are RFC 9457 problem+json: `title`, `detail` and `errors` (a list of
    `{"loc": [...], "msg": ...}`) come from it; `/v2` errors carry only `{"error": ...}`,
    which becomes `detail`. `code` is the body's `code` when given, else the last segment
    of its `type` URI or URN. `request_id` is the `X-Request-ID` the service answered with (or the
    one this client sent).
    """

    response: httpx.Response
    status_code: int
    body: object
    code: str | None
    title: str | None
    detail: str | None
    errors: list[dict[str, Any]]
    request_id: str | None

    def __init__(self, message: str, *, response: httpx.Response, body: object) -> None:
        super().__init__(message, response.request)
        self.response = response
        self.status_code = response.status_code
        self.body = body
        problem: dict[str, Any] = body if isinstance(body, dict) else {}
        self.title = _str_or_none(problem.get("title"))
        self.detail = _str_or_none(problem.get("detail", problem.get("error")))
        self.code = _str_or_none(problem.get("code")) or _code_from_type(problem.get("type"))
        raw_errors = problem.get("errors")
        self.errors = (
            [e for e in raw_errors if isinstance(e, dict)] if isinstance(raw_errors, list) else []
        )
        self.request_id = response.headers.get(REQUEST_ID_HEADER) or response.request.headers.get(
            REQUEST_ID_HEADER
        )


class BadRequestError(APIStatusError):
    """400: the body is not valid JSON, or the binary framing is inconsistent."""


class AuthenticationError(APIStatusError):
    """401: API keys are on and the key is missing or wrong."""


class PermissionDeniedError(APIStatusError):
    """403."""


class NotFoundError(APIStatusError):
    """404: unknown operator name (or path)."""


class PayloadTooLargeError(APIStatusError):
    """413: the body, a tensor or the inferred output exceeds a configured limit."""


class UnsupportedMediaTypeError(APIStatusError):
    """415: the Content-Type is neither JSON nor the binary framing."""


class UnprocessableEntityError(APIStatusError):
    """422: the descriptor or the tensors break a DirectML rule; `errors` names the fields."""


class RateLimitError(APIStatusError):
    """429: the service's queue is full; retried automatically, honouring Retry-After."""


class InternalServerError(APIStatusError):
    """Any 5xx; 503 and 504 have their own subclasses."""


class ServiceUnavailableError(InternalServerError):
    """503: not ready, or the device is out of memory; retried automatically."""


class GatewayTimeoutError(InternalServerError):
    """504: the request exceeded the service's time limit."""


_BY_STATUS: dict[int, type[APIStatusError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    413: PayloadTooLargeError,
    415: UnsupportedMediaTypeError,
    422: UnprocessableEntityError,
    429: RateLimitError,
    503: ServiceUnavailableError,
    504: GatewayTimeoutError,
}


def make_status_error(response: httpx.Response) -> APIStatusError:
    """The exception for a 4xx/5xx response whose body has been read."""
    try:
        body: object = response.json()
    except ValueError:  # not JSON (a proxy's HTML page, an empty body)
        body = response.text.strip() or None
    cls = _BY_STATUS.get(response.status_code)
    if cls is None:
        cls = InternalServerError if response.status_code >= 500 else APIStatusError
    summary = _summary(body)
    message = f"Error code: {response.status_code}" + (f" - {summary}" if summary else "")
    return cls(message, response=response, body=body)


def _summary(body: object) -> str | None:
    if isinstance(body, dict):
        for key in ("detail", "error", "title"):
            value = body.get(key)
            if isinstance(value, str) and value:
                return value
        return None
    return str(body)[:500] if body else None


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _code_from_type(type_uri: object) -> str | None:
    if not isinstance(type_uri, str) or type_uri in ("", "about:blank"):
        return None
    # The last segment of a URL (`.../problems/not_found`) or a URN (`urn:x:problem:not_found`).
    return re.split(r"[/#:]", type_uri.rstrip("/#:"))[-1] or None
