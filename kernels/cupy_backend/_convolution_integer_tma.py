"""CONVOLUTION_INTEGER's 3x3 layers fed by Hopper's copy engine (`convolution_integer_tma_sm90a.cu`,
compute capability 9.0 exactly): the input read where it lies as (N, H, W, C) through a tiled
copy descriptor (TMA) per call (a box a tap and channel chunk, or for stride 1 in the
shifted-window form each chunk's region once for its nine taps), the filter laid out once as
rows of (r, s, c) bytes beside the epilogue's table of zero-point terms, both kept with a
registered operator's constants.

Shapes it takes (`tma_tiles` is empty for the others): one group, a 3 x 3 window, dilation 1,
equal strides of 1 or 2, C a multiple of 64, start pads such that only the first and last
output rows and columns have taps outside the image (pads of 0 or 1), at least 2 x 2 outputs,
and an input whose channels are consecutive bytes with pixel, row and image strides that are
multiples of 16 bytes, on 16 bytes. A registered operator's first call of a shape times its
tiles beside the shifted-window GEMM's plans (`_convolution_integer_gemm._tuned`) and keeps the
fastest; `Options.tma` forces a tile. Where a filter zero point is not 0, each tile of the
per-tap form also copies its input region (the pixels under its windows, every channel) once
beside the ring, for the pixel sums; the shifted-window form sums its windows' pixels.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Hashable, MutableMapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from ._common import (
    Launch,
    TensorMap,
    compute_capability,
    device_zero_points,
    launch,
    launch_packed,
    sm_count,
    tensor_map,
    wrap32,
)

if TYPE_CHECKING:
    from .convolution_integer import _Problem

__all__ = ["TmaPlan", "TmaTile", "tma_plan", "tma_tiles"]

TMA_SOURCE = "convolution_integer_tma_sm90a.cu"
_OPTIONS = ("-arch=sm_90a",)
_WARPGROUP = 128
_HELPERS = 96  # warpgroup 0's warps that load the table and sum the pixels
# A box's extent along each dimension (TMA's limit), and the channels a stage takes (the
# swizzle's span: 128 bytes where C allows, else 64).
_BOX_LIMIT = 256
# wgmma's N for 8-bit operands: multiples of 16 from 48 (those the kernel instantiates) to 256
_NP_MIN, _NP_MAX = 48, 256
# Shared memory a CTA may take on sm_90 (227 KB), less the kernel's static block (its barriers)
# and the slack that aligns the stages on 1024 bytes.
_SMEM_CTA = 227 * 1024 - 256
_ALIGN_SLACK = 1024
# The row (of CK bytes) a stage's input box lands at: one swizzle atom in, so that a consumer
# may start reading up to 7 rows before it.
_BOX_ROW = 8
_MIN_STAGES, _MAX_STAGES = 2, 6
# Tiles a registration times per shape: the model's best few, each with the most stages that
# fit and with these fewer (where that is fewer: a deep ring leaves less of the SM's shared
# memory to L1, and on some tiles times slower); and the least share of a warpgroup's NP pixels
# a tile must fill.
_CANDIDATES = 4
_WINDOW_CANDIDATES = 2  # of the shifted-window form, after those
_FEWER_STAGES = (4,)
_MIN_FILL = 0.75
# The ranking model: a CTA's MMA clocks at the tensor cores' rate plus a fixed part (its start,
# first stage and epilogue), over the waves of CTAs.
_TENSOR_MACS_PER_CLOCK = 4096
_CTA_FIXED_CLOCKS = 6000


@dataclass(frozen=True)
class TmaTile:
    """A CTA's work: `wm` consumer warpgroups along the output channels (64 each; 1: two along
    the pixels), `rows` output rows of one image or, where `images` > 1, whole images, and the
    ring's `stages`; `window`: the shifted-window form (each channel chunk's input region copied
    once for its nine taps; stride 1)."""

    wm: int
    rows: int
    images: int
    stages: int
    window: bool = False

    def __str__(self) -> str:
        form = " window" if self.window else ""
        return f"TMA wm={self.wm} rows={self.rows} images={self.images} st={self.stages}{form}"


def _masks(count: int, stride: int, pad: int, size: int) -> tuple[int, int, int] | None:
    """The taps (3 bits) inside the image of the first, inner and last outputs along one axis,
    or None where an inner output has taps outside or there are fewer than 2 outputs. The taps
    of output o lie at o * stride - pad + k: checking the second and second-to-last outputs
    covers every inner one."""

    def mask(o: int) -> int:
        return sum(1 << k for k in range(3) if 0 <= o * stride - pad + k < size)

    if count < 2 or any(mask(o) != 7 for o in {1, count - 2} if 0 < o < count - 1):
        return None
    return mask(0), 7, mask(count - 1)


def _classes(q: _Problem) -> tuple[tuple[int, int, int], tuple[int, int, int]] | None:
    rows = _masks(q.oh, q.sh, q.ph, q.h)
    cols = _masks(q.ow, q.sw, q.pw, q.wd)
    return None if rows is None or cols is None else (rows, cols)


def _input_strides(shape: tuple[int, ...], strides: tuple[int, ...]) -> tuple[int, int, int] | None:
    """The (pixel, row, image) strides in bytes of an (N, C, H, W) byte tensor stored with its
    channels consecutive, each a multiple of 16 (a dimension of one element takes any such
    stride), or None."""
    n, c, h, wd = shape
    sn, sc, sh, sw = strides
    if sc != 1 and c > 1:
        return None
    pixel = sw if wd > 1 else max(16, -(-c // 16) * 16)
    row = sh if h > 1 else pixel * wd
    image = sn if n > 1 else row * h
    if any(v <= 0 or v % 16 for v in (pixel, row, image)) or pixel < c:
        return None
    return pixel, row, image


def _shape_fits(
    q: _Problem, x_shape: tuple[int, ...], x_strides: tuple[int, ...], alignment: int
) -> bool:
    """Whether the kernel takes the shape and the input's layout (`alignment`: of its first
    byte's address, which the copy descriptors need on 16 bytes)."""
    return (
        alignment % 16 == 0
        and q.g == 1
        and (q.r, q.s, q.dh, q.dw) == (3, 3, 1, 1)
        and q.sh == q.sw
        and q.sh in (1, 2)
        and q.c % 64 == 0
        and (q.ow - 1) * q.sw + 1 <= _BOX_LIMIT
        and _classes(q) is not None
        and _input_strides(x_shape, x_strides) is not None
    )


def _aligned(q: _Problem, rows: int, images: int) -> bool:
    """Whether the kernel shifts a tile's pixels by its first output offset modulo 8 (so that
    each consumer's 8 columns write whole 32-byte sectors): where every channel's plane is a
    multiple of 8 pixels and a tile of rows is not."""
    return images == 1 and q.oh * q.ow % 8 == 0 and rows * q.ow % 8 != 0


def _np(q: _Problem, rows: int, images: int, wn: int, window: bool = False) -> int | None:
    """A consumer warpgroup's N for the tile's pixels (and up to 7 columns of shift; `window`:
    its region's pixels up to the last output's) over `wn` warpgroups, or None where none
    fits."""
    pixels = images * rows * q.ow
    if window:
        region_h, pitch = _window(q, rows)
        columns = ((images - 1) * region_h + rows - 1) * pitch + q.ow
    else:
        columns = pixels + (7 if _aligned(q, rows, images) else 0)
    np_ = max(_NP_MIN, -(-columns // (16 * wn)) * 16)
    if np_ > _NP_MAX or pixels < _MIN_FILL * wn * np_:
        return None
    return np_


def _region(q: _Problem, rows: int) -> tuple[int, int]:
    """The (rows, columns) of input pixels under a tile of `rows` output rows, an image."""
    return (rows - 1) * q.sh + 3, (q.ow - 1) * q.sw + 3


def _window(q: _Problem, rows: int) -> tuple[int, int]:
    """The shifted-window form's region: its rows, and the pixels a row takes in a window
    buffer (its columns, rounded up to 8 where OW is a multiple of 8, so that each output row
    starts its consumers' 8-column groups on a 32-byte sector; the box's columns past the
    image are copied as 0)."""
    region_h, region_w = _region(q, rows)
    return region_h, -(-region_w // 8) * 8 if q.ow % 8 == 0 else region_w


def _region_slice(q: _Problem, rows: int, images: int) -> int:
    """Shared bytes of one chunk of CK channels of a tile's input region (on 128 bytes, where
    a copy lands)."""
    region_h, region_w = _region(q, rows)
    return -(-images * region_h * region_w * _ck(q) // 128) * 128


def _region_fits(q: _Problem, rows: int, window: bool = False) -> bool:
    """Whether a tile's input region (`window`: the shifted-window form's) is one copy's box
    (an image's rows and columns)."""
    return max(_window(q, rows) if window else _region(q, rows)) <= _BOX_LIMIT


def _window_slice(q: _Problem, rows: int, images: int, columns: int) -> int:
    """Shared bytes of one window buffer of the shifted-window form (on 1024 bytes, where a
    swizzled copy lands): the region's pixels, and as many as the last tap's B operand reads
    past its `columns` (those of the consumers, some past the region: read, never stored)."""
    region_h, pitch = _window(q, rows)
    pixels = max(images * region_h * pitch, columns + 2 * pitch + 2)
    return -(-pixels * _ck(q) // 1024) * 1024


def _after_stages(
    q: _Problem, wm: int, np_: int, rows: int, images: int, zw: bool, window: bool = False
) -> int:
    """Shared bytes past the ring: the two window buffers of the shifted-window form
    (`window`), or where a filter zero point is not 0 (`zw`) the tile's input region; the
    table's rows; each consumer pixel's output offset and sum; where `zw`, the region's pixels'
    channel sums; each consumer pixel's class (a byte)."""
    pixels = (2 // wm) * np_
    region_h, region_w = _window(q, rows) if window else _region(q, rows)
    if window:
        copies = 2 * _window_slice(q, rows, images, pixels)
    else:
        copies = q.c // _ck(q) * _region_slice(q, rows, images) if zw else 0
    sums = 4 * images * region_h * region_w if zw else 0
    return copies + sums + 4 * (9 * 64 * wm + 2 * pixels) + pixels


def _stages(
    q: _Problem, wm: int, np_: int, rows: int, images: int, zw: bool, window: bool = False
) -> int:
    """The ring's stages that fit shared memory (at most one per K step), or 0."""
    ck, bm, wn = _ck(q), 64 * wm, 2 // wm
    stage = bm * ck if window else (bm + wn * np_ + _BOX_ROW) * ck
    room = _SMEM_CTA - _ALIGN_SLACK - _after_stages(q, wm, np_, rows, images, zw, window)
    stages = min(_MAX_STAGES, 9 * q.c // ck, room // stage)
    return stages if stages >= _MIN_STAGES else 0


def _offsets_fit(q: _Problem, images: int) -> bool:
    """A tile's output offsets (from its first pixel of its first channel) fit 32 bits."""
    return images * q.m * q.oh * q.ow < 2**31


def _ck(q: _Problem) -> int:
    return 128 if q.c % 128 == 0 else 64


def tma_tiles(
    q: _Problem,
    x_shape: tuple[int, ...],
    x_strides: tuple[int, ...],
    alignment: int,
    device: int,
    zw: bool,
) -> list[TmaTile]:
    """The tiles worth timing for the shape, best first by the ranking model (at most
    `_CANDIDATES` of them, each with its ring's stage counts; `zw`: some filter zero point is
    not 0, the tiles' input regions in shared memory too); empty where the kernel does not take
    the shape or the GPU is not sm_90."""
    if compute_capability(device) != 90:
        return []
    if not _shape_fits(q, x_shape, x_strides, alignment):
        return []
    sms = sm_count()
    spans = [(rows, 1) for rows in range(1, q.oh + 1)]
    spans += [(q.oh, images) for images in range(2, min(q.n, _BOX_LIMIT) + 1)]
    tiles = []
    forms = ((False, _CANDIDATES), (True, _WINDOW_CANDIDATES))
    for window, candidates in forms if q.sh == 1 else forms[:1]:
        ranked: list[tuple[float, int, TmaTile]] = []
        for wm in (2, 1) if q.m > 64 else (1,):
            for rows, images in spans:
                if (rows - 1) * q.sh + 1 > _BOX_LIMIT or not _offsets_fit(q, images):
                    continue
                if (zw or window) and not _region_fits(q, rows, window):
                    continue
                np_ = _np(q, rows, images, 2 // wm, window)
                stages = _stages(q, wm, np_, rows, images, zw, window) if np_ else 0
                if not np_ or not stages:
                    continue
                ctas = -(-q.m // (64 * wm)) * -(-q.n // images) * -(-q.oh // rows)
                macs = 64 * wm * (2 // wm) * np_ * 9 * q.c
                cost = math.ceil(ctas / sms) * (macs / _TENSOR_MACS_PER_CLOCK + _CTA_FIXED_CLOCKS)
                ranked.append((cost, -np_, TmaTile(wm, rows, images, stages, window)))
        ranked.sort(key=lambda t: t[:2])
        for *_, tile in ranked[:candidates]:
            tiles.append(tile)
            for stages in _FEWER_STAGES:
                if _MIN_STAGES <= stages < tile.stages:
                    tiles.append(dataclasses.replace(tile, stages=stages))
    return tiles


_Layout = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...], int]


@dataclass(frozen=True)
class TmaPlan:
    """A call of the TMA-fed kernel on one shape and tile, all but the data."""

    q: _Problem  # (its filter zero points empty: only the geometry counts)
    tile: TmaTile
    zw: bool  # some filter zero point is not 0: the kernel sums each pixel's bytes
    classes: tuple[tuple[int, int, int], tuple[int, int, int]]  # (see `_classes`)
    # the input's copy descriptors but their address: `tensor_map`'s dims, strides, box,
    # element strides and swizzle; the stages' boxes, and (where `zw`) the tile's region's
    x_layout: _Layout
    region_layout: _Layout | None
    gemm: Launch
    scalars: tuple[np.integer[Any], ...]  # after the arrays
    kernel: Literal["wgmma_tma"] = "wgmma_tma"  # the GEMM's name (its `Kernel`)

    def _filter(
        self, w: Any, w_zp: np.ndarray, cache: MutableMapping[Hashable, Any] | None
    ) -> tuple[Any, Any, Any, TensorMap, bool]:
        """The filter's rows of (r, s, c) bytes, the epilogue's table [tiles_m * BM][9], the
        zero points on the device and the filter's copy descriptor; with a `cache` (a constant
        filter), made on the first call and kept (then also whether they were kept)."""
        import cupy

        q, bm, ck, classes = self.q, 64 * self.tile.wm, _ck(self.q), self.classes
        slot: Hashable = ("tma", ck, bm, classes)
        key = (w.data.ptr, w.shape, w.strides, str(w.dtype), w_zp.tobytes())
        hit = cache.get(slot) if cache is not None else None
        if hit is not None and hit[0] == key:
            rows, table, zp_dev, tmw = hit[1]
            return rows, table, zp_dev, tmw, True
        rows = cupy.ascontiguousarray(w.transpose(0, 2, 3, 1)).reshape(q.m, 9 * q.c)
        rows = rows.view(cupy.uint8)
        table = cupy.asarray(_table(cupy.asnumpy(w), w_zp, classes, bm))
        zp_dev = device_zero_points(w_zp)
        tmw = tensor_map(rows.data.ptr, [9 * q.c, q.m], [9 * q.c], [ck, bm], [1, 1], ck)
        if cache is not None and hit is None:
            # other calls read them from other streams: complete before they are shared
            cupy.cuda.get_current_stream().synchronize()
            cache.setdefault(slot, (key, (rows, table, zp_dev, tmw)))
        return rows, table, zp_dev, tmw, False

    def run(
        self, x: Any, w: Any, out: Any, w_zp: np.ndarray,
        cache: MutableMapping[Hashable, Any] | None,
    ) -> None:  # fmt: skip
        """``out`` (N, M, OH, OW) int32 of `x` (N, C, H, W) stored (N, H, W, C) and `w`."""
        # (`rows`, which `tmw` points into, lives past the launch)
        rows, table, zp_dev, tmw, kept = self._filter(w, w_zp, cache)
        tmx = tensor_map(x.data.ptr, *self.x_layout)
        tmr = tmx if self.region_layout is None else tensor_map(x.data.ptr, *self.region_layout)
        # a kept filter is all it reads before the grid ahead of it completes
        launch_packed(self.gemm, (tmx, tmw, tmr, zp_dev, table, out, *self.scalars), kept)
        del rows


def _table(
    w: np.ndarray,
    w_zp: np.ndarray,
    classes: tuple[tuple[int, int, int], tuple[int, int, int]],
    bm: int,
) -> np.ndarray:
    """[M rounded up to `bm`][9] int32: for each output channel m and class of pixel (its row's
    and column's: first, inner, last), - sum w + z_w[m] C taps over the taps inside the image
    (modulo 2^32): z_x times it is what the terms of sum (x - z_x)(w - z_w) that the MMAs over
    0-filled pixels and the pixel sums leave out add up to (the kernel multiplies)."""
    m, c = w.shape[:2]
    taps = w.astype(np.int64).sum(axis=1).reshape(m, 9)  # [M][(r, s)]
    inside = np.zeros((9, 9), np.int64)  # [(r, s)][class]
    for rc, rmask in enumerate(classes[0]):
        for cc, cmask in enumerate(classes[1]):
            for tap in range(9):
                inside[tap, 3 * rc + cc] = (rmask >> (tap // 3)) & (cmask >> (tap % 3)) & 1
    zw = w_zp.astype(np.int64)[:, None]
    terms = -(taps @ inside) + zw * c * inside.sum(axis=0)[None, :]
    out = np.zeros((-(-m // bm) * bm, 9), np.int64)
    out[:m] = terms
    return wrap32(out).astype(np.int32)


@functools.lru_cache(maxsize=256)
def tma_plan(
    geometry: tuple[int, ...],
    zw: bool,
    x_shape: tuple[int, ...],
    x_strides: tuple[int, ...],
    x_dtype: str,
    w_dtype: str,
    tile: TmaTile,
    alignment: int,
    device: int,
) -> TmaPlan:
    """The plan of `tile` on the shape (which `tma_tiles` takes; a tile it would not offer may
    still run where its box and stages fit, else ValueError)."""
    from .convolution_integer import _Problem  # that module imports this one

    q = _Problem.from_geometry(geometry)
    strides = _input_strides(x_shape, x_strides)
    classes = _classes(q)
    if compute_capability(device) != 90 or not _shape_fits(q, x_shape, x_strides, alignment):
        raise ValueError("the TMA-fed kernel does not take this shape, layout or GPU")
    assert strides is not None and classes is not None
    wm, wn, window = tile.wm, 2 // tile.wm, tile.window
    single = tile.images == 1
    np_ = _np(q, tile.rows, tile.images, wn, window)
    fits = (
        wm in (1, 2)
        and (single and 1 <= tile.rows <= q.oh or not single and tile.rows == q.oh)
        and 1 <= tile.images <= min(q.n, _BOX_LIMIT)
        and (tile.rows - 1) * q.sh + 1 <= _BOX_LIMIT
        and (not (zw or window) or _region_fits(q, tile.rows, window))
        and not (window and q.sh != 1)
        and _offsets_fit(q, tile.images)
        and np_ is not None
        and _MIN_STAGES <= tile.stages <= _stages(q, wm, np_, tile.rows, tile.images, zw, window)
    )
    if not fits or np_ is None:
        raise ValueError(f"the TMA-fed kernel's tile {tile} does not fit this shape")
    ck, bm = _ck(q), 64 * wm
    tiles_m = -(-q.m // bm)
    tiles_h = -(-q.oh // tile.rows)
    ctas = tiles_m * -(-q.n // tile.images) * tiles_h
    stage = bm * ck if window else (bm + wn * np_ + _BOX_ROW) * ck
    smem = _ALIGN_SLACK + tile.stages * stage
    smem += _after_stages(q, wm, np_, tile.rows, tile.images, zw, window)
    kernel: Launch = launch(
        TMA_SOURCE, "conv_int_tma", np.dtype(w_dtype), np.dtype(x_dtype), ck, np_, wm, wn,
        tile.stages, zw, window, grid=(ctas, 1, 1), block=(_WARPGROUP * (1 + wm * wn), 1, 1),
        shared_mem=smem, options=_OPTIONS,
    )  # fmt: skip
    region_h, region_w = _window(q, tile.rows) if window else _region(q, tile.rows)
    if window:
        region_slice = _window_slice(q, tile.rows, tile.images, wn * np_)
    else:
        region_slice = _region_slice(q, tile.rows, tile.images)
    aligned = not window and _aligned(q, tile.rows, tile.images)
    sizes = (q.n, q.c, q.m, q.oh, q.ow, tile.rows, tile.images, tiles_m, tiles_h, q.c // ck,
             q.sh, q.ph, q.pw, region_h, region_w, region_slice, aligned,
             wrap32(q.zx))  # fmt: skip
    scalars = tuple(np.int32(v) for v in sizes)
    dims = (q.c, q.wd, q.h, q.n)
    region_box = (ck, region_w, region_h, tile.images)
    # the stages' boxes (element strides = the conv strides), or the window's region, swizzled
    # as the MMAs read them; where `zw`, the region for the pixel sums, as it lies
    x_layout = (
        (dims, strides, region_box, (1, 1, 1, 1), ck) if window else
        (dims, strides,
         (ck, (q.ow - 1) * q.sw + 1, (tile.rows - 1) * q.sh + 1, tile.images),
         (1, q.sw, q.sh, 1), ck)
    )  # fmt: skip
    region_layout = (dims, strides, region_box, (1, 1, 1, 1), 0)
    region = region_layout if zw and not window else None
    return TmaPlan(q, tile, zw, classes, x_layout, region, kernel, scalars)
