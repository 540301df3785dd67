"""HTTP responses: JSON, the KServe binary framing, and errors in each API's shape.

`/v1` renders errors as RFC 9457 problem details; `/v2` as `{"error": "..."}`, the only error
shape KServe clients (tritonclient) can read. The framework's own errors (unknown route, wrong
method, request validation) go through the same renderer, so no path leaks another shape.
"""

from __future__ import annotations

import logging
import math
import secrets
from collections.abc import Iterable
from http import HTTPStatus
from typing import Any

import numpy as np
import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response
from starlette.routing import Match
from starlette.types import Receive, Scope, Send

from dmlserve.kernels.wire import HEADER_LENGTH
from dmlserve.service.errors import (
    BY_STATUS,
    ServiceError,
    UnprocessableError,
    defect,
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


class PiecesResponse(Response):
    """A body sent as its pieces, one message each, under one Content-Length: a large text or
    framed body is never joined into a second whole copy."""

    def __init__(
        self, pieces: Iterable[bytes | memoryview], media_type: str, status_code: int = 200
    ) -> None:
        self.chunks = [memoryview(p) for p in pieces]
        super().__init__(None, status_code, media_type=media_type)
        self.headers["content-length"] = str(sum(len(c) for c in self.chunks))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send(
            {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
        )
        last = len(self.chunks) - 1
        for i, chunk in enumerate(self.chunks):
            await send({"type": "http.response.body", "body": bytes(chunk), "more_body": i < last})


class FramedResponse(PiecesResponse):
    """KServe binary framing: the JSON header (in pieces), then each binary tensor's bytes."""

    media_type = "application/octet-stream"

    def __init__(
        self, header: bytes | list[bytes], chunks: Iterable[memoryview], status_code: int = 200
    ) -> None:
        header = [header] if isinstance(header, bytes) else header
        super().__init__([*header, *chunks], self.media_type, status_code)
        self.headers[HEADER_LENGTH.lower()] = str(sum(len(h) for h in header))


#: Elements written per piece of a `data` array's text: orjson's working buffer stays small
#: however large the array is.
ARRAY_PIECE = 1 << 16
#: JSON documents under this size are sent as one piece.
_JOIN_BELOW = 1 << 16
# Stands in for each array while the document around it is written; random per process, so
# no client-chosen string (an `id`) can be taken for it.
_MARKER = "\x00" + secrets.token_hex(16)
_MARKER_JSON = orjson.dumps(_MARKER)


def render_json(doc: Any, arrays: list[np.ndarray] | None = None) -> list[bytes]:
    """`doc` as JSON text in pieces; its NumPy arrays written piece by piece, with non-finite
    floats as the literals `NaN`, `Infinity` and `-Infinity` (as Triton writes them).

    `arrays`, when the caller knows them, are every array in `doc`: a small document of small
    arrays is then written in one call, without a first pass to find them.
    """
    if arrays and (whole := _whole(doc, arrays)) is not None:
        return [whole]
    found: list[np.ndarray] = []

    def default(obj: Any) -> Any:
        if isinstance(obj, np.ndarray):
            found.append(obj)
            return _MARKER
        raise TypeError(f"{type(obj).__name__} is not JSON serializable")

    text = orjson.dumps(doc, default=default)
    if not found:
        return [text]
    if arrays is None and (whole := _whole(doc, found)) is not None:
        return [whole]
    arrays = found
    parts = text.split(_MARKER_JSON)
    pieces = [parts[0]]
    for array, after in zip(arrays, parts[1:], strict=True):
        pieces += array_text(array)
        pieces.append(after)
    if sum(len(p) for p in pieces) < _JOIN_BELOW:
        return [b"".join(pieces)]
    return pieces


def _whole(doc: Any, arrays: list[np.ndarray]) -> bytes | None:
    """`doc` in one orjson call where every array is one small piece that orjson writes as
    `array_text` does, unless a non-finite float is there (orjson writes it as null: the only
    null an array of numbers holds) or the text is large enough to send in pieces."""
    if not all(_as_is(a) for a in arrays):
        return None
    whole = orjson.dumps(doc, option=JSON_OPTIONS)
    return whole if len(whole) < _JOIN_BELOW and b"null" not in whole else None


def _as_is(array: np.ndarray) -> bool:
    """Whether orjson writes `array` (natively) as `array_text` does, non-finite floats
    aside: flat, contiguous and one piece."""
    return (
        array.ndim == 1
        and array.size <= _AS_IS_ELEMENTS
        and array.flags.c_contiguous
        and array.dtype.isnative
    )


#: Elements of an array written in the same call as the document around it (at most 25
#: bytes of text each: the document stays under `_JOIN_BELOW`).
_AS_IS_ELEMENTS = 1 << 11


def array_text(array: np.ndarray) -> list[bytes]:
    """A JSON array of the elements of `array` (flattened), in pieces of `ARRAY_PIECE`."""
    flat = np.ascontiguousarray(array).reshape(-1)
    if flat.size <= ARRAY_PIECE:
        return [_numbers(flat)]
    pieces = []
    for lo in range(0, flat.size, ARRAY_PIECE):
        text = _numbers(flat[lo : lo + ARRAY_PIECE])
        pieces.append((b"[" if lo == 0 else b",") + text[1:-1])
    pieces.append(b"]")
    return pieces


def _numbers(flat: np.ndarray) -> bytes:
    text = orjson.dumps(flat, option=JSON_OPTIONS)
    if flat.dtype.kind != "f":
        return text
    finite = np.isfinite(flat)
    if finite.all():
        return text
    # orjson writes every non-finite float as null, and nothing else in an array of numbers
    # as null: the nulls are the non-finite elements, in order.
    words = [_literal(float(v)) for v in flat[~finite]]
    parts = text.split(b"null")
    out = [parts[0]]
    for word, part in zip(words, parts[1:], strict=True):
        out += (word, part)
    return b"".join(out)


def _literal(value: float) -> bytes:
    if math.isnan(value):
        return b"NaN"
    return b"Infinity" if value > 0 else b"-Infinity"


def tensor_response(
    doc: dict[str, Any], chunks: list[memoryview], arrays: list[np.ndarray] | None = None
) -> Response:
    """`doc` as JSON, framed with the binary tensors' bytes when there are any (`arrays`: as
    `render_json` takes them)."""
    pieces = render_json(doc, arrays)
    if chunks:
        return FramedResponse(pieces, chunks)
    if len(pieces) == 1:
        return Response(pieces[0], media_type="application/json")
    return PiecesResponse(pieces, "application/json")


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


_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def allowed_methods(request: Request) -> list[str]:
    """Every method some route of the app takes on the request's path (Starlette's 405 names
    only the first route that matched the path)."""
    routes = request.app.router.routes
    return [
        method
        for method in _METHODS
        if any(r.matches({**request.scope, "method": method})[0] == Match.FULL for r in routes)
    ]


def install_error_handlers(app: FastAPI) -> None:
    """Route every error, the framework's own included, through `render_error`."""

    async def on_service_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ServiceError)
        return render_error(request.url.path, exc)

    async def on_http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        known = BY_STATUS.get(exc.status_code)
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            headers["Allow"] = ", ".join(allowed_methods(request))
        err = ServiceError(str(exc.detail), headers=headers)
        err.status = exc.status_code
        err.code = known.code if known else "http_error"
        err.title = known.title if known else HTTPStatus(exc.status_code).phrase
        return render_error(request.url.path, err)

    async def on_validation_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        items = validation_errors(exc.errors())
        return render_error(request.url.path, UnprocessableError(summarize(items), errors=items))

    async def on_bug(request: Request, exc: Exception) -> Response:
        # Anything landing here is a defect of the service, never a client's fault. (The
        # app's `guard.Guard` answers those of the routes; this, those of the middleware.)
        logger.exception("unhandled error", extra={"path": request.url.path})
        return render_error(request.url.path, defect())

    app.add_exception_handler(ServiceError, on_service_error)
    app.add_exception_handler(StarletteHTTPException, on_http_error)
    app.add_exception_handler(RequestValidationError, on_validation_error)
    app.add_exception_handler(Exception, on_bug)
