"""CONVOLUTION_INTEGER depthwise band kernel (`kernels/cuda/convolution_integer_depthwise.cu`):
one input channel per group, or 2 or 4 (narrow groups: a CTA forms every output channel of its
group from the group's staged input planes), a window of 1/3/5/7 rows by 3/5/7 columns, unit
dilation, strides 1 or 2. The layer is memory-bound; the kernel loads a band of input rows with
their halo into shared memory (padding as z_x), then each thread forms 4 x TT outputs from
immediate-offset shared loads; 3-wide windows at unit column stride take a dp4a per tap row where
every w - z_w fits a signed byte. Shapes outside take the tiled CUDA-core kernel."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ._common import (
    GRID_YZ_LIMIT,
    INT32_LIMIT,
    byte_value,
    device_zero_points,
    fast_divmod,
    launch,
    launch_dependent,
    zero_point_argument,
)

__all__ = ["DepthwisePlan", "depthwise", "depthwise_plan"]

_SOURCE = "convolution_integer_depthwise.cu"
_ROWS = (1, 3, 5, 7)  # filter heights compiled (1: the 1-D form)
_COLS = (3, 5, 7)  # filter widths compiled
_GROUP_CHANNELS = (1, 2, 4)  # input channels per group (the kernel's CG)
_STRIDES = (1, 2)
_V = 4  # outputs per thread along W (one 16-byte store); the kernel's V
_MAX_THREADS = 256
_MAX_TX = 64  # threads along W: a CTA covers at most 256 output columns
_SMEM_BUDGET = 48 * 1024  # tile + filter; below the opt-in limit
# Offsets the kernel forms in 32-bit ints (rows, columns, padding) stay below this.
_GEOMETRY_LIMIT = 1 << 30


class DepthwisePlan(NamedTuple):
    """The band kernel's tiling: output rows per thread (TT), threads along W (TX), output
    rows per CTA (TY), bands per plane and tiles across W, tile words per row (WPW) and rows
    (IHT), the start padding rounded up to 4 (PL), threads, whether rows load as words, and
    whether tap rows are dp4a dot products."""

    tt: int
    tx: int
    ty: int
    bands: int
    tiles_w: int
    wpw: int
    iht: int
    pl: int
    threads: int
    words: bool
    dp4a: bool


def _word_rows(x: Any) -> bool:
    """Rows contiguous along W and W a multiple of 4: the kernel loads 4-byte words where a
    plane's rows are 4-byte aligned (it checks the addresses), a word then being wholly image
    or wholly padding."""
    return int(x.strides[3]) == 1 and int(x.shape[3]) % 4 == 0


def _outputs_per_cta(q: Any) -> int:
    """Output channels a CTA forms: one (C/G = 1), else every one of its group."""
    return 1 if q.cg == 1 else int(q.mg)


def _smem_bytes(q: Any, wpw: int, iht: int) -> int:
    """The filter taps (int32) of the CTA's output channels and their biases, the tile (a
    plane per input channel of the group), and one word past it (the dp4a windows of the last
    row read it into a byte whose weight is 0)."""
    cg, mo = int(q.cg), _outputs_per_cta(q)
    biases = 0 if cg == 1 else mo  # per output channel, -z_x * sum w'
    return 4 * (mo * cg * int(q.r) * int(q.s) + biases) + 4 * cg * wpw * iht + 4


def _dp4a_fits(w_signed: bool, w_zp: Any) -> bool:
    """Every w - z_w is a signed byte whatever the weights: int8 with z_w 0, uint8 with 128."""
    return bool((w_zp == (0 if w_signed else 128)).all())


def depthwise_plan(x: Any, q: Any, w_signed: bool, dp4a: bool = True) -> DepthwisePlan | None:
    """The band kernel's plan for problem `q` (convolution_integer's _Problem) with an int8
    (`w_signed`) or uint8 filter, or None where the shape is outside it; `dp4a` False keeps
    the multiply-add form."""
    zx_fits = byte_value(q.zx, x.dtype == np.int8)
    shape_ok = (
        q.cg in _GROUP_CHANNELS
        and q.r in _ROWS
        and q.s in _COLS
        and (q.dh == 1 or q.r == 1)
        and q.dw == 1
        and q.sh in _STRIDES
        and q.sw in _STRIDES
        and zx_fits  # the padding is filled with z_x as a byte of the input's type
    )
    big = max(q.h, q.wd, q.ph, q.pw, q.oh * q.sh, q.ow * q.sw) >= _GEOMETRY_LIMIT
    if not shape_ok or big:
        return None
    oh, ow = q.oh, q.ow
    # Rows per thread: consecutive rows share the window's input rows and the per-thread
    # set-up; 4 where the filter's taps leave registers for 16 accumulators.
    tt = 4 if oh >= 8 and q.r * q.s <= 9 else 2 if oh >= 4 else 1
    tx = min(-(-ow // _V), _MAX_TX)
    tw = _V * tx
    tiles_w = -(-ow // tw)
    tyt = max(1, min(-(-oh // tt), _MAX_THREADS // tx))
    bands = -(-oh // (tyt * tt))
    rows = -(-oh // bands)  # balanced bands: the last is not a sliver
    tyt = -(-rows // tt)
    ty = tyt * tt
    pl = -(-q.pw // 4) * 4
    wpw = -(-(pl - q.pw + (tw - 1) * q.sw + q.s) // 4)
    iht = (ty - 1) * q.sh + q.r
    smem = _smem_bytes(q, wpw, iht)
    threads = -(-max(tx * tyt, wpw, q.r * q.s) // 32) * 32
    grid_ok = q.n * _ctas_per_image(q) <= INT32_LIMIT and max(bands, tiles_w) <= GRID_YZ_LIMIT
    if smem > _SMEM_BUDGET or threads > _MAX_THREADS or not grid_ok:
        return None
    dp = dp4a and q.s <= 3 and q.sw == 1 and _dp4a_fits(w_signed, q.w_zp)
    return DepthwisePlan(tt, tx, ty, bands, tiles_w, wpw, iht, pl, threads, _word_rows(x), dp)


def _ctas_per_image(q: Any) -> int:
    """CTAs along the grid's x per image: one per output channel (C/G = 1), else per group."""
    return int(q.m) if q.cg == 1 else int(q.g)


def depthwise(x: Any, w: Any, out: Any, q: Any, plan: DepthwisePlan) -> None:
    """Launch the band kernel for `q` into `out` (N, M, OH, OW) int32."""

    tt, tx, ty, bands, tiles_w, wpw, iht, pl, threads, words, dp = plan
    kernel = launch(
        _SOURCE,
        "conv_int_dw_bands",
        w.dtype,
        x.dtype,
        q.r,
        q.s,
        q.sh,
        q.sw,
        tt,
        words,
        dp,
        q.cg,
        grid=(q.n * _ctas_per_image(q), bands, tiles_w),
        block=(threads, 1, 1),
        shared_mem=_smem_bytes(q, wpw, iht),
    )
    # One zero point for every channel (the usual case) travels as an argument, with no
    # host-to-device copy; else the per-channel array (the kernel's conv::PER_CHANNEL).
    per_channel, zw_all = zero_point_argument(q.w_zp)
    zp_dev = device_zero_points(q.w_zp) if per_channel else out
    step = threads // wpw  # tile rows per pass of the block's loads
    ints = (
        _ctas_per_image(q),
        q.mg,
        q.h,
        q.wd,
        q.oh,
        q.ow,
        q.ph,
        q.pw,
        q.zx,
        zw_all,
        tx,
        ty,
        pl,
        wpw,
        iht,
        step,
    )
    divisors = (
        fast_divmod(d)[1:] for d in (_ctas_per_image(q), q.mg, wpw, tx)
    )  # (mul, shift) each
    scalars = (
        *(np.int32(v) for v in ints),
        *(np.uint32(v) for pair in divisors for v in pair),
        *(np.int64(v) for v in x.strides),
        *(np.int64(v) for v in (w.strides[0], w.strides[1], w.strides[2], w.strides[3])),
    )
    launch_dependent(kernel, (x, w, zp_dev, out), scalars)
