"""Output-shape formulas and tensor rules of the windowed operators (SEMANTICS.md §3, §5, §6)."""

from __future__ import annotations

import math

import numpy as np

from ..dtypes import DataType
from ..geometry import sliding_count
from ._base import Errors, TensorDesc
from .operators import (
    AveragePoolingOperator,
    ConvolutionIntegerOperator,
    FoldOperator,
    UnfoldOperator,
)

_INT8_TYPES = (DataType.INT8, DataType.UINT8)
_POOLING_TYPES = (DataType.FLOAT32, DataType.FLOAT16)


def _windows(
    spatial: tuple[int, ...],
    window: tuple[int, ...],
    strides: tuple[int, ...],
    dilations: tuple[int, ...],
    start: tuple[int, ...],
    end: tuple[int, ...],
    errors: Errors,
    *,
    window_field: str,
    source: str,
) -> tuple[int, ...] | None:
    counts = []
    for d, (s, k, st, dl, a, b) in enumerate(
        zip(spatial, window, strides, dilations, start, end, strict=True)
    ):
        n = sliding_count(s, k, st, dl, a, b)
        if n is None:
            errors.add(
                (window_field, d),
                f"the dilated window, Dilations[{d}] * ({window_field}[{d}] - 1) + 1 = "
                f"{dl * (k - 1) + 1}, must fit in the padded size {source}.Sizes[{d + 2}] + "
                f"StartPadding[{d}] + EndPadding[{d}] = {s + a + b}",
            )
        counts.append(n or 0)
    return None if errors else tuple(counts)


def unfold_output(op: UnfoldOperator, errors: Errors) -> TensorDesc | None:
    x = op.input_tensor
    assert x is not None
    blocks = _windows(
        x.sizes[2:], op.window_sizes, op.strides or (), op.dilations or (),
        op.start_padding or (), op.end_padding or (), errors,
        window_field="WindowSizes", source="InputTensor",
    )  # fmt: skip
    if blocks is None:
        return None
    rows = x.sizes[1] * math.prod(op.window_sizes)
    return TensorDesc(data_type=x.data_type, sizes=(x.sizes[0], rows, math.prod(blocks)))


def fold_checks(op: FoldOperator, errors: Errors) -> TensorDesc | None:
    x, y = op.input_tensor, op.output_tensor
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
        f"FOLD's InputTensor is (N, C*prod(WindowSizes), BlockCount): 3 dimensions, got {x.rank}",
    ):
        return None
    blocks = _windows(
        y.sizes[2:], op.window_sizes, op.strides or (), op.dilations or (),
        op.start_padding or (), op.end_padding or (), errors,
        window_field="WindowSizes", source="OutputTensor",
    )  # fmt: skip
    if blocks is None:
        return None
    window = math.prod(op.window_sizes)
    errors.check(
        x.sizes[0] == y.sizes[0],
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


def average_pooling_output(op: AveragePoolingOperator, errors: Errors) -> TensorDesc | None:
    x = op.input_tensor
    assert x is not None
    errors.check(
        x.data_type in _POOLING_TYPES,
        ("InputTensor", "DataType"),
        f"AVERAGE_POOLING supports FLOAT32 and FLOAT16 tensors, got {x.data_type.value}",
    )
    strides, dilations = op.strides or (), op.dilations or ()
    start, end = op.start_padding or (), op.end_padding or ()
    out = _windows(
        x.sizes[2:], op.window_size, strides, dilations, start, end, errors,
        window_field="WindowSize", source="InputTensor",
    )  # fmt: skip
    if out is None:
        return None
    if not op.include_padding:
        for d, (s, k, st, dl, a, n) in enumerate(
            zip(x.sizes[2:], op.window_size, strides, dilations, start, out, strict=True)
        ):
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


def convolution_integer_output(op: ConvolutionIntegerOperator, errors: Errors) -> TensorDesc | None:
    x, w = op.input_tensor, op.filter_tensor
    assert x is not None and w is not None
    for name, desc in (("InputTensor", x), ("FilterTensor", w)):
        errors.check(
            desc.data_type in _INT8_TYPES,
            (name, "DataType"),
            f"CONVOLUTION_INTEGER supports INT8 and UINT8 for {name}, got {desc.data_type.value}",
        )
    if not errors.check(
        w.rank == x.rank,
        ("FilterTensor", "Sizes"),
        f"FilterTensor, InputTensor and OutputTensor must have the same DimensionCount "
        f"(InputTensor has {x.rank}, FilterTensor {w.rank})",
    ):
        return None
    groups = op.group_count
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
        f"the filter count FilterTensor.Sizes[0] ({filters}) must be divisible by GroupCount "
        f"({groups})",
    )
    _zero_point_errors(op, filters, errors)
    out = _windows(
        x.sizes[2:], w.sizes[2:], op.strides or (), op.dilations or (),
        op.start_padding or (), op.end_padding or (), errors,
        window_field="FilterTensor.Sizes[2:]", source="InputTensor",
    )  # fmt: skip
    if out is None:
        return None
    return TensorDesc(data_type=DataType.INT32, sizes=(x.sizes[0], filters, *out))


def _zero_point_errors(op: ConvolutionIntegerOperator, filters: int, errors: Errors) -> None:
    pairs = (
        ("InputZeroPointTensor", op.input_zero_point_tensor, op.input_tensor, "InputTensor"),
        ("FilterZeroPointTensor", op.filter_zero_point_tensor, op.filter_tensor, "FilterTensor"),
    )
    for name, zp, owner, owner_name in pairs:
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
        errors.check(single or per_channel, (name, "Sizes"), f"{name} {rule}, got {list(zp.sizes)}")
    a, b = op.input_zero_point_tensor, op.filter_zero_point_tensor
    if a is not None and b is not None:
        errors.check(
            a.rank == b.rank,
            ("FilterZeroPointTensor", "Sizes"),
            "FilterZeroPointTensor and InputZeroPointTensor must have the same DimensionCount",
        )
