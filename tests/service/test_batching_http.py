"""Dynamic batching on real servers: the registration field and its rules, concurrent HTTP
requests and gRPC calls joined into one execution, the policy in the model configuration."""

from __future__ import annotations

import asyncio
import re
from concurrent.futures import Future
from functools import partial
from typing import Any

import httpx
import numpy as np
import pytest
import tritonclient.grpc as triton

from tests.service.conftest import ServerProcess, TransportServer
from tests.service.helpers import execute_request, read_outputs

PAD = {
    "type": "PADDING",
    "PaddingMode": "EDGE",
    "StartPadding": [0, 0, 1, 0],
    "EndPadding": [0, 0, 0, 2],
    "InputTensor": {"DataType": "INT16", "Sizes": [-1, 2, 3, 3]},
}


def _metric(text: str, name: str, model: str) -> float:
    found = re.search(rf'^{name}\{{model="{model}",version="1"\}} (\S+)$', text, re.M)
    return float(found.group(1)) if found else 0.0


async def test_registration_takes_a_batching_policy_and_shows_it(
    any_client: httpx.AsyncClient,
) -> None:
    batching = {"max_batch_size": 8, "max_queue_delay_us": 200, "preferred_batch_sizes": [4, 8]}
    body = {"name": "pad-batching-shown", "operator": PAD, "batching": batching}
    r = await any_client.post("/v1/operators", json=body)
    assert r.status_code in (200, 201), r.text
    assert r.json()["batching"] == batching
    assert (await any_client.get("/v1/operators/pad-batching-shown")).json()["batching"] == batching
    assert (await any_client.post("/v1/operators", json=body)).status_code == 200  # the same again
    other = {**body, "batching": {**batching, "max_queue_delay_us": 100}}
    r = await any_client.post("/v1/operators", json=other)
    assert r.status_code == 422 and "another descriptor" in r.json()["detail"]
    plain = await any_client.post("/v1/operators", json={"operator": PAD})
    assert "batching" not in plain.json()


@pytest.mark.parametrize(
    ("operator", "batching", "loc"),
    [
        ({**PAD, "InputTensor": {"DataType": "INT16", "Sizes": [2, 2, 3, 3]}},
         {"max_batch_size": 4}, "batching"),
        ({"type": "CONVOLUTION_INTEGER",
          "InputTensor": {"DataType": "INT8", "Sizes": [-1, 1, 4, 4]},
          "FilterTensor": {"DataType": "INT8", "Sizes": [1, 1, 2, 2]}},
         {"max_batch_size": 4}, "batching"),
        (PAD, {"max_batch_size": 0}, "max_batch_size"),
        (PAD, {"max_batch_size": 4, "max_queue_delay_us": -1}, "max_queue_delay_us"),
        (PAD, {"max_batch_size": 4, "preferred_batch_sizes": [5]}, "batching"),
        (PAD, {"max_batch_size": 4, "extra": 1}, "extra"),
    ],
    ids=["fixed batch", "filter without batch", "zero size", "negative delay",
         "preferred over max", "unknown field"],
)  # fmt: skip
async def test_batching_rules_are_422_naming_the_field(
    any_client: httpx.AsyncClient, operator: dict[str, Any], batching: dict[str, Any], loc: str
) -> None:
    r = await any_client.post("/v1/operators", json={"operator": operator, "batching": batching})
    assert r.status_code == 422, r.text
    assert any(loc in map(str, e["loc"]) for e in r.json()["errors"]), r.json()


async def test_concurrent_requests_to_a_real_server_run_as_one_batch(
    server: ServerProcess,
) -> None:
    name = "pad-batched-http"
    # A long delay: the batch runs when its fourth item arrives, however the requests are timed.
    batching = {"max_batch_size": 4, "max_queue_delay_us": 10_000_000}
    rng = np.random.default_rng(11)
    xs = [rng.integers(-(2**15), 2**15, (n, 2, 3, 3), dtype=np.int16) for n in (1, 2, 1)]
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
        registration = {"name": name, "operator": PAD, "batching": batching}
        r = await client.post("/v1/operators", json=registration)
        assert r.status_code == 201, r.text

        async def execute(x: np.ndarray) -> np.ndarray:
            body, headers = execute_request(None, {"InputTensor": x}, "binary")
            r = await client.post(f"/v1/operators/{name}/execute", content=body, headers=headers)
            assert r.status_code == 200, r.text
            return read_outputs(r.content, r.headers)[1]["OutputTensor"]

        outs = await asyncio.gather(*(execute(x) for x in xs))
        metrics = (await client.get("/metrics")).text
        assert (await client.delete(f"/v1/operators/{name}")).status_code == 200
    for x, out in zip(xs, outs, strict=True):
        expected = np.pad(x, [(0, 0), (0, 0), (1, 0), (0, 2)], mode="edge")
        np.testing.assert_array_equal(out, expected, strict=True)
    assert _metric(metrics, "nv_inference_exec_count", name) == 1
    assert _metric(metrics, "nv_inference_count", name) == 4
    assert _metric(metrics, "nv_inference_request_success", name) == 3


def test_grpc_shows_the_policy_and_batches_its_calls(transport_server: TransportServer) -> None:
    name = "t-pad-batched-grpc"
    batching = {"max_batch_size": 3, "max_queue_delay_us": 10_000_000, "preferred_batch_sizes": [3]}
    r = httpx.post(transport_server.url + "/v1/operators",
                   json={"name": name, "operator": PAD, "batching": batching})  # fmt: skip
    assert r.status_code == 201, r.text
    rng = np.random.default_rng(12)
    xs = [rng.integers(-(2**15), 2**15, (n, 2, 3, 3), dtype=np.int16) for n in (2, 1)]
    done: list[Future[Any]] = [Future(), Future()]
    with triton.InferenceServerClient(transport_server.grpc_address) as client:
        config = client.get_model_config(name).config
        assert config.dynamic_batching.max_queue_delay_microseconds == 10_000_000
        assert list(config.dynamic_batching.preferred_batch_size) == [3]
        for x, future in zip(xs, done, strict=True):  # 2 + 1 items: one batch of 3
            tensor = triton.InferInput("InputTensor", list(x.shape), "INT16")
            tensor.set_data_from_numpy(x)
            client.async_infer(name, [tensor], partial(_settle, future))
        outs = [f.result(timeout=60).as_numpy("OutputTensor") for f in done]
    for x, out in zip(xs, outs, strict=True):
        expected = np.pad(x, [(0, 0), (0, 0), (1, 0), (0, 2)], mode="edge")
        np.testing.assert_array_equal(out, expected, strict=True)
    metrics = httpx.get(transport_server.url + "/metrics").text
    assert _metric(metrics, "nv_inference_exec_count", name) == 1
    assert _metric(metrics, "nv_inference_count", name) == 3


def _settle(future: Future[Any], result: Any, error: Any) -> None:
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)
