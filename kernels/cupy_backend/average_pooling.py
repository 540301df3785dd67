"""AVERAGE_POOLING on the GPU: launcher of `kernels/cuda/average_pooling.cu`."""

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
    make_struct,
)
from ._loader import get_kernel
from .unfold import blocks_per_dimension

__all__ = ["average_pooling"]

PARAMS = make_struct(
    [
        ("x_stride_n", "<i8", 0),
        ("x_stride_c", "<i8", 0),
        ("x_stride", "<i8", 3),
        ("total", "<i8", 0),
        ("size", "<i4", 3),
        ("out", "<i4", 3),
        ("window", "<i4", 3),
        ("stride", "<i4", 3),
        ("dilation", "<i4", 3),
        ("pad_lo", "<i4", 3),
        ("tile", "<i4", 3),
        ("in_tile", "<i4", 3),
        ("tiles_div", FAST_DIVMOD, 3),
        ("out_div", FAST_DIVMOD, 3),
        ("in_w_div", FAST_DIVMOD, 0),
        ("in_h_div", FAST_DIVMOD, 0),
        ("tile_w_div", FAST_DIVMOD, 0),
        ("tile_h_div", FAST_DIVMOD, 0),
        ("channel_div", FAST_DIVMOD, 0),
        ("include_padding", "<i4", 0),
        ("taps", "<f4", 0),
    ]
)

# Shared memory per CTA (float32 input tile + row sums): small enough for several CTAs per SM.
SMEM_BUDGET = 32 * 1024


def _in_extent(tile: int, window: int, stride: int, dilation: int) -> int:
    return (tile - 1) * stride + (window - 1) * dilation + 1


def choose_tile(
    out: Sequence[int], window: Sequence[int], stride: Sequence[int], dilation: Sequence[int]
) -> tuple[list[int], list[int]] | None:
    """Output tile (TD, TH, TW) and its input extent, or None when no tile fits in shared memory.

    W rows of the input tile aim at 64 (stride 1) or 128 floats so warps load whole lines;
    H and D tiles trade halo re-reads against shared memory.
    """
    target_w = 64 if stride[2] == 1 else 128
    ext_w = (window[2] - 1) * dilation[2] + 1
    tw = max(1, (target_w - ext_w) // stride[2] + 1)
    tile = [4 if out[0] > 1 else 1, 16 if out[0] == 1 else 8, tw]
    tile = [min(t, o) for t, o in zip(tile, out, strict=True)]
    while True:
        ext = [_in_extent(*a) for a in zip(tile, window, stride, dilation, strict=True)]
        smem = 4 * (ext[0] * ext[1] * ext[2] + ext[0] * ext[1] * tile[2])
        if smem <= SMEM_BUDGET:
            return tile, ext
        axis = next((d for d in range(3) if tile[d] > 1), None)
        if axis is None:
            return None
        tile[axis] = max(1, tile[axis] // 2)


def average_pooling(
    x: Any,
    window_size: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    start_padding: Sequence[int],
    end_padding: Sequence[int],
    include_padding: bool,
) -> Any:
    """``(N, C, *S) -> (N, C, *O)`` for 1..3 spatial dims, FLOAT16/FLOAT32, float32 sums."""
    import cupy

    n, c, *sizes = x.shape
    dims = len(sizes)
    out_sizes = blocks_per_dimension(
        sizes, window_size, strides, dilations, start_padding, end_padding
    )
    y = cupy.empty((n, c, *out_sizes), dtype=x.dtype)
    if y.size == 0:
        return y

    # Unit leading axes turn 1-D and 2-D pooling into the 3-D form of the kernel.
    lead = 3 - dims
    xs = element_strides(x)
    size3 = [1] * lead + list(sizes)
    out3 = [1] * lead + list(out_sizes)
    window3 = [1] * lead + list(window_size)
    stride3 = [1] * lead + list(strides)
    dilation3 = [1] * lead + list(dilations)

    p = np.zeros((), dtype=PARAMS)
    p["x_stride_n"], p["x_stride_c"] = xs[0], xs[1]
    p["x_stride"] = [0] * lead + list(xs[2:])
    p["size"] = size3
    p["out"] = out3
    p["window"] = window3
    p["stride"] = stride3
    p["dilation"] = dilation3
    p["pad_lo"] = [0] * lead + list(start_padding)
    fill_divisors(p["out_div"], out3)
    p["channel_div"] = fast_divmod(c)
    p["include_padding"] = int(include_padding)
    p["taps"] = math.prod(window_size)

    cpp = from_numpy(x.dtype).info.cpp
    choice = choose_tile(out3, window3, stride3, dilation3)
    if choice is None:
        p["total"] = y.size
        kernel = get_kernel("average_pooling.cu", f"dml::pool_direct<{cpp}>")
        kernel(grid_for(y.size), (BLOCK, 1, 1), (x, y, p[()]))
        return y

    tile, ext = choice
    tiles = [-(-o // t) for o, t in zip(out3, tile, strict=True)]
    ctas = n * c * math.prod(tiles)
    p["total"] = ctas
    p["tile"] = tile
    p["in_tile"] = ext
    fill_divisors(p["tiles_div"], tiles)
    p["in_w_div"] = fast_divmod(ext[2])
    p["in_h_div"] = fast_divmod(ext[1])
    p["tile_w_div"] = fast_divmod(tile[2])
    p["tile_h_div"] = fast_divmod(tile[1])
    smem = 4 * (ext[0] * ext[1] * ext[2] + ext[0] * ext[1] * tile[2])
    kernel = get_kernel("average_pooling.cu", f"dml::pool_tiled<{cpp}>")
    kernel((ctas, 1, 1), (BLOCK, 1, 1), (x, y, p[()]), shared_mem=smem)
    return y
