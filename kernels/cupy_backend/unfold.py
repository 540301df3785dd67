"""UNFOLD (im2col) on the GPU: launcher of `kernels/cuda/unfold.cu`."""

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

__all__ = ["PATHS", "unfold", "unfold_on"]

MAX_DIMS = 6
Path = Literal["rows", "chunks"]
PATHS: tuple[Path, ...] = ("rows", "chunks")
# unfold_rows: shared memory per CTA for its staged input rows.
ROWS_SMEM_BUDGET = 32 * 1024

PARAMS = param_struct(
    "unfold.cu",
    "dml::UnfoldParams",
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
        ("w_div", FAST_DIVMOD, 0),
        ("run_div", FAST_DIVMOD, 0),
        ("block_count", "<i4", 0),
        ("rows_per_cta", "<i4", 0),
        ("pitch", "<i4", 0),
        ("unused", "<i4", 0),
    ],
)


def _rows_layout(width: int, block_rows: int, itemsize: int) -> tuple[int, int] | None:
    """(shared-memory elements per staged row, block rows per CTA) for unfold_rows, or None
    when one row does not fit. Runs split the block rows evenly."""
    pitch = width + width // 64 + 1
    fit = ROWS_SMEM_BUDGET // (pitch * itemsize)
    if fit < 1:
        return None
    runs = -(-block_rows // fit)
    return pitch, -(-block_rows // runs)


@functools.lru_cache(maxsize=512)
def _plan(
    shape: tuple[int, ...],
    byte_strides: tuple[int, ...],
    itemsize: int,
    geometry: tuple[tuple[int, ...], ...],
    path: Path | None = None,
) -> Plan:
    """Everything but the data, once per geometry: a call then only allocates and launches.

    ``path`` forces a kernel (tests run every case through each); None chooses unfold_rows
    for 1 or 2 spatial dims where a row fits its shared memory, else unfold_chunks.
    """
    n, c, *sizes = shape
    blocks = blocks_per_dimension(sizes, *geometry)
    taps = math.prod(geometry[0])
    length = math.prod(blocks)
    out_shape = (n, c * taps, length)
    p = np.zeros((), dtype=PARAMS)
    if math.prod(out_shape) == 0:
        return Plan(out_shape, None, p)
    xs = [s // itemsize for s in byte_strides]
    layout = _rows_layout(sizes[-1], blocks[0] if len(sizes) == 2 else 1, itemsize)
    if len(sizes) <= 2 and layout is not None and path != "chunks":
        return _rows_plan(out_shape, shape, xs, itemsize, geometry, blocks, layout, p)

    window_sizes, strides, dilations, start_padding, _ = geometry
    dims = len(sizes)
    chunks = chunks_per_row(length, itemsize)
    total = n * c * taps * chunks
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
    p["chunk_div"] = fast_divmod(chunks)
    p["taps_div"] = fast_divmod(taps)
    p["channel_div"] = fast_divmod(c)
    p["block_count"] = length

    idx = index_type(shape, xs, math.prod(out_shape), total)
    kernel = launch("unfold.cu", "unfold_chunks", itemsize, dims, idx, grid=grid_for(total))
    return Plan(out_shape, kernel, p)


def _rows_plan(
    out_shape: tuple[int, ...],
    shape: tuple[int, ...],
    xs: list[int],
    itemsize: int,
    geometry: tuple[tuple[int, ...], ...],
    blocks: Sequence[int],
    layout: tuple[int, int],
    p: np.ndarray,
) -> Plan:
    """unfold_rows, with 1 spatial dim as 2 (a unit height)."""
    n, c, *sizes = shape
    lead = 2 - len(sizes)
    window_sizes, strides, dilations, start_padding, _ = (
        [unit] * lead + list(values) for unit, values in zip((1, 1, 1, 0, 0), geometry, strict=True)
    )
    sizes, blocks = [1] * lead + list(sizes), [1] * lead + list(blocks)
    xs = xs[:2] + [0] * lead + xs[2:]
    pitch, rows_per_cta = layout
    runs = -(-blocks[0] // rows_per_cta)
    p["x_stride_n"], p["x_stride_c"] = xs[0], xs[1]
    p["x_stride"][:2] = xs[2:]
    p["size"][:2] = sizes
    p["window_stride"][:2] = strides
    p["dilation"][:2] = dilations
    p["pad_lo"][:2] = start_padding
    p["blocks"][:2] = blocks
    fill_divisors(p["block_div"], blocks)
    fill_divisors(p["window_div"], window_sizes)
    p["channel_div"] = fast_divmod(c)
    p["w_div"] = fast_divmod(sizes[1])
    p["run_div"] = fast_divmod(runs)
    p["block_count"] = math.prod(blocks)
    p["rows_per_cta"] = rows_per_cta
    p["pitch"] = pitch
    idx = index_type(shape, xs[:2] + xs[2 + lead :], math.prod(out_shape))
    kernel = launch(
        "unfold.cu",
        "unfold_rows",
        itemsize,
        idx,
        grid=(n * c * window_sizes[0] * runs, 1, 1),
        shared_mem=rows_per_cta * pitch * itemsize,
    )
    return Plan(out_shape, kernel, p)


def unfold_on(
    path: Path | None,
    x: Any,
    window_sizes: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    start_padding: Sequence[int],
    end_padding: Sequence[int],
) -> Any:
    """`unfold` through the kernel `path` (None: the launcher's choice; "rows" falls back to
    "chunks" where it does not apply)."""
    geometry = tuple(
        tuple(v) for v in (window_sizes, strides, dilations, start_padding, end_padding)
    )
    return run(_plan(x.shape, x.strides, x.dtype.itemsize, geometry, path), x)


def unfold(
    x: Any,
    window_sizes: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    start_padding: Sequence[int],
    end_padding: Sequence[int],
) -> Any:
    """``(N, C, *S) -> (N, C*prod(K), BlockCount)`` for 1..6 spatial dims, any dtype."""
    return unfold_on(None, x, window_sizes, strides, dilations, start_padding, end_padding)
