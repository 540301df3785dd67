"""Each error class from a real response of the service."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import numpy as np
import pytest

from dmlserve import clients
from dmlserve.clients import Client
from dmlserve.clients._base import RequestSpec
from dmlserve.service.work import Timings

from .conftest import inprocess_async_client, inprocess_client, make_app

PAD = {"type": "PADDING", "StartPadding": [1], "EndPadding": [1]}
X = np.arange(4, dtype=np.float32)


def test_unknown_name_is_not_found(client: Client) -> None:
    with pytest.raises(clients.NotFoundError) as info:
        client.get_operator("no-such-operator")
    err = info.value
    assert err.status_code == 404 and err.code == "not_found" and err.title
    assert err.request_id and err.response.status_code == 404


def test_bad_descriptor_is_unprocessable_and_names_the_field(client: Client) -> None:
    op = {"type": "UNFOLD", "WindowSizes": [0, 3]}
    with pytest.raises(clients.UnprocessableEntityError) as info:
        client.execute(op, {"InputTensor": np.zeros((1, 1, 4, 4), np.float32)})
    err = info.value
    assert err.status_code == 422 and err.code
    assert any(item["loc"][-2:] == ["WindowSizes", 0] for item in err.errors), err.errors
    assert "WindowSizes" in (err.detail or "")


def test_wrong_dtype_for_the_operator_is_unprocessable(client: Client) -> None:
    with pytest.raises(clients.UnprocessableEntityError):
        client.average_pooling(np.zeros((1, 1, 4, 4), np.int32), 2)


def test_body_over_the_limit_is_payload_too_large() -> None:
    with inprocess_client(make_app(max_request_bytes=1024)) as client:
        assert client.padding(X, [1], [1]).shape == (6,)  # small bodies still pass
        with pytest.raises(clients.PayloadTooLargeError) as info:
            client.padding(np.zeros(4096, np.float32), [1], [1])
    assert info.value.status_code == 413 and info.value.errors


def test_missing_or_wrong_api_key_is_unauthenticated() -> None:
    app = make_app(api_keys=("s3cret",))
    with inprocess_client(app) as anonymous:
        with pytest.raises(clients.AuthenticationError) as info:
            anonymous.execute(PAD, {"InputTensor": X})
        assert info.value.status_code == 401
        assert anonymous.health() is True  # health stays open
    with inprocess_client(app, api_key="wrong") as wrong:
        with pytest.raises(clients.AuthenticationError):
            wrong.padding(X, [1], [1])
    with inprocess_client(app, api_key="s3cret") as good:
        assert good.padding(X, [1], [1]).tolist() == [0, 0, 1, 2, 3, 0]


def test_unframed_garbage_is_a_bad_request_and_text_is_unsupported(client: Client) -> None:
    # The SDK never sends these; its own send loop still reports them with the right class.
    garbage = RequestSpec("POST", "v1/execute", b"{not json", {"Content-Type": "application/json"})
    with pytest.raises(clients.BadRequestError):
        client._request(garbage, client._parse_json)
    text = RequestSpec("POST", "v1/execute", b"hello", {"Content-Type": "text/plain"})
    with pytest.raises(clients.UnsupportedMediaTypeError):
        client._request(text, client._parse_json)


@asynccontextmanager
async def held_slot(app: Any) -> AsyncIterator[tuple[threading.Event, asyncio.Task[Any]]]:
    """The app's only compute slot taken by work that waits for the returned event, so that
    the queue is full however fast the machine is."""
    limiter = app.state.dmlserve.limiter
    gate = threading.Event()
    holder = asyncio.create_task(limiter.run(gate.wait, 600, Timings()))
    while limiter.running == 0:
        await asyncio.sleep(0)
    try:
        yield gate, holder
    finally:
        gate.set()
        await holder


async def test_full_queue_is_rate_limited() -> None:
    app = make_app(max_concurrency=1, max_queue=0, retry_after_s=0)
    async with inprocess_async_client(app, max_retries=0) as client, held_slot(app):
        with pytest.raises(clients.RateLimitError) as info:
            await client.padding(X, [1], [1])
    assert info.value.status_code == 429 and info.value.response.headers["retry-after"] == "0"


async def test_request_over_the_time_limit_is_a_gateway_timeout() -> None:
    app = make_app(max_concurrency=1, request_timeout_s=0.05)
    async with inprocess_async_client(app) as client, held_slot(app):
        # Queued behind the held slot until its limit passes.
        with pytest.raises(clients.GatewayTimeoutError) as info:
            await client.padding(X, [1], [1])
    assert info.value.status_code == 504


async def test_full_queue_is_retried_after_retry_after() -> None:
    app = make_app(max_concurrency=1, max_queue=0, retry_after_s=1)
    delays: list[float] = []
    async with inprocess_async_client(app, max_retries=2) as client:
        async with held_slot(app) as (gate, holder):

            async def sleep(delay: float) -> None:
                # The client waits its Retry-After; meanwhile the slot is given back.
                delays.append(delay)
                gate.set()
                await holder

            client._sleep = sleep
            y = await client.padding(X, [1], [1])
    assert delays == [1.0]  # one 429, retried after the server's Retry-After
    assert y.tolist() == [0, 0, 1, 2, 3, 0]
