"""KServe v2 (Open Inference Protocol) tensors: inference requests and responses.

Registered operators are models; tensor names are the DirectML field names and datatypes the
KServe names from `kernels.dtypes` (FP32, INT8, ...).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import orjson
from starlette.responses import Response

from dmlserve.kernels import OperatorBase
from dmlserve.kernels.dtypes import DataType, from_kserve, from_numpy
from dmlserve.service.encoding import HostTensor, check_layout, packed_bytes, tensor_from_bytes
from dmlserve.service.encoding import tensor_from_json_data as from_json
from dmlserve.service.errors import UnprocessableError
from dmlserve.service.limits import Body
from dmlserve.service.registry import RegisteredOperator
from dmlserve.service.schemas import InferRequest
from dmlserve.service.wire import JSON_OPTIONS, BinarySlicer, FramedResponse, json_response

PLATFORM = "dmlserve"
VERSION = "1"
EXTENSIONS = ["binary_tensor_data"]


def _tensor_meta(name: str, desc: Any) -> dict[str, Any]:
    return {"name": name, "datatype": desc.data_type.kserve, "shape": list(desc.sizes)}


def model_metadata(reg: RegisteredOperator) -> dict[str, Any]:
    descs = reg.operator.tensor_descs()
    return {
        "name": reg.name,
        "versions": [VERSION],
        "platform": PLATFORM,
        "inputs": [_tensor_meta(n, d) for n, d in descs.items() if n != "OutputTensor"],
        "outputs": [_tensor_meta("OutputTensor", descs["OutputTensor"])],
    }


def _datatype(name: str, loc: tuple[str | int, ...]) -> DataType:
    try:
        return from_kserve(name)
    except ValueError as exc:
        allowed = ", ".join(d.kserve for d in DataType)
        msg = f"{exc}; expected one of {allowed}"
        raise UnprocessableError(msg, errors=[{"loc": [*loc, "datatype"], "msg": msg}]) from None


def decode_infer_inputs(
    req: InferRequest, body: Body, op: OperatorBase, max_tensor_bytes: int
) -> dict[str, HostTensor]:
    """The request's input tensors by name (binary sections taken in request order)."""
    slicer = BinarySlicer(body)
    expected = [n for n in op.tensor_descs() if n != "OutputTensor"]
    tensors: dict[str, HostTensor] = {}
    for i, item in enumerate(req.inputs):
        loc: tuple[str | int, ...] = ("inputs", i)
        if item.name not in expected:
            msg = f"the model has no input {item.name!r}; its inputs are " + ", ".join(expected)
            raise UnprocessableError(msg, errors=[{"loc": [*loc, "name"], "msg": msg}])
        if item.name in tensors:
            msg = f"input {item.name!r} is given twice"
            raise UnprocessableError(msg, errors=[{"loc": [*loc, "name"], "msg": msg}])
        dt = _datatype(item.datatype, loc)
        dt, shape, _, count = check_layout(dt, item.shape, None, loc, max_tensor_bytes)
        size = (item.parameters or {}).get("binary_data_size")
        if size is not None:
            if type(size) is not int or size < 0:
                msg = "binary_data_size must be a non-negative integer"
                raise UnprocessableError(msg, errors=[{"loc": [*loc, "parameters"], "msg": msg}])
            if item.data is not None:
                msg = "give either data or binary_data_size, not both"
                raise UnprocessableError(msg, errors=[{"loc": list(loc), "msg": msg}])
            raw = slicer.take(size, (*loc, "parameters", "binary_data_size"))
            tensors[item.name] = tensor_from_bytes(dt, shape, None, count, raw, loc, framing=True)
        elif item.data is not None:
            tensors[item.name] = from_json(dt, shape, None, count, item.data, loc)
        else:
            msg = "an input needs data or parameters.binary_data_size"
            raise UnprocessableError(msg, errors=[{"loc": list(loc), "msg": msg}])
    slicer.finish()
    missing = [n for n in op.input_names if n not in tensors]
    if missing:
        msg = "missing input(s): " + ", ".join(missing)
        raise UnprocessableError(msg, errors=[{"loc": ["inputs"], "msg": msg}])
    return tensors


def wants_binary(req: InferRequest) -> dict[str, bool]:
    """Output name -> binary?, from `outputs[].parameters.binary_data` and `binary_data_output`."""
    default = bool((req.parameters or {}).get("binary_data_output", False))
    if not req.outputs:
        return {"OutputTensor": default}
    chosen: dict[str, bool] = {}
    for i, out in enumerate(req.outputs):
        if out.name != "OutputTensor":
            msg = f"the model has no output {out.name!r}; its output is OutputTensor"
            raise UnprocessableError(msg, errors=[{"loc": ["outputs", i, "name"], "msg": msg}])
        chosen[out.name] = bool((out.parameters or {}).get("binary_data", default))
    return chosen


def infer_response(
    model: str,
    request_id: str | None,
    outputs: Mapping[str, np.ndarray],
    binary: Mapping[str, bool],
) -> tuple[Response, int]:
    """The inference response, framed when any output is binary; and its tensor bytes."""
    body: dict[str, Any] = {"model_name": model, "model_version": VERSION}
    if request_id is not None:
        body["id"] = request_id
    entries = []
    chunks = []
    nbytes = 0
    for name, arr in outputs.items():
        if name not in binary:
            continue
        entry: dict[str, Any] = {
            "name": name,
            "datatype": from_numpy(arr.dtype).kserve,
            "shape": list(arr.shape),
        }
        nbytes += arr.nbytes
        if binary[name]:
            chunk = packed_bytes(arr)
            entry["parameters"] = {"binary_data_size": len(chunk)}
            chunks.append(chunk)
        else:
            entry["data"] = np.ascontiguousarray(arr).reshape(-1)
        entries.append(entry)
    body["outputs"] = entries
    if chunks:
        return FramedResponse(orjson.dumps(body, option=JSON_OPTIONS), chunks), nbytes
    return json_response(body), nbytes
