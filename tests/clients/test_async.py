"""The async client under concurrency, against the real service."""

from __future__ import annotations

import asyncio

import numpy as np

from dmlserve import kernels
from dmlserve.clients import AsyncClient
from tests.clients.test_operators import assert_same


async def test_twenty_concurrent_calls(async_client: AsyncClient) -> None:
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal((1, 2, 6 + i % 4, 5)).astype(np.float32) for i in range(20)]
    results = await asyncio.gather(*(async_client.average_pooling(x, [2, 3]) for x in xs))
    for x, y in zip(xs, results, strict=True):
        op = {"type": "AVERAGE_POOLING", "WindowSize": [2, 3]}
        expected = kernels.execute(op, {"InputTensor": x}, backend="numpy")["OutputTensor"]
        assert_same(y, expected)


async def test_every_helper_on_the_async_client(async_client: AsyncClient) -> None:
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    cols = await async_client.unfold(x, 2)
    assert cols.shape == (1, 4, 9)
    image = await async_client.fold(cols, [4, 4], 2)
    overlaps = np.array([[1, 2, 2, 1], [2, 4, 4, 2], [2, 4, 4, 2], [1, 2, 2, 1]], np.float32)
    np.testing.assert_array_equal(image[0, 0], x[0, 0] * overlaps)
    padded = await async_client.padding(x, [0, 0, 1, 0], [0, 0, 0, 1], mode="WRAP")
    np.testing.assert_array_equal(padded, np.pad(x, [(0, 0), (0, 0), (1, 0), (0, 1)], "wrap"))
    pooled = await async_client.average_pooling(x, 4)
    assert pooled.reshape(()) == x.mean()
    conv = await async_client.convolution_integer(
        np.ones((1, 1, 3, 3), np.uint8), np.ones((1, 1, 2, 2), np.int8), x_zero_point=1
    )
    assert conv.dtype == np.int32 and conv.tolist() == [[[[0, 0], [0, 0]]]]
    assert await async_client.health() and await async_client.ready()
