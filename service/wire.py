"""Bodies to tensors and tensors to responses, for `/v1` (the KServe side is `kserve.py`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

import anyio.to_thread
import numpy as np
import orjson
from pydantic import BaseModel, ValidationError
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from dmlserve.kernels.dtypes import from_numpy
from dmlserve.service.encoding import (
    Encoding,
    HostTensor,
    b64_text,
    check_layout,
    decode_b64,
    json_values,
    packed_bytes,
    tensor_from_bytes,
    tensor_from_json_data,
)
from dmlserve.service.errors import (
    BadRequestError,
    UnprocessableError,
    summarize,
    validation_errors,
)
from dmlserve.service.limits import INLINE_BYTES, Body
from dmlserve.service.schemas import WireTensor

M = TypeVar("M", bound=BaseModel)
JSON_OPTIONS = orjson.OPT_SERIALIZE_NUMPY


async def parse_json(raw: memoryview) -> Any:
    """The JSON document of a body; 400 when it is not JSON (big bodies parse off-loop)."""
    if len(raw) > INLINE_BYTES:
        return await anyio.to_thread.run_sync(load_json, raw)
    return load_json(raw)


def load_json(raw: memoryview) -> Any:
    """`parse_json` where the caller has chosen the thread."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise BadRequestError(f"the body is not valid JSON: {exc}") from None


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


class BinarySlicer:
    """Hands out the binary section of a framed body, tensor by tensor, in order."""

    def __init__(self, body: Body) -> None:
        self.framed = body.kind == "binary"
        self.data = body.binary
        self.offset = 0

    def take(self, size: int, loc: Sequence[str | int]) -> memoryview:
        if not self.framed:
            raise BadRequestError(
                f"{'.'.join(map(str, loc))} has binary_data_size but the body is not binary "
                "framed (send Inference-Header-Content-Length)"
            )
        end = self.offset + size
        if end > len(self.data):
            raise BadRequestError(
                f"binary_data_size values need {end} bytes after the JSON header, "
                f"the body has {len(self.data)}"
            )
        chunk = self.data[self.offset : end]
        self.offset = end
        return chunk

    def finish(self) -> None:
        if self.framed and self.offset != len(self.data):
            raise BadRequestError(
                f"the body has {len(self.data) - self.offset} bytes after the last binary tensor"
            )


def decode_v1_inputs(
    inputs: Mapping[str, WireTensor], body: Body, max_tensor_bytes: int
) -> tuple[dict[str, HostTensor], Encoding]:
    """The request's tensors, and the encoding a response uses when none is asked for."""
    slicer = BinarySlicer(body)
    tensors: dict[str, HostTensor] = {}
    encodings: list[Encoding] = []
    for name, wt in inputs.items():
        loc = ("inputs", name)
        dt, shape, strides, count = check_layout(
            wt.data_type, wt.sizes, wt.strides, loc, max_tensor_bytes
        )
        size = wt.parameters.binary_data_size if wt.parameters else None
        given = [
            p for p, v in (("data", wt.data), ("b64", wt.b64), ("binary", size)) if v is not None
        ]
        if len(given) != 1:
            msg = "give exactly one payload: data, b64 or parameters.binary_data_size"
            raise UnprocessableError(
                f"inputs.{name}: {msg}", errors=[{"loc": list(loc), "msg": msg}]
            )
        if size is not None:
            raw = slicer.take(size, (*loc, "parameters", "binary_data_size"))
            tensors[name] = tensor_from_bytes(dt, shape, strides, count, raw, loc, framing=True)
            encodings.append("binary")
        elif wt.b64 is not None:
            raw_b = decode_b64(wt.b64, loc)
            tensors[name] = tensor_from_bytes(dt, shape, strides, count, raw_b, loc, framing=False)
            encodings.append("b64")
        else:
            tensors[name] = tensor_from_json_data(dt, shape, strides, count, wt.data, loc)
            encodings.append("json")
    slicer.finish()
    default: Encoding = (
        "binary" if body.kind == "binary" else ("b64" if "b64" in encodings else "json")
    )
    return tensors, default


class FramedResponse(Response):
    """KServe binary framing: JSON header, then each binary tensor's bytes, sent as chunks."""

    media_type = "application/octet-stream"

    def __init__(self, header: bytes, chunks: Iterable[memoryview], status_code: int = 200) -> None:
        self.chunks = [memoryview(header), *chunks]
        total = sum(len(c) for c in self.chunks)
        super().__init__(None, status_code, media_type=self.media_type)
        self.headers["content-length"] = str(total)
        self.headers["inference-header-content-length"] = str(len(header))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send(
            {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
        )
        last = len(self.chunks) - 1
        for i, chunk in enumerate(self.chunks):
            await send({"type": "http.response.body", "body": bytes(chunk), "more_body": i < last})


def json_response(content: Any, status_code: int = 200) -> Response:
    return Response(
        orjson.dumps(content, option=JSON_OPTIONS), status_code, media_type="application/json"
    )


def encode_v1_outputs(
    outputs: Mapping[str, np.ndarray], backend: str, encoding: Encoding, status_code: int = 200
) -> tuple[Response, int]:
    """The `/v1` execute response in `encoding`, and the tensor bytes it carries."""
    body: dict[str, Any] = {"outputs": {}, "backend": backend}
    chunks: list[memoryview] = []
    nbytes = 0
    for name, arr in outputs.items():
        entry: dict[str, Any] = {"DataType": from_numpy(arr.dtype).value, "Sizes": list(arr.shape)}
        nbytes += arr.nbytes
        if encoding == "binary":
            chunk = packed_bytes(arr)
            entry["parameters"] = {"binary_data_size": len(chunk)}
            chunks.append(chunk)
        elif encoding == "b64":
            entry["b64"] = b64_text(arr)
        else:
            entry["data"] = json_values(arr)
        body["outputs"][name] = entry
    if encoding == "binary":
        return FramedResponse(orjson.dumps(body), chunks, status_code), nbytes
    return json_response(body, status_code), nbytes
