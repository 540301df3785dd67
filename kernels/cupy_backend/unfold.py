"""UNFOLD (im2col) on the GPU: launcher of `kernels/cuda/unfold.cu`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ._common import (
    BLOCK,
    FAST_DIVMOD,
    element_strides,
    fast_divmod,
    fill_divisors,
    grid_for,
    index_type,
    make_struct,
)
from ._loader import get_kernel

__all__ = ["blocks_per_dimension", "unfold"]

MAX_DIMS = 6

PARAMS = make_struct(
    [
        ("x_stride_n", "<i8", 0),
        ("x_stride_c", "<i8", 0),
        ("x_stride", "<i8", MAX_DIMS),
        ("total_chunks", "<i8", 0),
        ("size", "<i4", MAX_DIMS),
        ("window_stride", "<i4", MAX_DIMS),
        ("dilation", "<i4", MAX_DIMS),
        ("pad_lo", "<i4", MAX_DIMS),
        ("blocks", "<i4", MAX_DIMS),
        ("block_div", FAST_DIVMOD, MAX_DIMS),
        ("window_div", FAST_DIVMOD, MAX_DIMS),
        ("chunk_div", FAST_DIVMOD, 0),
        ("taps_div", FAST_DIVMOD, 0),
        ("channel_div", FAST_DIVMOD, 0),
        ("block_count", "<i4", 0),
        ("unused", "<i4", 0),
    ]
)


def blocks_per_dimension(
    sizes: Sequence[int],
    window_sizes: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    start_padding: Sequence[int],
    end_padding: Sequence[int],
) -> list[int]:
    """``(S + Start + End - Dilations*(K-1) - 1) // Strides + 1`` per spatial dim."""
    return [
        (n + a + b - d * (k - 1) - 1) // s + 1
        for n, k, s, d, a, b in zip(
            sizes, window_sizes, strides, dilations, start_padding, end_padding, strict=True
        )
    ]


def unfold(
    x: Any,
    window_sizes: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    start_padding: Sequence[int],
    end_padding: Sequence[int],
) -> Any:
    """``(N, C, *S) -> (N, C*prod(K), BlockCount)`` for 1..6 spatial dims, any dtype."""
    import cupy

    n, c, *sizes = x.shape
    dims = len(sizes)
    blocks = blocks_per_dimension(
        sizes, window_sizes, strides, dilations, start_padding, end_padding
    )
    taps = math.prod(window_sizes)
    length = math.prod(blocks)
    y = cupy.empty((n, c * taps, length), dtype=x.dtype)
    if y.size == 0:
        return y
    itemsize = x.dtype.itemsize
    chunks_per_row = -(-length // (16 // itemsize))
    total = n * c * taps * chunks_per_row

    xs = element_strides(x)
    p = np.zeros((), dtype=PARAMS)
    p["x_stride_n"], p["x_stride_c"] = xs[0], xs[1]
    p["x_stride"][:dims] = xs[2:]
    p["total_chunks"] = total
    p["size"][:dims] = sizes
    p["window_stride"][:dims] = strides
    p["dilation"][:dims] = dilations
    p["pad_lo"][:dims] = start_padding
    p["blocks"][:dims] = blocks
    fill_divisors(p["block_div"], blocks)
    fill_divisors(p["window_div"], window_sizes)
    p["chunk_div"] = fast_divmod(chunks_per_row)
    p["taps_div"] = fast_divmod(taps)
    p["channel_div"] = fast_divmod(c)
    p["block_count"] = length

    idx = index_type(x, y.size, total)
    kernel = get_kernel("unfold.cu", f"dml::unfold_chunks<{itemsize},{dims},{idx}>")
    kernel(grid_for(total), (BLOCK, 1, 1), (x, y, p[()]))
    return y
