"""`DirectRoutes`: the operator endpoints' POSTs answered as FastAPI's router answers them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import numpy as np
from fastapi import APIRouter

from dmlserve.service import Settings, create_app
from tests.service.helpers import PADDING_OP, execute_request

KEY = "k-123"


@asynccontextmanager
async def _client(direct: bool) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(Settings(backend="numpy", warmup=False, api_keys=(KEY,)))
    if not direct:
        app.direct = None  # type: ignore[attr-defined]
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        auth = {"Authorization": f"Bearer {KEY}"}
        async with httpx.AsyncClient(transport=transport, base_url="http://t", headers=auth) as c:
            yield c


def _requests() -> list[tuple[str, str, dict[str, Any]]]:
    x = np.arange(8, dtype=np.float32).reshape(1, 1, 2, 4)
    json_body, json_headers = execute_request(PADDING_OP, {"InputTensor": x}, "json")
    framed, framed_headers = execute_request(PADDING_OP, {"InputTensor": x}, "binary")
    model = {**PADDING_OP, "InputTensor": {"DataType": "FLOAT32", "Sizes": [-1, 1, 2, 4]}}
    by_name, by_name_headers = execute_request(None, {"InputTensor": x}, "json")
    infer = {"inputs": [{"name": "InputTensor", "shape": [1, 1, 2, 4], "datatype": "FP32",
                         "data": x.ravel().tolist()}]}  # fmt: skip
    return [
        ("POST", "/v1/operators", {"json": {"name": "pad", "operator": model}}),
        ("POST", "/v1/execute", {"content": json_body, "headers": json_headers}),
        ("POST", "/v1/execute", {"content": framed, "headers": framed_headers}),
        ("POST", "/v1/execute", {"content": b"{", "headers": json_headers}),
        ("POST", "/v1/execute", {"content": json_body, "headers": {"Authorization": "Bearer x"}}),
        ("POST", "/v1/execute", {"content": json_body, "headers": {"Content-Type": "text/csv"}}),
        ("POST", "/v1/execute", {"json": {"operator": {"type": "FOLD"}, "inputs": {}}}),
        ("POST", "/v1/operators/pad/execute", {"content": by_name, "headers": by_name_headers}),
        ("POST", "/v1/operators/nope/execute", {"content": by_name, "headers": by_name_headers}),
        ("POST", "/v2/models/pad/infer", {"json": infer}),
        ("POST", "/v2/models/pad/versions/1/infer", {"json": infer}),
        ("POST", "/v2/models/pad/versions/2/infer", {"json": infer}),
        ("POST", "/v2/models/pad/infer", {"json": {"inputs": "no"}}),
        ("POST", "/v1/execute/", {"content": json_body, "headers": json_headers}),
        ("GET", "/v1/execute", {}),
        ("PUT", "/v2/models/pad/infer", {"json": infer}),
    ]


def _comparable(r: httpx.Response) -> tuple[int, dict[str, str], bytes]:
    headers = {k: v for k, v in r.headers.items() if k not in ("x-request-id", "date")}
    return r.status_code, headers, r.content


async def test_the_same_answers_with_and_without_the_direct_dispatch(monkeypatch: Any) -> None:
    routed: dict[bool, list[str]] = {True: [], False: []}
    answers: dict[bool, list[tuple[int, dict[str, str], bytes]]] = {}
    original = APIRouter.__call__
    for direct in (True, False):

        async def counting(self: APIRouter, scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http":
                routed[direct].append(f"{scope['method']} {scope['path']}")  # noqa: B023
            await original(self, scope, receive, send)

        monkeypatch.setattr(APIRouter, "__call__", counting)
        async with _client(direct) as c:
            answers[direct] = [
                _comparable(await c.request(m, path, **kw)) for m, path, kw in _requests()
            ]
    assert answers[True] == answers[False]
    statuses = [status for status, _, _ in answers[True]]
    assert statuses == [201, 200, 200, 400, 401, 415, 422, 200, 404, 200, 200, 404, 422, 307,
                        405, 405]  # fmt: skip
    # FastAPI's router saw every request without the dispatch, and only these with it:
    assert len(routed[False]) == len(_requests())
    assert routed[True] == ["POST /v1/operators", "POST /v1/execute/", "GET /v1/execute",
                            "PUT /v2/models/pad/infer"]  # fmt: skip
