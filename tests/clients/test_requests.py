"""Request building, without a server: URLs, headers, bodies in both encodings."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest

from dmlserve.clients import Client
from dmlserve.clients._base import RequestSpec, operator_json
from dmlserve.kernels import FoldOperator, TensorDesc


def test_base_url_path_prefix_is_kept() -> None:
    for base in ("http://proxy.test/dml", "http://proxy.test/dml/"):
        with Client(base) as client:
            request = client._build_request(RequestSpec("GET", "v1/operators"), "id")
            assert str(request.url) == "http://proxy.test/dml/v1/operators"


def test_headers_carry_key_request_id_and_defaults() -> None:
    with Client("http://h.test", api_key="s3cr3t", default_headers={"X-Team": "a"}) as client:
        request = client._build_request(RequestSpec("GET", "v2/health/live"), "abc")
    assert request.headers["authorization"] == "Bearer s3cr3t"
    assert request.headers["x-request-id"] == "abc" and request.headers["x-team"] == "a"
    assert "s3cr3t" not in repr(client)
    with Client("http://h.test") as anonymous:
        plain = anonymous._build_request(RequestSpec("GET", "v2/health/live"), "abc")
    assert "authorization" not in plain.headers


def test_binary_execute_body() -> None:
    x = np.arange(6, dtype=np.uint16).reshape(2, 3)
    with Client("http://h.test") as client:
        spec = client._execute_request("v1/execute", {"type": "PADDING"}, {"InputTensor": x}, None)
    assert spec.headers["Content-Type"] == "application/octet-stream"
    length = int(spec.headers["Inference-Header-Content-Length"])
    assert spec.content is not None
    header = json.loads(spec.content[:length])
    assert header == {
        "operator": {"type": "PADDING"},
        "inputs": {
            "InputTensor": {
                "DataType": "UINT16",
                "Sizes": [2, 3],
                "parameters": {"binary_data_size": 12},
            }
        },
        "output_encoding": "binary",
    }
    assert spec.content[length:] == x.tobytes()


def test_json_execute_body_uses_b64_both_ways() -> None:
    x = np.array([1.5, -2.0], dtype=np.float64)
    with Client("http://h.test", encoding="json") as client:
        spec = client._execute_request("v1/execute", {"type": "PADDING"}, {"InputTensor": x}, None)
    assert spec.headers["Content-Type"] == "application/json"
    assert spec.content is not None
    body = json.loads(spec.content)
    assert body["output_encoding"] == "b64"
    assert base64.b64decode(body["inputs"]["InputTensor"]["b64"]) == x.tobytes()


def test_models_are_serialized_with_wire_names_and_without_nones() -> None:
    op = FoldOperator(
        window_sizes=(2, 2),
        output_tensor=TensorDesc(data_type="FLOAT32", sizes=(1, 1, 3, 3)),
    )
    assert operator_json(op) == {
        "type": "FOLD",
        "WindowSizes": [2, 2],
        "OutputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 3, 3]},
    }
    assert operator_json({"type": "FOLD", "WindowSizes": np.array([2, 2])})["type"] == "FOLD"
    with pytest.raises(TypeError, match="operator must be"):
        operator_json("FOLD")


def test_numpy_scalars_in_a_hand_written_dict_are_plain_json() -> None:
    with Client("http://h.test", encoding="json") as client:
        op = {"type": "PADDING", "StartPadding": np.array([1]), "PaddingValue": np.float32(2)}
        spec = client._execute_request("v1/execute", op, {"InputTensor": np.zeros(1)}, None)
    assert spec.content is not None
    assert json.loads(spec.content)["operator"] == {
        "type": "PADDING",
        "StartPadding": [1],
        "PaddingValue": 2.0,
    }


def test_encoding_is_checked() -> None:
    with pytest.raises(ValueError, match="encoding"):
        Client("http://h.test", encoding="xml")  # type: ignore[arg-type]


def test_only_a_client_made_here_is_closed() -> None:
    import httpx

    injected = httpx.Client()
    with Client("http://h.test", http_client=injected):
        pass
    assert not injected.is_closed
    injected.close()
    with Client("http://h.test") as own:
        pass
    assert own._http.is_closed
