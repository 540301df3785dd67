"""AVERAGE_POOLING / AVERAGE_POOLING1, SEMANTICS.md §5, as separable window sums.

A box sum over several axes is nested one-axis sums, padding and dilation included: the
window sums are taken along the last spatial axis, then along each axis before it, each one
tap at a time as strided adds that skip the padding. Each input element is read once per tap
of the innermost axis, not once per tap of the whole window, and no window-sized intermediate
exists. The work runs in slices (a group of planes, or rows of one plane) whose temporaries
fit the budget.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import numpy.typing as npt

from ..geometry import Window
from ._slices import host_memory, plane_chunks
from ._windows import Axis, Rows, axes_of, inside_counts, row_spans
from .budget import DEFAULT_BUDGET, ExecutionBudget

__all__ = ["average_pooling"]

Array = npt.NDArray[Any]


@host_memory
def average_pooling(
    x: Array, window: Window, include_padding: bool, *, budget: ExecutionBudget = DEFAULT_BUDGET
) -> Array:
    """``(N, C, *S) -> (N, C, *O)``, the reference's contract.

    Sums accumulate as the reference's do (FLOAT16 in FLOAT32, FLOAT32 in FLOAT64) in a fixed
    order, then are divided once and rounded once: within rounding of the reference, and the
    same bits run after run.
    """
    acc = np.dtype(np.float32 if x.dtype == np.float16 else np.float64)
    n, c = x.shape[:2]
    axes = axes_of(x.shape[2:], window)
    out_sizes = tuple(a.blocks for a in axes)
    counts = [inside_counts(a).astype(acc) for a in axes]
    out = np.empty((n, c, *out_sizes), dtype=x.dtype)
    limit = budget.slice_bytes()
    per_row = _row_bytes(axes, acc.itemsize)
    fixed = _fixed_bytes(axes, acc.itemsize)
    plane = fixed + per_row * axes[0].blocks
    if plane <= limit:
        spans = row_spans(axes[0], axes[0].blocks)
        chunks = list(plane_chunks(n, c, plane, limit))
    else:
        spans = row_spans(axes[0], (limit - fixed) // per_row)
        chunks = list(plane_chunks(n, c, 1, 1))
    for ns, cs in chunks:
        for rows in spans:
            budget.checkpoint()
            sums = _window_sums(x[ns, cs], axes, rows, acc)
            divisor = (
                acc.type(window.taps)
                if include_padding
                else _divisor([counts[0][rows.out_lo : rows.out_hi], *counts[1:]])
            )
            with np.errstate(divide="ignore", invalid="ignore"):  # as the reference: NaN
                sums /= divisor
            out[ns, cs, rows.out_lo : rows.out_hi] = sums
            del sums  # before the next slice's exist
    return out


def _window_sums(x: Array, axes: Sequence[Axis], rows: Rows, acc: np.dtype[Any]) -> Array:
    """Window sums of output rows ``rows`` (first spatial axis) of ``x`` (lead, C, *S)."""
    first = replace(
        axes[0],
        size=rows.in_hi - rows.in_lo,
        start=rows.start,
        blocks=rows.out_hi - rows.out_lo,
    )
    current = x[:, :, rows.in_lo : rows.in_hi]
    lead = current.ndim - len(axes)
    for d in range(len(axes) - 1, -1, -1):
        axis = first if d == 0 else axes[d]
        shape = list(current.shape)
        shape[lead + d] = axis.blocks
        sums = np.zeros(shape, dtype=acc)
        before = (slice(None),) * (lead + d)
        for k in range(axis.window):
            lo, hi = axis.valid(k)
            if lo < hi:
                target = sums[(*before, slice(lo, hi))]
                np.add(target, current[(*before, axis.source(k, lo, hi))], out=target)
        current = sums
    return current


def _divisor(counts: Sequence[Array]) -> Array:
    """The outer product of the per-axis counts of taps inside the input."""
    divisor = counts[0]
    for axis_counts in counts[1:]:
        divisor = np.multiply.outer(divisor, axis_counts)
    return divisor


def _row_bytes(axes: Sequence[Axis], itemsize: int) -> int:
    """Temporary bytes per output row of the first axis (input rows read plus sums)."""
    inner = math.prod(a.size for a in axes[1:-1]) * axes[-1].blocks if len(axes) > 1 else 1
    out_inner = math.prod(a.blocks for a in axes[1:])
    return (axes[0].stride * inner * 2 + out_inner) * itemsize


def _fixed_bytes(axes: Sequence[Axis], itemsize: int) -> int:
    """Temporary bytes every slice needs whatever its rows: the window's extra input rows."""
    inner = math.prod(a.size for a in axes[1:-1]) * axes[-1].blocks if len(axes) > 1 else 1
    return ((axes[0].window - 1) * axes[0].dilation + 1) * inner * 2 * itemsize
