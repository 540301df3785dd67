"""FOLD (col2im) on the GPU: launcher of `kernels/cuda/fold.cu`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from ..geometry import Window
from ._common import (
    Plan,
    chunk_plan,
    fast_divmod,
    fill_divisors,
    grid_for,
    index_type,
    launch,
    param_struct,
    plan_cache,
)
from ._patches import patch_plan, slab_plan, squares_plan

__all__ = ["PATHS", "fold", "fold_on"]

Path = Literal["squares", "slabs", "patches", "window2d", "window2d_chunks", "chunks"]
PATHS: tuple[Path, ...] = ("squares", "slabs", "patches", "window2d", "window2d_chunks", "chunks")

PARAMS = param_struct("fold.cu", "dml::FoldParams")

#: The most taps one thread of fold_window2d loads at once (its outputs times the taps per
#: output); beyond it the loads outgrow 64 registers and spill (16 bytes of FLOAT16 3x3: 72).
WINDOW2D_LOADS = 40
#: The largest window side fold_window2d unrolls.
WINDOW2D_SIDE = 8
#: A 16-byte chunk of outputs per thread is the launcher's choice where its taps fit this many
#: loads: 4x4 stride 2 FLOAT32 (16 loads) 91% of copy against 84% one output per thread
#: (H200; 96 / 94% H100), 3x3 stride 1 (36 loads) 80-86% against 88-93%.
WINDOW2D_CHUNK_LOADS = 16


def _suffix_products(values: Sequence[int]) -> list[int]:
    """``out[d] = prod(values[d+1:])``: row-major weights."""
    out = [1] * len(values)
    for d in range(len(values) - 2, -1, -1):
        out[d] = out[d + 1] * values[d + 1]
    return out


@plan_cache
def _plan(
    shape: tuple[int, ...],
    byte_strides: tuple[int, ...],
    dtype: np.dtype,
    output_sizes: tuple[int, ...],
    window: Window,
    path: Path | None = None,
) -> Plan:
    """Everything but the data, once per geometry: a call then only allocates and launches.

    ``path`` forces a kernel (tests run every case through each). Where the windows tile the
    image without overlap (patches.cuh: one tap per element) None and "squares" take the
    register transpose fold_squares where window rows and column rows are whole 16-byte
    chunks, None and "slabs" fold_slabs (one window row's slab per CTA; it needs the column
    rows of a slab to abut and the slab to fit its shared-memory budget), None and "patches"
    the tile transpose fold_patches; for small 2-D windows (`_window2d`) "window2d" takes
    fold_window2d with one output element per thread, "window2d_chunks" the same kernel with
    a 16-byte chunk of outputs per thread, None the latter where a chunk's taps fit
    `WINDOW2D_CHUNK_LOADS` loads, else the former; everything else fold_chunks.
    """
    strides, dilations = window.strides, window.dilations
    n, rows, _ = shape
    dims = len(output_sizes)
    taps = window.taps
    c = rows // taps
    blocks = window.blocks(output_sizes)
    out_shape = (n, c, *output_sizes)
    p = np.zeros((), dtype=PARAMS)
    if math.prod(out_shape) == 0:
        return Plan(out_shape, None, p)
    itemsize = dtype.itemsize
    xs = [s // itemsize for s in byte_strides]
    image_strides = (c * math.prod(output_sizes), math.prod(output_sizes), output_sizes[-1], 1)
    if path in (None, "squares"):
        squares = squares_plan(
            out_shape, image_strides, xs, window, itemsize, False, "fold.cu", "fold_squares", dtype
        )
        if squares is not None:
            return squares
    if path in (None, "slabs"):
        slabs = slab_plan(
            out_shape, image_strides, xs, window, itemsize, False, "fold.cu", "fold_slabs", dtype
        )
        if slabs is not None:
            return slabs
    if path in (None, "patches"):
        patches = patch_plan(
            out_shape, image_strides, xs, window, itemsize, False, "fold.cu", "fold_patches", dtype
        )
        if patches is not None:
            return patches

    gcds = [math.gcd(s, d) for s, d in zip(strides, dilations, strict=True)]
    k_steps = [s // g for s, g in zip(strides, gcds, strict=True)]
    b_steps = [d // g for d, g in zip(dilations, gcds, strict=True)]
    inverses = [pow(b % k, -1, k) if k > 1 else 0 for b, k in zip(b_steps, k_steps, strict=True)]

    p["col_stride_n"], p["col_stride_r"], p["col_stride_l"] = xs
    p["size"][:dims] = output_sizes
    p["window"][:dims] = window.sizes
    p["pad_lo"][:dims] = window.start_padding
    p["dilation"][:dims] = dilations
    p["blocks"][:dims] = blocks
    p["k_step"][:dims] = k_steps
    p["b_step"][:dims] = b_steps
    p["k_inverse"][:dims] = inverses
    p["tap_stride"][:dims] = _suffix_products(window.sizes)
    p["block_stride"][:dims] = _suffix_products(blocks)
    fill_divisors(p["size_div"], output_sizes)
    fill_divisors(p["stride_div"], strides)
    fill_divisors(p["gcd_div"], gcds)
    fill_divisors(p["k_step_div"], k_steps)
    p["channel_div"] = fast_divmod(c)
    p["taps"] = taps
    chunked = _window2d(window.sizes, k_steps, 16 // itemsize, WINDOW2D_CHUNK_LOADS)
    if path == "window2d_chunks" or (path is None and chunked is not None):
        unrolled = _window2d(window.sizes, k_steps, 16 // itemsize)
        if unrolled is not None:
            return chunk_plan(
                p, shape, xs, out_shape, output_sizes[-1], itemsize, "fold.cu", "fold_window2d",
                dtype, *unrolled, False,
            )  # fmt: skip
    if path in (None, "window2d"):
        unrolled = _window2d(window.sizes, k_steps, 1)
        if unrolled is not None:
            total = math.prod(out_shape)
            p["chunk_div"] = fast_divmod(output_sizes[-1])
            p["total_chunks"] = total
            idx = index_type(shape, xs, total)
            grid = grid_for(total)
            kernel = launch("fold.cu", "fold_window2d", dtype, *unrolled, True, idx, grid=grid)
            return Plan(out_shape, kernel, p)
    return chunk_plan(
        p, shape, xs, out_shape, output_sizes[-1], itemsize, "fold.cu", "fold_chunks", dtype, dims
    )


def _window2d(
    sizes: Sequence[int], k_steps: Sequence[int], outputs: int, most: int = WINDOW2D_LOADS
) -> tuple[int, int, int, int] | None:
    """fold_window2d's compile-time ``(KH, KW, KSH, KSW)`` for ``outputs`` elements per
    thread, or None where it does not apply: 2-D windows of sides up to `WINDOW2D_SIDE` whose
    taps per thread fit ``most`` loads."""
    if len(sizes) != 2 or max(sizes) > WINDOW2D_SIDE:
        return None
    kh, kw = sizes
    ksh, ksw = k_steps
    loads = outputs * -(-kh // ksh) * -(-kw // ksw)
    return (kh, kw, ksh, ksw) if loads <= most else None


def fold(x: Any, output_sizes: Sequence[int], window: Window) -> Any:
    """``(N, C*prod(K), BlockCount) -> (N, C, *output_sizes)``, summing overlapping taps.

    Integers wrap in their own type, FLOAT16 accumulates in float32; the summation order is
    fixed, so results are deterministic.
    """
    return fold_on(None, x, output_sizes, window)


def fold_on(path: Path | None, x: Any, output_sizes: Sequence[int], window: Window) -> Any:
    """`fold` through the kernel `path` (None: the launcher's choice; "squares", "slabs",
    "patches" and the "window2d" paths fall back to "chunks" where they do not apply)."""
    return _plan(x.shape, x.strides, x.dtype, tuple(output_sizes), window, path).run(x)
