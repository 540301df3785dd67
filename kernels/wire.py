"""Tensors on the wire: `data` (JSON numbers), `b64`, and the KServe binary framing.

One codec for the service's `/v1` and `/v2` and for the SDK; it lives in `kernels`, the one
package both import. It knows JSON values, bytes and NumPy, no HTTP: the framing is the byte
layout of a body (JSON header, then each binary tensor's bytes), whatever carries it.

Layouts and byte counts are checked against each other and the limits before any array is
built; byte payloads become arrays through `np.frombuffer`, never per-element objects. With
Strides the payload is a flat DML buffer that may be longer than the extent it addresses (a
row pitch, DirectML's 4-byte rounding), never shorter, all its bytes counting against the
limits; a packed buffer is exact, or rounded up to 4 bytes. Errors: `DescriptorError` for a
broken rule, `LimitExceededError` over a limit, `FramingError` for a binary section that does
not match its JSON header; the caller decides what each becomes.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NoReturn

import numpy as np

from ._array import is_cupy_array
from ._json_numbers import flat_numbers, floats, integers
from .directml import MAX_TENSOR_RANK
from .dtypes import DataType, from_numpy, parse_data_type
from .errors import DescriptorError, ErrorItem, LimitExceededError, Loc

#: A tensor's payload: `data` (a JSON array), `b64`, or bytes in the binary section.
Encoding = Literal["json", "b64", "binary"]
ENCODINGS: tuple[Encoding, ...] = ("json", "b64", "binary")
_PAYLOAD_FIELD = {"json": "data", "b64": "b64", "binary": "parameters.binary_data_size"}

#: The byte length of a framed body's JSON header (the KServe binary tensor extension).
HEADER_LENGTH = "Inference-Header-Content-Length"
_DIGITS = re.compile(r"^[0-9]{1,18}$")  # ASCII digits only: str.isdigit() accepts "²"


class FramingError(ValueError):
    """A framed body whose binary section does not match what its JSON header declares."""

    def __init__(self, detail: str, errors: Sequence[ErrorItem] = ()) -> None:
        super().__init__(detail)
        self.errors: list[ErrorItem] = list(errors)


def buffer_extent(sizes: Sequence[int], strides: Sequence[int] | None) -> int:
    """Elements from the first addressed element to the last, inclusive: the length a flat
    buffer needs for these Sizes and element Strides (DMLCalcBufferTensorSize / item size).

    Without strides the tensor is packed row-major; a zero size addresses nothing.
    """
    if strides is None:
        return math.prod(sizes)
    if 0 in sizes:
        return 0
    return sum((n - 1) * abs(s) for n, s in zip(sizes, strides, strict=True)) + 1


@dataclass(frozen=True)
class Layout:
    """A checked DataType, Sizes and element Strides (None: packed row-major)."""

    data_type: DataType
    sizes: tuple[int, ...]
    strides: tuple[int, ...] | None

    @property
    def extent(self) -> int:
        """Elements the flat buffer must hold at least."""
        return buffer_extent(self.sizes, self.strides)

    @property
    def nbytes(self) -> int:
        """Bytes of the logical (packed) tensor."""
        return math.prod(self.sizes) * self.data_type.itemsize


@dataclass(frozen=True)
class HostTensor(Layout):
    """A decoded tensor: its layout and the flat host buffer, cut to the addressed extent."""

    buffer: np.ndarray  # 1-D, of data_type's dtype, `extent` elements

    def view(self) -> np.ndarray:
        """The tensor as an array (a strided read-only view over the buffer, never a copy)."""
        view: np.ndarray = as_tensor_view(self.buffer, self.sizes, self.strides)
        return view


def as_tensor_view(buffer: Any, sizes: Sequence[int], strides: Sequence[int] | None) -> Any:
    """Sizes/Strides applied to a flat NumPy or CuPy buffer already known to be long enough."""
    if strides is None:
        return buffer.reshape(tuple(sizes))
    byte_strides = tuple(s * buffer.dtype.itemsize for s in strides)
    if is_cupy_array(buffer):
        import cupy

        return cupy.lib.stride_tricks.as_strided(buffer, shape=tuple(sizes), strides=byte_strides)
    return np.lib.stride_tricks.as_strided(
        buffer, shape=tuple(sizes), strides=byte_strides, writeable=False
    )


def check_layout(
    data_type: object,
    sizes: object,
    strides: object,
    loc: Loc = (),
    max_tensor_bytes: int | None = None,
) -> Layout:
    """Validate a tensor's DataType, Sizes and Strides as they came off the wire.

    The byte limit is checked on the logical size and on the addressed extent before anything
    is allocated (LimitExceededError), the shape rules after (DescriptorError).
    """
    try:
        dt = parse_data_type(data_type)
    except ValueError as exc:
        _bad(loc, "DataType", str(exc))
    if not isinstance(sizes, (list, tuple)) or not all(type(n) is int for n in sizes):
        _bad(loc, "Sizes", "Sizes must be a list of integers")
    if not 1 <= len(sizes) <= MAX_TENSOR_RANK:
        _bad(loc, "Sizes", f"a tensor has 1 to {MAX_TENSOR_RANK} dimensions, got {len(sizes)}")
    if min(sizes) < 1:
        _bad(loc, "Sizes", "every size must be at least 1 (DirectML: a size of zero is invalid)")
    shape = tuple(sizes)
    _check_limit(math.prod(shape) * dt.itemsize, max_tensor_bytes, "tensor", loc)
    st: tuple[int, ...] | None = None
    if strides is not None:
        if not isinstance(strides, (list, tuple)) or not all(type(s) is int for s in strides):
            _bad(loc, "Strides", "Strides must be a list of integers")
        if len(strides) != len(shape):
            _bad(
                loc, "Strides", f"Strides needs {len(shape)} entries like Sizes, got {len(strides)}"
            )
        if min(strides) < 0:
            _bad(loc, "Strides", "strides are element counts of at least 0")
        st = tuple(strides)
    layout = Layout(dt, shape, st)
    _check_limit(layout.extent * dt.itemsize, max_tensor_bytes, "buffer of", loc)
    return layout


def decode_tensor(
    data_type: object,
    sizes: object,
    strides: object = None,
    *,
    data: Any = None,
    b64: str | None = None,
    binary_size: object = None,
    section: BinarySection | None = None,
    loc: Loc = (),
    max_tensor_bytes: int | None = None,
    accepts: Sequence[Encoding] = ENCODINGS,
) -> tuple[HostTensor, Encoding]:
    """One tensor from its wire fields, and the encoding its payload came in.

    Exactly one payload of those `accepts` names must be given; `binary_size` bytes are taken
    from `section`, the binary part of a framed body, in the order tensors are decoded.
    """
    layout = check_layout(data_type, sizes, strides, loc, max_tensor_bytes)
    given = {"json": data, "b64": b64, "binary": binary_size}
    present = [e for e in ENCODINGS if given[e] is not None]
    if len(present) != 1 or present[0] not in accepts:
        *others, last = [_PAYLOAD_FIELD[e] for e in accepts]
        names = f"{', '.join(others)} or {last}" if others else last
        raise DescriptorError.at(loc, f"give exactly one payload: {names}")
    encoding = present[0]
    if encoding == "binary":
        if type(binary_size) is not int or binary_size < 0:
            _bad((*loc, "parameters"), "binary_data_size", "must be a non-negative integer")
        if section is None:
            section = BinarySection(framed=False)
        raw = section.take(binary_size, (*loc, "parameters", "binary_data_size"))
        return _from_bytes(layout, raw, loc, max_tensor_bytes, framed=True), encoding
    if encoding == "b64":
        if not isinstance(b64, str):
            _bad(loc, "b64", "b64 must be a string")
        # The decoded size, known from the text's length, counts before anything is decoded.
        size = len(b64) // 4 * 3 - b64[-2:].count("=")
        _check_limit(size, max_tensor_bytes, "buffer of", loc)
        try:
            raw_b = base64.b64decode(b64, validate=True)
        except (binascii.Error, ValueError) as exc:
            _bad(loc, "b64", f"not valid base64: {exc}")
        return _from_bytes(layout, raw_b, loc, max_tensor_bytes, framed=False), encoding
    return _from_data(layout, data, loc, max_tensor_bytes), encoding


def _from_bytes(
    layout: Layout, raw: bytes | memoryview, loc: Loc, limit: int | None, *, framed: bool
) -> HostTensor:
    """A tensor over received bytes, zero-copy; too few bytes (or too many, packed) refused."""
    dt, count = layout.data_type, layout.extent
    _check_limit(len(raw), limit, "buffer of", loc)
    need = count * dt.itemsize
    longest = len(raw) if layout.strides is not None else need + (-need % 4)
    if not need <= len(raw) <= longest:
        what = "Sizes/Strides address" if layout.strides is not None else "Sizes need"
        msg = f"{what} {need} bytes of {dt.value}, but {len(raw)} bytes were sent"
        if framed:
            raise FramingError(msg, [{"loc": (*loc, "binary_data_size"), "msg": msg}])
        raise DescriptorError.at(loc, msg)
    return HostTensor(dt, layout.sizes, layout.strides, np.frombuffer(raw, dt.numpy, count))


def _from_data(layout: Layout, values: Any, loc: Loc, limit: int | None) -> HostTensor:
    """A tensor from a JSON array of numbers (flat row-major; nested lists are flattened).

    Integers stay exact (64-bit extremes included); a value the type cannot hold is refused,
    naming its element, never silently wrapped or rounded to infinity. Float tensors take
    NaN and the infinities (the `NaN`/`Infinity` literals, as Triton's JSON); a boolean is
    not a number.
    """
    dt, count = layout.data_type, layout.extent
    flat, kinds = flat_numbers(values, loc)
    _check_limit(len(flat) * dt.itemsize, limit, "buffer of", loc)
    if len(flat) < count or (layout.strides is None and len(flat) != count):
        what = "Sizes/Strides address" if layout.strides is not None else "Sizes need"
        _bad(loc, "data", f"{what} {count} elements, but data has {len(flat)}")
    if dt.numpy.kind in "iu":
        buffer = integers(flat, kinds, dt, loc)
    else:
        buffer = floats(flat, kinds, dt, loc)
    if len(buffer) != count:  # Strides address fewer elements than were sent
        buffer = buffer[:count]
    return HostTensor(dt, layout.sizes, layout.strides, buffer)


def _check_limit(nbytes: int, limit: int | None, what: str, loc: Loc) -> None:
    if limit is not None and nbytes > limit:
        raise LimitExceededError("max_tensor_bytes", limit, nbytes, f"{what} {_dotted(loc)}")


def _bad(loc: Loc, field: str | int, msg: str) -> NoReturn:
    raise DescriptorError.at((*loc, field), msg)


def _dotted(loc: Iterable[str | int]) -> str:
    return ".".join(str(p) for p in loc)


# --- the binary framing ----------------------------------------------------------------------


class BinarySection:
    """The bytes after a framed body's JSON header, handed out tensor by tensor, in order."""

    def __init__(self, data: memoryview | bytes = b"", *, framed: bool = True) -> None:
        self.framed = framed
        self.data = memoryview(data)
        self.offset = 0

    def take(self, size: int, loc: Loc) -> memoryview:
        if not self.framed:
            raise FramingError(
                f"{_dotted(loc)} has binary_data_size but the body is not binary framed "
                f"(send {HEADER_LENGTH})"
            )
        end = self.offset + size
        if end > len(self.data):
            raise FramingError(
                f"binary_data_size values need {end} bytes after the JSON header, "
                f"the body has {len(self.data)}"
            )
        chunk = self.data[self.offset : end]
        self.offset = end
        return chunk

    def finish(self) -> None:
        """Every byte of the section must belong to a tensor."""
        if self.framed and self.offset != len(self.data):
            raise FramingError(
                f"the body has {len(self.data) - self.offset} bytes after the last binary tensor"
            )


def parse_header_length(text: str) -> int:
    """The JSON header's byte length as the framing header gives it (ASCII digits)."""
    value = text.strip()
    if not _DIGITS.match(value):
        raise FramingError(f"{HEADER_LENGTH} must be a byte count, got {text[:40]!r}")
    return int(value)


def split_framed(body: memoryview, header_length: int) -> tuple[memoryview, memoryview]:
    """A framed body as its JSON header and the binary section after it."""
    if header_length > len(body):
        raise FramingError(
            f"{HEADER_LENGTH} is {header_length} but the body has only {len(body)} bytes"
        )
    return body[:header_length], body[header_length:]


# --- encoding --------------------------------------------------------------------------------


def packed_bytes(array: np.ndarray) -> memoryview:
    """The array's bytes, row-major little-endian, without a copy when already so."""
    a = np.ascontiguousarray(array)
    if a.dtype.byteorder == ">":
        a = a.astype(a.dtype.newbyteorder("<"))
    return a.data.cast("B")


def _wire_array(array: np.ndarray, compact: bool) -> tuple[np.ndarray, list[int] | None]:
    """The array whose elements are sent and, when they are not the tensor packed row-major,
    the element Strides that address them.

    With `compact`, a view whose elements overlap (0-stride broadcasts, sliding windows) is
    sent as the smallest flat buffer its strides address, with Strides, instead of expanded;
    every other layout (transposes, slices with gaps) is packed row-major.
    """
    itemsize = array.itemsize
    if not compact or array.flags.c_contiguous or array.size == 0:
        return array, None
    if any(s < 0 or s % itemsize for s in array.strides):
        return array, None
    strides = [s // itemsize for s in array.strides]
    span = buffer_extent(array.shape, strides)
    if span >= array.size:
        return array, None
    # Every byte from the first to the last addressed element belongs to the base allocation,
    # so this flat view stays inside it.
    return np.lib.stride_tricks.as_strided(array, shape=(span,), strides=(itemsize,)), strides


#: The longest text of one float element in `data` (the shortest round-trip form, as in
#: "-0.0000012345678" or "-2.2250738585072014e-308"; FLOAT16 is written as its FLOAT32 value).
_FLOAT_TEXT = {2: 17, 4: 17, 8: 25}


def text_bytes(data_type: DataType, count: int, encoding: Encoding) -> int:
    """The most bytes the `data` or `b64` text of `count` elements can take (0 for `binary`):
    a bound known before the text (or the tensor) is built."""
    if encoding == "binary":
        return 0
    if encoding == "b64":
        return -(-count * data_type.itemsize // 3) * 4
    if data_type.is_float:
        element = _FLOAT_TEXT[data_type.itemsize]
    else:
        info = np.iinfo(data_type.numpy)
        element = max(len(str(info.min)), len(str(info.max)))
    return count * (element + 1) + 1  # a separator per element, and the brackets


def encode_payload(
    array: np.ndarray, encoding: Encoding
) -> tuple[dict[str, Any], memoryview | None]:
    """The array's elements, row-major, as a payload's JSON fields; for `binary` its bytes.

    `data` is a flat NumPy array: orjson writes it natively, other encoders need `.tolist()`.
    """
    if encoding == "json":
        flat = np.ascontiguousarray(array).reshape(-1)
        return {
            "data": flat if flat.dtype.isnative else flat.astype(flat.dtype.newbyteorder("="))
        }, None
    buffer = packed_bytes(array)
    if encoding == "b64":
        return {"b64": base64.b64encode(buffer).decode("ascii")}, None
    return {"parameters": {"binary_data_size": buffer.nbytes}}, buffer


def encode_tensor(
    array: np.ndarray, encoding: Encoding, *, compact: bool = False
) -> tuple[dict[str, Any], memoryview | None]:
    """A tensor value `{DataType, Sizes[, Strides], payload}` and, for `binary`, its bytes.

    `compact` sends overlapping views (broadcasts) as their smallest buffer with Strides.
    """
    sent, strides = _wire_array(array, compact)
    tensor: dict[str, Any] = {"DataType": from_numpy(array.dtype).value, "Sizes": [*array.shape]}
    if strides is not None:
        tensor["Strides"] = strides
    fields, chunk = encode_payload(sent, encoding)
    tensor.update(fields)
    return tensor, chunk
