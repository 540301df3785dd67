"""Where a 1x1 layer's time goes on the pointwise kernel's warpgroup-MMA form, CTA by CTA: a copy
of `conv_int_wgmma_pointwise` with `%globaltimer` stamps (thread 0 of each CTA, ns, comparable
across SMs) runs a chain of registered-operator calls as the benchmark times them (the filter
kept, the inputs rotated, each call launched as a programmatic dependent of the one before),
and the last call's stamps are printed as medians (earliest, latest) over its CTAs, in µs from
the moment the first of them was released by the call before it (`griddepcontrol.wait`):

- entry: the CTA's first instruction (before the release: the grid starts while the one
  before it drains, on the SMs it leaves);
- released: past the wait for the grid before it (every byte that grid wrote is visible);
- image in: the image's bulk copy landed in shared memory;
- first filter block in: waited for here where a registered operator keeps the blocks (the
  kernel itself waits for it after the fragments; its bulk copy is issued before the release);
- fragments: the thread's A fragments made from the image (all of K, kept in registers);
- chunk i MMAs issued / done, chunk i sent: its staging block written and its bulk copy
  issued (the first chunk's in four pieces, the first of them stamped as "first store");
- end: the CTA's copies have read its shared memory (the CTA exits; its stores may still be
  on their way), or, with --complete, the stores written (which holds the CTA, and so the next
  call's CTA on that SM, until then).

Beside them: the time per call of the uninstrumented kernel (as the benchmark times it), the
stamped chain's time per call, the gap between the call before's last end and this call's
release, and whether the stamped call's output equals the plain one's. The stamps add a few
instructions per phase.

Run on a GPU of compute capability 9.0, from the repository root:
``python3 bench/conv_pointwise_timeline.py [--batch 32] [--complete] [NAME ...]`` (NAME: a part of
a 1x1 layer's name in the benchmark; the layers the planner gives another form are listed as
such). The source patches assert the lines they rewrite, so a change to the kernel that moves
them stops this tool with the line it no longer finds.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_convolution_integer as bench  # noqa: E402
import cupy  # noqa: E402
from conv_shift_timeline import instrument  # noqa: E402

conv = importlib.import_module("dmlserve.kernels.cupy_backend.convolution_integer")
common = importlib.import_module("dmlserve.kernels.cupy_backend._common")

KERNEL = "conv_int_wgmma_pointwise"
CTAS = 1024  # CTAs the stamp buffers hold
STAMPS = 32  # per CTA: 0-4 the start, 5 + 3 i .. 7 + 3 i chunk i (i < 8), 30 first store, 31 end
CHUNKS = 8
CALLS = 8  # calls in the stamped chain
SPIN_CLOCKS = 20_000_000  # the GPU-side wait ahead of the chain (~10 ms)
NAMES = {
    0: "entry",
    1: "released",
    2: "image in",
    3: "first filter block in",
    4: "fragments",
    30: "first store",
    31: "end",
}
for _i in range(CHUNKS):
    NAMES.update({5 + 3 * _i: f"chunk {_i} MMAs issued", 6 + 3 * _i: f"chunk {_i} MMAs done"})
    NAMES[7 + 3 * _i] = f"chunk {_i} sent"


def _patched(source: str, complete: bool) -> str:
    """The kernel source with the stamps (`complete`: the end stamped once the stores are
    written)."""
    head, signature, kernel = source.partition(f"    {KERNEL}(const unsigned char*")
    assert signature, f"{KERNEL} not found"

    def swap(text: str, new: str) -> None:
        nonlocal kernel
        assert kernel.count(text) == 1, f"not found once in the kernel: {text[:70]!r}"
        kernel = kernel.replace(text, new)

    def after(text: str, new: str) -> None:
        swap(text, text + new)

    globals_ = (
        f"__device__ unsigned long long dml_pw_stamps[{CTAS * STAMPS}];\n"
        f"__device__ unsigned long long dml_pw_prev[{CTAS}];\n"
    )
    head = head.replace(
        "namespace dml {\nnamespace wg {", globals_ + "namespace dml {\nnamespace wg {"
    )
    assert globals_ in head, "the kernel file's namespaces moved"
    stamp = '    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t) : "r"(dep) : "memory");\n'
    after(
        "    const int count = min(run, mchunks - first);\n",
        "    auto stamp = [&](int k, unsigned dep = 0) {\n"
        "        if (tid != 0) return;\n"
        "        unsigned long long t;\n"
        f"    {stamp}"
        f"        dml_pw_stamps[blockIdx.x * {STAMPS} + k] = t;\n"
        "    };\n"
        "    stamp(0);\n",
    )
    after(
        "    wg::wait_prior_grid();\n",
        f"    if (tid == 0) dml_pw_prev[blockIdx.x] = dml_pw_stamps[blockIdx.x * {STAMPS} + 31];\n"
        "    stamp(1);\n",
    )
    after("            wg::bar_wait(image_bar, 0);\n", "            stamp(2);\n")
    after("            conv::cp_async_wait<0>();\n        }\n    }\n", "    stamp(2);\n")
    later = "    for (int i = 1; i < BLOCKS; ++i) load_filter(i);"
    swap(
        later,
        "    if (prepared) {\n        wg::bar_wait(filter_bar, 0);\n        stamp(3);\n    }\n"
        + later,
    )
    after(
        "    const bool live = 4 * wd < HW;\n",
        "    stamp(4, a[0][0][0] ^ a[KS - 1][1][3] ^ a[KS / 2][0][2]);\n",
    )
    after("        wg::commit();\n", f"        if (i < {CHUNKS}) stamp(5 + 3 * i);\n")
    after("        wg::fence_operands(acc[1]);\n", f"        if (i < {CHUNKS}) stamp(6 + 3 * i);\n")
    after(
        "                                     static_cast<unsigned>((hi - lo) * HW * 4));\n",
        "                    if (i == 0 && piece == 0) stamp(30);\n",
    )
    swap(
        "        if (tid < 64) biases[64 * b + tid] = 0;\n",
        f"        if (i < {CHUNKS}) stamp(7 + 3 * i);\n"
        "        if (tid < 64) biases[64 * b + tid] = 0;\n",
    )
    end = (
        "    if (tid == 0) conv::bulk_wait_read();"
        "  // the shared memory outlives the copies' reads\n"
    )
    written = '    if (tid == 0) asm volatile("cp.async.bulk.wait_group 0;\\n" ::: "memory");\n'
    after(end, (written if complete else "") + "    stamp(31);\n")
    return head + signature + kernel


def _chain(call: Any) -> float:
    """Milliseconds per call of `CALLS` calls queued behind a GPU-side wait long enough for the
    host to queue them all (so that each starts as the one before it drains), the inputs
    rotated as the benchmark's calls take them."""
    spin = common.launch("timing.cu", "spin", grid=(1, 1, 1), block=(1, 1, 1))
    stream = cupy.cuda.get_current_stream()
    spin(np.int64(SPIN_CLOCKS))
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    start.record(stream)
    for i in range(CALLS):
        call(1 + i)
    end.record(stream)
    end.synchronize()
    return float(cupy.cuda.get_elapsed_time(start, end)) / CALLS


def _mma_form(case: Any, batch: int) -> bool:
    """Whether the planner runs `case` on the warpgroup-MMA form."""
    xs, w, zw, geo = bench.case_inputs(case, batch)
    ran: list[Any] = []
    conv.convolution_integer(xs[0], w, 128, zw, *geo, case.groups, ran=ran)
    return isinstance(ran[0], conv.PointwisePlan) and ran[0].form == "wgmma"


def layer(case: Any, batch: int, complete: bool) -> str:
    """The report of one layer: its plain and stamped times, then the stamps' table."""
    if not _mma_form(case, batch):
        return f"{case.name}, batch {batch}: not the warpgroup-MMA form\n"
    xs, w, zw, geo = bench.case_inputs(case, batch)
    kept: dict[Any, Any] = {}

    def call(i: int) -> Any:
        return conv.convolution_integer(xs[i % 3], w, 128, zw, *geo, case.groups, filter_cache=kept)

    plain_us = bench.time_ms(call, 20, 7, 3) * 1e3
    expected = call(0)
    modules, restore = instrument(lambda source: _patched(source, complete), KERNEL)
    try:
        same = bool(cupy.array_equal(call(0), expected))
        stamped_us = _chain(call) * 1e3
        _, module = modules[-1]
        stamps = cupy.ndarray(
            (CTAS, STAMPS), cupy.uint64, memptr=module.get_global("dml_pw_stamps")
        )
        prev = cupy.ndarray((CTAS,), cupy.uint64, memptr=module.get_global("dml_pw_prev"))
        s = cupy.asnumpy(stamps).astype(np.int64)
        p = cupy.asnumpy(prev).astype(np.int64)
    finally:
        restore()
    ctas = int((s[:, 1] > 0).sum())
    assert ctas <= CTAS and (s[ctas:, 1] == 0).all(), "more CTAs than the stamps hold"
    s, p = s[:ctas], p[:ctas]
    released = s[:, 1].min()
    lines = [
        f"{case.name}, batch {batch}: {ctas} CTAs; plain {plain_us:.1f} µs a call, stamped chain "
        f"{stamped_us:.1f} µs a call; released {(released - p.max()) / 1e3:.2f} µs after the "
        f"call before's last end; output {'equal to' if same else 'DIFFERS from'} the plain "
        "call's",
        "",
        "| stamp | median µs | earliest | latest |",
        "|---|---|---|---|",
    ]
    for k in sorted(NAMES, key=lambda k: (np.median(s[:, k]) if (s[:, k] > 0).all() else 0, k)):
        column = s[:, k]
        if not (column > 0).all():
            continue
        v = (column - released) / 1e3
        lines.append(f"| {NAMES[k]} | {np.median(v):.2f} | {v.min():.2f} | {v.max():.2f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument(
        "--complete", action="store_true", help="the end stamped once the stores are written"
    )
    parser.add_argument("names", nargs="*", help="parts of 1x1 layer names (default: all)")
    args = parser.parse_args()
    for case in bench.CASES:
        if case.k != 1 or (args.names and not any(name in case.name for name in args.names)):
            continue
        print(layer(case, args.batch, args.complete), flush=True)


if __name__ == "__main__":
    main()
