"""Reading a request body: size limit, decompression, content type, and the binary framing.

The limit is enforced while reading: a declared Content-Length over it is refused before a byte
of the body is read, and a chunked body is abandoned as soon as it passes the limit. Compressed
bodies count their decoded size against the same limit, decompressed in bounded steps. The whole
body must arrive within `body_timeout_s` (408, and the connection is closed: the rest of the
body is never read).
"""

from __future__ import annotations

import asyncio
import re
import zlib
from dataclasses import dataclass
from typing import Literal

import anyio.to_thread
from starlette.requests import Request
from starlette.types import Receive

from dmlserve.kernels.wire import HEADER_LENGTH, BinarySection, parse_header_length, split_framed
from dmlserve.service.deadlines import Deadlines
from dmlserve.service.errors import (
    BadRequestError,
    PayloadTooLargeError,
    RequestTimeoutError,
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


async def read_body(
    request: Request,
    limit: int,
    timeout_s: float | None = None,
    *,
    control: bool = False,
    deadlines: Deadlines | None = None,
) -> Body:
    """Read, decompress and split the body of `request`, within `limit` bytes decoded and
    `timeout_s` seconds (kept by `deadlines` where given, else by a timer of its own).

    A `control` request (a JSON body that carries no tensors) may also be labelled `FORM`.
    """
    head = _Head(request.scope["headers"])
    kind = head.kind(control)
    encoding = head.encoding
    if encoding not in ("identity", "gzip", "deflate", "x-gzip"):
        raise UnsupportedMediaTypeError(
            f"Content-Encoding {encoding!r} is not supported; use gzip, deflate or none"
        )
    declared = head.length
    if declared is not None and _DIGITS.match(declared) and int(declared) > limit:
        raise PayloadTooLargeError("max_request_bytes", limit, int(declared), "request body")
    if timeout_s is None:
        raw = await _read_limited(request.receive, limit)
    elif deadlines is None:
        try:
            async with asyncio.timeout(timeout_s):
                raw = await _read_limited(request.receive, limit)
        except TimeoutError:
            raise _late(timeout_s) from None
    else:
        task = asyncio.current_task()
        assert task is not None
        deadline = deadlines.add(timeout_s, task.cancel)
        try:
            raw = await _read_limited(request.receive, limit)
        except asyncio.CancelledError:
            # Ours alone (no other cancellation asked for meanwhile): the time limit.
            if deadline.expired and task.uncancel() == 0:
                raise _late(timeout_s) from None
            raise
        finally:
            deadlines.finish(deadline)
    received = len(raw)
    if encoding != "identity":
        # Always off the loop: a small compressed body can inflate to the whole limit.
        raw = await anyio.to_thread.run_sync(_decompress, raw, encoding, limit)
    view = memoryview(raw)
    if kind == "json":
        return Body("json", view, memoryview(b""), received)
    lengths = set(head.header_lengths)
    if len(lengths) > 1:
        raise BadRequestError(f"{HEADER_LENGTH} is given more than once, with different values")
    with kernel_errors():
        header, binary = split_framed(view, parse_header_length(lengths.pop()))
    return Body("binary", header, binary, received)


def _late(timeout_s: float) -> RequestTimeoutError:
    return RequestTimeoutError(
        f"the request body did not arrive within body_timeout_s = {timeout_s:g} s"
    )


_HEADER_LENGTH = HEADER_LENGTH.lower().encode("latin-1")


class _Head:
    """What reading a body needs of the request headers, found in one pass over them (the
    first of each, as Starlette's `Headers.get` finds it; every framing header)."""

    __slots__ = ("content_type", "encoding", "length", "header_lengths")

    def __init__(self, raw: list[tuple[bytes, bytes]]) -> None:
        ctype = encoding = length = None
        self.header_lengths: list[str] = []
        for key, value in raw:
            if key == b"content-type":
                ctype = value if ctype is None else ctype
            elif key == b"content-length":
                length = value if length is None else length
            elif key == b"content-encoding":
                encoding = value if encoding is None else encoding
            elif key == _HEADER_LENGTH:
                self.header_lengths.append(value.decode("latin-1"))
        self.content_type = (ctype or b"").decode("latin-1")
        self.encoding = (encoding or b"identity").decode("latin-1").strip().lower()
        self.length = length.decode("latin-1") if length is not None else None

    def kind(self, control: bool = False) -> Literal["json", "binary"]:
        """JSON or KServe binary framing, from the headers; 415 for anything else.

        tritonclient's sync client sends no Content-Type at all and its async client sends
        application/octet-stream even for a pure-JSON body; a binary body is known by
        Inference-Header-Content-Length.
        """
        ctype = self.content_type.split(";", 1)[0].strip().lower()
        if control and ctype == FORM:
            return "json"
        if ctype not in ("", "application/json", "application/octet-stream"):
            raise UnsupportedMediaTypeError(
                f"Content-Type {ctype!r} is not supported; send application/json, or "
                "application/octet-stream with Inference-Header-Content-Length"
            )
        return "binary" if self.header_lengths else "json"


async def _read_limited(receive: Receive, limit: int) -> bytes:
    """The body's bytes from the ASGI channel (what `Request.stream` yields, without its
    generator); abandoned as soon as they pass `limit`."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":  # http.disconnect
            # Nobody reads the answer; it ends the request (and its access-log line) as a 400.
            raise BadRequestError("the client closed the connection before the whole body")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            # Stop reading: the rest of the body is never pulled off the socket.
            raise PayloadTooLargeError("max_request_bytes", limit, None, "request body")
        if chunk:
            chunks.append(chunk)
        if not message.get("more_body", False):
            break
    if len(chunks) == 1:
        return chunks[0]
    return b"".join(chunks)


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
