"""The 3x3 layers' TMA-fed kernel tile by tile, beside the plan a registration keeps and cuDNN's
fp16 convolution: each of the tiles a registration times (`tma_tiles`), forced, as registered
calls (the filter kept, the calls launched as programmatic dependents) on the benchmark's
values stored (N, H, W, C), each timed as the benchmark times its calls.

Run on a GPU of compute capability 9.0, from the repository root:
``python3 bench/conv_tma_tiles.py [--batch 32 ...] [--only NAME ...]``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_convolution_integer as bench  # noqa: E402
import cupy  # noqa: E402

from dmlserve.kernels.cupy_backend import _convolution_integer_tma as tma  # noqa: E402
from dmlserve.kernels.cupy_backend.convolution_integer import (  # noqa: E402
    Options,
    _Problem,
    convolution_integer,
)


def run(case: bench.Case, batch: int) -> list[str]:
    """The layer's lines: cuDNN, the registration's kept plan, then each tile."""
    xs, w, zw, geo = bench.case_inputs(case, batch)
    stored = bench.stored_channels_last(xs)
    n, c, h, wd = stored[0].shape
    m = w.shape[0]
    oh = (h + 2 * case.pad - 3) // case.stride + 1
    ow = (wd + 2 * case.pad - 3) // case.stride + 1
    q = _Problem(n, c, h, wd, m, c, 3, 3, 1, oh, ow, case.stride, case.stride, 1, 1,
                 case.pad, case.pad, 128, zw)  # fmt: skip
    device = cupy.cuda.Device().id
    tiles = tma.tma_tiles(q, stored[0].shape, stored[0].strides, 16, device, zw=bool(zw.any()))

    def timed(options: Options) -> tuple[float, dict[Any, Any]]:
        cache: dict[Any, Any] = {}

        def call(i: int) -> Any:
            return convolution_integer(
                stored[i % 3], w, 128, zw, *geo, 1, options, filter_cache=cache
            )

        return bench.time_ms(call, 20, 15, 5) * 1e3, cache

    t_cudnn = bench.time_ms(bench.cudnn_on(xs, w, case), 20, 15, 5) * 1e3
    t_kept, cache = timed(Options())
    lines = [
        f"| {case.name} | {batch} | cuDNN fp16 | {t_cudnn:.2f} | 1.00 |",
        f"| {case.name} | {batch} | registered: {bench.kept_plan(cache)} | {t_kept:.2f} "
        f"| {t_cudnn / t_kept:.2f} |",
    ]
    for tile in tiles:
        t_tile, _ = timed(Options(tma=tile))
        lines.append(f"| {case.name} | {batch} | {tile} | {t_tile:.2f} | {t_cudnn / t_tile:.2f} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, nargs="+", default=[32])
    parser.add_argument("--only", nargs="+", help="layers by name")
    args = parser.parse_args()
    cases = [c for c in bench.CASES if c.k == 3 and c.groups == 1]
    if args.only:
        cases = [c for c in cases if c.name in args.only]
    print("| layer | batch | plan | µs | cuDNN / plan |\n|---|---|---|---|---|", flush=True)
    for batch in args.batch:
        for case in cases:
            for line in run(case, batch):
                print(line, flush=True)


if __name__ == "__main__":
    main()
