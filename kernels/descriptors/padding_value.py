"""PaddingValue conversion (SEMANTICS.md §4 and the decisions table).

Without PaddingValueDataType the value is DML_PADDING_OPERATOR_DESC's 32-bit FLOAT: float
tensors get it rounded to their type (FLOAT64 gets float64(float32(v))), integer tensors get
it truncated toward zero. With PaddingValueDataType (PADDING1) the value is exact in that type.
Values the type cannot hold are refused rather than clamped.
"""

from __future__ import annotations

import functools
import math
import warnings

import numpy as np

from ..directml import PaddingMode
from ..dtypes import DataType
from ._base import Errors
from .operators import PaddingOperator


def padding_value_errors(op: PaddingOperator, data_type: DataType, errors: Errors) -> None:
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
