"""FOLD (col2im), SEMANTICS.md §3: a gather into each output plane, tap by tap."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ..geometry import blocks_per_dimension
from ..reference._windows import accumulation_dtype
from ._slices import host_memory, plane_chunks
from ._windows import axes_of
from .budget import DEFAULT_BUDGET, ExecutionBudget

__all__ = ["fold"]

Array = npt.NDArray[Any]


@host_memory
def fold(
    x: Array,
    output_sizes: Sequence[int],
    window_sizes: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    start_padding: Sequence[int],
    end_padding: Sequence[int],
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
    c = rows // math.prod(window_sizes)
    blocks = blocks_per_dimension(
        output_sizes, window_sizes, strides, dilations, start_padding, end_padding
    )
    axes = axes_of(output_sizes, window_sizes, strides, dilations, start_padding, blocks)
    columns = x.reshape(n, c, *window_sizes, *blocks)
    acc = accumulation_dtype(x.dtype)
    out = np.zeros((n, c, *output_sizes), dtype=x.dtype)
    plane = math.prod(output_sizes) * acc.itemsize
    for ns, cs in plane_chunks(n, c, plane, budget.slice_bytes()):
        budget.checkpoint()
        target = out[ns, cs]
        sums = target if acc == x.dtype else np.zeros(target.shape, dtype=acc)
        lead = (slice(None),) * (sums.ndim - len(axes))
        source = columns[ns, cs]
        for k in np.ndindex(*window_sizes):
            ranges = [a.valid(kd) for a, kd in zip(axes, k, strict=True)]
            if any(lo == hi for lo, hi in ranges):
                continue
            hits = tuple(
                a.source(kd, lo, hi) for a, kd, (lo, hi) in zip(axes, k, ranges, strict=True)
            )
            # In-place integer addition wraps modulo 2**bits: the rule for integer FOLD.
            sums[(*lead, *hits)] += source[(*lead, *k, *(slice(lo, hi) for lo, hi in ranges))]
        if sums is not target:
            target[...] = sums
        del sums  # before the next slice's exist
    return out
