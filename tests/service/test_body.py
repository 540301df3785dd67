"""Reading a body: content types, the size limit while reading, decompression, the framing."""

from __future__ import annotations

import asyncio
import gzip
import zlib
from collections.abc import Sequence
from typing import Any

import pytest
from starlette.requests import Request

from dmlserve.service.body import Body, read_body
from dmlserve.service.deadlines import Deadlines
from dmlserve.service.errors import (
    BadRequestError,
    PayloadTooLargeError,
    RequestTimeoutError,
    ServiceError,
    UnsupportedMediaTypeError,
)


class Sender:
    """An ASGI receive channel that hands out body chunks and counts how many were read."""

    def __init__(self, chunks: Sequence[bytes]) -> None:
        self.chunks = list(chunks)
        self.read = 0

    async def __call__(self) -> dict:
        self.read += 1
        chunk = self.chunks.pop(0) if self.chunks else b""
        return {"type": "http.request", "body": chunk, "more_body": bool(self.chunks)}


async def _read(
    chunks: Sequence[bytes], headers: dict[str, str], limit: int = 1 << 20
) -> tuple[Body, Sender]:
    sender = Sender(chunks)
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
    }
    return await read_body(Request(scope, sender), limit), sender


async def test_json_and_binary_bodies() -> None:
    body, _ = await _read([b'{"a":', b"1}"], {"Content-Type": "application/json"})
    assert (body.kind, bytes(body.json), bytes(body.binary), body.received_bytes) == (
        "json", b'{"a":1}', b"", 7,
    )  # fmt: skip
    assert not body.section().framed
    # tritonclient: no Content-Type at all, the framing header decides.
    body, _ = await _read([b"{}abc"], {"Inference-Header-Content-Length": "2"})
    assert (body.kind, bytes(body.json), bytes(body.binary)) == ("binary", b"{}", b"abc")
    assert body.section().framed


@pytest.mark.parametrize(
    ("headers", "error"),
    [
        ({"Content-Type": "text/plain"}, UnsupportedMediaTypeError),
        ({"Content-Encoding": "br"}, UnsupportedMediaTypeError),
        ({"Inference-Header-Content-Length": "x"}, BadRequestError),
        ({"Inference-Header-Content-Length": "9"}, BadRequestError),
        ({"Content-Encoding": "gzip"}, BadRequestError),
    ],
)
async def test_refusals(headers: dict[str, str], error: type[ServiceError]) -> None:
    with pytest.raises(error):
        await _read([b"{}abc"], headers)


async def test_a_declared_length_over_the_limit_is_refused_before_reading() -> None:
    sender = None
    with pytest.raises(PayloadTooLargeError):
        _, sender = await _read([b"{}"], {"Content-Length": "101"}, limit=100)
    assert sender is None  # raised before a chunk was read
    body, sender = await _read([b"{}"], {"Content-Length": "2"}, limit=100)
    assert sender.read == 1


async def test_a_stream_over_the_limit_stops_being_read() -> None:
    chunks = [b"x" * 40] * 10
    sender = Sender(chunks)
    scope = {"type": "http", "method": "POST", "path": "/", "headers": []}
    with pytest.raises(PayloadTooLargeError):
        await read_body(Request(scope, sender), 100)
    assert sender.read == 3  # 120 bytes read, the other 280 never pulled


@pytest.mark.parametrize("encoding", ["gzip", "x-gzip", "deflate", "raw-deflate"])
async def test_compressed_bodies(encoding: str) -> None:
    content = b'{"k": "' + b"v" * 1000 + b'"}'
    if encoding in ("gzip", "x-gzip"):
        packed = gzip.compress(content)
    elif encoding == "deflate":
        packed = zlib.compress(content)
    else:
        c = zlib.compressobj(wbits=-15)
        packed = c.compress(content) + c.flush()
    name = "deflate" if "deflate" in encoding else encoding
    body, _ = await _read([packed], {"Content-Encoding": name})
    assert bytes(body.json) == content and body.received_bytes == len(packed)


async def test_the_decoded_size_counts_and_a_bomb_never_inflates() -> None:
    bomb = gzip.compress(b"\0" * (64 << 20))
    with pytest.raises(PayloadTooLargeError, match="decoded request body"):
        await _read([bomb], {"Content-Encoding": "gzip"}, limit=1 << 20)
    with pytest.raises(BadRequestError, match="not valid gzip"):
        await _read([bomb[:1000]], {"Content-Encoding": "gzip"}, limit=1 << 30)


class Never:
    """A receive channel whose body never comes; `asked` is set once a read waits on it."""

    def __init__(self) -> None:
        self.asked = asyncio.Event()

    async def __call__(self) -> dict:
        self.asked.set()
        await asyncio.Event().wait()
        raise AssertionError


def _request(receive: Any) -> Request:
    return Request({"type": "http", "method": "POST", "path": "/", "headers": []}, receive)


async def test_a_body_that_never_arrives_is_408_with_shared_deadlines() -> None:
    deadlines = Deadlines()
    with pytest.raises(RequestTimeoutError, match="body_timeout_s = 0.02 s"):
        await read_body(_request(Never()), 100, 0.02, deadlines=deadlines)
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]


async def test_another_cancellation_of_a_waiting_read_stays_a_cancellation() -> None:
    never = Never()
    task = asyncio.ensure_future(read_body(_request(never), 100, 60, deadlines=Deadlines()))
    await never.asked.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_read_that_did_not_wait_leaves_nothing_to_expire() -> None:
    deadlines = Deadlines()
    for _ in range(3):
        body = await read_body(_request(Sender([b"{}"])), 100, 60, deadlines=deadlines)
        assert bytes(body.json) == b"{}"
    assert deadlines._entries == []
    # Even a deadline already past cancels nothing once its wait has ended: this task goes on.
    task = asyncio.current_task()
    assert task is not None
    deadline = deadlines.add(-1.0, task.cancel)
    deadlines.finish(deadline)
    for _ in range(3):
        await asyncio.sleep(0)  # the timer, armed in the past, fires
    assert not deadline.expired and task.cancelling() == 0
