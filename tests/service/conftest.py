"""Fixtures: the app in process (with its lifespan) and real servers in subprocesses."""

from __future__ import annotations

import asyncio
import concurrent.futures
import socket
import threading
import time
from collections.abc import AsyncIterator, Coroutine, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from dmlserve.service import Settings, create_app
from dmlserve.service.server import build_server
from dmlserve.service.state import ServiceState
from dmlserve.service.work import Timings
from tests.backend import TEST_BACKEND
from tests.servers import ServerProcess, free_port

T = TypeVar("T")


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


class ThreadServer:
    """The service as `dmlserve serve` runs it (`build_server`: uvicorn with the connection
    limits), in a thread of the test process on a free port, so a test can reach its state and
    hold its compute slots; a context manager."""

    def __init__(self, **settings: Any) -> None:
        self.settings = Settings(**{"backend": TEST_BACKEND, **settings})
        self.app = create_app(self.settings)
        self.server = build_server(self.app, self.settings)
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.port = int(self.sock.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )

    @property
    def state(self) -> ServiceState:
        state: ServiceState = self.app.state.dmlserve
        return state

    def __enter__(self) -> ThreadServer:
        self.thread.start()
        deadline = time.monotonic() + 60
        while not (self.server.started and self.state.ready):
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the server did not start")
            time.sleep(0.01)
        self.loop = self.server.servers[0].get_loop()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(60)
        self.sock.close()

    def call(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run `coro` on the server's event loop."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def hold_slots(
        self, count: int
    ) -> tuple[threading.Event, list[concurrent.futures.Future[Any]]]:
        """Take `count` compute slots with work that waits for the returned event."""
        gate = threading.Event()
        limiter = self.state.limiter
        held = [self.call(limiter.run(gate.wait, 3600, Timings())) for _ in range(count)]
        wait_until(lambda: limiter.running == count)
        return gate, held


def wait_until(condition: Any, timeout_s: float = 60.0) -> None:
    """Poll `condition()` until it holds (a generous bound, never a measure of speed)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("the condition did not hold in time")
        time.sleep(0.005)


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
