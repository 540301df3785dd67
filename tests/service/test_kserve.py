"""KServe v2 tensors without a server: metadata, inputs by model, binary outputs, responses."""

from __future__ import annotations

import numpy as np
import orjson
import pytest

from dmlserve import kernels
from dmlserve.kernels import DescriptorError
from dmlserve.kernels.wire import BinarySection, FramingError
from dmlserve.service.body import Body
from dmlserve.service.kserve import (
    InferExchange,
    decode_inputs,
    infer_response,
    model_metadata,
    wants_binary,
)
from dmlserve.service.registry import RegisteredOperator
from dmlserve.service.responses import FramedResponse
from dmlserve.service.schemas import InferInput, InferRequest

CONV = kernels.resolve(
    {
        "type": "CONVOLUTION_INTEGER",
        "InputTensor": {"DataType": "UINT8", "Sizes": [-1, 1, 3, 3]},
        "FilterTensor": {"DataType": "INT8", "Sizes": [2, 1, 2, 2]},
        "InputZeroPointTensor": {"DataType": "UINT8", "Sizes": [1]},
    },
    allow_batch_wildcard=True,
)


def _inputs(*items: dict) -> list[InferInput]:
    return [InferInput.model_validate(i) for i in items]


X = {"name": "InputTensor", "datatype": "UINT8", "shape": [1, 1, 3, 3], "data": list(range(9))}
W = {"name": "FilterTensor", "datatype": "INT8", "shape": [2, 1, 2, 2], "data": [1, -1] * 4}


def test_model_metadata_lists_inputs_and_the_output() -> None:
    meta = model_metadata(RegisteredOperator("conv", CONV, "d"))
    assert meta["name"] == "conv" and meta["versions"] == ["1"]
    assert [(i["name"], i["datatype"], i["shape"]) for i in meta["inputs"]] == [
        ("InputTensor", "UINT8", [-1, 1, 3, 3]),
        ("FilterTensor", "INT8", [2, 1, 2, 2]),
        ("InputZeroPointTensor", "UINT8", [1]),
    ]
    assert meta["outputs"] == [
        {"name": "OutputTensor", "datatype": "INT32", "shape": [-1, 2, 2, 2]}
    ]


def test_inputs_by_name_in_any_order_with_binary_sections_in_request_order() -> None:
    w = np.array([1, -1] * 4, np.int8)
    binary_w = {**W, "parameters": {"binary_data_size": 8}}
    del binary_w["data"]
    items = _inputs(binary_w, X)
    tensors = decode_inputs(items, BinarySection(w.tobytes()), CONV, 1 << 20)
    assert list(tensors) == ["FilterTensor", "InputTensor"]
    np.testing.assert_array_equal(tensors["FilterTensor"].view(), w.reshape(2, 1, 2, 2))
    assert tensors["InputTensor"].view().reshape(-1).tolist() == list(range(9))


@pytest.mark.parametrize(
    ("items", "where", "message"),
    [
        ([X, W, {**X, "name": "Bias"}], ("inputs", 2, "name"), "has no input 'Bias'"),
        ([X, X], ("inputs", 1, "name"), "given twice"),
        ([X], ("inputs",), "missing input(s): FilterTensor"),
        ([{**X, "datatype": "FLOAT32"}], ("inputs", 0, "datatype"), "expected one of"),
        ([{**X, "data": None}], ("inputs", 0), "data or parameters.binary_data_size"),
        ([{**X, "parameters": {"binary_data_size": 9}}], ("inputs", 0), "exactly one payload"),
    ],
)
def test_input_rules_name_the_place(items: list[dict], where: tuple, message: str) -> None:
    with pytest.raises(DescriptorError) as err:
        decode_inputs(_inputs(*items), BinarySection(framed=False), CONV, 1 << 20)
    assert err.value.errors[0]["loc"] == where
    assert message in err.value.errors[0]["msg"]


def test_the_binary_section_must_be_used_up() -> None:
    with pytest.raises(FramingError, match="after the last binary tensor"):
        decode_inputs(_inputs(X, W), BinarySection(b"extra"), CONV, 1 << 20)


def test_binary_outputs_from_the_request() -> None:
    def req(doc: dict) -> InferRequest:
        return InferRequest.model_validate({"inputs": [], **doc})

    assert wants_binary(req({})) == {"OutputTensor": False}
    assert wants_binary(req({"parameters": {"binary_data_output": True}})) == {"OutputTensor": True}
    listed = {"parameters": {"binary_data_output": True}, "outputs": [{"name": "OutputTensor"}]}
    assert wants_binary(req(listed)) == {"OutputTensor": True}
    one = {"outputs": [{"name": "OutputTensor", "parameters": {"binary_data": False}}]}
    assert wants_binary(req({"parameters": {"binary_data_output": True}, **one})) == {
        "OutputTensor": False
    }
    with pytest.raises(DescriptorError, match="no output 'Y'"):
        wants_binary(req({"outputs": [{"name": "Y"}]}))


@pytest.mark.parametrize("binary", [False, True])
def test_infer_response(binary: bool) -> None:
    y = np.arange(6, dtype=np.int32).reshape(1, 2, 3)
    response, nbytes = infer_response("m", "42", {"OutputTensor": y}, {"OutputTensor": binary})
    assert nbytes == 24
    if binary:
        assert isinstance(response, FramedResponse)
        header_length = int(response.headers["inference-header-content-length"])
        content = b"".join(bytes(c) for c in response.chunks)
        doc = orjson.loads(content[:header_length])
        assert doc["outputs"][0]["parameters"] == {"binary_data_size": 24}
        values = np.frombuffer(content[header_length:], "<i4").tolist()
    else:
        doc = orjson.loads(response.body)
        values = doc["outputs"][0]["data"]
    assert (doc["model_name"], doc["model_version"], doc["id"]) == ("m", "1", "42")
    assert doc["outputs"][0]["datatype"] == "INT32" and doc["outputs"][0]["shape"] == [1, 2, 3]
    assert values == list(range(6))


def test_the_exchange_decodes_against_its_model() -> None:
    reg = RegisteredOperator("conv", CONV, "d")
    doc = {"id": "7", "inputs": [X, W], "parameters": {"binary_data_output": True}}
    body = Body("json", memoryview(orjson.dumps(doc)), memoryview(b""), 0)
    exchange = InferExchange(body, 1 << 20, reg)
    decoded = exchange.decode()
    assert decoded.descriptor is CONV and decoded.loc == ()
    assert decoded.request_id == "7" and decoded.binary == {"OutputTensor": True}
    assert (exchange.operator, exchange.model) == ("CONVOLUTION_INTEGER", "conv")
