"""FOLD (col2im), SEMANTICS.md §3: the adjoint of UNFOLD."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..geometry import blocks_per_dimension
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


def fold(
    x: Array,
    output_sizes: Sequence[int],
    window_sizes: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    start_padding: Sequence[int],
    end_padding: Sequence[int],
) -> Array:
    """``(N, C*prod(K), BlockCount) -> (N, C, *output_sizes)``, any dtype, 1..6 spatial dims.

    ``Y[n, c, p] = sum of X[n, c*prod(K) + k, b]`` over all ``(k, b)`` with
    ``b*Strides + k*Dilations - StartPadding == p``; contributions landing in the padding are
    dropped, positions never hit are 0. Sums are taken window offset by window offset (``k``
    row-major). Integer sums wrap in the tensor's own type; FLOAT16 accumulates in FLOAT32 and
    is rounded once at the end; FLOAT32/FLOAT64 accumulate in their own type.
    """
    n, rows, _ = x.shape
    c = rows // math.prod(window_sizes)
    blocks = blocks_per_dimension(
        output_sizes, window_sizes, strides, dilations, start_padding, end_padding
    )
    columns = x.reshape(n, c, *window_sizes, *blocks)
    # Accumulate into the zero-padded image, then keep its interior (drops padding hits).
    padded = np.zeros(
        (n, c, *padded_sizes(output_sizes, start_padding, end_padding)),
        dtype=accumulation_dtype(x.dtype),
    )
    for k in window_offsets(window_sizes):
        # In-place integer addition wraps modulo 2**bits: the rule for integer FOLD.
        at_offset: Index = (*EVERYTHING, *k)
        target = padded[(*EVERYTHING, *tap_slices(k, blocks, strides, dilations))]
        target += columns[at_offset]
    return padded[(*EVERYTHING, *interior(output_sizes, start_padding))].astype(x.dtype, order="C")
