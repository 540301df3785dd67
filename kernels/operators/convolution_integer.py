"""CONVOLUTION_INTEGER, SEMANTICS.md §6: INT8/UINT8 cross-correlation with zero points."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

import numpy as np

from .._array import is_cupy_array, to_host
from ..descriptors import Errors, OperatorType, TensorDesc, WindowedOperator, window_counts
from ..dtypes import DataType
from ..reference.convolution_integer import convolution_integer
from ._sdk import ArrayLike, Dims, NDArray, window_fields
from ._spec import Constants, Example, OperatorSpec

__all__ = ["SPEC", "ConvolutionIntegerOperator", "helper"]

_INT8_TYPES = (DataType.INT8, DataType.UINT8)


class ConvolutionIntegerOperator(WindowedOperator):
    """DML_CONVOLUTION_INTEGER_OPERATOR_DESC: integer cross-correlation with zero points."""

    type: OperatorType[Literal["CONVOLUTION_INTEGER"]] = "CONVOLUTION_INTEGER"
    input_zero_point_tensor: TensorDesc | None = None
    filter_tensor: TensorDesc | None = None
    filter_zero_point_tensor: TensorDesc | None = None
    group_count: int = 1
    input_names: ClassVar[tuple[str, ...]] = ("InputTensor", "FilterTensor")
    optional_input_names: ClassVar[tuple[str, ...]] = (
        "InputZeroPointTensor",
        "FilterZeroPointTensor",
    )
    dimension_count_range: ClassVar[tuple[int, int]] = (1, 2)
    tensor_layouts: ClassVar[Mapping[str, str]] = {
        "InputTensor": "{ BatchCount, InputChannelCount, [InputHeight], InputWidth }",
        "FilterTensor": "{ OutputChannelCount, InputChannelCount / GroupCount, [FilterHeight], "
        "FilterWidth }",
        "InputZeroPointTensor": "{ 1, 1, 1, 1 } (one zero point)",
        "FilterZeroPointTensor": "{ 1, 1, 1, 1 } or, per output channel, "
        "{ 1, OutputChannelCount, 1, 1 }",
        "OutputTensor": "{ BatchCount, OutputChannelCount, [OutputHeight], OutputWidth }",
    }

    def structure_errors(self, errors: Errors) -> None:
        super().structure_errors(errors)
        errors.check(
            self.group_count >= 1,
            ("GroupCount",),
            f"GroupCount must be at least 1, got {self.group_count}",
        )

    def infer_output(self, errors: Errors) -> TensorDesc | None:
        x, w = self.input_tensor, self.filter_tensor
        assert x is not None and w is not None
        for name, desc in (("InputTensor", x), ("FilterTensor", w)):
            errors.check(
                desc.data_type in _INT8_TYPES,
                (name, "DataType"),
                f"CONVOLUTION_INTEGER supports INT8 and UINT8 for {name}, "
                f"got {desc.data_type.value}",
            )
        if not errors.check(
            w.rank == x.rank,
            ("FilterTensor", "Sizes"),
            f"FilterTensor, InputTensor and OutputTensor must have the same DimensionCount "
            f"(InputTensor has {x.rank}, FilterTensor {w.rank})",
        ):
            return None
        groups = self.group_count
        channels, filters, per_group = x.sizes[1], w.sizes[0], w.sizes[1]
        errors.check(
            channels == per_group * groups,
            ("FilterTensor", "Sizes", 1),
            f"InputTensor.Sizes[1] ({channels}) must equal FilterTensor.Sizes[1] * GroupCount "
            f"({per_group} * {groups})",
        )
        errors.check(
            filters % groups == 0,
            ("GroupCount",),
            f"the filter count FilterTensor.Sizes[0] ({filters}) must be divisible by "
            f"GroupCount ({groups})",
        )
        self._zero_point_errors(filters, errors)
        out = window_counts(
            self, x.sizes[2:], w.sizes[2:], errors, window_field="FilterTensor.Sizes[2:]",
            source="InputTensor", window_loc=lambda d: ("FilterTensor", "Sizes", d + 2),
        )  # fmt: skip
        if out is None:
            return None
        return TensorDesc(data_type=DataType.INT32, sizes=(x.sizes[0], filters, *out))

    def _zero_point_errors(self, filters: int, errors: Errors) -> None:
        x, w = self.input_tensor, self.filter_tensor
        pairs = (
            ("InputZeroPointTensor", self.input_zero_point_tensor, "InputTensor", x),
            ("FilterZeroPointTensor", self.filter_zero_point_tensor, "FilterTensor", w),
        )
        for name, zp, owner_name, owner in pairs:
            if zp is None or owner is None:
                continue
            errors.check(
                zp.data_type == owner.data_type,
                (name, "DataType"),
                f"{owner_name} and {name} must have the same DataType "
                f"({owner.data_type.value} vs {zp.data_type.value})",
            )
            errors.check(
                1 <= zp.rank <= 4,
                (name, "Sizes"),
                f"{name} has 1 to 4 dimensions, got {zp.rank}",
            )
            single = zp.element_count == 1
            per_channel = (
                name == "FilterZeroPointTensor"
                and zp.element_count == filters
                and sum(1 for s in zp.sizes if s != 1) <= 1
            )
            if name == "InputZeroPointTensor":
                rule = "must have Sizes {1, 1, 1, 1} (one per-tensor zero point)"
            else:
                rule = (
                    "must have Sizes {1, 1, 1, 1} (per tensor) or {1, OutputChannelCount, 1, 1} "
                    f"(per channel, OutputChannelCount = {filters})"
                )
            errors.check(
                single or per_channel, (name, "Sizes"), f"{name} {rule}, got {list(zp.sizes)}"
            )
        a, b = self.input_zero_point_tensor, self.filter_zero_point_tensor
        if a is not None and b is not None:
            errors.check(
                a.rank == b.rank,
                ("FilterZeroPointTensor", "Sizes"),
                "FilterZeroPointTensor and InputZeroPointTensor must have the same DimensionCount",
            )


def _arguments(
    op: ConvolutionIntegerOperator,
    arrays: Mapping[str, Any],
    known: Mapping[str, Any] | None = None,
) -> tuple[Any, ...]:
    # Zero points reach the implementations as host values: one int for the input, one int32
    # per output channel for the filter. `known`: those already read (constants).
    x, w = arrays["InputTensor"], arrays["FilterTensor"]
    known = {} if known is None else known
    x_zero = known.get("x_zero")
    if x_zero is None:
        x_zp = arrays.get("InputZeroPointTensor")
        x_zero = int(to_host(x_zp).reshape(-1)[0]) if x_zp is not None else 0
    w_zero = known.get("w_zero")
    if w_zero is None:
        w_zp, filters = arrays.get("FilterZeroPointTensor"), w.shape[0]
        w_zero = (
            np.broadcast_to(to_host(w_zp).reshape(-1).astype(np.int32), (filters,)).copy()
            if w_zp is not None
            else np.zeros(filters, np.int32)
        )
    return (
        x, w, x_zero, w_zero, op.strides, op.dilations, op.start_padding, op.end_padding,
        op.group_count,
    )  # fmt: skip


def _constant_arguments(
    op: ConvolutionIntegerOperator, arrays: Mapping[str, Any], backend: str, constants: Constants
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Zero points that are constants are read from the device once; a constant filter keeps
    its prepared form with the registration (on the GPU)."""
    cache, names = constants.cache, constants.names
    known = {
        key: cache[key]
        for key, name in (("x_zero", "InputZeroPointTensor"), ("w_zero", "FilterZeroPointTensor"))
        if name in names and key in cache
    }
    args = _arguments(op, arrays, known)
    if "InputZeroPointTensor" in names:
        cache["x_zero"] = args[2]
    if "FilterZeroPointTensor" in names:
        cache["w_zero"] = args[3]
    if backend == "cupy" and "FilterTensor" in names:
        return args, {"filter_cache": cache}
    return args, {}


def _zero_point(value: ArrayLike | None, like: NDArray, *, per_channel: bool) -> NDArray | None:
    """A zero point as DirectML's tensor: a scalar becomes {1,...,1}, a filter's [M] {1,M,1...}.

    Arrays keep their own dtype; Python numbers take the tensor's.
    """
    if value is None:
        return None
    if isinstance(value, np.ndarray) or is_cupy_array(value):
        array = to_host(value)
    else:
        array = np.asarray(value, dtype=like.dtype)
    if array.ndim == 0:
        return array.reshape((1,) * like.ndim)
    if per_channel and array.ndim == 1:
        return array.reshape((1, array.shape[0]) + (1,) * (like.ndim - 2))
    return array


def helper(
    x: ArrayLike,
    w: ArrayLike,
    x_zero_point: ArrayLike | None = None,
    w_zero_point: ArrayLike | None = None,
    strides: Dims | None = None,
    dilations: Dims | None = None,
    start_padding: Dims | None = None,
    end_padding: Dims | None = None,
    group_count: int = 1,
) -> tuple[ConvolutionIntegerOperator, dict[str, NDArray]]:
    """CONVOLUTION_INTEGER of int8/uint8 `x` (N, C, *S) with `w` (M, C/G, *K) -> int32.

    A zero point may be a number (per tensor) or, for `w`, one value per output channel.
    """
    array, weights = to_host(x), to_host(w)
    count = max(array.ndim - 2, 1)
    op = ConvolutionIntegerOperator(
        group_count=group_count,
        **window_fields(count, strides, dilations, start_padding, end_padding),
    )
    inputs = {"InputTensor": array, "FilterTensor": weights}
    x_zp = _zero_point(x_zero_point, array, per_channel=False)
    w_zp = _zero_point(w_zero_point, weights, per_channel=True)
    if x_zp is not None:
        inputs["InputZeroPointTensor"] = x_zp
    if w_zp is not None:
        inputs["FilterZeroPointTensor"] = w_zp
    return op, inputs


SPEC = OperatorSpec(
    model=ConvolutionIntegerOperator,
    name="convolution_integer",
    reference=convolution_integer,
    launchers={
        "numpy": "dmlserve.kernels.cpu.convolution_integer:convolution_integer",
        "cupy": "dmlserve.kernels.cupy_backend.convolution_integer:convolution_integer",
    },
    arguments=_arguments,
    constant_arguments=_constant_arguments,
    # every output element reads C/G * prod(K) filter taps
    taps=lambda op: math.prod(op.filter_tensor.sizes[1:]) if op.filter_tensor else 1,
    warmup=Example(
        {"type": "CONVOLUTION_INTEGER"},
        {
            "InputTensor": TensorDesc(data_type=DataType.INT8, sizes=(1, 1, 3, 3)),
            "FilterTensor": TensorDesc(data_type=DataType.INT8, sizes=(1, 1, 2, 2)),
        },
    ),
    helper=helper,
    sums=True,
)
