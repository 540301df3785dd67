"""PADDING / PADDING1, SEMANTICS.md §4: one copy of the input, then the borders.

The input is copied once into the interior of the output. The borders are then filled axis
by axis (axis ``d`` after all axes before it, over the interior of the axes after it), so each
border copy reads rows of the output that are already complete. Every border position reads
the source position given by the reference's own periodic map; consecutive positions that read
consecutive sources (forwards or backwards) are one slice copy. Data is copied, never converted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ..reference.padding import source_index
from ._slices import host_memory
from .budget import DEFAULT_BUDGET, ExecutionBudget, leading_chunks

__all__ = ["padding"]

Array = npt.NDArray[Any]

# Beyond this many runs on one border (a short axis padded many times over) one gather
# through an index array beats a Python loop of slice copies.
_MAX_RUNS = 16


@host_memory
def padding(
    x: Array,
    start_padding: Sequence[int],
    end_padding: Sequence[int],
    mode: str,
    value: Any,
    *,
    budget: ExecutionBudget = DEFAULT_BUDGET,
) -> Array:
    """``Out.Sizes[i] = In.Sizes[i] + StartPadding[i] + EndPadding[i]``, rank 1..8, any dtype.

    Same contract as the reference; bit-identical results. No temporaries beyond one slice.
    """
    shape = tuple(a + n + e for n, a, e in zip(x.shape, start_padding, end_padding, strict=True))
    out = np.empty(shape, dtype=x.dtype)
    interior = tuple(slice(a, a + n) for n, a in zip(x.shape, start_padding, strict=True))
    last = x.ndim - 1
    # The last axis first, slice by slice: its borders are filled while the rows just copied
    # are still in cache (a border column on its own would touch one cache line per row).
    rows = out[interior[:-1]]
    row_bytes = shape[-1] * x.dtype.itemsize
    for index in leading_chunks(x.shape[:-1], row_bytes, budget.slice_bytes()):
        budget.checkpoint()
        target = rows[index]
        target[..., interior[-1]] = x[index]
        _borders(target, target.ndim - 1, x.shape[-1], start_padding[-1], end_padding[-1],
                 mode, value, budget)  # fmt: skip
    # Then each other axis over the whole of the axes already done and the last one.
    axes = zip(x.shape[:-1], start_padding[:-1], end_padding[:-1], strict=True)
    for d, (n, a, e) in enumerate(axes):
        region = out[(*(slice(None),) * (d + 1), *interior[d + 1 : last])]
        _borders(region, d, n, a, e, mode, value, budget)
    return out


def _borders(
    region: Array, d: int, n: int, a: int, e: int, mode: str, value: Any, budget: ExecutionBudget
) -> None:
    """Fill ``region``'s ``a`` and ``e`` border positions along axis ``d`` around ``n`` inside."""
    lead = (slice(None),) * d
    if mode == "CONSTANT":
        for border in (slice(0, a), slice(a + n, a + n + e)):
            _fill(region[(*lead, border)], value, budget)
        return
    if a == 0 and e == 0:
        return
    row = region[(*lead, slice(0, 1))].nbytes  # one position along axis d
    # Index arrays of one slice of border positions: memory bounded however long the pad.
    step = max(1, budget.slice_bytes() // (row + 64))
    for first, stop in ((-a, 0), (n, n + e)):
        for lo in range(first, stop, step):
            positions = np.arange(lo, min(stop, lo + step), dtype=np.int64)
            sources = source_index(positions, n, mode) + a
            _move(region, d, positions + a, sources, budget)


def _move(
    region: Array,
    axis: int,
    targets: npt.NDArray[np.int64],
    sources: npt.NDArray[np.int64],
    budget: ExecutionBudget,
) -> None:
    """``region[..., targets, ...] = region[..., sources, ...]`` along ``axis``.

    ``targets`` are consecutive. Where consecutive targets read consecutive sources (step +1
    or -1) one slice copy moves the whole run; beyond a few runs, one gather moves them all.
    """
    steps = np.diff(sources)
    breaks = np.abs(steps) != 1
    breaks[1:] |= steps[1:] != steps[:-1]
    starts = [0, *(np.flatnonzero(breaks) + 1).tolist()]
    if len(starts) > _MAX_RUNS:
        _gather(region, axis, targets, sources, budget)
        return
    lead = (slice(None),) * axis
    for lo, hi in zip(starts, [*starts[1:], len(targets)], strict=True):
        step = int(sources[lo + 1] - sources[lo]) if hi - lo > 1 else 1
        first, last = int(sources[lo]), int(sources[hi - 1])
        source = slice(first, last + step if last + step >= 0 else None, step)
        target = slice(int(targets[lo]), int(targets[hi - 1]) + 1)
        _copy(region[(*lead, target)], region[(*lead, source)], budget)


def _copy(dst: Array, src: Array, budget: ExecutionBudget) -> None:
    for index in leading_chunks(dst.shape, dst.dtype.itemsize, budget.slice_bytes()):
        budget.checkpoint()
        dst[index] = src[index]


def _fill(dst: Array, value: Any, budget: ExecutionBudget) -> None:
    for index in leading_chunks(dst.shape, dst.dtype.itemsize, budget.slice_bytes()):
        budget.checkpoint()
        dst[index] = value


def _gather(
    region: Array,
    axis: int,
    targets: npt.NDArray[np.int64],
    sources: npt.NDArray[np.int64],
    budget: ExecutionBudget,
) -> None:
    """``region[..., targets, ...] = region[..., sources, ...]`` along ``axis``, in slices."""
    moved = np.moveaxis(region, axis, 0)
    row = moved[0].size * region.dtype.itemsize
    limit = budget.slice_bytes()
    step = max(1, limit // max(1, row))
    for lo in range(0, len(targets), step):
        budget.checkpoint()
        moved[targets[lo : lo + step]] = moved[sources[lo : lo + step]]
