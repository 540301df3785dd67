"""Strided tensors over HTTP: a buffer may be longer than what its Strides address (a row
pitch), never shorter, and all of its bytes count against the tensor limit."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import orjson
import pytest

from tests.service.conftest import ServerProcess
from tests.service.helpers import PADDING_OP, read_outputs

EDGE = {**PADDING_OP, "PaddingMode": "EDGE"}
PITCH = 6  # elements from one row's start to the next: 4 used, 2 of padding
SIZES, STRIDES = [1, 1, 3, 4], [3 * PITCH, 3 * PITCH, PITCH, 1]
EXTENT = 2 * PITCH + 3 + 1  # the addressed elements, first to last


def _request(buffer: np.ndarray, payload: str) -> tuple[bytes, dict[str, str]]:
    tensor: dict[str, Any] = {"DataType": "FLOAT32", "Sizes": SIZES, "Strides": STRIDES}
    raw = buffer.astype("<f4").tobytes()
    if payload == "data":
        tensor["data"] = buffer.tolist()
    elif payload == "b64":
        tensor["b64"] = base64.b64encode(raw).decode()
    else:
        tensor["parameters"] = {"binary_data_size": len(raw)}
    header = orjson.dumps({"operator": EDGE, "inputs": {"InputTensor": tensor}})
    if payload != "binary":
        return header, {"Content-Type": "application/json"}
    framing = {"Inference-Header-Content-Length": str(len(header))}
    return header + raw, {"Content-Type": "application/octet-stream", **framing}


def _expected(buffer: np.ndarray) -> np.ndarray:
    # The oracle reads the rows by hand, not through strides.
    rows = np.stack([buffer[r * PITCH : r * PITCH + 4] for r in range(3)]).reshape(1, 1, 3, 4)
    return np.pad(rows, [(0, 0), (0, 0), (1, 3), (2, 4)], mode="edge")


@pytest.mark.parametrize("payload", ["data", "b64", "binary"])
async def test_a_row_pitch_buffer_longer_than_its_extent_is_read(
    any_client: httpx.AsyncClient, payload: str
) -> None:
    for length in (EXTENT, 3 * PITCH, 3 * PITCH + 5):  # exact, padded last row, a tail beyond
        buffer = np.arange(length, dtype=np.float32) * 1.5
        body, headers = _request(buffer, payload)
        r = await any_client.post("/v1/execute", content=body, headers=headers)
        assert r.status_code == 200, (length, r.text)
        _, out = read_outputs(r.content, r.headers)
        np.testing.assert_array_equal(out["OutputTensor"], _expected(buffer))


@pytest.mark.parametrize(("payload", "status"), [("data", 422), ("b64", 422), ("binary", 400)])
async def test_a_buffer_shorter_than_its_extent_is_refused(
    any_client: httpx.AsyncClient, payload: str, status: int
) -> None:
    body, headers = _request(np.zeros(EXTENT - 1, np.float32), payload)
    r = await any_client.post("/v1/execute", content=body, headers=headers)
    assert r.status_code == status, r.text
    assert f"{EXTENT}" in r.json()["detail"] or f"{EXTENT * 4}" in r.json()["detail"]


@pytest.fixture(scope="module")
def small_tensors() -> Iterator[ServerProcess]:
    # The extent is 64 bytes; 128 bytes leaves room for a pitch, not for a long tail.
    srv = ServerProcess("--max-tensor-bytes", "128")
    try:
        yield srv
    finally:
        srv.stop()
        Path(srv.log.name).unlink(missing_ok=True)


@pytest.mark.parametrize("payload", ["data", "b64", "binary"])
def test_every_byte_of_the_buffer_counts_against_the_limit(
    small_tensors: ServerProcess, payload: str
) -> None:
    with httpx.Client(base_url=small_tensors.url, timeout=30) as client:
        under = _request(np.ones(32, np.float32), payload)  # 128 bytes
        r = client.post("/v1/execute", content=under[0], headers=under[1])
        assert r.status_code == 200, r.text
        over = _request(np.ones(33, np.float32), payload)  # 132 bytes, extent still 64
        r = client.post("/v1/execute", content=over[0], headers=over[1])
        assert r.status_code == 413, r.text
        assert "max_tensor_bytes" in r.json()["detail"]
