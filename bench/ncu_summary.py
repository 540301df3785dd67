"""One line per profiled case from Nsight Compute's CSV of `bench_kernels.py --profile`.

`bench/gpu-check.sh ncu` runs ncu over `bench_kernels.py --profile --chosen` (each case's kernel
launched twice; the bench prints ``profiled: <case>`` per case) with the SpeedOfLight,
WarpStateStats, Occupancy and LaunchStats sections, and calls this on the two outputs:

    python3 bench/ncu_summary.py ncu.log > ncu-summary.md

(ncu prints its CSV after the program's own output, both into that one log.) It reads the
log of `ncu ... python3 bench/bench_convolution_integer.py --profile` alike, one launch a
layer.

Columns: kernel time (µs); DRAM, L2, L1 and SM throughput (% of peak); achieved / theoretical
occupancy (%); registers per thread; warp cycles per issued instruction; warp instructions
(millions); the top stall reason ncu's rule names, with its cycles per issued instruction.
"""

from __future__ import annotations

import csv
import io
import re
import sys
from pathlib import Path


def kernels(log: str) -> list[dict[str, str]]:
    """Per profiled launch, in launch order: its metric values by name, its kernel name and
    the stall line of its warp-state rule."""
    lines = log.splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.startswith('"ID",'))
    rows = [r for r in csv.reader(io.StringIO("".join(lines[start:]))) if r]
    rows = [r for r in rows if not r[0].startswith("==")]
    header = {name: i for i, name in enumerate(rows[0])}
    launches: dict[str, dict[str, str]] = {}
    for row in rows[1:]:
        if len(row) < len(header) - 5:
            continue
        launch = launches.setdefault(row[0], {"kernel": row[header["Kernel Name"]]})
        metric = row[header["Metric Name"]]
        if metric:
            launch[metric] = row[header["Metric Value"]]
            launch[metric + " unit"] = row[header["Metric Unit"]]
        rule = row[header["Rule Description"]] if len(row) > header["Rule Description"] else ""
        stall = re.search(r"spends ([\d.,]+) cycles being stalled ([^.(]*)", rule)
        if stall and "stall" not in launch:
            launch["stall"] = f"{stall.group(1)} {stall.group(2).strip()}"
    return list(launches.values())


def number(text: str) -> float:
    return float(text.replace(",", "")) if text else float("nan")


def main() -> None:
    log = Path(sys.argv[1]).read_text()
    cases = re.findall(r"^profiled: (.*)$", log, re.M)
    launches = kernels(log)
    print(
        "| case | kernel | µs | dram % | L2 % | L1 % | SM % | occupancy % | regs "
        "| cycles/issue | Minst | top stall |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    # Launches per case: bench_kernels.py --profile makes two, bench_convolution_integer.py
    # --profile one (a layer's kernels, where a call makes several, are not told apart).
    per_case = max(1, len(launches) // max(1, len(cases)))
    for i, case in enumerate(cases):
        if per_case * i >= len(launches):
            break
        k = launches[per_case * i]  # the first of the case's launches
        name = re.sub(r"\(const.*", "", k["kernel"]).replace("void ", "")
        scale = {
            "ns": 1e-3,
            "us": 1.0,
            "ms": 1e3,
            "nsecond": 1e-3,
            "usecond": 1.0,
            "msecond": 1e3,
        }.get(k.get("Duration unit", ""))
        unit_us = number(k.get("Duration", "")) * (scale or float("nan"))
        print(
            f"| {case} | {name} | {unit_us:.1f} | {k.get('DRAM Throughput', '')} "
            f"| {k.get('L2 Cache Throughput', '')} | {k.get('L1/TEX Cache Throughput', '')} "
            f"| {k.get('Compute (SM) Throughput', '')} "
            f"| {k.get('Achieved Occupancy', '')} / {k.get('Theoretical Occupancy', '')} "
            f"| {k.get('Registers Per Thread', '')} "
            f"| {k.get('Warp Cycles Per Issued Instruction', '')} "
            f"| {number(k.get('smsp__inst_executed.sum', '')) / 1e6:.1f} | {k.get('stall', '')} |"
        )


if __name__ == "__main__":
    main()
