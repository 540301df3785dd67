"""One error base class and the handlers that render it.

`/v1` renders RFC 9457 problem details; `/v2` renders `{"error": "..."}`, the only error shape
KServe clients (tritonclient) can read. The framework's own errors (unknown route, wrong method,
request validation) go through the same renderer, so no path leaks another shape.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from http import HTTPStatus
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

logger = logging.getLogger("dmlserve.errors")

ErrorItem = dict[str, Any]  # {"loc": [...], "msg": "..."}

PROBLEM_TYPE_BASE = "urn:dmlserve:problem:"


class ServiceError(Exception):
    """Base of every error a request can end in; carries the HTTP status and a stable code."""

    status: int = 500
    code: str = "internal_error"
    title: str = "Internal Server Error"
    retryable: bool = False

    def __init__(
        self,
        detail: str,
        *,
        errors: Sequence[Mapping[str, Any]] = (),
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        self.errors: list[ErrorItem] = [
            {"loc": list(e.get("loc", ())), "msg": str(e.get("msg", ""))} for e in errors
        ]
        self.headers: dict[str, str] = dict(headers or {})


class BadRequestError(ServiceError):
    status, code, title = 400, "bad_request", "Bad Request"


class UnauthorizedError(ServiceError):
    status, code, title = 401, "unauthorized", "Unauthorized"

    def __init__(self, detail: str = "missing or invalid API key") -> None:
        super().__init__(detail, headers={"WWW-Authenticate": "Bearer"})


class NotFoundError(ServiceError):
    status, code, title = 404, "not_found", "Not Found"


class MethodNotAllowedError(ServiceError):
    status, code, title = 405, "method_not_allowed", "Method Not Allowed"


class PayloadTooLargeError(ServiceError):
    """A request body, a tensor or an inferred output is over a configured limit."""

    status, code, title = 413, "payload_too_large", "Content Too Large"

    def __init__(self, limit_name: str, limit: int, actual: int | None, what: str) -> None:
        size = f" ({actual} bytes)" if actual is not None else ""
        super().__init__(
            f"{what}{size} exceeds the limit {limit_name} = {limit} bytes",
            errors=[{"loc": [limit_name], "msg": f"limit is {limit} bytes"}],
        )
        self.limit_name, self.limit, self.actual = limit_name, limit, actual


class UnsupportedMediaTypeError(ServiceError):
    status, code, title = 415, "unsupported_media_type", "Unsupported Media Type"


class UnprocessableError(ServiceError):
    """The descriptor or the tensors break a DirectML rule (or the request schema)."""

    status, code, title = 422, "unprocessable", "Unprocessable Content"


class QueueFullError(ServiceError):
    status, code, title, retryable = 429, "queue_full", "Too Many Requests", True

    def __init__(self, detail: str, retry_after_s: int) -> None:
        super().__init__(detail, headers={"Retry-After": str(retry_after_s)})


class UnavailableError(ServiceError):
    """Not ready yet, or the device ran out of memory; the server keeps serving."""

    status, code, title, retryable = 503, "unavailable", "Service Unavailable", True

    def __init__(self, detail: str, retry_after_s: int) -> None:
        super().__init__(detail, headers={"Retry-After": str(retry_after_s)})


class GatewayTimeoutError(ServiceError):
    status, code, title, retryable = 504, "timeout", "Gateway Timeout", True


_BY_STATUS: dict[int, type[ServiceError]] = {
    cls.status: cls
    for cls in (
        BadRequestError,
        UnauthorizedError,
        NotFoundError,
        MethodNotAllowedError,
        PayloadTooLargeError,
        UnsupportedMediaTypeError,
        UnprocessableError,
        QueueFullError,
        UnavailableError,
        GatewayTimeoutError,
    )
}


def is_v2(path: str) -> bool:
    return path == "/v2" or path.startswith("/v2/")


def render_error(path: str, exc: ServiceError) -> Response:
    """The response for `exc` in the shape the path's protocol expects."""
    headers = dict(exc.headers)
    if is_v2(path):
        body = orjson.dumps({"error": exc.detail})
        return Response(body, exc.status, headers=headers, media_type="application/json")
    problem = {
        "type": PROBLEM_TYPE_BASE + exc.code,
        "title": exc.title,
        "status": exc.status,
        "detail": exc.detail,
        "errors": exc.errors,
    }
    return Response(
        orjson.dumps(problem), exc.status, headers=headers, media_type="application/problem+json"
    )


def validation_errors(
    raw: Sequence[Mapping[str, Any]], prefix: Sequence[str | int] = ()
) -> list[ErrorItem]:
    """Pydantic's error list as `{"loc", "msg"}` items (the `body` prefix dropped)."""
    items: list[ErrorItem] = []
    for e in raw:
        loc = [p for p in e.get("loc", ()) if p != "body"]
        items.append({"loc": [*prefix, *loc], "msg": str(e.get("msg", ""))})
    return items


def summarize(errors: Sequence[Mapping[str, Any]]) -> str:
    """One line naming each failing field and its rule, for `detail`."""
    parts = []
    for e in errors[:5]:
        loc = ".".join(str(p) for p in e.get("loc", ()))
        parts.append(f"{loc}: {e.get('msg')}" if loc else str(e.get("msg")))
    more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
    return "; ".join(parts) + more


def install_error_handlers(app: FastAPI) -> None:
    """Route every error, the framework's own included, through `render_error`."""

    async def on_service_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ServiceError)
        return render_error(request.url.path, exc)

    async def on_http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        known = _BY_STATUS.get(exc.status_code)
        err = ServiceError(str(exc.detail), headers=exc.headers)
        err.status = exc.status_code
        err.code = known.code if known else "http_error"
        err.title = known.title if known else HTTPStatus(exc.status_code).phrase
        return render_error(request.url.path, err)

    async def on_validation_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        items = validation_errors(exc.errors())
        return render_error(request.url.path, UnprocessableError(summarize(items), errors=items))

    async def on_bug(request: Request, exc: Exception) -> Response:
        # Anything landing here is a defect of the service, never a client's fault.
        logger.exception("unhandled error", extra={"path": request.url.path})
        return render_error(request.url.path, ServiceError("internal error; this is a bug"))

    app.add_exception_handler(ServiceError, on_service_error)
    app.add_exception_handler(StarletteHTTPException, on_http_error)
    app.add_exception_handler(RequestValidationError, on_validation_error)
    app.add_exception_handler(Exception, on_bug)
