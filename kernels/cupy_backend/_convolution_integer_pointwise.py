"""CONVOLUTION_INTEGER's pointwise kernel (`kernels/cuda/convolution_integer_pointwise.cu`): a
1x1 window at unit stride with no padding and one group, on an input whose (n, c) planes are
contiguous with 4-byte aligned words. Per image the layer is a GEMM of the filter (M x C) and
the image (C x H*W) as it lies in memory; the kernel transposes the input's bytes in registers
into the tensor cores' fragments, so there is no transform pass, and writes the NCHW int32
output directly. Each CTA copies its filter rows into shared memory and sums them itself, so a
call prepares nothing where the filter's rows lie as 16-byte multiples; otherwise a padded copy
is made (and kept with a registered operator's constants).

Two forms: a CTA per 64 output channels that streams its input through a ring of stages, and,
on sm_90 where many output channels share each input byte, a resident form whose CTA keeps its
input in shared memory for a run of output-channel chunks and lets each chunk's stores drain
(bulk copies) while the next chunk's MMAs run."""

from __future__ import annotations

from collections.abc import Hashable, MutableMapping
from typing import Any, NamedTuple

import numpy as np

from ._common import (
    INT32_LIMIT,
    compute_capability,
    contiguous_planes,
    device_zero_points,
    launch,
    plane_alignment,
    sm_count,
    wrap32,
    zero_point_argument,
)

__all__ = ["PointwisePlan", "pointwise", "pointwise_plan"]

_SOURCE = "convolution_integer_pointwise.cu"
_WARPS = 8  # warps per CTA (the kernel's PW_WARPS)
_M_CHUNK = 64  # output channels a CTA forms (PW_MT m-tiles of 16)
_PIXELS = 256  # pixels of one image a CTA forms (PW_PIXELS)
# PW_HEAD + PW_BODY: the rows' constants, then 4 stages of 32 channel rows or 32 staged int32
# output rows of 256 + 4 pixels; the filter rows follow.
_SMEM_FIXED = 512 + max(4 * 32 * _PIXELS, 32 * (_PIXELS + 4) * 4)
_SMEM_LIMIT = 227 * 1024  # an sm_90 CTA's shared memory
# The resident form's PWR_STAGED (64 staged output rows); the whole tile's input (32 channel
# rows of 256 bytes a step) and two chunks' filter rows follow.
_RESIDENT_FIXED = 64 * (_PIXELS + 4) * 4


class PointwisePlan(NamedTuple):
    """The pointwise kernel's work: output-channel chunks of 64, 256-pixel tiles per image,
    whether the input's planes take 16-byte copies (else 4-byte ones), whether some filter
    zero point is not 0 (the kernel's ZW), the shared memory a CTA takes, and the chunks a
    resident CTA forms (0: the ring form)."""

    mchunks: int
    tiles: int
    vec16: bool
    zw_any: bool
    smem: int  # bytes of shared memory per CTA
    run: int = 0  # chunks of 64 output channels per CTA of the resident form; 0: the ring form

    @property
    def runs(self) -> int:
        """The resident form's CTAs per tile."""
        return -(-self.mchunks // self.run) if self.run else self.mchunks


def _resident_run(n: int, tiles: int, mchunks: int, forced: int | None) -> int:
    """The resident form's chunks per CTA (0: the ring form): `forced` (tests, benchmarks)
    where given; else, for images of one tile (whose chunks leave as one copy each) and more
    than one chunk, as many as spread the images' chunks over the SMs once."""
    if forced is not None:
        return min(forced, mchunks)
    if tiles > 1 or mchunks < 2:  # a copy per row, or nothing to overlap: the ring form
        return 0
    return min(mchunks, -(-n * mchunks // sm_count()))


def pointwise_plan(x: Any, q: Any, run: int | None = None) -> PointwisePlan | None:
    """The pointwise kernel's plan for problem `q` (convolution_integer's _Problem), or None
    where the shape or the input's layout is outside it. `run`: the resident form's chunks per
    CTA (0: the ring form; None: chosen), honoured where the device and shape allow it."""
    n, c, h, wd = (int(v) for v in x.shape)
    hw = h * wd
    geometry = (
        (q.r, q.s, q.sh, q.sw, q.ph, q.pw, q.g) == (1, 1, 1, 1, 0, 0, 1)
        and (q.oh, q.ow) == (h, wd)  # no end padding either
    )
    if not (geometry and contiguous_planes(x.shape, x.strides)) or c < 1:
        return None
    # The planes' starts and the words within them: 4-byte aligned, 16 for 16-byte copies.
    alignment = min(plane_alignment(x.shape, x.strides, x.data.ptr), hw & -hw)
    if alignment < 4:
        return None
    mchunks = -(-q.m // _M_CHUNK)
    tiles = -(-hw // _PIXELS)
    smem = _SMEM_FIXED + 64 * (-(-c // 32) * 32 + 16)
    if n * tiles * mchunks > INT32_LIMIT or max(hw, c) > INT32_LIMIT - _PIXELS:
        return None
    if smem > _SMEM_LIMIT:  # filter rows longer than about 2,600 channels
        return None
    plan = PointwisePlan(mchunks, tiles, alignment >= 16, bool(q.w_zp.any()), smem)
    ksteps = -(-c // 32)
    resident_smem = _RESIDENT_FIXED + ksteps * 32 * _PIXELS + 2 * 64 * (ksteps * 32 + 16)
    if compute_capability() < 90 or resident_smem > _SMEM_LIMIT:  # C above 416
        return plan
    chosen = _resident_run(n, tiles, mchunks, run)
    return plan._replace(run=chosen, smem=resident_smem) if chosen else plan


def _filter_rows(
    w: Any, q: Any, cache: MutableMapping[Hashable, Any] | None
) -> tuple[Any, int, Any]:
    """The filter as (M, ldw) byte rows the kernel copies (the filter itself where its rows
    are 16-byte multiples and aligned, else a zero-padded copy), ldw, and the per-channel zero
    points on the device (or a placeholder the kernel does not read when they are shared).
    Kept in `cache` (a registered operator's constants) when something had to be made; a kept
    entry is never replaced (another thread's kernels may still read it)."""
    import cupy

    per_channel, _ = zero_point_argument(q.w_zp)
    ws_m, ws_c = int(w.strides[0]), int(w.strides[1])
    direct = ws_c == 1 and q.c % 16 == 0 and ws_m % 16 == 0 and w.data.ptr % 16 == 0
    if direct and not per_channel:
        return w, ws_m, w
    key = ("pointwise", w.data.ptr, w.shape, w.strides, str(w.dtype), q.w_zp.tobytes())
    hit = cache.get("pointwise") if cache is not None else None
    if hit is not None and hit[0] == key:
        kept: tuple[Any, int, Any] = hit[1]
        return kept
    if direct:
        rows, ldw = w, ws_m
    else:
        ldw = -(-q.c // 16) * 16
        rows = cupy.zeros((q.m, ldw), dtype=w.dtype)
        rows[:, : q.c] = w.reshape(q.m, q.c)
    zp_dev = device_zero_points(q.w_zp) if per_channel else rows
    made = (rows, ldw, zp_dev)
    if cache is not None and hit is None:
        # Other calls read it from other streams: complete before it is shared.
        cupy.cuda.get_current_stream().synchronize()
        cache.setdefault("pointwise", (key, made))
    return made


def pointwise(
    x: Any,
    w: Any,
    out: Any,
    q: Any,
    plan: PointwisePlan,
    cache: MutableMapping[Hashable, Any] | None = None,
) -> None:
    """Launch the pointwise kernel for `q` into `out` (N, M, H, W) int32, C-contiguous (the
    resident form's bulk copies need its rows' starts 16-byte aligned)."""
    rows, ldw, zp_dev = _filter_rows(w, q, cache)
    _, zw_all = zero_point_argument(q.w_zp)
    kernel = launch(
        _SOURCE,
        "conv_int_pointwise_resident" if plan.run else "conv_int_pointwise",
        w.dtype,
        x.dtype,
        plan.zw_any,
        plan.vec16,
        grid=(q.n * plan.tiles * plan.runs, 1, 1),
        block=(_WARPS * 32, 1, 1),
        shared_mem=plan.smem,
    )
    ints = (q.m, q.c, q.h * q.wd, plan.mchunks, plan.tiles, ldw, wrap32(q.zx), zw_all)
    strides = tuple(map(np.int64, x.strides[:2]))
    if plan.run:
        if out.data.ptr % 16:
            raise ValueError("the resident pointwise kernel's output must be 16-byte aligned")
        kernel(
            x,
            rows,
            zp_dev,
            out,
            *map(np.int32, ints),
            *strides,
            *map(np.int32, (plan.run, plan.runs)),
        )
    else:
        kernel(x, rows, zp_dev, out, *map(np.int32, ints), *strides)
