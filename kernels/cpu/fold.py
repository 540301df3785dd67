"""FOLD (col2im), SEMANTICS.md §3: a gather into each output plane, tap by tap."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ..geometry import Window
from ..reference._windows import accumulation_dtype
from ._slices import host_memory, plane_chunks
from ._windows import Axis, axes_of
from .budget import DEFAULT_BUDGET, ExecutionBudget

__all__ = ["fold"]

Array = npt.NDArray[Any]


@host_memory
def fold(
    x: Array,
    output_sizes: Sequence[int],
    window: Window,
    *,
    budget: ExecutionBudget = DEFAULT_BUDGET,
) -> Array:
    """``(N, C*prod(K), BlockCount) -> (N, C, *output_sizes)``, bit-identical to the reference.

    Every output element starts at 0 and receives its contributions in the reference's order
    (window offsets row-major), so float sums round exactly as the reference's do; integers
    wrap in their own type; FLOAT16 accumulates in FLOAT32 (a temporary of one slice) and is
    rounded once. Contributions falling in the padding are never read.
    """
    n, rows, _ = x.shape
    c = rows // window.taps
    axes = axes_of(output_sizes, window)
    columns = x.reshape(n, c, *window.sizes, *(a.blocks for a in axes))
    acc = accumulation_dtype(x.dtype)
    out = np.zeros((n, c, *output_sizes), dtype=x.dtype)
    plane = math.prod(output_sizes) * acc.itemsize
    rows = _rows_apply(columns, axes)
    for ns, cs in plane_chunks(n, c, plane, budget.slice_bytes()):
        budget.checkpoint()
        target = out[ns, cs]
        sums = target if acc == x.dtype else np.zeros(target.shape, dtype=acc)
        if rows:
            _gather_rows(sums, columns[ns, cs], axes)
        else:
            _gather(sums, columns[ns, cs], axes)
        if sums is not target:
            target[...] = sums
        del sums  # before the next slice's exist
    return out


def _gather(
    sums: Array, source: Array, axes: Sequence[Axis], last: tuple[int, int] | None = None
) -> None:
    """``sums[..., p] += source[..., k, b]`` for every tap ``k`` in order, ``b`` landing on ``p``.

    ``last`` restricts the targets to positions ``[x0, x1)`` of the last axis.
    """
    lead = (slice(None),) * (sums.ndim - len(axes))
    for k in np.ndindex(*(a.window for a in axes)):
        ranges = [a.valid(kd) for a, kd in zip(axes, k, strict=True)]
        if last is not None:
            a = axes[-1]
            shift = k[-1] * a.dilation - a.start  # block b lands on b*stride + shift
            lo = max(ranges[-1][0], -((shift - last[0]) // a.stride))
            hi = min(ranges[-1][1], -((shift - last[1]) // a.stride))
            ranges[-1] = (lo, max(lo, hi))
        if any(lo == hi for lo, hi in ranges):
            continue
        hits = tuple(a.source(kd, lo, hi) for a, kd, (lo, hi) in zip(axes, k, ranges, strict=True))
        # In-place integer addition wraps modulo 2**bits: the rule for integer FOLD.
        sums[(*lead, *hits)] += source[(*lead, *k, *(slice(lo, hi) for lo, hi in ranges))]


def _rows_apply(columns: Array, axes: Sequence[Axis]) -> bool:
    """Whether the image-rows path applies: the last two axes step by 1, the blocks of a row
    are as many as the row's positions, and each block row of the columns is one run."""
    if len(axes) < 2 or axes[-1].blocks != axes[-1].size:
        return False
    if axes[-1].stride != 1 or axes[-2].stride != 1:
        return False
    return bool(columns.strides[-2] == columns.strides[-1] * axes[-1].blocks)


def _gather_rows(sums: Array, source: Array, axes: Sequence[Axis]) -> None:
    """`_gather` over whole image rows: each tap is one long run of the flattened plane.

    A tap shifted by ``delta`` along the last axis also carries the blocks whose position falls
    off a row end into the neighbouring row's first or last ``|delta|`` positions, where that
    tap contributes nothing. Those positions are kept aside before the tap and put back after
    it, so every position gets exactly its contributions, in tap order, as `_gather` adds them.
    """
    row_axis, col_axis = axes[-2], axes[-1]
    h, w = row_axis.size, col_axis.size
    lead = (slice(None),) * (sums.ndim - len(axes))
    plane = sums.reshape(*sums.shape[:-2], h * w)
    runs = source.reshape(*source.shape[:-2], row_axis.blocks * w)
    for k in np.ndindex(*(a.window for a in axes)):
        ranges = [a.valid(kd) for a, kd in zip(axes, k, strict=True)]
        if any(lo == hi for lo, hi in ranges):
            continue
        delta = k[-1] * col_axis.dilation - col_axis.start
        low, high = ranges[-2]
        first = (low + k[-2] * row_axis.dilation - row_axis.start) * w + delta
        begin, length = low * w, (high - low) * w
        if first < 0:
            begin, length, first = begin - first, length + first, 0
        length = min(length, h * w - first)
        outer = tuple(
            a.source(kd, lo, hi) for a, kd, (lo, hi) in zip(axes[:-2], k, ranges, strict=False)
        )
        blocks = tuple(slice(lo, hi) for lo, hi in ranges[:-2])
        edge = sums[..., :delta] if delta > 0 else sums[..., w + delta :]
        kept = edge.copy() if delta else None
        target = plane[(*lead, *outer, slice(first, first + length))]
        # In-place integer addition wraps modulo 2**bits: the rule for integer FOLD.
        target += runs[(*lead, *k, *blocks, slice(begin, begin + length))]
        if kept is not None:
            edge[...] = kept
