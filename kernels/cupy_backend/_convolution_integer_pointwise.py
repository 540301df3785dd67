"""CONVOLUTION_INTEGER's pointwise kernel (`kernels/cuda/convolution_integer_pointwise.cu`): a
1x1 window at unit stride with no padding and one group, on an input whose (n, c) planes are
contiguous with 4-byte aligned words. Per image the layer is a GEMM of the filter (M x C) and
the image (C x H*W) as it lies in memory; the kernel transposes the input's bytes in registers
into the tensor cores' fragments, so there is no transform pass, and writes the NCHW int32
output directly. The filter is prepared once into fragment order (kept with a registered
operator's constants)."""

from __future__ import annotations

from collections.abc import Hashable, MutableMapping
from typing import Any, NamedTuple

import numpy as np

from ._common import INT32_LIMIT, launch, wrap32

__all__ = ["PointwisePlan", "pointwise", "pointwise_plan"]

_SOURCE = "convolution_integer_pointwise.cu"
_WARPS = 8  # warps per CTA (the kernel's PW_WARPS)
_M_CHUNK = 64  # output channels a CTA forms (PW_MT m-tiles of 16)
_PIXELS = 256  # pixels of one image a CTA forms (PW_PIXELS)
# PW_SMEM: 4 stages of 32 channel rows, or 32 staged int32 output rows of 256 + 4 pixels
_SMEM = max(4 * 32 * _PIXELS, 32 * (_PIXELS + 4) * 4)
_PER_CHANNEL = -(2**31)  # the kernel's PW_PER_CHANNEL: zero points read per channel


class PointwisePlan(NamedTuple):
    """The pointwise kernel's work: output-channel chunks of 64, 256-pixel tiles per image,
    whether the input's planes take 16-byte copies (else 4-byte ones), and whether some
    filter zero point is not 0 (the kernel's ZW)."""

    mchunks: int
    tiles: int
    vec16: bool
    zw_any: bool


def pointwise_plan(x: Any, q: Any) -> PointwisePlan | None:
    """The pointwise kernel's plan for problem `q` (convolution_integer's _Problem), or None
    where the shape or the input's layout is outside it."""
    n, c, h, wd = (int(v) for v in x.shape)
    xs_n, xs_c, xs_h, xs_w = (int(v) for v in x.strides)
    hw = h * wd
    geometry = (
        (q.r, q.s, q.sh, q.sw, q.ph, q.pw, q.g) == (1, 1, 1, 1, 0, 0, 1)
        and (q.oh, q.ow) == (h, wd)  # no end padding either
    )
    planes = (wd == 1 or xs_w == 1) and (h == 1 or xs_h == wd)  # pixel p at offset p

    def aligned(to: int) -> bool:
        return (
            hw % to == 0
            and xs_c % to == 0
            and (n == 1 or xs_n % to == 0)
            and (x.data.ptr % to == 0)
        )

    if not (geometry and planes and aligned(4)):
        return None
    mchunks = -(-q.m // _M_CHUNK)
    tiles = -(-hw // _PIXELS)
    if n * tiles * mchunks > INT32_LIMIT or max(hw, c) > INT32_LIMIT - _PIXELS:
        return None
    return PointwisePlan(mchunks, tiles, aligned(16), bool(q.w_zp.any()))


def _zero_points(q: Any) -> tuple[bool, int]:
    """Whether the filter's zero points differ by channel, and the one they share (else the
    kernel's per-channel mark)."""
    per_channel = bool((q.w_zp != q.w_zp[0]).any()) or int(q.w_zp[0]) == _PER_CHANNEL
    return per_channel, _PER_CHANNEL if per_channel else int(q.w_zp[0])


def _prepared(
    w: Any, q: Any, plan: PointwisePlan, cache: MutableMapping[Hashable, Any] | None
) -> tuple[Any, Any, Any]:
    """The filter in fragment order, the bias of the zero-point expansion and the per-channel
    zero points on the device (or the output-sized placeholder when they are shared): made
    here, or the registered operator's kept ones for the same filter and zero points. A kept
    entry is never replaced (another thread's kernels may still read it)."""
    import cupy

    key = ("pointwise", w.data.ptr, w.shape, w.strides, str(w.dtype), q.zx, q.w_zp.tobytes())
    hit = cache.get("pointwise") if cache is not None else None
    if hit is not None and hit[0] == key:
        kept: tuple[Any, Any, Any] = hit[1]
        return kept
    ksteps = -(-q.c // 32)
    wf = cupy.empty((plan.mchunks * ksteps * 4 * 32, 4), dtype=cupy.uint32)
    bias = cupy.empty((q.m,), dtype=cupy.int32)
    per_channel, zw_all = _zero_points(q)
    zp_dev = cupy.asarray(q.w_zp) if per_channel else bias  # bias: a placeholder, not read
    prep = launch(
        _SOURCE,
        "conv_int_prep_w_pointwise",
        w.dtype,
        grid=(plan.mchunks * 4, 1, 1),
        block=(_WARPS * 32, 1, 1),
    )
    ints = (q.m, q.c, wrap32(q.zx), zw_all)
    prep(w, zp_dev, wf, bias, *map(np.int32, ints), *map(np.int64, w.strides[:2]))
    prepared = (wf, bias, zp_dev)
    if cache is not None and hit is None:
        # Other calls read it from other streams: complete before it is shared.
        cupy.cuda.get_current_stream().synchronize()
        cache.setdefault("pointwise", (key, prepared))
    return prepared


def pointwise(
    x: Any,
    w: Any,
    out: Any,
    q: Any,
    plan: PointwisePlan,
    cache: MutableMapping[Hashable, Any] | None = None,
) -> None:
    """Launch the pointwise kernel for `q` into `out` (N, M, H, W) int32."""
    wf, bias, zp_dev = _prepared(w, q, plan, cache)
    _, zw_all = _zero_points(q)
    kernel = launch(
        _SOURCE,
        "conv_int_pointwise",
        w.dtype,
        x.dtype,
        plan.zw_any,
        plan.vec16,
        grid=(q.n * plan.tiles * plan.mchunks, 1, 1),
        block=(_WARPS * 32, 1, 1),
        shared_mem=_SMEM,
    )
    ints = (q.m, q.c, q.h * q.wd, plan.mchunks, plan.tiles, zw_all)
    kernel(x, wf, bias, zp_dev, out, *map(np.int32, ints), *map(np.int64, x.strides[:2]))
