"""UNFOLD (im2col) on the GPU: launcher of `kernels/cuda/unfold.cu`."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from ..geometry import blocks_per_dimension
from ._common import (
    BLOCK,
    FAST_DIVMOD,
    fast_divmod,
    fill_divisors,
    grid_for,
    index_type,
    make_struct,
)
from ._loader import get_kernel

__all__ = ["unfold"]

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


class _Plan(NamedTuple):
    out_shape: tuple[int, ...]
    kernel: Any
    grid: tuple[int, int, int]
    params: np.ndarray


@functools.lru_cache(maxsize=512)
def _plan(
    shape: tuple[int, ...],
    byte_strides: tuple[int, ...],
    itemsize: int,
    geometry: tuple[tuple[int, ...], ...],
) -> _Plan:
    """Everything but the data, once per geometry: a call then only allocates and launches."""
    window_sizes, strides, dilations, start_padding, end_padding = geometry
    n, c, *sizes = shape
    dims = len(sizes)
    blocks = blocks_per_dimension(sizes, *geometry)
    taps = math.prod(window_sizes)
    length = math.prod(blocks)
    out_shape = (n, c * taps, length)
    p = np.zeros((), dtype=PARAMS)
    if math.prod(out_shape) == 0:
        return _Plan(out_shape, None, (1, 1, 1), p)
    per_chunk = 16 // itemsize
    # Chunks are aligned to the buffer (chunk_span), so a row may need one more.
    chunks_per_row = -(-(length + per_chunk - 1) // per_chunk)
    total = n * c * taps * chunks_per_row

    xs = [s // itemsize for s in byte_strides]
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

    idx = index_type(shape, xs, math.prod(out_shape), total)
    kernel = get_kernel("unfold.cu", f"dml::unfold_chunks<{itemsize},{dims},{idx}>")
    return _Plan(out_shape, kernel, grid_for(total), p)


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

    geometry = tuple(
        tuple(v) for v in (window_sizes, strides, dilations, start_padding, end_padding)
    )
    plan = _plan(x.shape, x.strides, x.dtype.itemsize, geometry)
    y = cupy.empty(plan.out_shape, dtype=x.dtype)
    if plan.kernel is not None:
        plan.kernel(plan.grid, (BLOCK, 1, 1), (x, y, plan.params[()]))
    return y
