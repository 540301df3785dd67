"""AVERAGE_POOLING on the GPU: launcher of `kernels/cuda/average_pooling.cu`."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from ..dtypes import from_numpy
from ..geometry import blocks_per_dimension
from ._common import (
    BLOCK,
    FAST_DIVMOD,
    INT32_LIMIT,
    fast_divmod,
    fill_divisors,
    grid_for,
    index_type,
    make_struct,
)
from ._loader import get_kernel

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
        ("in_wv_div", FAST_DIVMOD, 0),
        ("tile_w_div", FAST_DIVMOD, 0),
        ("tile_wv_div", FAST_DIVMOD, 0),
        ("channel_div", FAST_DIVMOD, 0),
        ("include_padding", "<i4", 0),
        ("taps", "<f4", 0),
        ("groups_div", FAST_DIVMOD, 0),
        ("contiguous", "<i4", 0),
    ]
)

# Window sizes compiled as template constants (others are read at run time).
SPECIALISED_WINDOWS = (1, 2, 3)
# Kernel paths; each can be switched off here, falling back to the generic tiled kernel.
USE_SPECIALISED_TILES = True
USE_ROWS_KERNEL = True
# W positions per pool_tiled work item. Measured on an H200 (bench_kernels.py, run 4): 4
# positions per item were slower than 1 (2-D k3s1 146 vs 127 us, 3-D k3s1 299 vs 223 us), so
# each item is one element; 4 stays available (path "tiled4") for other shapes.
TILE_VECTOR = 1
# pool_rows reads every tap from global memory (L1/L2 absorb the re-reads): it beat the tiles
# while each input element is read at most ~3.4 times per output plane pass (k3s2: 2-D
# 57 vs 75 us, 3-D 94 vs 114 us) and lost at 9 and 27 reads (k3s1 2-D, 3-D).
ROWS_MAX_READS = 4.0

# Shared memory per CTA (float32 input tile + row sums): small enough for several CTAs per SM.
SMEM_BUDGET = 32 * 1024


def _in_extent(tile: int, window: int, stride: int, dilation: int) -> int:
    return (tile - 1) * stride + (window - 1) * dilation + 1


def shared_bytes(tile: Sequence[int], ext: Sequence[int]) -> int:
    """Dynamic shared memory of pool_tiled: the two float buffers, then the row tables."""
    in_rows, out_rows = ext[0] * ext[1], tile[0] * tile[1]
    floats = (in_rows * (ext[2] + tile[2]) + 1) // 2 * 2
    return 4 * floats + 8 * in_rows + 16 * out_rows


def choose_tile(
    out: Sequence[int], window: Sequence[int], stride: Sequence[int], dilation: Sequence[int]
) -> tuple[list[int], list[int]] | None:
    """Output tile (TD, TH, TW) and its input extent, or None when no tile fits in shared memory.

    W rows of the input tile aim at 64 (stride 1) or 128 floats so warps load whole lines, and
    tiles split each axis evenly (no mostly-empty last tile); deep D and H tiles cut halo
    re-reads until shared memory runs out (D first, then H, then W are halved to fit).
    """
    target_w = 64 if stride[2] == 1 else 128
    ext_w = (window[2] - 1) * dilation[2] + 1
    wanted = [8 if out[0] > 1 else 1, 8 if out[0] > 1 else 32, (target_w - ext_w) // stride[2] + 1]
    tile = []
    for o, w in zip(out, wanted, strict=True):
        w = max(1, min(w, o))
        tile.append(-(-o // -(-o // w)))  # even split: ceil(o / number of tiles)
    while True:
        ext = [_in_extent(*a) for a in zip(tile, window, stride, dilation, strict=True)]
        if shared_bytes(tile, ext) <= SMEM_BUDGET:
            return tile, ext
        axis = next((d for d in range(3) if tile[d] > 1), None)
        if axis is None:
            return None
        tile[axis] = max(1, tile[axis] // 2)


def _constant(window: int) -> int:
    return window if window in SPECIALISED_WINDOWS else 0


def outputs_per_thread(window_w: int, itemsize: int) -> int:
    """Outputs along W per pool_rows thread: a 16-byte input span when the window allows."""
    if window_w not in SPECIALISED_WINDOWS:
        return 1
    span = window_w * itemsize
    if 16 % span == 0:
        return min(8, 16 // span)
    return 4 if itemsize == 2 else 2


def reads_per_element(window: Sequence[int], stride: Sequence[int]) -> float:
    """Global reads per input element when every output reads its own taps (pool_rows)."""
    return math.prod(k / st for k, st in zip(window, stride, strict=True))


class _Plan(NamedTuple):
    out_shape: tuple[int, ...]
    kernel: Any
    grid: tuple[int, int, int]
    shared_mem: int
    params: np.ndarray


@functools.lru_cache(maxsize=512)
def _plan(
    shape: tuple[int, ...],
    byte_strides: tuple[int, ...],
    dtype: np.dtype,
    geometry: tuple[tuple[int, ...], ...],
    include_padding: bool,
    path: str | None = None,
) -> _Plan:
    """Everything but the data, once per geometry: a call then only allocates and launches.

    ``path`` ("tiled", "tiled1" / "tiled4" = W positions per tile work item, "rows", "direct")
    forces a kernel, for tests and measurements; None chooses: pool_rows where windows re-read
    little (non-overlapping windows, stride 2 with window 3), else pool_tiled, else pool_direct.
    """
    window_size, strides, dilations, start_padding, _ = geometry
    n, c, *sizes = shape
    dims = len(sizes)
    out_sizes = blocks_per_dimension(sizes, *geometry)
    out_shape = (n, c, *out_sizes)
    p = np.zeros((), dtype=PARAMS)
    if math.prod(out_shape) == 0:
        return _Plan(out_shape, None, (1, 1, 1), 0, p)

    # Unit leading axes turn 1-D and 2-D pooling into the 3-D form of the kernel.
    lead = 3 - dims
    xs = [s // dtype.itemsize for s in byte_strides]
    out3 = [1] * lead + list(out_sizes)
    window3 = [1] * lead + list(window_size)
    stride3 = [1] * lead + list(strides)
    dilation3 = [1] * lead + list(dilations)
    p["x_stride_n"], p["x_stride_c"] = xs[0], xs[1]
    p["x_stride"] = [0] * lead + xs[2:]
    p["size"] = [1] * lead + list(sizes)
    p["out"] = out3
    p["window"] = window3
    p["stride"] = stride3
    p["dilation"] = dilation3
    p["pad_lo"] = [0] * lead + list(start_padding)
    fill_divisors(p["out_div"], out3)
    p["channel_div"] = fast_divmod(c)
    p["include_padding"] = int(include_padding)
    p["taps"] = math.prod(window_size)

    cpp = from_numpy(dtype).info.cpp
    if (
        path is None
        and USE_ROWS_KERNEL
        and reads_per_element(window_size, strides) <= ROWS_MAX_READS
    ):
        path = "rows"
    if path == "rows":
        v = outputs_per_thread(window3[2], dtype.itemsize)
        groups = -(-out3[2] // v)
        total = n * c * out3[0] * out3[1] * groups
        p["total"] = total
        p["groups_div"] = fast_divmod(groups)
        p["contiguous"] = int(
            xs[-1] == 1 and stride3[2] == window3[2] and (window3[2] == 1 or dilation3[2] == 1)
        )
        idx = index_type(shape, xs, math.prod(out_shape), total)
        k = ", ".join(str(_constant(w)) for w in window3)
        kernel = get_kernel("average_pooling.cu", f"dml::pool_rows<{cpp}, {idx}, {k}, {v}>")
        return _Plan(out_shape, kernel, grid_for(total), 0, p)

    choice = choose_tile(out3, window3, stride3, dilation3)
    # pool_tiled forms in-row offsets in 32 bits.
    row_fits = (sizes[-1] - 1) * abs(xs[-1]) <= INT32_LIMIT
    if choice is None or not row_fits or path == "direct":
        total = math.prod(out_shape)
        p["total"] = total
        kernel = get_kernel("average_pooling.cu", f"dml::pool_direct<{cpp}>")
        return _Plan(out_shape, kernel, grid_for(total), 0, p)

    tile, ext = choice
    tiles = [-(-o // t) for o, t in zip(out3, tile, strict=True)]
    ctas = n * c * math.prod(tiles)
    p["total"] = ctas
    p["tile"] = tile
    p["in_tile"] = ext
    fill_divisors(p["tiles_div"], tiles)
    p["in_w_div"] = fast_divmod(ext[2])
    vt = {"tiled1": 1, "tiled4": 4}.get(path or "", TILE_VECTOR)
    p["in_wv_div"] = fast_divmod(-(-ext[2] // vt))
    p["tile_w_div"] = fast_divmod(tile[2])
    p["tile_wv_div"] = fast_divmod(-(-tile[2] // vt))
    k = ", ".join(str(_constant(w) if USE_SPECIALISED_TILES else 0) for w in window3)
    kernel = get_kernel("average_pooling.cu", f"dml::pool_tiled<{cpp}, {k}, {vt}>")
    return _Plan(out_shape, kernel, (ctas, 1, 1), shared_bytes(tile, ext), p)


def average_pooling(
    x: Any,
    window_size: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    start_padding: Sequence[int],
    end_padding: Sequence[int],
    include_padding: bool,
    *,
    path: str | None = None,
) -> Any:
    """``(N, C, *S) -> (N, C, *O)`` for 1..3 spatial dims, FLOAT16/FLOAT32, float32 sums.

    ``path`` forces one kernel ("tiled", "tiled1", "tiled4", "rows", "direct"; for tests and
    measurements).
    """
    import cupy

    geometry = tuple(
        tuple(v) for v in (window_size, strides, dilations, start_padding, end_padding)
    )
    plan = _plan(x.shape, x.strides, x.dtype, geometry, bool(include_padding), path)
    y = cupy.empty(plan.out_shape, dtype=x.dtype)
    if plan.kernel is not None:
        plan.kernel(plan.grid, (BLOCK, 1, 1), (x, y, plan.params[()]), shared_mem=plan.shared_mem)
    return y
