"""Every endpoint, in process and over real HTTP (`any_client`)."""

from __future__ import annotations

import uuid

import httpx
import numpy as np

from tests.service.helpers import PADDING_OP, execute_request, read_outputs


def _unique(prefix: str) -> str:
    # The HTTP server is shared by the session: names must not collide between tests.
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def test_execute_padding(any_client: httpx.AsyncClient) -> None:
    x = np.arange(16, dtype=np.int16).reshape(1, 1, 4, 4)
    body, headers = execute_request(PADDING_OP, {"InputTensor": x}, "json")
    r = await any_client.post("/v1/execute", content=body, headers=headers)
    assert r.status_code == 200, r.text
    _, out = read_outputs(r.content, r.headers)
    expected = np.pad(x, [(0, 0), (0, 0), (1, 3), (2, 4)], mode="reflect")
    np.testing.assert_array_equal(out["OutputTensor"], expected, strict=True)


async def test_output_encoding_overrides_request_encoding(any_client: httpx.AsyncClient) -> None:
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    for asked in ("json", "b64", "binary"):
        body, headers = execute_request(PADDING_OP, {"InputTensor": x}, "json", asked)
        r = await any_client.post("/v1/execute", content=body, headers=headers)
        assert r.status_code == 200, r.text
        assert ("inference-header-content-length" in r.headers) == (asked == "binary")
        doc, out = read_outputs(r.content, r.headers)
        key = {"json": "data", "b64": "b64", "binary": "parameters"}[asked]
        assert key in doc["outputs"]["OutputTensor"]
        assert out["OutputTensor"].shape == (1, 1, 8, 10)


async def test_register_list_read_execute_delete(any_client: httpx.AsyncClient) -> None:
    name = _unique("pad")
    descriptor = {**PADDING_OP, "InputTensor": {"DataType": "FLOAT32", "Sizes": [-1, 1, 4, 4]}}
    r = await any_client.post("/v1/operators", json={"name": name, "operator": descriptor})
    assert r.status_code == 201, r.text
    reg = r.json()
    assert reg["name"] == name
    assert reg["operator"]["OutputTensor"] == {"DataType": "FLOAT32", "Sizes": [-1, 1, 8, 10]}
    assert reg["operator"]["PaddingMode"] == "REFLECTION"

    again = await any_client.post("/v1/operators", json={"name": name, "operator": descriptor})
    assert again.status_code == 200 and again.json() == reg

    listed = (await any_client.get("/v1/operators")).json()["operators"]
    assert reg in listed
    assert (await any_client.get(f"/v1/operators/{name}")).json() == reg

    # A -1 batch: two different batch sizes through the same registration.
    for batch in (1, 3):
        x = np.random.default_rng(batch).standard_normal((batch, 1, 4, 4)).astype(np.float32)
        body, headers = execute_request(None, {"InputTensor": x}, "binary")
        r = await any_client.post(f"/v1/operators/{name}/execute", content=body, headers=headers)
        assert r.status_code == 200, r.text
        _, out = read_outputs(r.content, r.headers)
        expected = np.pad(x, [(0, 0), (0, 0), (1, 3), (2, 4)], mode="reflect")
        np.testing.assert_array_equal(out["OutputTensor"], expected, strict=True)

    gone = await any_client.delete(f"/v1/operators/{name}")
    assert gone.status_code == 200 and gone.json() == reg
    assert (await any_client.get(f"/v1/operators/{name}")).status_code == 404


async def test_generated_name_is_stable_for_the_same_descriptor(
    any_client: httpx.AsyncClient,
) -> None:
    descriptor = {
        "type": "UNFOLD",
        "WindowSizes": [2, 2],
        "InputTensor": {"DataType": "UINT8", "Sizes": [1, 2, 3, 3]},
    }
    first = await any_client.post("/v1/operators", json={"operator": descriptor})
    assert first.status_code in (200, 201), first.text
    name = first.json()["name"]
    assert name.startswith("unfold-")
    second = await any_client.post("/v1/operators", json={"operator": descriptor})
    assert second.status_code == 200 and second.json()["name"] == name
    assert first.json()["operator"]["OutputTensor"]["Sizes"] == [1, 8, 4]


async def test_v2_server_and_health(any_client: httpx.AsyncClient) -> None:
    meta = (await any_client.get("/v2")).json()
    assert meta["name"] == "dmlserve" and "binary_tensor_data" in meta["extensions"]
    assert (await any_client.get("/v2/health/live")).json() == {"live": True}
    ready = await any_client.get("/v2/health/ready")
    assert ready.status_code == 200 and ready.json() == {"ready": True}


async def test_v2_model_metadata_ready_and_infer(any_client: httpx.AsyncClient) -> None:
    name = _unique("conv")
    descriptor = {
        "type": "CONVOLUTION_INTEGER",
        "InputTensor": {"DataType": "UINT8", "Sizes": [-1, 2, 5, 5]},
        "FilterTensor": {"DataType": "INT8", "Sizes": [3, 2, 3, 3]},
        "StartPadding": [1, 1],
        "EndPadding": [1, 1],
    }
    r = await any_client.post("/v1/operators", json={"name": name, "operator": descriptor})
    assert r.status_code == 201, r.text
    meta = (await any_client.get(f"/v2/models/{name}")).json()
    assert meta == (await any_client.get(f"/v2/models/{name}/versions/1")).json()
    assert meta["inputs"] == [
        {"name": "InputTensor", "datatype": "UINT8", "shape": [-1, 2, 5, 5]},
        {"name": "FilterTensor", "datatype": "INT8", "shape": [3, 2, 3, 3]},
    ]
    assert meta["outputs"] == [
        {"name": "OutputTensor", "datatype": "INT32", "shape": [-1, 3, 5, 5]}
    ]
    assert (await any_client.get(f"/v2/models/{name}/ready")).status_code == 200
    assert (await any_client.get(f"/v2/models/{name}/versions/1/ready")).status_code == 200
    assert (await any_client.get(f"/v2/models/{name}/versions/7/ready")).status_code == 404

    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (2, 2, 5, 5), dtype=np.uint8)
    w = rng.integers(-128, 128, (3, 2, 3, 3), dtype=np.int8)
    req = {
        "id": "req-42",
        "inputs": [
            {"name": "InputTensor", "shape": [2, 2, 5, 5], "datatype": "UINT8",
             "data": x.reshape(-1).tolist()},
            {"name": "FilterTensor", "shape": [3, 2, 3, 3], "datatype": "INT8",
             "data": w.reshape(-1).tolist()},
        ],
    }  # fmt: skip
    r = await any_client.post(f"/v2/models/{name}/infer", json=req)
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["id"] == "req-42" and doc["model_name"] == name
    (out,) = doc["outputs"]
    assert out["name"] == "OutputTensor" and out["datatype"] == "INT32"
    assert out["shape"] == [2, 3, 5, 5]
    # Independent check: zero-padded correlation in int64.
    xp = np.pad(x.astype(np.int64), [(0, 0), (0, 0), (1, 1), (1, 1)])
    ref = np.zeros((2, 3, 5, 5), np.int64)
    for i in range(5):
        for j in range(5):
            ref[:, :, i, j] = np.einsum("nckl,mckl->nm", xp[:, :, i : i + 3, j : j + 3], w)
    np.testing.assert_array_equal(np.asarray(out["data"]).reshape(2, 3, 5, 5), ref)


async def test_metrics_and_docs(any_client: httpx.AsyncClient) -> None:
    x = np.ones((1, 1, 2, 2), np.float32)
    body, headers = execute_request(PADDING_OP, {"InputTensor": x})
    assert (await any_client.post("/v1/execute", content=body, headers=headers)).status_code == 200
    text = (await any_client.get("/metrics")).text
    for name in (
        "nv_inference_request_success",
        "nv_inference_count",
        "nv_inference_queue_duration_us",
        "nv_inference_compute_infer_duration_us",
        "nv_inference_pending_request_count",
        "dmlserve_requests_total",
        "dmlserve_stage_duration_seconds_bucket",
        "dmlserve_inflight_requests",
        "dmlserve_queued_requests",
        "dmlserve_gpu_memory_used_bytes",
    ):
        assert name in text, name
    assert 'dmlserve_requests_total{operator="PADDING",status="200"}' in text
    openapi = (await any_client.get("/openapi.json")).json()
    assert "/v1/execute" in openapi["paths"] and "/v2/models/{name}/infer" in openapi["paths"]
    assert "ExecuteRequest" in openapi["components"]["schemas"]
    page = (await any_client.get("/docs")).text
    assert "/docs/static/swagger-ui-bundle.js" in page and "cdn" not in page.lower()
    js = await any_client.get("/docs/static/swagger-ui-bundle.js")
    assert js.status_code == 200 and len(js.content) > 100_000
