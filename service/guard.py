"""The middleware that makes every request end in a response of its API's shape.

Two ways a request can leave the app without one, and what it gets instead:
- a defect (an exception no handler took): a 500 in the API's error shape, logged, and the
  connection kept (Starlette's outermost handler would re-raise, and uvicorn would then drop
  the connection, failing the client's next request on it too);
- shutdown: a request still queued or computing when the grace period ends is cancelled by
  the server; it gets a 503 with Retry-After ("retry elsewhere"), not uvicorn's plain-text 500.
"""

from __future__ import annotations

import asyncio
import logging

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from dmlserve.service.errors import ServiceError, UnavailableError, defect
from dmlserve.service.responses import render_error
from dmlserve.service.state import ServiceState

logger = logging.getLogger("dmlserve.errors")


class Guard:
    """Answer defects and shutdown cut-offs in the API's error shape (see the module)."""

    def __init__(self, app: ASGIApp, state: ServiceState) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watch(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watch)
        except asyncio.CancelledError:
            if started or not self.state.draining:
                raise
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()  # answered: the cancellation has done its work
            error: ServiceError = UnavailableError(
                "the server is shutting down; retry the request",
                self.state.settings.retry_after_s,
            )
            await render_error(scope["path"], error)(scope, receive, send)
        except Exception:
            logger.exception("unhandled error", extra={"path": scope.get("path")})
            if started:
                raise  # part of a response is out: only closing the connection ends it
            await render_error(scope["path"], defect())(scope, receive, send)
