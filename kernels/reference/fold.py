"""FOLD (col2im), SEMANTICS.md §3: the adjoint of UNFOLD."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..geometry import Window
from ._windows import (
    EVERYTHING,
    Array,
    Index,
    accumulation_dtype,
    interior,
    padded_sizes,
    tap_slices,
    window_offsets,
)

__all__ = ["fold"]


def fold(x: Array, output_sizes: Sequence[int], window: Window) -> Array:
    """``(N, C*prod(K), BlockCount) -> (N, C, *output_sizes)``, any dtype, 1..6 spatial dims,
    ``K`` the window's sizes.

    ``Y[n, c, p] = sum of X[n, c*prod(K) + k, b]`` over all ``(k, b)`` with
    ``b*Strides + k*Dilations - StartPadding == p``; contributions landing in the padding are
    dropped, positions never hit are 0. Sums are taken window offset by window offset (``k``
    row-major). Integer sums wrap in the tensor's own type; FLOAT16 accumulates in FLOAT32 and
    is rounded once at the end; FLOAT32/FLOAT64 accumulate in their own type.
    """
    n, rows, _ = x.shape
    c = rows // window.taps
    blocks = window.blocks(output_sizes)
    columns = x.reshape(n, c, *window.sizes, *blocks)
    # Accumulate into the zero-padded image, then keep its interior (drops padding hits).
    padded = np.zeros(
        (n, c, *padded_sizes(output_sizes, window.start_padding, window.end_padding)),
        dtype=accumulation_dtype(x.dtype),
    )
    for k in window_offsets(window.sizes):
        # In-place integer addition wraps modulo 2**bits: the rule for integer FOLD.
        at_offset: Index = (*EVERYTHING, *k)
        target = padded[(*EVERYTHING, *tap_slices(k, blocks, window))]
        target += columns[at_offset]
    inside = interior(output_sizes, window.start_padding)
    return padded[(*EVERYTHING, *inside)].astype(x.dtype, order="C")
