"""Where a 1x1 layer's time goes on the pointwise kernel's warpgroup-MMA form, CTA by CTA: a copy
of `conv_int_wgmma_pointwise` with `%globaltimer` stamps (thread 0 of each CTA, ns, comparable
across SMs) runs chains of registered-operator calls (the filter kept, the inputs rotated as
the benchmark rotates them, each call launched as a programmatic dependent of the one before,
all queued behind a GPU-side wait), and the last call's stamps are printed as medians
(earliest, latest) over the CTAs that wrote them, in µs from the moment the first CTA was
released by the call before it (`griddepcontrol.wait`):

- entry: the CTA's first instruction (before the release: the grid starts while the one
  before it drains, on the SMs it leaves; this stamp is the copy's one write before its wait,
  to a word the grid before it wrote before its own wait);
- released: past the wait for the grid before it (every byte that grid wrote is visible);
- image in: the image's bulk copy landed in shared memory (where the image is not one bulk
  copy, thread 0's own 4-byte copies landed);
- fragments: the thread's A fragments made from the image (all of K, kept in registers);
- chunk i MMAs issued; MMAs done (which includes thread 0's wait for the copy of chunk i - 2
  to have read its staging block); sent: its staging block written and its bulk copy issued
  (the first chunk's in four pieces, the first of them stamped as "first store");
- end: the CTA's copies have read its shared memory (the CTA exits; its stores may still be
  on their way), or, with --complete, the stores written (which holds the CTA, and so the next
  call's CTA on that SM, until then).

Beside them: the time per call of the plain kernel and of the stamped copy, each as the
fastest of three chains of the same calls; the gap between the call before's last end and
this call's release; in how many CTAs the first filter block (a registered operator's kept
block, copied before the release) had landed when the image had; and whether the stamped
call's output equals the plain one's. The stamps add a few instructions per phase. A grid of
more CTAs than the SMs run at once is stamped too; its medians then mix the waves.

Run on a GPU of compute capability 9.0, from the repository root:
``python3 bench/conv_pointwise_timeline.py [--batch 32] [--complete] [NAME ...]`` (NAME: a part of
a 1x1 layer's name in the benchmark; the layers the planner gives another form are listed as
such). The source patches assert the lines they rewrite, so a change to the kernel that moves
them stops this tool with the line it no longer finds.
"""

from __future__ import annotations

import argparse
import importlib
import itertools
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
STAMPS = 32  # per CTA: 0-4 the start (3: the filter flag), 5 + 3 i .. 7 + 3 i chunk i (i < 8),
# 30 first store, 31 end
CHUNKS = 8
CALLS = 20  # calls in a chain
CHAINS = 3  # chains timed; the stamps are the last chain's last call
SPIN_CLOCKS = 20_000_000  # the GPU-side wait ahead of the chain (~10 ms)
NAMES = {
    0: "entry",
    1: "released",
    2: "image in",
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

    namespaces = "namespace dml {\nnamespace wg {"
    assert head.count(namespaces) == 1, "the kernel file's namespaces moved"
    head = head.replace(
        namespaces,
        f"__device__ unsigned long long dml_pw_stamps[{CTAS * STAMPS}];\n"
        f"__device__ unsigned long long dml_pw_prev[{CTAS}];\n" + namespaces,
    )
    stamp = '    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t) : "r"(dep) : "memory");\n'
    after(
        "    const int count = min(run, mchunks - first);\n",
        "    auto stamp = [&](int k, unsigned dep = 0) {\n"
        f"        if (tid != 0 || blockIdx.x >= {CTAS}) return;\n"
        "        unsigned long long t;\n"
        f"    {stamp}"
        f"        dml_pw_stamps[blockIdx.x * {STAMPS} + k] = t;\n"
        "    };\n"
        "    stamp(0);\n",
    )
    # the call before's end for this CTA's index (that grid has completed), loaded now and
    # kept until this call's own end is written over it
    after(
        "    wg::wait_prior_grid();\n",
        "    stamp(1);\n"
        "    unsigned long long prev_end = 0;\n"
        f"    if (tid == 0 && blockIdx.x < {CTAS})\n"
        f"        prev_end = dml_pw_stamps[blockIdx.x * {STAMPS} + 31];\n",
    )
    # after both ways in: the bulk copy's barrier, or thread 0's own 4-byte copies; and whether
    # the first filter block (copied before the release, where the blocks are kept) is in yet
    after(
        "            conv::cp_async_wait<0>();\n        }\n    }\n",
        "    stamp(2);\n"
        f"    if (tid == 0 && prepared && blockIdx.x < {CTAS}) {{\n"
        "        unsigned in;\n"
        '        asm volatile("{\\n.reg .pred p;\\n"\n'
        '                     "mbarrier.test_wait.parity.shared::cta.b64 p, [%1], 0;\\n"\n'
        '                     "selp.u32 %0, 1, 2, p;\\n}\\n"\n'
        '                     : "=r"(in) : "r"(filter_bar) : "memory");\n'
        f"        dml_pw_stamps[blockIdx.x * {STAMPS} + 3] = in;\n"
        "    }\n",
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
    prev = f"    if (tid == 0 && blockIdx.x < {CTAS}) dml_pw_prev[blockIdx.x] = prev_end;\n"
    after(end, (written if complete else "") + prev + "    stamp(31);\n")
    return head + signature + kernel


def _chain(call: Any) -> float:
    """Milliseconds per call of `CALLS` calls queued behind a GPU-side wait long enough for the
    host to queue them all (so that each starts as the one before it drains), the inputs
    rotated as the benchmark's calls take them: the fastest of `CHAINS` chains."""
    order = itertools.count(1)
    return common.gpu_ms(lambda: call(next(order)), CALLS, CHAINS, lead_clocks=SPIN_CLOCKS)


def _plan(case: Any, inputs: tuple[Any, ...]) -> Any:
    """The pointwise plan the planner runs `case` with on `inputs` (`bench.case_inputs`'s), or
    None where it runs no pointwise kernel."""
    xs, w, zw, geo = inputs
    ran: list[Any] = []
    conv.convolution_integer(xs[0], w, 128, zw, *geo, case.groups, ran=ran)
    return ran[0] if isinstance(ran[0], conv.PointwisePlan) else None


def layer(case: Any, batch: int, complete: bool) -> str:
    """The report of one layer: its plain and stamped times, then the stamps' table."""
    inputs = bench.case_inputs(case, batch)
    plan = _plan(case, inputs)
    if plan is None or plan.form != "wgmma":
        return f"{case.name}, batch {batch}: not the warpgroup-MMA form\n"
    if batch * plan.runs > CTAS:
        return f"{case.name}, batch {batch}: {batch * plan.runs} CTAs, more than {CTAS} stamped\n"
    xs, w, zw, geo = inputs
    kept: dict[Any, Any] = {}

    def call(i: int) -> Any:
        return conv.convolution_integer(xs[i % 3], w, 128, zw, *geo, case.groups, filter_cache=kept)

    expected = call(0)
    plain_us = _chain(call) * 1e3
    modules, restore = instrument(lambda source: _patched(source, complete), KERNEL)
    try:
        same = bool(cupy.array_equal(call(0), expected))
        stamped_us = _chain(call) * 1e3  # the stamps: this chain's last call
        _, module = modules[-1]
        stamps = cupy.ndarray(
            (CTAS, STAMPS), cupy.uint64, memptr=module.get_global("dml_pw_stamps")
        )
        prev = cupy.ndarray((CTAS,), cupy.uint64, memptr=module.get_global("dml_pw_prev"))
        s = cupy.asnumpy(stamps).astype(np.int64)
        p = cupy.asnumpy(prev).astype(np.int64)
    finally:
        restore()
    ctas = batch * plan.runs
    s, p = s[:ctas], p[:ctas]
    released = s[:, 1].min()
    landed = (
        f"in before the image in {int((s[:, 3] == 1).sum())} of {ctas} CTAs"
        if (s[:, 3] > 0).any()
        else "not kept (copied after the release)"
    )
    lines = [
        f"{case.name}, batch {batch}: {ctas} CTAs, up to {plan.run} chunk(s) of 64 channels a CTA; "
        f"plain {plain_us:.1f} µs a call, stamped {stamped_us:.1f} (the fastest of {CHAINS} "
        f"chains of {CALLS}); released {(released - p.max()) / 1e3:.2f} µs after the call "
        f"before's last end; the first filter block {landed}; output "
        f"{'equal to' if same else 'DIFFERS from'} the plain call's",
        "",
        "| stamp | CTAs | median µs | earliest | latest |",
        "|---|---|---|---|---|",
    ]
    rows = []
    for k, name in NAMES.items():
        column = s[:, k][s[:, k] > 0]
        if column.size:
            v = (column - released) / 1e3
            rows.append((float(np.median(v)), k, name, v))
    for median, _, name, v in sorted(rows):
        lines.append(f"| {name} | {v.size} | {median:.2f} | {v.min():.2f} | {v.max():.2f} |")
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
