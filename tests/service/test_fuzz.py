"""Nothing a client sends may reach the catch-all 500: malformed bodies, wrong types, huge or
negative sizes, unknown data types, truncated binary bodies, wrong content types."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import numpy as np
import orjson
import pytest
from anyio.from_thread import start_blocking_portal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.service.conftest import app_client

FUZZ = settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
TYPES = ["FOLD", "UNFOLD", "PADDING", "AVERAGE_POOLING", "CONVOLUTION_INTEGER", "DML_OPERATOR_FOLD"]
DATA_TYPES = ["FLOAT32", "FLOAT16", "INT8", "UINT64", "INT64", "FP32", "BOOL", "", "float32"]
FIELDS = ["WindowSizes", "WindowSize", "Strides", "Dilations", "StartPadding", "EndPadding",
          "PaddingMode", "PaddingValue", "DimensionCount", "GroupCount", "IncludePadding",
          "PaddingValueDataType", "OutputTensor", "FilterTensor",
          "InputZeroPointTensor"]  # fmt: skip

sizes = st.one_of(
    st.lists(st.integers(-3, 6), min_size=0, max_size=9),
    st.lists(st.sampled_from([1, 2, 10**6, 2**31, 2**40, 2**63, -(2**63)]), max_size=5),
)
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False),
    st.text(max_size=8),
)  # fmt: skip
field_values = st.one_of(
    scalars, st.lists(st.integers(-5, 5), max_size=7), st.sampled_from(["REFLECTION", "WRAP", "X"])
)
tensor_desc = st.fixed_dictionaries(
    {"DataType": st.sampled_from(DATA_TYPES), "Sizes": sizes},
    optional={"Strides": sizes, "Extra": scalars},
)
operators = st.fixed_dictionaries(
    {"type": st.one_of(st.sampled_from(TYPES), scalars)},
    optional={f: st.one_of(field_values, tensor_desc) for f in FIELDS},
)
payload = st.one_of(
    st.fixed_dictionaries({"data": st.one_of(st.lists(scalars, max_size=40), scalars)}),
    st.fixed_dictionaries(
        {"b64": st.one_of(st.text(max_size=20), st.just("AAAAAAAAAAAAAAAAAAAA"))}
    ),
    st.fixed_dictionaries({"parameters": st.fixed_dictionaries({"binary_data_size": scalars})}),
)
wire_tensors = st.builds(lambda d, p: {**d, **p}, tensor_desc, payload)
names = st.sampled_from(["InputTensor", "FilterTensor", "InputZeroPointTensor", "Bogus"])
execute_bodies = st.fixed_dictionaries(
    {"operator": st.one_of(operators, scalars)},
    optional={
        "inputs": st.one_of(st.dictionaries(names, wire_tensors, max_size=3), scalars),
        "output_encoding": st.sampled_from(["json", "b64", "binary", "xml", None]),
    },
)
json_values = st.recursive(
    scalars, lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=6), c, max_size=4)
)


class Client:
    """A started app driven from synchronous hypothesis tests through a blocking portal.

    httpx's ASGI transport re-raises app exceptions: a request reaching the catch-all fails
    the test loudly rather than hiding behind a 500.
    """

    def __init__(self, portal: Any, client: Any) -> None:
        self.portal, self.client = portal, client

    def post(self, path: str, **kwargs: Any) -> Any:
        return self.portal.call(lambda: self.client.post(path, **kwargs))


@pytest.fixture(scope="module")
def client() -> Iterator[Client]:
    limits = {"max_request_bytes": 1 << 20, "max_output_bytes": 1 << 24}
    with start_blocking_portal() as portal:
        cm = app_client(**limits)
        c = portal.call(cm.__aenter__)
        try:
            yield Client(portal, c)
        finally:
            portal.call(cm.__aexit__, None, None, None)


def _check(r: Any) -> None:
    assert r.status_code != 500, r.text
    assert r.status_code in (200, 201, 400, 404, 413, 415, 422), r.text
    if r.status_code >= 400:
        doc = r.json()
        assert set(doc) == ({"error"} if r.url.path.startswith("/v2") else
                            {"type", "title", "status", "detail", "errors"}), doc  # fmt: skip


@FUZZ
@given(body=execute_bodies)
def test_execute_bodies(client: Client, body: dict[str, Any]) -> None:
    _check(client.post("/v1/execute", content=json.dumps(body).encode()))


@FUZZ
@given(body=json_values, path=st.sampled_from(["/v1/execute", "/v1/operators"]))
def test_arbitrary_json(client: Client, body: Any, path: str) -> None:
    _check(client.post(path, content=json.dumps(body).encode()))


@FUZZ
@given(raw=st.binary(max_size=200), ctype=st.sampled_from(["application/json", None, "text/csv"]))
def test_arbitrary_bytes(client: Client, raw: bytes, ctype: str | None) -> None:
    headers = {"content-type": ctype} if ctype else {}
    _check(client.post("/v1/execute", content=raw, headers=headers))


@FUZZ
@given(
    cut=st.integers(0, 200),
    declared=st.one_of(
        st.integers(-5, 400).map(lambda n: str(n).encode()),
        st.text(st.characters(min_codepoint=32, max_codepoint=255), max_size=5).map(
            lambda t: t.encode("latin-1")
        ),
    ),
    size=st.integers(-10, 10**12),
    enc=st.sampled_from(["gzip", "deflate", "identity", "compress"]),
)
def test_binary_framing(client: Client, cut: int, declared: bytes, size: int, enc: str) -> None:
    x = np.arange(16, dtype=np.float32)
    doc = {
        "operator": {"type": "PADDING", "StartPadding": [0, 0, 1, 1], "EndPadding": [0, 0, 1, 1]},
        "inputs": {"InputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 4, 4],
                                   "parameters": {"binary_data_size": size}}},
    }  # fmt: skip
    header = orjson.dumps(doc)
    body = (header + x.tobytes())[: max(len(header) + 64 - cut, 0)]
    headers = {"Inference-Header-Content-Length": declared, "Content-Encoding": enc}
    _check(client.post("/v1/execute", content=body, headers=headers))


@FUZZ
@given(
    shape=sizes,
    datatype=st.sampled_from(["FP32", "FP16", "INT8", "BYTES", "BF16", "FLOAT32", ""]),
    data=st.one_of(st.lists(scalars, max_size=20), scalars),
    binary=st.booleans(),
)
def test_kserve_infer(client: Client, shape: list, datatype: str, data: Any, binary: bool) -> None:
    op = {"type": "UNFOLD", "WindowSizes": [2, 2],
          "InputTensor": {"DataType": "FLOAT32", "Sizes": [-1, 1, 3, 3]}}  # fmt: skip
    name = client.post("/v1/operators", json={"name": "fuzz", "operator": op}).json()["name"]
    item: dict[str, Any] = {"name": "InputTensor", "shape": shape, "datatype": datatype}
    if binary:
        item["parameters"] = {"binary_data_size": 36}
        header = orjson.dumps({"inputs": [item], "parameters": {"binary_data_output": True}})
        headers = {"Inference-Header-Content-Length": str(len(header))}
        r = client.post(f"/v2/models/{name}/infer", content=header + bytes(36), headers=headers)
    else:
        item["data"] = data
        r = client.post(f"/v2/models/{name}/infer", content=json.dumps({"inputs": [item]}).encode())
    _check(r)
