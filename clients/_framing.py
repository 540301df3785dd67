"""Tensors on the wire for the SDK: NumPy arrays in, request bodies out, and responses back.

Each tensor goes through `kernels.wire`, the codec the service decodes and encodes with, so
both ends share one reading of the format. A binary body is the JSON header, then each binary
tensor's bytes in the order the JSON names them; `Inference-Header-Content-Length` gives the
JSON's byte length. Nothing here does I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from dmlserve.kernels import wire
from dmlserve.kernels._array import is_cupy_array
from dmlserve.kernels.dtypes import from_numpy

from ._constants import BINARY_CONTENT_TYPE, BINARY_HEADER_LENGTH, JSON_CONTENT_TYPE

__all__ = [
    "Encoding",
    "to_host_array",
    "encode_tensor",
    "encode_body",
    "split_body",
    "decode_tensor",
    "decode_outputs",
]

#: The body the SDK sends: `binary` (framed) or `json` (tensors as `b64`).
Encoding = Literal["binary", "json"]
NDArray = npt.NDArray[Any]


def to_host_array(value: object) -> NDArray:
    """A NumPy array of a DirectML data type, little-endian; CuPy arrays are copied to host."""
    if is_cupy_array(value):
        array: NDArray = value.get()  # type: ignore[attr-defined]
    else:
        array = np.asarray(value)
    data_type = from_numpy(array.dtype)  # ValueError for bool, complex, object...
    if array.dtype != data_type.numpy:  # big-endian input: the wire is little-endian
        array = array.astype(data_type.numpy)
    return array


def encode_tensor(value: object, encoding: Encoding) -> tuple[dict[str, Any], memoryview | None]:
    """The wire JSON of one input tensor and, for the binary framing, its bytes.

    A view whose elements overlap (a 0-stride broadcast, a sliding window) is sent as the
    smallest buffer its strides address, with `Strides`, instead of being expanded.
    """
    payload: wire.Encoding = "binary" if encoding == "binary" else "b64"
    return wire.encode_tensor(to_host_array(value), payload, compact=True)


def _json_default(value: object) -> object:
    # Operator dicts written by hand may hold NumPy scalars or small arrays.
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def dumps(payload: Mapping[str, Any]) -> bytes:
    """Compact JSON bytes; NumPy scalars become plain numbers."""
    return json.dumps(payload, separators=(",", ":"), default=_json_default).encode()


def encode_body(
    payload: Mapping[str, Any], buffers: list[memoryview], encoding: Encoding
) -> tuple[bytes, dict[str, str]]:
    """The request body and its content headers, framed when `encoding` is binary."""
    header = dumps(payload)
    if encoding == "json":
        return header, {"Content-Type": JSON_CONTENT_TYPE}
    body = b"".join([header, *buffers])
    return body, {
        "Content-Type": BINARY_CONTENT_TYPE,
        BINARY_HEADER_LENGTH: str(len(header)),
    }


def split_body(content: bytes, header_length: str | None) -> tuple[Any, wire.BinarySection]:
    """The JSON part of a response body and a reader of the binary bytes that follow it."""
    view = memoryview(content)
    if header_length is None:
        return json.loads(content), wire.BinarySection(framed=False)
    header, binary = wire.split_framed(view, wire.parse_header_length(header_length))
    return json.loads(bytes(header)), wire.BinarySection(binary)


def decode_tensor(tensor: Any, section: wire.BinarySection, name: str) -> NDArray:
    """One wire tensor as a packed, writable NumPy array (binary bytes taken from `section`)."""
    if not isinstance(tensor, Mapping):
        raise ValueError(f"{name}: a tensor must be a JSON object")
    parameters = tensor.get("parameters")
    decoded, _ = wire.decode_tensor(
        tensor.get("DataType"),
        tensor.get("Sizes"),
        tensor.get("Strides"),
        data=tensor.get("data"),
        b64=tensor.get("b64"),
        binary_size=parameters.get("binary_data_size") if isinstance(parameters, Mapping) else None,
        section=section,
        loc=(name,),
    )
    return np.array(decoded.view(), copy=True, order="C")


def decode_outputs(body: Any, section: wire.BinarySection) -> dict[str, NDArray]:
    """The `outputs` of an execute response, by name, in the order the JSON lists them."""
    outputs = body.get("outputs") if isinstance(body, Mapping) else None
    if not isinstance(outputs, Mapping):
        raise ValueError("the response has no `outputs` object")
    result = {name: decode_tensor(tensor, section, name) for name, tensor in outputs.items()}
    section.finish()
    return result
