"""UNFOLD (im2col), SEMANTICS.md §3."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..geometry import blocks_per_dimension
from ._windows import (
    EVERYTHING,
    Array,
    Index,
    tap_slices,
    window_offsets,
    zero_padded,
)

__all__ = ["unfold"]


def unfold(
    x: Array,
    window_sizes: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    start_padding: Sequence[int],
    end_padding: Sequence[int],
) -> Array:
    """``(N, C, *S) -> (N, C*prod(K), BlockCount)``, any dtype, 1..6 spatial dims.

    ``Y[n, c*prod(K) + k, b] = X[n, c, b*Strides + k*Dilations - StartPadding]``, or 0 where that
    position lies in the padding; ``k`` and ``b`` are flattened row-major.
    """
    n, c = x.shape[:2]
    blocks = blocks_per_dimension(
        x.shape[2:], window_sizes, strides, dilations, start_padding, end_padding
    )
    padded = zero_padded(x, start_padding, end_padding, x.dtype)
    # Axes (N, C, *K, *blocks): for a fixed window offset k, all blocks are one strided slice.
    out = np.empty((n, c, *window_sizes, *blocks), dtype=x.dtype)
    for k in window_offsets(window_sizes):
        at_offset: Index = (*EVERYTHING, *k)
        out[at_offset] = padded[(*EVERYTHING, *tap_slices(k, blocks, strides, dilations))]
    return out.reshape(n, c * math.prod(window_sizes), math.prod(blocks))
