"""Response compression: gzip when the client asks, at a small fixed cost when it does not.

What is compressed, and how hard: JSON (tensors as numbers or base64, problems, metadata), at
zlib's fastest level. Binary tensor bodies (`application/octet-stream`, the KServe framing)
never are: tensor bytes hardly compress (an 800 KB INT32 convolution output by 1.4x, float32 by
1.08x) and gzip at Starlette's level 9 spent 120-150 ms of CPU on such a body, hundreds of times
the rest of the request; a client asking for binary wants the bytes as they are. JSON numbers
compress 2.0x at level 1 against 2.2x at level 9, for 7-10x less CPU (`bench/NOTES-service.md`).
Bodies from 128 KiB on are compressed in a worker thread (Starlette's threshold).

Starlette's `GZipMiddleware` builds a responder object (normalizing its excluded content types)
and parses the headers on every request, gzip asked for or not: tens of microseconds, more than
the rest of a tiny request's routing. Requests that ask for gzip still go through it; the others
get the same effect as its identity responder (the body as it is, and `Vary: Accept-Encoding`
on responses large enough that gzip would have applied) with one pass over the raw headers.
"""

from __future__ import annotations

import functools

from starlette.datastructures import MutableHeaders
from starlette.middleware.gzip import DEFAULT_EXCLUDED_CONTENT_TYPES, GZipMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: Media types never compressed: Starlette's (already compressed, streams) and binary tensors.
EXCLUDED_CONTENT_TYPES = (*DEFAULT_EXCLUDED_CONTENT_TYPES, "application/octet-stream")
#: zlib's fastest level: most of the ratio on JSON numbers for a fraction of the CPU.
COMPRESS_LEVEL = 1

_EXCLUDED = frozenset(t.partition(";")[0].strip().lower() for t in EXCLUDED_CONTENT_TYPES)


class Compression:
    """gzip responses of at least `minimum_size` bytes for clients that accept it."""

    def __init__(self, app: ASGIApp, minimum_size: int) -> None:
        self.app = app
        self.minimum_size = minimum_size
        self.gzip = GZipMiddleware(
            app,
            minimum_size=minimum_size,
            compresslevel=COMPRESS_LEVEL,
            exclude_content_types=EXCLUDED_CONTENT_TYPES,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for key, value in scope["headers"]:
            if key == b"accept-encoding":  # the first one decides, as in Starlette
                if b"gzip" in value:
                    await self.gzip(scope, receive, send)
                    return
                break
        await self.app(scope, receive, _IdentitySend(send, self.minimum_size))


class _IdentitySend:
    """Holds the response start until the first body message shows whether gzip would have
    applied; if so, adds `Vary: Accept-Encoding` (what Starlette's identity responder does)."""

    def __init__(self, send: Send, minimum_size: int) -> None:
        self.send = send
        self.minimum_size = minimum_size
        self.start: Message | None = None

    async def __call__(self, message: Message) -> None:
        kind = message["type"]
        if kind == "http.response.start":
            if _passes_through(message):
                await self.send(message)
            else:
                self.start = message
            return
        start = self.start
        if start is None or kind not in ("http.response.body", "http.response.pathsend"):
            await self.send(message)
            return
        self.start = None
        if kind == "http.response.body" and (
            len(message.get("body", b"")) >= self.minimum_size or message.get("more_body", False)
        ):
            MutableHeaders(raw=start.setdefault("headers", [])).add_vary_header("Accept-Encoding")
        await self.send(start)
        await self.send(message)


def _passes_through(start: Message) -> bool:
    """Responses gzip never touches: already encoded, partial, or of an excluded type."""
    if start["status"] == 206:
        return True
    media_type = b""
    for key, value in start.get("headers", ()):
        if key == b"content-encoding":
            return True
        if key == b"content-type" and not media_type:
            media_type = value
    return _excluded(media_type)


@functools.lru_cache(maxsize=64)  # the service answers in a handful of media types
def _excluded(content_type: bytes) -> bool:
    media_type = content_type.decode("latin-1").partition(";")[0].strip().lower()
    types = {media_type, media_type.partition("/")[0] + "/*"}
    if media_type.startswith("application/grpc+"):
        types.add("application/grpc")
    return not types.isdisjoint(_EXCLUDED)
