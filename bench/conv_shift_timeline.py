"""Where the shifted-window GEMM's time goes, CTA by CTA: a copy of `conv_int_wgmma_shift` with
clock stamps (thread 0 of each CTA writes `clock64()` at each phase boundary of its first tiles,
and `%globaltimer` at its start and end) runs the call a registered operator makes on each of the
benchmark's 3x3 layers of one group (its filter kept, its plan timed and chosen on the first call
with the kernels as they are, then forced on the stamped one), and the phases are printed as
medians (and maxima) over the CTAs, in µs:

- start: from the CTA's first instruction to its first tile (the barriers' set-up, the first
  filter stages' bulk copies issued);
- gather: the tile's run of input pixels written into shared memory (z_x over it, then the
  image's pixels read where they lie; nothing where the input was transformed; for an input
  stored (N, H, W, C), its copies issued, the first stage then waiting for them to land);
- first stage: the wait for the tile's first filter block, and for every thread's part of the
  gather (thread 0 stamps the gather's end when its own part is done);
- MMAs: the tile's channel chunks, from its first chunk's barrier to its last MMA's completion;
- epilogue: the zero-point terms and the output's stores.

Beside them: the time per call (as the benchmark times it: the whole call, with the output's
memset where K is split and the input's transform where it is not read in place; the kernels
uninstrumented), an empty kernel launched with the same grid, block and shared memory (the
launch's own cost per call), the span from the first CTA's start to the last one's end, and the
spread of the CTAs' start times. The stamps add a few instructions per phase.

Run on a GPU of compute capability 9.0, from the repository root:
``python3 bench/conv_shift_timeline.py [--batch 32] [--model] [--inline] [--channels-last]
[NAME ...]`` (--channels-last: the same values stored (N, H, W, C) and read as they lie; NAME: a
part of a layer's name; --model: the planner's model's plan instead of the timed one, which
compiles every candidate plan's kernel first; --inline: the call without a registration, its
filter prepared by the kernel before the GEMM, with the model's plan, as an unregistered call
runs: "first stage" then includes the GEMM's wait for that prep). The source patches assert
the lines they rewrite, so a change to the kernel that moves them stops this tool with the line
it no longer finds.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_convolution_integer as bench  # noqa: E402
import cupy  # noqa: E402

from dmlserve.kernels.cupy_backend import _loader  # noqa: E402

conv = importlib.import_module("dmlserve.kernels.cupy_backend.convolution_integer")
gemm = importlib.import_module("dmlserve.kernels.cupy_backend._convolution_integer_gemm")
common = importlib.import_module("dmlserve.kernels.cupy_backend._common")

SOURCE = "convolution_integer_sm90a.cu"
TILES = 4  # tiles a CTA stamps
STAMPS = 8  # per tile: 0 unused, 1 tile start, 2 run gathered, 3 first filter block, 5 MMAs done,
# 6 epilogue done
PHASES = ("start", "gather", "first stage", "MMAs", "epilogue")


def _patched(source: str) -> str:
    """The kernel source with the stamps."""

    def swap(text: str, new: str) -> None:
        nonlocal source
        assert source.count(text) == 1, f"not found once in the kernel: {text[:70]!r}"
        source = source.replace(text, new)

    swap(
        "namespace dml {\nnamespace wg {",
        f"__device__ long long dml_stamps[1024 * {TILES * STAMPS}];\n"
        "__device__ unsigned long long dml_ends[1024 * 4];\nnamespace dml {\nnamespace wg {",
    )
    swap(
        "    __shared__ __align__(8) unsigned long long full_bar_mem[STAGES];",
        "    unsigned long long stamp_g0;\n"
        '    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(stamp_g0));\n'
        "    const long long stamp_c0 = clock64();\n"
        "    int stamp_tile = 0;\n"
        "    auto stamp = [&](int k) {\n"
        f"        if (threadIdx.x == 0 && stamp_tile < {TILES})\n"
        f"            dml_stamps[(blockIdx.x * {TILES} + stamp_tile) * {STAMPS} + k] = clock64();\n"
        "    };\n"
        "    __shared__ __align__(8) unsigned long long full_bar_mem[STAGES];",
    )
    swap(
        "        const long long v0 = static_cast<long long>(tn) * TN;\n",
        "        const long long v0 = static_cast<long long>(tn) * TN;\n        stamp(1);\n",
    )
    published = (
        "            conv::fence_proxy_async();  // published by the barrier of the tile's first"
        " chunk\n"
    )
    swap(published, published + "            stamp(2);\n")
    first = "            const unsigned a_base = smem_base + (it % STAGES) * stage_bytes;"
    swap(first, "            if (kc == 0) stamp(3);\n" + first)
    epilogue = "        wg::wait<0>();\n        // ---- the tile's epilogue"
    swap(epilogue, epilogue.replace("// ----", "stamp(5);\n        // ----"))
    end = "        }\n    }\n    conv::cp_async_wait<0>();\n#endif\n}\n\n// ---- 1x1 layers"
    swap(
        end,
        "        }\n        stamp(6);\n        ++stamp_tile;\n    }\n"
        "    conv::cp_async_wait<0>();\n"
        "    if (threadIdx.x == 0) {\n"
        "        unsigned long long g1;\n"
        '        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g1));\n'
        "        dml_ends[blockIdx.x * 4] = stamp_g0;\n"
        "        dml_ends[blockIdx.x * 4 + 1] = g1;\n"
        "        dml_ends[blockIdx.x * 4 + 2] = stamp_c0;\n"
        "        dml_ends[blockIdx.x * 4 + 3] = clock64();\n"
        "    }\n#endif\n}\n\n// ---- 1x1 layers",
    )
    return source


def instrument(
    patched: Callable[[str], str], kernel: str = "conv_int_wgmma_shift"
) -> tuple[list[tuple[str, Any]], Any]:
    """Make the loader compile `SOURCE` as `patched` rewrites it; the modules it builds of
    `kernel` are appended to the returned list (expression, module). Also returned: what puts
    the loader back."""
    original, original_function = _loader._source, _loader._function
    stamped = patched(original(SOURCE))
    modules: list[tuple[str, Any]] = []

    def source(name: str) -> str:
        return stamped if name == SOURCE else original(name)

    @functools.cache
    def function(name: str, expression: str, options: tuple[str, ...]) -> Any:
        module = cupy.RawModule(
            code=source(name),
            options=_loader.BASE_OPTIONS + options,
            name_expressions=[expression],
        )
        module.compile()
        if kernel in expression:
            modules.append((expression, module))
        return module.get_function(expression)

    def forget() -> None:  # plans and launches hold compiled kernels
        gemm._plan.cache_clear()
        common._compiled.cache_clear()

    def restore() -> None:
        _loader._source, _loader._function = original, original_function
        forget()

    _loader._source = source
    _loader._function = function
    forget()
    return modules, restore


def _cells(values: np.ndarray) -> str:
    return f"{statistics.median(values):.2f} ({values.max():.2f})"


def layer(
    case: Any, batch: int, model: bool, inline: bool = False, channels_last: bool = False
) -> str:
    """One layer's table row: the plan a registration keeps (timed on its first call, with the
    kernels as they are; `model`: the model's plan, untimed), then that plan forced on the
    stamped kernel; `inline`: the unregistered call (the model's plan, the filter prepared by
    each call); `channels_last`: the inputs stored (N, H, W, C)."""
    xs, w, zw, geo = bench.case_inputs(case, batch)
    if channels_last:
        xs = bench.stored_channels_last(xs)
    if inline:

        def unregistered(i: int) -> Any:
            return conv.convolution_integer(xs[i % 3], w, 128, zw, *geo, 1)

        return _timed_and_stamped(case, unregistered)
    kept: dict[Any, Any] = {}
    choice = None
    if not model:
        conv.convolution_integer(xs[0], w, 128, zw, *geo, 1, filter_cache=kept)
        (choice,) = kept["tuned"].values()
    if choice is None:  # the model's plan
        options = conv.Options(tune=False)
    else:
        tile, gather, split, shared = choice
        if tile is False:
            return f"| {case.name} | the tap-by-tap GEMM kept |"
        options = conv.Options(shifted=tile, gather=gather, split_k=split, shared_pads=shared)
    kept = {}

    def call(i: int) -> Any:
        return conv.convolution_integer(xs[i % 3], w, 128, zw, *geo, 1, options, filter_cache=kept)

    return _timed_and_stamped(case, call)


def _timed_and_stamped(case: Any, call: Any) -> str:
    """The row of `call`: timed with the kernels as they are, then run once stamped."""
    us = bench.time_ms(call, 10, 7, 3) * 1e3
    modules, restore = instrument(_patched)
    try:
        call(0)
        return _stamped(case, call, us, modules)
    finally:
        restore()


def _stamped(case: Any, call: Any, us: float, modules: list[tuple[str, Any]]) -> str:
    """The row from one call of the stamped kernel (`us`: the plain kernel's time a call)."""

    def buffers(module: Any) -> tuple[Any, Any]:
        stamps = cupy.ndarray(
            (1024 * TILES * STAMPS,), cupy.int64, memptr=module.get_global("dml_stamps")
        )
        ends = cupy.ndarray((1024 * 4,), cupy.uint64, memptr=module.get_global("dml_ends"))
        return stamps, ends

    for _, module in modules:  # the timing of the plans compiled several: clear them all
        for buffer in buffers(module):
            buffer[:] = 0
    call(1)
    cupy.cuda.Device().synchronize()
    # the kept plan's kernel: the one that stamped
    expression, module = next(m for m in modules if bool((buffers(m[1])[1] > 0).any()))
    function = module.get_function(expression)
    stamps, ends = buffers(module)
    e = cupy.asnumpy(ends).reshape(1024, 4).astype(np.float64)
    ctas = int((e[:, 1] > 0).sum())
    e = e[:ctas]
    s = cupy.asnumpy(stamps).reshape(1024, TILES, STAMPS)[:ctas, 0].astype(np.float64)
    ghz = float(np.median((e[:, 3] - e[:, 2]) / (e[:, 1] - e[:, 0])))
    s[:, 0] = e[:, 2]
    s[:, 2] = np.where(s[:, 2] > 0, s[:, 2], s[:, 1])  # no gather: the input was transformed
    phases = np.diff(s[:, [0, 1, 2, 3, 5, 6]], axis=1) / ghz / 1e3
    span = (e[:, 1].max() - e[:, 0].min()) / 1e3
    skew = (e[:, 0].max() - e[:, 0].min()) / 1e3
    empty = cupy.RawKernel(
        'extern "C" __global__ void empty_kernel(int* p) {'
        " extern __shared__ int s[]; if (p == nullptr) p[threadIdx.x] = s[0]; }",
        "empty_kernel",
    )
    smem = function.max_dynamic_shared_size_bytes
    empty.max_dynamic_shared_size_bytes = max(smem, 48 * 1024)
    # the kernel's template arguments: WT, XT, WM, WN, ...; its CTA is 128 WM WN threads
    template = expression[expression.index("<") + 1 : -1].split(", ")
    threads = 128 * int(template[2]) * int(template[3])
    launch = (ctas,), (threads,), (cupy.zeros(1, cupy.int32),)
    empty_us = bench.time_ms(lambda i: empty(*launch, shared_mem=smem), 20, 5, 3) * 1e3
    tile = template[2:]
    cells = " | ".join(_cells(phases[:, k]) for k in range(len(PHASES)))
    return (
        f"| {case.name} | {', '.join(tile)} | {ctas} | {us:.1f} | {empty_us:.1f} | {span:.1f} "
        f"| {skew:.2f} | {cells} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument(
        "--model", action="store_true", help="the model's plan (no timing of the plans)"
    )
    parser.add_argument(
        "--inline", action="store_true", help="unregistered calls (the filter prepared each call)"
    )
    parser.add_argument(
        "--channels-last", action="store_true", help="the inputs stored (N, H, W, C)"
    )
    parser.add_argument("names", nargs="*", help="parts of layer names (default: all)")
    args = parser.parse_args()
    print(
        "| layer | kernel template (from WM) | CTAs | µs a call | empty kernel µs | span µs "
        "| start spread µs | " + " | ".join(f"{p} µs" for p in PHASES) + " |"
    )
    print("|---|---|---|---|---|---|---|" + "---|" * len(PHASES))
    for case in bench.CASES:
        if (case.k, case.groups) != (3, 1):
            continue
        if args.names and not any(name in case.name for name in args.names):
            continue
        print(layer(case, args.batch, args.model, args.inline, args.channels_last), flush=True)


if __name__ == "__main__":
    main()
