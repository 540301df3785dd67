"""UNFOLD (im2col), SEMANTICS.md §3: sliding local blocks as columns."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from ..descriptors import Errors, OperatorType, PerAxis, TensorDesc, WindowedOperator, window_counts
from ..dtypes import DataType
from ..reference.unfold import unfold
from ._sdk import ArrayLike, Dims, NDArray, per_axis, to_host, window_fields
from ._spec import Example, OperatorSpec, window_of

__all__ = ["SPEC", "UnfoldOperator", "helper"]


class UnfoldOperator(WindowedOperator):
    """DML_UNFOLD_OPERATOR_DESC: extracts sliding local blocks as columns (im2col)."""

    type: OperatorType[Literal["UNFOLD"]] = "UNFOLD"
    window_sizes: PerAxis
    dimension_arrays: ClassVar[tuple[str, ...]] = (
        "window_sizes",
        *WindowedOperator.dimension_arrays,
    )
    dimension_count_range: ClassVar[tuple[int, int]] = (1, 6)
    tensor_layouts: ClassVar[Mapping[str, str]] = {
        "InputTensor": "{ BatchCount, ChannelCount, spatial... }",
        "OutputTensor": "{ BatchCount, ChannelCount * prod(WindowSizes), BlockCount }",
    }

    def infer_output(self, errors: Errors) -> TensorDesc | None:
        x = self.input_tensor
        assert x is not None
        blocks = window_counts(
            self, x.sizes[2:], self.window_sizes, errors, window_field="WindowSizes",
            source="InputTensor",
        )  # fmt: skip
        if blocks is None:
            return None
        rows = x.sizes[1] * math.prod(self.window_sizes)
        return TensorDesc(data_type=x.data_type, sizes=(x.sizes[0], rows, math.prod(blocks)))


def _arguments(op: UnfoldOperator, arrays: Mapping[str, Any]) -> tuple[Any, ...]:
    return arrays["InputTensor"], window_of(op, op.window_sizes)


def helper(
    x: ArrayLike,
    window_sizes: Dims,
    strides: Dims | None = None,
    dilations: Dims | None = None,
    start_padding: Dims | None = None,
    end_padding: Dims | None = None,
) -> tuple[UnfoldOperator, dict[str, NDArray]]:
    """UNFOLD (im2col): sliding blocks of `x` (N, C, *S) as columns (N, C*prod(K), L)."""
    array = to_host(x)
    count = max(array.ndim - 2, 1)
    op = UnfoldOperator(
        window_sizes=per_axis(window_sizes, count),
        **window_fields(count, strides, dilations, start_padding, end_padding),
    )
    return op, {"InputTensor": array}


SPEC = OperatorSpec(
    model=UnfoldOperator,
    name="unfold",
    reference=unfold,
    launchers={
        "numpy": "dmlserve.kernels.cpu.unfold:unfold",
        "cupy": "dmlserve.kernels.cupy_backend.unfold:unfold",
    },
    arguments=_arguments,
    taps=lambda op: math.prod(op.window_sizes),
    warmup=Example(
        {"type": "UNFOLD", "WindowSizes": [2, 2]},
        {"InputTensor": TensorDesc(data_type=DataType.FLOAT32, sizes=(1, 1, 3, 3))},
    ),
    helper=helper,
)
