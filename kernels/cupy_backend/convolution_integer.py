"""CONVOLUTION_INTEGER on CUDA (SEMANTICS.md §6): int8 tensor-core implicit GEMM for dense
layers; a pointwise kernel for 1x1 layers (the NCHW input read in place); a grouped kernel for
3x3 groups of 8-32 channels; a band kernel for depthwise and 2-4 channel groups; a shared-memory
CUDA-core kernel for the other narrow shapes (a naive one where its tile does not fit).
Kernels: `kernels/cuda/convolution_integer*.cu`."""

from __future__ import annotations

import math
from collections.abc import Hashable, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import numpy as np

from ..errors import DescriptorError
from ..geometry import Window
from ._common import (
    GRID_YZ_LIMIT,
    INT32_LIMIT,
    byte_value,
    device_zero_points,
    launch,
    sm_count,
    wrap32,
)
from ._convolution_integer_depthwise import DepthwisePlan, depthwise, depthwise_plan
from ._convolution_integer_gemm import gemm_kernel, tensor_core
from ._convolution_integer_grouped import GroupedPlan, grouped, grouped_plan
from ._convolution_integer_pointwise import PointwisePlan, pointwise, pointwise_plan
from ._convolution_integer_tma import TmaTile

__all__ = [
    "GroupedPlan",
    "Options",
    "PointwisePlan",
    "TiledPlan",
    "TmaTile",
    "convolution_integer",
]

_DIRECT_SOURCE = "convolution_integer_direct.cu"  # CUDA-core paths
# Below this many channels per group the 16-byte channel padding wastes more than the tensor
# cores win; those (depthwise, ResNeXt-like narrow groups) take the CUDA-core path.
_MIN_TC_CHANNELS = 8
_MIN_TC_OUTPUTS = 8
# Shared-memory CUDA-core kernel: bytes of shared memory per CTA it may plan for (filter chunk
# + input tile, int32 each); input words per thread in flight (the kernel's TILED_U).
_TILED_SMEM_BUDGET = 32 * 1024
_TILED_U = 4


@dataclass(frozen=True)
class Options:
    """How the launcher picks its kernels; the defaults are the production choice. Tests and
    benchmarks pass others to run a path on shapes it would not get, or to compare variants."""

    # "auto": tensor cores where the shape suits them; "cuda_cores": the shared-memory CUDA-core
    # kernel where its tile fits (else the naive one); "naive": one thread per output.
    path: Literal["auto", "cuda_cores", "naive"] = "auto"
    tile: tuple[int, int] | None = None  # tensor-core tile (BM, BN); None: estimated per shape
    # tensor-core GEMM: "auto" is wgmma on compute capability 9.0, mma.sync elsewhere
    tensor_cores: Literal["auto", "wgmma", "mma_sync"] = "auto"
    outputs_per_thread: int = 4  # CUDA-core kernel (template V)
    images_per_cta: int | None = None  # CUDA-core kernel (NB); None: chosen from the CTA count
    ctas_per_sm: int = 8  # CTAs per SM to aim for when a CTA takes several images
    prefetch: bool = True  # one-chunk CUDA-core tiles load the next image during the arithmetic
    depthwise: bool = True  # "auto" runs depthwise shapes it fits on the band kernel, else tiled
    depthwise_dp4a: bool = True  # band kernel: dp4a tap rows where they apply (else multiply-adds)
    pointwise: bool = True  # "auto" (no forced GEMM or tile) runs 1x1 shapes it fits there
    # the pointwise kernel's form ("ring"; on sm_90 "resident"; on sm_90a "wgmma") and the
    # output-channel chunks (of 64) a CTA of the last two forms takes; None: chosen
    pointwise_form: Literal["ring", "resident", "wgmma"] | None = None
    pointwise_run: int | None = None
    grouped: bool = True  # "auto" (no forced GEMM or tile) runs 3x3 groups of 8-32 channels there
    # wgmma GEMM without a forced tile: its shifted-window form where the shape allows (9 taps,
    # channels per group a multiple of 32, stride 1 or, reading the input in place, 2); a tuple
    # (warpgroups along M, along N, pixels per warpgroup) forces one of its tiles where the
    # shape allows it and the tile's stages fit shared memory (else the tap-by-tap GEMM runs)
    shifted: bool | tuple[int, int, int] = True
    # the shifted-window GEMM reads the input where it lies, not a transformed copy, where its
    # layout allows (NCHW planes of H * W consecutive bytes each, or (N, H, W, C) pixels in
    # packed rows whose groups' channels are 16-byte blocks on 16 bytes): None, where its model
    # expects that to be faster; True, wherever the layout allows; False, never
    gather: bool | None = None
    # the shifted-window GEMM's K (channel chunks of 32) split over this many CTAs whose partial
    # sums add up in the output (None: where the planner expects its tiles to leave SMs idle)
    split_k: int | None = None
    # the shifted-window GEMM reading the input where it lies numbers its virtual pixels with
    # the pads shared by neighbouring rows and images (fewer of them: 8 x 8 for a 7 x 7 image
    # padded by one, not 9 x 9): None, where its model expects that to be faster
    shared_pads: bool | None = None
    # a constant filter's calls (`filter_cache` given), nothing above forced: the shifted-window
    # GEMM's plans and the TMA-fed kernel's tiles are timed on the first call of each shape and
    # the fastest kept
    tune: bool = True
    # the TMA-fed 3x3 kernel with this tile (`_convolution_integer_tma`); ValueError where it
    # does not take the shape or the tile does not fit it
    tma: TmaTile | None = None


_DEFAULT_OPTIONS = Options()


class _Problem(NamedTuple):
    """One call in the 2-D form every kernel takes (1-D maps to H = 1): input (N, C, H, W),
    filter (M, C/G, R, S), G groups, output (OH, OW), strides, dilations, start pads, and the
    zero points (the filter's on the host, one int32 per output channel)."""

    n: int
    c: int
    h: int
    wd: int
    m: int
    cg: int
    r: int
    s: int
    g: int
    oh: int
    ow: int
    sh: int
    sw: int
    dh: int
    dw: int
    ph: int
    pw: int
    zx: int
    w_zp: np.ndarray

    @property
    def mg(self) -> int:
        """Output channels per group."""
        return self.m // self.g

    def geometry(self) -> tuple[int, ...]:
        """Every field but the filter's zero points (the last): what a launch plan may depend
        on, hashable; `_Problem.from_geometry` makes it a problem again."""
        return tuple(self[:-1])

    @classmethod
    def from_geometry(cls, geometry: tuple[int, ...]) -> _Problem:
        """The problem of `geometry`, without the filter's zero points (an empty array)."""
        return cls._make((*geometry, np.zeros(0, np.int32)))

    def cuda_core_ints(self) -> tuple[int, ...]:
        """The scalar arguments both CUDA-core kernels take, in their order."""
        return (
            *(self.m, self.mg, self.cg, self.h, self.wd, self.r, self.s, self.oh, self.ow),
            *(self.sh, self.sw, self.dh, self.dw, self.ph, self.pw, wrap32(self.zx)),
        )


class TiledPlan(NamedTuple):
    """The CUDA-core kernel's tiling: output channels per CTA, outputs per thread, output tile
    and its input extent, channels per shared-memory chunk, threads, tile counts, images per
    CTA, and whether the next image is prefetched."""

    mb: int
    v: int
    th: int
    tw: int
    iht: int
    iwt: int
    channels: int
    threads: int
    tiles_w: int
    tiles: int
    mchunks: int
    images: int
    prefetch: bool


def _tiled_plan(x: Any, q: _Problem, options: Options) -> TiledPlan | None:
    """Tile of the shared-memory CUDA-core kernel, or None where it does not fit (the naive
    kernel then runs)."""
    n, h, wd, cg, mg, g, r, s, oh, ow = q.n, q.h, q.wd, q.cg, q.mg, q.g, q.r, q.s, q.oh, q.ow
    sh, sw, dh, dw = q.sh, q.sw, q.dh, q.dw
    mb = next(v for v in (1, 2, 4) if v >= min(mg, 4))
    v = options.outputs_per_thread if mb <= 2 else 4  # 4 x 8 accumulators would spill
    mchunks = -(-mg // mb)
    tw = ow if ow <= 128 else -(-ow // -(-ow // 128))
    th = -(-oh // -(-oh // max(1, 256 * v // tw)))
    while True:
        iht = (th - 1) * sh + (r - 1) * dh + 1
        iwt = (tw - 1) * sw + (s - 1) * dw + 1
        per_channel = 4 * (iht * iwt + r * s * mb)
        if per_channel + 12 <= _TILED_SMEM_BUDGET:  # 12: the filter's 16-byte round-up
            break
        if th > 1:
            th = -(-th // 2)
        elif tw > 1:
            tw = -(-tw // 2)
        else:
            return None
    cc = min(cg, (_TILED_SMEM_BUDGET - 12) // per_channel)
    tiles_w = -(-ow // tw)
    tiles = -(-oh // th) * tiles_w
    threads = min(256, max(32, -(-th * tw // (v * 32)) * 32))
    too_big = max(tiles, oh * ow, 2 * max(h, wd) * max(sh, sw)) > INT32_LIMIT
    if too_big or g * mchunks > GRID_YZ_LIMIT:
        return None
    ctas = tiles * g * mchunks
    # Images per CTA: the filter, borders and addresses are set up once per CTA, and the next
    # image's loads overlap this one's arithmetic; keep enough CTAs to fill the SMs.
    nb = options.images_per_cta or ctas * n // (sm_count() * options.ctas_per_sm)
    nb = max(1, min(n, nb), -(-n // GRID_YZ_LIMIT))  # grid z
    xs_n = int(x.strides[0])
    words = cg * iht * ((iwt + 3) // 4 + 1)  # input words of a one-chunk tile, at most
    pipe = (
        options.prefetch
        and _wide_rows(x)
        and cc >= cg
        and words <= _TILED_U * 256
        and (nb == 1 or xs_n % 4 == 0)
    )
    if pipe:
        threads = max(threads, -(-words // (_TILED_U * 32)) * 32)  # each thread holds U words
    return TiledPlan(mb, v, th, tw, iht, iwt, cc, threads, tiles_w, tiles, mchunks, nb, pipe)


def _wide_rows(x: Any) -> bool:
    """Rows contiguous along W (4-byte word loads) and one image within 32-bit offsets."""
    _, c, h, wd = (int(v) for v in x.shape)
    _, xs_c, xs_h, xs_w = (int(v) for v in x.strides)
    return xs_w == 1 and (c - 1) * xs_c + (h - 1) * xs_h + wd <= INT32_LIMIT


def convolution_integer(
    x: Any,
    w: Any,
    x_zero_point: int,
    w_zero_point: np.ndarray,
    strides: Sequence[int],
    dilations: Sequence[int],
    start_padding: Sequence[int],
    end_padding: Sequence[int],
    group_count: int,
    options: Options = _DEFAULT_OPTIONS,
    ran: list[TiledPlan | DepthwisePlan | PointwisePlan | GroupedPlan | str] | None = None,
    filter_cache: MutableMapping[Hashable, Any] | None = None,
) -> Any:
    """Integer cross-correlation ``(N, C, *S), (M, C/G, *K) -> (N, M, *O)`` int32 (wraps).

    Parameters are already validated (one entry per spatial dim, 1 or 2 dims); ``x``, ``w`` may
    be any strided CuPy views; ``w_zero_point`` is a host int32 array of shape ``(M,)``.
    Launches on the current CuPy stream and returns a new C-contiguous array. `options` picks
    the kernels; `ran`, when given, gets what ran appended: a CUDA-core, pointwise or grouped
    kernel's plan, or "wgmma", "wgmma_shift", "wgmma_shift_gather", "mma_sync" (the tensor-core
    GEMMs), "naive"
    ("none" for an empty output).
    `filter_cache`, given only where `w` and its zero points are the same on every call (a
    registered operator's constants), keeps the filter's prepared form from call to call.
    """
    import cupy

    window = Window(w.shape[2:], strides, dilations, start_padding, end_padding)
    one_d = x.ndim == 3
    if one_d:  # 1-D maps to 2-D with H = 1
        x, w = x[:, :, None, :], w[:, :, None, :]
        window = window.with_unit_axes(1)
    for field, values in (
        ("Strides", window.strides), ("Dilations", window.dilations),
        ("StartPadding", window.start_padding), ("EndPadding", window.end_padding),
    ):  # fmt: skip
        if max(values) > INT32_LIMIT:
            raise DescriptorError.at(
                (field,), f"{field} must stay below 2^31 on the GPU (its kernels index in 32 bits)"
            )
    n, c, h, wd = (int(v) for v in x.shape)
    m, cg, r, s = (int(v) for v in w.shape)
    oh, ow = window.blocks((h, wd))
    out = cupy.empty((n, m, oh, ow), dtype=cupy.int32)
    what: TiledPlan | DepthwisePlan | PointwisePlan | GroupedPlan | str = "none"
    if out.size:
        w_zp = np.ascontiguousarray(np.broadcast_to(np.asarray(w_zero_point, np.int32), (m,)))
        (sh, sw), (dh, dw), (ph, pw) = window.strides, window.dilations, window.start_padding
        q = _Problem(
            n, c, h, wd, m, cg, r, s, int(group_count), oh, ow, sh, sw, dh, dw, ph, pw,
            int(x_zero_point), w_zp,
        )  # fmt: skip
        use_tc = (
            options.path == "auto"
            and cg >= _MIN_TC_CHANNELS
            and q.mg >= _MIN_TC_OUTPUTS
            and byte_value(q.zx, x.dtype == np.int8)
            and n <= GRID_YZ_LIMIT  # grid z of the input transform
            and max(n * oh * ow, h * wd) <= INT32_LIMIT  # flat pixel index is 32-bit in the GEMM
        )
        plan = band = point = group = None
        # A forced GEMM or tile keeps the GEMM (tests and benchmarks compare them).
        forced = (
            options.tile is not None or options.tensor_cores != "auto" or options.tma is not None
        )
        if options.path == "auto" and options.pointwise and not forced:
            point = pointwise_plan(x, q, options.pointwise_form, options.pointwise_run)
        if options.path == "auto" and options.grouped and not forced and point is None:
            group = grouped_plan(x, q)
        special = point is not None or group is not None
        use_tc = use_tc and not special
        if options.tma is not None and not use_tc:
            raise ValueError("the TMA-fed kernel does not take this shape (a tensor-core one)")
        if not use_tc and not special and options.path == "auto" and options.depthwise:
            band = depthwise_plan(x, q, w.dtype == np.int8, options.depthwise_dp4a)
        if not use_tc and not special and band is None and options.path != "naive":
            plan = _tiled_plan(x, q, options)
        if point is not None:
            pointwise(x, w, out, q, point, filter_cache)
            what = point
        elif group is not None:
            grouped(x, w, out, q, group)
            what = group
        elif use_tc:
            kernel = gemm_kernel(options.tensor_cores)
            what = tensor_core(
                x, w, out, q, kernel, options.tile, filter_cache, options.shifted,
                options.gather, options.split_k, options.shared_pads, options.tune, options.tma,
            )  # fmt: skip
        elif band is not None:
            depthwise(x, w, out, q, band)
            what = band
        elif plan is not None:
            _tiled(x, w, out, q, plan)
            what = plan
        else:
            _direct(x, w, out, q)
            what = "naive"
    if ran is not None:
        ran.append(what)
    return out.reshape(n, m, ow) if one_d else out


def _i32(v: int) -> np.int32:
    return np.int32(v)


def _i64(v: int) -> np.int64:
    return np.int64(v)


def _direct(x: Any, w: Any, out: Any, q: _Problem) -> None:

    total = out.size
    blocks = min(math.ceil(total / 256), 1 << 20)
    kernel = launch(_DIRECT_SOURCE, "conv_int_direct", w.dtype, x.dtype, grid=(blocks, 1, 1))
    zp_dev = device_zero_points(q.w_zp)
    kernel(
        x,
        w,
        zp_dev,
        out,
        _i64(total),
        *(_i32(v) for v in q.cuda_core_ints()),
        *(_i64(v) for v in x.strides),
        *(_i64(v) for v in w.strides),
    )


def _tiled(x: Any, w: Any, out: Any, q: _Problem, plan: TiledPlan) -> None:

    mb, v, th, tw, iht, iwt, cc, threads, tiles_w, tiles, mchunks, nb, pipe = plan
    smem = 4 * (-(-cc * q.r * q.s * mb // 4) * 4 + cc * iht * iwt)
    kernel = launch(
        _DIRECT_SOURCE,
        "conv_int_tiled",
        w.dtype,
        x.dtype,
        mb,
        v,
        _wide_rows(x),
        grid=(tiles, q.g * mchunks, -(-q.n // nb)),
        block=(threads, 1, 1),
        shared_mem=smem,
    )
    zp_dev = device_zero_points(q.w_zp)
    ints = (
        q.n,
        *q.cuda_core_ints(),
        *(th, tw, iht, iwt, cc, tiles_w, mchunks, nb, int(pipe)),
    )
    kernel(
        x,
        w,
        zp_dev,
        out,
        *(_i32(v) for v in ints),
        *(_i64(v) for v in (*x.strides, *w.strides)),
    )
