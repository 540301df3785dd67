"""FOLD (col2im), SEMANTICS.md §3: sums sliding-window columns back into an image."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal

from ..descriptors import Errors, OperatorType, PerAxis, TensorDesc, WindowedOperator, window_counts
from ..dtypes import DataType, from_numpy
from ..reference.fold import fold
from ._sdk import ArrayLike, Dims, NDArray, per_axis, to_host, window_fields
from ._spec import Example, OperatorSpec, window_of

__all__ = ["SPEC", "FoldOperator", "helper"]


class FoldOperator(WindowedOperator):
    """DML_FOLD_OPERATOR_DESC: sums sliding-window columns back into an image (col2im)."""

    type: OperatorType[Literal["FOLD"]] = "FOLD"
    window_sizes: PerAxis
    dimension_arrays: ClassVar[tuple[str, ...]] = (
        "window_sizes",
        *WindowedOperator.dimension_arrays,
    )
    dimension_count_range: ClassVar[tuple[int, int]] = (1, 6)
    tensor_layouts: ClassVar[Mapping[str, str]] = {
        "InputTensor": "{ BatchCount, ChannelCount * prod(WindowSizes), BlockCount }",
        "OutputTensor": "{ BatchCount, ChannelCount, spatial... }",
    }
    # the output's spatial sizes are known only from OutputTensor
    rank_tensors: ClassVar[tuple[str, ...]] = ("OutputTensor",)

    def infer_output(self, errors: Errors) -> TensorDesc | None:
        x, y = self.input_tensor, self.output_tensor
        assert x is not None
        if y is None:
            errors.add(
                ("OutputTensor",),
                "OutputTensor is required for FOLD: the output's spatial sizes cannot be inferred",
            )
            return None
        if not errors.check(
            x.rank == 3,
            ("InputTensor", "Sizes"),
            f"FOLD's InputTensor is {self.tensor_layouts['InputTensor']}: 3 dimensions, got "
            f"{x.rank} (Sizes {list(x.sizes)})",
        ):
            return None
        blocks = window_counts(
            self, y.sizes[2:], self.window_sizes, errors, window_field="WindowSizes",
            source="OutputTensor",
        )  # fmt: skip
        if blocks is None:
            return None
        window = math.prod(self.window_sizes)
        errors.check(
            y.sizes[0] in (x.sizes[0], -1),  # a registered variable batch follows the input's
            ("InputTensor", "Sizes", 0),
            f"InputTensor.Sizes[0] ({x.sizes[0]}) must equal OutputTensor.Sizes[0] ({y.sizes[0]})",
        )
        errors.check(
            x.sizes[1] == y.sizes[1] * window,
            ("InputTensor", "Sizes", 1),
            f"InputTensor.Sizes[1] must be C * prod(WindowSizes) = {y.sizes[1]} * {window} = "
            f"{y.sizes[1] * window}, got {x.sizes[1]}",
        )
        errors.check(
            x.sizes[2] == math.prod(blocks),
            ("InputTensor", "Sizes", 2),
            f"InputTensor.Sizes[2] must be BlockCount = prod(BlocksPerDimension) = "
            f"prod({list(blocks)}) = {math.prod(blocks)}, got {x.sizes[2]}",
        )
        return TensorDesc(data_type=x.data_type, sizes=(x.sizes[0], *y.sizes[1:]))


def _arguments(op: FoldOperator, arrays: Mapping[str, Any]) -> tuple[Any, ...]:
    assert op.output_tensor is not None
    return arrays["InputTensor"], op.output_tensor.sizes[2:], window_of(op, op.window_sizes)


def helper(
    x: ArrayLike,
    output_size: Sequence[int],
    window_sizes: Dims,
    strides: Dims | None = None,
    dilations: Dims | None = None,
    start_padding: Dims | None = None,
    end_padding: Dims | None = None,
) -> tuple[FoldOperator, dict[str, NDArray]]:
    """FOLD (col2im): sum the columns of `x` (N, C*prod(K), L) into (N, C, *output_size)."""
    array = to_host(x)
    if array.ndim != 3:
        raise ValueError(f"FOLD takes a 3-D column tensor (N, C*prod(K), L), got {array.shape}")
    count = len(output_size)
    window = per_axis(window_sizes, count)
    channels = array.shape[1] // max(math.prod(window), 1)
    sizes = (array.shape[0], channels, *(int(s) for s in output_size))
    op = FoldOperator(
        window_sizes=window,
        output_tensor=TensorDesc(data_type=from_numpy(array.dtype), sizes=sizes),
        **window_fields(count, strides, dilations, start_padding, end_padding),
    )
    return op, {"InputTensor": array}


SPEC = OperatorSpec(
    model=FoldOperator,
    name="fold",
    reference=fold,
    launchers={
        "numpy": "dmlserve.kernels.cpu.fold:fold",
        "cupy": "dmlserve.kernels.cupy_backend.fold:fold",
    },
    arguments=_arguments,
    taps=lambda op: math.prod(op.window_sizes),
    warmup=Example(
        {
            "type": "FOLD",
            "WindowSizes": [2, 2],
            "OutputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 3, 3]},
        },
        {"InputTensor": TensorDesc(data_type=DataType.FLOAT32, sizes=(1, 4, 4))},
    ),
    helper=helper,
    sums=True,
)
