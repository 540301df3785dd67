"""Each error class from a real response of the service."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest

from dmlserve import clients
from dmlserve.clients import Client
from dmlserve.clients._base import RequestSpec

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


async def test_full_queue_is_rate_limited() -> None:
    app = make_app(max_concurrency=1, max_queue=0, retry_after_s=0, backend="numpy")
    # Heavy enough (~0.4 s on NumPy) that the first call still computes when the rest arrive.
    x = np.random.default_rng(0).integers(0, 255, size=(8, 32, 64, 64), dtype=np.uint8)
    w = np.random.default_rng(1).integers(-128, 127, size=(32, 32, 3, 3), dtype=np.int8)
    async with inprocess_async_client(app, max_retries=0) as client:
        results = await asyncio.gather(
            *(client.convolution_integer(x, w) for _ in range(6)), return_exceptions=True
        )
    limited = [r for r in results if isinstance(r, clients.RateLimitError)]
    assert limited, results
    assert all(isinstance(r, np.ndarray | clients.RateLimitError) for r in results), results
    assert limited[0].status_code == 429 and "retry-after" in limited[0].response.headers


async def test_request_over_the_time_limit_is_a_gateway_timeout() -> None:
    app = make_app(request_timeout_s=0.01, backend="numpy")  # work known to be slow
    x = np.random.default_rng(0).integers(0, 255, size=(8, 32, 64, 64), dtype=np.uint8)
    w = np.random.default_rng(1).integers(-128, 127, size=(32, 32, 3, 3), dtype=np.int8)
    async with inprocess_async_client(app) as client:
        with pytest.raises(clients.GatewayTimeoutError) as info:
            await client.convolution_integer(x, w)
    assert info.value.status_code == 504


async def test_full_queue_is_retried_after_retry_after() -> None:
    app = make_app(max_concurrency=1, max_queue=0, retry_after_s=1)
    x = np.random.default_rng(0).integers(0, 255, size=(8, 32, 64, 64), dtype=np.uint8)
    w = np.random.default_rng(1).integers(-128, 127, size=(32, 32, 3, 3), dtype=np.int8)
    async with inprocess_async_client(app, max_retries=2) as client:
        # The second call meets a full queue, waits the 1 s Retry-After, and then gets through.
        start = time.monotonic()
        first, second = await asyncio.gather(
            client.convolution_integer(x, w), client.convolution_integer(x, w)
        )
        elapsed = time.monotonic() - start
    np.testing.assert_array_equal(first, second)
    assert elapsed >= 1.0  # the wait proves the 429 happened and was retried
