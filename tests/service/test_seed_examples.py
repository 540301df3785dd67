"""Every seed-page example through `/v1/execute`, in JSON, b64 and binary encodings."""

from __future__ import annotations

import httpx
import numpy as np
import pytest

from kernels.dtypes import DataType
from tests.service.helpers import execute_request, read_outputs
from tests.service.seeds import SeedExample, seed_examples

EXAMPLES = seed_examples()


@pytest.mark.parametrize("encoding", ["json", "b64", "binary"])
@pytest.mark.parametrize("example", EXAMPLES, ids=[e.id for e in EXAMPLES])
async def test_seed_example(client: httpx.AsyncClient, example: SeedExample, encoding: str) -> None:
    dtype = DataType(example.data_type).numpy
    x = np.asarray(example.input_values, dtype).reshape(example.input_sizes)
    body, headers = execute_request(example.operator, {"InputTensor": x}, encoding)
    r = await client.post("/v1/execute", content=body, headers=headers)
    assert r.status_code == 200, r.text
    doc, outputs = read_outputs(r.content, r.headers)
    assert doc["backend"] == "numpy"
    expected = np.asarray(example.output_values, dtype).reshape(example.output_sizes)
    np.testing.assert_array_equal(outputs["OutputTensor"], expected)
    # Without output_encoding the response uses the request's encoding.
    entry = doc["outputs"]["OutputTensor"]
    key = {"json": "data", "b64": "b64", "binary": "parameters"}[encoding]
    assert key in entry
    assert entry["Sizes"] == example.output_sizes
