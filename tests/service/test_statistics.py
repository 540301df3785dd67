"""Triton's statistics extension: counts with Triton's meanings, per model, in Triton's JSON."""

from __future__ import annotations

from typing import Any

import httpx
import numpy as np

from dmlserve.service.metrics import MAX_BATCH_STATS, ModelStatistics
from dmlserve.service.work import Timings
from tests.service.conftest import app_client
from tests.service.models import CONV_CONSTANTS, CONV_OPERATOR, POOL, pool_input

STAGES = ("success", "fail", "queue", "compute_input", "compute_infer", "compute_output")


def _infer(x: np.ndarray) -> dict[str, Any]:
    return {"inputs": [{"name": "InputTensor", "shape": list(x.shape), "datatype": "FP32",
                        "data": x.reshape(-1).tolist()}]}  # fmt: skip


async def _stats(client: httpx.AsyncClient, path: str) -> dict[str, Any]:
    r = await client.get(path)
    assert r.status_code == 200, r.text
    doc: dict[str, Any] = r.json()
    return doc


async def test_counts_follow_tritons_meanings() -> None:
    async with app_client() as client:
        assert (await client.post("/v1/operators", json={"name": "pool", **POOL})).is_success
        before = (await _stats(client, "/v2/models/pool/stats"))["model_stats"][0]
        assert before["inference_count"] == 0 and before["last_inference"] == 0
        for batch in (1, 3, 3):
            r = await client.post("/v2/models/pool/infer", json=_infer(pool_input(batch)))
            assert r.status_code == 200
        bad = _infer(pool_input(1))
        bad["inputs"][0]["shape"] = [1, 3, 8, 7]
        assert (await client.post("/v2/models/pool/infer", json=bad)).status_code == 422

        stat = (await _stats(client, "/v2/models/pool/stats"))["model_stats"][0]
        assert (stat["name"], stat["version"]) == ("pool", "1")
        assert stat["inference_count"] == 7  # batch items
        assert stat["execution_count"] == 3  # one per execution
        assert stat["last_inference"] > 0
        inference = stat["inference_stats"]
        assert set(inference) == {*STAGES, "cache_hit", "cache_miss"}
        assert inference["success"]["count"] == 3 and inference["fail"]["count"] == 1
        for stage in ("queue", "compute_input", "compute_infer", "compute_output"):
            assert inference[stage]["count"] == 3
        assert inference["success"]["ns"] >= inference["compute_infer"]["ns"] > 0
        assert inference["cache_hit"] == inference["cache_miss"] == {"count": 0, "ns": 0}
        batches = {b["batch_size"]: b for b in stat["batch_stats"]}
        assert set(batches) == {1, 3}
        assert batches[3]["compute_infer"]["count"] == 2
        # The same counters through /v1 and under the versioned path.
        x = pool_input(2)
        tensor = {"DataType": "FLOAT32", "Sizes": list(x.shape), "data": x.reshape(-1).tolist()}
        r = await client.post(
            "/v1/operators/pool/execute", json={"inputs": {"InputTensor": tensor}}
        )
        assert r.status_code == 200
        again = (await _stats(client, "/v2/models/pool/versions/1/stats"))["model_stats"][0]
        assert again["inference_count"] == 9 and again["execution_count"] == 4


async def test_a_model_without_a_variable_batch_counts_one_inference_per_request() -> None:
    async with app_client() as client:
        w = CONV_CONSTANTS["FilterTensor"]
        operator = {**CONV_OPERATOR, "InputTensor": {"DataType": "UINT8", "Sizes": [2, 2, 5, 5]},
                    "FilterTensor": {"DataType": "INT8", "Sizes": list(w.shape)}}  # fmt: skip
        assert (
            await client.post("/v1/operators", json={"name": "c", "operator": operator})
        ).is_success
        x = np.zeros((2, 2, 5, 5), np.uint8)
        infer = {"inputs": [
            {"name": "InputTensor", "shape": [2, 2, 5, 5], "datatype": "UINT8",
             "data": x.reshape(-1).tolist()},
            {"name": "FilterTensor", "shape": list(w.shape), "datatype": "INT8",
             "data": w.reshape(-1).tolist()},
        ]}  # fmt: skip
        assert (await client.post("/v2/models/c/infer", json=infer)).status_code == 200
        stat = (await _stats(client, "/v2/models/c/stats"))["model_stats"][0]
        assert stat["inference_count"] == 1 and stat["execution_count"] == 1


async def test_every_model_and_the_stats_path_is_not_a_model_name() -> None:
    async with app_client() as client:
        for name in ("b", "a"):
            body = {"name": name, **POOL}
            assert (await client.post("/v1/operators", json=body)).is_success
        doc = await _stats(client, "/v2/models/stats")
        assert [s["name"] for s in doc["model_stats"]] == ["a", "b"]
        assert "statistics" in (await client.get("/v2")).json()["extensions"]
        assert (await client.get("/v2/models/nothing/stats")).status_code == 404
        r = await client.get("/v2/models/a/versions/2/stats")
        assert r.status_code == 404 and "error" in r.json()
        # A removed model's statistics go with it.
        await client.delete("/v1/operators/a")
        assert [s["name"] for s in (await _stats(client, "/v2/models/stats"))["model_stats"]] == [
            "b"
        ]


def test_a_dynamic_batch_counts_one_execution() -> None:
    # Four requests of batch 2 run as one execution of batch 8: one request carries it.
    stats = ModelStatistics()
    timings = Timings(queue=0.001, compute=0.002)
    for i in range(4):
        stats.record(True, 0.005, timings, 2, executions=1 if i == 0 else 0, execution_batch=8)
    doc = stats.to_json("m", "1")
    assert doc["inference_count"] == 8 and doc["execution_count"] == 1
    assert doc["inference_stats"]["success"]["count"] == 4
    assert [(b["batch_size"], b["compute_infer"]["count"]) for b in doc["batch_stats"]] == [(8, 1)]


def test_the_batch_table_is_bounded() -> None:
    stats = ModelStatistics()
    for size in range(1, MAX_BATCH_STATS + 10):
        stats.record(True, 0.0, Timings(), size, executions=1, execution_batch=size)
    doc = stats.to_json("m", "1")
    assert len(doc["batch_stats"]) == MAX_BATCH_STATS
    assert doc["execution_count"] == MAX_BATCH_STATS + 9
