"""Descriptors and inputs for the typed helpers (`fold`, `padding`, ...), as `kernels` models.

The helpers take NumPy-style arguments (snake_case, DirectML's defaults) and turn them into
one operator model plus its named inputs; `execute` does the rest. Nothing here does I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import cast

import numpy as np
import numpy.typing as npt

from dmlserve.kernels import (
    AveragePoolingOperator,
    ConvolutionIntegerOperator,
    FoldOperator,
    PaddingMode,
    PaddingOperator,
    TensorDesc,
    UnfoldOperator,
)
from dmlserve.kernels._array import is_cupy_array
from dmlserve.kernels.dtypes import from_numpy

from ._framing import NDArray, to_host_array

__all__ = [
    "ArrayLike",
    "Dims",
    "fold_call",
    "unfold_call",
    "padding_call",
    "average_pooling_call",
    "convolution_integer_call",
]

#: A tensor: a NumPy array (any strides), a CuPy array (copied to host) or anything
#: `numpy.asarray` takes.
ArrayLike = npt.ArrayLike
#: One value per spatial dimension, or one int for all of them.
Dims = int | Sequence[int]


def _spatial(value: Dims | None, count: int) -> tuple[int, ...] | None:
    """An int stands for the same value on every spatial dimension."""
    if value is None:
        return None
    if isinstance(value, int):
        return (value,) * count
    return tuple(int(v) for v in value)


def _zero_point(value: ArrayLike | None, like: NDArray, *, per_channel: bool) -> NDArray | None:
    """A zero point as DirectML's tensor: a scalar becomes {1,...,1}, a filter's [M] {1,M,1...}.

    Arrays keep their own dtype; Python numbers take the tensor's.
    """
    if value is None:
        return None
    if isinstance(value, np.ndarray) or is_cupy_array(value):
        array = to_host_array(value)
    else:
        array = np.asarray(value, dtype=like.dtype)
    if array.ndim == 0:
        return array.reshape((1,) * like.ndim)
    if per_channel and array.ndim == 1:
        return array.reshape((1, array.shape[0]) + (1,) * (like.ndim - 2))
    return array


def fold_call(
    x: ArrayLike,
    output_size: Sequence[int],
    window_sizes: Dims,
    strides: Dims | None,
    dilations: Dims | None,
    start_padding: Dims | None,
    end_padding: Dims | None,
) -> tuple[FoldOperator, dict[str, NDArray]]:
    array = to_host_array(x)
    if array.ndim != 3:
        raise ValueError(f"FOLD takes a 3-D column tensor (N, C*prod(K), L), got {array.shape}")
    count = len(output_size)
    window = _spatial(window_sizes, count)
    assert window is not None
    channels = array.shape[1] // max(math.prod(window), 1)
    sizes = (array.shape[0], channels, *(int(s) for s in output_size))
    op = FoldOperator(
        window_sizes=window,
        output_tensor=TensorDesc(data_type=from_numpy(array.dtype), sizes=sizes),
        strides=_spatial(strides, count),
        dilations=_spatial(dilations, count),
        start_padding=_spatial(start_padding, count),
        end_padding=_spatial(end_padding, count),
    )
    return op, {"InputTensor": array}


def unfold_call(
    x: ArrayLike,
    window_sizes: Dims,
    strides: Dims | None,
    dilations: Dims | None,
    start_padding: Dims | None,
    end_padding: Dims | None,
) -> tuple[UnfoldOperator, dict[str, NDArray]]:
    array = to_host_array(x)
    count = max(array.ndim - 2, 1)
    window = _spatial(window_sizes, count)
    assert window is not None
    op = UnfoldOperator(
        window_sizes=window,
        strides=_spatial(strides, count),
        dilations=_spatial(dilations, count),
        start_padding=_spatial(start_padding, count),
        end_padding=_spatial(end_padding, count),
    )
    return op, {"InputTensor": array}


def padding_call(
    x: ArrayLike,
    start_padding: Sequence[int],
    end_padding: Sequence[int],
    mode: str,
    value: float,
) -> tuple[PaddingOperator, dict[str, NDArray]]:
    array = to_host_array(x)
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


def average_pooling_call(
    x: ArrayLike,
    window_size: Dims,
    strides: Dims | None,
    dilations: Dims | None,
    start_padding: Dims | None,
    end_padding: Dims | None,
    include_padding: bool,
) -> tuple[AveragePoolingOperator, dict[str, NDArray]]:
    array = to_host_array(x)
    count = max(array.ndim - 2, 1)
    window = _spatial(window_size, count)
    assert window is not None
    op = AveragePoolingOperator(
        window_size=window,
        include_padding=include_padding,
        strides=_spatial(strides, count),
        dilations=_spatial(dilations, count),
        start_padding=_spatial(start_padding, count),
        end_padding=_spatial(end_padding, count),
    )
    return op, {"InputTensor": array}


def convolution_integer_call(
    x: ArrayLike,
    w: ArrayLike,
    x_zero_point: ArrayLike | None,
    w_zero_point: ArrayLike | None,
    strides: Dims | None,
    dilations: Dims | None,
    start_padding: Dims | None,
    end_padding: Dims | None,
    group_count: int,
) -> tuple[ConvolutionIntegerOperator, dict[str, NDArray]]:
    array = to_host_array(x)
    weights = to_host_array(w)
    count = max(array.ndim - 2, 1)
    op = ConvolutionIntegerOperator(
        group_count=group_count,
        strides=_spatial(strides, count),
        dilations=_spatial(dilations, count),
        start_padding=_spatial(start_padding, count),
        end_padding=_spatial(end_padding, count),
    )
    inputs = {"InputTensor": array, "FilterTensor": weights}
    x_zp = _zero_point(x_zero_point, array, per_channel=False)
    w_zp = _zero_point(w_zero_point, weights, per_channel=True)
    if x_zp is not None:
        inputs["InputZeroPointTensor"] = x_zp
    if w_zp is not None:
        inputs["FilterZeroPointTensor"] = w_zp
    return op, inputs
