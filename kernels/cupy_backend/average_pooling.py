"""AVERAGE_POOLING on the GPU: launcher of `kernels/cuda/average_pooling*.cu`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from ..geometry import Window
from ._common import (
    BLOCK,
    INT32_LIMIT,
    Launch,
    Plan,
    fast_divmod,
    fill_divisors,
    grid_for,
    index_type,
    launch,
    param_struct,
    plan_cache,
    sm_count,
)

__all__ = ["PATHS", "average_pooling", "average_pooling_on"]

Path = Literal["eager", "packed", "bands", "strip", "ring", "rows", "rows16", "tiled", "direct"]
PATHS: tuple[Path, ...] = (
    "eager",
    "packed",
    "bands",
    "strip",
    "ring",
    "rows",
    "rows16",
    "tiled",
    "direct",
)
BandPath = Literal["eager", "packed", "bands", "strip", "ring"]

PARAMS = param_struct("average_pooling.cu", "dml::PoolParams")

# Window sizes compiled as template constants (others are read at run time).
SPECIALISED_WINDOWS = (1, 2, 3)
# W positions per pool_tiled work item. Measured on an H200 (bench_kernels.py, run 4): 4
# positions per item were slower than 1 (2-D k3s1 146 vs 127 us, 3-D k3s1 299 vs 223 us).
TILE_VECTOR = 1
# pool_strip: warps to aim for per SM when choosing the D runs (more runs re-read more halo).
STRIP_WARPS_PER_SM = 32
# ... for 3-D pools at D stride 1 (each run re-reads KD - 1 planes): measured on an H200
# (knob sweep, 8x32x32x64x64 k3s1) 85.7 us at 16 against 89.6 at 32; k3s2 lost at 16 (50.5
# against 45.3 us). The "ring" path keeps 32.
STRIP_WARPS_PER_SM_UNIT_D = 16
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


def outputs_per_thread(window_w: int, itemsize: int, wide: bool = True) -> int:
    """Outputs along W per pool_rows thread: a 16-byte input span when the window allows, or
    with ``wide`` a 32-byte one (two loads per window row) where that still stores at most 16
    bytes and the type is FLOAT16 (FLOAT32 spans of 16 bytes are at goal already)."""
    if window_w not in SPECIALISED_WINDOWS:
        return 1
    span = window_w * itemsize
    span_bytes = 32 if wide and itemsize == 2 else 16
    if span_bytes % span == 0:
        return min(8, span_bytes // span)
    return 4 if itemsize == 2 else 2


def reads_per_element(window: Sequence[int], stride: Sequence[int]) -> float:
    """Global reads per input element when every output reads its own taps (pool_rows)."""
    return math.prod(k / st for k, st in zip(window, stride, strict=True))


def _strip_axes(window: Window) -> bool:
    """Whether pool_strip takes this geometry: unit dilations, windows of 1..3 with pads
    inside them, strides 1 or 2 across the row (W) and, in 3-D, down the tile (H)."""
    if any(d != 1 for d in window.dilations) or any(not 1 <= k <= 3 for k in window.sizes):
        return False
    pads = zip(window.start_padding, window.end_padding, window.sizes, strict=True)
    if any(a >= k or b >= k for a, b, k in pads):
        return False
    strides = window.strides
    inner = strides[1:] if len(strides) == 3 else strides[-1:]
    return all(st in (1, 2) for st in inner)


def _strip_plan(
    shape: tuple[int, ...],
    xs: list[int],
    dtype: np.dtype,
    window: Window,
    out3: list[int],
    p: np.ndarray,
    path: BandPath,
) -> Launch | None:
    """pool_strip over the 3-D form: 2-D pools walk H (the D axis of the kernel) with unit
    rows, 1-D pools have unit D and H. With ``path`` "bands", "packed" or "eager", 1-D and 2-D
    pools go to pool_bands, pool_packed or pool_eager instead: unit D, bands of rows down H, no
    walk (3-D pools keep pool_strip, which already reads bands of rows at each step of its
    walk)."""
    n, c, *sizes = shape
    dims = len(sizes)
    bands = path not in ("strip", "ring") and dims < 3
    # kernel axes (D, H, W) <- pool axes
    two_d = (None, 0, 1) if bands else (0, None, 1)
    axes = {1: (None, None, 0), 2: two_d, 3: (0, 1, 2)}[dims]
    k3 = [window.sizes[a] if a is not None else 1 for a in axes]
    s3 = [window.strides[a] if a is not None else 1 for a in axes]
    pad3 = [window.start_padding[a] if a is not None else 0 for a in axes]
    size3 = [sizes[a] if a is not None else 1 for a in axes]
    st3 = [xs[2 + a] if a is not None else 0 for a in axes]
    o3 = [out3[3 - dims + a] if a is not None else 1 for a in axes]
    v = 16 // dtype.itemsize
    lanes = min(32, 1 << max(0, (-(-o3[2] // v) - 1).bit_length()))
    spans = -(-o3[2] // (lanes * v))
    # Bands of 4 rows (2 at H stride 2: 5 input rows of 8 W elements per lane) keep 6 or more
    # 16-byte loads in flight per lane at 60-128 registers.
    ty = min(4 if s3[1] == 1 else 2, 1 << max(0, (o3[1] - 1).bit_length()))
    tiles = -(-o3[1] // ty)
    per_run = n * c * tiles * spans
    unit_d = dims == 3 and s3[0] == 1 and path != "ring"
    want = sm_count() * (STRIP_WARPS_PER_SM_UNIT_D if unit_d else STRIP_WARPS_PER_SM) * 32
    runs = max(1, min(o3[0], -(-want // (per_run * lanes))))
    run_planes = -(-o3[0] // runs)
    runs = -(-o3[0] // run_planes)
    items = per_run * runs
    if items > INT32_LIMIT:
        return None
    p["x_stride"] = st3
    p["size"] = size3
    p["out"] = o3
    p["window"] = k3
    p["stride"] = s3
    p["dilation"] = [1, 1, 1]
    p["pad_lo"] = pad3
    p["total"] = items
    fill_divisors(p["strip_div"], [runs, tiles, spans])
    p["run_planes"] = run_planes
    groups = BLOCK // lanes
    return launch(
        "average_pooling_bands.cu" if bands else "average_pooling_strip.cu",
        f"pool_{path}" if bands else "pool_strip",
        dtype,
        *(k3[1:] if bands else k3),
        s3[1],
        s3[2],
        pad3[2],
        ty,
        lanes,
        *(() if bands else (path == "ring",)),
        grid=(-(-items // groups), 1, 1),
    )


@plan_cache
def _plan(
    shape: tuple[int, ...],
    byte_strides: tuple[int, ...],
    dtype: np.dtype,
    window: Window,
    include_padding: bool,
    path: Path | None,
) -> Plan:
    """Everything but the data, once per geometry: a call then only allocates and launches.

    ``path`` forces a kernel where it applies (tests run every case through each; "strip",
    "ring", "bands", "packed" and "eager" fall back to the others' choice where they do not;
    "ring" is pool_strip in its earlier form, a ring of plane sums, timed beside it); None
    chooses pool_eager or pool_packed for overlapping small 2-D windows,
    pool_strip for 3-D ones and 1-D ones that re-read much, pool_rows where windows re-read
    little, else pool_tiled, else pool_direct. "rows16" is pool_rows in its earlier form (a row's
    loads at a time, spans of at most 16 bytes), timed beside "rows".
    """
    n, c, *sizes = shape
    dims = len(sizes)
    out_sizes = window.blocks(sizes)
    out_shape = (n, c, *out_sizes)
    p = np.zeros((), dtype=PARAMS)
    if math.prod(out_shape) == 0:
        return Plan(out_shape, None, p)

    # Unit leading axes turn 1-D and 2-D pooling into the 3-D form of the kernels.
    lead = 3 - dims
    xs = [s // dtype.itemsize for s in byte_strides]
    out3 = [1] * lead + list(out_sizes)
    window3 = window.with_unit_axes(lead)
    p["x_stride_n"], p["x_stride_c"] = xs[0], xs[1]
    p["channel_div"] = fast_divmod(c)
    p["include_padding"] = int(include_padding)
    p["taps"] = window.taps

    # Measured on an H100 (NOTES-memory-kernels.md, run 5): the strip kernel beats the tiles on
    # overlapping windows (2-D k3s1 68 vs 54 % of copy, 3-D k3s1 83 vs 40 %) and pool_rows on
    # 3-D k3s2 (82 vs 52 %); on 2-D k3s2 pool_rows is as fast (70 vs 68 %). 2-D overlapping
    # windows go to the bands (every load of a band in flight at once, as in the 3-D walk's
    # steps, where the 2-D walk had one row's): chosen by prediction, the benchmark times the
    # bands beside the walk and pool_rows. pool_packed (the same bands, every load of a band
    # issued before any conversion; pool_bands waits on each FLOAT16 row's load before issuing
    # the next) takes both types: FLOAT16 by prediction, FLOAT32 measured (H200 2-D k3s1 fp32
    # 52.6 vs 59.3 us, 91 vs 81 % of copy; H100 71.9 vs 72.1 us), timed beside pool_bands.
    overlapping = any(k > st for k, st in zip(window.sizes, window.strides, strict=True))
    few_reads = reads_per_element(window.sizes, window.strides) <= ROWS_MAX_READS
    strip_fits = _strip_axes(window)
    # pool_eager (pool_packed storing each output row once summed) where pool_packed takes more
    # than 64 registers (ptxas, sm_90: FLOAT16 at H stride 1 76 -> 64, FLOAT32 at H stride 2
    # 76 -> 64, so 4 CTAs of 256 per SM instead of 3): chosen by prediction, timed beside
    # pool_packed; FLOAT32 at H stride 1 stays on pool_packed (64 registers either way).
    if path is None and overlapping and strip_fits:
        if dims == 2:
            over_64 = dtype.itemsize == 2 or window.strides[0] != 1
            path = "eager" if over_64 else "packed"
        elif dims == 3 or not few_reads:
            path = "strip"
    if path in ("strip", "ring", "bands", "packed", "eager"):
        if (
            strip_fits
            and (kernel := _strip_plan(shape, xs, dtype, window, out3, p, path)) is not None
        ):
            return Plan(out_shape, kernel, p)
        path = None

    stride3, dilation3 = window3.strides, window3.dilations
    p["x_stride"] = [0] * lead + xs[2:]
    p["size"] = [1] * lead + list(sizes)
    p["out"] = out3
    p["window"] = window3.sizes
    p["stride"] = stride3
    p["dilation"] = dilation3
    p["pad_lo"] = window3.start_padding
    fill_divisors(p["out_div"], out3)
    # pool_rows: every window row's span loaded before any sum where the windows lie inside the
    # input and rows are 16-byte aligned, FLOAT16 spans of 32 bytes (8 outputs, one 16-byte
    # store): chosen by prediction (2-D k2s2 fp16 had one row's 16 bytes in flight per thread,
    # 58 % of DRAM peak on the H200), timed beside "rows16".
    if path is None and few_reads:
        path = "rows"
    if path in ("rows", "rows16"):
        v = outputs_per_thread(window3.sizes[2], dtype.itemsize, path == "rows")
        groups = -(-out3[2] // v)
        total = n * c * out3[0] * out3[1] * groups
        p["total"] = total
        p["groups_div"] = fast_divmod(groups)
        p["contiguous"] = int(
            xs[-1] == 1
            and stride3[2] == window3.sizes[2]
            and (window3.sizes[2] == 1 or dilation3[2] == 1)
        )
        idx = index_type(shape, xs, math.prod(out_shape), total)
        k = [_constant(w) for w in window3.sizes]
        batch = path == "rows"
        grid = grid_for(total)
        kernel = launch("average_pooling_rows.cu", "pool_rows", dtype, idx, *k, v, batch, grid=grid)
        return Plan(out_shape, kernel, p)

    choice = choose_tile(out3, window3.sizes, stride3, dilation3)
    # pool_tiled forms in-row offsets in 32 bits.
    row_fits = (sizes[-1] - 1) * abs(xs[-1]) <= INT32_LIMIT
    if choice is None or not row_fits or path == "direct":
        total = math.prod(out_shape)
        p["total"] = total
        kernel = launch("average_pooling.cu", "pool_direct", dtype, grid=grid_for(total))
        return Plan(out_shape, kernel, p)

    tile, ext = choice
    tiles = [-(-o // t) for o, t in zip(out3, tile, strict=True)]
    ctas = n * c * math.prod(tiles)
    p["total"] = ctas
    p["tile"] = tile
    p["in_tile"] = ext
    fill_divisors(p["tiles_div"], tiles)
    p["in_w_div"] = fast_divmod(ext[2])
    p["in_wv_div"] = fast_divmod(-(-ext[2] // TILE_VECTOR))
    p["tile_w_div"] = fast_divmod(tile[2])
    p["tile_wv_div"] = fast_divmod(-(-tile[2] // TILE_VECTOR))
    k = [_constant(w) for w in window3.sizes]
    kernel = launch(
        "average_pooling.cu",
        "pool_tiled",
        dtype,
        *k,
        TILE_VECTOR,
        grid=(ctas, 1, 1),
        shared_mem=shared_bytes(tile, ext),
    )
    return Plan(out_shape, kernel, p)


def average_pooling_on(path: Path | None, x: Any, window: Window, include_padding: bool) -> Any:
    """`average_pooling` through the kernel `path` (None: the launcher's choice)."""
    return _plan(x.shape, x.strides, x.dtype, window, bool(include_padding), path).run(x)


def average_pooling(x: Any, window: Window, include_padding: bool) -> Any:
    """``(N, C, *S) -> (N, C, *O)`` for 1..3 spatial dims, FLOAT16/FLOAT32, float32 sums."""
    return average_pooling_on(None, x, window, include_padding)
