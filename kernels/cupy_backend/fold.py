"""FOLD (col2im) on the GPU: launcher of `kernels/cuda/fold.cu`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..dtypes import from_numpy
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
from .unfold import blocks_per_dimension

__all__ = ["fold"]

MAX_DIMS = 6

PARAMS = make_struct(
    [
        ("col_stride_n", "<i8", 0),
        ("col_stride_r", "<i8", 0),
        ("col_stride_l", "<i8", 0),
        ("total_chunks", "<i8", 0),
        ("size", "<i4", MAX_DIMS),
        ("window", "<i4", MAX_DIMS),
        ("pad_lo", "<i4", MAX_DIMS),
        ("dilation", "<i4", MAX_DIMS),
        ("blocks", "<i4", MAX_DIMS),
        ("k_step", "<i4", MAX_DIMS),
        ("b_step", "<i4", MAX_DIMS),
        ("k_inverse", "<i4", MAX_DIMS),
        ("tap_stride", "<i4", MAX_DIMS),
        ("block_stride", "<i4", MAX_DIMS),
        ("size_div", FAST_DIVMOD, MAX_DIMS),
        ("stride_div", FAST_DIVMOD, MAX_DIMS),
        ("gcd_div", FAST_DIVMOD, MAX_DIMS),
        ("k_step_div", FAST_DIVMOD, MAX_DIMS),
        ("chunk_div", FAST_DIVMOD, 0),
        ("channel_div", FAST_DIVMOD, 0),
        ("taps", "<i4", 0),
        ("unused", "<i4", 0),
    ]
)


def _suffix_products(values: Sequence[int]) -> list[int]:
    """``out[d] = prod(values[d+1:])``: row-major weights."""
    out = [1] * len(values)
    for d in range(len(values) - 2, -1, -1):
        out[d] = out[d + 1] * values[d + 1]
    return out


def fold(
    x: Any,
    output_sizes: Sequence[int],
    window_sizes: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    start_padding: Sequence[int],
    end_padding: Sequence[int],
) -> Any:
    """``(N, C*prod(K), BlockCount) -> (N, C, *output_sizes)``, summing overlapping taps.

    Integers wrap in their own type, FLOAT16 accumulates in float32; the summation order is
    fixed, so results are deterministic.
    """
    import cupy

    n, rows, length = x.shape
    dims = len(output_sizes)
    taps = math.prod(window_sizes)
    c = rows // taps
    blocks = blocks_per_dimension(
        output_sizes, window_sizes, strides, dilations, start_padding, end_padding
    )
    y = cupy.empty((n, c, *output_sizes), dtype=x.dtype)
    if y.size == 0:
        return y
    itemsize = x.dtype.itemsize
    width = output_sizes[-1]
    chunks_per_row = -(-width // (16 // itemsize))
    total = (y.size // width) * chunks_per_row

    gcds = [math.gcd(s, d) for s, d in zip(strides, dilations, strict=True)]
    k_steps = [s // g for s, g in zip(strides, gcds, strict=True)]
    b_steps = [d // g for d, g in zip(dilations, gcds, strict=True)]
    inverses = [pow(b % k, -1, k) if k > 1 else 0 for b, k in zip(b_steps, k_steps, strict=True)]

    xs = element_strides(x)
    p = np.zeros((), dtype=PARAMS)
    p["col_stride_n"], p["col_stride_r"], p["col_stride_l"] = xs
    p["total_chunks"] = total
    p["size"][:dims] = output_sizes
    p["window"][:dims] = window_sizes
    p["pad_lo"][:dims] = start_padding
    p["dilation"][:dims] = dilations
    p["blocks"][:dims] = blocks
    p["k_step"][:dims] = k_steps
    p["b_step"][:dims] = b_steps
    p["k_inverse"][:dims] = inverses
    p["tap_stride"][:dims] = _suffix_products(window_sizes)
    p["block_stride"][:dims] = _suffix_products(blocks)
    fill_divisors(p["size_div"], output_sizes)
    fill_divisors(p["stride_div"], strides)
    fill_divisors(p["gcd_div"], gcds)
    fill_divisors(p["k_step_div"], k_steps)
    p["chunk_div"] = fast_divmod(chunks_per_row)
    p["channel_div"] = fast_divmod(c)
    p["taps"] = taps

    cpp = from_numpy(x.dtype).info.cpp
    idx = index_type(x, y.size, total)
    kernel = get_kernel("fold.cu", f"dml::fold_chunks<{cpp},{dims},{idx}>")
    kernel(grid_for(total), (BLOCK, 1, 1), (x, y, p[()]))
    return y
