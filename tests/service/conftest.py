"""Fixtures: the app in process (with its lifespan) and real servers in subprocesses."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from dmlserve.service import Settings, create_app
from tests.backend import TEST_BACKEND
from tests.servers import ServerProcess, free_port


@asynccontextmanager
async def app_client(**settings: Any) -> AsyncIterator[httpx.AsyncClient]:
    """An httpx client bound to a started app (lifespan run), NumPy backend unless told."""
    settings.setdefault("backend", TEST_BACKEND)
    app = create_app(Settings(**settings))
    # The lifespan runs as a server would run it: start-up before, shutdown after.
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://dmlserve") as client:
            client.app = app  # type: ignore[attr-defined]
            yield client


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with app_client() as c:
        yield c


@pytest.fixture(scope="session")
def server() -> Iterator[ServerProcess]:
    """One real server for the HTTP tests of the whole session."""
    srv = ServerProcess()
    try:
        yield srv
    finally:
        srv.stop()
        Path(srv.log.name).unlink(missing_ok=True)


@pytest.fixture(params=["asgi", "http"])
async def any_client(
    request: pytest.FixtureRequest, server: ServerProcess
) -> AsyncIterator[httpx.AsyncClient]:
    """The same tests in process and over real HTTP against a uvicorn subprocess."""
    if request.param == "asgi":
        async with app_client() as c:
            yield c
    else:
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as c:
            yield c


class TransportServer:
    """A real server with gRPC on (and the operator samples registered, once)."""

    def __init__(self, *flags: str) -> None:
        self.grpc_port = free_port()
        self.http = ServerProcess("--grpc-port", str(self.grpc_port), *flags)
        self.url = self.http.url
        self.http_address = self.url.removeprefix("http://")
        self.grpc_address = f"127.0.0.1:{self.grpc_port}"

    def stop(self) -> int:
        code = self.http.stop()
        Path(self.http.log.name).unlink(missing_ok=True)
        return code


@pytest.fixture(scope="session")
def transport_server() -> Iterator[TransportServer]:
    """One server for the shared-memory and gRPC tests, every operator sample registered."""
    from tests.service.transports import register_samples

    srv = TransportServer()
    try:
        register_samples(srv.url)
        yield srv
    finally:
        srv.stop()
