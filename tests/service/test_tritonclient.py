"""The unmodified `tritonclient.http` client (sync and aio) against a real dmlserve server."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import numpy as np
import pytest
import tritonclient.http as triton
import tritonclient.http.aio as triton_aio
from tritonclient.utils import InferenceServerException

from tests.service.conftest import ServerProcess

DESCRIPTOR = {
    "type": "UNFOLD",
    "WindowSizes": [2, 2],
    "StartPadding": [1, 0],
    "EndPadding": [0, 1],
    "InputTensor": {"DataType": "FLOAT32", "Sizes": [-1, 2, 4, 5]},
}


def expected_unfold(x: np.ndarray) -> np.ndarray:
    """Independent im2col: pad, then take every 2x2 window (row = c*4 + k, column = block)."""
    xp = np.pad(x, [(0, 0), (0, 0), (1, 0), (0, 1)])
    n, c, h, w = xp.shape
    cols = [
        xp[:, :, i : i + 2, j : j + 2].reshape(n, c * 4) for i in range(h - 1) for j in range(w - 1)
    ]
    return np.stack(cols, axis=-1)


@pytest.fixture(scope="module")
def model(server: ServerProcess) -> Iterator[str]:
    name = f"unfold-{uuid.uuid4().hex[:8]}"
    r = httpx.post(server.url + "/v1/operators", json={"name": name, "operator": DESCRIPTOR})
    assert r.status_code == 201, r.text
    yield name
    httpx.delete(f"{server.url}/v1/operators/{name}")


def _inputs(module: object, x: np.ndarray, binary: bool) -> list:
    inp = module.InferInput("InputTensor", list(x.shape), "FP32")  # type: ignore[attr-defined]
    inp.set_data_from_numpy(x, binary_data=binary)
    return [inp]


@pytest.mark.parametrize("binary_in", [False, True])
@pytest.mark.parametrize("binary_out", [False, True])
def test_sync_infer(server: ServerProcess, model: str, binary_in: bool, binary_out: bool) -> None:
    client = triton.InferenceServerClient(server.url.removeprefix("http://"))
    try:
        assert client.is_server_live() and client.is_server_ready()
        assert client.is_model_ready(model)
        meta = client.get_server_metadata()
        assert "binary_tensor_data" in meta["extensions"]
        mm = client.get_model_metadata(model)
        assert mm["inputs"][0] == {
            "name": "InputTensor",
            "datatype": "FP32",
            "shape": [-1, 2, 4, 5],
        }
        assert mm["outputs"][0]["shape"] == [-1, 8, 20]
        for batch in (1, 3):
            x = np.random.default_rng(batch).standard_normal((batch, 2, 4, 5)).astype(np.float32)
            outputs = [triton.InferRequestedOutput("OutputTensor", binary_data=binary_out)]
            result = client.infer(
                model, _inputs(triton, x, binary_in), outputs=outputs, request_id="r1"
            )
            assert result.get_response()["id"] == "r1"
            np.testing.assert_array_equal(result.as_numpy("OutputTensor"), expected_unfold(x))
    finally:
        client.close()


def test_sync_binary_data_output_and_compression(server: ServerProcess, model: str) -> None:
    client = triton.InferenceServerClient(server.url.removeprefix("http://"))
    try:
        x = np.arange(2 * 2 * 4 * 5, dtype=np.float32).reshape(2, 2, 4, 5)
        for algorithm in ("gzip", "deflate"):
            result = client.infer(
                model,
                _inputs(triton, x, True),
                request_compression_algorithm=algorithm,
                response_compression_algorithm=algorithm,
                parameters=None,
            )
            np.testing.assert_array_equal(result.as_numpy("OutputTensor"), expected_unfold(x))
        # binary_data_output in the request parameters, no outputs listed
        body = {
            "inputs": [{"name": "InputTensor", "shape": [2, 2, 4, 5], "datatype": "FP32",
                        "data": x.reshape(-1).tolist()}],
            "parameters": {"binary_data_output": True},
        }  # fmt: skip
        r = httpx.post(f"{server.url}/v2/models/{model}/infer", json=body)
        assert r.status_code == 200
        header = int(r.headers["inference-header-content-length"])
        out = np.frombuffer(r.content[header:], np.float32).reshape(2, 8, 20)
        np.testing.assert_array_equal(out, expected_unfold(x))
    finally:
        client.close()


def test_sync_errors_are_readable(server: ServerProcess, model: str) -> None:
    client = triton.InferenceServerClient(server.url.removeprefix("http://"))
    try:
        with pytest.raises(InferenceServerException, match="no operator"):
            client.get_model_metadata("does-not-exist")
        assert not client.is_model_ready("does-not-exist")
        bad = np.zeros((1, 2, 4, 6), np.float32)  # wrong width for the registered model
        with pytest.raises(InferenceServerException, match="Sizes"):
            client.infer(model, _inputs(triton, bad, True))
    finally:
        client.close()


@pytest.mark.parametrize("binary", [False, True])
async def test_aio_infer(server: ServerProcess, model: str, binary: bool) -> None:
    client = triton_aio.InferenceServerClient(server.url.removeprefix("http://"))
    try:
        assert await client.is_server_live() and await client.is_server_ready()
        assert await client.is_model_ready(model)
        assert (await client.get_server_metadata())["name"] == "dmlserve"
        assert (await client.get_model_metadata(model))["name"] == model
        x = np.random.default_rng(7).standard_normal((2, 2, 4, 5)).astype(np.float32)
        outputs = [triton_aio.InferRequestedOutput("OutputTensor", binary_data=binary)]
        result = await client.infer(model, _inputs(triton_aio, x, binary), outputs=outputs)
        np.testing.assert_array_equal(result.as_numpy("OutputTensor"), expected_unfold(x))
        with pytest.raises(InferenceServerException):
            await client.get_model_metadata("does-not-exist")
    finally:
        await client.close()


def test_nan_and_infinity_in_json_mode(server: ServerProcess, model: str) -> None:
    # perf_analyzer and tritonclient write non-finite floats as the literals NaN/Infinity.
    x = np.arange(40, dtype=np.float32).reshape(1, 2, 4, 5)
    x[0, 0, 0, :3] = [np.nan, np.inf, -np.inf]
    client = triton.InferenceServerClient(server.url.removeprefix("http://"))
    try:
        out = triton.InferRequestedOutput("OutputTensor", binary_data=False)
        result = client.infer(model, _inputs(triton, x, False), outputs=[out])
        np.testing.assert_array_equal(result.as_numpy("OutputTensor"), expected_unfold(x))
    finally:
        client.close()
