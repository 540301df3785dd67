"""The CONVOLUTION_INTEGER benchmark's report, in Markdown: printed by
`bench_convolution_integer.py` as it measures each layer, and made again from a run's JSON by
``python3 bench/conv_report.py RUN.json`` (no GPU, CuPy or PyTorch needed) for the runs whose
rows have this report's fields (those from 2026-11-24 on)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def fmt(v: float | None, spec: str) -> str:
    return "n/a" if v is None else format(v, spec)


def cudnn_modes(row: dict[str, Any]) -> str:
    """cuDNN's two algorithm choices' times, as the detail lines give them."""
    autotuned, heuristic = row["cudnn_fp16_autotuned_ms"], row["cudnn_fp16_heuristic_ms"]
    return f"autotuned {autotuned * 1e3:.1f} us, heuristic {heuristic * 1e3:.1f} us"


def header_text(header: dict[str, Any]) -> str:
    """The title, the run's versions and the first table's head."""
    return (
        f"# CONVOLUTION_INTEGER benchmark — {header['device']} ({header['sms']} SMs)\n"
        f"{header['date']}; torch {header['torch']}, cuDNN {header['cudnn']}, CuPy "
        f"{header['cupy']}, CUDA runtime {header['cuda_runtime']}; batch {header['batch']}; "
        "u8 input (z_x = 128) x s8 filter; medians of CUDA-event-timed batches."
        + (f" Command: `python3 {header['command']}`." if header.get("command") else "")
        + "\n\n"
        "| layer | ours ms | ours TOPS | kernels TOPS | cuDNN fp16 TOPS | ours/cuDNN "
        "| unfold+_int_mm TOPS | ours/unfold | _int_mm GEMM TOPS | ours/GEMM | host us "
        "| registered ms | registered/cuDNN |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    )


def row_line(r: dict[str, Any]) -> str:
    """A layer's line of the first table."""
    un = r.get("unfold_int_mm_ms")
    gm = r.get("int_mm_gemm_ms")
    return (
        f"| {r['case']} | {r['ours_ms']:.4f} | {r['ours_tops']:.1f} "
        f"| {fmt(r.get('ours_kernels_tops'), '.1f')} | {r['cudnn_fp16_tops']:.1f} "
        f"| {r['cudnn_fp16_ms'] / r['ours_ms']:.2f} "
        f"| {fmt(r.get('unfold_int_mm_tops'), '.1f')} "
        f"| {fmt(un and un / r['ours_ms'], '.2f')} | {fmt(r.get('int_mm_gemm_tops'), '.1f')} "
        f"| {fmt(gm and gm / r['ours_ms'], '.2f')} | {r['host_us']:.0f} "
        f"| {r['registered_ms']:.4f} | {r['cudnn_fp16_ms'] / r['registered_ms']:.2f} |"
    )


def tail_text(rows: list[dict[str, Any]], sweep: bool) -> str:
    """What follows the first table: the layers on (N, H, W, C) inputs, the detail lines and,
    with `sweep`, the tile table."""
    out: list[str] = []
    last_rows = [r for r in rows if "channels_last_ms" in r]
    if last_rows:
        out.append(
            "\nThe same layers on the same values stored (N, H, W, C), as cuDNN's input is "
            "(ours read where they lie):\n\n| layer | GEMM | ms | registered plan | registered ms "
            "| ours/cuDNN | registered/cuDNN |\n|---|---|---|---|---|---|---|"
        )
        for r in last_rows:
            out.append(
                f"| {r['case']} | {r['channels_last_kernel']} | {r['channels_last_ms']:.4f} "
                f"| {r['channels_last_registered_plan']} | {r['channels_last_registered_ms']:.4f} "
                f"| {r['cudnn_fp16_ms'] / r['channels_last_ms']:.2f} "
                f"| {r['cudnn_fp16_ms'] / r['channels_last_registered_ms']:.2f} |"
            )
    for r in rows:
        if "ours_tiled_ms" in r:  # depthwise: band kernel (the default) against the tiled one
            copy_gb = (r["x_bytes"] + r["out_bytes"]) / 1e9
            out.append(
                f"\ndepthwise {r['case']}: band {r['ours_ms'] * 1e3:.1f} us "
                f"({copy_gb / (r['ours_ms'] * 1e-3):.0f} GB/s in+out), "
                f"band multiply-add form {r['ours_band_madd_ms'] * 1e3:.1f} us, "
                f"tiled {r['ours_tiled_ms'] * 1e3:.1f} us, "
                f"cuDNN fp16 {r['cudnn_fp16_ms'] * 1e3:.1f} us ({cudnn_modes(r)}); "
                f"band/cuDNN {r['cudnn_fp16_ms'] / r['ours_ms']:.2f}x, "
                f"band/tiled {r['ours_tiled_ms'] / r['ours_ms']:.2f}x"
            )
    for r in rows:
        if "ours_previous_ms" in r:  # a newer kernel against the path before it
            copy_gb = (r["x_bytes"] + r["out_bytes"]) / 1e9
            previous_name = {
                "shifted-window GEMM": "tap-by-tap wgmma GEMM",
                "NCHW-reading GEMM": "shifted-window GEMM on the transformed input",
            }.get(r["kernel"], "tensor-core GEMM path")
            out.append(
                f"\n{r['kernel']} {r['case']}: {r['ours_ms'] * 1e3:.1f} us "
                f"({copy_gb / (r['ours_ms'] * 1e-3):.0f} GB/s in+out), registered "
                f"{r['registered_ms'] * 1e3:.1f} us, {previous_name} "
                f"{r['ours_previous_ms'] * 1e3:.1f} us (registered "
                f"{r['ours_previous_registered_ms'] * 1e3:.1f} us), "
                f"cuDNN fp16 {r['cudnn_fp16_ms'] * 1e3:.1f} us ({cudnn_modes(r)}); "
                f"ours/cuDNN {r['cudnn_fp16_ms'] / r['ours_ms']:.2f}x, "
                f"registered/cuDNN {r['cudnn_fp16_ms'] / r['registered_ms']:.2f}x, "
                f"ours/previous {r['ours_previous_ms'] / r['ours_ms']:.2f}x "
                f"(registered {r['ours_previous_registered_ms'] / r['registered_ms']:.2f}x)"
                + (
                    f"; K unsplit, registered {r['unsplit_registered_ms'] * 1e3:.1f} us"
                    if "unsplit_registered_ms" in r
                    else ""
                )
                + (
                    f"; the {r['pointwise_form']} form ran; forms: "
                    + ", ".join(
                        f"{form} {ms * 1e3:.1f} us" for form, ms in r["pointwise_forms_ms"].items()
                    )
                    if "pointwise_forms_ms" in r
                    else ""
                )
            )
    if sweep:
        keys = list(dict.fromkeys(k for r in rows for k in r.get("tiles", {})))
        out.append("\n| layer | " + " | ".join(f"{t} ms" for t in keys) + " |")
        out.append("|---|" + "---|" * len(keys))
        for r in rows:
            if "tiles" not in r:
                continue
            cells = " | ".join(fmt(r["tiles"].get(k), ".4f") for k in keys)
            out.append(f"| {r['case']} | {cells} |")
    return "\n".join(out)


def report(header: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    """The whole report of a run."""
    sweep = any("tiles" in r for r in rows)
    lines = [header_text(header), *map(row_line, rows)]
    tail = tail_text(rows, sweep)
    return "\n".join([*lines, tail] if tail else lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a run's JSON (`--json` of the benchmark)")
    data = json.loads(parser.parse_args().run.read_text())
    print(report(data["header"], data["rows"]))


if __name__ == "__main__":
    main()
