"""Dynamic batching through the transports: concurrent HTTP requests joined into one execution
(in process, on a clock moved by hand), and a batching model served by real servers over HTTP
and gRPC with the same answers and counts. The registration field's own rules and the model
configuration are tested with the model repository (test_constants, test_model_config)."""

from __future__ import annotations

import asyncio
import re
from concurrent.futures import Future
from functools import partial
from typing import Any

import httpx
import numpy as np
import tritonclient.grpc as triton

from dmlserve.service.batching import Batchers
from tests.service.batching_helpers import ManualClock
from tests.service.conftest import ServerProcess, TransportServer, app_client
from tests.service.helpers import execute_request, read_outputs

PAD = {
    "type": "PADDING",
    "PaddingMode": "EDGE",
    "StartPadding": [0, 0, 1, 0],
    "EndPadding": [0, 0, 0, 2],
    "InputTensor": {"DataType": "INT16", "Sizes": [-1, 2, 3, 3]},
}
BATCHES = (1, 2, 1)


def _inputs(seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(-(2**15), 2**15, (n, 2, 3, 3), dtype=np.int16) for n in BATCHES]


def _expected(x: np.ndarray) -> np.ndarray:
    return np.pad(x, [(0, 0), (0, 0), (1, 0), (0, 2)], mode="edge")


def _metric(text: str, name: str, model: str) -> float:
    found = re.search(rf'^{name}\{{model="{model}",version="1"\}} (\S+)$', text, re.M)
    return float(found.group(1)) if found else 0.0


async def _execute(client: httpx.AsyncClient, name: str, x: np.ndarray) -> np.ndarray:
    body, headers = execute_request(None, {"InputTensor": x}, "binary")
    r = await client.post(f"/v1/operators/{name}/execute", content=body, headers=headers)
    assert r.status_code == 200, r.text
    return read_outputs(r.content, r.headers)[1]["OutputTensor"]


async def test_concurrent_http_requests_run_as_one_batch() -> None:
    clock = ManualClock()
    async with app_client() as client:
        state = client.app.state.dmlserve  # type: ignore[attr-defined]
        state.batchers = Batchers(clock)
        batching = {"max_batch_size": 8, "max_queue_delay_us": 500}
        r = await client.post("/v1/operators", json={"name": "pad", "operator": PAD,
                                                     "batching": batching})  # fmt: skip
        assert r.status_code == 201, r.text
        xs = _inputs(11)
        tasks = [asyncio.create_task(_execute(client, "pad", x)) for x in xs]
        for _ in range(1000):  # turns of the event loop until all three wait for the delay
            if state.limiter.waiting == len(xs):
                break
            await asyncio.sleep(0)
        assert state.limiter.waiting == len(xs) and not any(t.done() for t in tasks)
        clock.advance(500e-6)
        outs = await asyncio.gather(*tasks)
        metrics = (await client.get("/metrics")).text
    for x, out in zip(xs, outs, strict=True):
        np.testing.assert_array_equal(out, _expected(x), strict=True)
    assert _metric(metrics, "nv_inference_exec_count", "pad") == 1
    assert _metric(metrics, "nv_inference_count", "pad") == sum(BATCHES)


async def test_a_real_server_answers_a_batching_model(server: ServerProcess) -> None:
    name = "pad-batched-http"
    batching = {"max_batch_size": 4, "max_queue_delay_us": 1000}
    xs = _inputs(12)
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
        registration = {"name": name, "operator": PAD, "batching": batching}
        r = await client.post("/v1/operators", json=registration)
        assert r.status_code == 201, r.text
        outs = await asyncio.gather(*(_execute(client, name, x) for x in xs))
        metrics = (await client.get("/metrics")).text
        assert (await client.delete(f"/v1/operators/{name}")).status_code == 200
    for x, out in zip(xs, outs, strict=True):
        np.testing.assert_array_equal(out, _expected(x), strict=True)
    # However the requests met in batches, each inference counts once and so does each request.
    assert _metric(metrics, "nv_inference_count", name) == sum(BATCHES)
    assert _metric(metrics, "nv_inference_request_success", name) == len(xs)
    assert 1 <= _metric(metrics, "nv_inference_exec_count", name) <= len(xs)


def test_grpc_calls_to_a_batching_model(transport_server: TransportServer) -> None:
    name = "t-pad-batched-grpc"
    batching = {"max_batch_size": 4, "max_queue_delay_us": 1000, "preferred_batch_sizes": [4]}
    r = httpx.post(transport_server.url + "/v1/operators",
                   json={"name": name, "operator": PAD, "batching": batching})  # fmt: skip
    assert r.status_code == 201, r.text
    xs = _inputs(13)
    done: list[Future[Any]] = [Future() for _ in xs]
    with triton.InferenceServerClient(transport_server.grpc_address) as client:
        for x, future in zip(xs, done, strict=True):
            tensor = triton.InferInput("InputTensor", list(x.shape), "INT16")
            tensor.set_data_from_numpy(x)
            client.async_infer(name, [tensor], partial(_settle, future))
        outs = [f.result(timeout=60).as_numpy("OutputTensor") for f in done]
    for x, out in zip(xs, outs, strict=True):
        np.testing.assert_array_equal(out, _expected(x), strict=True)
    metrics = httpx.get(transport_server.url + "/metrics").text
    assert _metric(metrics, "nv_inference_count", name) == sum(BATCHES)


def _settle(future: Future[Any], result: Any, error: Any) -> None:
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)
