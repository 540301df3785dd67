"""Non-overlapping 2-D windows (`kernels/cuda/patches.cuh`): the plan shared by UNFOLD's and
FOLD's shared-memory transpose kernels, and the rule for when it applies."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..geometry import Window
from ._common import (
    INT32_LIMIT,
    Plan,
    chunks_per_row,
    fast_divmod,
    grid_for,
    index_type,
    launch,
    param_struct,
)

__all__ = ["PARAMS", "patch_plan", "slab_plan", "squares_plan"]

PARAMS = param_struct("patches.cuh", "dml::PatchParams")
THREADS = 256  # PATCH_THREADS
# Shared memory per CTA for its tile: 6 CTAs of ~30 KB fit an SM's 228 KB (the register
# budget, PATCH_CTAS, allows 6), and a tile stays under the 48 KB a launch gets unasked.
TILE_BYTES = 32 * 1024
# A plane is split into at least this many tiles where its block rows allow, so small planes
# still spread over the SMs.
MIN_TILES = 4
#: The narrowest word the register transpose takes: a square of 1-byte words is 16 chunks
#: (64 registers in, 64 out).
SQUARE_MIN_ITEMSIZE = 2


def _tile_rows(blocks_h: int, row_bytes: int) -> int:
    """Block rows per CTA: as many as TILE_BYTES holds, at most blocks_h / MIN_TILES."""
    return max(1, min(TILE_BYTES // row_bytes, blocks_h // MIN_TILES))


def _tiling(
    image_shape: Sequence[int],
    image_strides: Sequence[int],
    col_strides: Sequence[int],
    window: Window,
) -> tuple[int, int, int, int] | None:
    """(H, W, KH, KW) when the 2-D window tiles the compact image exactly without overlap and
    the column rows are compact, else None."""
    sizes = image_shape[2:]
    if len(sizes) != 2 or math.prod(image_shape) == 0:
        return None
    (h, w), (kh, kw) = sizes, tuple(window.sizes)
    exact = tuple(window.strides) == (kh, kw) and h % kh == 0 and w % kw == 0
    plain = all(d == 1 for d in window.dilations)
    unpadded = not any(window.start_padding) and not any(window.end_padding)
    compact = tuple(image_strides[2:]) == (w, 1) and col_strides[2] == 1
    if not (exact and plain and unpadded and compact):
        return None
    return h, w, kh, kw


def _index_type(
    image_shape: Sequence[int],
    image_strides: Sequence[int],
    cols_shape: Sequence[int],
    col_strides: Sequence[int],
    ctas: int,
) -> str:
    wide = "long long" in (
        index_type(image_shape, image_strides, ctas),
        index_type(cols_shape, col_strides, ctas),
    )
    return "long long" if wide else "int"


def patch_plan(
    image_shape: Sequence[int],
    image_strides: Sequence[int],
    col_strides: Sequence[int],
    window: Window,
    itemsize: int,
    to_columns: bool,
    source: str,
    name: str,
    *template_args: object,
) -> Plan | None:
    """The plan of ``dml::name<template_args..., index type>`` (``src``, ``dst``, params) when
    the window tiles the image exactly without overlap, else None.

    ``image_shape`` is (N, C, H, W) with element strides ``image_strides``; ``col_strides``
    are those of the (N, C*KH*KW, BH*BW) column tensor. ``to_columns``: the image is the
    source (UNFOLD), else the columns are (FOLD); the output is C-contiguous.
    """
    tiling = _tiling(image_shape, image_strides, col_strides, window)
    if tiling is None:
        return None
    n, c = image_shape[:2]
    h, w, kh, kw = tiling
    blocks_h, blocks_w = h // kh, w // kw
    row_bytes = kh * (w + blocks_w) * itemsize  # one block row's tile, spare slots included
    if row_bytes > TILE_BYTES:
        return None
    rows = _tile_rows(blocks_h, row_bytes)
    tiles = -(-blocks_h // rows)
    per_chunk = 16 // itemsize
    segment_chunks = -(-(rows * blocks_w + per_chunk - 1) // per_chunk)
    ctas = n * c * tiles
    cols_shape = (n, c * kh * kw, blocks_h * blocks_w)
    if ctas > INT32_LIMIT or cols_shape[1] * segment_chunks > INT32_LIMIT:
        return None

    p = np.zeros((), dtype=PARAMS)
    p["image_stride_n"], p["image_stride_c"] = image_strides[:2]
    p["col_stride_n"], p["col_stride_r"] = col_strides[:2]
    p["width"], p["window_h"], p["window_w"] = w, kh, kw
    p["blocks_h"], p["blocks_w"] = blocks_h, blocks_w
    p["tile_rows"] = rows
    p["segment_chunks"] = segment_chunks
    p["window_w_div"] = fast_divmod(kw)
    p["blocks_w_div"] = fast_divmod(blocks_w)
    p["segment_div"] = fast_divmod(segment_chunks)
    p["tiles_div"] = fast_divmod(tiles)
    p["channel_div"] = fast_divmod(c)
    kernel = launch(
        source,
        name,
        *template_args,
        _index_type(image_shape, image_strides, cols_shape, col_strides, ctas),
        grid=(ctas, 1, 1),
        block=(THREADS, 1, 1),
        shared_mem=rows * row_bytes,
    )
    return Plan(cols_shape if to_columns else tuple(image_shape), kernel, p)


def slab_plan(
    image_shape: Sequence[int],
    image_strides: Sequence[int],
    col_strides: Sequence[int],
    window: Window,
    itemsize: int,
    to_columns: bool,
    source: str,
    name: str,
    *template_args: object,
) -> Plan | None:
    """The plan of the slab kernel ``dml::name<template_args..., index type>`` (one CTA per
    (n, c, window row)) when the window tiles the image exactly without overlap, the column
    rows of a slab abut (``col_strides`` (sn, BH*BW, 1)) and a slab fits TILE_BYTES, else
    None. ``to_columns``: image -> columns (UNFOLD), else columns -> image (FOLD); the output
    is C-contiguous."""
    n, c = image_shape[:2]
    tiling = _tiling(image_shape, image_strides, col_strides, window)
    if tiling is None:
        return None
    h, w, kh, kw = tiling
    blocks_h, blocks_w = h // kh, w // kw
    slab_bytes = blocks_h * (w + blocks_w) * itemsize  # spare slots included
    ctas = n * c * kh
    length = blocks_h * blocks_w
    cols_shape = (n, c * kh * kw, length)
    if col_strides[1] != length or slab_bytes > TILE_BYTES or ctas > INT32_LIMIT:
        return None

    p = np.zeros((), dtype=PARAMS)
    p["image_stride_n"], p["image_stride_c"] = image_strides[:2]
    p["col_stride_n"], p["col_stride_r"] = col_strides[:2]
    p["width"], p["window_h"], p["window_w"] = w, kh, kw
    p["blocks_h"], p["blocks_w"] = blocks_h, blocks_w
    p["row_chunks"] = chunks_per_row(w, itemsize)
    p["window_w_div"] = fast_divmod(kw)
    p["blocks_w_div"] = fast_divmod(blocks_w)
    p["tiles_div"] = fast_divmod(kh)
    p["channel_div"] = fast_divmod(c)
    p["row_chunks_div"] = fast_divmod(int(p["row_chunks"]))
    p["blocks_div"] = fast_divmod(length)
    kernel = launch(
        source,
        name,
        *template_args,
        _index_type(image_shape, image_strides, cols_shape, col_strides, ctas),
        grid=(ctas, 1, 1),
        block=(THREADS, 1, 1),
        shared_mem=slab_bytes,
    )
    return Plan(cols_shape if to_columns else tuple(image_shape), kernel, p)


def squares_plan(
    image_shape: Sequence[int],
    image_strides: Sequence[int],
    col_strides: Sequence[int],
    window: Window,
    itemsize: int,
    to_columns: bool,
    source: str,
    name: str,
    *template_args: object,
) -> Plan | None:
    """The plan of the register transpose ``dml::name<template_args..., index type>`` (one
    V x V square per thread, V = 16 / itemsize) when the window tiles the image exactly
    without overlap, KW and BH*BW are multiples of V, and so are the image's and the column
    tensor's outer strides (every chunk then lies on a chunk boundary of an aligned buffer),
    for words of at least `SQUARE_MIN_ITEMSIZE` bytes; else None. ``to_columns``: image ->
    columns (UNFOLD), else columns -> image (FOLD); the output is C-contiguous."""
    tiling = _tiling(image_shape, image_strides, col_strides, window)
    if tiling is None or itemsize < SQUARE_MIN_ITEMSIZE:
        return None
    n, c = image_shape[:2]
    h, w, kh, kw = tiling
    v = 16 // itemsize
    blocks_h, blocks_w = h // kh, w // kw
    length = blocks_h * blocks_w
    outer = (*image_strides[:2], *col_strides[:2])
    if kw % v or length % v or any(s % v for s in outer):
        return None
    squares = n * c * kh * (kw // v) * (length // v)
    cols_shape = (n, c * kh * kw, length)
    if squares + THREADS > INT32_LIMIT:
        return None

    p = np.zeros((), dtype=PARAMS)
    p["image_stride_n"], p["image_stride_c"] = image_strides[:2]
    p["col_stride_n"], p["col_stride_r"] = col_strides[:2]
    p["squares"] = squares
    p["width"], p["window_h"], p["window_w"] = w, kh, kw
    p["blocks_h"], p["blocks_w"] = blocks_h, blocks_w
    p["blocks_w_div"] = fast_divmod(blocks_w)
    p["tiles_div"] = fast_divmod(kh)
    p["channel_div"] = fast_divmod(c)
    p["square_cols_div"] = fast_divmod(kw // v)
    p["square_rows_div"] = fast_divmod(length // v)
    kernel = launch(
        source,
        name,
        *template_args,
        _index_type(image_shape, image_strides, cols_shape, col_strides, squares + THREADS),
        grid=grid_for(squares, THREADS),
        block=(THREADS, 1, 1),
    )
    return Plan(cols_shape if to_columns else tuple(image_shape), kernel, p)
