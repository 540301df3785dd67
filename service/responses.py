"""HTTP responses: JSON, the KServe binary framing, and errors in each API's shape.

`/v1` renders errors as RFC 9457 problem details; `/v2` as `{"error": "..."}`, the only error
shape KServe clients (tritonclient) can read. The framework's own errors (unknown route, wrong
method, request validation) go through the same renderer, so no path leaks another shape.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from http import HTTPStatus
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from dmlserve.kernels.wire import HEADER_LENGTH
from dmlserve.service.errors import (
    BY_STATUS,
    ServiceError,
    UnprocessableError,
    summarize,
    validation_errors,
)

logger = logging.getLogger("dmlserve.errors")

JSON_OPTIONS = orjson.OPT_SERIALIZE_NUMPY
PROBLEM_TYPE_BASE = "urn:dmlserve:problem:"


def json_response(content: Any, status_code: int = 200) -> Response:
    return Response(
        orjson.dumps(content, option=JSON_OPTIONS), status_code, media_type="application/json"
    )


class FramedResponse(Response):
    """KServe binary framing: JSON header, then each binary tensor's bytes, sent as chunks."""

    media_type = "application/octet-stream"

    def __init__(self, header: bytes, chunks: Iterable[memoryview], status_code: int = 200) -> None:
        self.chunks = [memoryview(header), *chunks]
        total = sum(len(c) for c in self.chunks)
        super().__init__(None, status_code, media_type=self.media_type)
        self.headers["content-length"] = str(total)
        self.headers[HEADER_LENGTH.lower()] = str(len(header))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send(
            {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
        )
        last = len(self.chunks) - 1
        for i, chunk in enumerate(self.chunks):
            await send({"type": "http.response.body", "body": bytes(chunk), "more_body": i < last})


def tensor_response(doc: dict[str, Any], chunks: list[memoryview]) -> Response:
    """`doc` as JSON, framed with the binary tensors' bytes when there are any."""
    if chunks:
        return FramedResponse(orjson.dumps(doc, option=JSON_OPTIONS), chunks)
    return json_response(doc)


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


def install_error_handlers(app: FastAPI) -> None:
    """Route every error, the framework's own included, through `render_error`."""

    async def on_service_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ServiceError)
        return render_error(request.url.path, exc)

    async def on_http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        known = BY_STATUS.get(exc.status_code)
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
