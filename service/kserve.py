"""KServe v2 (Open Inference Protocol) tensors: model metadata, inference inputs and outputs.

Registered operators are models; tensor names are the DirectML field names and datatypes the
KServe names from `kernels.dtypes` (FP32, INT8, ...). Each tensor goes through `kernels.wire`,
the codec `/v1` and the SDK use too; KServe tensors carry no Strides and no `b64`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from starlette.responses import Response

from dmlserve.kernels import DescriptorError, OperatorBase
from dmlserve.kernels.dtypes import DataType, from_kserve, from_numpy
from dmlserve.kernels.wire import BinarySection, HostTensor, decode_tensor, encode_payload
from dmlserve.service.codec import BodyExchange, load_json, validate
from dmlserve.service.pipeline import Decoded
from dmlserve.service.registry import RegisteredOperator
from dmlserve.service.responses import tensor_response
from dmlserve.service.schemas import InferInput, InferRequest
from dmlserve.service.work import Outcome

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


@dataclass
class InferDecoded(Decoded):
    request_id: str | None = None
    binary: dict[str, bool] | None = None  # output name -> sent as binary?


class InferExchange(BodyExchange):
    """`POST /v2/models/{name}/infer` on a registered operator."""

    def decode(self) -> InferDecoded:
        req = validate(InferRequest, load_json(self.body.json))
        binary = wants_binary(req)
        assert self.registered is not None
        op = self.registered.operator
        inputs = decode_inputs(req.inputs, self.body.section(), op, self.max_tensor_bytes)
        where = {item.name: ("inputs", i) for i, item in enumerate(req.inputs)}
        return InferDecoded(op, inputs, input_locs=where, request_id=req.id, binary=binary)

    def encode(self, decoded: InferDecoded, outcome: Outcome) -> tuple[Response, int]:
        outputs = {"OutputTensor": outcome.output}
        assert decoded.binary is not None
        return infer_response(self.model, decoded.request_id, outputs, decoded.binary)


def _datatype(name: str, loc: tuple[str | int, ...]) -> DataType:
    try:
        return from_kserve(name)
    except ValueError as exc:
        allowed = ", ".join(d.kserve for d in DataType)
        raise DescriptorError.at((*loc, "datatype"), f"{exc}; expected one of {allowed}") from None


def decode_inputs(
    items: Iterable[InferInput], section: BinarySection, op: OperatorBase, max_tensor_bytes: int
) -> dict[str, HostTensor]:
    """The request's input tensors by name (binary sections taken in request order)."""
    expected = [n for n in op.tensor_descs() if n != "OutputTensor"]
    tensors: dict[str, HostTensor] = {}
    for i, item in enumerate(items):
        loc: tuple[str | int, ...] = ("inputs", i)
        if item.name not in expected:
            msg = f"the model has no input {item.name!r}; its inputs are " + ", ".join(expected)
            raise DescriptorError.at((*loc, "name"), msg)
        if item.name in tensors:
            raise DescriptorError.at((*loc, "name"), f"input {item.name!r} is given twice")
        tensors[item.name], _ = decode_tensor(
            _datatype(item.datatype, loc), item.shape,
            data=item.data, binary_size=(item.parameters or {}).get("binary_data_size"),
            section=section, loc=loc, max_tensor_bytes=max_tensor_bytes,
            accepts=("json", "binary"),
        )  # fmt: skip
    section.finish()
    missing = [n for n in op.input_names if n not in tensors]
    if missing:
        raise DescriptorError.at(("inputs",), "missing input(s): " + ", ".join(missing))
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
            raise DescriptorError.at(("outputs", i, "name"), msg)
        chosen[out.name] = bool((out.parameters or {}).get("binary_data", default))
    return chosen


def infer_response(
    model: str,
    request_id: str | None,
    outputs: Mapping[str, np.ndarray],
    binary: Mapping[str, bool],
) -> tuple[Response, int]:
    """The inference response, framed when any output is binary; and its tensor bytes."""
    doc: dict[str, Any] = {"model_name": model, "model_version": VERSION}
    if request_id is not None:
        doc["id"] = request_id
    entries = []
    chunks = []
    nbytes = 0
    for name, array in outputs.items():
        if name not in binary:
            continue
        entry = {"name": name, "datatype": from_numpy(array.dtype).kserve, "shape": [*array.shape]}
        fields, chunk = encode_payload(array, "binary" if binary[name] else "json")
        entry.update(fields)
        if chunk is not None:
            chunks.append(chunk)
        entries.append(entry)
        nbytes += array.nbytes
    doc["outputs"] = entries
    return tensor_response(doc, chunks), nbytes
