"""Retries, backoff, Retry-After, request ids and timeouts, over real HTTP.

The fixture apps wrap the real service app: they answer 503/429 a given number of times
(with Retry-After) or stall, then hand the request to the service.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx
import numpy as np
import pytest

from dmlserve import clients
from dmlserve.clients import AsyncClient, Client
from tests.servers import free_port

from .conftest import make_app, serve_in_thread

PAD = {"type": "PADDING", "StartPadding": [2], "EndPadding": [1]}
X = np.arange(3, dtype=np.int32)
EXPECTED = [0, 0, 0, 1, 2, 0]


@dataclass
class Flaky:
    """Answers `status` with Retry-After for the first `failures` execute calls, then proxies."""

    inner: Any
    failures: int = 2
    status: int = 503
    retry_after: str | None = "0.2"
    stall_s: float = 0.0
    calls: list[tuple[float, str]] = field(default_factory=list)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not scope["path"].endswith("/execute"):
            await self.inner(scope, receive, send)
            return
        headers = dict(scope["headers"])
        self.calls.append((time.monotonic(), headers.get(b"x-request-id", b"").decode()))
        if self.stall_s:
            await anyio.sleep(self.stall_s)
        if len(self.calls) <= self.failures:
            while (await receive()).get("more_body"):
                pass
            extra = [(b"retry-after", self.retry_after.encode())] if self.retry_after else []
            await send(
                {
                    "type": "http.response.start",
                    "status": self.status,
                    "headers": [(b"content-type", b"application/problem+json"), *extra],
                }
            )
            await send({"type": "http.response.body", "body": b'{"title": "try later"}'})
            return
        await self.inner(scope, receive, send)


@pytest.fixture
def flaky() -> Iterator[tuple[Flaky, str]]:
    app = Flaky(make_app())
    with serve_in_thread(app) as url:
        yield app, url


def test_503_twice_then_success_honours_retry_after(flaky: tuple[Flaky, str]) -> None:
    app, url = flaky
    with Client(url) as client:
        start = time.monotonic()
        assert client.execute(PAD, {"InputTensor": X})["OutputTensor"].tolist() == EXPECTED
        elapsed = time.monotonic() - start
    assert len(app.calls) == 3
    gaps = [b[0] - a[0] for a, b in zip(app.calls, app.calls[1:], strict=False)]
    assert all(gap >= 0.19 for gap in gaps), gaps  # Retry-After: 0.2 each time
    assert elapsed < 5
    ids = {request_id for _, request_id in app.calls}
    assert len(ids) == 1 and ids != {""}  # one X-Request-ID per logical call, kept


def test_each_logical_call_gets_its_own_request_id(flaky: tuple[Flaky, str]) -> None:
    app, url = flaky
    app.failures = 0
    with Client(url) as client:
        client.execute(PAD, {"InputTensor": X})
        client.execute(PAD, {"InputTensor": X})
    assert len({request_id for _, request_id in app.calls}) == 2


def test_429_is_retried_and_exhaustion_raises(flaky: tuple[Flaky, str]) -> None:
    app, url = flaky
    app.status, app.failures = 429, 5
    with Client(url, max_retries=2) as client:
        with pytest.raises(clients.RateLimitError) as info:
            client.execute(PAD, {"InputTensor": X})
    assert len(app.calls) == 3 and info.value.status_code == 429
    assert info.value.response.headers["retry-after"] == "0.2"


def test_max_retries_zero_disables_retries(flaky: tuple[Flaky, str]) -> None:
    app, url = flaky
    with Client(url, max_retries=0) as client:
        with pytest.raises(clients.ServiceUnavailableError):
            client.execute(PAD, {"InputTensor": X})
    assert len(app.calls) == 1


def test_without_retry_after_the_backoff_applies(flaky: tuple[Flaky, str]) -> None:
    app, url = flaky
    app.retry_after, app.failures = None, 1
    with Client(url) as client:
        client.execute(PAD, {"InputTensor": X})
    gap = app.calls[1][0] - app.calls[0][0]
    assert 0.75 * 0.5 - 0.01 <= gap < 2.0  # first backoff step: 0.5 s times a jitter in (0.75, 1]


async def test_async_client_retries_the_same_way(flaky: tuple[Flaky, str]) -> None:
    app, url = flaky
    async with AsyncClient(url) as client:
        y = (await client.execute(PAD, {"InputTensor": X}))["OutputTensor"]
    assert y.tolist() == EXPECTED and len(app.calls) == 3
    assert len({request_id for _, request_id in app.calls}) == 1


def test_connection_errors_are_retried_then_raised() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    attempts: list[httpx.Request] = []
    http = httpx.Client(event_hooks={"request": [attempts.append]})
    with Client(url, max_retries=2, http_client=http) as client:
        start = time.monotonic()
        with pytest.raises(clients.APIConnectionError) as info:
            client.padding(X, [1], [1])
        elapsed = time.monotonic() - start
    assert not isinstance(info.value, clients.APITimeoutError)
    assert isinstance(info.value.__cause__, httpx.ConnectError)
    assert len(attempts) == 3
    assert elapsed >= 0.75 * (0.5 + 1.0) - 0.01
    assert len({r.headers["x-request-id"] for r in attempts}) == 1
    assert not http.is_closed  # an injected client stays open
    http.close()


def test_slow_answer_is_a_timeout_and_is_not_resent(flaky: tuple[Flaky, str]) -> None:
    app, url = flaky
    app.failures, app.stall_s = 0, 1.0
    with Client(url, timeout=0.2) as client:
        with pytest.raises(clients.APITimeoutError) as info:
            client.execute(PAD, {"InputTensor": X})
    assert isinstance(info.value.__cause__, httpx.ReadTimeout)
    assert len(app.calls) == 1


async def test_async_timeout(flaky: tuple[Flaky, str]) -> None:
    app, url = flaky
    app.failures, app.stall_s = 0, 1.0
    async with AsyncClient(url, timeout=0.2) as client:
        with pytest.raises(clients.APITimeoutError):
            await client.padding(X, [1], [1])
