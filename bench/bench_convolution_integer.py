#!/usr/bin/env python3
"""CONVOLUTION_INTEGER (CuPy raw CUDA) against cuDNN fp16 channels-last and unfold + _int_mm.

Usage: python bench/bench_convolution_integer.py [--batch 32] [--json PATH] [--quick] [--sweep]
       [--only-3x3] [--only NAME ...] [--profile [--channels-last]]

Times are medians of CUDA-event-timed batches of back-to-back calls after warm-up; a GPU spin
(`torch.cuda._sleep`, ~1 ms per call) is queued before each batch so that host-side launch
overhead overlaps the GPU work instead of showing as idle time; `host us` is that overhead
(the host time to issue one call, without waiting for the GPU). Three input buffers rotate.
Our time is the whole public call (filter prep, input transform, GEMM); `registered` the same
call with the filter kept prepared, as a registered operator whose filter is a constant runs;
the input is NCHW (DirectML's default strides), and the shifted-window layers are also timed on
the same values stored (N, H, W, C), the layout cuDNN's input has here;
`kernels` is the sum of its GPU kernel times from the profiler. Peers: cuDNN fp16 conv2d on
channels-last tensors, the faster of its autotuned (`cudnn.benchmark=True`) and heuristic
algorithm choices (speed class; not integer), and the
torch-user path F.unfold (fp16) -> int8 -> `torch._int_mm` with a column-major right operand
(no zero points, output left in (pixels, channels) layout: both favour the peer).
ops = 2*N*OC*prod(P)*(C/G)*prod(R).
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

import conv_report  # noqa: E402
import cupy  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from dmlserve.kernels.cupy_backend.convolution_integer import (  # noqa: E402
    TmaTile,
    convolution_integer,
)


@dataclass(frozen=True)
class Case:
    name: str
    c: int
    m: int
    hw: int
    k: int
    stride: int
    pad: int
    groups: int = 1
    per_channel_zp: bool = False


CASES = [
    Case("3x3 64->64 @56", 64, 64, 56, 3, 1, 1),
    Case("3x3 128->128 @28", 128, 128, 28, 3, 1, 1),
    Case("3x3 256->256 @14", 256, 256, 14, 3, 1, 1),
    Case("3x3 512->512 @7", 512, 512, 7, 3, 1, 1),
    Case("3x3 s2 128->128 @56", 128, 128, 56, 3, 2, 1),
    Case("1x1 256->64 @56", 256, 64, 56, 1, 1, 0),
    Case("1x1 256->1024 @14", 256, 1024, 14, 1, 1, 0),
    Case("3x3 128->128 @28 per-ch zw", 128, 128, 28, 3, 1, 1, per_channel_zp=True),
    Case("3x3 g32 512 @14 (16/grp)", 512, 512, 14, 3, 1, 1, groups=32),
    Case("3x3 g32 128 @56 (4/grp)", 128, 128, 56, 3, 1, 1, groups=32),
    Case("3x3 depthwise 144 @56", 144, 144, 56, 3, 1, 1, groups=144),
]


def time_ms(fn: Callable[[int], Any], inner: int, reps: int, warmup: int) -> float:
    """Median per-call GPU time (ms) of `fn(i)` over `reps` batches of `inner` calls."""
    for i in range(warmup):
        fn(i)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(reps):
        # A spin of ~2 ms + 1 ms per call: the host queues the whole batch meanwhile, so the
        # events time the GPU work of the calls, not the host's launch overhead.
        torch.cuda._sleep(2_000_000 * (2 + inner))
        start.record()
        for i in range(inner):
            fn(i)
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) / inner)
    return statistics.median(samples)


def host_us(fn: Callable[[int], Any], calls: int = 20) -> float:
    """Median host time to issue one call (the GPU is kept busy, so nothing waits for it)."""
    samples = []
    for i in range(calls):
        torch.cuda._sleep(2_000_000)
        t0 = time.perf_counter()
        fn(i)
        samples.append((time.perf_counter() - t0) * 1e6)
    torch.cuda.synchronize()
    return statistics.median(samples)


def kernel_ms(fn: Callable[[int], Any], calls: int) -> tuple[float, dict[str, float]]:
    """GPU time per call summed over its kernels and copies (the profiler's CUPTI view sees
    CuPy's launches too), and the per-kernel split in microseconds."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for i in range(calls):
            fn(i)
        torch.cuda.synchronize()
    split = {
        e.key[:60]: e.self_device_time_total / calls
        for e in prof.key_averages()
        if e.device_type.name == "CUDA"
    }
    return sum(split.values()) / 1000.0, split


def case_inputs(case: Case, batch: int) -> tuple[list[Any], Any, np.ndarray, tuple[Any, ...]]:
    """Three inputs (rotated through by the timings), the filter, its zero points and the
    geometry (strides, dilations, start and end padding) of `case`."""
    rng = np.random.default_rng(0)
    n, c, m, g = batch, case.c, case.m, case.groups
    xs = [cupy.asarray(rng.integers(0, 256, (n, c, case.hw, case.hw), dtype=np.uint8))]
    xs += [xs[0][:, ::-1].copy(), (xs[0] ^ 0x5A)]
    w = cupy.asarray(rng.integers(-128, 128, (m, c // g, case.k, case.k), dtype=np.int8))
    if case.per_channel_zp:
        zw = rng.integers(-20, 21, m).astype(np.int32)
    else:
        zw = np.zeros(m, np.int32)
    geo = ((case.stride,) * 2, (1, 1), (case.pad,) * 2, (case.pad,) * 2)
    return xs, w, zw, geo


def stored_channels_last(xs: list[Any]) -> list[Any]:
    """The same values, each input stored (N, H, W, C) (an NCHW view of it)."""
    return [x.transpose(0, 2, 3, 1).copy().transpose(0, 3, 1, 2) for x in xs]


def profile(cases: list[Case], batch: int, channels_last: bool = False) -> None:
    """One registered-operator call per layer (its filter kept, its plan timed and chosen in
    the first of three warm-up calls) between cudaProfilerStart and Stop, for `ncu
    --profile-from-start off`; prints ``profiled: <layer>`` before each. `channels_last`: the
    input stored (N, H, W, C)."""
    for case in cases:
        xs, w, zw, geo = case_inputs(case, batch)
        if channels_last:
            xs = stored_channels_last(xs)
        kept: dict[Any, Any] = {}
        for _ in range(3):
            convolution_integer(xs[0], w, 128, zw, *geo, case.groups, filter_cache=kept)
        cupy.cuda.Device().synchronize()
        print(f"profiled: {case.name}", flush=True)
        cupy.cuda.profiler.start()
        convolution_integer(xs[0], w, 128, zw, *geo, case.groups, filter_cache=kept)
        cupy.cuda.Device().synchronize()
        cupy.cuda.profiler.stop()


def cudnn_on(xs: list[Any], w: Any, case: Case) -> Callable[[int], Any]:
    """cuDNN's fp16 convolution of `case` (one group) on our values: `xs` and `w` as half
    tensors stored channels-last, its algorithm autotuned (`cudnn.benchmark`); call i takes
    xs[i % 3]."""
    halves = [
        torch.as_tensor(x.astype(cupy.float16), device="cuda").contiguous(
            memory_format=torch.channels_last
        )
        for x in xs
    ]
    w16 = torch.as_tensor(w.astype(cupy.float16), device="cuda").contiguous(
        memory_format=torch.channels_last
    )
    torch.backends.cudnn.benchmark = True

    def cudnn(i: int) -> Any:
        return F.conv2d(halves[i % 3], w16, padding=case.pad, stride=case.stride)

    return cudnn


def kept_plan(filter_cache: dict[Any, Any]) -> str:
    """The plan a registration's timing kept (its only shape's): the TMA-fed kernel's tile,
    the shifted-window GEMM's forced choice, or "planned" (the model's)."""
    (choice,) = filter_cache.get("tuned", {None: None}).values()
    if choice is None:
        return "planned"
    if isinstance(choice, TmaTile):
        return str(choice)
    return f"shift {choice}"


def run_case(case: Case, batch: int, inner: int, reps: int, sweep: bool) -> dict[str, Any]:
    n, c, m, g = batch, case.c, case.m, case.groups
    oh = (case.hw + 2 * case.pad - case.k) // case.stride + 1
    ops = 2 * n * m * oh * oh * (c // g) * case.k * case.k
    xs, w, zw, geo = case_inputs(case, batch)

    def ours(i: int) -> Any:
        return convolution_integer(xs[i % 3], w, 128, zw, *geo, g)

    row: dict[str, Any] = {"case": case.name, "shape": [n, c, case.hw, m, case.k], "ops": ops}
    row["x_bytes"], row["out_bytes"] = xs[0].nbytes, 4 * n * m * oh * oh
    row["ours_ms"] = time_ms(ours, inner, reps, 5)
    row["host_us"] = host_us(ours)
    filter_cache: dict[Any, Any] = {}  # a registered operator's: its filter is a constant

    def registered(i: int) -> Any:
        return convolution_integer(xs[i % 3], w, 128, zw, *geo, g, filter_cache=filter_cache)

    row["registered_ms"] = time_ms(registered, inner, reps, 5)
    mod = importlib.import_module("dmlserve.kernels.cupy_backend.convolution_integer")
    ran: list[Any] = []
    mod.convolution_integer(xs[0], w, 128, zw, *geo, g, ran=ran)
    kinds = {mod.PointwisePlan: "pointwise", mod.GroupedPlan: "grouped"}
    shifts = {"wgmma_shift": "shifted-window GEMM", "wgmma_shift_gather": "NCHW-reading GEMM"}
    on_shift = isinstance(ran[0], str) and ran[0] in shifts
    if type(ran[0]) in kinds or on_shift:  # timed beside the path it replaced
        previous_options = mod.Options(pointwise=False, grouped=False, shifted=False)
        if ran[0] == "wgmma_shift_gather":  # the same GEMM on the transformed input
            previous_options = mod.Options(gather=False)
        previous_cache: dict[Any, Any] = {}

        def previous(i: int) -> Any:
            return mod.convolution_integer(xs[i % 3], w, 128, zw, *geo, g, previous_options)

        def previous_registered(i: int) -> Any:
            return mod.convolution_integer(
                xs[i % 3], w, 128, zw, *geo, g, previous_options, filter_cache=previous_cache
            )

        row["kernel"] = kinds.get(type(ran[0])) or shifts[ran[0]]
        row["ours_previous_ms"] = time_ms(previous, inner, reps, 3)
        row["ours_previous_registered_ms"] = time_ms(previous_registered, inner, reps, 3)
    if on_shift:  # the same GEMM with K unsplit (the planner may split it)
        unsplit_options = mod.Options(split_k=1)
        unsplit_cache: dict[Any, Any] = {}

        def unsplit(i: int) -> Any:
            return mod.convolution_integer(
                xs[i % 3], w, 128, zw, *geo, g, unsplit_options, filter_cache=unsplit_cache
            )

        row["unsplit_registered_ms"] = time_ms(unsplit, inner, reps, 3)
    if on_shift:  # the same values stored (N, H, W, C), as cuDNN gets them, read where they lie
        xs_last = stored_channels_last(xs)
        last_ran: list[Any] = []
        mod.convolution_integer(xs_last[0], w, 128, zw, *geo, g, ran=last_ran)
        row["channels_last_kernel"] = last_ran[0]
        last_cache: dict[Any, Any] = {}

        def last(i: int) -> Any:
            return convolution_integer(xs_last[i % 3], w, 128, zw, *geo, g)

        def last_registered(i: int) -> Any:
            return convolution_integer(xs_last[i % 3], w, 128, zw, *geo, g, filter_cache=last_cache)

        row["channels_last_ms"] = time_ms(last, inner, reps, 5)
        row["channels_last_registered_ms"] = time_ms(last_registered, inner, reps, 5)
        row["channels_last_registered_plan"] = kept_plan(last_cache)
    if isinstance(ran[0], mod.PointwisePlan):  # each of the pointwise kernel's forms it allows
        row["pointwise_form"] = ran[0].form
        row["pointwise_forms_ms"] = {}
        for form in ("ring", "resident", "wgmma"):
            form_options = mod.Options(pointwise_form=form)
            form_ran: list[Any] = []
            mod.convolution_integer(xs[0], w, 128, zw, *geo, g, form_options, ran=form_ran)
            if form_ran[0].form == form:

                def formed(i: int, o: Any = form_options) -> Any:
                    return mod.convolution_integer(xs[i % 3], w, 128, zw, *geo, g, o)

                row["pointwise_forms_ms"][form] = time_ms(formed, inner, reps, 3)
    if c // g < 8 or m // g < 8:  # CUDA-core kernel: also without the next-image prefetch

        def variant(options: Any) -> Callable[[int], Any]:
            return lambda i: mod.convolution_integer(xs[i % 3], w, 128, zw, *geo, g, options)

        if c // g in (1, 2, 4):  # band kernel: the tiled kernel it replaced, in the same run
            row["ours_tiled_ms"] = time_ms(variant(mod.Options(depthwise=False)), inner, reps, 3)
            # the band kernel's multiply-add form (the default takes dp4a tap rows here)
            madd = variant(mod.Options(depthwise_dp4a=False))
            row["ours_band_madd_ms"] = time_ms(madd, inner, reps, 3)
        tiled = mod.Options(depthwise=False, prefetch=False)
        row["ours_no_prefetch_ms"] = time_ms(variant(tiled), inner, reps, 3)
        row["tiled_variants_ms"] = {}
        for v in (4, 8):  # outputs per thread x CTAs per SM aimed at (images per CTA follow)
            for per_sm in (4, 8, 16, 32):
                options = mod.Options(depthwise=False, outputs_per_thread=v, ctas_per_sm=per_sm)
                key = f"v{v}_ctas{per_sm}"
                row["tiled_variants_ms"][key] = time_ms(
                    variant(options), inner, max(3, reps // 3), 2
                )
    try:
        row["ours_kernels_ms"], row["ours_kernel_split_us"] = kernel_ms(ours, 10)
    except Exception as exc:  # noqa: BLE001 - the profiler is optional evidence
        row["profiler_error"] = repr(exc)

    # cuDNN fp16, channels-last.
    xh = [torch.randn(n, c, case.hw, case.hw, device="cuda", dtype=torch.half) for _ in range(3)]
    xh = [t.contiguous(memory_format=torch.channels_last) for t in xh]
    wh = torch.randn(m, c // g, case.k, case.k, device="cuda", dtype=torch.half)
    wh = wh.contiguous(memory_format=torch.channels_last)

    def cudnn(i: int) -> Any:
        return F.conv2d(xh[i % 3], wh, None, case.stride, case.pad, 1, g)

    # Both of cuDNN's algorithm choices, the faster as the peer: its autotuner
    # (`cudnn.benchmark`, once per process and shape) now and then keeps a slower algorithm
    # than its heuristics pick (1x1 256->1024 @14: 13.8 µs against 10.0 in one process of four).
    row["cudnn_fp16_autotuned_ms"] = time_ms(cudnn, inner, reps, 5)
    torch.backends.cudnn.benchmark = False
    row["cudnn_fp16_heuristic_ms"] = time_ms(cudnn, inner, reps, 5)
    torch.backends.cudnn.benchmark = True
    row["cudnn_fp16_ms"] = min(row["cudnn_fp16_autotuned_ms"], row["cudnn_fp16_heuristic_ms"])

    if sweep and c // g >= 8 and m // g >= 8:  # every tensor-core tile, to check the picker
        gemm = importlib.import_module("dmlserve.kernels.cupy_backend._convolution_integer_gemm")

        row["tiles"] = {}
        sm90 = str(cupy.cuda.Device().compute_capability) == "90"
        kernels = [("mma_sync", gemm.MMA_SYNC_TILES)]
        kernels += [("wgmma", gemm.WGMMA_TILES)] if sm90 else []
        for kernel, tiles in kernels:
            for bm, bn, *_ in tiles:
                options = mod.Options(tile=(bm, bn), tensor_cores=kernel)

                def tiled(i: int, o: Any = options) -> Any:
                    return mod.convolution_integer(xs[i % 3], w, 128, zw, *geo, g, o)

                key = f"{kernel} {bm}x{bn}"
                row["tiles"][key] = time_ms(tiled, inner, max(3, reps // 3), 2)
        if on_shift:  # the shifted-window GEMM's tiles, filter kept prepared
            for wm, wn, bn, *_ in gemm.SHIFT_TILES:
                shifted = mod.Options(shifted=(wm, wn, bn))
                kept: dict[Any, Any] = {}

                def shift_tiled(i: int, o: Any = shifted, c: Any = kept) -> Any:
                    return mod.convolution_integer(xs[i % 3], w, 128, zw, *geo, g, o, None, c)

                key = f"shift {64 * wm}x{wn * bn} registered"
                row["tiles"][key] = time_ms(shift_tiled, inner, max(3, reps // 3), 2)

    # Torch-user path: unfold (fp16) -> int8 columns -> _int_mm with column-major B.
    kk = c * case.k * case.k
    rows_mm = n * oh * oh  # _int_mm wants more than 16 rows and every size a multiple of 8
    if g == 1 and kk % 8 == 0 and m % 8 == 0 and rows_mm % 8 == 0 and rows_mm > 16:
        xt = [torch.as_tensor(x.view(np.int8), device="cuda") for x in xs]  # int8 data for _int_mm
        wt = torch.as_tensor(w, device="cuda").reshape(m, kk).contiguous().t()  # column-major

        def unfold_mm(i: int) -> Any:
            cols = F.unfold(xt[i % 3].half(), case.k, 1, case.pad, case.stride)
            cols = cols.transpose(1, 2).reshape(-1, kk).to(torch.int8)
            return torch._int_mm(cols, wt)

        row["unfold_int_mm_ms"] = time_ms(unfold_mm, inner, reps, 3)
        cols0 = F.unfold(xt[0].half(), case.k, 1, case.pad, case.stride)
        cols0 = cols0.transpose(1, 2).reshape(-1, kk).to(torch.int8).contiguous()
        row["int_mm_gemm_ms"] = time_ms(lambda i: torch._int_mm(cols0, wt), inner, reps, 3)
        del cols0
    for key in list(row):
        if key.endswith("_ms") and isinstance(row[key], float):
            row[key.replace("_ms", "_tops")] = ops / (row[key] * 1e-3) / 1e12
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    ap.add_argument("--sweep", action="store_true", help="also time every GEMM tile shape")
    ap.add_argument("--only-3x3", action="store_true", help="the ungrouped 3x3 layers alone")
    ap.add_argument(
        "--only", action="append", default=[], help="layers whose name holds this (repeatable)"
    )
    ap.add_argument(
        "--profile",
        action="store_true",
        help="no timings: one call per layer for ncu --profile-from-start off",
    )
    ap.add_argument(
        "--channels-last",
        action="store_true",
        help="with --profile: the input stored (N, H, W, C)",
    )
    args = ap.parse_args()
    cases = [c for c in CASES if c.k == 3 and c.groups == 1] if args.only_3x3 else CASES
    cases = [c for c in cases if not args.only or any(o in c.name for o in args.only)]
    if args.profile:
        profile(cases, args.batch, args.channels_last)
        return
    torch.backends.cudnn.benchmark = True
    inner, reps = (5, 5) if args.quick else (10, 15)
    props = torch.cuda.get_device_properties(0)
    header = {
        "device": torch.cuda.get_device_name(0),
        "sms": props.multi_processor_count,
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "torch": torch.__version__,
        "cudnn": torch.backends.cudnn.version(),
        "cupy": cupy.__version__,
        "cuda_runtime": cupy.cuda.runtime.runtimeGetVersion(),
        "batch": args.batch,
        "command": " ".join(sys.argv),
    }
    print(conv_report.header_text(header), flush=True)
    rows = []
    for case in cases:
        r = run_case(case, args.batch, inner, reps, args.sweep)
        rows.append(r)
        print(conv_report.row_line(r), flush=True)
        if args.json:
            args.json.write_text(json.dumps({"header": header, "rows": rows}, indent=2))
    tail = conv_report.tail_text(rows, args.sweep)
    if tail:
        print(tail, flush=True)


if __name__ == "__main__":
    main()
