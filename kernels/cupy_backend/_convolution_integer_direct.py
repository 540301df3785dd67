"""CONVOLUTION_INTEGER CUDA-core launchers without a shared tile budget: the depthwise rows
kernel (one input channel per output, unit W stride and dilation, S in {3, 5, 7}) and the naive
one-thread-per-output kernel; plus the small helpers every launcher of the operator uses.
Kernels: `kernels/cuda/convolution_integer_direct.cu`."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ._loader import get_kernel

_DIRECT_SOURCE = "convolution_integer_direct.cu"  # CUDA-core kernels
# Depthwise rows kernel: whether it may run; the filter widths it is instantiated for; input
# bytes per thread in flight (the kernel's DW_U); images per CTA (None: from the CTA count, aiming
# at _DW_CTAS_PER_SM CTAs per SM). Off by default: bit-exact, but on an H200 the 3x3 depthwise
# 144 @56 batch-32 layer took 83.7 us against 80.0 us on the tiled kernel; with single-byte loads
# (8 per thread) and 17 images per CTA in sequence it is load-latency bound (bench/NOTES).
_DW_ENABLED = False
_DW_WIDTHS = (3, 5, 7)
_DW_U = 8
_DW_IMAGES_PER_CTA: int | None = None
_DW_CTAS_PER_SM = 8


def _cxx(flag: bool) -> str:
    return "true" if flag else "false"


def _i32(v: int) -> np.int32:
    return np.int32(v)


def _i64(v: int) -> np.int64:
    return np.int64(v)


def _wrap32(v: int) -> int:
    """v as the int32 with the same bits modulo 2^32 (the kernels' sums wrap anyway)."""
    return ((v + (1 << 31)) % (1 << 32)) - (1 << 31)


def _fits(value: int, signed: bool) -> bool:
    return -128 <= value <= 127 if signed else 0 <= value <= 255


@functools.cache
def _sm_count(device_id: int) -> int:
    import cupy

    return int(cupy.cuda.Device(device_id).attributes["MultiProcessorCount"])


def _dw_plan(
    x: Any,
    cg: int,
    m: int,
    r: int,
    s: int,
    oh: int,
    ow: int,
    geometry: tuple[Sequence[int], ...],
    zx: int,
    x_signed: bool,
    sms: int,
) -> tuple[int, ...] | None:
    """Tile of the depthwise rows kernel, or None where it does not apply:
    (TH, IHT, IWT, IWP, threads, tiles_h, NB)."""
    (sh, sw), (dh, dw), _ = geometry
    n, _, h, wd = (int(v) for v in x.shape)
    if not (_DW_ENABLED and cg == 1 and sw == 1 and dw == 1 and s in _DW_WIDTHS):
        return None
    _, _, xs_h, xs_w = (int(v) for v in x.strides)
    # z_x must be a value of the input type (it fills the padding as a byte); one CTA covers a
    # whole output row (at most 64 four-output groups); grid y = M.
    if not _fits(zx, x_signed) or ow > 256 or m > 65535:
        return None
    if (h - 1) * xs_h + (wd - 1) * xs_w >= 2**31:  # 32-bit byte offsets in a channel
        return None
    gw = -(-ow // 4)  # 4-output groups per row
    th = max(1, min(oh, 256 // gw))
    th = -(-oh // -(-oh // th))  # balanced row tiles
    iwt = ow + s - 1
    iwp = -(-(iwt + 3) // 4) * 4  # room for the last group's window reads past the row
    while True:
        iht = (th - 1) * sh + (r - 1) * dh + 1
        threads = -(-th * gw // 32) * 32
        if iht * iwt <= _DW_U * threads and iht * iwp + 4 * r * s + 12 <= 48 * 1024:
            break
        if th == 1:
            return None
        th = -(-th // 2)
    tiles_h = -(-oh // th)
    if tiles_h >= 2**31:
        return None
    # Images per CTA: the filter, the padding fill and the load addresses are set up once per
    # CTA and the next image's bytes load during this one's arithmetic; keep the SMs filled.
    nb = _DW_IMAGES_PER_CTA or tiles_h * m * n // (sms * _DW_CTAS_PER_SM)
    nb = max(1, min(n, nb), -(-n // 65535))  # grid z <= 65535
    return th, iht, iwt, iwp, threads, tiles_h, nb


def _dw(
    x: Any,
    w: Any,
    zx: int,
    w_zp: np.ndarray,
    geometry: tuple[Sequence[int], ...],
    g: int,
    out: Any,
    x_signed: bool,
    w_signed: bool,
    plan: tuple[int, ...],
) -> None:
    import cupy

    (sh, _), (dh, _), (ph, pw) = geometry
    n, m, oh, ow = out.shape
    _, _, h, wd = x.shape
    _, _, r, s = w.shape
    th, iht, iwt, iwp, threads, tiles_h, nb = plan
    kernel = get_kernel(_DIRECT_SOURCE, f"conv_int_dw<{_cxx(w_signed)}, {_cxx(x_signed)}, {s}>")
    smem = 4 * (-(-r * s // 4) * 4) + iht * iwp
    zp_dev = cupy.asarray(w_zp)
    ints = (n, m, m // g, h, wd, r, oh, ow, sh, dh, ph, pw)
    ws_m, _, ws_r, ws_s = w.strides
    kernel(
        (tiles_h, m, -(-n // nb)),
        (threads,),
        (x, w, zp_dev, out, *(_i32(v) for v in ints), np.uint32(zx & 0xFF))
        + tuple(_i32(v) for v in (th, iht, iwt, iwp, nb))
        + tuple(_i64(v) for v in (*x.strides, ws_m, ws_r, ws_s)),
        shared_mem=smem,
    )


def _direct(
    x: Any,
    w: Any,
    zx: int,
    w_zp: np.ndarray,
    geometry: tuple[Sequence[int], ...],
    g: int,
    out: Any,
    x_signed: bool,
    w_signed: bool,
) -> None:
    """Naive kernel: one thread per output element straight from the strided tensors."""
    import cupy

    (sh, sw), (dh, dw), (ph, pw) = geometry
    n, m, oh, ow = out.shape
    _, _, h, wd = x.shape
    _, cg, r, s = w.shape
    kernel = get_kernel(_DIRECT_SOURCE, f"conv_int_direct<{_cxx(w_signed)}, {_cxx(x_signed)}>")
    total = out.size
    threads = 256
    blocks = min(math.ceil(total / threads), 1 << 20)
    zp_dev = cupy.asarray(w_zp)
    zx32 = _wrap32(zx)
    kernel(
        (blocks,),
        (threads,),
        (
            x,
            w,
            zp_dev,
            out,
            _i64(total),
            *(_i32(v) for v in (m, m // g, cg, h, wd, r, s, oh, ow, sh, sw, dh, dw, ph, pw, zx32)),
            *(_i64(v) for v in x.strides),
            *(_i64(v) for v in w.strides),
        ),
    )
