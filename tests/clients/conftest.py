"""Fixtures that run the SDK against the real service: in process and over real HTTP.

In process, the sync client goes through Starlette's TestClient (an `httpx.Client` that runs
the lifespan) and the async client through `httpx.ASGITransport` inside the app's lifespan.
Over HTTP, `dmlserve serve` runs as a subprocess on a free port; small ASGI fixtures that
wrap the real app (flaky, slow) run under uvicorn in a thread.
"""

from __future__ import annotations

import socket
import threading
import time
import warnings
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import httpx
import pytest
import uvicorn

from dmlserve.clients import AsyncClient, Client
from dmlserve.service.app import create_app
from dmlserve.service.settings import Settings
from tests.backend import TEST_BACKEND
from tests.servers import ServerProcess

with warnings.catch_warnings():
    # Starlette announces a move to httpx2; its TestClient is still an httpx.Client today.
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
    from starlette.testclient import TestClient

ASGIApp = Callable[..., Any]


def make_app(**overrides: Any) -> Any:
    """The real service app, on the test backend unless `backend` is given."""
    settings: dict[str, Any] = {"backend": TEST_BACKEND, "warmup": False, **overrides}
    return create_app(Settings(**settings))


@contextmanager
def inprocess_client(app: Any | None = None, **client_kwargs: Any) -> Iterator[Client]:
    with TestClient(app if app is not None else make_app()) as http:
        with Client("http://testserver", http_client=http, **client_kwargs) as client:
            yield client


@asynccontextmanager
async def inprocess_async_client(
    app: Any | None = None, **client_kwargs: Any
) -> AsyncIterator[AsyncClient]:
    app = app if app is not None else make_app()
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport) as http:
            async with AsyncClient("http://testserver", http_client=http, **client_kwargs) as c:
                yield c


@contextmanager
def serve_in_thread(app: ASGIApp) -> Iterator[str]:
    """Serve an ASGI app with uvicorn on a free port in a thread; yields its base URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the fixture server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(20)
        sock.close()


@pytest.fixture(scope="session")
def server_url() -> Iterator[str]:
    """`dmlserve serve` on the test backend, as a subprocess on a free port."""
    server = ServerProcess(env={"DMLSERVE_WARMUP": "false"})
    try:
        yield server.url
    finally:
        server.close()


@pytest.fixture(params=["inprocess", "http"])
def client(request: pytest.FixtureRequest) -> Iterator[Client]:
    """A sync client against the real service, in process and over real HTTP."""
    if request.param == "inprocess":
        with inprocess_client() as c:
            yield c
    else:
        with Client(request.getfixturevalue("server_url")) as c:
            yield c


@pytest.fixture(params=["inprocess", "http"])
async def async_client(request: pytest.FixtureRequest) -> AsyncIterator[AsyncClient]:
    """An async client against the real service, in process and over real HTTP."""
    if request.param == "inprocess":
        async with inprocess_async_client() as c:
            yield c
    else:
        async with AsyncClient(request.getfixturevalue("server_url")) as c:
            yield c
