"""Where the shifted-window GEMM's time goes: copies of `conv_int_wgmma_shift` with parts compiled
out (the filter and input loads, the MMAs, the output stores), each timed on the benchmark's 3x3
layers against the whole kernel.

Each layer and tile launches as the planner would launch it (`_shift_plan` with the tile forced),
timed as the benchmark times its calls (`time_ms`: batches of 20 launches behind a GPU spin, so
the figure is the GPU's time per launch), on random data; the variants' results are meaningless
and not checked. Variants:

- whole: the kernel as it is;
- no stores: the epilogue's arithmetic and shared-memory traffic, no global stores;
- no loads or stores: the MMAs and the epilogue's arithmetic alone;
- + taps not shifted / + 128-byte swizzle: the same, every tap's B descriptor at the run's start,
  or both operands' descriptors in the 128-byte swizzle mode at aligned addresses (timing only:
  does the layout cost the tensor cores anything?);
- no MMAs: the loop, its barriers and the epilogue's arithmetic.

Run on a GPU of compute capability 9.0, from the repository root:
``python3 bench/conv_shift_phases.py``. The source patches assert the lines they rewrite, so a
change to the kernel that moves them stops this tool with the line it no longer finds.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

TILES = [(2, 1, 224), (2, 1, 128), (1, 1, 256)]  # (warpgroups along M, along N, pixels each)
NO_LOADS = ("-DNO_A", "-DNO_B")
VARIANTS = {
    "whole": (),
    "no stores": ("-DEPI_NOST",),
    "no loads or stores": (*NO_LOADS, "-DEPI_NOST"),
    "+ taps not shifted": (*NO_LOADS, "-DEPI_NOST", "-DNOSHIFT"),
    "+ 128-byte swizzle": (*NO_LOADS, "-DEPI_NOST", "-DSWZ"),
    "no MMAs": (*NO_LOADS, "-DNO_MMA", "-DEPI_NOST"),
}


def _patched(source: str) -> str:
    """The kernel source with the variants' preprocessor switches."""

    def swap(text: str, new: str) -> str:
        assert source.count(text) == 1, f"not found once in the kernel: {text[:70]!r}"
        return source.replace(text, new)

    def guard(text: str, flag: str) -> str:
        return swap(text, f"\n#ifndef {flag}\n{text}\n#endif\n")

    def statement(start: str) -> str:  # from `start` to its semicolon
        at = source.index(start)
        return source[at : source.index(";", at) + 1]

    source = guard(
        "conv::cp_async16(a_base + i * 16, ok ? a_src + i * 16 : wp, ok ? 16 : 0);", "NO_A"
    )
    source = guard(statement("conv::cp_async16(b_base + ((i & 1) * L + r) * 16"), "NO_B")
    source = guard("wg::mma<BN, WS, XS>(acc, da, db, t == 0 && kc == 0 ? 0 : 1);", "NO_MMA")
    store = "o[static_cast<long long>(r) * P] = wst[r * EPI_PITCH + lane];"
    source = swap(
        store,
        f"\n#if defined(EPI_NOST)\nsink += wst[r * EPI_PITCH + lane];\n#else\n{store}\n#endif\n",
    )
    source = swap(
        "    int it = 0;  // the item", "    unsigned sink = 0;\n    int it = 0;  // the item"
    )
    end = "    conv::cp_async_wait<0>();\n#endif\n}"
    source = swap(end, end.replace("#endif", "    if (sink == 0x12345u) out[0] = 1;\n#endif"))
    descriptors = (
        "                const unsigned long long da =\n"
        "                    wg::desc_plain(a_base + (t * 2 * BM + wm * 64) * 16, BM * 16, 128);\n"
        "                const unsigned long long db =\n"
        "                    wg::desc_plain(b_base + (tap_off[t] + wn * BN) * 16, L * 16, 128);"
    )
    unshifted = descriptors.replace("(tap_off[t] + wn * BN)", "(wn * BN)")
    swizzled = (
        "                const unsigned sb = (smem_base + 1023u) & ~1023u;\n"
        "                const unsigned long long da = (unsigned long long)(((sb + wm * 8192)"
        " & 0x3FFFF) >> 4) | (1ull << 16) | (64ull << 32) | (1ull << 62);\n"
        "                const unsigned long long db = (unsigned long long)(((sb + 16384 + wn * BN"
        " * 128) & 0x3FFFF) >> 4) | (1ull << 16) | (64ull << 32) | (1ull << 62);"
    )
    return swap(
        descriptors,
        f"\n#if defined(SWZ)\n{swizzled}\n#elif defined(NOSHIFT)\n{unshifted}\n#else\n"
        f"{descriptors}\n#endif\n",
    )


def main() -> None:
    import cupy
    from bench_convolution_integer import CASES, time_ms

    from dmlserve.kernels.cupy_backend import _convolution_integer_gemm as gemm
    from dmlserve.kernels.cupy_backend._loader import BASE_OPTIONS, CUDA_DIR, name_expression
    from dmlserve.kernels.cupy_backend.convolution_integer import _Problem

    source = _patched((CUDA_DIR / "convolution_integer_sm90a.cu").read_text())
    stages = {t[:3]: t[3] for t in gemm.SHIFT_TILES}
    print("| layer | tile | " + " | ".join(VARIANTS) + " |")
    print("|---|---|" + "---|" * len(VARIANTS))
    for case in CASES:
        if (case.k, case.stride, case.groups, case.per_channel_zp) != (3, 1, 1, False):
            continue
        n, c, hw, m = 32, case.c, case.hw, case.m
        hp = wp = hw + 2
        q = _Problem(
            n, c, hw, hw, m, c, 3, 3, 1, hw, hw, 1, 1, 1, 1, 1, 1, 128, np.zeros(0, np.int32)
        )
        xn = cupy.random.randint(0, 256, (n, hp, wp, c), dtype=cupy.uint8)
        zp = cupy.zeros(m, cupy.int32)
        bias = cupy.zeros(m, cupy.int32)
        out = cupy.empty((n, m, hw, hw), cupy.int32)
        for wm, wn, bn in TILES:
            # the planner's launch of this tile (the input transformed, K unsplit): its grid,
            # block, shared memory and arguments
            planned = gemm._shift_plan(q, c, c, hp, wp, False, "b", "B", (wm, wn, bn), None, 1)
            if planned is None:  # the tile's stages do not fit this layer
                continue
            launch, ints, (bm, tiles_m), _, _ = planned
            w = cupy.random.randint(0, 256, (tiles_m * bm, 9 * c), dtype=cupy.uint8)
            args = (w, xn, zp, bias, out, *ints)
            expression = name_expression(
                "conv_int_wgmma_shift", np.dtype(np.int8), np.dtype(np.uint8), wm, wn, bn,
                stages[wm, wn, bn], False, gemm._SHIFT_TAPS, False,
            )  # fmt: skip
            times = []
            for flags in VARIANTS.values():
                module = cupy.RawModule(
                    code=source,
                    options=(*BASE_OPTIONS, *gemm._SM90A_OPTIONS, *flags),
                    name_expressions=[expression],
                )
                kernel = module.get_function(expression)
                kernel.max_dynamic_shared_size_bytes = launch.shared_mem

                def run(_: int, k: Any = kernel, lc: Any = launch, a: Any = args) -> None:
                    k(lc.grid, lc.block, a, shared_mem=lc.shared_mem)

                times.append(time_ms(run, 20, 5, 3) * 1e3)
            cells = " | ".join(f"{t:.1f}" for t in times)
            print(f"| 3x3 {c} @{hw} | {bm} x {wn * bn} | {cells} |", flush=True)


if __name__ == "__main__":
    main()
