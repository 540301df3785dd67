"""Reading a request body: size limit, decompression, content type, and the binary framing.

The limit is enforced while reading: a declared Content-Length over it is refused before a byte
of the body is read, and a chunked body is abandoned as soon as it passes the limit. Compressed
bodies count their decoded size against the same limit, decompressed in bounded steps.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass
from typing import Literal

import anyio.to_thread
from starlette.requests import Request

from dmlserve.kernels.wire import HEADER_LENGTH, BinarySection, parse_header_length, split_framed
from dmlserve.service.errors import (
    BadRequestError,
    PayloadTooLargeError,
    UnsupportedMediaTypeError,
    kernel_errors,
)

_DIGITS = re.compile(r"^[0-9]{1,18}$")  # ASCII digits only: str.isdigit() accepts "²"


@dataclass(frozen=True)
class Body:
    """A decoded request body: JSON alone, or JSON followed by binary tensor bytes."""

    kind: Literal["json", "binary"]
    json: memoryview
    binary: memoryview  # empty for kind == "json"
    received_bytes: int  # as sent (before decompression), for metrics

    def section(self) -> BinarySection:
        """A fresh reader of the binary tensors, in the order the JSON names them."""
        return BinarySection(self.binary, framed=self.kind == "binary")


#: What libcurl labels a POST body it is given without a Content-Type: Triton's C++ client (and
#: so perf_analyzer) sends its JSON control requests (shared memory, model repository) so.
FORM = "application/x-www-form-urlencoded"


async def read_body(request: Request, limit: int, *, control: bool = False) -> Body:
    """Read, decompress and split the body of `request`, within `limit` bytes decoded.

    A `control` request (a JSON body that carries no tensors) may also be labelled `FORM`.
    """
    kind = _body_kind(request, control)
    encoding = request.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("identity", "gzip", "deflate", "x-gzip"):
        raise UnsupportedMediaTypeError(
            f"Content-Encoding {encoding!r} is not supported; use gzip, deflate or none"
        )
    declared = request.headers.get("content-length")
    if declared is not None and _DIGITS.match(declared) and int(declared) > limit:
        raise PayloadTooLargeError("max_request_bytes", limit, int(declared), "request body")
    raw = await _read_limited(request, limit)
    received = len(raw)
    if encoding != "identity":
        # Always off the loop: a small compressed body can inflate to the whole limit.
        raw = await anyio.to_thread.run_sync(_decompress, raw, encoding, limit)
    view = memoryview(raw)
    if kind == "json":
        return Body("json", view, memoryview(b""), received)
    with kernel_errors():
        header, binary = split_framed(view, parse_header_length(request.headers[HEADER_LENGTH]))
    return Body("binary", header, binary, received)


def _body_kind(request: Request, control: bool = False) -> Literal["json", "binary"]:
    """JSON or KServe binary framing, from the headers; 415 for anything else.

    tritonclient's sync client sends no Content-Type at all and its async client sends
    application/octet-stream even for a pure-JSON body; a binary body is known by
    Inference-Header-Content-Length.
    """
    ctype = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if control and ctype == FORM:
        return "json"
    if ctype not in ("", "application/json", "application/octet-stream"):
        raise UnsupportedMediaTypeError(
            f"Content-Type {ctype!r} is not supported; send application/json, or "
            "application/octet-stream with Inference-Header-Content-Length"
        )
    return "binary" if HEADER_LENGTH in request.headers else "json"


async def _read_limited(request: Request, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            # Stop reading: the rest of the body is never pulled off the socket.
            raise PayloadTooLargeError("max_request_bytes", limit, None, "request body")
        chunks.append(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _decompress(raw: bytes, encoding: str, limit: int) -> bytes:
    """Decode gzip/deflate without ever holding more than `limit` + one step of output."""
    if encoding in ("gzip", "x-gzip"):
        candidates = [31]
    else:  # "deflate" is zlib-wrapped per RFC 9110; some clients send raw deflate
        candidates = [15, -15]
    for wbits in candidates:
        try:
            return _inflate(raw, wbits, limit)
        except zlib.error as exc:
            last = exc
    raise BadRequestError(f"request body is not valid {encoding} data: {last}")


def _inflate(raw: bytes, wbits: int, limit: int) -> bytes:
    d = zlib.decompressobj(wbits)
    out = bytearray()
    data = raw
    while not d.eof:
        # Never ask for more than one byte past the limit, so a bomb cannot inflate memory.
        step = d.decompress(data, limit + 1 - len(out))
        out += step
        if len(out) > limit:
            raise PayloadTooLargeError("max_request_bytes", limit, None, "decoded request body")
        data = d.unconsumed_tail
        if not step and not data and not d.eof:
            raise zlib.error("truncated stream")
    return bytes(out)
