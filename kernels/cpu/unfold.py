"""UNFOLD (im2col), SEMANTICS.md §3, as strided copies straight from the input."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ..geometry import Window
from ._slices import host_memory, plane_chunks
from ._windows import Axis, axes_of
from .budget import DEFAULT_BUDGET, ExecutionBudget

__all__ = ["unfold", "unfold_into"]

Array = npt.NDArray[Any]


@host_memory
def unfold(x: Array, window: Window, *, budget: ExecutionBudget = DEFAULT_BUDGET) -> Array:
    """``(N, C, *S) -> (N, C*prod(K), BlockCount)``; the reference's contract, bit for bit.

    Each tap is one strided copy of the input into the blocks it reaches; only the blocks
    whose tap falls in the padding are zeroed. No temporaries; `budget.check` runs between
    groups of planes.
    """
    n, c = x.shape[:2]
    axes = axes_of(x.shape[2:], window)
    blocks = tuple(a.blocks for a in axes)
    out = np.empty((n, c, *window.sizes, *blocks), dtype=x.dtype)
    plane = window.taps * math.prod(blocks) * x.dtype.itemsize
    for ns, cs in plane_chunks(n, c, plane, budget.slice_bytes()):
        budget.checkpoint()
        unfold_into(out[ns, cs], x[ns, cs], axes)
    return out.reshape(n, c * window.taps, math.prod(blocks))


def unfold_into(out: Array, x: Array, axes: Sequence[Axis], fill: Any = 0) -> None:
    """``out[..., *k, *b] = x[..., pos(k, b)]``, or ``fill`` where the tap is in the padding.

    ``out`` has the leading axes of ``x``, then the window axes, then the block axes.
    """
    lead = x.ndim - len(axes)
    everything = (slice(None),) * lead
    for k in np.ndindex(*(a.window for a in axes)):
        ranges = [a.valid(kd) for a, kd in zip(axes, k, strict=True)]
        tap = out[(*everything, *k)]
        if any(lo == hi for lo, hi in ranges):
            tap[...] = fill
            continue
        inside = tuple(slice(lo, hi) for lo, hi in ranges)
        source = tuple(
            a.source(kd, lo, hi) for a, kd, (lo, hi) in zip(axes, k, ranges, strict=True)
        )
        tap[(*everything, *inside)] = x[(*everything, *source)]
        for d, (a, (lo, hi)) in enumerate(zip(axes, ranges, strict=True)):
            before = (*everything, *(slice(None),) * d)
            if lo > 0:
                tap[(*before, slice(0, lo))] = fill
            if hi < a.blocks:
                tap[(*before, slice(hi, None))] = fill
