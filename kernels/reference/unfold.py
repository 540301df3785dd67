"""UNFOLD (im2col), SEMANTICS.md §3."""

from __future__ import annotations

import math

import numpy as np

from ..geometry import Window
from ._windows import (
    EVERYTHING,
    Array,
    Index,
    tap_slices,
    window_offsets,
    zero_padded,
)

__all__ = ["unfold"]


def unfold(x: Array, window: Window) -> Array:
    """``(N, C, *S) -> (N, C*prod(K), BlockCount)``, any dtype, 1..6 spatial dims, ``K`` the
    window's sizes.

    ``Y[n, c*prod(K) + k, b] = X[n, c, b*Strides + k*Dilations - StartPadding]``, or 0 where that
    position lies in the padding; ``k`` and ``b`` are flattened row-major.
    """
    n, c = x.shape[:2]
    blocks = window.blocks(x.shape[2:])
    padded = zero_padded(x, window.start_padding, window.end_padding, x.dtype)
    # Axes (N, C, *K, *blocks): for a fixed window offset k, all blocks are one strided slice.
    out = np.empty((n, c, *window.sizes, *blocks), dtype=x.dtype)
    for k in window_offsets(window.sizes):
        at_offset: Index = (*EVERYTHING, *k)
        out[at_offset] = padded[(*EVERYTHING, *tap_slices(k, blocks, window))]
    return out.reshape(n, c * window.taps, math.prod(blocks))
