"""Tensor values on the wire: `data` (flat JSON array), `b64`, and KServe binary framing.

Byte payloads (b64 and binary) become arrays through `np.frombuffer` over the received bytes;
no per-element Python object is ever made for them. Sizes, strides and byte counts are checked
against each other and against the configured limits before any array is built.
"""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NoReturn, cast

import numpy as np

from dmlserve.kernels.directml import MAX_TENSOR_RANK as MAX_RANK
from dmlserve.kernels.dtypes import DataType, parse_data_type
from dmlserve.service.errors import BadRequestError, PayloadTooLargeError, UnprocessableError

Encoding = Literal["json", "b64", "binary"]
Loc = tuple[str | int, ...]


@dataclass(frozen=True)
class HostTensor:
    """A decoded tensor: its flat element buffer plus the sizes/strides that address it."""

    data_type: DataType
    sizes: tuple[int, ...]
    strides: tuple[int, ...] | None  # element strides; None means packed row-major
    buffer: np.ndarray  # 1-D, of data_type's dtype, exactly the addressed extent

    @property
    def element_count(self) -> int:
        return math.prod(self.sizes)

    @property
    def nbytes(self) -> int:
        return self.element_count * self.data_type.itemsize

    def view(self) -> np.ndarray:
        """The tensor as an array (a strided view over the buffer, never a copy)."""
        view: np.ndarray = as_tensor_view(self.buffer, self.sizes, self.strides)
        return view


def as_tensor_view(buffer: Any, sizes: Sequence[int], strides: Sequence[int] | None) -> Any:
    """Sizes/strides applied to a flat NumPy or CuPy buffer already checked to be long enough."""
    if strides is None:
        return buffer.reshape(tuple(sizes))
    item = buffer.dtype.itemsize
    byte_strides = tuple(s * item for s in strides)
    if isinstance(buffer, np.ndarray):
        return np.lib.stride_tricks.as_strided(
            buffer, shape=tuple(sizes), strides=byte_strides, writeable=False
        )
    import cupy  # only reached with CuPy buffers

    return cupy.lib.stride_tricks.as_strided(buffer, shape=tuple(sizes), strides=byte_strides)


def addressed_elements(sizes: Sequence[int], strides: Sequence[int] | None) -> int:
    """Elements a buffer must hold for these sizes/strides (DMLCalcBufferTensorSize / itemsize)."""
    if strides is None:
        return math.prod(sizes)
    return sum((n - 1) * s for n, s in zip(sizes, strides, strict=True)) + 1


def check_layout(
    data_type: object,
    sizes: Sequence[Any],
    strides: Sequence[Any] | None,
    loc: Loc,
    max_tensor_bytes: int,
) -> tuple[DataType, tuple[int, ...], tuple[int, ...] | None, int]:
    """Validate a tensor's DataType/Sizes/Strides; return them with the buffer's element count.

    The byte limit is checked on the logical size before anything is allocated (413), then
    the shape rules (422).
    """
    try:
        dt = parse_data_type(data_type)
    except ValueError as exc:
        raise UnprocessableError(
            str(exc), errors=[{"loc": [*loc, "DataType"], "msg": str(exc)}]
        ) from None
    if not all(type(n) is int for n in sizes):
        _bad(loc, "Sizes", "Sizes must be integers")
    if not 1 <= len(sizes) <= MAX_RANK:
        _bad(loc, "Sizes", f"a tensor has 1 to {MAX_RANK} dimensions, got {len(sizes)}")
    if any(n < 1 for n in sizes):
        _bad(loc, "Sizes", "every size must be at least 1 (DirectML: a size of zero is invalid)")
    shape = tuple(int(n) for n in sizes)
    nbytes = math.prod(shape) * dt.itemsize
    if nbytes > max_tensor_bytes:
        raise PayloadTooLargeError(
            "max_tensor_bytes", max_tensor_bytes, nbytes, f"tensor {_dotted(loc)}"
        )
    st: tuple[int, ...] | None = None
    if strides is not None:
        if not all(type(s) is int for s in strides):
            _bad(loc, "Strides", "Strides must be integers")
        if len(strides) != len(shape):
            _bad(
                loc, "Strides", f"Strides needs {len(shape)} entries like Sizes, got {len(strides)}"
            )
        if any(s < 0 for s in strides):
            _bad(loc, "Strides", "strides are element counts of at least 0")
        st = tuple(int(s) for s in strides)
    count = addressed_elements(shape, st)
    if count * dt.itemsize > max_tensor_bytes:
        raise PayloadTooLargeError(
            "max_tensor_bytes", max_tensor_bytes, count * dt.itemsize, f"buffer of {_dotted(loc)}"
        )
    return dt, shape, st, count


def tensor_from_bytes(
    dt: DataType,
    shape: tuple[int, ...],
    strides: tuple[int, ...] | None,
    count: int,
    raw: bytes | memoryview,
    loc: Loc,
    *,
    framing: bool,
) -> HostTensor:
    """A tensor over received bytes (zero-copy); the length must match what the layout needs.

    A DirectML buffer may be rounded up to a multiple of 4 bytes, so up to 3 extra bytes are
    accepted and ignored.
    """
    need = count * dt.itemsize
    if not need <= len(raw) <= need + (-need % 4):
        msg = f"Sizes/Strides address {need} bytes of {dt.value}, but {len(raw)} bytes were sent"
        if framing:
            raise BadRequestError(msg, errors=[{"loc": [*loc, "binary_data_size"], "msg": msg}])
        raise UnprocessableError(msg, errors=[{"loc": list(loc), "msg": msg}])
    buffer = np.frombuffer(raw, dtype=dt.numpy, count=count)
    return HostTensor(dt, shape, strides, buffer)


def decode_b64(text: str, loc: Loc) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        _bad(loc, "b64", f"not valid base64: {exc}")


def tensor_from_json_data(
    dt: DataType,
    shape: tuple[int, ...],
    strides: tuple[int, ...] | None,
    count: int,
    values: Any,
    loc: Loc,
) -> HostTensor:
    """A tensor from a JSON array of numbers (flat row-major; nested lists are flattened).

    Integers stay exact (64-bit extremes included); a value the type cannot hold is a 422,
    never a silent wrap or rounding to infinity.
    """
    flat = _flat_numbers(values, loc)
    if len(flat) != count:
        _bad(loc, "data", f"Sizes/Strides address {count} elements, but data has {len(flat)}")
    kinds = set(map(type, flat))
    target = dt.numpy
    if target.kind in "iu":
        if float in kinds:
            f = np.asarray(flat, dtype=np.float64)
            if not np.array_equal(f, np.trunc(f)):
                _bad(loc, "data", f"{dt.value} data must be integers")
            info = np.iinfo(target)
            if f.min() < info.min or f.max() > info.max:
                _bad(loc, "data", f"a value is outside the range of {dt.value}")
            buffer = f.astype(target)
        else:
            try:
                buffer = np.array(flat, dtype=target)
            except OverflowError:
                _bad(loc, "data", f"a value is outside the range of {dt.value}")
    else:
        if int in kinds and max(abs(v) for v in flat if type(v) is int) > 2**53:
            # Integers that a float cannot hold exactly are a client error, not a rounding.
            _bad(loc, "data", f"an integer is too large to be represented as {dt.value}")
        with np.errstate(over="ignore"):
            buffer = np.asarray(flat, dtype=np.float64).astype(target)
        if not np.isfinite(buffer).all():
            _bad(loc, "data", f"a value is outside the range of {dt.value}")
    return HostTensor(dt, shape, strides, buffer)


def _flat_numbers(values: Any, loc: Loc) -> list[Any]:
    if not isinstance(values, list):
        _bad(loc, "data", "data must be a JSON array of numbers")
    if any(type(v) is list for v in values):
        try:
            values = np.asarray(values, dtype=object).reshape(-1).tolist()
        except ValueError:
            _bad(loc, "data", "nested data must be rectangular; send a flat row-major array")
    if not set(map(type, values)) <= {int, float, bool}:
        _bad(loc, "data", "data must hold numbers only")
    return cast(list[Any], values)


def _bad(loc: Loc, field: str, msg: str) -> NoReturn:
    raise UnprocessableError(
        f"{_dotted((*loc, field))}: {msg}", errors=[{"loc": [*loc, field], "msg": msg}]
    )


def _dotted(loc: Iterable[str | int]) -> str:
    return ".".join(str(p) for p in loc)


# --- responses -------------------------------------------------------------------------------


def packed_bytes(arr: np.ndarray) -> memoryview:
    """The array's bytes, row-major little-endian, without a copy when already so."""
    a = np.ascontiguousarray(arr)
    if a.dtype.byteorder == ">":
        a = a.astype(a.dtype.newbyteorder("<"))
    return a.data.cast("B")


def json_values(arr: np.ndarray) -> np.ndarray:
    """The flat array orjson serializes as a JSON list (orjson reads NumPy natively)."""
    return np.ascontiguousarray(arr).reshape(-1)


def b64_text(arr: np.ndarray) -> str:
    return base64.b64encode(packed_bytes(arr)).decode("ascii")
