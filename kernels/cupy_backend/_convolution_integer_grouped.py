"""CONVOLUTION_INTEGER's grouped kernel (`kernels/cuda/convolution_integer_grouped.cu`): a 3x3
window (any strides, dilations and padding) with groups of 8, 16 or 32 input channels and at
most 16 output channels each, over images whose padded frame fits in shared memory. A CTA
copies an image's planes of 4 groups into shared memory once (the padding as z_x), and each
warp forms a group's outputs with the filter's fragments held in registers."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ._common import (
    INT32_LIMIT,
    byte_value,
    contiguous_planes,
    device_zero_points,
    fast_divmod,
    launch,
    launch_dependent,
    plane_alignment,
    wrap32,
    zero_point_argument,
)

__all__ = ["GroupedPlan", "grouped", "grouped_plan"]

_SOURCE = "convolution_integer_grouped.cu"
_GROUP_CHANNELS = (8, 16, 32)  # input channels per group compiled (the kernel's CG)
_MAX_OUTPUTS = 16  # output channels per group: one m-tile
_GROUPS = 4  # groups per CTA (GR_GROUPS)
_THREADS = 512  # 4 warps per group (GR_WARPS)
_SMEM_BUDGET = 96 * 1024  # frame bytes per CTA: two CTAs per SM at least


class GroupedPlan(NamedTuple):
    """The grouped kernel's frame (the padded input cells a CTA's taps reach), CTAs per image,
    whether some filter zero point is not 0 (the kernel's ZW), and whether the input's planes
    load as 4-byte words (WORDS)."""

    fh: int
    fw: int
    ctas_per_image: int
    zw_any: bool
    words: bool


def _word_planes(x: Any) -> bool:
    """Each (n, c) plane contiguous in 4-byte words, W >= 4, an image's offsets in 31 bits."""
    _, c, h, wd = (int(v) for v in x.shape)
    contiguous = contiguous_planes(x.shape, x.strides)
    aligned = plane_alignment(x.shape, x.strides, x.data.ptr) >= 4
    extent = (c - 1) * abs(int(x.strides[1])) + h * wd
    return contiguous and aligned and (h * wd) % 4 == 0 and wd >= 4 and extent < INT32_LIMIT


def _smem_bytes(cg: int, fh: int, fw: int) -> int:
    """A CTA's frames (fh x fw cells of cg bytes, per group) and its groups' filter fragments
    (16 bytes per lane and step of 32 k)."""
    return _GROUPS * (fh * fw * cg + -(-9 * cg // 32) * 32 * 16)


def grouped_plan(x: Any, q: Any) -> GroupedPlan | None:
    """The grouped kernel's plan for problem `q` (convolution_integer's _Problem), or None
    where the shape is outside it. The frame's padding holds z_x as a byte, so z_x must be a
    value of the input's type."""
    zx_fits = byte_value(q.zx, x.dtype == np.int8)
    if not (q.cg in _GROUP_CHANNELS and q.mg <= _MAX_OUTPUTS and (q.r, q.s) == (3, 3)):
        return None
    fh = (q.oh - 1) * q.sh + 2 * q.dh + 1
    fw = (q.ow - 1) * q.sw + 2 * q.dw + 1
    smem = _smem_bytes(q.cg, fh, fw)
    big = max(q.h, q.wd, q.ph, q.pw, fh * fw * q.cg) >= 1 << 30
    ctas_per_image = -(-q.g // _GROUPS)
    if not zx_fits or big or smem > _SMEM_BUDGET or q.n * ctas_per_image > INT32_LIMIT:
        return None
    # Word loads place every pixel of the image in the frame: the frame must hold them all.
    words = _word_planes(x) and q.h + q.ph <= fh and q.wd + q.pw <= fw
    return GroupedPlan(fh, fw, ctas_per_image, bool(q.w_zp.any()), words)


def grouped(x: Any, w: Any, out: Any, q: Any, plan: GroupedPlan) -> None:
    """Launch the grouped kernel for `q` into `out` (N, M, OH, OW) int32."""

    per_channel, zw_all = zero_point_argument(q.w_zp)
    zp_dev = device_zero_points(q.w_zp) if per_channel else out  # out: a placeholder, not read
    kernel = launch(
        _SOURCE,
        "conv_int_grouped",
        w.dtype,
        x.dtype,
        q.cg,
        plan.zw_any,
        plan.words,
        grid=(q.n * plan.ctas_per_image, 1, 1),
        block=(_THREADS, 1, 1),
        shared_mem=_smem_bytes(q.cg, plan.fh, plan.fw),
    )
    ints = (
        *(q.g, q.mg, q.h, q.wd, q.oh, q.ow, q.sh, q.sw, q.dh, q.dw, q.ph, q.pw),
        *(plan.fh, plan.fw, wrap32(q.zx), zw_all),
    )
    # The staging loop's items per channel quad and its row length, then OW.
    staging = (q.h * q.wd // 4, q.wd) if plan.words else (plan.fh * plan.fw, plan.fw)
    divisors = [fast_divmod(d)[1:] for d in (*staging, q.ow)]
    scalars = (
        *map(np.int32, ints),
        *(np.uint32(v) for pair in divisors for v in pair),
        *map(np.int64, x.strides),
        *map(np.int64, w.strides),
    )
    launch_dependent(kernel, (x, w, zp_dev, out), scalars)
