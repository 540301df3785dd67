"""A broken rule is reported where the request put the field: a tensor sent under `inputs` at
`inputs.<name>` (`/v2`: `inputs.<index>`), a descriptor field at `operator.<field>`."""

from __future__ import annotations

from typing import Any

import httpx

UNFOLD = {"type": "UNFOLD", "WindowSizes": [2, 2]}
LAYOUT = "{ BatchCount, ChannelCount, spatial... }"


def _tensor(sizes: list[int], dtype: str = "FLOAT32") -> dict[str, Any]:
    count = 1
    for s in sizes:
        count *= s
    return {"DataType": dtype, "Sizes": sizes, "data": [0] * count}


async def _problem(client: httpx.AsyncClient, path: str, body: dict[str, Any]) -> list[Any]:
    r = await client.post(path, json=body)
    assert r.status_code == 422, r.text
    assert r.headers["content-type"] == "application/problem+json"
    errors: list[Any] = r.json()["errors"]
    return errors


async def test_a_2d_input_is_told_the_layout_at_inputs(any_client: httpx.AsyncClient) -> None:
    body = {"operator": UNFOLD, "inputs": {"InputTensor": _tensor([3, 3])}}
    (error,) = await _problem(any_client, "/v1/execute", body)
    assert error["loc"] == ["inputs", "InputTensor", "Sizes"]
    assert f"UNFOLD's InputTensor is {LAYOUT}" in error["msg"]
    assert "Sizes [1, 1, 3, 3]" in error["msg"]
    assert "DimensionCount" not in error["msg"]


async def test_a_tensor_described_in_the_operator_is_reported_there(
    any_client: httpx.AsyncClient,
) -> None:
    operator = {**UNFOLD, "InputTensor": {"DataType": "FLOAT32", "Sizes": [3, 3]}}
    body = {"operator": operator, "inputs": {"InputTensor": _tensor([3, 3])}}
    (error,) = await _problem(any_client, "/v1/execute", body)
    assert error["loc"] == ["operator", "InputTensor", "Sizes"]


async def test_an_inferred_shape_rule_points_at_the_input_axis(
    any_client: httpx.AsyncClient,
) -> None:
    fold = {
        "type": "FOLD",
        "WindowSizes": [2, 2],
        "OutputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 3, 3]},
    }
    body = {"operator": fold, "inputs": {"InputTensor": _tensor([1, 3, 4])}}
    errors = await _problem(any_client, "/v1/execute", body)
    assert [e["loc"] for e in errors] == [["inputs", "InputTensor", "Sizes", 1]]


async def test_descriptor_fields_and_unknown_inputs(any_client: httpx.AsyncClient) -> None:
    body = {
        "operator": {**UNFOLD, "Strides": [1]},
        "inputs": {"InputTensor": _tensor([1, 1, 3, 3])},
    }
    errors = await _problem(any_client, "/v1/execute", body)
    assert [e["loc"] for e in errors] == [["operator", "Strides"]]
    body = {"operator": UNFOLD, "inputs": {"Input": _tensor([1, 1, 3, 3])}}
    locs = [e["loc"] for e in await _problem(any_client, "/v1/execute", body)]
    assert ["inputs", "Input"] in locs


async def test_a_registered_operator_reports_the_request_tensor(
    any_client: httpx.AsyncClient,
) -> None:
    operator = {**UNFOLD, "InputTensor": {"DataType": "FLOAT32", "Sizes": [-1, 1, 3, 3]}}
    r = await any_client.post("/v1/operators", json={"name": "loc-unfold", "operator": operator})
    assert r.status_code in (200, 201), r.text
    body = {"inputs": {"InputTensor": _tensor([1, 1, 4, 4])}}
    (error,) = await _problem(any_client, "/v1/operators/loc-unfold/execute", body)
    assert error["loc"] == ["inputs", "InputTensor", "Sizes"]

    infer = {"inputs": [{"name": "InputTensor", "datatype": "FP32", "shape": [1, 1, 4, 4],
                         "data": [0] * 16}]}  # fmt: skip
    r = await any_client.post("/v2/models/loc-unfold/infer", json=infer)
    assert r.status_code == 422
    assert r.json()["error"].startswith("inputs.0.Sizes: the InputTensor tensor has Sizes")
    await any_client.delete("/v1/operators/loc-unfold")
