"""CONVOLUTION_INTEGER, SEMANTICS.md §6, as float32 BLAS products that are provably exact.

Both operands are centred first (``x - x_zp``, ``w - w_zp[m]``), so padding with the input
zero point is padding with 0 and no correction terms exist. Every centred value is an integer
of magnitude at most 255 (the difference of two 8-bit values), so each product ``x'·w'`` is an
integer and exactly representable in float32. A float32 sum is exact when every partial sum
is an integer of magnitude at most 2**24; a partial sum of the terms of one output is bounded
by the sum of their magnitudes, ``<= max|x'| · sum_k |w'[m, k]|``, whatever order (and
fused multiply-adds) the BLAS uses. The reduction axis is therefore cut into chunks whose
bound, computed from the filters and the input type's range, stays within 2**24: each chunk is
one exact SGEMM. Chunks are summed in float64 (exact: any total is below 2**53, since it is
at most 2**32 terms of at most 255**2), then wrapped to INT32 through int64 (the project's
overflow rule). Typical layers need a single chunk.

The input is processed image by image in spans of output rows: each span is centred and
zero-padded into float32, unfolded (strided copies) into its column matrix, and multiplied.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import numpy.typing as npt

from ..geometry import Window
from ._slices import host_memory
from ._windows import Axis, axes_of, row_spans
from .budget import DEFAULT_BUDGET, ExecutionBudget
from .unfold import unfold_into

__all__ = ["convolution_integer", "exact_chunks"]

Array = npt.NDArray[Any]

EXACT_FLOAT32 = 1 << 24  # every integer of magnitude up to this is a float32
_SLICE_BYTES = 16 << 20  # large enough that each SGEMM runs near its peak


@host_memory
def convolution_integer(
    x: Array,
    w: Array,
    x_zero_point: int,
    w_zero_point: Array,
    strides: Sequence[int],
    dilations: Sequence[int],
    start_padding: Sequence[int],
    end_padding: Sequence[int],
    group_count: int,
    *,
    budget: ExecutionBudget = DEFAULT_BUDGET,
) -> Array:
    """``(N, C, *S), (M, C/G, *K) -> (N, M, *O)`` INT32, bit-identical to the reference."""
    n, c = x.shape[:2]
    m = w.shape[0]
    g = group_count
    axes = axes_of(x.shape[2:], Window(w.shape[2:], strides, dilations, start_padding, end_padding))
    out_sizes = tuple(a.blocks for a in axes)
    w_zp = np.broadcast_to(np.asarray(w_zero_point).reshape(-1), (m,)).astype(np.float32)
    centred = w.reshape(m, -1).astype(np.float32)
    if w_zp.any():
        centred -= w_zp[:, None]
    info = np.iinfo(x.dtype)
    x_bound = max(int(info.max) - x_zero_point, x_zero_point - int(info.min), 0)
    chunks = exact_chunks(np.abs(centred), x_bound)
    weights = centred.reshape(g, m // g, -1)

    out = np.empty((n, m, *out_sizes), dtype=np.int32)
    per_row, fixed = _span_bytes(axes, c, m, len(chunks) > 1)
    rows = max(1, (budget.slice_bytes(_SLICE_BYTES) - fixed) // per_row)
    spans = row_spans(axes[0], rows)
    zx = np.float32(x_zero_point)
    for image in range(n):
        for span in spans:
            budget.checkpoint()
            first = replace(axes[0], size=span.in_hi - span.in_lo, start=span.start,
                            blocks=span.out_hi - span.out_lo)  # fmt: skip
            _product(
                out[image, :, span.out_lo : span.out_hi],
                x[image, :, span.in_lo : span.in_hi],
                (first, *axes[1:]),
                zx,
                weights,
                chunks,
                budget,
            )
    return out


def _product(
    target: Array,
    x: Array,
    axes: Sequence[Axis],
    zx: np.float32,
    weights: Array,
    chunks: Sequence[tuple[int, int]],
    budget: ExecutionBudget,
) -> None:
    """``target`` (M, *O) = the exact product of the filters and the columns of span ``x``.

    A function of its own so that one span's temporaries are gone before the next's exist.
    """
    g = weights.shape[0]
    columns = _columns(x, axes, zx)
    columns = columns.reshape(g, -1, columns.shape[-1])
    if len(chunks) == 1:
        # Exact integers of magnitude <= 2**24: the cast to INT32 is exact.
        target[...] = _matmul(weights, columns).reshape(target.shape)
        return
    total = np.zeros((g, weights.shape[1], columns.shape[-1]), dtype=np.float64)
    for lo, hi in chunks:
        budget.checkpoint()
        total += _matmul(weights[:, :, lo:hi], columns[:, lo:hi])
    # Exact in int64; the INT32 assignment keeps the low 32 bits (two's complement).
    target[...] = total.astype(np.int64).reshape(target.shape)


def _matmul(a: Array, b: Array) -> Array:
    """``a @ b`` per group: one SGEMM per group (strided 2-D operands go to BLAS as they are)."""
    product: Array = (
        (a[0] @ b[0])[None]
        if a.shape[0] == 1
        else np.matmul(np.ascontiguousarray(a), np.ascontiguousarray(b))
    )
    return product


def exact_chunks(magnitudes: Array, x_bound: int) -> list[tuple[int, int]]:
    """Ranges of the reduction axis whose products sum exactly in float32.

    ``magnitudes`` holds ``|w'|`` per output row and reduction index. Within a range every
    row's ``x_bound · sum |w'|`` stays at most 2**24: either the whole axis qualifies, or the
    ranges are cut on the column maxima (a looser bound, one cheap pass). A single index
    always qualifies (255·255 < 2**24).
    """
    total = magnitudes.shape[1]
    if total == 0 or x_bound == 0:
        return [(0, total)]
    limit = EXACT_FLOAT32 // x_bound
    if magnitudes.sum(axis=1, dtype=np.float64).max() <= limit:
        return [(0, total)]
    cumulative = np.cumsum(magnitudes.max(axis=0), dtype=np.float64)
    chunks = []
    lo = 0
    while lo < total:
        base = cumulative[lo - 1] if lo else 0.0
        hi = max(lo + 1, int(np.searchsorted(cumulative, base + limit, side="right")))
        chunks.append((lo, hi))
        lo = hi
    return chunks


def _columns(x: Array, axes: Sequence[Axis], zx: np.float32) -> Array:
    """The centred float32 column matrix ``(C*prod(K), prod(O))`` of one image span ``x``."""
    c = x.shape[0]
    padded_shape = (c, *(a.start + a.size + _end(a) for a in axes))
    padded = np.zeros(padded_shape, dtype=np.float32)
    interior = tuple(slice(a.start, a.start + a.size) for a in axes)
    np.subtract(x, zx, out=padded[(slice(None), *interior)])
    flat = [replace(a, size=p, start=0) for a, p in zip(axes, padded_shape[1:], strict=True)]
    windows = tuple(a.window for a in axes)
    blocks = tuple(a.blocks for a in axes)
    if all(k == 1 for k in windows) and all(a.stride == 1 for a in axes):
        return padded.reshape(c, -1)
    columns = np.empty((c, *windows, *blocks), dtype=np.float32)
    unfold_into(columns, padded, flat)
    return columns.reshape(c * math.prod(windows), math.prod(blocks))


def _end(axis: Axis) -> int:
    """End padding that makes exactly ``axis.blocks`` windows fit (never more input)."""
    extent = (axis.blocks - 1) * axis.stride + (axis.window - 1) * axis.dilation + 1
    return max(0, extent - axis.start - axis.size)


def _span_bytes(axes: Sequence[Axis], c: int, m: int, chunked: bool) -> tuple[int, int]:
    """Temporary bytes per output row of the first axis, and those of every span."""
    taps = math.prod(a.window for a in axes)
    out_inner = math.prod(a.blocks for a in axes[1:])
    padded_inner = math.prod(a.size + a.start + _end(a) for a in axes[1:])
    per_row = 4 * (c * taps * out_inner + m * out_inner + c * axes[0].stride * padded_inner)
    if chunked:
        per_row += 8 * m * out_inner
    extent = (axes[0].window - 1) * axes[0].dilation + 1
    return per_row, 4 * c * extent * padded_inner
