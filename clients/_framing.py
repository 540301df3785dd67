"""Tensors on the wire: NumPy arrays to `b64`/binary payloads and back, and the KServe framing.

A binary body is the JSON header, then each binary tensor's bytes in the order the JSON names
them; `Inference-Header-Content-Length` gives the JSON's byte length. Nothing here does I/O.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Mapping
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from dmlserve.kernels._array import is_cupy_array
from dmlserve.kernels.dtypes import DataType, from_numpy, parse_data_type

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


def _element_strides(array: NDArray) -> tuple[int, ...] | None:
    """Element strides when every byte stride is a non-negative multiple of the item size."""
    itemsize = array.itemsize
    if any(s < 0 or s % itemsize for s in array.strides):
        return None
    return tuple(s // itemsize for s in array.strides)


def _wire_buffer(array: NDArray) -> tuple[memoryview, list[int] | None]:
    """The bytes to send and, when they are not packed row-major, the element Strides.

    A view whose elements overlap (0-stride broadcasts, sliding windows) is sent as the
    smallest flat buffer its strides address, with `Strides`, instead of being expanded;
    every other layout (transposes, slices with gaps) is packed row-major.
    """
    if array.flags.c_contiguous:
        return array.data.cast("B"), None
    strides = _element_strides(array)
    if strides is not None and array.size > 0:
        span = sum((n - 1) * s for n, s in zip(array.shape, strides, strict=True)) + 1
        if span < array.size:
            # Every byte from the first to the last addressed element belongs to the base
            # allocation, so this flat view stays inside it.
            flat = np.lib.stride_tricks.as_strided(array, shape=(span,), strides=(array.itemsize,))
            return np.ascontiguousarray(flat).data.cast("B"), list(strides)
    return np.ascontiguousarray(array).data.cast("B"), None


def encode_tensor(value: object, encoding: Encoding) -> tuple[dict[str, Any], memoryview | None]:
    """The wire JSON of one input tensor and, for the binary framing, its bytes."""
    array = to_host_array(value)
    buffer, strides = _wire_buffer(array)
    tensor: dict[str, Any] = {
        "DataType": from_numpy(array.dtype).value,
        "Sizes": list(array.shape),
    }
    if strides is not None:
        tensor["Strides"] = strides
    if encoding == "binary":
        tensor["parameters"] = {"binary_data_size": buffer.nbytes}
        return tensor, buffer
    tensor["b64"] = base64.b64encode(buffer).decode("ascii")
    return tensor, None


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


def split_body(content: bytes, header_length: str | None) -> tuple[Any, memoryview]:
    """The JSON part of a response body and the binary bytes that follow it."""
    view = memoryview(content)
    if header_length is None:
        return json.loads(content), view[len(view) :]
    try:
        length = int(header_length)
    except ValueError:
        raise ValueError(f"{BINARY_HEADER_LENGTH} is not an integer: {header_length!r}") from None
    if not 0 <= length <= len(view):
        raise ValueError(
            f"{BINARY_HEADER_LENGTH} {length} does not fit a body of {len(view)} bytes"
        )
    return json.loads(bytes(view[:length])), view[length:]


def _sizes(tensor: Mapping[str, Any], name: str) -> tuple[int, ...]:
    sizes = tensor.get("Sizes")
    if not isinstance(sizes, list) or not all(type(s) is int and s >= 0 for s in sizes):
        raise ValueError(f"{name}: Sizes must be a list of non-negative integers, got {sizes!r}")
    return tuple(sizes)


def _from_buffer(
    raw: memoryview | bytes, data_type: DataType, sizes: tuple[int, ...], strides: Any, name: str
) -> NDArray:
    """A packed, writable array from a flat little-endian buffer, honouring element Strides."""
    dtype = data_type.numpy
    if strides is None:
        count = math.prod(sizes)
        if len(raw) != count * dtype.itemsize:
            raise ValueError(
                f"{name}: expected {count * dtype.itemsize} bytes for {data_type.value}"
                f"{list(sizes)}, got {len(raw)}"
            )
        return np.frombuffer(raw, dtype=dtype, count=count).reshape(sizes).copy()
    if (
        not isinstance(strides, list)
        or len(strides) != len(sizes)
        or not all(type(s) is int and s >= 0 for s in strides)
    ):
        raise ValueError(f"{name}: Strides must list one non-negative integer per dimension")
    span = sum((n - 1) * s for n, s in zip(sizes, strides, strict=True)) + 1 if sizes else 1
    if math.prod(sizes) == 0:
        return np.empty(sizes, dtype=dtype)
    if len(raw) < span * dtype.itemsize:
        raise ValueError(f"{name}: buffer of {len(raw)} bytes is too short for its Strides")
    flat = np.frombuffer(raw, dtype=dtype, count=span)
    byte_strides = tuple(s * dtype.itemsize for s in strides)
    view = np.lib.stride_tricks.as_strided(flat, shape=sizes, strides=byte_strides)
    return np.array(view, copy=True, order="C")


def decode_tensor(
    tensor: Mapping[str, Any], binary: memoryview, offset: int, name: str
) -> tuple[NDArray, int]:
    """One wire tensor as a NumPy array; returns the array and the next binary offset."""
    if not isinstance(tensor, Mapping):
        raise ValueError(f"{name}: a tensor must be a JSON object")
    data_type = parse_data_type(tensor.get("DataType"))
    sizes = _sizes(tensor, name)
    strides = tensor.get("Strides")
    parameters = tensor.get("parameters")
    if isinstance(parameters, Mapping) and "binary_data_size" in parameters:
        size = parameters["binary_data_size"]
        if type(size) is not int or size < 0 or offset + size > len(binary):
            raise ValueError(f"{name}: binary_data_size {size!r} overruns the body")
        raw = binary[offset : offset + size]
        return _from_buffer(raw, data_type, sizes, strides, name), offset + size
    if "b64" in tensor:
        try:
            raw_bytes = base64.b64decode(tensor["b64"], validate=True)
        except (binascii.Error, TypeError) as err:
            raise ValueError(f"{name}: b64 is not valid base64") from err
        return _from_buffer(raw_bytes, data_type, sizes, strides, name), offset
    if "data" in tensor:
        flat = np.asarray(tensor["data"], dtype=data_type.numpy).reshape(-1)
        return _from_buffer(flat.tobytes(), data_type, sizes, strides, name), offset
    raise ValueError(f"{name}: the tensor has no data, b64 or binary_data_size payload")


def decode_outputs(body: Any, binary: memoryview) -> dict[str, NDArray]:
    """The `outputs` of an execute response, by name, in the order the JSON lists them."""
    outputs = body.get("outputs") if isinstance(body, Mapping) else None
    if not isinstance(outputs, Mapping):
        raise ValueError("the response has no `outputs` object")
    result: dict[str, NDArray] = {}
    offset = 0
    for name, tensor in outputs.items():
        result[name], offset = decode_tensor(tensor, binary, offset, name)
    if offset != len(binary):
        raise ValueError(f"{len(binary) - offset} trailing bytes after the binary tensors")
    return result
