"""One test per status code of DESIGN.md's table, with the error shape of each API version."""

from __future__ import annotations

import asyncio
import threading

import httpx
import numpy as np
import pytest

from dmlserve.service import Settings, create_app
from dmlserve.service.work import Timings
from tests.service.conftest import app_client
from tests.service.helpers import PADDING_OP, execute_request, slow_pooling

PROBLEM_KEYS = {"type", "title", "status", "detail", "errors"}


def assert_problem(r: httpx.Response, status: int) -> dict:
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/problem+json"
    doc = r.json()
    assert set(doc) == PROBLEM_KEYS and doc["status"] == status
    return doc


def assert_v2_error(r: httpx.Response, status: int) -> str:
    assert r.status_code == status, r.text
    doc = r.json()
    assert set(doc) == {"error"} and isinstance(doc["error"], str) and doc["error"]
    return doc["error"]


async def test_200(client: httpx.AsyncClient) -> None:
    body, headers = execute_request(PADDING_OP, {"InputTensor": np.ones((1, 1, 2, 2), np.uint8)})
    r = await client.post("/v1/execute", content=body, headers=headers)
    assert r.status_code == 200


async def test_400_invalid_json(client: httpx.AsyncClient) -> None:
    r = await client.post(
        "/v1/execute", content=b'{"operator": ', headers={"content-type": "application/json"}
    )
    assert "JSON" in assert_problem(r, 400)["detail"]
    r = await client.post("/v2/models/x/infer", content=b"[1,")
    # The model does not exist either; the name is checked first.
    assert_v2_error(r, 404)


async def test_400_inconsistent_binary_framing(client: httpx.AsyncClient) -> None:
    x = np.ones((1, 1, 2, 2), np.float32)
    body, headers = execute_request(PADDING_OP, {"InputTensor": x}, "binary")
    for cut in (1, 8):
        r = await client.post("/v1/execute", content=body[:-cut], headers=headers)
        assert_problem(r, 400)
    r = await client.post("/v1/execute", content=body + b"xx", headers=headers)
    assert_problem(r, 400)
    too_long = {**headers, "Inference-Header-Content-Length": str(len(body) + 1)}
    assert_problem(await client.post("/v1/execute", content=body, headers=too_long), 400)
    bad = {**headers, "Inference-Header-Content-Length": "abc"}
    assert_problem(await client.post("/v1/execute", content=body, headers=bad), 400)


async def test_401_when_keys_are_set() -> None:
    async with app_client(api_keys="k1,k2") as c:
        body, headers = execute_request(PADDING_OP, {"InputTensor": np.ones((1, 1, 2, 2), np.int8)})
        r = await c.post("/v1/execute", content=body, headers=headers)
        assert_problem(r, 401)
        assert r.headers["www-authenticate"] == "Bearer"
        wrong = {**headers, "Authorization": "Bearer nope"}
        assert_problem(await c.post("/v1/execute", content=body, headers=wrong), 401)
        assert_v2_error(await c.get("/v2/models/x", headers={"Authorization": "Basic k1"}), 401)
        assert_v2_error(await c.get("/v2"), 401)
        for key in ("k1", "k2"):
            ok = {**headers, "Authorization": f"Bearer {key}"}
            assert (await c.post("/v1/execute", content=body, headers=ok)).status_code == 200
        # Health, metrics and docs stay open.
        for path in ("/v2/health/live", "/v2/health/ready", "/metrics", "/docs", "/openapi.json"):
            assert (await c.get(path)).status_code == 200, path


async def test_404(client: httpx.AsyncClient) -> None:
    assert "nope" in assert_problem(await client.get("/v1/operators/nope"), 404)["detail"]
    assert_problem(await client.delete("/v1/operators/nope"), 404)
    assert_problem(await client.post("/v1/operators/nope/execute", json={"inputs": {}}), 404)
    assert_v2_error(await client.get("/v2/models/nope"), 404)
    assert_v2_error(await client.get("/v2/models/nope/ready"), 404)
    assert_v2_error(await client.post("/v2/models/nope/infer", json={"inputs": []}), 404)
    # The framework's own 404 and 405 render in the same shapes.
    assert_problem(await client.get("/v1/nothing-here"), 404)
    assert_v2_error(await client.get("/v2/nothing-here"), 404)
    assert_problem(await client.get("/v1/execute"), 405)
    assert_v2_error(await client.put("/v2/health/live"), 405)


async def test_413_request_body_over_limit() -> None:
    async with app_client(max_request_bytes=1000) as c:
        x = np.ones((1, 1, 20, 20), np.float32)  # 1600 bytes
        body, headers = execute_request(PADDING_OP, {"InputTensor": x}, "binary")
        doc = assert_problem(await c.post("/v1/execute", content=body, headers=headers), 413)
        assert "max_request_bytes" in doc["detail"]


async def test_413_tensor_over_limit() -> None:
    async with app_client(max_tensor_bytes=1024) as c:
        x = np.ones((1, 1, 20, 20), np.float32)
        body, headers = execute_request(PADDING_OP, {"InputTensor": x}, "b64")
        doc = assert_problem(await c.post("/v1/execute", content=body, headers=headers), 413)
        assert "max_tensor_bytes" in doc["detail"]


async def test_413_output_over_limit_before_allocation(client: httpx.AsyncClient) -> None:
    # UNFOLD of a 1000x1000 image with a 30x30 window would be ~3.4 GB: refused before any
    # allocation (the default limit is 1 GiB), and quickly.
    x = np.zeros((1, 1, 1000, 1000), np.float32)
    body, headers = execute_request(
        {"type": "UNFOLD", "WindowSizes": [30, 30]}, {"InputTensor": x}, "binary"
    )
    r = await asyncio.wait_for(client.post("/v1/execute", content=body, headers=headers), 10)
    doc = assert_problem(r, 413)
    assert "max_output_bytes" in doc["detail"] and "OutputTensor" in doc["detail"]


async def test_415_unsupported_content_type(client: httpx.AsyncClient) -> None:
    for ctype in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data"):
        r = await client.post("/v1/execute", content=b"{}", headers={"content-type": ctype})
        assert_problem(r, 415)
    r = await client.post(
        "/v1/execute",
        content=b"{}",
        headers={"content-encoding": "br", "content-type": "application/json"},
    )
    assert_problem(r, 415)


async def test_422_names_the_field_and_rule(client: httpx.AsyncClient) -> None:
    op = {"type": "UNFOLD", "WindowSizes": [3, 3], "Strides": [0, 1]}
    body, headers = execute_request(op, {"InputTensor": np.ones((1, 1, 4, 4), np.float32)})
    doc = assert_problem(await client.post("/v1/execute", content=body, headers=headers), 422)
    assert any("Strides" in e["loc"] for e in doc["errors"]), doc
    assert "Strides" in doc["detail"]
    # The framework's request validation (a bad path parameter type is impossible here, so a
    # wrong body type) is a 422 too.
    r = await client.post("/v1/operators", json={"operator": "PADDING"})
    assert_problem(r, 422)
    r = await client.post("/v1/operators", json={"name": "a/b", "operator": PADDING_OP})
    assert_problem(r, 422)


async def test_429_when_the_queue_is_full() -> None:
    async with app_client(backend="numpy", max_concurrency=1, max_queue=0, retry_after_s=2) as c:
        # Hold the only compute slot with work that waits for the test (not with work that is
        # merely slow: how slow depends on the machine).
        limiter = c.app.state.dmlserve.limiter  # type: ignore[attr-defined]
        gate = threading.Event()
        holder = asyncio.create_task(limiter.run(gate.wait, 60, Timings()))
        while limiter.running == 0:
            await asyncio.sleep(0)
        op, x = slow_pooling()
        body, headers = execute_request(op, {"InputTensor": x}, "binary")
        r = await c.post("/v1/execute", content=body, headers=headers)
        assert_problem(r, 429)
        assert r.headers["retry-after"] == "2"
        gate.set()
        await holder
        assert (await c.post("/v1/execute", content=body, headers=headers)).status_code == 200


async def test_503_until_started() -> None:
    app = create_app(Settings(backend="numpy"))  # lifespan never run: not ready
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://dmlserve") as c:
        r = await c.get("/v2/health/ready")
        assert_v2_error(r, 503)
        assert r.headers["retry-after"] == "1"
        assert (await c.get("/v2/health/live")).status_code == 200
        body, headers = execute_request(PADDING_OP, {"InputTensor": np.ones((1, 1, 2, 2), np.int8)})
        assert_problem(await c.post("/v1/execute", content=body, headers=headers), 503)


async def test_504_when_the_time_limit_passes() -> None:
    async with app_client(backend="numpy", request_timeout_s=0.2, max_concurrency=1) as c:
        # Hold the only compute slot with work that waits for the test, so the request cannot
        # finish within its limit however fast the machine is.
        state = c.app.state.dmlserve  # type: ignore[attr-defined]
        gate = threading.Event()
        holder = asyncio.create_task(state.limiter.run(gate.wait, 60, Timings()))
        while state.limiter.running == 0:
            await asyncio.sleep(0)
        body, headers = execute_request(PADDING_OP, {"InputTensor": np.ones((1, 1, 2, 2), np.int8)})
        doc = assert_problem(await c.post("/v1/execute", content=body, headers=headers), 504)
        assert "time limit" in doc["detail"]
        gate.set()
        await holder
        # The slot is free again and the server keeps serving.
        small, h = execute_request(PADDING_OP, {"InputTensor": np.ones((1, 1, 2, 2), np.int8)})
        assert (await c.post("/v1/execute", content=small, headers=h)).status_code == 200


@pytest.mark.parametrize("status", [404, 413, 422])
async def test_v2_errors_are_error_objects(client: httpx.AsyncClient, status: int) -> None:
    descriptor = {**PADDING_OP, "InputTensor": {"DataType": "FLOAT32", "Sizes": [-1, 1, 2, 2]}}
    r = await client.post("/v1/operators", json={"operator": descriptor})
    name = r.json()["name"]
    shape = [10**9, 1, 2, 2] if status == 413 else [1, 1, 2, 2]
    tensor = {"name": "InputTensor", "shape": shape, "datatype": "FP32", "data": [1]}
    version = "2" if status == 404 else "1"
    url = f"/v2/models/{name}/versions/{version}/infer"
    assert_v2_error(await client.post(url, json={"inputs": [tensor]}), status)


async def test_500_is_reserved_for_defects() -> None:
    # A route added here raises: the catch-all answers in the problem shape (and logs).
    app = create_app(Settings(backend="numpy"))

    @app.get("/v1/defect")
    async def defect() -> None:
        raise RuntimeError("a defect")

    @app.get("/v2/defect")
    async def defect_v2() -> None:
        raise RuntimeError("a defect")

    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://dmlserve") as c:
        doc = assert_problem(await c.get("/v1/defect"), 500)
        assert "bug" in doc["detail"] and "a defect" not in doc["detail"]
        assert_v2_error(await c.get("/v2/defect"), 500)
