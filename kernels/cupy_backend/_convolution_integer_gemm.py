"""The tensor-core path of CONVOLUTION_INTEGER: filter and input preparation, then an implicit
GEMM on Hopper's warpgroup MMA (`convolution_integer_sm90a.cu`, compute capability 9.0 exactly)
or on `mma.sync` (`convolution_integer.cu`, every other GPU and any forced choice)."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Hashable, Iterator, MutableMapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from ..wire import buffer_extent
from ._common import (
    GRID_YZ_LIMIT,
    DependentLaunch,
    Launch,
    compute_capability,
    contiguous_planes,
    device_zero_points,
    fastest,
    gpu_ms,
    launch,
    max_active_clusters,
    plane_alignment,
    sm_count,
)
from ._convolution_integer_tma import TmaPlan, TmaTile, tma_plan, tma_tiles

if TYPE_CHECKING:
    from .convolution_integer import _Problem

__all__ = [
    "MMA_SYNC_TILES",
    "SHIFT_TILES",
    "WGMMA_TILES",
    "Kernel",
    "gemm_kernel",
    "padded_extent",
    "padded_input_fits",
    "tensor_core",
]

# "wgmma_shift_gather": the shifted-window GEMM reading the input where it lies (NCHW planes
# or (N, H, W, C) pixels)
# "wgmma_tma": the 3x3 kernel fed by the copy engine (`_convolution_integer_tma`)
Kernel = Literal["wgmma", "wgmma_shift", "wgmma_shift_gather", "wgmma_tma", "mma_sync"]
# the shifted-window GEMM, reading a transformed input or the input where it lies
_SHIFT_KERNELS = ("wgmma_shift", "wgmma_shift_gather")

_SOURCE = "convolution_integer.cu"  # mma.sync GEMM
_PREP_SOURCE = "convolution_integer_prep.cu"  # the operands' layouts, the input's frame
SM90A_SOURCE = "convolution_integer_sm90a.cu"  # wgmma GEMM; PTX that only sm_90a runs
SM90A_OPTIONS = ("-arch=sm_90a",)
# Filter prep: the largest row (bytes) it stages in shared memory: the default limit (48 KB, no
# opt-in) less the kernel's static shared memory (its 32 partial sums); launched with the input
# prep, whose blocks then hold as much, 20 KB.
_PREP_W_STAGED = 48 * 1024 - 128
_PREP_XW_STAGED = 20 * 1024
# The filter prep's threads a block where its GEMM starts under it: four blocks of 32 registers
# a thread take the 8192 registers an SM keeps beside a GEMM CTA of 256 threads of 224.
_PREP_W_THREADS_BESIDE = 64
# and its static shared memory (its warps' partial sums)
_PREP_W_STATIC_BYTES = 128
_PAD_SLACK = 1 << 20  # bytes of frame the padded input may add beyond twice the image
# (BM output channels, BN pixels, shared stages, CTAs that fit one SM, relative efficiency).
MMA_SYNC_TILES: tuple[tuple[int, int, int, int, float], ...] = (
    (128, 128, 4, 2, 1.0),
    (128, 64, 4, 3, 0.85),
    (64, 128, 4, 3, 0.85),
    (64, 64, 4, 4, 0.7),
    (32, 128, 4, 4, 0.6),
)
WGMMA_TILES: tuple[tuple[int, int, int, int, float], ...] = (
    (128, 256, 4, 1, 1.0),
    (128, 128, 6, 2, 0.95),
    (128, 64, 8, 2, 0.8),
    (64, 128, 6, 3, 0.8),
    (64, 64, 8, 3, 0.65),
)
# The shifted-window wgmma GEMM (R * S = 9 taps, channels per group a multiple of 32; stride 1,
# or strides of 2 on the input read where it lies):
# (warpgroups along M, warpgroups along N, pixels per warpgroup, stages, CTAs that fit one SM,
# relative efficiency; 0: a tile that only a registered operator's timing of the plans tries,
# never the model's choice).
# The efficiencies and the model's constants below are fitted to the plans that H100 timings
# keep for the benchmark's 3x3 layers at batches 32, 8 and 1 (16 of its 18 choices); two
# warpgroups along N (sharing the filter tile) measured slower than these on every layer, and
# are not offered. 224 pixels: 28 x 28 layers' tiles fill the SMs more evenly than 256, and so
# do 56 x 56 layers' 64-row tiles two CTAs an SM. 64 pixels: small batches' tiles spread over
# more SMs without K splits.
SHIFT_TILES: tuple[tuple[int, int, int, int, int, float], ...] = (
    (2, 1, 256, 4, 1, 1.0),
    (2, 1, 224, 4, 1, 1.0),
    (2, 1, 128, 4, 1, 0.95),
    (1, 1, 128, 4, 2, 0.9),
    (1, 1, 256, 3, 2, 0.9),
    (1, 1, 224, 3, 2, 0.9),
    (2, 1, 64, 4, 1, 1.0),
    (1, 1, 64, 4, 2, 0.9),
)
# CTAs an SM by a tile's threads
_SHIFT_CTAS_PER_SM = {128 * wm * wn: per_sm for wm, wn, _, _, per_sm, _ in SHIFT_TILES}
_SHIFT_TAPS = 9
# Its strides: 1, or 2 on the input read where it lies (each tap a shift within one of the
# padded input's phase planes, whose runs take 4 times the shared memory: the tiles' stages
# then drop to what fits, down to this many).
_SHIFT_STRIDES = (1, 2)
_SHIFT_MIN_STAGES = 2
# Shared memory on sm_90: at most 227 KB a CTA, 228 KB an SM of which the driver takes 1 KB
# per resident CTA.
_SMEM_CTA = 227 * 1024
_SMEM_SM = 228 * 1024
_SMEM_RESERVED_PER_CTA = 1024

# The shifted-window GEMM computes every virtual pixel of the padded input; past this many per
# output pixel (wide dilations over narrow outputs, say) the tap-by-tap GEMM runs instead.
_SHIFT_MAX_VIRTUAL = 4
# Its epilogue's shared block per warp: 16 rows of EPI_PITCH = 40 ints.
_SHIFT_EPI_BYTES = 16 * 40 * 4
# Its static shared memory: a barrier of 8 bytes per stage, the dynamic block after them
# 16-byte aligned (at most 8 stages); the kernel rounds its start up to 128 bytes, skipping up to
# 112 (reserved by `_SHIFT_ALIGN`).
_SHIFT_STATIC_BYTES = 64
_SHIFT_ALIGN = 128
# Among unsplit tiles the model takes the least fitted cost: over the waves of CTAs, a tile's
# pixels x rows over its efficiency, plus a fixed part (a wave of small tiles pays its start
# and gather again). K splits it may take (the splits' partial sums added up in a cluster's
# shared memory or in a zeroed output, below): only where a model of a tile's time (the MMAs
# at the tensor rate or the operands' L2 -> shared bytes, whichever is longer, then its
# output, then a fixed part), over the waves of CTAs, expects 25% less than the best unsplit
# tile. The L2 rate (an SM's bytes a clock) is a fitted one, near what 512 @7's filter stream
# reaches under its MMAs (~30; the fits hold from 30 to 36), where the unsplit kernel's loads
# alone on 128 @28 reach 14 (23.7 MB in 7.1 µs on 132 SMs).
_SHIFT_MAX_SPLITS = 4
# A K split's CTAs run as a cluster, their partial sums added in shared memory (no zeroed output,
# no atomic adds; 1-2 µs faster on most split plans where the clusters all fit at once, 0.1-0.2
# slower on one, bench/NOTES-convolution-integer.md v26), on tiles of at most this many pixels
# (the wider ones' accumulators leave no registers for the exchange).
_CLUSTER_MAX_PIXELS = 128
_SPLIT_GAIN = 0.75
_TENSOR_MACS_PER_CLOCK = 4096
_L2_BYTES_PER_CLOCK = 32
_TILE_FIXED_CLOCKS = 6000
_TILE_FIXED_COST = 1000
# The input transform's rate, the whole GPU's bytes (read and written) per SM clock: as measured
# on H100 for 64 @56, batch 32 (13.3 MB in 6.1 µs).
_DRAM_BYTES_PER_CLOCK = 1250
# A registered operator's calls time the shifted-window GEMM's plans (each tile, the input read
# where it lies or transformed, K unsplit or split) the first time they meet a shape (its input's
# sizes, strides and alignment; not its zero point), then keep the fastest: for this many shapes
# per registration; past them, the model's plan runs untimed. Each plan runs once untimed (its
# filter layout prepared, its buffers allocated), then in `gpu_ms`'s timed groups of
# `_TUNE_RUNS` calls; plans are timed until that has taken `_TUNE_SECONDS`, then the
# `_TUNE_FINALISTS` fastest are timed `_TUNE_ROUNDS` times more, in turn, and the least time of
# each decides (`fastest`). (Making a plan compiles its kernels where they are new: a few tens
# of variants in all, each once per process and kept in the compile cache on disk.)
_TUNED_SHAPES = 8
_TUNE_RUNS = 3
_TUNE_SECONDS = 2.0
_TUNE_FINALISTS = 4
_TUNE_ROUNDS = 2


def _has_sm90a(device: int) -> bool:
    return compute_capability(device) == 90


def gemm_kernel(choice: Literal["auto", "wgmma", "mma_sync"]) -> Kernel:
    """The GEMM kernel a call runs: wgmma where the current device is sm_90 (its sm_90a
    features exist there only), else mma.sync; a forced "wgmma" elsewhere is an error."""
    import cupy

    sm90a = _has_sm90a(cupy.cuda.Device().id)
    if choice == "wgmma" and not sm90a:
        raise RuntimeError("the wgmma kernel needs a GPU of compute capability 9.0")
    if choice == "auto":
        return "wgmma" if sm90a else "mma_sync"
    return choice


def _pick_tile(
    tiles: tuple[tuple[int, int, int, int, float], ...], mg: int, pixels: int, groups: int
) -> tuple[int, int, int]:
    """The tile with the least estimated time: waves of CTAs times tile work / efficiency."""
    sms = sm_count()
    best: tuple[float, int, int, int] | None = None
    for bm, bn, stages, per_sm, eff in tiles:
        ctas = math.ceil(pixels / bn) * math.ceil(mg / bm) * groups
        waves = math.ceil(ctas / (sms * per_sm))
        cost = waves * bm * bn / eff
        if best is None or cost < best[0]:
            best = (cost, bm, bn, stages)
    assert best is not None
    return best[1], best[2], best[3]


def _prepared_filter(
    w: Any,
    q: _Problem,
    plan: _GemmPlan,
    cache: MutableMapping[Hashable, Any] | None,
    x: Any = None,
    xn: Any = None,
) -> tuple[Any, Any, Any, bool]:
    """The filter as the GEMM reads it, (M, R*S*Cgp) (with the plan's `filter_layout` = (BM,
    tiles of BM per group), BM > 0: the shifted-window GEMM's chunked layout), the per-channel
    constant of the zero-point expansion (K' z_x z_w - z_x sum w, which also depends on the
    input's zero point) and the filter zero points on the device. With `x` and `xn`, the input
    is transformed into `xn` too: in the same launch where the filter is prepared.

    With a `cache` (the filter is a constant), the first call's are kept for as long as the
    cache lives and reused by every call with the same filter and zero points; a call with
    others makes its own. A kept entry is never replaced: another thread's kernels may still
    be reading it on their stream, and freed memory goes back to the pool for reuse. Last:
    whether they are a kept entry (prepared and completed by an earlier call)."""
    import cupy

    layout = plan.filter_layout
    key = ("filter", w.data.ptr, w.shape, w.strides, str(w.dtype), q.zx, q.w_zp.tobytes(),
           plan.kp, *layout)  # fmt: skip
    # one entry per layout (at most three for a filter: the plain one, BM = 64 and 128), so
    # calls whose shapes pick different GEMMs (or whose plan timing tried them) each keep theirs
    slot: Hashable = "filter" if layout == (0, 0) else ("filter", *layout)
    hit = cache.get(slot) if cache is not None else None
    if hit is not None and hit[0] == key:
        if x is not None:
            assert plan.prep_x is not None
            plan.prep_x(x, xn, *plan.prep_args)
        wp, bias, zp_dev = hit[1]
        return wp, bias, zp_dev, True
    # Filter -> (M, R*S*Cgp) and the per-channel constant of the zero-point expansion.
    bm, tiles_m = layout
    wp = cupy.empty((q.g * tiles_m * bm if bm else q.m, plan.kp), dtype=cupy.uint8)
    bias = cupy.empty((q.m,), dtype=cupy.int32)
    zp_dev = device_zero_points(q.w_zp)
    strides = tuple(map(np.int64, w.strides))
    if x is not None and plan.prep_xw is not None:
        both = (np.int32(q.n), np.int32(q.m), w, zp_dev, wp, bias, *plan.prep_xw_args)
        plan.prep_xw(x, xn, *plan.prep_args, *both, *strides)
    else:
        if x is not None:
            assert plan.prep_x is not None
            plan.prep_x(x, xn, *plan.prep_args)
        plan.prep_w(w, zp_dev, wp, bias, *plan.prep_w_args, *strides)
    if cache is not None and hit is None:
        # Other calls read it from other streams: complete before it is shared.
        cupy.cuda.get_current_stream().synchronize()
        cache.setdefault(slot, (key, (wp, bias, zp_dev)))
    return wp, bias, zp_dev, False


def padded_input_fits(plain_bytes: int, padded_bytes: int) -> bool:
    """Whether the wgmma GEMM's padded copy of the input is worth making: padding, strides and
    dilations may ask for a frame far larger than the image (a tiny input with a huge start
    pad); the mma.sync GEMM checks each tap instead and needs no copy."""
    return padded_bytes <= 2 * plain_bytes + _PAD_SLACK


def padded_extent(q: _Problem) -> tuple[int, int]:
    """The padded input's (rows, columns) that the wgmma GEMMs read: the image at (ph, pw),
    every tap of every output inside."""
    hpad = max(q.h + q.ph, (q.oh - 1) * q.sh + (q.r - 1) * q.dh + 1)
    wpad = max(q.wd + q.pw, (q.ow - 1) * q.sw + (q.s - 1) * q.dw + 1)
    return hpad, wpad


def _nhwc_channels(
    shape: tuple[int, ...], strides: tuple[int, ...], cg: int, alignment: int
) -> bool:
    """The input already lies as the GEMM reads it, (N, H, W, C) with C = G * Cg packed, each
    group's channels a multiple of 16 and 16-byte aligned: no transform pass."""
    n, c, h, wd = shape
    sn, sc, sh, sw = strides
    return (
        cg % 16 == 0
        and sc == 1
        and (wd == 1 or sw == c)
        and (h == 1 or sh == wd * c)
        and (n == 1 or sn == h * wd * c)
        and alignment >= 16
    )


def _nhwc_pixels(
    shape: tuple[int, ...], strides: tuple[int, ...], cg: int, alignment: int
) -> int | None:
    """The stride between pixels where the shifted-window GEMM can read the input where it lies
    as (N, H, W, C): each pixel's channels consecutive, each group's a whole number of 16-byte
    blocks on 16 bytes, the rows of pixels packed (W pixel strides apart); else None."""
    n, _, h, wd = shape
    sn, sc, sh, sw = strides
    pixel = sw if wd > 1 else sh if h > 1 else 16  # (one pixel: any stride)
    if (
        sc == 1
        and cg % 16 == 0
        and pixel % 16 == 0
        and (h == 1 or sh == wd * pixel)
        and (n == 1 or sn % 16 == 0)
        and alignment >= 16
    ):
        return pixel
    return None


@dataclass(frozen=True)
class _GemmPlan:
    """Everything a tensor-core call does but the data: the layouts, the launches and their
    scalar arguments. Worked out once per geometry (the call's host time is otherwise mostly
    this arithmetic and the argument packing)."""

    kernel: Kernel  # the GEMM that runs (a padded frame too large falls back to mma.sync)
    cgp: int  # channels per group, padded to 16
    kp: int  # the GEMM's K: R * S * Cgp
    xn_shape: tuple[int, int, int, int] | None  # the transformed input; None: read in place
    prep_x: Launch | None
    prep_args: tuple[Any, ...]  # after (x, xn); its last blocks fill the z_x frame
    gemm: Launch
    gemm_args: tuple[Any, ...]  # after (filter, input, zero points, bias, out)
    filter_layout: tuple[int, int]  # the prepared filter's (see `_prepared_filter`)
    zero_out: bool  # the GEMM adds into the output (K split): zero it first
    prep_w: Launch  # the filter prep alone
    prep_w_args: tuple[Any, ...]  # after (filter, zero points, prepared filter, constants)
    prep_xw: Launch | None  # both preps in one launch (where the input is transformed)
    prep_xw_args: tuple[Any, ...]  # after prep_x's, the sizes, and prep_w's four arrays

    @functools.cached_property
    def gemm_dependent(self) -> DependentLaunch | None:
        """The GEMM's launch as a programmatic dependent, where the kernel allows it: the
        shifted-window GEMM reads nothing but its prepared filter before the grid ahead of it
        completes (not a field: plans compare by their fields)."""
        if self.kernel not in _SHIFT_KERNELS:
            return None
        return DependentLaunch(self.gemm, self.gemm_args, arrays=_GEMM_ARRAYS)

    @functools.cached_property
    def gemm_after_prep(self) -> DependentLaunch | None:
        """The GEMM's launch as a programmatic dependent of the call's own filter prep, where
        it reads its input where it lies: it gathers its first tile's input (written before the
        prep began) while the prep runs, and waits for the prep before its filter stages (its
        last scalar argument, `input_first`, set)."""
        if self.kernel != "wgmma_shift_gather":
            return None
        return DependentLaunch(self.gemm, (*self.gemm_args[:-1], np.int32(1)), arrays=_GEMM_ARRAYS)


# the GEMMs' leading arguments: filter, input, zero points, bias, out
_GEMM_ARRAYS = 5


def _preps(
    q: _Problem,
    cgp: int,
    kp: int,
    layout: tuple[int, int],
    w_dtype: str,
    prep_x: Launch | None,
    vec: int,
    beside: Launch | None = None,
) -> tuple[Launch, tuple[Any, ...], Launch | None, tuple[Any, ...]]:
    """The filter prep's launch and scalar arguments (but the filter's strides), alone and
    together with the input prep (whose grid gains z-slices of one filter row per block).

    `beside`: the GEMM, launched as the prep's dependent, starts under it (it reads its input
    before it waits for the prep) where the SMs' registers and shared memory hold both: the
    prep's blocks are then small (a few of them fit beside a GEMM CTA of 224 registers a
    thread; the variants that keep all their registers share no SM) and stage no row where that
    would leave no room for one beside the GEMM's CTAs. Every launch of the prep asks for the
    SM's shared memory as the GEMM's configuration (the carveout: an SM set up for a small
    block must drain before it takes the GEMM's large one)."""
    bm, tiles_m = layout
    # the row staged in shared memory where it fits the default limit (and the room beside)
    row = q.cg * q.r * q.s
    room = _PREP_W_STAGED
    if beside is not None:
        ctas = _SHIFT_CTAS_PER_SM[beside.block[0]]
        taken = ctas * (beside.shared_mem + _SHIFT_STATIC_BYTES + _SMEM_RESERVED_PER_CTA)
        room = min(room, _SMEM_SM - taken - _PREP_W_STATIC_BYTES - _SMEM_RESERVED_PER_CTA)
    staged = row if row <= room else 0
    prep_w = launch(
        _PREP_SOURCE, "conv_int_prep_w", np.dtype(w_dtype), grid=(q.m, 1, 1),
        block=(_PREP_W_THREADS_BESIDE if beside else 256, 1, 1), shared_mem=staged,
    )  # fmt: skip
    prep_w.kernel.preferred_shared_memory_carveout = 100
    sizes = (q.cg, q.s, cgp, kp, q.zx, q.mg, bm, tiles_m, staged)
    if prep_x is None:
        return prep_w, tuple(np.int32(v) for v in sizes), None, ()
    bx, by, bz = prep_x.grid
    slices = bz - (-q.m // (bx * by))
    if slices > GRID_YZ_LIMIT:  # separate launches
        return prep_w, tuple(np.int32(v) for v in sizes), None, ()
    # every block of the launch holds the staged row: only small ones, so that the input
    # prep's blocks still fit eight to an SM
    staged = row if row <= _PREP_XW_STAGED else 0
    prep_xw = launch(
        _PREP_SOURCE, "conv_int_prep_xw", vec, np.dtype(w_dtype),
        grid=(bx, by, slices), block=(256, 1, 1), shared_mem=staged,
    )  # fmt: skip
    sizes_xw = (q.s, kp, q.zx, q.mg, bm, tiles_m, staged)
    return prep_w, tuple(np.int32(v) for v in sizes), prep_xw, tuple(np.int32(v) for v in sizes_xw)


def tensor_core(
    x: Any,
    w: Any,
    out: Any,
    q: _Problem,
    kernel: Kernel,
    tile: tuple[int, int] | None,
    filter_cache: MutableMapping[Hashable, Any] | None = None,
    shift: tuple[int, int, int] | bool = True,
    gather: bool | None = None,
    split: int | None = None,
    shared_pads: bool | None = None,
    tune: bool = True,
    tma: TmaTile | None = None,
) -> Kernel:
    """Prepare the filter and (unless it already lies as (N, H, W, G*Cgp)) the input, then run
    the GEMM into ``out`` (N, M, OH, OW) int32; says which GEMM ran (a padded input far larger
    than the image takes mma.sync). `filter_cache`: where a filter that stays the same from call
    to call (a registered operator's constant) keeps its prepared form. `shift`: whether the
    wgmma GEMM may take its shifted-window form where the shape allows (a tuple forces that
    form's (warpgroups along M, along N, pixels per warpgroup)). `gather`: whether that form
    reads the input where it lies (NCHW planes of H * W consecutive bytes, or (N, H, W, C)
    pixels, see `_nhwc_pixels`) instead of a transformed copy: None, where it expects that to be
    faster; True, wherever the layout allows; False, never. `split`: that form's K splits (None:
    as planned; more than its 32-channel chunks: the tap-by-tap GEMM). `shared_pads`: whether
    that form, reading the input where it lies, numbers its virtual pixels with the pads shared
    by neighbouring rows and images (see `_virtual_grid`): None, where its model expects that to
    be faster. `tune`: with a `filter_cache` and nothing forced, the shifted-window GEMM's plans
    and the TMA-fed kernel's tiles (where it takes the shape) are timed on the first call of
    each shape and the fastest kept (see `_tuned`). `tma`: the TMA-fed kernel runs with
    this tile (ValueError where it does not take the shape or the tile does not fit; needs
    `kernel` "wgmma")."""
    import cupy

    key = (
        cupy.cuda.Device().id,
        q.geometry(),
        bool(q.w_zp.any()),
        x.shape,
        x.strides,
        x.dtype.char,
        w.dtype.char,
        next(a for a in (16, 4, 1) if x.data.ptr % a == 0),
        kernel,
    )
    if tma is not None:
        if kernel != "wgmma":
            raise ValueError("the TMA-fed kernel needs a GPU of compute capability 9.0")
        forced = _tma_plan(key, tma)
        _run(forced, x, w, out, q, filter_cache)
        return forced.kernel
    planned = _plan(*key, tile, shift, gather, split, shared_pads)
    plan: _GemmPlan | TmaPlan = planned
    if (
        tune
        and filter_cache is not None
        and (tile, shift, gather, split, shared_pads) == (None, True, None, None, None)
        and planned.kernel in _SHIFT_KERNELS
    ):
        plan = _tuned(key, planned, filter_cache, lambda p: _plan_ms(p, x, w, out, q, filter_cache))
    _run(plan, x, w, out, q, filter_cache)
    return plan.kernel


def _run(
    plan: _GemmPlan | TmaPlan,
    x: Any,
    w: Any,
    out: Any,
    q: _Problem,
    filter_cache: MutableMapping[Hashable, Any] | None,
) -> None:
    """One call of `plan`: the preparations it needs, then its GEMM into ``out``."""
    import cupy

    if isinstance(plan, TmaPlan):
        plan.run(x, w, out, q.w_zp, filter_cache)
        return
    if plan.zero_out:  # first: the GEMM may start under the launch just before it
        stream = cupy.cuda.get_current_stream().ptr
        cupy.cuda.runtime.memsetAsync(out.data.ptr, 0, out.nbytes, stream)
    if plan.xn_shape is None:
        wp, bias, zp_dev, kept = _prepared_filter(w, q, plan, filter_cache)
        xn = x
    else:
        xn = cupy.empty(plan.xn_shape, dtype=cupy.uint8)
        wp, bias, zp_dev, kept = _prepared_filter(w, q, plan, filter_cache, x, xn)
    arrays = (wp, xn, zp_dev, bias, out)
    # With a kept filter (all a dependent reads early) the GEMM may start under the end of the
    # grid ahead of it; else, reading its input where it lies, under its filter prep.
    dependent = plan.gemm_dependent if kept else plan.gemm_after_prep
    if dependent is None or not dependent(*arrays):
        plan.gemm(*arrays, *plan.gemm_args)


# A kept choice: the forced (tile, input read in place, K splits, pads shared) of `_plan` (tile
# False: the tap-by-tap GEMM), or the TMA-fed kernel's tile; None: the model's.
_Choice = tuple[tuple[int, int, int] | bool, bool | None, int | None, bool | None] | TmaTile | None


def _tuned(
    key: tuple[Any, ...],
    planned: _GemmPlan,
    cache: MutableMapping[Hashable, Any],
    time_ms: Callable[[_GemmPlan | TmaPlan], float],
) -> _GemmPlan | TmaPlan:
    """The plan a registered operator keeps for the shape of `key` (`key` less the input's
    zero point, the last of its geometry): on its first call with the shape, the
    shifted-window GEMM's plans for it (`_shift_candidates`) are run and timed by `time_ms`
    (for `_TUNE_SECONDS` of timing, then the fastest few again: `fastest`), and the fastest
    one's choice is kept in `cache` with the registration. A registration keeps
    `_TUNED_SHAPES` shapes; past them, and where no other plan exists, `planned` (the model's)
    runs. A plan that cannot get its memory is passed over. Every plan computes the same exact
    sums: the choice changes the time only."""
    import cupy

    shape = (key[0], key[1][:-1], *key[2:])
    tuned = cache.setdefault("tuned", {})
    if shape not in tuned:
        if len(tuned) >= _TUNED_SHAPES:
            return planned
        choice = fastest(
            _shift_candidates(key, planned), time_ms, _TUNE_SECONDS,
            finalists=_TUNE_FINALISTS, rounds=_TUNE_ROUNDS,
            passed_over=(cupy.cuda.memory.OutOfMemoryError,),
        )  # fmt: skip
        tuned.setdefault(shape, choice)
    kept: _Choice = tuned[shape]
    if isinstance(kept, TmaTile):
        return _tma_plan(key, kept)
    return planned if kept is None else _plan(*key, None, *kept)


def _tma_plan(key: tuple[Any, ...], tile: TmaTile) -> TmaPlan:
    """The TMA-fed kernel's plan of `tile` for `key` (see `tensor_core`)."""
    device, geometry, zw, x_shape, x_strides, x_dtype, w_dtype, alignment = key[:8]
    return tma_plan(geometry, zw, x_shape, x_strides, x_dtype, w_dtype, tile, alignment, device)


def _shift_candidates(
    key: tuple[Any, ...], planned: _GemmPlan
) -> Iterator[tuple[_Choice, _GemmPlan | TmaPlan]]:
    """`planned` (choice None), the TMA-fed kernel's tiles for the shape (where it takes it:
    `tma_tiles`, best first) and, made one at a time, every other plan
    of the shifted-window GEMM for `key` with its choice: each of its tiles, reading the input where
    it lies (where the planes allow) or transformed, with K unsplit or split over 2 to
    `_SHIFT_MAX_SPLITS` CTAs (at most one per channel chunk), where the tile's stages fit shared
    memory, the input read in place with its pads shared or not; for strides other than 1, the
    tap-by-tap GEMM too."""
    from .convolution_integer import _Problem  # that module imports this one

    seen = [planned]
    yield None, planned
    q = _Problem.from_geometry(key[1])
    if key[-1] == "wgmma":
        for tile in tma_tiles(q, key[3], key[4], key[7], key[0], zw=key[2]):
            yield tile, _tma_plan(key, tile)
    if (q.sh, q.sw) != (1, 1):
        tap_by_tap = (False, None, None, None)
        plan = _plan(*key, None, *tap_by_tap)
        if plan not in seen:
            seen.append(plan)
            yield tap_by_tap, plan
    for wm, wn, bn, *_ in SHIFT_TILES:
        for gather, shared in ((True, False), (True, True), (False, False)):
            for split in range(1, _SHIFT_MAX_SPLITS + 1):
                choice = ((wm, wn, bn), gather, split, shared)
                plan = _plan(*key, None, *choice)
                wanted = "wgmma_shift_gather" if gather else "wgmma_shift"
                if plan.kernel == wanted and plan not in seen:
                    seen.append(plan)
                    yield choice, plan


def _plan_ms(
    plan: _GemmPlan | TmaPlan,
    x: Any,
    w: Any,
    out: Any,
    q: _Problem,
    filter_cache: MutableMapping[Hashable, Any] | None,
) -> float:
    """GPU milliseconds per call of `plan`: one call untimed (its filter layout prepared, its
    buffers allocated, the caches warm), then the fastest of `gpu_ms`'s groups of `_TUNE_RUNS`
    calls."""

    def run() -> None:
        _run(plan, x, w, out, q, filter_cache)

    run()
    return gpu_ms(run, _TUNE_RUNS)


# (a registration's timing makes ~100 plans a shape, for up to `_TUNED_SHAPES` shapes: room
# for them without evicting the plans calls run)
@functools.lru_cache(maxsize=2048)
def _plan(
    device: int,  # the compiled kernels and the SM count are the current device's
    geometry: tuple[int, ...],
    zw_any: bool,
    x_shape: tuple[int, ...],
    x_strides: tuple[int, ...],
    x_dtype: str,
    w_dtype: str,
    alignment: int,  # of the input's address: 16, 4 or 1
    kernel: Kernel,
    tile: tuple[int, int] | None,
    shift: tuple[int, int, int] | bool,
    gather: bool | None,
    split: int | None,
    shared_pads: bool | None,
) -> _GemmPlan:
    from .convolution_integer import _Problem  # that module imports this one

    q = _Problem.from_geometry(geometry)
    cgp = -(-q.cg // 16) * 16
    slots = q.g * cgp
    kp = q.r * q.s * cgp
    zx_byte = q.zx & 0xFF

    n, h, wd = q.n, q.h, q.wd
    # The wgmma GEMM reads an input padded with z_x wide enough for every tap (no bounds
    # checks in its loads); the mma.sync one checks each tap and takes the image as it is.
    ph, pw, hpad, wpad = 0, 0, h, wd
    if kernel == "wgmma":
        ph, pw = q.ph, q.pw
        hpad, wpad = padded_extent(q)
        if not padded_input_fits(n * h * wd * slots, n * hpad * wpad * slots):
            args = (x_shape, x_strides, x_dtype, w_dtype, alignment, "mma_sync", None, False)
            return _plan(device, geometry, zw_any, *args, False, None, None)  # its own tile
    plane = plane_alignment(x_shape, x_strides, alignment)
    shifted = kernel == "wgmma" and tile is None and shift is not False
    # the shifted-window GEMM on the transformed input, where the shape allows it
    staged = (
        _shift_plan(q, cgp, slots, hpad, wpad, zw_any, w_dtype, x_dtype, shift, None, split, False)
        if shifted
        else None
    )
    # the input already lies as the transformed input would (no frame, (N, H, W, C) packed)
    lies_transformed = (hpad, wpad) == (h, wd) and _nhwc_channels(
        x_shape, x_strides, q.cg, alignment
    )
    pixel_stride = _nhwc_pixels(x_shape, x_strides, q.cg, alignment)
    planes_in_place = contiguous_planes(x_shape, x_strides)
    if shifted and gather is not False and (planes_in_place or pixel_stride is not None):
        # the input read where it lies: its geometry instead of the transform; NCHW planes
        # (their C stride), else (N, H, W, C) pixels (their stride)
        sn, sc = x_strides[:2]
        sn = sn if n > 1 else 0  # a lone image's stride is arbitrary: not part of any address
        if not planes_in_place and pixel_stride is not None:
            sc = pixel_stride
        # the bytes the view spans, from its first element's (no load leaves them): from the
        # lowest address its negative strides reach, its extent on
        lo = sum(min(0, st * (d - 1)) for d, st in zip(x_shape, x_strides, strict=True))
        hi = lo + buffer_extent(x_shape, x_strides)
        zx4 = zx_byte * 0x01010101
        where = (h, wd, ph, pw, q.cg, zx4, sn, sc, lo, hi, not planes_in_place)
        shape = (q, cgp, slots, hpad, wpad, zw_any, w_dtype, x_dtype, shift, where, split)
        resident = _shift_plan(*shape, shared_pads is True)
        if shared_pads is None:  # the pads shared where the model expects fewer clocks
            shared = _shift_plan(*shape, True)
            if shared is not None and (resident is None or shared[4] < resident[4]):
                resident = shared
        # where keeping the run resident leaves only smaller tiles or forced splits, the
        # transformed input may be faster still: unless forced, take the one the model
        # expects to be faster, the transform pass (the input read, its copy written) counted
        # where there is one (not for (N, H, W, C) pixels that need no frame)
        transform = (n * h * wd * q.c + n * hpad * wpad * slots) / _DRAM_BYTES_PER_CLOCK
        if lies_transformed:
            transform = 0.0
        if resident is not None and (
            gather or staged is None or resident[4] <= staged[4] + transform
        ):
            run_gemm, run_args, layout, zero, _ = resident
            prep_w, prep_w_args, _, _ = _preps(q, cgp, kp, layout, w_dtype, None, 0, run_gemm)
            return _GemmPlan(
                "wgmma_shift_gather", cgp, kp, None, None, (), run_gemm, run_args, layout, zero,
                prep_w, prep_w_args, None, (),
            )  # fmt: skip
    xn_shape: tuple[int, int, int, int] | None = None
    prep_x = None
    prep_args: tuple[Any, ...] = ()
    vec = 0
    if not lies_transformed:
        xn_shape = (n, hpad, wpad, slots)  # padded channels = z_x
        # 16-byte reads along each channel plane when it is contiguous and 16-byte aligned,
        # four 4-byte ones when it is 4-byte aligned, else byte gathers.
        vec = plane if contiguous_planes(x_shape, x_strides) and plane >= 4 else 0
        # Blocks of 64 image pixels, then blocks of 64 cells of the z_x frame around them.
        blocks = math.ceil(h * wd / 64) + math.ceil((hpad * wpad - h * wd) / 64)
        prep_x = launch(
            _PREP_SOURCE, "conv_int_prep_x", vec, grid=(blocks, math.ceil(slots / 64), n)
        )
        prep_args = (
            *(np.int32(v) for v in (h, wd, q.cg, cgp, slots, hpad, wpad, ph, pw)),
            np.uint32(zx_byte),
            *map(np.int64, x_strides),
        )

    if staged is not None:
        shift_gemm, shift_args, layout, zero, _ = staged
        prep_w, prep_w_args, prep_xw, prep_xw_args = _preps(
            q, cgp, kp, layout, w_dtype, prep_x, vec
        )
        return _GemmPlan(
            "wgmma_shift", cgp, kp, xn_shape, prep_x, prep_args, shift_gemm, shift_args, layout,
            zero, prep_w, prep_w_args, prep_xw, prep_xw_args,
        )  # fmt: skip
    pixels = n * q.oh * q.ow
    tiles = WGMMA_TILES if kernel == "wgmma" else MMA_SYNC_TILES
    if tile is None:
        bm, bn, stages = _pick_tile(tiles, q.mg, pixels, q.g)
    else:
        bm, bn = tile
        found = [t[2] for t in tiles if t[:2] == tile]
        if not found:
            raise ValueError(f"tile {tile} is not one of {kernel}'s {[t[:2] for t in tiles]}")
        stages = found[0]
    grid = (math.ceil(pixels / bn), math.ceil(q.mg / bm), q.g)
    tail = (q.m, q.mg, cgp, slots, kp, pixels, q.oh * q.ow)
    template = (np.dtype(w_dtype), np.dtype(x_dtype), bm, bn, stages, zw_any)
    if kernel == "wgmma":
        # + 1024: the stages are aligned to 1024 bytes; + BN * 12: pixel sums and offsets
        body = max(stages * (bm + bn) * 64, bm * (bn + 4) * 4)  # stages, or the staging tile
        smem = body + 1024 + bn * 12
        gemm = launch(
            SM90A_SOURCE,
            "conv_int_wgmma",
            *template,
            grid=grid,
            block=(2 * bm, 1, 1),
            shared_mem=smem,
            options=SM90A_OPTIONS,
        )
        ints: tuple[int, ...] = (hpad, wpad, q.ow, q.s, q.sh, q.sw, q.dh, q.dw)
        gemm_args: tuple[Any, ...] = tuple(np.int32(v) for v in (*ints, *tail))
    else:
        smem = stages * (bm + bn) * 64
        gemm = launch(
            _SOURCE, "conv_int_igemm", *template, grid=grid, block=(128, 1, 1), shared_mem=smem
        )
        ints = (h, wd, q.oh, q.ow, q.r, q.s, q.sh, q.sw, q.dh, q.dw, q.ph, q.pw)
        zx_pattern = np.uint32(zx_byte * 0x01010101)
        gemm_args = (*(np.int32(v) for v in (*ints, *tail)), zx_pattern)
    preps = _preps(q, cgp, kp, (0, 0), w_dtype, prep_x, vec)
    return _GemmPlan(
        kernel, cgp, kp, xn_shape, prep_x, prep_args, gemm, gemm_args, (0, 0), False, *preps
    )


def _shift_plan(
    q: _Problem,
    cgp: int,
    slots: int,
    hpad: int,
    wpad: int,
    zw_any: bool,
    w_dtype: str,
    x_dtype: str,
    shift: tuple[int, int, int] | bool,
    where: tuple[int, ...] | None,
    split: int | None,
    shared_pads: bool,
) -> tuple[Launch, tuple[Any, ...], tuple[int, int], bool, float] | None:
    """The shifted-window GEMM's launch, scalar arguments, filter layout, whether it adds into
    a zeroed output (K split over CTAs) and its modelled clocks, or None where the shape is not
    its (other than 9 taps, channels per group not a multiple of 32, strides other than 1 or,
    reading the input where it lies, 2, more than `_SHIFT_MAX_VIRTUAL` virtual pixels per output
    pixel, a run of input pixels too long for shared memory, a forced `split` beyond its channel
    chunks). Its virtual pixels are the padded input's (see `_virtual_grid`), those outside the
    output computed and dropped. `where`: the input read where it lies, (H, W, ph, pw, Cg,
    z_x in each byte of a word, N and C strides, the bytes it spans before and after its first
    element, and whether it lies as (N, H, W, C), the C stride then its pixels'); each CTA then
    keeps its tile's run (its split's channels) in shared memory, and `shared_pads` says
    whether its virtual pixels share the pads."""
    if shift is not True and shift not in [t[:3] for t in SHIFT_TILES]:
        raise ValueError(f"shifted tile {shift} is not one of {[t[:3] for t in SHIFT_TILES]}")
    if split is not None and split < 1:
        raise ValueError(f"split_k {split} is not a positive number of K splits")
    if q.r * q.s != _SHIFT_TAPS or cgp % 32:
        return None
    if (q.sh, q.sw) != (1, 1) and (
        where is None or q.sh not in _SHIFT_STRIDES or q.sw not in _SHIFT_STRIDES
    ):
        return None
    planes = q.sh * q.sw
    nhwc = bool(where and where[10])
    hv, wv = _virtual_grid(q, hpad, wpad, where is not None and shared_pads)
    pixels = q.n * hv * wv
    # the share of the virtual pixels that are outputs, and of the runs' pixels (over every
    # plane) that are the image's, which the gather reads (a transformed run: all of them)
    outputs = q.oh * q.ow / (hv * wv)
    image = q.h * q.wd / (hv * wv * planes) if where else 1.0
    if pixels > _SHIFT_MAX_VIRTUAL * q.n * q.oh * q.ow:
        return None
    # the last tap's shift within its plane, in pixels
    reach = (q.r - 1) * q.dh // q.sh * wv + (q.s - 1) * q.dw // q.sw
    kt = cgp // 32  # channel chunks
    sms = sm_count()
    # (fitted cost, modelled clocks, the configuration): the best unsplit tile, the best split
    Choice = tuple[float, float, tuple[int, int, int, int, int, int, int, int, int, int, int]]
    unsplit: Choice | None = None
    split_best: Choice | None = None
    for wm, wn, bn, most_stages, per_sm, eff in SHIFT_TILES:
        if shift is not True and shift != (wm, wn, bn):
            continue
        if shift is True and eff == 0:  # offered to the timing of the plans alone
            continue
        tn = wn * bn
        run = tn + reach
        if pixels + tn + reach > 2**31 - 1:
            continue
        tiles_m, tiles_n = math.ceil(q.mg / (64 * wm)), math.ceil(pixels / tn)
        tiles = tiles_m * tiles_n * q.g
        for splits in [split] if split else range(1, min(kt, _SHIFT_MAX_SPLITS) + 1):
            if splits > kt:
                continue
            # stages (the filter's chunk, and the run's unless it is resident), the resident
            # run (the split's chunks, each plane's), then per column an offset and a sum, each
            # warp's 16 x 40 output block, and per row of each plane's run a sum, and room to
            # align them; with phase planes, as many stages as fit
            stage = _SHIFT_TAPS * 64 * wm * 32 + (0 if where else run * 32)
            resident = -(-kt // splits) * run * 32 * planes if where else 0
            rest = resident + tn * 12 + 4 * wm * wn * _SHIFT_EPI_BYTES + run * 4 * planes
            rest += _SHIFT_ALIGN
            limit = (
                min(_SMEM_CTA, _SMEM_SM // per_sm - _SMEM_RESERVED_PER_CTA) - _SHIFT_STATIC_BYTES
            )
            fewest = most_stages if planes == 1 else _SHIFT_MIN_STAGES
            stages = min(most_stages, (limit - rest) // stage)
            if stages < fewest:
                continue
            smem = stages * stage + rest
            # planes not on words, lying back to back, whole 16-channel blocks: room past the
            # rest (where it costs no stage) for an image's channels of the split, copied as
            # they lie (the gather then reads its items' words from there)
            hw = where[0] * where[1] if where else 0
            if planes == 1 and hw % 4 and q.cg % 16 == 0 and where and not nhwc and where[7] == hw:
                staging = 32 * -(-kt // splits) * hw + 32
                smem += staging if smem + staging <= limit else 0
            # K split as a cluster: the sums a CTA receives take its run's bytes (and more where
            # they outgrow them); 0 where they do not fit beside the room above (on 7 x 7
            # planes its gather saved more than the cluster's exchange does over atomic adds)
            # or the tile is too wide
            cluster_smem = 0
            if splits > 1 and bn <= _CLUSTER_MAX_PIXELS:
                received = (splits - 1) * -(-(bn // 32) // splits) * 4 * 128 * wm * wn * 16
                cluster_smem = smem - resident + max(resident, received)
                cluster_smem = cluster_smem if cluster_smem <= limit else 0
            # waves of CTAs, times the CTAs sharing an SM, times a tile's work: as fitted to
            # the unsplit tiles' timings, and as modelled
            ctas = tiles * splits
            waves = math.ceil(ctas / (sms * per_sm)) * min(per_sm, math.ceil(ctas / sms))
            k = _SHIFT_TAPS * cgp / splits  # the split's K, bytes a row
            mma = 64 * wm * tn * k / _TENSOR_MACS_PER_CLOCK
            loads = (64 * wm * k + run * planes * image * cgp / splits) / _L2_BYTES_PER_CLOCK
            stores = 64 * wm * tn * outputs * 4 / _L2_BYTES_PER_CLOCK
            clocks = waves * (max(mma, loads) + stores + _TILE_FIXED_CLOCKS)
            config = (wm, wn, bn, stages, per_sm, run, smem, tiles_m, tiles_n, splits, cluster_smem)
            # (a timed-only tile, forced, competes with itself alone: any weight)
            choice = (waves * (64 * wm * tn / (eff or 1.0) + _TILE_FIXED_COST), clocks, config)
            if splits == 1 and (unsplit is None or choice[0] < unsplit[0]):
                unsplit = choice
            elif splits > 1 and (split_best is None or clocks < split_best[1]):
                split_best = choice
    best = unsplit
    if split_best is not None and (unsplit is None or split_best[1] < _SPLIT_GAIN * unsplit[1]):
        best = split_best
    if best is None:
        return None
    wm, wn, bn, stages, per_sm, run, smem, tiles_m, tiles_n, splits, cluster_smem = best[2]
    tiles = tiles_m * tiles_n * q.g * splits
    # the input read where it lies: the items a gather thread loads at a time. 3 only on one
    # warpgroup's 224-pixel tile over planes of whole words (unit strides), where it saves a
    # round of loads (and, without z_w, a spill that 2 has under the register cap): measured,
    # 3 lost on phase planes and on 64-pixel tiles of 14 x 14 planes, and would spill on the
    # 256-pixel tile, though it saved a round there. (Planes off words take other loads: 3 is
    # then held but unused.)
    # (N, H, W, C) pixels: 1, one 16-byte copy a pixel's block.
    gather = 0
    if nhwc:
        gather = 1
    elif where:
        words = planes == 1 and q.h * q.wd % 4 == 0 and (wm, wn, bn) == (1, 1, 224)
        gather = _gather_items(run * image, -(-kt // splits), 128 * wm * wn) if words else 2
    template = (
        np.dtype(w_dtype), np.dtype(x_dtype), wm, wn, bn, stages, zw_any, _SHIFT_TAPS, gather,
        q.sh, q.sw,
    )  # fmt: skip

    def gemm_launch(cluster: int, shared_mem: int) -> Launch:
        return launch(
            SM90A_SOURCE,
            "conv_int_wgmma_shift",
            *template,
            cluster,
            grid=(min(tiles, _shift_grid(sms * per_sm, cluster)), 1, 1),
            block=(128 * wm * wn, 1, 1),
            shared_mem=shared_mem,
            options=SM90A_OPTIONS,
        )

    # K split: the tile's splits as a cluster where its shared memory allows and every cluster
    # of the grid fits the GPU at once; else the splits' sums meet in the zeroed output
    gemm = None
    if cluster_smem:
        gemm = gemm_launch(splits, cluster_smem)
        if max_active_clusters(gemm) * splits < gemm.grid[0]:
            gemm = None
    zero_out = splits > 1 and gemm is None
    gemm = gemm or gemm_launch(1, smem)
    ints = (q.n, hv, wv, q.oh, q.ow, q.s, q.dh, q.dw, q.m, q.mg, cgp, slots, run)
    h, wd, ph, pw, cg, zx4, sn, sc, lo, hi, _ = where or (0,) * 11
    args = (
        *(np.int32(v) for v in (*ints, tiles_m, tiles_n, tiles, h, wd, ph, pw, cg)),
        np.uint32(zx4), *(np.int64(v) for v in (sn, sc, lo, hi)), np.int32(splits),
        np.int32(_nhwc_gather_sets(planes) if nhwc else 1),
        np.int32(0),  # input_first: see `_GemmPlan.gemm_after_prep`
    )  # fmt: skip
    return gemm, args, (64 * wm, tiles_m), zero_out, best[1]


def _nhwc_gather_sets(planes: int) -> int:
    """The sets of channel chunks in which the shifted-window GEMM copies a tile's run of (N, H,
    W, C) pixels, the MMAs on each set's chunks waiting for that set's copies alone: two on
    phase planes (strides of 2: runs of two or four planes, the longest gathers), one (all at once)
    elsewhere. Measured (H100, batches 32 and 8, registered calls): two sets took 0.5-0.7 µs off
    the stride-2 layer at either batch (one set a chunk: 1.9 µs at batch 32, 0.6 µs more at
    batch 8); on unit strides more sets cost 0.1-0.5 µs (two) to 1-7 µs (a set a chunk), their
    narrower copies taking longer to issue than the MMAs they overlap."""
    return 2 if planes > 1 else 1


def _gather_items(pixels: float, chunks: int, threads: int) -> int:
    """The items (16 channels x 4 pixels) each thread of the shifted-window GEMM's gather loads
    at a time (its GI), for a run holding about `pixels` of an image's pixels in `chunks` of 32
    channels: 3 where that takes one round trip fewer than 2 (more registers held through the
    gather, which cost where they save no round)."""
    items = math.ceil(pixels / 4) * 2 * chunks

    def rounds(at_a_time: int) -> int:
        return -(-items // (at_a_time * threads))

    return 3 if rounds(3) < rounds(2) else 2


def _shift_grid(resident: int, cluster: int) -> int:
    """The shifted-window GEMM's persistent grid where `resident` CTAs fit the GPU at once: a
    whole number of clusters (a CTA's rank in its cluster is its tiles' K split), at least one."""
    return max(cluster, resident // cluster * cluster)


def _virtual_grid(q: _Problem, hpad: int, wpad: int, shared_pads: bool) -> tuple[int, int]:
    """The shifted-window GEMM's virtual pixels per image, (rows, columns): output (oh, ow) is
    virtual pixel (oh, ow) of its image's grid, and tap (r, s) adds one shift to it.

    The padded input's (Hp, Wp); or (`shared_pads`, only where the input is read where it lies:
    each CTA writes its run, z_x wherever no image pixel lies) neighbouring images and rows
    share their pads: H + max(start, end pad) rows (and as many as the output has, at least),
    because a tap that reaches past an image's last padded row lands in the next one's first
    rows, which are start padding where the start pad is the larger, and end padding is just
    as z_x; so with columns. 7 x 7 images padded by one: 8 x 8 virtual pixels instead of 9 x 9.
    Strides of 2 (along either axis or both): each of the padded input's phase planes, ceil(Hp
    / SH) x ceil(Wp / SW) (no sharing)."""
    if (q.sh, q.sw) != (1, 1):
        return -(-hpad // q.sh), -(-wpad // q.sw)
    if not shared_pads:
        return hpad, wpad
    rows = max(q.h + max(q.ph, hpad - q.h - q.ph), q.oh)
    cols = max(q.wd + max(q.pw, wpad - q.wd - q.pw), q.ow)
    return rows, cols
