"""AVERAGE_POOLING / AVERAGE_POOLING1, SEMANTICS.md §5: window means, FLOAT16 and FLOAT32."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

import numpy as np

from ..descriptors import Errors, OperatorBase, OperatorType, PerAxis, TensorDesc, window_counts
from ..dtypes import DataType
from ..reference.average_pooling import average_pooling
from ._sdk import ArrayLike, Dims, NDArray, per_axis, to_host, window_fields
from ._spec import Example, OperatorSpec, window_of

__all__ = ["SPEC", "AveragePoolingOperator", "first_window_in_padding", "helper"]

_POOLING_TYPES = (DataType.FLOAT32, DataType.FLOAT16)


class AveragePoolingOperator(OperatorBase):
    """DML_AVERAGE_POOLING1_OPERATOR_DESC (AVERAGE_POOLING with Dilations)."""

    type: OperatorType[Literal["AVERAGE_POOLING"]] = "AVERAGE_POOLING"
    strides: PerAxis | None = None
    window_size: PerAxis
    start_padding: PerAxis | None = None
    end_padding: PerAxis | None = None
    dilations: PerAxis | None = None
    include_padding: bool = False
    dimension_arrays: ClassVar[tuple[str, ...]] = (
        "strides",
        "window_size",
        "start_padding",
        "end_padding",
        "dilations",
    )
    dimension_count_range: ClassVar[tuple[int, int]] = (1, 3)
    tensor_layouts: ClassVar[Mapping[str, str]] = {
        "InputTensor": "{ BatchCount, ChannelCount, [[Depth], Height], Width }",
        "OutputTensor": "{ BatchCount, ChannelCount, [[Depth], Height], Width }",
    }

    def infer_output(self, errors: Errors) -> TensorDesc | None:
        x = self.input_tensor
        assert x is not None
        errors.check(
            x.data_type in _POOLING_TYPES,
            ("InputTensor", "DataType"),
            f"AVERAGE_POOLING supports FLOAT32 and FLOAT16 tensors, got {x.data_type.value}",
        )
        out = window_counts(
            self, x.sizes[2:], self.window_size, errors, window_field="WindowSize",
            source="InputTensor",
        )  # fmt: skip
        if out is None:
            return None
        if not self.include_padding:
            axes = zip(
                x.sizes[2:], self.window_size, self.strides or (), self.dilations or (),
                self.start_padding or (), out, strict=True,
            )  # fmt: skip
            for d, (s, k, st, dl, a, n) in enumerate(axes):
                o = first_window_in_padding(s, k, st, dl, a, n)
                errors.check(
                    o is None,
                    ("IncludePadding",),
                    f"with IncludePadding false, the window at output index {o} of spatial "
                    f"dimension {d} lies wholly in the padding, and its average would divide by "
                    "zero; use less padding or set IncludePadding",
                )
        return TensorDesc(data_type=x.data_type, sizes=(*x.sizes[:2], *out))


def first_window_in_padding(
    size: int, window: int, stride: int, dilation: int, start: int, count: int
) -> int | None:
    """The first window whose taps o*stride - start + t*dilation all miss [0, size), or None."""
    if (count - 1) * stride - start >= size:  # windows that start past the input
        return math.ceil((size + start) / stride)
    if (window - 1) * dilation - start < 0:  # the first window ends before the input
        return 0
    if dilation <= size:  # consecutive taps cannot jump over the input
        return None
    # A window starting at p < 0 first lands at p mod dilation, which may skip the input;
    # that residue repeats with period dilation / gcd(stride, dilation).
    negative = min(count, -(-start // stride))
    period = dilation // math.gcd(stride, dilation)
    chunk = 1 << 20
    for lo in range(0, min(negative, period), chunk):
        o = np.arange(lo, min(negative, period, lo + chunk), dtype=np.int64)
        hit = np.nonzero((o * stride - start) % dilation >= size)[0]
        if hit.size:
            return int(o[hit[0]])
    return None


def _arguments(op: AveragePoolingOperator, arrays: Mapping[str, Any]) -> tuple[Any, ...]:
    return arrays["InputTensor"], window_of(op, op.window_size), op.include_padding


def helper(
    x: ArrayLike,
    window_size: Dims,
    strides: Dims | None = None,
    dilations: Dims | None = None,
    start_padding: Dims | None = None,
    end_padding: Dims | None = None,
    include_padding: bool = False,
) -> tuple[AveragePoolingOperator, dict[str, NDArray]]:
    """AVERAGE_POOLING (with AVERAGE_POOLING1's Dilations) of `x` (N, C, *S), float16/32."""
    array = to_host(x)
    count = max(array.ndim - 2, 1)
    op = AveragePoolingOperator(
        window_size=per_axis(window_size, count),
        include_padding=include_padding,
        **window_fields(count, strides, dilations, start_padding, end_padding),
    )
    return op, {"InputTensor": array}


SPEC = OperatorSpec(
    model=AveragePoolingOperator,
    name="average_pooling",
    reference=average_pooling,
    launchers={
        "numpy": "dmlserve.kernels.cpu.average_pooling:average_pooling",
        "cupy": "dmlserve.kernels.cupy_backend.average_pooling:average_pooling",
    },
    arguments=_arguments,
    taps=lambda op: math.prod(op.window_size),
    warmup=Example(
        {"type": "AVERAGE_POOLING", "WindowSize": [2, 2]},
        {"InputTensor": TensorDesc(data_type=DataType.FLOAT32, sizes=(1, 1, 3, 3))},
    ),
    helper=helper,
    sums=True,
)
