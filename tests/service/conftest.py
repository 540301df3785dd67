"""Fixtures: the app in process (with its lifespan) and real servers in subprocesses."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from dmlserve.service import Settings, create_app
from tests.backend import TEST_BACKEND

REPO = Path(__file__).resolve().parents[2]


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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerProcess:
    """`python -m service.cli serve ...` on a free port, ready when `/v2/health/ready` is."""

    def __init__(self, *flags: str, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tempfile.NamedTemporaryFile(prefix="dmlserve-", suffix=".log", delete=False)
        cmd = [sys.executable, "-m", "dmlserve.service.cli", "serve", "--backend", TEST_BACKEND,
               "--host", "127.0.0.1", "--port", str(self.port), *flags]  # fmt: skip
        src = str(REPO / "src")
        pythonpath = os.pathsep.join(filter(None, [src, os.environ.get("PYTHONPATH")]))
        full_env = {**os.environ, "PYTHONPATH": pythonpath, **(env or {})}
        self.proc = subprocess.Popen(
            cmd, cwd=REPO, env=full_env, stdout=self.log, stderr=subprocess.STDOUT
        )
        self._wait_ready()

    def _wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited early:\n{self.logs()}")
            try:
                if httpx.get(self.url + "/v2/health/ready", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"server not ready in {timeout} s:\n{self.logs()}")

    def logs(self) -> str:
        return Path(self.log.name).read_text(errors="replace")

    def terminate(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def stop(self) -> int:
        self.terminate()
        try:
            return self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()
        finally:
            self.log.close()


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
