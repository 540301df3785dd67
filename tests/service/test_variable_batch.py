"""Registered operators with a -1 batch: FOLD included, and errors located under `operator`."""

from __future__ import annotations

import numpy as np

from tests.service.conftest import app_client
from tests.service.helpers import execute_request, read_outputs
from tests.service.models import FOLD, expected_fold, fold_input


async def test_fold_registers_with_a_variable_batch_and_runs_any_batch() -> None:
    async with app_client() as client:
        r = await client.post("/v1/operators", json={"name": "fold", **FOLD})
        assert r.status_code == 201, r.text
        assert r.json()["operator"]["OutputTensor"]["Sizes"] == [-1, 3, 8, 8]
        for batch in (1, 3):
            x = fold_input(batch, seed=batch)
            body, headers = execute_request(None, {"InputTensor": x}, "binary")
            r = await client.post("/v1/operators/fold/execute", content=body, headers=headers)
            assert r.status_code == 200, r.text
            out = read_outputs(r.content, r.headers)[1]["OutputTensor"]
            np.testing.assert_array_equal(out, expected_fold(x))
        x = fold_input(2)
        infer = {"inputs": [{"name": "InputTensor", "shape": [2, 12, 16], "datatype": "FP32",
                             "data": x.reshape(-1).tolist()}]}  # fmt: skip
        r = await client.post("/v2/models/fold/infer", json=infer)
        out = r.json()["outputs"][0]
        assert out["shape"] == [2, 3, 8, 8]
        np.testing.assert_array_equal(np.reshape(out["data"], out["shape"]), expected_fold(x))


async def test_a_broken_registration_points_into_the_operator() -> None:
    async with app_client() as client:
        operator = {**FOLD["operator"], "OutputTensor": {"DataType": "FLOAT32",
                                                         "Sizes": [2, 3, 8, 8]}}  # fmt: skip
        r = await client.post("/v1/operators", json={"operator": operator})
        assert r.status_code == 422
        errors = r.json()["errors"]
        assert errors and all(e["loc"][0] == "operator" for e in errors), errors
        assert ["operator", "InputTensor", "Sizes", 0] in [e["loc"] for e in errors]
