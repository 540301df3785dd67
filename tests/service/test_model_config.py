"""`GET /v2/models/{name}/config`: a registration in Triton's model-configuration JSON."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from dmlserve.service.model_config import DEFAULT_MAX_BATCH_SIZE
from tests.backend import TEST_BACKEND
from tests.service.conftest import app_client
from tests.service.models import BATCHING, CONV_CONSTANTS, CONV_OPERATOR, FOLD, POOL, conv_body

FILTER_SENT = {
    "operator": {
        **CONV_OPERATOR,
        "FilterTensor": {"DataType": "INT8", "Sizes": list(CONV_CONSTANTS["FilterTensor"].shape)},
    }
}


async def _config(client: httpx.AsyncClient, name: str, body: dict[str, Any]) -> dict[str, Any]:
    r = await client.post("/v1/operators", json={"name": name, **body})
    assert r.status_code == 201, r.text
    r = await client.get(f"/v2/models/{name}/config")
    assert r.status_code == 200, r.text
    config: dict[str, Any] = r.json()
    return config


@pytest.mark.parametrize(
    ("body", "batch", "inputs", "output"),
    [
        # Every input sent and the output have a -1 batch: dims without it.
        (POOL, DEFAULT_MAX_BATCH_SIZE, {"InputTensor": ("TYPE_FP32", [3, 8, 8])},
         ("TYPE_FP32", [3, 4, 4])),
        (FOLD, DEFAULT_MAX_BATCH_SIZE, {"InputTensor": ("TYPE_FP32", [12, 16])},
         ("TYPE_FP32", [3, 8, 8])),
        # The filter and zero points bound: one batched input, batching's max_batch_size.
        (conv_body(), BATCHING["max_batch_size"], {"InputTensor": ("TYPE_UINT8", [2, 5, 5])},
         ("TYPE_INT32", [3, 4, 4])),
        # The filter sent with each request has no batch: 0, and full dims.
        (FILTER_SENT, 0, {"InputTensor": ("TYPE_UINT8", [-1, 2, 5, 5]),
                          "FilterTensor": ("TYPE_INT8", [3, 2, 2, 2])},
         ("TYPE_INT32", [-1, 3, 4, 4])),
    ],
)  # fmt: skip
async def test_max_batch_size_and_dims(
    body: dict[str, Any], batch: int, inputs: dict[str, Any], output: tuple[str, list[int]]
) -> None:
    async with app_client() as client:
        config = await _config(client, "m", body)
        assert config["name"] == "m" and config["platform"] == config["backend"] == "dmlserve"
        assert config["max_batch_size"] == batch
        assert {i["name"]: (i["data_type"], i["dims"]) for i in config["input"]} == inputs
        assert [(o["name"], o["data_type"], o["dims"]) for o in config["output"]] == [
            ("OutputTensor", *output)
        ]
        gpu = TEST_BACKEND == "cupy"
        assert config["instance_group"] == [
            {"name": "m", "kind": "KIND_GPU" if gpu else "KIND_CPU", "count": 2,
             "gpus": [0] if gpu else []}
        ]  # fmt: skip
        assert ("dynamic_batching" in config) == ("batching" in body)


async def test_dynamic_batching_and_the_versioned_path() -> None:
    async with app_client() as client:
        config = await _config(client, "conv", conv_body())
        assert config["dynamic_batching"] == {
            "max_queue_delay_microseconds": BATCHING["max_queue_delay_us"],
            "preferred_batch_size": BATCHING["preferred_batch_sizes"],
        }
        assert (await client.get("/v2/models/conv/versions/1/config")).json() == config
        assert (await client.get("/v2/models/conv/versions/2/config")).status_code == 404
        assert (await client.get("/v2/models/none/config")).status_code == 404
