"""Values on the wire: JSON numbers exact or refused by element, NaN and Infinity both ways,
text outputs bounded before they are built, and framing headers that must agree."""

from __future__ import annotations

import json

import httpx
import numpy as np
import pytest

from dmlserve.service.responses import ARRAY_PIECE
from tests.servers import ServerProcess
from tests.service.conftest import app_client
from tests.service.helpers import execute_request, read_outputs

COPY = {"type": "PADDING", "StartPadding": [0], "EndPadding": [0]}


def _json(doc: object) -> dict[str, object]:
    return {"content": json.dumps(doc).encode(), "headers": {"Content-Type": "application/json"}}


def _execute(tensor: dict[str, object], encoding: str = "json") -> dict[str, object]:
    return {"operator": COPY, "inputs": {"InputTensor": tensor}, "output_encoding": encoding}


# --- text outputs ----------------------------------------------------------------------------

CRASHED = {  # a 1 GiB INT8 output asked for as JSON numbers: it once took the process down
    "operator": {"type": "PADDING", "StartPadding": [0, 0], "EndPadding": [0, 0]},
    "output_encoding": "json",
    "inputs": {
        "InputTensor": {
            "DataType": "INT8",
            "Sizes": [32768, 32768],
            "Strides": [0, 0],
            "b64": "AQ==",
        }
    },
}


@pytest.mark.parametrize("encoding", ["json", "b64"])
@pytest.mark.parametrize("data_type", ["INT8", "FLOAT32"])
def test_huge_text_outputs_are_413_before_anything_runs(
    server: ServerProcess, encoding: str, data_type: str
) -> None:
    doc = json.loads(json.dumps(CRASHED))
    doc["output_encoding"] = encoding
    tensor = doc["inputs"]["InputTensor"]
    if data_type == "FLOAT32":  # a 1 GiB FLOAT32 output
        tensor.update(DataType="FLOAT32", Sizes=[16384, 16384], b64="AACAPw==")
    r = httpx.post(server.url + "/v1/execute", json=doc, timeout=60)
    assert r.status_code == 413, r.text
    problem = r.json()
    assert "max_text_output_bytes" in problem["detail"] and "binary" in problem["detail"]
    assert problem["errors"][0]["loc"] == ["output_encoding"]
    assert httpx.get(server.url + "/v2/health/live").status_code == 200


async def test_the_text_limit_is_the_longest_text_and_binary_is_not_bound_by_it() -> None:
    # INT8 at its longest is "-128," per element: 200 elements take at most 1001 bytes.
    async with app_client(max_text_output_bytes=1001) as c:
        x = np.full(200, -128, np.int8)
        for encoding, status in (("json", 200), ("b64", 200), ("binary", 200)):
            body, headers = execute_request(COPY, {"InputTensor": x}, "binary", encoding)
            r = await c.post("/v1/execute", content=body, headers=headers)
            assert r.status_code == status, r.text
            np.testing.assert_array_equal(read_outputs(r.content, r.headers)[1]["OutputTensor"], x)
        body, headers = execute_request(
            COPY, {"InputTensor": np.zeros(201, np.int8)}, "binary", "json"
        )
        assert (await c.post("/v1/execute", content=body, headers=headers)).status_code == 413
        for encoding in ("b64", "binary"):
            body, headers = execute_request(
                COPY, {"InputTensor": np.zeros(201, np.int8)}, "binary", encoding
            )
            assert (await c.post("/v1/execute", content=body, headers=headers)).status_code == 200


async def test_a_large_json_output_in_pieces_is_exact() -> None:
    # Several pieces of the text, non-finite values on the seams between them.
    x = np.linspace(-1e30, 1e30, 3 * ARRAY_PIECE + 7, dtype=np.float32)
    for i in (0, ARRAY_PIECE - 1, ARRAY_PIECE, 2 * ARRAY_PIECE, x.size - 1):
        x[i] = (np.nan, np.inf, -np.inf)[i % 3]
    async with app_client() as c:
        body, headers = execute_request(COPY, {"InputTensor": x}, "binary", "json")
        r = await c.post(
            "/v1/execute", content=body, headers={**headers, "Accept-Encoding": "identity"}
        )
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    assert int(r.headers["content-length"]) == len(r.content)  # the pieces, counted once
    out = json.loads(r.content)["outputs"]["OutputTensor"]["data"]
    np.testing.assert_array_equal(np.asarray(out, np.float32), x, strict=True)


# --- NaN and Infinity ------------------------------------------------------------------------


async def test_nan_and_infinity_literals_in_and_out() -> None:
    text = b"[1.5, NaN, Infinity, -Infinity, -0.0]"
    async with app_client() as c:
        body = (
            b'{"operator": %s, "output_encoding": "json", "inputs": {"InputTensor": '
            % (json.dumps(COPY).encode())
            + b'{"DataType": "FLOAT16", "Sizes": [5], "data": '
            + text
            + b"}}}"
        )
        r = await c.post("/v1/execute", content=body, headers={"Content-Type": "application/json"})
        assert r.status_code == 200, r.text
        assert b'"data":[1.5,NaN,Infinity,-Infinity,-0.0]' in r.content
        reg = {
            "name": "copy",
            "operator": {**COPY, "InputTensor": {"DataType": "FLOAT64", "Sizes": [-1]}},
        }
        assert (await c.post("/v1/operators", json=reg)).status_code == 201
        infer = (
            b'{"inputs": [{"name": "InputTensor", "datatype": "FP64", "shape": [5], "data": '
            + text
            + b"}]}"
        )
        r = await c.post("/v2/models/copy/infer", content=infer)
        assert r.status_code == 200, r.text
        assert b'"data":[1.5,NaN,Infinity,-Infinity,-0.0]' in r.content
        # Integers take no NaN; a literal only standard JSON's parser refuses is still 400.
        r = await c.post(
            "/v1/execute",
            **_json(_execute({"DataType": "INT32", "Sizes": [1], "data": [float("nan")]})),
        )
        assert r.status_code == 422 and r.json()["errors"][0]["loc"][-2:] == ["data", 0]
        r = await c.post(
            "/v1/execute", content=b'{"inputs": [NaN', headers={"Content-Type": "application/json"}
        )
        assert r.status_code == 400


# --- numbers exact or refused ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("data_type", "data", "index"),
    [
        ("UINT64", "[1, 18446744073709551616]", 1),
        ("INT64", "[9.223372036854775807e18]", 0),
        ("INT64", "[0, -9223372036854775809]", 1),
        ("INT8", "[1, 2, 128]", 2),
        ("UINT8", "[-1]", 0),
        ("FLOAT32", "[1, 1e39]", 1),
        ("INT32", "[1, true]", 1),
        ("FLOAT32", "[false]", 0),
        ("INT16", "[1.5]", 0),
    ],
)
async def test_out_of_range_and_booleans_are_422_naming_the_element(
    data_type: str, data: str, index: int
) -> None:
    count = len(json.loads(data))
    body = (
        b'{"operator": %s, "inputs": {"InputTensor": {"DataType": "%s", "Sizes": [%d], '
        % (json.dumps(COPY).encode(), data_type.encode(), count)
        + b'"data": %s}}}' % data.encode()
    )
    async with app_client() as c:
        r = await c.post("/v1/execute", content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 422, r.text
    assert r.json()["errors"][0]["loc"] == ["inputs", "InputTensor", "data", index]


async def test_extremes_stay_exact() -> None:
    values = "[18446744073709551615, 0]"
    body = (
        b'{"operator": %s, "output_encoding": "json", "inputs": {"InputTensor": '
        b'{"DataType": "UINT64", "Sizes": [2], "data": %s}}}'
    ) % (json.dumps(COPY).encode(), values.encode())
    async with app_client() as c:
        r = await c.post("/v1/execute", content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 200 and b"[18446744073709551615,0]" in r.content


@pytest.mark.parametrize(
    "tensor",
    [
        {"DataType": "INT8", "Sizes": [True], "data": [1]},
        {"DataType": "INT8", "Sizes": [1.0], "data": [1]},
        {"DataType": "INT8", "Sizes": ["1"], "data": [1]},
        {"DataType": "INT8", "Sizes": [0], "data": []},
        {"DataType": "INT8", "Sizes": [2], "Strides": [-1], "data": [1, 2]},
        {"DataType": "INT8", "Sizes": [1], "parameters": {"binary_data_size": "1"}},
        {"DataType": "INT8", "Sizes": [1], "parameters": {"binary_data_size": True}},
    ],
)
async def test_sizes_strides_and_byte_counts_are_json_integers(tensor: dict[str, object]) -> None:
    async with app_client() as c:
        r = await c.post("/v1/execute", **_json(_execute(tensor)))
    assert r.status_code == 422, r.text


async def test_conflicting_header_lengths_are_400() -> None:
    x = np.ones(4, np.int8)
    body, headers = execute_request(COPY, {"InputTensor": x}, "binary")
    length = headers["Inference-Header-Content-Length"]
    async with app_client() as c:
        twice = [(k, v) for k, v in headers.items()] + [("Inference-Header-Content-Length", "1")]
        r = await c.post("/v1/execute", content=body, headers=twice)
        assert r.status_code == 400 and "more than once" in r.json()["detail"]
        same = [(k, v) for k, v in headers.items()] + [("Inference-Header-Content-Length", length)]
        assert (await c.post("/v1/execute", content=body, headers=same)).status_code == 200
