"""Registration and the handle, against the real service."""

from __future__ import annotations

import numpy as np
import pytest

from dmlserve import clients
from dmlserve.clients import AsyncClient, Client

POOL = {
    "type": "AVERAGE_POOLING",
    "WindowSize": [2, 2],
    "Strides": [2, 2],
    "InputTensor": {"DataType": "FLOAT32", "Sizes": [-1, 3, 4, 4]},
}


def _expected(x: np.ndarray) -> np.ndarray:
    n, c = x.shape[:2]
    return x.reshape(n, c, 2, 2, 2, 2).mean(axis=(3, 5), dtype=np.float32)


def test_register_execute_metadata_delete(client: Client) -> None:
    handle = client.register(POOL, name="pool-2x2")
    assert handle.name == "pool-2x2"
    # The service answers with the resolved descriptor: OutputTensor filled in, batch open.
    assert handle.operator["OutputTensor"] == {"DataType": "FLOAT32", "Sizes": [-1, 3, 2, 2]}
    for batch in (1, 5):  # a variable batch
        x = np.random.default_rng(batch).standard_normal((batch, 3, 4, 4)).astype(np.float32)
        y = handle.execute({"InputTensor": x})["OutputTensor"]
        np.testing.assert_allclose(y, _expected(x), rtol=1e-6)
    assert handle.metadata()["name"] == "pool-2x2"
    assert "pool-2x2" in [item["name"] for item in client.operators()]
    assert client.get_operator("pool-2x2").operator == handle.operator
    handle.delete()
    assert "pool-2x2" not in [item["name"] for item in client.operators()]
    with pytest.raises(clients.NotFoundError) as info:
        handle.execute({"InputTensor": np.zeros((1, 3, 4, 4), np.float32)})
    assert info.value.status_code == 404 and info.value.detail


def test_same_descriptor_again_gives_the_same_name(client: Client) -> None:
    first = client.register(POOL)
    again = client.register(POOL)
    assert first.name == again.name and first.name
    first.delete()


def test_registering_a_bad_descriptor_is_unprocessable(client: Client) -> None:
    bad = {**POOL, "WindowSize": [2, 2, 2]}
    with pytest.raises(clients.UnprocessableEntityError) as info:
        client.register(bad)
    assert any("WindowSize" in item["loc"] for item in info.value.errors)


async def test_async_handle(async_client: AsyncClient) -> None:
    handle = await async_client.register(POOL, name="async-pool")
    x = np.arange(2 * 3 * 16, dtype=np.float32).reshape(2, 3, 4, 4)
    y = (await handle.execute({"InputTensor": x}))["OutputTensor"]
    np.testing.assert_allclose(y, _expected(x), rtol=1e-6)
    assert (await handle.metadata())["operator"] == handle.operator
    assert "async-pool" in [op["name"] for op in await async_client.operators()]
    await handle.delete()
    with pytest.raises(clients.NotFoundError):
        await async_client.get_operator("async-pool")
