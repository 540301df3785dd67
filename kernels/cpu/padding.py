"""PADDING / PADDING1, SEMANTICS.md §4: one copy of the input, then the borders.

The input is copied once into the interior of the output. The borders are then filled axis
by axis (axis ``d`` after all axes before it, over the interior of the axes after it), so each
border copy reads rows of the output that are already complete. Every border position reads
the source position given by the reference's own periodic map; consecutive positions that read
consecutive sources (forwards or backwards) are one slice copy. Data is copied, never converted.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Iterator, Sequence
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
# A border of the last axis at most this wide is copied one position at a time: a copy of a
# few positions per row would run one short inner loop per row.
_NARROW = 16
# Borders up to this many positions along one axis have their moves remembered.
_REMEMBERED_BORDER = 1024


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
    limit = budget.slice_bytes()
    if mode == "CONSTANT" and out.nbytes <= limit:
        # Within one slice: the value everywhere, then the input over the interior. The same
        # two assignments as below, two NumPy calls in all instead of a few per border.
        budget.checkpoint()
        out[...] = value
        out[interior] = x
        return out
    # The last axis first, slice by slice: its borders are filled while the rows just copied
    # are still in cache (a border column on its own would touch one cache line per row).
    rows = out[interior[:-1]]
    row_bytes = shape[-1] * x.dtype.itemsize
    per_slice = min(math.prod(x.shape[:-1]), max(1, limit // row_bytes))
    n, a, e = x.shape[-1], start_padding[-1], end_padding[-1]
    moves = _plan(n, a, e, mode, _step(per_slice * x.dtype.itemsize, limit))
    for index in leading_chunks(x.shape[:-1], row_bytes, limit):
        budget.checkpoint()
        target = rows[index]
        target[..., interior[-1]] = x[index]
        _borders(target, target.ndim - 1, n, a, e, value, moves, budget)
    # Then each other axis over the whole of the axes already done and the last one.
    axes = zip(x.shape[:-1], start_padding[:-1], end_padding[:-1], strict=True)
    for d, (n, a, e) in enumerate(axes):
        region = out[(*(slice(None),) * (d + 1), *interior[d + 1 : last])]
        row = region[(*(slice(None),) * d, slice(0, 1))].nbytes  # one position along axis d
        _borders(region, d, n, a, e, value, _plan(n, a, e, mode, _step(row, limit)), budget)
    return out


Move = tuple[slice, slice] | tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]


def _step(row: int, limit: int) -> int:
    """Border positions per slice: their rows and index arrays stay within ``limit``."""
    return max(1, limit // (row + 64))


def _plan(n: int, a: int, e: int, mode: str, step: int) -> Iterable[Move]:
    """`_moves`, remembered when they are a few slice pairs (a service sees the same shapes
    again and again); long borders are planned afresh, slice by slice, every time."""
    if a + e > _REMEMBERED_BORDER:
        return _moves(n, a, e, mode, step)
    return _remembered_moves(n, a, e, mode, step)


@functools.lru_cache(maxsize=1024)
def _remembered_moves(n: int, a: int, e: int, mode: str, step: int) -> tuple[Move, ...]:
    moves = tuple(_moves(n, a, e, mode, step))
    for target, source in moves:  # index arrays are shared from here on: freeze them
        if isinstance(target, np.ndarray) and isinstance(source, np.ndarray):
            target.flags.writeable = source.flags.writeable = False
    return moves


def _moves(n: int, a: int, e: int, mode: str, step: int) -> Iterator[Move]:
    """(target, source) positions along one axis that fill its borders, slice by slice.

    Every border position reads the position the reference's periodic map gives. Where
    consecutive targets read consecutive sources (step +1 or -1) the move is one pair of
    slices; beyond a few such runs in one slice, it is one pair of index arrays (a gather).
    CONSTANT mode has no moves.
    """
    if mode == "CONSTANT":
        return
    every = np.concatenate([np.arange(-a, 0), np.arange(n, n + e)])
    for lo in range(0, len(every), step):
        positions = every[lo : lo + step]
        sources = source_index(positions, n, mode) + a
        targets = positions + a
        steps = np.diff(sources)
        runs_on = (np.abs(steps) == 1) & (np.diff(targets) == 1)
        breaks = ~runs_on
        breaks[1:] |= runs_on[1:] & runs_on[:-1] & (steps[1:] != steps[:-1])  # turns
        starts = [0, *(np.flatnonzero(breaks) + 1).tolist()]
        if len(starts) > _MAX_RUNS:
            yield targets, sources
            continue
        for i, j in zip(starts, [*starts[1:], len(targets)], strict=True):
            step_ = int(sources[i + 1] - sources[i]) if j - i > 1 else 1
            head, tail = int(sources[i]), int(sources[j - 1])
            source = slice(head, tail + step_ if tail + step_ >= 0 else None, step_)
            yield slice(int(targets[i]), int(targets[j - 1]) + 1), source


def _borders(
    region: Array,
    d: int,
    n: int,
    a: int,
    e: int,
    value: Any,
    moves: Iterable[Move],
    budget: ExecutionBudget,
) -> None:
    """Fill the ``a`` and ``e`` border positions of ``region`` along axis ``d``: with ``value``
    when ``moves`` is empty (CONSTANT), else by ``moves`` from the ``n`` positions inside."""
    lead = (slice(None),) * d
    any_move = False
    for target, source in moves:
        any_move = True
        if isinstance(target, slice) and isinstance(source, slice):
            width = target.stop - target.start
            if d == region.ndim - 1 and width <= _NARROW:
                # Position by position: each copy then runs along the rows, not across them.
                for i in range(width):
                    at = source.start + i * source.step
                    dst, src = slice(target.start + i, target.start + i + 1), slice(at, at + 1)
                    _assign(region[(*lead, dst)], region[(*lead, src)], budget)
            else:
                _assign(region[(*lead, target)], region[(*lead, source)], budget)
        else:
            _gather(region, d, np.asarray(target), np.asarray(source), budget)
    if not any_move:
        for border in (slice(0, a), slice(a + n, a + n + e)):
            _assign(region[(*lead, border)], value, budget)


def _assign(dst: Array, src: Any, budget: ExecutionBudget) -> None:
    """``dst[...] = src`` (an array of ``dst``'s shape, or a scalar), one slice at a time."""
    if dst.nbytes <= budget.slice_bytes():
        budget.checkpoint()
        dst[...] = src
        return
    scalar = np.ndim(src) == 0
    for index in leading_chunks(dst.shape, dst.dtype.itemsize, budget.slice_bytes()):
        budget.checkpoint()
        dst[index] = src if scalar else src[index]


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
