"""Response compression: gzip only when asked, `Vary` as Starlette's gzip would set it."""

from __future__ import annotations

import gzip

import pytest
from starlette.types import Message, Receive, Scope, Send

from dmlserve.service.compression import Compression


def _app(body: bytes, media_type: str = "application/json", *, encoded: bool = False):  # type: ignore[no-untyped-def]
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        headers = [(b"content-type", media_type.encode())]
        if encoded:
            headers.append((b"content-encoding", b"identity"))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return app


async def _call(app: object, accept: str | None) -> tuple[dict[bytes, bytes], bytes]:
    messages: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        messages.append(message)

    headers = [(b"accept-encoding", accept.encode())] if accept is not None else []
    scope = {"type": "http", "method": "GET", "path": "/", "headers": headers}
    await Compression(app, minimum_size=100)(scope, receive, send)  # type: ignore[arg-type]
    start = messages[0]
    body = b"".join(m.get("body", b"") for m in messages[1:])
    return {k: v for k, v in start["headers"]}, body


async def test_gzip_when_asked_and_large_enough() -> None:
    big = b"[" + b"1," * 200 + b"1]"
    headers, body = await _call(_app(big), "gzip, br")
    assert headers[b"content-encoding"] == b"gzip" and gzip.decompress(body) == big
    headers, body = await _call(_app(b"[1]"), "gzip")
    assert b"content-encoding" not in headers and body == b"[1]"


@pytest.mark.parametrize("accept", [None, "identity", "br", "deflate"])
async def test_otherwise_the_body_as_it_is_with_vary_when_gzip_would_have_applied(
    accept: str | None,
) -> None:
    big = b"x" * 200
    headers, body = await _call(_app(big), accept)
    assert body == big and b"content-encoding" not in headers
    assert headers[b"vary"] == b"Accept-Encoding"
    headers, _ = await _call(_app(b"x"), accept)
    assert b"vary" not in headers


@pytest.mark.parametrize(
    "app",
    [_app(b"x" * 200, "text/event-stream"), _app(b"x" * 200, encoded=True)],
    ids=["excluded type", "already encoded"],
)
async def test_responses_gzip_never_touches_pass_through(app: object) -> None:
    for accept in (None, "gzip"):
        headers, body = await _call(app, accept)
        assert body == b"x" * 200 and b"vary" not in headers
        assert headers.get(b"content-encoding") in (None, b"identity")


async def test_binary_tensor_bodies_are_never_compressed() -> None:
    # Tensor bytes hardly compress; the framed body goes out as it is, gzip asked for or not.
    tensor = bytes(range(256)) * 8
    for accept in (None, "gzip"):
        headers, body = await _call(_app(tensor, "application/octet-stream"), accept)
        assert body == tensor and b"content-encoding" not in headers and b"vary" not in headers


async def test_json_is_compressed_at_the_fastest_level() -> None:
    big = b"[" + b"1.25," * 300 + b"1]"
    headers, body = await _call(_app(big), "gzip")
    assert headers[b"content-encoding"] == b"gzip" and gzip.decompress(body) == big
    assert body[8] == 4  # the gzip header's XFL byte: 4 = the fastest compression was used
