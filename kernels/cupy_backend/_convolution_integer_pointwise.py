"""CONVOLUTION_INTEGER's pointwise kernel (`kernels/cuda/convolution_integer_pointwise.cu`): a
1x1 window at unit stride with no padding and one group, on an input whose (n, c) planes are
contiguous with 4-byte aligned words. Per image the layer is a GEMM of the filter (M x C) and
the image (C x H*W) as it lies in memory; the kernel transposes the input's bytes in registers
into the tensor cores' fragments, so there is no transform pass, and writes the NCHW int32
output directly. Each CTA copies its filter rows into shared memory and sums them itself, so a
call prepares nothing where the filter's rows lie as 16-byte multiples; otherwise a padded copy
is made (and kept with a registered operator's constants, as are, for the warpgroup-MMA form,
the filter's blocks with their rows' sums).

Three forms: the ring form, a CTA per 64 output channels streaming its input through a ring of
stages; and, where many output channels share each input byte, two whose CTA keeps its input
in shared memory for a run of output-channel chunks and lets each chunk's output drain (bulk
copies) while the next chunk's MMAs run: the resident form (mma.sync, sm_90 and later) and,
for images of one tile and up to 256 channels on sm_90, the warpgroup-MMA form
(`convolution_integer_sm90a.cu`: the image's pixels as the MMA's register operand), which
keeps a registered operator's filter as its blocks. On sm_90 and later the ring and resident
forms' calls, and the MMA form's inline calls and those with its blocks kept, are launched as
programmatic dependents of the grid ahead."""

from __future__ import annotations

from collections.abc import Hashable, MutableMapping
from typing import Any, Literal, NamedTuple

import numpy as np

from ._common import (
    INT32_LIMIT,
    compute_capability,
    contiguous_planes,
    device_zero_points,
    launch,
    launch_dependent,
    max_shared_memory,
    plane_alignment,
    sm_count,
    wrap32,
    zero_point_argument,
)
from ._convolution_integer_gemm import SM90A_OPTIONS, SM90A_SOURCE

__all__ = ["PointwisePlan", "pointwise", "pointwise_plan"]

_SOURCE = "convolution_integer_pointwise.cu"
_WARPS = 8  # warps per CTA (the kernel's PW_WARPS)
_M_CHUNK = 64  # output channels a CTA forms (PW_MT m-tiles of 16)
_PIXELS = 256  # pixels of one image a CTA forms (PW_PIXELS)
# PW_HEAD + PW_BODY: the rows' constants, then 4 stages of 32 channel rows or 32 staged int32
# output rows of 256 + 4 pixels; the filter rows follow.
_SMEM_FIXED = 512 + max(4 * 32 * _PIXELS, 32 * (_PIXELS + 4) * 4)
# The resident form's PWR_STAGED (64 staged output rows); the whole tile's input (32 channel
# rows of 256 bytes a step) and two chunks' filter rows follow.
_RESIDENT_FIXED = 64 * (_PIXELS + 4) * 4
# The warpgroup-MMA form: the most pixels and channels it takes (its 256 pixel rows; its K
# steps' fragments kept in registers), its filter blocks in flight, and its static shared
# memory (four barriers, room for the dynamic block's alignment).
_WGMMA_PIXELS = 256
_WGMMA_CHANNELS = 256
_WGMMA_BLOCKS = 3
_WGMMA_STATIC = 128

Form = Literal["ring", "resident", "wgmma"]


class PointwisePlan(NamedTuple):
    """The pointwise kernel's work: output-channel chunks of 64, 256-pixel tiles per image,
    whether the input's planes take 16-byte copies (else 4-byte ones), whether some filter
    zero point is not 0 (the kernel's ZW), the shared memory a CTA takes, the form that runs
    and, for the resident and warpgroup-MMA forms, the chunks a CTA forms."""

    mchunks: int
    tiles: int
    vec16: bool
    zw_any: bool
    smem: int  # bytes of shared memory per CTA
    form: Form = "ring"
    run: int = 1  # chunks of 64 output channels per CTA (the ring form: 1)

    @property
    def runs(self) -> int:
        """CTAs per tile."""
        return -(-self.mchunks // self.run)


def _steps(c: int) -> int:
    """Channels rounded up to the MMAs' K step of 32."""
    return -(-c // 32) * 32


def _forms(plan: PointwisePlan, c: int, hw: int, limit: int) -> dict[Form, PointwisePlan]:
    """The forms that can run `plan`'s shape on the current device (`limit`: its shared
    memory a CTA), each with its shared memory (a run of one chunk; the caller picks the
    run)."""
    forms: dict[Form, PointwisePlan] = {"ring": plan}
    kp = _steps(c)
    cc = compute_capability()
    if cc < 90:  # bulk copies
        return forms
    resident = _RESIDENT_FIXED + kp * _PIXELS + 2 * 64 * (kp + 16)
    if resident <= limit:  # C up to 416 on sm_90
        forms["resident"] = plan._replace(form="resident", smem=resident)
    # sm_90a's warpgroup MMA; an image of one tile
    if cc == 90 and hw <= _WGMMA_PIXELS and kp <= _WGMMA_CHANNELS:
        ld = (hw // 4) | 1  # the image's rows in words (at most: odd where not dense)
        staging = max(2 * 64 * hw * 4, kp * ld * 4 + 256)  # (first the image)
        smem = staging + _WGMMA_BLOCKS * _slot(kp) + 1024  # filter slots; biases, z_w
        if smem + _WGMMA_STATIC <= limit:
            forms["wgmma"] = plan._replace(form="wgmma", smem=smem)
    return forms


def pointwise_plan(
    x: Any, q: Any, form: Form | None = None, run: int | None = None
) -> PointwisePlan | None:
    """The pointwise kernel's plan for problem `q` (convolution_integer's _Problem), or None
    where the shape or the input's layout is outside it. `form` and `run` (the chunks a CTA
    of the resident or warpgroup-MMA form takes) force a choice where the device and shape
    allow it (tests, benchmarks); None: chosen. Chosen: for images of one tile and more than
    one chunk, the warpgroup-MMA form where it runs, else the resident form, with as many
    chunks a CTA as spread the images' chunks over the SMs once; else the ring form."""
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
    smem = _SMEM_FIXED + 64 * (_steps(c) + 16)
    if n * tiles * mchunks > INT32_LIMIT or max(hw, c) > INT32_LIMIT - _PIXELS:
        return None
    limit = max_shared_memory()
    if smem > limit:  # on sm_90, filter rows longer than about 2,600 channels
        return None
    forms = _forms(
        PointwisePlan(mchunks, tiles, alignment >= 16, bool(q.w_zp.any()), smem), c, hw, limit
    )
    if form is None:
        # A chunk a tile, or several tiles an image (a bulk copy a row): the ring form.
        wide = tiles == 1 and mchunks > 1
        chosen: Form = next((f for f in ("wgmma", "resident") if wide and f in forms), "ring")
        form = chosen
    plan = forms.get(form, forms["ring"])
    if plan.form == "ring":
        return plan
    if run is None:
        run = -(-n * mchunks // sm_count())
    return plan._replace(run=max(1, min(run, mchunks)))


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


def _slot(kp: int) -> int:
    """Bytes of one chunk's filter block in the warpgroup-MMA form (64 rows of `kp` channels)
    and the 64 int32 sums of its rows kept after it."""
    return 64 * kp + 64 * 4


def _filter_blocks(
    w: Any, q: Any, cache: MutableMapping[Hashable, Any], mchunks: int, kp: int
) -> tuple[Any, bool]:
    """A registered operator's filter in the warpgroup-MMA form's blocks, kept in `cache`:
    per chunk of 64 output channels, [16-channel block][64 rows][16 bytes], zero-padded to
    `mchunks` chunks and `kp` channels, then the 64 rows' sums (int32), so that each chunk
    comes in as one bulk copy and its sums are not made again; and whether they are kept
    (complete before this call: a kernel may read them before the grid ahead of it in the
    stream completes)."""
    import cupy

    key = ("pointwise blocks", w.data.ptr, w.shape, w.strides, str(w.dtype), kp)
    hit = cache.get("pointwise blocks")
    if hit is not None and hit[0] == key:
        return hit[1], True
    rows = cupy.zeros((mchunks * 64, kp), dtype=w.dtype)
    rows[: q.m, : q.c] = w.reshape(q.m, q.c)
    blocks = cupy.empty((mchunks, _slot(kp)), dtype=np.uint8)
    blocks[:, : 64 * kp] = (
        rows.reshape(mchunks, 64, kp // 16, 16)
        .transpose(0, 2, 1, 3)
        .reshape(mchunks, 64 * kp)
        .view(np.uint8)
    )
    sums = rows.astype(np.int32).sum(axis=1, dtype=np.int32).reshape(mchunks, 64)
    blocks[:, 64 * kp :] = sums.view(np.uint8)
    if hit is not None:  # another filter's are kept: these are this call's alone
        return blocks, False
    # Other calls read it from other streams: complete before it is shared.
    cupy.cuda.get_current_stream().synchronize()
    cache.setdefault("pointwise blocks", (key, blocks))
    return blocks, True


def pointwise(
    x: Any,
    w: Any,
    out: Any,
    q: Any,
    plan: PointwisePlan,
    cache: MutableMapping[Hashable, Any] | None = None,
) -> None:
    """Launch the pointwise kernel for `q` into `out` (N, M, H, W) int32, C-contiguous (the
    bulk copies of the resident and MMA forms need its rows' starts 16-byte aligned).
    `cache`: a registered operator's constants, where what the filter needs is kept."""
    rows, ldw, zp_dev = _filter_rows(w, q, cache)
    _, zw_all = zero_point_argument(q.w_zp)
    if plan.form != "ring" and out.data.ptr % 16:
        raise ValueError("the pointwise kernel's bulk copies need a 16-byte aligned output")
    if plan.form == "wgmma":
        _mma_form(x, w, out, q, plan, (rows, zp_dev), (ldw, zw_all), cache)
        return
    ints = (q.m, q.c, q.h * q.wd, plan.mchunks, plan.tiles, ldw, wrap32(q.zx), zw_all)
    strides = tuple(map(np.int64, x.strides[:2]))
    name = "conv_int_pointwise_resident" if plan.form == "resident" else "conv_int_pointwise"
    kernel = launch(
        _SOURCE, name, w.dtype, x.dtype, plan.zw_any, plan.vec16,
        grid=(q.n * plan.tiles * plan.runs, 1, 1), block=(_WARPS * 32, 1, 1),
        shared_mem=plan.smem,
    )  # fmt: skip
    runs = (plan.run, plan.runs) if plan.form == "resident" else ()
    scalars = (*map(np.int32, ints), *strides, *map(np.int32, runs))
    launch_dependent(kernel, (x, rows, zp_dev, out), scalars)


def _mma_form(
    x: Any,
    w: Any,
    out: Any,
    q: Any,
    plan: PointwisePlan,
    filter_arrays: tuple[Any, Any],
    filter_ints: tuple[int, int],
    cache: MutableMapping[Hashable, Any] | None,
) -> None:
    """Launch the warpgroup-MMA form: `filter_arrays` (the filter rows, the per-channel zero
    points) and `filter_ints` (the rows' pitch, the shared zero point) as `_filter_rows` and
    `zero_point_argument` give them. A registered operator's filter (`cache` given) comes in
    as one bulk copy a chunk of its kept blocks; with those complete before the call (all the
    kernel reads before the grid ahead of it in the stream completes), the call is launched
    as a programmatic dependent. An inline call reads everything after that grid completes:
    it too is launched as a programmatic dependent."""
    rows, zp_dev = filter_arrays
    ldw, zw_all = filter_ints
    hw, (xs_n, xs_c) = q.h * q.wd, (int(v) for v in x.strides[:2])
    # The image's planes back to back from a 16-byte boundary: one bulk copy an image.
    dense = xs_c == hw and xs_n % 16 == 0 and x.data.ptr % 16 == 0 and q.c * hw % 16 == 0
    prepared = cache is not None
    blocks, kept = rows, False
    if cache is not None:
        blocks, kept = _filter_blocks(w, q, cache, plan.mchunks, _steps(q.c))
    kernel = launch(
        SM90A_SOURCE, "conv_int_wgmma_pointwise", w.dtype, x.dtype, plan.zw_any, _steps(q.c) // 32,
        grid=(q.n * plan.runs, 1, 1), block=(_WARPS * 32, 1, 1), shared_mem=plan.smem,
        options=SM90A_OPTIONS,
    )  # fmt: skip
    ints = (q.m, q.c, hw, plan.mchunks, ldw, wrap32(q.zx), zw_all)
    tail = (plan.run, plan.runs, int(dense), int(prepared))
    scalars = (*map(np.int32, ints), np.int64(xs_n), np.int64(xs_c), *map(np.int32, tail))
    arrays = (x, rows, zp_dev, out, blocks)
    if kept or not prepared:  # before its wait it reads only kept blocks, or nothing
        launch_dependent(kernel, arrays, scalars)
    else:
        kernel(*arrays, *scalars)
