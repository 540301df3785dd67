"""Wire encodings: strides, b64/binary byte checks, gzip/deflate bodies, tritonclient quirks."""

from __future__ import annotations

import base64
import gzip
import zlib

import httpx
import numpy as np
import orjson
import pytest

from dmlserve.kernels.dtypes import DataType
from tests.service.helpers import PADDING_OP, execute_request, read_outputs

EDGE = {**PADDING_OP, "PaddingMode": "EDGE"}


def _pad_edge(x: np.ndarray) -> np.ndarray:
    return np.pad(x, [(0, 0), (0, 0), (1, 3), (2, 4)], mode="edge")


@pytest.mark.parametrize("dt", list(DataType), ids=str)
async def test_every_data_type_round_trips_exactly(client: httpx.AsyncClient, dt: DataType) -> None:
    info = np.iinfo(dt.numpy) if dt.is_integer else np.finfo(dt.numpy)
    mid = info.max // 2 if dt.is_integer else 0.5
    values = np.array([info.min, info.max, 0, 1, mid], dtype=dt.numpy)
    x = np.resize(values, 16).reshape(1, 1, 4, 4)
    assert x.max() == info.max and x.min() == info.min
    for encoding in ("json", "b64", "binary"):
        body, headers = execute_request(EDGE, {"InputTensor": x}, encoding)
        r = await client.post("/v1/execute", content=body, headers=headers)
        assert r.status_code == 200, r.text
        doc, out = read_outputs(r.content, r.headers)
        assert doc["outputs"]["OutputTensor"]["DataType"] == dt.value
        np.testing.assert_array_equal(out["OutputTensor"], _pad_edge(x), strict=True)


async def test_strides_address_a_flat_buffer(client: httpx.AsyncClient) -> None:
    # Logical (1, 1, 3, 4) NCHW from a transposed buffer, and a 0-stride broadcast row.
    buf = np.arange(12, dtype=np.float32)
    cases = [
        ([1, 1, 3, 4], [12, 12, 1, 3], buf.reshape(4, 3).T.reshape(1, 1, 3, 4), buf),
        ([1, 1, 3, 4], [0, 0, 0, 1], np.broadcast_to(buf[:4], (1, 1, 3, 4)), buf[:4]),
    ]
    for sizes, strides, logical, flat in cases:
        for payload in ("data", "b64"):
            tensor = {"DataType": "FLOAT32", "Sizes": sizes, "Strides": strides}
            if payload == "data":
                tensor["data"] = flat.tolist()
            else:
                tensor["b64"] = base64.b64encode(flat.tobytes()).decode()
            req = {"operator": EDGE, "inputs": {"InputTensor": tensor}}
            r = await client.post("/v1/execute", json=req)
            assert r.status_code == 200, r.text
            _, out = read_outputs(r.content, r.headers)
            np.testing.assert_array_equal(out["OutputTensor"], _pad_edge(logical))
    # A buffer too short for the strides is a 422, never a read past the end.
    short = {
        "DataType": "FLOAT32",
        "Sizes": [1, 1, 3, 4],
        "Strides": [12, 12, 1, 3],
        "data": [1] * 11,
    }
    r = await client.post("/v1/execute", json={"operator": EDGE, "inputs": {"InputTensor": short}})
    assert r.status_code == 422


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "raw-deflate"])
async def test_compressed_request_bodies(client: httpx.AsyncClient, encoding: str) -> None:
    x = np.arange(16, dtype=np.int32).reshape(1, 1, 4, 4)
    for framing in ("json", "binary"):
        body, headers = execute_request(EDGE, {"InputTensor": x}, framing)
        if encoding == "gzip":
            packed = gzip.compress(body)
        elif encoding == "deflate":
            packed = zlib.compress(body)
        else:
            c = zlib.compressobj(wbits=-15)
            packed = c.compress(body) + c.flush()
        name = "gzip" if encoding == "gzip" else "deflate"
        r = await client.post(
            "/v1/execute", content=packed, headers={**headers, "Content-Encoding": name}
        )
        assert r.status_code == 200, r.text
        _, out = read_outputs(r.content, r.headers)
        np.testing.assert_array_equal(out["OutputTensor"], _pad_edge(x))


async def test_decoded_size_counts_against_the_limit() -> None:
    from tests.service.conftest import app_client

    async with app_client(max_request_bytes=4096) as c:
        x = np.zeros((1, 1, 40, 40), np.float32)  # 6400 bytes, compresses to very little
        body, headers = execute_request(EDGE, {"InputTensor": x}, "binary")
        packed = gzip.compress(body)
        assert len(packed) < 4096
        r = await c.post(
            "/v1/execute", content=packed, headers={**headers, "Content-Encoding": "gzip"}
        )
        assert r.status_code == 413 and "max_request_bytes" in r.json()["detail"]
        bomb = gzip.compress(b"\0" * (64 << 20))  # 64 MiB of zeros in ~64 KiB
        r = await c.post("/v1/execute", content=bomb[:4000], headers={"Content-Encoding": "gzip"})
        assert r.status_code == 413


async def test_gzip_responses_only_when_asked_and_never_brotli(client: httpx.AsyncClient) -> None:
    x = np.zeros((1, 1, 64, 64), np.float32)
    body, headers = execute_request(EDGE, {"InputTensor": x}, "json")
    plain = await client.post(
        "/v1/execute", content=body, headers={**headers, "Accept-Encoding": "identity"}
    )
    assert "content-encoding" not in plain.headers
    br = await client.post(
        "/v1/execute", content=body, headers={**headers, "Accept-Encoding": "br"}
    )
    assert "content-encoding" not in br.headers
    gz = await client.post(
        "/v1/execute", content=body, headers={**headers, "Accept-Encoding": "gzip, br"}
    )
    assert gz.headers["content-encoding"] == "gzip"
    assert orjson.loads(gz.content) == orjson.loads(plain.content)  # httpx decoded it


async def test_json_body_without_content_type_and_as_octet_stream(
    client: httpx.AsyncClient,
) -> None:
    # tritonclient's sync client sends no Content-Type; its aio client says octet-stream.
    x = np.ones((1, 1, 2, 2), np.uint16)
    body, _ = execute_request(EDGE, {"InputTensor": x}, "json")
    for headers in ({}, {"Content-Type": "application/octet-stream"}):
        r = await client.post("/v1/execute", content=body, headers=headers)
        assert r.status_code == 200, r.text


async def test_payload_rules(client: httpx.AsyncClient) -> None:
    def post(tensor: dict) -> object:
        return client.post(
            "/v1/execute", json={"operator": EDGE, "inputs": {"InputTensor": tensor}}
        )

    base = {"DataType": "INT8", "Sizes": [1, 1, 2, 2]}
    cases = {
        "two payloads": {**base, "data": [1, 2, 3, 4], "b64": "AQIDBA=="},
        "no payload": base,
        "count": {**base, "data": [1, 2, 3]},
        "range": {**base, "data": [1, 2, 3, 300]},
        "fraction": {**base, "data": [1, 2, 3, 4.5]},
        "strings": {**base, "data": ["a", "b", "c", "d"]},
        "ragged": {**base, "data": [[1, 2], [3]]},
        "bad b64": {**base, "b64": "%%%"},
        "b64 length": {**base, "b64": "AQID"},
        "zero size": {"DataType": "INT8", "Sizes": [1, 0, 2, 2], "data": []},
        "negative size": {"DataType": "INT8", "Sizes": [1, -1, 2, 2], "data": [1]},
        "data type": {"DataType": "BFLOAT16", "Sizes": [1, 1, 2, 2], "data": [1, 2, 3, 4]},
        "rank": {"DataType": "INT8", "Sizes": [1] * 9, "data": [1]},
        "strides length": {**base, "Strides": [1, 1], "data": [1, 2, 3, 4]},
        "negative stride": {**base, "Strides": [4, 4, -2, 1], "data": [1, 2, 3, 4]},
        "unknown field": {**base, "data": [1, 2, 3, 4], "Extra": 1},
    }
    for what, tensor in cases.items():
        r = await post(tensor)  # type: ignore[misc]
        assert r.status_code == 422, (what, r.text)  # type: ignore[attr-defined]
    ok = await post({**base, "data": [1.0, -2.0, 3, 4]})  # integral floats are accepted
    assert ok.status_code == 200  # type: ignore[attr-defined]


@pytest.mark.parametrize("encoding", ["json", "b64"])
async def test_large_bodies_decode_and_encode_off_the_event_loop(
    any_client: httpx.AsyncClient, encoding: str
) -> None:
    # Over 1 MiB of JSON numbers / base64 in and out: the worker-thread paths.
    x = np.random.default_rng(3).standard_normal((1, 2, 300, 400)).astype(np.float32)
    body, headers = execute_request(EDGE, {"InputTensor": x}, encoding)
    assert len(body) > 1 << 20
    r = await any_client.post("/v1/execute", content=body, headers=headers)
    assert r.status_code == 200, r.text
    _, out = read_outputs(r.content, r.headers)
    np.testing.assert_array_equal(out["OutputTensor"], _pad_edge(x))
