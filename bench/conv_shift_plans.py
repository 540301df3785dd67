"""Every plan of the shifted-window GEMM on the benchmark's 3x3 layers of one group, timed as a
registered operator's calls: each tile, the input read in place (where its planes allow; its
virtual pixels' pads shared or not) or transformed, K unsplit or split 2-4 ways, and the
tap-by-tap GEMM; beside them the plan a registration keeps (timed on its first call) and
cuDNN's fp16 channels-last convolution. Prints one line per layer: the plans fastest first,
``g`` (in place), ``s`` (in place, pads shared) or ``x`` (transformed), the tile (warpgroups
along M and N, pixels per warpgroup) and the splits, or ``tap`` (the tap-by-tap GEMM), in µs
(with no pads to share, ``s`` and ``g`` are the same plan).

Run on a GPU of compute capability 9.0, from the repository root:
``python3 bench/conv_shift_plans.py [--batch 32] [NAME ...]`` (NAME: a part of a layer's name).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_convolution_integer as bench  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

# the modules (the package's `convolution_integer` is the function)
conv = importlib.import_module("dmlserve.kernels.cupy_backend.convolution_integer")
gemm = importlib.import_module("dmlserve.kernels.cupy_backend._convolution_integer_gemm")


def layer(case: Any, batch: int) -> str:
    """One layer's line: cuDNN, the kept plan, then every plan, fastest first."""
    xs, w, zw, geo = bench.case_inputs(case, batch)

    def registered(options: Any) -> Any:
        kept: dict[Any, Any] = {}
        return lambda i: conv.convolution_integer(
            xs[i % 3], w, 128, zw, *geo, 1, options, filter_cache=kept
        )

    xh = [
        torch.randn(batch, case.c, case.hw, case.hw, device="cuda", dtype=torch.half).contiguous(
            memory_format=torch.channels_last
        )
        for _ in range(3)
    ]
    wh = torch.randn(case.m, case.c, 3, 3, device="cuda", dtype=torch.half).contiguous(
        memory_format=torch.channels_last
    )
    cudnn = bench.time_ms(lambda i: F.conv2d(xh[i % 3], wh, None, case.stride, case.pad), 10, 7, 3)
    kept = bench.time_ms(registered(conv.Options()), 10, 7, 3)
    plans = [(bench.time_ms(registered(conv.Options(shifted=False)), 10, 7, 3), "tap")]
    for wm, wn, bn, *_ in gemm.SHIFT_TILES:
        for letter, gather, shared in (("g", True, False), ("s", True, True), ("x", False, None)):
            for splits in range(1, 5):
                options = conv.Options(
                    shifted=(wm, wn, bn), gather=gather, split_k=splits, shared_pads=shared
                )
                ran: list[Any] = []
                conv.convolution_integer(xs[0], w, 128, zw, *geo, 1, options, ran)
                if ran[0] != ("wgmma_shift_gather" if gather else "wgmma_shift"):
                    continue  # not this plan's shape (planes, shared memory, chunks)
                t = bench.time_ms(registered(options), 10, 7, 3)
                plans.append((t, f"{letter}{wm}{wn}_{bn}x{splits}"))
    plans.sort()
    return (
        f"{case.name} b{batch}: cuDNN {cudnn * 1e3:.1f}, kept {kept * 1e3:.1f} "
        f"({cudnn / kept:.2f}x); " + " ".join(f"{n}={t * 1e3:.1f}" for t, n in plans)
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("names", nargs="*", default=["@"])
    args = ap.parse_args()
    torch.backends.cudnn.benchmark = True
    for case in bench.CASES:
        if case.k != 3 or case.groups != 1:
            continue
        if any(name in case.name for name in args.names):
            print(layer(case, args.batch), flush=True)


if __name__ == "__main__":
    main()
