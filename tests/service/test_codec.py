"""The service's codec: request JSON, `/v1` inputs by name, the default response encoding,
and the `/v1` response in each encoding. No server: bodies are built as `read_body` builds them."""

from __future__ import annotations

import base64

import numpy as np
import orjson
import pytest

from dmlserve.kernels import DescriptorError, LimitExceededError, OperatorBase
from dmlserve.kernels.wire import FramingError
from dmlserve.service.body import Body
from dmlserve.service.codec import V1Exchange, encode_outputs, load_json, validate
from dmlserve.service.errors import BadRequestError, UnprocessableError
from dmlserve.service.registry import RegisteredOperator
from dmlserve.service.responses import FramedResponse
from dmlserve.service.schemas import ExecuteRequest
from tests.service.helpers import PADDING_OP, execute_request, read_outputs


def _body(content: bytes, headers: dict[str, str]) -> Body:
    view = memoryview(content)
    length = headers.get("Inference-Header-Content-Length")
    if length is None:
        return Body("json", view, memoryview(b""), len(content))
    n = int(length)
    return Body("binary", view[:n], view[n:], len(content))


def test_json_and_envelope_errors() -> None:
    with pytest.raises(BadRequestError, match="not valid JSON"):
        load_json(memoryview(b'{"a": '))
    with pytest.raises(UnprocessableError, match="must be a JSON object"):
        validate(ExecuteRequest, [1])
    with pytest.raises(UnprocessableError) as err:
        validate(ExecuteRequest, {"operator": {}, "inputs": {}, "output_encoding": "xml"})
    assert err.value.errors[0]["loc"] == ["output_encoding"]


@pytest.mark.parametrize(
    ("encodings", "framed", "default"),
    [
        (["json", "json"], False, "json"),
        (["json", "b64"], False, "b64"),
        (["binary", "json"], True, "binary"),
        (["b64", "b64"], True, "binary"),
    ],
)
def test_the_response_encoding_follows_the_request(
    encodings: list[str], framed: bool, default: str
) -> None:
    x = np.arange(4, dtype=np.int8).reshape(1, 1, 2, 2)
    inputs: dict = {}
    blobs = []
    for i, enc in enumerate(encodings):
        raw = x.tobytes()
        t: dict = {"DataType": "INT8", "Sizes": [1, 1, 2, 2]}
        if enc == "json":
            t["data"] = x.reshape(-1).tolist()
        elif enc == "b64":
            t["b64"] = base64.b64encode(raw).decode()
        else:
            t["parameters"] = {"binary_data_size": 4}
            blobs.append(raw)
        inputs[f"T{i}"] = t
    header = orjson.dumps({"operator": PADDING_OP, "inputs": inputs})
    body = Body("binary" if framed else "json", memoryview(header), memoryview(b"".join(blobs)), 0)
    decoded = V1Exchange(body, 1 << 20).decode()
    assert decoded.encoding == default and decoded.loc == ("operator",)
    assert decoded.descriptor == PADDING_OP
    for t in decoded.inputs.values():
        np.testing.assert_array_equal(t.view(), x)


def test_an_asked_encoding_wins_and_a_registered_operator_is_the_descriptor() -> None:
    from dmlserve import kernels

    op = kernels.resolve({**PADDING_OP, "InputTensor": {"DataType": "INT8", "Sizes": [1, 1, 2, 2]}})
    reg = RegisteredOperator("pad", op, "digest")
    content, headers = execute_request(
        None, {"InputTensor": np.ones((1, 1, 2, 2), np.int8)}, "json", "binary"
    )
    exchange = V1Exchange(_body(content, headers), 1 << 20, reg)
    decoded = exchange.decode()
    assert isinstance(decoded.descriptor, OperatorBase) and decoded.descriptor is op
    assert decoded.encoding == "binary"
    assert (exchange.operator, exchange.model) == ("PADDING", "pad")
    with pytest.raises(UnprocessableError):  # the registered form takes no operator
        V1Exchange(_body(*execute_request(PADDING_OP, {}, "json")), 1 << 20, reg).decode()


def test_decoding_errors_come_from_the_shared_codec() -> None:
    # Raised as the operator layer's errors: the pipeline turns them into 422, 413 and 400.
    tensor = {"DataType": "INT8", "Sizes": [1, 1, 2, 2], "data": [1, 2, 3]}
    body = orjson.dumps({"operator": PADDING_OP, "inputs": {"InputTensor": tensor}})
    with pytest.raises(DescriptorError) as err:
        V1Exchange(Body("json", memoryview(body), memoryview(b""), 0), 1 << 20).decode()
    assert err.value.errors[0]["loc"] == ("inputs", "InputTensor", "data")
    x = np.ones((1, 1, 4, 4), np.float32)
    with pytest.raises(LimitExceededError):
        V1Exchange(_body(*execute_request(PADDING_OP, {"InputTensor": x})), 63).decode()
    content, headers = execute_request(PADDING_OP, {"InputTensor": x}, "binary")
    with pytest.raises(FramingError, match="after the last binary tensor"):
        V1Exchange(_body(content + b"!", headers), 1 << 20).decode()


@pytest.mark.parametrize("encoding", ["json", "b64", "binary"])
def test_encode_outputs_in_each_encoding(encoding: str) -> None:
    y = np.arange(-3, 3, dtype=np.int64).reshape(2, 3)
    response, nbytes = encode_outputs({"OutputTensor": y}, "numpy", encoding)  # type: ignore[arg-type]
    assert nbytes == y.nbytes
    assert isinstance(response, FramedResponse) == (encoding == "binary")
    content = b"".join(bytes(c) for c in response.chunks) if encoding == "binary" else None
    doc, out = read_outputs(content or response.body, response.headers)
    assert doc["backend"] == "numpy" and set(doc["outputs"]["OutputTensor"]) >= {"DataType"}
    np.testing.assert_array_equal(out["OutputTensor"], y, strict=True)
