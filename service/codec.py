"""The service's side of the tensor codec: request JSON, and `/v1` tensors in and out.

Each tensor is decoded and encoded by `kernels.wire`, the codec `/v2` and the SDK use too; here
are the request envelope (parse, validate), `/v1`'s inputs by name with the encoding a response
takes when none is asked for, and the `/v1` execute response.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import orjson
from pydantic import BaseModel, ValidationError
from starlette.responses import Response

from dmlserve.kernels.wire import BinarySection, Encoding, HostTensor, decode_tensor, encode_tensor
from dmlserve.service.binding import with_constants
from dmlserve.service.body import Body
from dmlserve.service.concurrency import offload
from dmlserve.service.errors import (
    BadRequestError,
    UnprocessableError,
    summarize,
    validation_errors,
)
from dmlserve.service.pipeline import Decoded
from dmlserve.service.registry import RegisteredOperator
from dmlserve.service.responses import tensor_response
from dmlserve.service.schemas import ExecuteRequest, OperatorExecuteRequest, WireTensor
from dmlserve.service.work import Outcome

M = TypeVar("M", bound=BaseModel)


def load_json(raw: memoryview) -> Any:
    """The JSON document of a body; 400 when it is not JSON.

    The literals `NaN`, `Infinity` and `-Infinity` are read as floats, as Triton's JSON reads
    them (perf_analyzer sends them); orjson refuses them, so a body holding one is read again
    by the standard library's parser, which takes them (and only then pays its cost).
    """
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        error: Exception = exc
    text = bytes(raw)
    if b"NaN" in text or b"Infinity" in text:
        try:
            return json.loads(text)
        except (ValueError, RecursionError) as exc:  # bad JSON, over-deep, an endless integer
            error = exc
    raise BadRequestError(f"the body is not valid JSON: {error}") from None


async def parse_json(raw: memoryview) -> Any:
    """`load_json`, off the event loop for a big body."""
    return await offload(len(raw), load_json, raw)


def validate(model: type[M], obj: Any) -> M:
    """`obj` as `model`, or 422 naming each field that does not fit."""
    if not isinstance(obj, dict):
        raise UnprocessableError(
            "the body must be a JSON object", errors=[{"loc": [], "msg": "expected an object"}]
        )
    try:
        return model.model_validate(obj)
    except ValidationError as exc:
        items = validation_errors(exc.errors(include_url=False))
        raise UnprocessableError(summarize(items), errors=items) from None


@dataclass
class V1Decoded(Decoded):
    encoding: Encoding = "json"  # of the response

    def output_encoding(self) -> Encoding:
        return self.encoding


class BodyExchange:
    """What every HTTP exchange shares: the body read, its limits, and the model, if any."""

    def __init__(
        self, body: Body, max_tensor_bytes: int, registered: RegisteredOperator | None = None
    ) -> None:
        self.body = body
        self.max_tensor_bytes = max_tensor_bytes
        self.registered = registered
        self.received_bytes = body.received_bytes
        self.decode_bytes = len(body.json)
        self.operator = registered.type if registered else ""
        self.model = registered.name if registered else ""


class V1Exchange(BodyExchange):
    """`POST /v1/execute` (operator in the body) or `/v1/operators/{name}/execute`."""

    def decode(self) -> V1Decoded:
        doc = load_json(self.body.json)
        req: ExecuteRequest | OperatorExecuteRequest
        descriptor: Any
        if self.registered is None:
            inline = validate(ExecuteRequest, doc)
            req, descriptor = inline, inline.operator
        else:
            req, descriptor = validate(OperatorExecuteRequest, doc), self.registered.operator
        inputs, default = decode_inputs(req.inputs, self.body.section(), self.max_tensor_bytes)
        if self.registered is not None:
            inputs = with_constants(inputs, self.registered.constants)
        return V1Decoded(
            descriptor,
            inputs,
            loc=("operator",) if self.registered is None else (),
            input_locs={name: ("inputs", name) for name in req.inputs},
            encoding=req.output_encoding or default,
            constants=self.registered.prepared if self.registered is not None else None,
        )

    def encode(self, decoded: V1Decoded, outcome: Outcome) -> tuple[Response, int]:
        outputs = {"OutputTensor": outcome.output}
        return encode_outputs(outputs, outcome.backend, decoded.encoding)


def decode_inputs(
    inputs: Mapping[str, WireTensor],
    section: BinarySection,
    max_tensor_bytes: int,
    field: str = "inputs",
) -> tuple[dict[str, HostTensor], Encoding]:
    """The request's tensors (under `field` in the body), and the encoding a response uses
    when none is asked for."""
    tensors: dict[str, HostTensor] = {}
    encodings: set[Encoding] = set()
    for name, wt in inputs.items():
        tensors[name], encoding = decode_tensor(
            wt.data_type, wt.sizes, wt.strides,
            data=wt.data, b64=wt.b64,
            binary_size=wt.parameters.binary_data_size if wt.parameters else None,
            section=section, loc=(field, name), max_tensor_bytes=max_tensor_bytes,
        )  # fmt: skip
        encodings.add(encoding)
    section.finish()
    default: Encoding = "binary" if section.framed else ("b64" if "b64" in encodings else "json")
    return tensors, default


def encode_outputs(
    outputs: Mapping[str, np.ndarray], backend: str, encoding: Encoding
) -> tuple[Response, int]:
    """The `/v1` execute response in `encoding`, and the tensor bytes it carries."""
    doc: dict[str, Any] = {"outputs": {}, "backend": backend}
    chunks: list[memoryview] = []
    arrays: list[np.ndarray] = []  # every array the document holds (JSON `data`)
    for name, array in outputs.items():
        tensor, chunk = encode_tensor(array, encoding)
        doc["outputs"][name] = tensor
        if "data" in tensor:
            arrays.append(tensor["data"])
        if chunk is not None:
            chunks.append(chunk)
    return tensor_response(doc, chunks, arrays), sum(a.nbytes for a in outputs.values())
