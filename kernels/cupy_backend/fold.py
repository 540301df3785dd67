"""FOLD (col2im) on the GPU: launcher of `kernels/cuda/fold.cu`."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from ..geometry import blocks_per_dimension
from ._common import (
    FAST_DIVMOD,
    Plan,
    chunks_per_row,
    fast_divmod,
    fill_divisors,
    grid_for,
    index_type,
    launch,
    param_struct,
    run,
)

__all__ = ["PATHS", "fold", "fold_on"]

MAX_DIMS = 6
Path = Literal["rows", "chunks"]
PATHS: tuple[Path, ...] = ("rows", "chunks")
# fold_rows: shared memory per CTA for its column runs and tap tables.
ROWS_SMEM_BUDGET = 32 * 1024

PARAMS = param_struct(
    "fold.cu",
    "dml::FoldParams",
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
        ("cta_div", FAST_DIVMOD, 0),
        ("w_div", FAST_DIVMOD, 0),
        ("quad_div", FAST_DIVMOD, 0),
        ("kw_div", FAST_DIVMOD, 0),
        ("taps", "<i4", 0),
        ("rows_per_cta", "<i4", 0),
        ("run_blocks", "<i4", 0),
        ("unused", "<i4", 0),
    ],
)


def _suffix_products(values: Sequence[int]) -> list[int]:
    """``out[d] = prod(values[d+1:])``: row-major weights."""
    out = [1] * len(values)
    for d in range(len(values) - 2, -1, -1):
        out[d] = out[d + 1] * values[d + 1]
    return out


def _rows_layout(
    out_h: int, out_w: int, taps: int, window_h: int, stride_h: int, blocks_w: int, itemsize: int
) -> tuple[int, int, int] | None:
    """(output rows per CTA, block rows per tap run, shared bytes) for fold_rows, or None when
    one output row does not fit. Runs split the output rows evenly."""

    def smem(rows: int) -> int:
        run_bytes = -(-taps * -(-rows // stride_h) * blocks_w * itemsize // 16) * 16
        return run_bytes + 8 * rows + 8 * out_w + 4 * window_h

    if smem(1) > ROWS_SMEM_BUDGET:
        return None
    lo, hi = 1, out_h  # smem grows with rows: the most rows that fit
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if smem(mid) <= ROWS_SMEM_BUDGET else (lo, mid - 1)
    rows = lo
    rows = -(-out_h // -(-out_h // rows))
    return rows, -(-rows // stride_h), smem(rows)


@functools.lru_cache(maxsize=512)
def _plan(
    shape: tuple[int, ...],
    byte_strides: tuple[int, ...],
    dtype: np.dtype,
    output_sizes: tuple[int, ...],
    geometry: tuple[tuple[int, ...], ...],
    path: Path | None = None,
) -> Plan:
    """Everything but the data, once per geometry: a call then only allocates and launches.

    ``path`` forces a kernel (tests run every case through each); None chooses fold_rows for
    1 or 2 spatial dims where a row fits its shared memory, else fold_chunks.
    """
    n, rows, _ = shape
    taps = math.prod(geometry[0])
    c = rows // taps
    out_shape = (n, c, *output_sizes)
    p = np.zeros((), dtype=PARAMS)
    if math.prod(out_shape) == 0:
        return Plan(out_shape, None, p)
    dims = len(output_sizes)
    lead = 2 - dims if dims <= 2 else 0
    sizes = [1] * lead + list(output_sizes)
    window_sizes, strides, dilations, start_padding, end_padding = (
        [unit] * lead + list(values) for unit, values in zip((1, 1, 1, 0, 0), geometry, strict=True)
    )
    blocks = blocks_per_dimension(
        sizes, window_sizes, strides, dilations, start_padding, end_padding
    )
    gcds = [math.gcd(s, d) for s, d in zip(strides, dilations, strict=True)]
    k_steps = [s // g for s, g in zip(strides, gcds, strict=True)]
    b_steps = [d // g for d, g in zip(dilations, gcds, strict=True)]
    inverses = [pow(b % k, -1, k) if k > 1 else 0 for b, k in zip(b_steps, k_steps, strict=True)]
    itemsize = dtype.itemsize
    xs = [s // itemsize for s in byte_strides]
    d = len(sizes)
    p["col_stride_n"], p["col_stride_r"], p["col_stride_l"] = xs
    p["size"][:d] = sizes
    p["window"][:d] = window_sizes
    p["pad_lo"][:d] = start_padding
    p["dilation"][:d] = dilations
    p["blocks"][:d] = blocks
    p["k_step"][:d] = k_steps
    p["b_step"][:d] = b_steps
    p["k_inverse"][:d] = inverses
    p["tap_stride"][:d] = _suffix_products(window_sizes)
    p["block_stride"][:d] = _suffix_products(blocks)
    fill_divisors(p["size_div"], sizes)
    fill_divisors(p["stride_div"], strides)
    fill_divisors(p["gcd_div"], gcds)
    fill_divisors(p["k_step_div"], k_steps)
    p["channel_div"] = fast_divmod(c)
    p["taps"] = taps
    idx = index_type(shape, xs, math.prod(out_shape))

    layout = None
    if d == 2 and path != "chunks":
        layout = _rows_layout(
            sizes[0], sizes[1], taps, window_sizes[0], strides[0], blocks[1], itemsize
        )
    if layout is not None:
        out_rows, run_blocks, smem = layout
        runs = -(-sizes[0] // out_rows)
        quads = -(-run_blocks * blocks[1] // 4)
        p["cta_div"] = fast_divmod(runs)
        p["w_div"] = fast_divmod(sizes[1])
        p["quad_div"] = fast_divmod(quads)
        p["kw_div"] = fast_divmod(window_sizes[1])
        p["rows_per_cta"] = out_rows
        p["run_blocks"] = run_blocks
        kernel = launch(
            "fold.cu", "fold_rows", dtype, idx, grid=(n * c * runs, 1, 1), shared_mem=smem
        )
        return Plan(out_shape, kernel, p)

    width = sizes[-1]
    chunks = chunks_per_row(width, itemsize)
    total = math.prod(out_shape) // width * chunks
    p["total_chunks"] = total
    p["chunk_div"] = fast_divmod(chunks)
    idx = index_type(shape, xs, math.prod(out_shape), total)
    kernel = launch("fold.cu", "fold_chunks", dtype, d, idx, grid=grid_for(total))
    return Plan(out_shape, kernel, p)


def fold_on(
    path: Path | None,
    x: Any,
    output_sizes: Sequence[int],
    window_sizes: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    start_padding: Sequence[int],
    end_padding: Sequence[int],
) -> Any:
    """`fold` through the kernel `path` (None: the launcher's choice; "rows" falls back to
    "chunks" where it does not apply)."""
    geometry = tuple(
        tuple(v) for v in (window_sizes, strides, dilations, start_padding, end_padding)
    )
    return run(_plan(x.shape, x.strides, x.dtype, tuple(output_sizes), geometry, path), x)


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
    return fold_on(
        None, x, output_sizes, window_sizes, strides, dilations, start_padding, end_padding
    )
