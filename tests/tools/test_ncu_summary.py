"""bench/ncu_summary.py turns ncu's CSV (details page) into one line per profiled case."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "ncu_summary.py"
HEADER = (
    '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size",'
    '"Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value",'
    '"Rule Name","Rule Type","Rule Description","Estimated Speedup Type","Estimated Speedup"'
)


def _row(launch: int, kernel: str, section: str, metric: str, unit: str, value: str) -> str:
    return (
        f'"{launch}","1","python3","host","void {kernel}(const float *, float *, P)","1","7",'
        f'"(256, 1, 1)","(10, 1, 1)","0","9.0","{section}","{metric}","{unit}","{value}",'
    )


def _launch(launch: int, kernel: str, ns: str, dram: str) -> list[str]:
    rule = (
        f'"{launch}","1","python3","host","void {kernel}(const float *, float *, P)","1","7",'
        '"(256, 1, 1)","(10, 1, 1)","0","9.0","WarpStateStats","","","","CPIStall","WRN",'
        '"On average, each warp of this kernel spends 9.4 cycles being stalled waiting for a '
        'scoreboard dependency on a L1TEX (local, global) operation. More text.\nSecond line.",'
        '"",""'
    )
    return [
        _row(launch, kernel, "GPU Speed Of Light Throughput", "Duration", "ns", ns),
        _row(launch, kernel, "GPU Speed Of Light Throughput", "DRAM Throughput", "%", dram),
        _row(launch, kernel, "Command line profiler metrics", "smsp__inst_executed.sum", "inst",
             "2,500,000"),
        rule,
    ]  # fmt: skip


def test_one_line_per_case_from_its_first_launch(tmp_path: Path) -> None:
    lines = ["profiled: pad case", "profiled: pool case", "==PROF== Disconnected", HEADER]
    lines += _launch(0, "pad_a<4>", "112,704", "73.80") + _launch(1, "pad_a<4>", "999", "1")
    lines += _launch(2, "pool_b<float>", "9,408", "28.56") + _launch(3, "pool_b<float>", "1", "2")
    log = tmp_path / "ncu.log"
    log.write_text("\n".join(lines) + "\n")
    out = subprocess.run(
        [sys.executable, str(SCRIPT), str(log)], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert len(out) == 4
    pad, pool = out[2].split(" | "), out[3].split(" | ")
    assert pad[:4] == ["| pad case", "pad_a<4>", "112.7", "73.80"]
    assert pool[:4] == ["| pool case", "pool_b<float>", "9.4", "28.56"]
    assert "2.5" in pad and "2.5" in pool
    assert pad[-1].startswith("9.4 waiting for a scoreboard dependency on a L1TEX")


def test_one_launch_per_case(tmp_path: Path) -> None:
    """A profile of one launch per case (the convolution benchmark's) maps launch i to case i."""
    lines = ["profiled: 3x3 layer", "profiled: 1x1 layer", "profiled: depthwise layer", HEADER]
    lines += _launch(0, "shift<2>", "19,400", "5.95")
    lines += _launch(1, "pointwise<8>", "13,200", "11.79")
    lines += _launch(2, "bands<1>", "26,900", "56.63")
    log = tmp_path / "ncu.log"
    log.write_text("\n".join(lines) + "\n")
    out = subprocess.run(
        [sys.executable, str(SCRIPT), str(log)], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    rows = [line.split(" | ")[:4] for line in out[2:]]
    assert rows == [
        ["| 3x3 layer", "shift<2>", "19.4", "5.95"],
        ["| 1x1 layer", "pointwise<8>", "13.2", "11.79"],
        ["| depthwise layer", "bands<1>", "26.9", "56.63"],
    ]
