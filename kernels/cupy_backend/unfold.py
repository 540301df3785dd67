"""UNFOLD (im2col) on the GPU: launcher of `kernels/cuda/unfold.cu`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from ..geometry import Window
from ._common import (
    INT32_LIMIT,
    Plan,
    chunk_plan,
    fast_divmod,
    fill_divisors,
    index_type,
    launch,
    param_struct,
    plan_cache,
    sm_count,
)
from ._patches import TILE_BYTES, patch_plan, slab_plan, squares_plan

__all__ = ["PATHS", "unfold", "unfold_on", "window2d_plan"]

Path = Literal["squares", "slabs", "patches", "window2d", "window2d_elements", "chunks"]
PATHS: tuple[Path, ...] = ("squares", "slabs", "patches", "window2d", "window2d_elements", "chunks")

PARAMS = param_struct("unfold.cu", "dml::UnfoldParams")
WINDOW_PARAMS = param_struct("unfold_window2d.cu", "dml::UnfoldWindowParams")
#: The largest window side unfold_window2d unrolls (its taps: UnfoldWindowParams.tap_offset).
WINDOW2D_SIDE = 8
#: Threads per CTA of unfold_window2d at most; a band is sized to one chunk per thread.
WINDOW2D_THREADS = 256
#: A plane of more output chunks than WINDOW2D_THREADS is cut into bands of this many chunks:
#: measured against 256 (bench_kernels.py, 2026-11-23), 3x3 on 64x64 planes 25.2 -> 24.7 µs on
#: an H200 and 32.4 -> 32.1 on an H100, 4x4 stride 2 49.0 -> 48.1 and unchanged; a whole 28x28
#: plane in one CTA stayed faster than two bands (37.0 vs 37.5 µs on the H200).
WINDOW2D_BAND_THREADS = 128
#: Bands are halved (more CTAs, more halo rows read twice) until there are this many CTAs
#: per SM, or one output row per band.
WINDOW2D_CTAS_PER_SM = 2


@plan_cache
def _plan(
    shape: tuple[int, ...],
    byte_strides: tuple[int, ...],
    itemsize: int,
    window: Window,
    path: Path | None = None,
) -> Plan:
    """Everything but the data, once per geometry: a call then only allocates and launches.

    ``path`` forces a kernel (tests run every case through each). Where the windows tile the
    image without overlap (patches.cuh) None and "squares" take the register transpose
    unfold_squares where window rows and column rows are whole 16-byte chunks, None and
    "slabs" unfold_slabs, "patches" the tile transpose unfold_patches; elsewhere None and
    "window2d" take unfold_window2d where `window2d_plan` applies (2-D windows), staging its
    input rows by 16-byte chunks where they allow ("window2d_elements": element by element);
    everything
    else, and where a slab outgrows its shared-memory budget, unfold_chunks. The tile
    transpose writes the columns in 112-byte runs on a ViT patching (55 us against the chunk
    kernel's 42, H100); a slab is one run of KW*BH*BW.
    """
    n, c, *sizes = shape
    dims = len(sizes)
    blocks = window.blocks(sizes)
    taps = window.taps
    length = math.prod(blocks)
    out_shape = (n, c * taps, length)
    p = np.zeros((), dtype=PARAMS)
    if math.prod(out_shape) == 0:
        return Plan(out_shape, None, p)

    xs = [s // itemsize for s in byte_strides]
    col_strides = (c * taps * length, length, 1)
    if path in (None, "squares"):
        squares = squares_plan(
            shape, xs, col_strides, window, itemsize, True, "unfold.cu", "unfold_squares", itemsize
        )
        if squares is not None:
            return squares
    if path in (None, "slabs"):
        slabs = slab_plan(
            shape, xs, col_strides, window, itemsize, True, "unfold.cu", "unfold_slabs", itemsize
        )
        if slabs is not None:
            return slabs
    if path == "patches":
        patches = patch_plan(
            shape, xs, col_strides, window, itemsize, True, "unfold.cu", "unfold_patches", itemsize
        )
        if patches is not None:
            return patches
    if path in (None, "window2d", "window2d_elements"):
        staged = window2d_plan(shape, xs, itemsize, window, by_chunks=path != "window2d_elements")
        if staged is not None:
            return staged
    p["x_stride_n"], p["x_stride_c"] = xs[0], xs[1]
    p["x_stride"][:dims] = xs[2:]
    p["size"][:dims] = sizes
    p["window_stride"][:dims] = window.strides
    p["dilation"][:dims] = window.dilations
    p["pad_lo"][:dims] = window.start_padding
    p["blocks"][:dims] = blocks
    fill_divisors(p["block_div"], blocks)
    fill_divisors(p["window_div"], window.sizes)
    p["taps_div"] = fast_divmod(taps)
    p["channel_div"] = fast_divmod(c)
    p["block_count"] = length
    return chunk_plan(
        p, shape, xs, out_shape, length, itemsize, "unfold.cu", "unfold_chunks", itemsize, dims
    )


def window2d_plan(
    shape: tuple[int, ...],
    strides: Sequence[int],
    itemsize: int,
    window: Window,
    band_rows: int | None = None,
    by_chunks: bool = True,
) -> Plan | None:
    """The plan of unfold_window2d for an (N, C, H, W) input of element ``strides``: bands of
    ``band_rows`` output rows per CTA (None: the whole plane where it has at most
    `WINDOW2D_THREADS` chunks, else as many rows as `WINDOW2D_BAND_THREADS` chunks cover;
    fewer where the CTAs would not fill `WINDOW2D_CTAS_PER_SM` per SM or the staged rows
    would outgrow TILE_BYTES). ``by_chunks``: the input rows are staged by 16-byte chunks
    where their strides allow (unit element stride, the others multiples of a chunk), else
    element by element. None where it does not apply: windows of more than 2 dims
    or a side over `WINDOW2D_SIDE`, or a band of one output row whose input rows outgrow
    TILE_BYTES."""
    n, c, *sizes = shape
    if len(sizes) != 2 or max(window.sizes) > WINDOW2D_SIDE:
        return None
    (h, w), (kh, kw) = sizes, window.sizes
    (sh, sw), (dh, dw) = window.strides, window.dilations
    oh, ow = window.blocks(sizes)
    length = oh * ow
    per_chunk = 16 // itemsize
    staged_cols = (ow - 1) * sw + (kw - 1) * dw + 1
    phase_len = -(-staged_cols // sw)
    pitch = sw * phase_len

    def staged_bytes(rows: int) -> int:
        return ((rows - 1) * sh + (kh - 1) * dh + 1) * pitch * itemsize

    band = (
        WINDOW2D_THREADS if -(-length // per_chunk) <= WINDOW2D_THREADS else WINDOW2D_BAND_THREADS
    )
    rows = band_rows or min(oh, max(1, band * per_chunk // ow))
    if band_rows is None:
        while rows > 1 and n * c * -(-oh // rows) < WINDOW2D_CTAS_PER_SM * sm_count():
            rows = -(-rows // 2)
        while rows > 1 and staged_bytes(rows) > TILE_BYTES:
            rows -= 1
    if staged_bytes(rows) > TILE_BYTES:
        return None
    bands = -(-oh // rows)
    ctas = n * c * bands
    out_shape = (n, c * kh * kw, length)
    if ctas > INT32_LIMIT:
        return None

    p = np.zeros((), dtype=WINDOW_PARAMS)
    p["x_stride_n"], p["x_stride_c"], p["x_stride_h"], p["x_stride_w"] = strides
    p["height"], p["width"], p["out_h"], p["out_w"] = h, w, oh, ow
    p["stride_h"], p["stride_w"] = sh, sw
    p["pad_top"], p["pad_left"] = window.start_padding
    p["band_rows"] = rows
    p["rows_in"] = (rows - 1) * sh + (kh - 1) * dh + 1
    p["pitch"], p["phase_len"] = pitch, phase_len
    p["out_w_div"] = fast_divmod(ow)
    p["bands_div"] = fast_divmod(bands)
    p["channel_div"] = fast_divmod(c)
    p["pitch_div"] = fast_divmod(pitch)
    p["phase_div"] = fast_divmod(phase_len)
    p["stride_w_div"] = fast_divmod(sw)
    first, last = -window.start_padding[1], staged_cols - 1 - window.start_padding[1]
    p["staged_cols"] = staged_cols
    p["chunk_x0"] = first // per_chunk * per_chunk
    p["row_chunks_div"] = fast_divmod(last // per_chunk - first // per_chunk + 1)
    aligned = strides[3] == 1 and all(s % per_chunk == 0 for s in strides[:3])
    p["chunked"] = int(by_chunks and aligned)
    for ky in range(kh):
        for kx in range(kw):
            pos, phase = divmod(kx * dw, sw)
            p["tap_offset"][ky * kw + kx] = ky * dh * pitch + phase * phase_len + pos
    items = -(-(rows * ow + per_chunk - 1) // per_chunk)
    threads = min(WINDOW2D_THREADS, -(-items // 32) * 32)
    kernel = launch(
        "unfold_window2d.cu",
        "unfold_window2d",
        itemsize,
        kh,
        kw,
        index_type(shape, strides, math.prod(out_shape)),
        grid=(ctas, 1, 1),
        block=(threads, 1, 1),
        shared_mem=staged_bytes(rows),
    )
    return Plan(out_shape, kernel, p)


def unfold_on(path: Path | None, x: Any, window: Window) -> Any:
    """`unfold` through the kernel `path` (None: the launcher's choice; "squares", "slabs"
    and "patches" fall back to "chunks" where the windows overlap or do not tile the image,
    "squares" also where rows are not whole chunks)."""
    return _plan(x.shape, x.strides, x.dtype.itemsize, window, path).run(x)


def unfold(x: Any, window: Window) -> Any:
    """``(N, C, *S) -> (N, C*prod(K), BlockCount)`` for 1..6 spatial dims, any dtype."""
    return unfold_on(None, x, window)
