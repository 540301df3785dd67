"""JSON logs carrying a request id, and the middleware that sets, echoes and logs it."""

from __future__ import annotations

import contextvars
import itertools
import json
import logging
import os
import re
import secrets
import sys
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

request_id_var: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")
_VALID_ID = re.compile(r"^[A-Za-z0-9._:\-]{1,128}$")


class _RequestIds:
    """32 hex characters: a random per-process prefix and a counter.

    Unique within the process and, through the 64 random bits, across processes and restarts;
    a fraction of the cost of `uuid4()` (which reads the OS random source on every call).
    """

    def __init__(self) -> None:
        self.reseed()
        os.register_at_fork(after_in_child=self.reseed)  # a forked worker gets its own prefix

    def reseed(self) -> None:
        self._prefix = secrets.token_hex(8)
        self._counter = itertools.count()

    def next(self) -> str:
        return f"{self._prefix}{next(self._counter):016x}"


new_request_id = _RequestIds().next
_STD_ATTRS = set(vars(logging.makeLogRecord({})).keys()) | {"message", "asctime", "color_message"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, request id, extras."""

    # One encoder for every line (`json.dumps(..., default=str)` builds one per call; same
    # output), and the formatted second reused while it lasts.
    _encoder = json.JSONEncoder(default=str)
    _second: tuple[int, str] = (-1, "")

    def _timestamp(self, created: float) -> str:
        second = int(created)
        if self._second[0] != second:
            self._second = (second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second)))
        return self._second[1]

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": self._timestamp(record.created) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": request_id_var.get(),
        }
        for key, value in vars(record).items():
            if key not in _STD_ATTRS and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return self._encoder.encode(entry)


def configure_logging(level: str) -> None:
    """JSON lines on stderr for the service's and uvicorn's loggers."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        lg = logging.getLogger(name)
        lg.handlers[:] = []
        lg.propagate = True
    # Our access log replaces uvicorn's (it carries the request id and the duration).
    logging.getLogger("uvicorn.access").disabled = True


class RequestContextMiddleware:
    """Honour or create `X-Request-ID`, echo it, and write one access-log line per request."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.log = logging.getLogger("dmlserve.access")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = ""
        for key, value in scope["headers"]:
            if key == b"x-request-id":
                rid = value.decode("latin-1").strip()
        if not (rid and _VALID_ID.match(rid)):
            rid = new_request_id()
        token = request_id_var.set(rid)
        logged = self.log.isEnabledFor(logging.INFO)
        start = time.perf_counter() if logged else 0.0
        echo = (b"x-request-id", rid.encode("latin-1"))
        status = 0

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = message.get("headers", [])
                if any(k == b"x-request-id" for k, _ in headers):
                    headers = [(k, v) for k, v in headers if k != b"x-request-id"]
                message = {**message, "headers": [*headers, echo]}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            if logged:  # else the line's fields are not even built
                self.log.info(
                    "request",
                    extra={
                        "method": scope.get("method"),
                        "path": scope.get("path"),
                        "status": status or 500,
                        "duration_ms": round((time.perf_counter() - start) * 1e3, 3),
                    },
                )
            request_id_var.reset(token)
