"""Every seed-page example through `/v1/execute`, in JSON, b64 and binary encodings."""

from __future__ import annotations

import httpx
import numpy as np
import pytest

from tests.backend import TEST_BACKEND
from tests.seed_examples import SEED_EXAMPLES, SeedExample
from tests.service.helpers import execute_request, read_outputs


@pytest.mark.parametrize("encoding", ["json", "b64", "binary"])
@pytest.mark.parametrize("example", SEED_EXAMPLES, ids=[e.name for e in SEED_EXAMPLES])
async def test_seed_example(client: httpx.AsyncClient, example: SeedExample, encoding: str) -> None:
    body, headers = execute_request(example.operator, example.inputs, encoding)
    r = await client.post("/v1/execute", content=body, headers=headers)
    assert r.status_code == 200, r.text
    doc, outputs = read_outputs(r.content, r.headers)
    assert doc["backend"] == TEST_BACKEND
    np.testing.assert_array_equal(outputs["OutputTensor"], example.expected, strict=True)
    # Without output_encoding the response uses the request's encoding.
    entry = doc["outputs"]["OutputTensor"]
    key = {"json": "data", "b64": "b64", "binary": "parameters"}[encoding]
    assert key in entry
    assert entry["Sizes"] == list(example.expected.shape)
