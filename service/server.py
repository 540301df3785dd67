"""The app under uvicorn: connection limits and timeouts, and a shutdown the app knows about.

uvicorn closes an idle keep-alive connection after `timeout_keep_alive` (`KEEPALIVE_TIMEOUT_S`)
but bounds nothing else about a connection: one that never completes its request headers is
kept forever, and so is every socket it accepts (its `limit_concurrency` answers 503 to requests
past a count of connections and tasks, yet still accepts and keeps each socket, so idle sockets
can use up the process's file descriptors and lock every client out). `LimitedHttpProtocol`,
uvicorn's httptools protocol with three more limits, closes that gap:

- `MAX_CONNECTIONS`: a connection past the cap is answered 503 with Retry-After and closed at
  once, before anything of it is read; the cap is lowered to fit the open-file limit.
- `HEADER_TIMEOUT_S`: a request's headers must be complete within it, counted from the
  connection's start or from the first byte of a next request; else the connection is closed.
- `BODY_TIMEOUT_S`, after an answer sent before its request body was read (a 404, a 413 on the
  declared length, a 429): the rest of the body must arrive within it (it is read and
  dropped), or the connection is closed. A body the app reads has the app's own deadline,
  answered with 408 (`body.read_body`).

Each refusal and each closing is logged as a warning, at most once a second per kind with the
count since the last line, so a flood cannot flood the log.
"""

from __future__ import annotations

import asyncio
import logging
import math
import resource
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import orjson
import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from dmlserve.service.settings import Settings

logger = logging.getLogger("dmlserve.connections")

#: File descriptors kept for everything but client connections (listening socket, logs, ...).
RESERVED_FDS = 64


class Throttled:
    """A warning logged at most once per `interval_s`, with how often it happened since."""

    def __init__(self, message: str, interval_s: float = 1.0) -> None:
        self.message = message
        self.interval_s = interval_s
        self.count = 0
        self.last = -math.inf

    def note(self, **extra: Any) -> None:
        self.count += 1
        now = time.monotonic()
        if now - self.last >= self.interval_s:
            logger.warning(self.message, extra={**extra, "count": self.count})
            self.count, self.last = 0, now


@dataclass
class ConnectionLimits:
    """The limits `LimitedHttpProtocol` applies, and what it logs when one acts."""

    max_connections: int
    header_timeout_s: float
    body_timeout_s: float
    retry_after_s: int = 1
    refused: Throttled = field(
        default_factory=lambda: Throttled("connection refused: max_connections reached")
    )
    header_late: Throttled = field(
        default_factory=lambda: Throttled(
            "connection closed: request headers incomplete after header_timeout_s"
        )
    )
    body_late: Throttled = field(
        default_factory=lambda: Throttled(
            "connection closed: request body incomplete after body_timeout_s"
        )
    )

    def refusal(self) -> bytes:
        """The answer to a connection past the cap. Its API is unknown (nothing is read), so
        the body is a problem document that also carries KServe's `error` member."""
        detail = f"the server holds max_connections = {self.max_connections} connections"
        body = orjson.dumps(
            {"type": "urn:dmlserve:problem:unavailable", "title": "Service Unavailable",
             "status": 503, "detail": detail, "errors": [], "error": detail}
        )  # fmt: skip
        head = (
            "HTTP/1.1 503 Service Unavailable\r\n"
            "content-type: application/problem+json\r\n"
            f"retry-after: {self.retry_after_s}\r\n"
            "connection: close\r\n"
            f"content-length: {len(body)}\r\n\r\n"
        )
        return head.encode("ascii") + body


class LimitedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a connection cap and header and body deadlines.

    At most one deadline of its own is armed at a time: for the headers of the request being
    received; for the rest of a body its answer did not wait for; or, once that body is in,
    the keep-alive delay (uvicorn arms its own only when an answer ends a complete request).
    """

    limits: ClassVar[ConnectionLimits]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        self._message_done = True

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        over = len(self.connections) >= self.limits.max_connections
        super().connection_made(transport)
        if over:
            self.limits.refused.note(client=_peer(self.client))
            transport.write(self.limits.refusal())
            transport.close()
            return
        self._arm(self.limits.header_timeout_s, self.limits.header_late)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        idle = self.cycle is None or self.cycle.response_complete
        if idle and self._deadline is None and self.timeout_keep_alive_task is None:
            # Bytes between requests that begin none (stray line ends): uvicorn has stopped
            # its keep-alive wait, so the headers' deadline stands in for it.
            self._arm(self.limits.header_timeout_s, self.limits.header_late)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._message_done = False
        self._arm(self.limits.header_timeout_s, self.limits.header_late)

    def on_headers_complete(self) -> None:
        self._disarm()
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._message_done = True
        self._disarm()
        answered = self.cycle is not None and self.cycle.response_complete
        super().on_message_complete()
        if answered and not self.pipeline:  # the dropped body is in: idle from now on
            self._arm(self.timeout_keep_alive, None)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self._message_done and not self.transport.is_closing():
            self._unset_keepalive_if_required()  # not idle: the body is still coming
            self._arm(self.limits.body_timeout_s, self.limits.body_late)

    def _arm(self, delay_s: float, log: Throttled | None) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(delay_s, self._expire, log)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expire(self, log: Throttled | None) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            if log is not None:
                log.note(client=_peer(self.client))
            self.transport.close()


def _peer(client: tuple[str, int] | None) -> str:
    return f"{client[0]}:{client[1]}" if client else "-"


def connection_cap(wanted: int) -> int:
    """`wanted`, or fewer when the open-file limit cannot hold that many sockets (the soft
    limit is raised toward the hard one first)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = wanted + RESERVED_FDS
    if soft != resource.RLIM_INFINITY and soft < need:
        target = need if hard == resource.RLIM_INFINITY else min(need, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    if soft == resource.RLIM_INFINITY or soft >= need:
        return wanted
    cap = max(1, soft - RESERVED_FDS)
    logger.warning(
        "max_connections lowered to fit the open-file limit",
        extra={"max_connections": wanted, "effective": cap, "nofile": soft},
    )
    return cap


class Server(uvicorn.Server):
    """uvicorn's server, telling the app when shutdown begins (it then stops being ready,
    and requests still queued when the grace period ends are answered 503)."""

    def __init__(self, config: uvicorn.Config, on_shutdown: Callable[[], None]) -> None:
        super().__init__(config)
        self.on_shutdown = on_shutdown

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.on_shutdown()
        await super().shutdown(sockets)


def build_server(app: Any, settings: Settings) -> Server:
    """The uvicorn server for `app` (made by `create_app(settings)`), with every limit set."""
    limits = ConnectionLimits(
        max_connections=connection_cap(settings.max_connections),
        header_timeout_s=settings.header_timeout_s,
        body_timeout_s=settings.body_timeout_s,
        retry_after_s=settings.retry_after_s,
    )
    protocol = type("LimitedHttpProtocol", (LimitedHttpProtocol,), {"limits": limits})
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        http=protocol,
        ws="none",  # no WebSocket routes: an upgrade request is an ordinary request
        log_config=None,
        access_log=False,
        # Both are only delays (loop.call_later, asyncio.wait_for): fractions work.
        timeout_keep_alive=settings.keepalive_timeout_s,  # type: ignore[arg-type]
        timeout_graceful_shutdown=settings.shutdown_timeout_s,  # type: ignore[arg-type]
        lifespan="on",
        server_header=False,
    )
    return Server(config, app.state.dmlserve.begin_shutdown)
