"""bench/conv_report.py makes the CONVOLUTION_INTEGER benchmark's report again from a run's
JSON, without a GPU: the run's header, a line per layer with its ratios worked out from the
times, and the (N, H, W, C) table only for the layers timed that way."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "conv_report.py"


def _row(rng: random.Random, name: str, channels_last: bool) -> dict[str, Any]:
    ours, cudnn, registered = (rng.uniform(0.005, 0.05) for _ in range(3))
    row: dict[str, Any] = {
        "case": name, "ours_ms": ours, "ours_tops": rng.uniform(10, 500),
        "ours_kernels_tops": None, "cudnn_fp16_tops": rng.uniform(10, 500),
        "cudnn_fp16_ms": cudnn, "host_us": rng.uniform(50, 300), "registered_ms": registered,
    }  # fmt: skip
    if channels_last:
        row |= {
            "channels_last_kernel": "wgmma_shift_gather", "channels_last_ms": ours * 0.9,
            "channels_last_registered_plan": "TMA wm=2 rows=7 images=1 st=4",
            "channels_last_registered_ms": registered * 0.8,
        }  # fmt: skip
    return row


def test_report_from_json(tmp_path: Path) -> None:
    rng = random.Random(11)
    header = {
        "device": "GPU X", "sms": 7, "date": "2026-01-02 03:04 UTC", "torch": "t", "cudnn": 9,
        "cupy": "c", "cuda_runtime": 13, "batch": 8, "command": "bench",
    }  # fmt: skip
    rows = [_row(rng, "3x3 a", True), _row(rng, "1x1 b", False)]
    run = tmp_path / "run.json"
    run.write_text(json.dumps({"header": header, "rows": rows}))
    text = subprocess.run(
        [sys.executable, str(SCRIPT), str(run)], capture_output=True, text=True, check=True
    ).stdout
    lines = text.splitlines()
    assert lines[0] == "# CONVOLUTION_INTEGER benchmark — GPU X (7 SMs)"
    assert "batch 8" in lines[1] and lines[1].endswith("Command: `python3 bench`.")
    for r in rows:
        (line,) = [ln for ln in lines if ln.startswith(f"| {r['case']} | {r['ours_ms']:.4f}")]
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[5] == f"{r['cudnn_fp16_ms'] / r['ours_ms']:.2f}"
        assert cells[-1] == f"{r['cudnn_fp16_ms'] / r['registered_ms']:.2f}"
        assert cells[3] == "n/a"
    plans = [ln for ln in lines if "TMA wm=2" in ln]
    assert len(plans) == 1 and plans[0].startswith("| 3x3 a | wgmma_shift_gather")
    ratio = rows[0]["cudnn_fp16_ms"] / rows[0]["channels_last_registered_ms"]
    assert plans[0].endswith(f"| {ratio:.2f} |")
