"""PADDING / PADDING1, SEMANTICS.md §4, with WRAP (feature level 6.4).

PaddingValue: without PaddingValueDataType the value is DML_PADDING_OPERATOR_DESC's 32-bit
FLOAT: float tensors get it rounded to their type (FLOAT64 gets float64(float32(v))), integer
tensors get it truncated toward zero. With PaddingValueDataType (PADDING1) the value is exact
in that type. Values the type cannot hold are refused rather than clamped.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, ClassVar, Literal, cast

import numpy as np

from ..descriptors import (
    DataTypeField,
    Errors,
    OperatorBase,
    OperatorType,
    PerAxis,
    TensorDesc,
    strip_prefix,
)
from ..directml import PaddingMode
from ..dtypes import DataType, from_numpy
from ..reference.padding import padding
from ._sdk import ArrayLike, NDArray, to_host
from ._spec import Example, OperatorSpec

__all__ = ["SPEC", "PaddingOperator", "fill_value", "helper"]


class PaddingOperator(OperatorBase):
    """DML_PADDING_OPERATOR_DESC / DML_PADDING1_OPERATOR_DESC, with WRAP (feature level 6.4)."""

    type: OperatorType[Literal["PADDING"]] = "PADDING"
    padding_mode: Annotated[PaddingMode, strip_prefix("DML_PADDING_MODE_")] = PaddingMode.CONSTANT
    padding_value: int | float = 0
    padding_value_data_type: DataTypeField | None = None
    start_padding: PerAxis | None = None
    end_padding: PerAxis | None = None
    dimension_arrays: ClassVar[tuple[str, ...]] = ("start_padding", "end_padding")
    # every dimension is padded: DimensionCount is the input's rank
    rank_tensors: ClassVar[tuple[str, ...]] = ("InputTensor",)
    leading_axes: ClassVar[int] = 0
    tensor_layouts: ClassVar[Mapping[str, str]] = {
        "InputTensor": "{ Size0, Size1, ... }, every dimension padded (an image "
        "{ BatchCount, ChannelCount, Height, Width } takes StartPadding { 0, 0, Top, Left })",
        "OutputTensor": "InputTensor's Sizes plus StartPadding and EndPadding",
    }

    def infer_output(self, errors: Errors) -> TensorDesc | None:
        x = self.input_tensor
        assert x is not None and self.start_padding is not None and self.end_padding is not None
        _padding_value_errors(self, x.data_type, errors)
        sizes = tuple(
            s if s == -1 else s + a + b
            for s, a, b in zip(x.sizes, self.start_padding, self.end_padding, strict=True)
        )
        if x.has_wildcard_batch:
            errors.check(
                self.start_padding[0] == 0 and self.end_padding[0] == 0,
                ("StartPadding", 0),
                "a variable (-1) batch cannot be padded",
            )
        return TensorDesc(data_type=x.data_type, sizes=sizes)


def _padding_value_errors(op: PaddingOperator, data_type: DataType, errors: Errors) -> None:
    if op.padding_value_data_type is not None:
        errors.check(
            op.padding_value_data_type == data_type,
            ("PaddingValueDataType",),
            f"PaddingValueDataType ({op.padding_value_data_type.value}) must equal the "
            f"OutputTensor DataType ({data_type.value})",
        )
    if op.padding_mode != PaddingMode.CONSTANT or errors:
        return
    try:
        fill_value(op, data_type)
    except ValueError as exc:
        errors.add(("PaddingValue",), str(exc))


def fill_value(op: PaddingOperator, data_type: DataType) -> np.generic:
    """The padding value as an exact scalar of the tensor's type; ValueError if it cannot be."""
    value = op.padding_value
    return _converted(type(value).__name__, value, op.padding_value_data_type, data_type)


@functools.lru_cache(maxsize=1024)
def _converted(
    kind: str, value: int | float, typed: DataType | None, data_type: DataType
) -> np.generic:
    # Validation and execution both ask for the value; `kind` keeps 1, 1.0 and True apart.
    if isinstance(value, bool):
        raise ValueError("PaddingValue must be a number")
    try:
        float(value)
    except OverflowError:
        raise ValueError(f"PaddingValue {value} is out of range for {data_type.value}") from None
    if typed is not None:
        return _exact(value, data_type)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        as_float32 = np.float32(value)
    if math.isfinite(value) and not math.isfinite(as_float32):
        raise ValueError(
            f"PaddingValue {value} does not fit a FLOAT32, the type of DML_PADDING_OPERATOR_DESC's "
            "PaddingValue (give PaddingValueDataType for a typed value)"
        )
    if data_type.is_float:
        return _to_float(as_float32, data_type, shown=value)
    if not math.isfinite(as_float32):
        raise ValueError(f"PaddingValue {value} cannot be converted to {data_type.value}")
    return _integer(
        int(np.trunc(as_float32)), data_type, shown=value, negative=bool(as_float32 < 0)
    )


def _exact(value: int | float, data_type: DataType) -> np.generic:
    if data_type.is_float:
        return _to_float(value, data_type, shown=value)
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError(
                f"PaddingValue {value} is not a whole number, so it is no {data_type.value} value"
            )
        value = int(value)
    return _integer(value, data_type, shown=value, negative=value < 0)


def _to_float(value: float | np.floating, data_type: DataType, *, shown: float) -> np.generic:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        converted: np.generic = data_type.numpy.type(value)
    if math.isfinite(float(value)) and not math.isfinite(float(converted)):
        raise ValueError(f"PaddingValue {shown} is out of range for {data_type.value}")
    return converted


def _integer(value: int, data_type: DataType, *, shown: float, negative: bool) -> np.generic:
    info = np.iinfo(data_type.numpy)
    if negative and info.min == 0:
        raise ValueError(f"PaddingValue {shown} is negative, but {data_type.value} is unsigned")
    if not info.min <= value <= info.max:
        raise ValueError(
            f"PaddingValue {shown} is out of range for {data_type.value} "
            f"[{info.min}, {info.max}] (after truncation toward zero)"
        )
    result: np.generic = data_type.numpy.type(value)
    return result


def _arguments(op: PaddingOperator, arrays: Mapping[str, Any]) -> tuple[Any, ...]:
    assert op.input_tensor is not None
    dtype = op.input_tensor.data_type
    constant = op.padding_mode == PaddingMode.CONSTANT
    value = fill_value(op, dtype) if constant else dtype.numpy.type(0)
    return (
        arrays["InputTensor"], op.start_padding, op.end_padding, op.padding_mode.value, value
    )  # fmt: skip


def helper(
    x: ArrayLike,
    start_padding: Sequence[int],
    end_padding: Sequence[int],
    mode: str | PaddingMode = "CONSTANT",
    value: float = 0,
) -> tuple[PaddingOperator, dict[str, NDArray]]:
    """PADDING over every dimension; `value` (CONSTANT) is exact in `x`'s own type."""
    array = to_host(x)
    op = PaddingOperator(
        start_padding=tuple(start_padding),
        end_padding=tuple(end_padding),
        # the model validates the spelling (prefixed DirectML names included)
        padding_mode=cast(PaddingMode, mode),
        padding_value=value,
        # PADDING1: the value in the tensor's own type, so 64-bit values stay exact.
        padding_value_data_type=from_numpy(array.dtype),
    )
    return op, {"InputTensor": array}


SPEC = OperatorSpec(
    model=PaddingOperator,
    name="padding",
    reference=padding,
    launchers={
        "numpy": "dmlserve.kernels.cpu.padding:padding",
        "cupy": "dmlserve.kernels.cupy_backend.padding:padding",
    },
    arguments=_arguments,
    taps=lambda op: 1,
    warmup=Example(
        {
            "type": "PADDING",
            "PaddingMode": "REFLECTION",
            "StartPadding": [0, 0, 1, 1],
            "EndPadding": [0, 0, 1, 1],
        },
        {"InputTensor": TensorDesc(data_type=DataType.FLOAT32, sizes=(1, 1, 2, 2))},
    ),
    helper=helper,
)
