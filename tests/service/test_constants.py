"""Constant inputs: bound at registration, left out of every execute on /v1, /v2 and the SDK."""

from __future__ import annotations

from typing import Any

import httpx
import numpy as np
import orjson
import pytest

from dmlserve.clients import AsyncClient, UnprocessableEntityError
from tests.service.conftest import app_client
from tests.service.helpers import execute_request, read_outputs, wire_tensor
from tests.service.models import (
    CONV_CONSTANTS,
    CONV_OPERATOR,
    conv_body,
    conv_input,
    expected_conv,
    wire,
)


async def _register(client: httpx.AsyncClient, body: dict[str, Any]) -> httpx.Response:
    return await client.post("/v1/operators", json=body)


@pytest.mark.parametrize("encoding", ["json", "b64"])
async def test_v1_and_v2_execute_without_the_constants(encoding: str) -> None:
    async with app_client() as client:
        r = await _register(client, {"name": "conv", **conv_body(encoding)})
        assert r.status_code == 201, r.text
        doc = r.json()
        assert doc["constants"] == {
            "FilterTensor": {"DataType": "INT8", "Sizes": [3, 2, 2, 2]},
            "InputZeroPointTensor": {"DataType": "UINT8", "Sizes": [1, 1, 1, 1]},
            "FilterZeroPointTensor": {"DataType": "INT8", "Sizes": [1, 3, 1, 1]},
        }
        assert doc["batching"]["max_batch_size"] == 8 and doc["source"] == "runtime"

        x = conv_input(2)
        body, headers = execute_request(None, {"InputTensor": x}, "binary")
        r = await client.post("/v1/operators/conv/execute", content=body, headers=headers)
        assert r.status_code == 200, r.text
        np.testing.assert_array_equal(read_outputs(r.content, r.headers)[1]["OutputTensor"],
                                      expected_conv(x))  # fmt: skip

        x = conv_input(3, seed=1)
        infer = {"inputs": [{"name": "InputTensor", "shape": [3, 2, 5, 5], "datatype": "UINT8",
                             "data": x.reshape(-1).tolist()}]}  # fmt: skip
        r = await client.post("/v2/models/conv/infer", json=infer)
        assert r.status_code == 200, r.text
        out = r.json()["outputs"][0]
        assert out["shape"] == [3, 3, 4, 4]
        np.testing.assert_array_equal(np.reshape(out["data"], out["shape"]), expected_conv(x))

        meta = (await client.get("/v2/models/conv")).json()
        assert [i["name"] for i in meta["inputs"]] == ["InputTensor"]


async def test_a_registration_framed_in_binary_carries_its_constants() -> None:
    async with app_client() as client:
        doc: dict[str, Any] = {"name": "conv-bin", "operator": CONV_OPERATOR, "constants": {}}
        blobs = []
        for name, array in CONV_CONSTANTS.items():
            doc["constants"][name], raw = wire_tensor(array, "binary")
            blobs.append(raw)
        header = orjson.dumps(doc)
        headers = {"Inference-Header-Content-Length": str(len(header))}
        r = await client.post("/v1/operators", content=header + b"".join(blobs), headers=headers)
        assert r.status_code == 201, r.text
        x = conv_input(1)
        body, headers = execute_request(None, {"InputTensor": x}, "json")
        r = await client.post("/v1/operators/conv-bin/execute", content=body, headers=headers)
        np.testing.assert_array_equal(read_outputs(r.content, r.headers)[1]["OutputTensor"],
                                      expected_conv(x))  # fmt: skip


async def test_sending_a_constant_again_is_422_on_v1_and_v2() -> None:
    async with app_client() as client:
        assert (await _register(client, {"name": "conv", **conv_body()})).status_code == 201
        x = conv_input(1)
        inputs = {"InputTensor": x, "FilterTensor": CONV_CONSTANTS["FilterTensor"]}
        body, headers = execute_request(None, inputs, "json")
        r = await client.post("/v1/operators/conv/execute", content=body, headers=headers)
        assert r.status_code == 422
        assert r.json()["errors"][0]["loc"] == ["inputs", "FilterTensor"]
        assert "constant" in r.json()["detail"]

        w = CONV_CONSTANTS["FilterTensor"]
        infer = {"inputs": [
            {"name": "InputTensor", "shape": [1, 2, 5, 5], "datatype": "UINT8",
             "data": x.reshape(-1).tolist()},
            {"name": "FilterTensor", "shape": list(w.shape), "datatype": "INT8",
             "data": w.reshape(-1).tolist()},
        ]}  # fmt: skip
        r = await client.post("/v2/models/conv/infer", json=infer)
        assert r.status_code == 422 and "FilterTensor is a constant" in r.json()["error"]


@pytest.mark.parametrize(
    ("change", "loc", "words"),
    [
        ({"constants": {"Weights": wire(np.zeros(1, np.int8))}}, ["constants", "Weights"],
         "has no input 'Weights'"),
        ({"constants": {"FilterTensor": wire(np.zeros((3, 5, 2, 2), np.int8))}},
         ["operator", "FilterTensor", "Sizes", 1], "InputTensor.Sizes[1]"),
        ({"constants": {"FilterTensor": {"DataType": "INT8", "Sizes": [2], "data": [1]}}},
         ["constants", "FilterTensor"], "2 elements"),
        ({"batching": {"max_batch_size": 0, "max_queue_delay_us": 0}},
         ["batching", "max_batch_size"], "greater than or equal to 1"),
        ({"batching": {"max_batch_size": 4, "max_queue_delay_us": 0,
                       "preferred_batch_sizes": [8]}}, ["batching"], "preferred_batch_sizes"),
    ],
)  # fmt: skip
async def test_registration_errors_name_the_field(
    change: dict[str, Any], loc: list[Any], words: str
) -> None:
    async with app_client() as client:
        body = {"operator": CONV_OPERATOR, "constants": conv_body()["constants"], **change}
        r = await _register(client, body)
        assert r.status_code == 422, r.text
        problem = r.json()
        assert any(e["loc"][: len(loc)] == loc for e in problem["errors"]), problem
        assert words in problem["detail"]


async def test_batching_needs_a_variable_batch_on_every_input_sent() -> None:
    async with app_client() as client:
        # The filter sent with each request has no -1 batch: no batching for this model.
        w = CONV_CONSTANTS["FilterTensor"]
        operator = {**CONV_OPERATOR, "FilterTensor": {"DataType": "INT8", "Sizes": list(w.shape)}}
        batching = {"max_batch_size": 4, "max_queue_delay_us": 0}
        r = await _register(client, {"operator": operator, "batching": batching})
        assert r.status_code == 422 and r.json()["errors"][0]["loc"] == ["batching"]
        # With the filter bound, the one input sent has a -1 batch.
        r = await _register(client, {**conv_body(), "batching": batching})
        assert r.status_code == 201, r.text


async def test_constant_bytes_count_against_the_tensor_limit() -> None:
    async with app_client(max_tensor_bytes=16) as client:
        r = await _register(client, conv_body())  # the 24-byte filter is over 16
        assert r.status_code == 413
        assert r.json()["errors"][0]["loc"] == ["max_tensor_bytes"]


async def test_constants_are_part_of_what_a_registration_is() -> None:
    async with app_client() as client:
        first = await _register(client, conv_body())
        assert first.status_code == 201
        assert (await _register(client, conv_body())).json()["name"] == first.json()["name"]
        other = conv_body()
        other["constants"]["FilterTensor"] = wire(CONV_CONSTANTS["FilterTensor"] + 1)
        second = await _register(client, other)
        assert second.status_code == 201 and second.json()["name"] != first.json()["name"]
        r = await _register(client, {**other, "name": first.json()["name"]})
        assert r.status_code == 422 and "another descriptor" in r.json()["detail"]


async def test_the_sdk_registers_constants_and_executes_without_them() -> None:
    async with app_client() as c:
        transport = c._transport  # the started app, in process
        for encoding in ("binary", "json"):
            http = httpx.AsyncClient(transport=transport, base_url="http://dmlserve")
            async with AsyncClient("http://dmlserve", http_client=http, encoding=encoding) as sdk:  # type: ignore[arg-type]
                handle = await sdk.register(CONV_OPERATOR, constants=CONV_CONSTANTS)
                x = conv_input(2, seed=5)
                out = await handle.execute({"InputTensor": x})
                np.testing.assert_array_equal(out["OutputTensor"], expected_conv(x))
                with pytest.raises(UnprocessableEntityError, match="constant"):
                    await handle.execute({"InputTensor": x, "FilterTensor": CONV_CONSTANTS[
                        "FilterTensor"]})  # fmt: skip
            await http.aclose()


@pytest.mark.gpu
async def test_on_the_gpu_the_constants_stay_on_the_device() -> None:
    from dmlserve.kernels._array import is_cupy_array

    async with app_client(backend="cupy") as client:
        r = await _register(client, {"name": "conv", **conv_body()})
        assert r.status_code == 201, r.text
        state = client.app.state.dmlserve  # type: ignore[attr-defined]
        constants = state.registry.get("conv").constants
        assert constants and all(is_cupy_array(t.buffer) for t in constants.values())
        for batch in (1, 4):
            x = conv_input(batch, seed=batch)
            body, headers = execute_request(None, {"InputTensor": x}, "binary")
            r = await client.post("/v1/operators/conv/execute", content=body, headers=headers)
            assert r.status_code == 200, r.text
            doc, out = read_outputs(r.content, r.headers)
            assert doc["backend"] == "cupy"
            np.testing.assert_array_equal(out["OutputTensor"], expected_conv(x))


@pytest.mark.gpu
async def test_on_the_gpu_a_constant_filter_is_prepared_once_per_registration() -> None:
    """Two registrations of tensor-core-sized convolutions whose filters and zero points are
    constants, executed in turns: every answer exact, each registration's prepared filter its
    own and made once."""
    from dmlserve.kernels import reference

    rng = np.random.default_rng(9)
    models = {}
    async with app_client(backend="cupy") as client:
        for name in ("conv-a", "conv-b"):
            # 32 outputs: the tensor-core GEMM, whose filter is prepared (16 take the grouped
            # kernel, which prepares nothing)
            w = rng.integers(-128, 128, (32, 16, 3, 3)).astype(np.int8)
            zw = rng.integers(-128, 128, (1, 32, 1, 1)).astype(np.int8)
            zx = np.full((1, 1, 1, 1), rng.integers(0, 256), np.uint8)
            constants = {"FilterTensor": w, "FilterZeroPointTensor": zw, "InputZeroPointTensor": zx}
            body = {
                "name": name,
                "operator": {"type": "CONVOLUTION_INTEGER", "StartPadding": [1, 1],
                             "EndPadding": [1, 1],
                             "InputTensor": {"DataType": "UINT8", "Sizes": [-1, 16, 9, 7]}},
                "constants": {n: wire(a, "b64") for n, a in constants.items()},
            }  # fmt: skip
            r = await _register(client, body)
            assert r.status_code == 201, r.text
            models[name] = (w, zw, zx)
        state = client.app.state.dmlserve  # type: ignore[attr-defined]
        prepared = {}
        for turn in range(3):
            for name, (w, zw, zx) in models.items():
                x = rng.integers(0, 256, (turn + 1, 16, 9, 7)).astype(np.uint8)
                body, headers = execute_request(None, {"InputTensor": x}, "binary")
                url = f"/v1/operators/{name}/execute"
                r = await client.post(url, content=body, headers=headers)
                assert r.status_code == 200, r.text
                geometry = ((1, 1), (1, 1), (1, 1), (1, 1), 1)
                want = reference.convolution_integer(
                    x, w, int(zx.reshape(-1)[0]), zw.reshape(-1).astype(np.int32), *geometry
                )
                got = read_outputs(r.content, r.headers)[1]["OutputTensor"]
                np.testing.assert_array_equal(got, want)
                cache = state.registry.get(name).prepared.cache
                prepared.setdefault(name, cache["filter"][1][0])
                assert cache["filter"][1][0] is prepared[name]  # made once, then reused
        assert prepared["conv-a"] is not prepared["conv-b"]
        # KServe v2 runs on the same prepared filter
        w, zw, zx = models["conv-a"]
        x = rng.integers(0, 256, (2, 16, 9, 7)).astype(np.uint8)
        infer = {"inputs": [{"name": "InputTensor", "shape": list(x.shape), "datatype": "UINT8",
                             "data": x.reshape(-1).tolist()}]}  # fmt: skip
        r = await client.post("/v2/models/conv-a/infer", json=infer)
        assert r.status_code == 200, r.text
        out = r.json()["outputs"][0]
        want = reference.convolution_integer(
            x, w, int(zx.reshape(-1)[0]), zw.reshape(-1).astype(np.int32), *geometry
        )
        np.testing.assert_array_equal(np.reshape(out["data"], out["shape"]), want)
        assert state.registry.get("conv-a").prepared.cache["filter"][1][0] is prepared["conv-a"]
