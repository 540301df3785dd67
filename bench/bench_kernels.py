"""Time the CuPy PADDING, UNFOLD, FOLD and AVERAGE_POOLING kernels against their PyTorch peers.

One run measures a device-to-device copy (the bandwidth ceiling), every kernel and its
PyTorch peer on the same device and data (shared through DLPack). GPU time: medians of
CUDA-event-timed batches of back-to-back calls queued behind a spin kernel (host overhead
hidden); call time: medians of single event-timed calls from an idle GPU (host overhead
included; ours and the peer's alternately, call by call). Three warm-up calls first. Inputs
smaller than 4x L2 rotate over several buffers so the numbers are DRAM numbers. Effective
bandwidth counts the minimal bytes (each input element read once, each output element written
once). Each case also checks our output against the peer's where the semantics coincide. A
case name ending in ``[path]`` forces that kernel (the launchers' ``*_on`` functions), to
compare kernels on the same data; the unmarked case is the launcher's own choice. The
``small`` cases (one 1x3x32x32 image) are about the call time, host overhead included.

    python3 bench/bench_kernels.py [--json out.json] [--repeat 30] [--only avgpool]
    python3 bench/bench_kernels.py --profile [--only ...]   # each case twice, for ncu
    python3 bench/bench_kernels.py --chosen ...              # the launchers' choices only
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

import importlib  # noqa: E402

import cupy  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from dmlserve.kernels.geometry import Window  # noqa: E402

PAD = importlib.import_module("dmlserve.kernels.cupy_backend.padding")
UNFOLD = importlib.import_module("dmlserve.kernels.cupy_backend.unfold")
FOLD = importlib.import_module("dmlserve.kernels.cupy_backend.fold")
POOL = importlib.import_module("dmlserve.kernels.cupy_backend.average_pooling")
PROFILE = False  # --profile: run each case's kernel twice, no timing (for ncu)
CHOSEN_ONLY = False  # --chosen: skip the cases that force a kernel (names ending in [path])

ROTATE_BYTES = 256 * 2**20  # > 4x the 50-60 MB L2 of an H100/H200
MAX_BUFFERS = 16


BATCH = 10
SPIN_CYCLES = 10_000_000  # ~5 ms at 1.98 GHz: longer than the host needs to queue a batch


def call_ms(fn: Callable[[int], Any], repeat: int) -> float:
    """Median time of one call from an idle GPU: host overhead (Python, launch) included."""
    for i in range(3):
        fn(i)
    times = []
    for i in range(repeat):
        start, end = torch_event(), torch_event()
        start.record()
        fn(i)
        end.record()
        end.synchronize()
        times.append(float(start.elapsed_time(end)))
    return statistics.median(times)


def call_pair_ms(
    ours: Callable[[int], Any], peer: Callable[[int], Any], repeat: int
) -> tuple[float, float]:
    """`call_ms` of two functions taken alternately, call by call, so that drift of the host
    (clocks, other load) falls on both alike."""
    for i in range(3):
        ours(i)
        peer(i)
    times: tuple[list[float], list[float]] = ([], [])
    for i in range(repeat):
        for fn, out in ((ours, times[0]), (peer, times[1])):
            start, end = torch_event(), torch_event()
            start.record()
            fn(i)
            end.record()
            end.synchronize()
            out.append(float(start.elapsed_time(end)))
    return statistics.median(times[0]), statistics.median(times[1])


def gpu_ms(fn: Callable[[int], Any], repeat: int) -> float:
    """Median GPU time per call: a spin kernel queued first lets the host run ahead, so a batch
    of BATCH calls is timed back to back on the device, without host overhead."""
    for i in range(3):
        fn(i)
    torch.cuda.synchronize()
    times = []
    for r in range(repeat):
        start, end = torch_event(), torch_event()
        torch.cuda._sleep(SPIN_CYCLES)
        start.record()
        for j in range(BATCH):
            fn(r * BATCH + j)
        end.record()
        end.synchronize()
        times.append(float(start.elapsed_time(end)) / BATCH)
    return statistics.median(times)


def torch_event() -> Any:
    # CuPy's and PyTorch's default streams are both the legacy default stream, so these
    # events order with CuPy launches too.
    return torch.cuda.Event(enable_timing=True)


def random_buffers(shape: tuple[int, ...], dtype: Any) -> list[Any]:
    """Several random CuPy arrays of `shape`, enough to exceed L2 when cycled."""
    nbytes = math.prod(shape) * np.dtype(dtype).itemsize
    count = max(1, min(MAX_BUFFERS, math.ceil(ROTATE_BYTES / nbytes)))
    rng = cupy.random.default_rng(0)
    out = []
    for _ in range(count):
        if np.dtype(dtype).kind == "f":
            values = rng.random(size=shape, dtype=np.float32) * 1.5 + 0.5
        else:
            values = cupy.random.randint(1, 100, size=shape)
        out.append(values.astype(dtype))
    return out


def as_torch(xs: list[Any]) -> list[torch.Tensor]:
    return [torch.from_dlpack(x) for x in xs]


def measure(
    name: str,
    shape: tuple[int, ...],
    dtype: Any,
    ours: Callable[[Any], Any],
    peer: Callable[[torch.Tensor], torch.Tensor] | None,
    out_numel: int,
    repeat: int,
    ceiling: float,
    rtol: float = 0.0,
) -> dict[str, Any]:
    xs = random_buffers(shape, dtype)
    if PROFILE:
        ours(xs[0])
        ours(xs[0])
        cupy.cuda.Device().synchronize()
        print(f"profiled: {name} ({np.dtype(dtype)})", flush=True)
        return {"case": name, "profiled": True}
    ts = as_torch(xs)
    t_ours = gpu_ms(lambda i: ours(xs[i % len(xs)]), repeat)
    row: dict[str, Any] = {"case": name, "dtype": str(np.dtype(dtype)), "ours_ms": t_ours}
    row["ours_call_ms"] = None
    itemsize = np.dtype(dtype).itemsize
    nbytes = (math.prod(shape) + out_numel) * itemsize
    row["ours_GBps"] = nbytes / t_ours / 1e6
    row["frac_copy"] = row["ours_GBps"] / ceiling
    row["torch_ms"] = row["torch_GBps"] = row["speedup"] = row["match"] = None
    row["torch_call_ms"] = None
    if peer is not None:
        t_peer = gpu_ms(lambda i: peer(ts[i % len(ts)]), repeat)
        row["torch_ms"] = t_peer
        row["ours_call_ms"], row["torch_call_ms"] = call_pair_ms(
            lambda i: ours(xs[i % len(xs)]), lambda i: peer(ts[i % len(ts)]), repeat
        )
        row["torch_GBps"] = nbytes / t_peer / 1e6
        row["speedup"] = t_peer / t_ours
        got = torch.from_dlpack(ours(xs[0])).double()
        want = peer(ts[0]).double().reshape(got.shape)
        row["match"] = bool(torch.allclose(got, want, rtol=rtol, atol=rtol))
    if row["ours_call_ms"] is None:
        row["ours_call_ms"] = call_ms(lambda i: ours(xs[i % len(xs)]), repeat)
    return row


def copy_ceiling(repeat: int) -> float:
    """GB/s (bytes read + written) of a 1 GiB device-to-device copy through CuPy."""
    src = cupy.random.default_rng(0).random(2**28, dtype=np.float32)
    dst = cupy.empty_like(src)
    t = gpu_ms(lambda i: dst.__setitem__(Ellipsis, src), repeat)
    return 2 * src.nbytes / t / 1e6


def cases(repeat: int, ceiling: float, only: list[str]) -> list[dict[str, Any]]:
    rows = []

    def add(*args: Any, **kwargs: Any) -> None:
        if only and not any(word in args[0] for word in only):
            return
        if CHOSEN_ONLY and args[0].endswith("]"):
            return
        try:
            rows.append(measure(*args, repeat=repeat, ceiling=ceiling, **kwargs))
        except Exception as exc:  # noqa: BLE001 - report the case and go on with the others
            print(f"case {args[0]!r} failed: {exc!r}", file=sys.stderr)
        cupy.get_default_memory_pool().free_all_blocks()

    def tag(path: str | None) -> str:
        return f" [{path}]" if path else ""

    # PADDING, 16x64x224x224; torch pad (3, 4, 1, 2): W 3 left 4 right, H 1 top 2 bottom.
    pad_shape = (16, 64, 224, 224)
    start, end = (0, 0, 1, 3), (0, 0, 2, 4)
    out_pad = 16 * 64 * 227 * 231
    torch_pad = (3, 4, 1, 2)
    peer_modes = {"CONSTANT": "constant", "EDGE": "replicate", "REFLECTION": "reflect"}
    peer_modes["WRAP"] = "circular"
    for dtype, modes, paths in (
        (np.float32, ["CONSTANT", "EDGE", "REFLECTION", "SYMMETRIC", "WRAP"], [None]),
        (np.float32, ["CONSTANT", "REFLECTION"], ["tiles", "chunks1"]),
        (np.float16, ["CONSTANT", "REFLECTION"], [None, "chunks"]),
        (np.int8, ["CONSTANT", "EDGE"], [None, "chunks"]),
    ):
        for mode in modes:
            value = np.dtype(dtype).type(3)
            peer_mode = peer_modes.get(mode)
            if dtype == np.int8 and mode != "CONSTANT":
                peer_mode = None  # torch has no int8 replicate/reflect on CUDA
            peer = None
            if peer_mode == "constant":
                peer = lambda t: F.pad(t, torch_pad, mode="constant", value=3)  # noqa: E731
            elif peer_mode is not None:
                peer = lambda t, m=peer_mode: F.pad(t, torch_pad, mode=m)  # noqa: E731
            for path in paths:
                add(
                    f"pad {mode.lower()} 16x64x224x224{tag(path)}",
                    pad_shape,
                    dtype,
                    lambda x, m=mode, v=value, p=path: PAD.padding_on(p, x, start, end, m, v),
                    peer,
                    out_pad,
                )
    # Large-pad (periodic) reflection: DirectML-only semantics.
    for path in (None, "chunks"):
        add(
            f"pad reflection pad>=size 64x64x16x16{tag(path)}",
            (64, 64, 16, 16),
            np.float32,
            lambda x, p=path: PAD.padding_on(
                p, x, (0, 0, 20, 20), (0, 0, 20, 20), "REFLECTION", np.float32(0)
            ),
            None,
            64 * 64 * 56 * 56,
        )

    # UNFOLD / FOLD
    def unfold_case(
        label: str,
        shape: tuple[int, ...],
        k: int,
        s: int,
        p: int,
        paths: tuple[str | None, ...],
        fold_paths: tuple[str | None, ...] | None = None,
    ) -> None:
        n, c, h, w = shape
        oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
        cols = n * c * k * k * oh * ow
        window = Window((k, k), (s, s), (1, 1), (p, p), (p, p))
        for path in paths:
            add(
                f"unfold {label}{tag(path)}",
                shape,
                np.float32,
                lambda x, q=path: UNFOLD.unfold_on(q, x, window),
                lambda t: F.unfold(t, k, dilation=1, padding=p, stride=s),
                cols,
            )
        for path in paths if fold_paths is None else fold_paths:
            add(
                f"fold {label}{tag(path)}",
                (n, c * k * k, oh * ow),
                np.float32,
                lambda x, q=path: FOLD.fold_on(q, x, (h, w), window),
                lambda t: F.fold(t, (h, w), k, dilation=1, padding=p, stride=s),
                n * c * h * w,
                rtol=1e-5,
            )

    unfold_case(
        "ViT 64x3x224x224 k16 s16",
        (64, 3, 224, 224),
        16,
        16,
        0,
        (None, "squares", "slabs", "patches", "chunks"),
    )
    folds = (None, "window2d_chunks", "chunks")
    unfolds = (None, "window2d_elements", "chunks")
    unfold_case("3x3 s1 p1 8x64x64x64", (8, 64, 64, 64), 3, 1, 1, unfolds, folds)
    unfold_case("3x3 s1 p1 32x128x28x28", (32, 128, 28, 28), 3, 1, 1, unfolds, folds)
    folds4 = (None, "window2d", "window2d_chunks", "chunks")
    unfold_case("4x4 s2 p1 16x32x128x128", (16, 32, 128, 128), 4, 2, 1, unfolds, folds4)

    # AVERAGE_POOLING (IncludePadding true = torch's count_include_pad=True)
    def pool_case(
        shape: tuple[int, ...],
        k: int,
        s: int,
        p: int,
        dtype: Any = np.float32,
        path: str | None = None,
    ) -> None:
        dims = len(shape) - 2
        outs = [(n + 2 * p - k) // s + 1 for n in shape[2:]]
        pool = F.avg_pool2d if dims == 2 else F.avg_pool3d
        window = Window((k,) * dims, (s,) * dims, (1,) * dims, (p,) * dims, (p,) * dims)
        add(
            f"avgpool{dims}d k{k}s{s}p{p} {'x'.join(map(str, shape))}{tag(path)}",
            shape,
            dtype,
            lambda x: POOL.average_pooling_on(path, x, window, True),
            lambda t: pool(t, k, s, p, ceil_mode=False, count_include_pad=True),
            shape[0] * shape[1] * math.prod(outs),
            rtol=1e-5 if dtype == np.float32 else 2e-3,
        )

    for shape, k, s, p, dtype, paths in (
        ((32, 64, 112, 112), 3, 1, 1, np.float32, [None, "bands", "strip", "tiled"]),
        ((32, 64, 112, 112), 3, 2, 1, np.float32, [None, "packed", "bands", "strip", "rows"]),
        ((32, 64, 112, 112), 2, 2, 0, np.float32, [None, "rows16"]),
        ((32, 64, 112, 112), 2, 2, 0, np.float16, [None, "rows16"]),
        ((32, 64, 112, 112), 3, 1, 1, np.float16, [None, "packed", "bands", "strip", "tiled"]),
        ((1, 64, 224, 224), 3, 1, 1, np.float32, [None, "bands", "strip", "tiled"]),
        ((8, 32, 32, 64, 64), 3, 1, 1, np.float32, [None, "ring", "tiled"]),
        ((8, 32, 32, 64, 64), 3, 2, 1, np.float32, [None, "ring", "rows"]),
        ((8, 32, 32, 64, 64), 2, 2, 0, np.float32, [None, "rows16"]),
    ):
        for path in paths:
            pool_case(shape, k, s, p, dtype, path)

    # Small tensors: one 1x3x32x32 image; the call time (host overhead included) is the point.
    small = (1, 3, 32, 32)
    add(
        "small pad constant 1x3x32x32",
        small,
        np.float32,
        lambda x: PAD.padding(x, (0, 0, 1, 1), (0, 0, 1, 1), "CONSTANT", np.float32(0)),
        lambda t: F.pad(t, (1, 1, 1, 1), mode="constant", value=0),
        1 * 3 * 34 * 34,
    )
    window3 = Window((3, 3), (1, 1), (1, 1), (1, 1), (1, 1))
    for path in (None, "chunks"):
        add(
            f"small unfold 3x3 1x3x32x32{tag(path)}",
            small,
            np.float32,
            lambda x, q=path: UNFOLD.unfold_on(q, x, window3),
            lambda t: F.unfold(t, 3, dilation=1, padding=1, stride=1),
            27 * 1024,
        )
    for path in (None, "chunks"):
        add(
            f"small fold 3x3 1x3x32x32{tag(path)}",
            (1, 27, 1024),
            np.float32,
            lambda x, q=path: FOLD.fold_on(q, x, (32, 32), window3),
            lambda t: F.fold(t, (32, 32), 3, dilation=1, padding=1, stride=1),
            3 * 1024,
            rtol=1e-5,
        )
    add(
        "small avgpool2d k3s1p1 1x3x32x32",
        small,
        np.float32,
        lambda x: POOL.average_pooling(x, window3, True),
        lambda t: F.avg_pool2d(t, 3, 1, 1, ceil_mode=False, count_include_pad=True),
        3 * 1024,
        rtol=1e-5,
    )
    return rows


def fmt(v: Any, spec: str) -> str:
    return "n/a" if v is None else format(v, spec)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write the results here as JSON")
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--profile", action="store_true", help="run each case twice, untimed")
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        help="run cases whose name contains this (repeatable)",
    )
    parser.add_argument(
        "--chosen", action="store_true", help="only the launchers' own choices, no forced paths"
    )
    args = parser.parse_args()
    global PROFILE, CHOSEN_ONLY
    PROFILE = args.profile
    CHOSEN_ONLY = args.chosen
    if PROFILE:
        cases(1, 1.0, args.only)
        return

    props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
    header = {
        "device": props["name"].decode(),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "torch": torch.__version__,
        "cupy": cupy.__version__,
        "cuda_runtime": cupy.cuda.runtime.runtimeGetVersion(),
    }
    ceiling = copy_ceiling(args.repeat)
    header["copy_GBps"] = ceiling
    print(
        f"# bench_kernels: {header['device']}, {header['date']}, torch {header['torch']}, "
        f"cupy {header['cupy']}; copy ceiling {ceiling:.0f} GB/s (read + write)\n"
    )
    rows = cases(args.repeat, ceiling, args.only)
    print(
        "| case | dtype | ours µs | ours GB/s | of copy | torch µs | torch GB/s | speedup "
        "| ours call µs | torch call µs | match |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        us = {k: None if r[k] is None else 1e3 * r[k] for k in r if k.endswith("_ms")}
        print(
            f"| {r['case']} | {r['dtype']} | {us['ours_ms']:.1f} | {r['ours_GBps']:.0f} | "
            f"{r['frac_copy']:.0%} | {fmt(us['torch_ms'], '.1f')} | "
            f"{fmt(r['torch_GBps'], '.0f')} | "
            f"{fmt(r['speedup'], '.2f')} | {us['ours_call_ms']:.1f} | "
            f"{fmt(us['torch_call_ms'], '.1f')} | {fmt(r['match'], '')} |"
        )
    if args.json:
        args.json.write_text(json.dumps({"header": header, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
