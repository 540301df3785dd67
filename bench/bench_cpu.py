"""Time the CPU backend against ONNX Runtime (CPU) and PyTorch (CPU) in one run.

Every case runs ours (`dmlserve.kernels.cpu`), ONNX Runtime and PyTorch on the same data with
the same thread count (BLAS threads for ours, `intra_op_num_threads` for ORT,
`torch.set_num_threads`), three warm-up calls each, then rounds that call every contestant once
in turn (so load from elsewhere on the machine hits all of them alike); the figure is the median
per contestant. Our output is checked against the reference (bit-exact, or within rounding for
AVERAGE_POOLING) and against each peer where the semantics coincide. The reference (today's
NumPy backend) is timed after the rounds, fewer times.

    python bench/bench_cpu.py [--threads 1] [--repeat 15] [--only conv] [--output FILE.md]

Needs `pip install -e '.[bench]'` (onnx, onnxruntime) and torch (`pip install torch==2.13.0`).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402
from threadpoolctl import threadpool_info, threadpool_limits  # noqa: E402

from dmlserve.kernels import cpu, reference  # noqa: E402
from dmlserve.kernels.geometry import Window  # noqa: E402

Fn = Callable[[], Any]


@dataclass
class Case:
    name: str
    group: str  # PADDING, AVERAGE_POOLING, FOLD, UNFOLD, CONVOLUTION_INTEGER
    ours: Fn
    ref: Fn
    peers: dict[str, Fn] = field(default_factory=dict)
    exact: bool = True  # ours vs reference bit for bit (else within float32 rounding)
    peer_exact: dict[str, bool] = field(default_factory=dict)


def ort_session(nodes: list[Any], inputs: list[Any], outputs: list[Any], inits: list[Any],
                opset: int, threads: int) -> ort.InferenceSession:  # fmt: skip
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=inits)
    # IR version 10 (opset 19's): older ONNX Runtime builds refuse the newest IR versions.
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def vinfo(name: str, dtype: int) -> Any:
    return helper.make_tensor_value_info(name, dtype, None)


F32, U8, I8, I32, I64 = (TensorProto.FLOAT, TensorProto.UINT8, TensorProto.INT8,
                         TensorProto.INT32, TensorProto.INT64)  # fmt: skip


def padding_case(shape: tuple[int, ...], mode: str, pads: tuple[int, int], t: int) -> Case:
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape, dtype=np.float32)
    a, e = pads
    start, end = (0, 0, a, a), (0, 0, e, e)
    onnx_mode = {"REFLECTION": "reflect", "CONSTANT": "constant", "EDGE": "edge", "WRAP": "wrap"}
    torch_mode = {"REFLECTION": "reflect", "CONSTANT": "constant", "EDGE": "replicate",
                  "WRAP": "circular"}  # fmt: skip
    pads_init = helper.make_tensor("pads", I64, [8], [*start, *end])
    node = helper.make_node("Pad", ["x", "pads"], ["y"], mode=onnx_mode[mode])
    sess = ort_session([node], [vinfo("x", F32)], [vinfo("y", F32)], [pads_init], 19, t)
    xt = torch.from_numpy(x)
    value = np.float32(0)
    return Case(
        f"PADDING {mode.lower()} {'×'.join(map(str, shape))} fp32 (pads {a}, {e})",
        "PADDING",
        lambda: cpu.padding(x, start, end, mode, value),
        lambda: reference.padding(x, start, end, mode, value),
        {
            "ORT": lambda: sess.run(None, {"x": x})[0],
            "torch": lambda: F.pad(xt, (a, e, a, e), mode=torch_mode[mode]),
        },
        peer_exact={"ORT": True, "torch": True},
    )


def pooling_case(shape: tuple[int, ...], k: int, s: int, p: int, t: int) -> Case:
    rng = np.random.default_rng(2)
    x = rng.standard_normal(shape, dtype=np.float32)
    window = Window((k, k), (s, s), (1, 1), (p, p), (p, p))
    node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[k, k], strides=[s, s],
                            pads=[p, p, p, p], count_include_pad=1)  # fmt: skip
    sess = ort_session([node], [vinfo("x", F32)], [vinfo("y", F32)], [], 19, t)
    xt = torch.from_numpy(x)
    return Case(
        f"AVERAGE_POOLING {k}×{k} s{s} p{p} {'×'.join(map(str, shape))} fp32",
        "AVERAGE_POOLING",
        lambda: cpu.average_pooling(x, window, True),
        lambda: reference.average_pooling(x, window, True),
        {
            "ORT": lambda: sess.run(None, {"x": x})[0],
            "torch": lambda: F.avg_pool2d(xt, k, s, p, count_include_pad=True),
        },
        exact=False,
        peer_exact={"ORT": False, "torch": False},
    )


def fold_case(n: int, c: int, size: int, t: int) -> Case:
    rng = np.random.default_rng(3)
    window = Window((3, 3), (1, 1), (1, 1), (1, 1), (1, 1))
    cols = rng.standard_normal((n, c * 9, size * size), dtype=np.float32)
    image = helper.make_tensor("image_shape", I64, [2], [size, size])
    block = helper.make_tensor("block_shape", I64, [2], [3, 3])
    node = helper.make_node("Col2Im", ["x", "image_shape", "block_shape"], ["y"],
                            pads=[1, 1, 1, 1])  # fmt: skip
    sess = ort_session([node], [vinfo("x", F32)], [vinfo("y", F32)], [image, block], 18, t)
    ct = torch.from_numpy(cols)
    return Case(
        f"FOLD 3×3 p1 → {n}×{c}×{size}×{size} fp32",
        "FOLD",
        lambda: cpu.fold(cols, (size, size), window),
        lambda: reference.fold(cols, (size, size), window),
        {
            "ORT": lambda: sess.run(None, {"x": cols})[0],
            "torch": lambda: F.fold(ct, (size, size), 3, padding=1),
        },
        peer_exact={"ORT": False, "torch": False},
    )


def unfold_case(n: int, c: int, size: int, t: int) -> Case:
    rng = np.random.default_rng(4)
    window = Window((3, 3), (1, 1), (1, 1), (1, 1), (1, 1))
    x = rng.standard_normal((n, c, size, size), dtype=np.float32)
    xt = torch.from_numpy(x)
    return Case(
        f"UNFOLD 3×3 p1 {n}×{c}×{size}×{size} fp32",
        "UNFOLD",
        lambda: cpu.unfold(x, window),
        lambda: reference.unfold(x, window),
        {"torch": lambda: F.unfold(xt, 3, padding=1)},  # ONNX has no Im2Col
        peer_exact={"torch": True},
    )


def conv_case(n: int, c: int, m: int, size: int, k: int, s: int, t: int) -> Case:
    rng = np.random.default_rng(5)
    p = k // 2
    x = rng.integers(0, 256, (n, c, size, size), dtype=np.uint8)
    w = rng.integers(-128, 128, (m, c, k, k), dtype=np.int8)
    zx = 128
    w_zero = np.zeros(m, dtype=np.int32)
    geo = ((s, s), (1, 1), (p, p), (p, p), 1)
    node = helper.make_node("ConvInteger", ["x", "w", "xz"], ["y"], pads=[p, p, p, p],
                            strides=[s, s])  # fmt: skip
    w_init = helper.make_tensor("w", I8, w.shape, w.tobytes(), raw=True)
    xz_init = helper.make_tensor("xz", U8, [], [zx])
    sess = ort_session([node], [vinfo("x", U8)], [vinfo("y", I32)], [w_init, xz_init], 10, t)
    # PyTorch has no integer convolution on CPU: its float32 conv on the centred operands is
    # the speed class a PyTorch user would reach for (exact here only because these sums fit).
    xt = torch.from_numpy(x.astype(np.float32) - zx)
    wt = torch.from_numpy(w.astype(np.float32))
    name = f"CONVOLUTION_INTEGER {k}×{k} s{s} {c}→{m} @{size}, batch {n}, u8 (zp 128) × s8"
    return Case(
        name,
        "CONVOLUTION_INTEGER",
        lambda: cpu.convolution_integer(x, w, zx, w_zero, *geo),
        lambda: reference.convolution_integer(x, w, zx, w_zero, *geo),
        {
            "ORT": lambda: sess.run(None, {"x": x})[0],
            "torch fp32": lambda: F.conv2d(xt, wt, stride=s, padding=p),
        },
        peer_exact={"ORT": True, "torch fp32": False},
    )


def cases(t: int) -> list[Case]:
    out = []
    for shape in [(1, 64, 112, 112), (8, 64, 112, 112), (1, 64, 224, 224)]:
        out.append(padding_case(shape, "REFLECTION", (1, 2), t))
    out.append(padding_case((8, 64, 112, 112), "CONSTANT", (1, 2), t))
    for shape in [(1, 64, 112, 112), (8, 64, 112, 112), (1, 64, 224, 224)]:
        out.append(pooling_case(shape, 3, 1, 1, t))
    out.append(pooling_case((8, 64, 112, 112), 3, 2, 1, t))
    for n, size in [(1, 56), (8, 56), (1, 224)]:
        out.append(fold_case(n, 64, size, t))
    for n, size in [(1, 56), (8, 56), (1, 224)]:
        out.append(unfold_case(n, 64, size, t))
    layers = [  # ResNet-50: (C, M, size, kernel, stride)
        (64, 64, 56, 3, 1), (128, 128, 28, 3, 1), (256, 256, 14, 3, 1), (512, 512, 7, 3, 1),
        (128, 128, 56, 3, 2),
        (256, 64, 56, 1, 1), (64, 256, 56, 1, 1), (256, 1024, 14, 1, 1), (1024, 256, 14, 1, 1),
    ]  # fmt: skip
    for n in (1, 8):
        for c, m, size, k, s in layers:
            out.append(conv_case(n, c, m, size, k, s, t))
    return out


def as_numpy(value: Any) -> np.ndarray:
    return value.numpy() if isinstance(value, torch.Tensor) else np.asarray(value)


def check(case: Case) -> str:
    ours = case.ours()
    ref = case.ref()
    notes = []
    if case.exact:
        assert ours.dtype == ref.dtype and np.array_equal(ours, ref), case.name
        notes.append("= reference")
    else:
        np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-6)
        notes.append("≈ reference")
    for peer, fn in case.peers.items():
        got = as_numpy(fn())
        if case.peer_exact.get(peer):
            same = got.shape == ours.shape and np.array_equal(got, ours)
            notes.append(f"{'=' if same else '≠'} {peer}")
        else:
            close = got.shape == ours.shape and np.allclose(got, ours, rtol=1e-4, atol=1e-4)
            notes.append(f"{'≈' if close else '≠'} {peer}")
    return ", ".join(notes)


def timed(fn: Fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure(case: Case, repeat: int, ref_repeat: int) -> dict[str, float]:
    contestants = {"ours": case.ours, **case.peers}
    for fn in contestants.values():
        for _ in range(3):
            fn()
    samples: dict[str, list[float]] = {name: [] for name in contestants}
    for _ in range(repeat):
        for name, fn in contestants.items():
            samples[name].append(timed(fn))
    result = {name: statistics.median(v) * 1e3 for name, v in samples.items()}
    case.ref()
    result["reference"] = statistics.median(timed(case.ref) for _ in range(ref_repeat)) * 1e3
    return result


GOALS = {"PADDING": 2.0, "AVERAGE_POOLING": 2.0, "FOLD": 2.0, "UNFOLD": 2.0,
         "CONVOLUTION_INTEGER": 3.0}  # fmt: skip


def header(threads: int, argv: list[str]) -> list[str]:
    blas = [f"{i['internal_api']} {i['version']} ({i.get('architecture', '?')})"
            for i in threadpool_info() if i["user_api"] == "blas"]  # fmt: skip
    cpu_name = next(
        (line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
         if line.startswith("model name")), platform.processor())  # fmt: skip
    return [
        "# CPU backend against ONNX Runtime and PyTorch",
        "",
        f"- machine: {cpu_name}, {os.cpu_count()} logical CPUs",
        f"- software: {platform.platform()}, Python {platform.python_version()}, "
        f"NumPy {np.__version__} ({', '.join(blas)}), ONNX Runtime {ort.__version__}, "
        f"onnx {onnx.__version__}, PyTorch {torch.__version__}",
        f"- date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC",
        f"- command: `python bench/bench_cpu.py {' '.join(argv)}`",
        f"- threads: {threads} for every contestant (BLAS for ours, intra-op for ORT and torch)",
        f"- 1-minute load average at start: {os.getloadavg()[0]:.1f}",
        "- milliseconds, medians of interleaved rounds after 3 warm-up calls; reference = "
        "today's NumPy backend; ratio = ours / the faster peer (below 1: ours is faster)",
        "",
        "| case | ours | ORT | PyTorch | reference | ours / faster peer | goal | check |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- | --- |",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--ref-repeat", type=int, default=3)
    parser.add_argument("--only", default="", help="substring of the case names to run")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    lines = header(args.threads, sys.argv[1:])
    load_start = os.getloadavg()[0]
    with threadpool_limits(args.threads, user_api="blas"):
        for case in cases(args.threads):
            if args.only.lower() not in case.name.lower():
                continue
            note = check(case)
            ms = measure(case, args.repeat, args.ref_repeat)
            peers = [ms[p] for p in case.peers]
            ratio = ms["ours"] / min(peers)
            goal = GOALS[case.group]
            peer_col = {"ORT": "–", "torch": "–"}
            for p in case.peers:
                peer_col["ORT" if p == "ORT" else "torch"] = f"{ms[p]:.2f}"
            verdict = "met" if ratio <= goal else "MISSED"
            if case.group == "CONVOLUTION_INTEGER":
                ratio = ms["ours"] / ms["ORT"]
                verdict = "met" if ratio <= goal else "MISSED"
            row = (
                f"| {case.name} | {ms['ours']:.2f} | {peer_col['ORT']} | {peer_col['torch']} "
                f"| {ms['reference']:.2f} | {ratio:.2f} | ≤ {goal:g}× {verdict} | {note} |"
            )
            lines.append(row)
            print(row, flush=True)
    lines += [
        "",
        f"1-minute load average at start / end: {load_start:.1f} / {os.getloadavg()[0]:.1f}.",
        "CONVOLUTION_INTEGER's ratio and goal are against ORT's ConvInteger alone; the PyTorch "
        "column there is float32 `conv2d` on the centred operands (no integer convolution "
        "exists in PyTorch on CPU), shown for scale.",
    ]
    text = "\n".join(lines) + "\n"
    if args.output:
        args.output.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
