"""CONVOLUTION_INTEGER on CUDA (SEMANTICS.md §6): int8 tensor-core implicit GEMM; a
shared-memory CUDA-core kernel for depthwise and narrow groups (a naive one for shapes whose
tile does not fit). Kernels: `kernels/cuda/convolution_integer.cu`."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ._loader import get_kernel

__all__ = ["convolution_integer"]

_SOURCE = "convolution_integer.cu"  # tensor-core path and the layout transforms
_DIRECT_SOURCE = "convolution_integer_direct.cu"  # CUDA-core paths
_STAGES = 4
# (BM output channels, BN pixels, CTAs that fit one SM, relative efficiency of the tile).
_TILES: tuple[tuple[int, int, int, float], ...] = (
    (128, 128, 2, 1.0),
    (128, 64, 3, 0.85),
    (64, 128, 3, 0.85),
    (64, 64, 4, 0.7),
    (32, 128, 4, 0.6),
)
# Below this many channels per group the 16-byte channel padding wastes more than the tensor
# cores win; those (depthwise, ResNeXt-like narrow groups) take the CUDA-core path.
_MIN_TC_CHANNELS = 8
_MIN_TC_OUTPUTS = 8
# Shared-memory CUDA-core kernel: outputs per thread (template V); bytes of shared memory per CTA
# it may plan for (filter chunk + input tile, int32 each); input words per thread in flight (the
# kernel's TILED_U); CTAs per SM to aim for when a CTA takes several images (NB); whether the
# one-chunk case may prefetch the next image's input during the arithmetic.
_TILED_V = 4
_TILED_SMEM_BUDGET = 32 * 1024
_TILED_U = 4
_TILED_CTAS_PER_SM = 8
_TILED_IMAGES_PER_CTA: int | None = None  # None: chosen from the CTA count
_TILED_PIPELINE = True


def _cxx(flag: bool) -> str:
    return "true" if flag else "false"


@functools.cache
def _sm_count(device_id: int) -> int:
    import cupy

    return int(cupy.cuda.Device(device_id).attributes["MultiProcessorCount"])


def _pick_tile(mg: int, pixels: int, groups: int, sms: int) -> tuple[int, int]:
    """The tile with the least estimated time: waves of CTAs times tile work / efficiency."""
    best: tuple[float, int, int] | None = None
    for bm, bn, per_sm, eff in _TILES:
        ctas = math.ceil(pixels / bn) * math.ceil(mg / bm) * groups
        waves = math.ceil(ctas / (sms * per_sm))
        cost = waves * bm * bn / eff
        if best is None or cost < best[0]:
            best = (cost, bm, bn)
    assert best is not None
    return best[1], best[2]


def _tiled_plan(
    x: Any,
    cg: int,
    mg: int,
    g: int,
    r: int,
    s: int,
    oh: int,
    ow: int,
    geometry: tuple[Sequence[int], ...],
    sms: int,
) -> tuple[int, ...] | None:
    """Tile of the shared-memory CUDA-core kernel, or None where it does not fit (the naive
    kernel then runs): (MB, V, TH, TW, IHT, IWT, CC, threads, tiles_w, tiles, mchunks, NB,
    pipe)."""
    (sh, sw), (dh, dw), _ = geometry
    n, c, h, wd = (int(v) for v in x.shape)
    mb = next(v for v in (1, 2, 4) if v >= min(mg, 4))
    v = _TILED_V if mb <= 2 else 4  # 4 x 8 accumulators would spill under 64 registers
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
    too_big = tiles >= 2**31 or oh * ow >= 2**31 or max(h, wd) * max(sh, sw) >= 2**30
    if too_big or g * mchunks > 65535:
        return None
    ctas = tiles * g * mchunks
    # Images per CTA: the filter, borders and addresses are set up once per CTA, and the next
    # image's loads overlap this one's arithmetic; keep enough CTAs to fill the SMs.
    nb = _TILED_IMAGES_PER_CTA or ctas * n // (sms * _TILED_CTAS_PER_SM)
    nb = max(1, min(n, nb), -(-n // 65535))  # grid z <= 65535
    xs_n = int(x.strides[0])
    words = cg * iht * ((iwt + 3) // 4 + 1)  # input words of a one-chunk tile, at most
    pipe = (
        _TILED_PIPELINE
        and _wide_rows(x)
        and cc >= cg
        and words <= _TILED_U * 256
        and (nb == 1 or xs_n % 4 == 0)
    )
    if pipe:
        threads = max(threads, -(-words // (_TILED_U * 32)) * 32)  # each thread holds U words
    return mb, v, th, tw, iht, iwt, cc, threads, tiles_w, tiles, mchunks, nb, int(pipe)


def _wide_rows(x: Any) -> bool:
    """Rows contiguous along W (4-byte word loads) and one image within 32-bit offsets."""
    _, c, h, wd = (int(v) for v in x.shape)
    _, xs_c, xs_h, xs_w = (int(v) for v in x.strides)
    return xs_w == 1 and (c - 1) * xs_c + (h - 1) * xs_h + wd < 2**31


def _fits(value: int, signed: bool) -> bool:
    return -128 <= value <= 127 if signed else 0 <= value <= 255


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
) -> Any:
    """Integer cross-correlation ``(N, C, *S), (M, C/G, *K) -> (N, M, *O)`` int32 (wraps).

    Parameters are already validated (one entry per spatial dim, 1 or 2 dims); ``x``, ``w`` may
    be any strided CuPy views; ``w_zero_point`` is a host int32 array of shape ``(M,)``.
    Launches on the current CuPy stream and returns a new C-contiguous array.
    """
    import cupy

    one_d = x.ndim == 3
    if one_d:  # 1-D maps to 2-D with H = 1
        x, w = x[:, :, None, :], w[:, :, None, :]
        strides, dilations = (1, *strides), (1, *dilations)
        start_padding, end_padding = (0, *start_padding), (0, *end_padding)
    n, c, h, wd = (int(v) for v in x.shape)
    m, cg, r, s = (int(v) for v in w.shape)
    g = int(group_count)
    mg = m // g
    oh = (h + start_padding[0] + end_padding[0] - ((r - 1) * dilations[0] + 1)) // strides[0] + 1
    ow = (wd + start_padding[1] + end_padding[1] - ((s - 1) * dilations[1] + 1)) // strides[1] + 1
    out = cupy.empty((n, m, oh, ow), dtype=cupy.int32)
    if out.size:
        x_signed = x.dtype == np.int8
        w_signed = w.dtype == np.int8
        zx = int(x_zero_point)
        w_zp = np.ascontiguousarray(np.broadcast_to(np.asarray(w_zero_point, np.int32), (m,)))
        use_tc = (
            cg >= _MIN_TC_CHANNELS
            and mg >= _MIN_TC_OUTPUTS
            and _fits(zx, x_signed)
            and n <= 65535  # grid z of the input transform
            and n * oh * ow < 2**31  # flat pixel index is 32-bit in the GEMM
            and h * wd < 2**31
        )
        geometry = (strides, dilations, start_padding)
        if use_tc:
            _tensor_core(x, w, zx, w_zp, geometry, g, out, x_signed, w_signed)
        elif (
            plan := _tiled_plan(
                x, cg, mg, g, r, s, oh, ow, geometry, _sm_count(cupy.cuda.Device().id)
            )
        ) is not None:
            _tiled(x, w, zx, w_zp, geometry, g, out, x_signed, w_signed, plan)
        else:
            _direct(x, w, zx, w_zp, geometry, g, out, x_signed, w_signed)
    return out.reshape(n, m, ow) if one_d else out


def _i32(v: int) -> np.int32:
    return np.int32(v)


def _i64(v: int) -> np.int64:
    return np.int64(v)


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


def _tiled(
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

    (sh, sw), (dh, dw), (ph, pw) = geometry
    n, m, oh, ow = out.shape
    _, _, h, wd = x.shape
    _, cg, r, s = w.shape
    mb, v, th, tw, iht, iwt, cc, threads, tiles_w, tiles, mchunks, nb, pipe = plan
    wide = _wide_rows(x)
    name = f"conv_int_tiled<{_cxx(w_signed)}, {_cxx(x_signed)}, {mb}, {v}, {_cxx(wide)}>"
    kernel = get_kernel(_DIRECT_SOURCE, name)
    smem = 4 * (-(-cc * r * s * mb // 4) * 4 + cc * iht * iwt)
    zp_dev = cupy.asarray(w_zp)
    ints = (
        *(n, m, m // g, cg, h, wd, r, s, oh, ow, sh, sw, dh, dw, ph, pw, _wrap32(zx)),
        *(th, tw, iht, iwt, cc, tiles_w, mchunks, nb, pipe),
    )
    kernel(
        (tiles, g * mchunks, -(-n // nb)),
        (threads,),
        (x, w, zp_dev, out, *(_i32(v) for v in ints))
        + tuple(_i64(v) for v in (*x.strides, *w.strides)),
        shared_mem=smem,
    )


def _wrap32(v: int) -> int:
    """v as the int32 with the same bits modulo 2^32 (the kernels' sums wrap anyway)."""
    return ((v + (1 << 31)) % (1 << 32)) - (1 << 31)


def _tensor_core(
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
    import cupy

    (sh, sw), (dh, dw), (ph, pw) = geometry
    n, m, oh, ow = out.shape
    _, _, h, wd = x.shape
    _, cg, r, s = w.shape
    mg = m // g
    cgp = -(-cg // 16) * 16
    slots = g * cgp
    kp = r * s * cgp
    zx_byte = zx & 0xFF

    # Filter -> (M, R*S*Cgp) and the per-channel constant of the zero-point expansion.
    wp = cupy.empty((m, kp), dtype=cupy.uint8)
    bias = cupy.empty((m,), dtype=cupy.int32)
    zp_dev = cupy.asarray(w_zp)
    prep_w = get_kernel(_SOURCE, f"conv_int_prep_w<{_cxx(w_signed)}>")
    prep_w(
        (m,),
        (128,),
        (w, zp_dev, wp, bias, *(_i32(v) for v in (cg, s, cgp, kp, zx)))
        + tuple(_i64(v) for v in w.strides),
    )

    # Input -> (N, H, W, G*Cgp), padded channels = z_x.
    xn = cupy.empty((n, h, wd, slots), dtype=cupy.uint8)
    # 16-byte reads along each channel plane when it is contiguous and 16-byte aligned.
    sn, sc, sh_, sw_ = x.strides
    plane_contiguous = (wd == 1 or sw_ == 1) and (h == 1 or sh_ == (wd if wd > 1 else 1))
    vec = plane_contiguous and (n == 1 or sn % 16 == 0) and sc % 16 == 0 and x.data.ptr % 16 == 0
    prep_x = get_kernel(_SOURCE, f"conv_int_prep_x<{_cxx(vec)}>")
    prep_x(
        (math.ceil(h * wd / 64), math.ceil(slots / 64), n),
        (256,),
        (x, xn, *(_i32(v) for v in (h, wd, cg, cgp, slots)), np.uint32(zx_byte))
        + tuple(_i64(v) for v in x.strides),
    )

    pixels = n * oh * ow
    zw_any = bool(np.any(w_zp != 0))
    bm, bn = _pick_tile(mg, pixels, g, _sm_count(cupy.cuda.Device().id))
    name = (
        f"conv_int_igemm<{_cxx(w_signed)}, {_cxx(x_signed)}, {bm}, {bn}, {_STAGES}, {_cxx(zw_any)}>"
    )
    kernel = get_kernel(_SOURCE, name)
    smem = _STAGES * (bm + bn) * 64
    if smem > 48 * 1024:  # above the default dynamic limit the kernel must opt in
        kernel.max_dynamic_shared_size_bytes = smem
    grid = (math.ceil(pixels / bn), math.ceil(mg / bm), g)
    ints = (h, wd, oh, ow, r, s, sh, sw, dh, dw, ph, pw, m, mg, cgp, slots, kp, pixels, oh * ow)
    kernel(
        grid,
        (128,),
        (wp, xn, zp_dev, bias, out, *(_i32(v) for v in ints), np.uint32(zx_byte * 0x01010101)),
        shared_mem=smem,
    )
