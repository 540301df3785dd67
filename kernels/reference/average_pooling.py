"""AVERAGE_POOLING / AVERAGE_POOLING1, SEMANTICS.md §5."""

from __future__ import annotations

import numpy as np

from ..geometry import Window
from ._windows import Array
from .unfold import unfold

__all__ = ["average_pooling"]


def average_pooling(x: Array, window: Window, include_padding: bool) -> Array:
    """``(N, C, *S) -> (N, C, *O)`` for 1..3 spatial dims, FLOAT16 or FLOAT32.

    ``O = (S + Start + End - ((WindowSize-1)*Dilations + 1)) // Strides + 1`` and
    ``Y[n,c,o] = sum_t X~[n,c, o*Strides + t*Dilations - Start] / divisor`` with ``X~ = 0``
    outside the input; ``divisor = prod(WindowSize)`` when ``include_padding``, else the number
    of taps inside the input (0 for a window wholly in padding, giving NaN: validation rejects
    that case). The window sums are UNFOLD's rows summed per channel. FLOAT16 accumulates in
    FLOAT32; FLOAT32 accumulates in FLOAT64 (as close to the exact mean as this oracle can get);
    the result is rounded once to the input type.
    """
    accumulate = np.float32 if x.dtype == np.float16 else np.float64
    n, c = x.shape[:2]
    taps = window.taps
    out_sizes = window.blocks(x.shape[2:])

    windows = unfold(x.astype(accumulate), window).reshape(n, c, taps, *out_sizes)
    sums = windows.sum(axis=2)
    if include_padding:
        divisor: Array | int = taps
    else:
        inside = unfold(np.ones((1, 1, *x.shape[2:]), dtype=accumulate), window)
        divisor = inside.reshape(1, 1, taps, *out_sizes).sum(axis=2)
    with np.errstate(divide="ignore", invalid="ignore"):
        out: Array = (sums / divisor).astype(x.dtype, order="C")
    return out
