"""The header and markdown tables of bench/service_load.py's report."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np


def machine() -> dict[str, str]:
    cpu = next(
        (
            ln.split(":", 1)[1].strip()
            for ln in Path("/proc/cpuinfo").read_text().splitlines()
            if ln.startswith("model name")
        ),
        platform.processor(),
    )
    mem = Path("/proc/meminfo").read_text().split("\n", 1)[0].split()[1]
    info = {
        "cpu": f"{cpu}, {os.cpu_count()} logical CPUs, {int(mem) // (1 << 20)} GiB RAM",
        "os": platform.platform(),
        "python": platform.python_version(),
        "numpy": np.__version__,
    }
    if shutil.which("nvidia-smi"):
        gpu = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        info["gpu"] = gpu.splitlines()[0] if gpu else "none answered"
    return info


def header(title: str, res: dict[str, Any], software: str = "") -> list[str]:
    """A report's title and the lines every benchmark puts first: machine (`res["machine"]`
    from `machine()`), software (then `software`), date and command."""
    m = res["machine"]
    return [
        f"# {title}",
        "",
        f"- machine: {m['cpu']}" + (f"; GPU {m['gpu']}" if "gpu" in m else ""),
        f"- software: {m['os']}, Python {m['python']}, NumPy {m['numpy']}{software}",
        f"- date: {res['date']}",
        f"- command: `{res['command']}`",
    ]


def report(res: dict[str, Any]) -> str:
    out = [
        *header("dmlserve service benchmark", res),
        f"- dmlserve backend: `{res['backend']}`; bare = FastAPI + uvicorn doing the same NumPy "
        "work inline (bench/bare_app.py)",
        "- client and servers share this machine's cores: absolute numbers are a floor",
    ]
    if "loadavg" in res:
        start, end = res["loadavg"]
        out.append(
            f"- 1-minute load average at start / end: {start:.1f} / {end:.1f} (anything else "
            "running on the machine shows here and lowers both servers' rates)"
        )
    out.append("")
    if res.get("small"):
        out += [
            "## Tiny PADDING over JSON (1x1x4x4 FLOAT32 -> 1x1x6x6), closed loop",
            "",
            "| server | client | conns | requests | errors | req/s | p50 ms | p99 ms |",
            "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for r in res["small"]:
            out.append(
                f"| {r['server']} | {r['client']} | {r['connections']} | {r['requests']} "
                f"| {r['errors']} | {r['rps']:.0f} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} |"
            )
        out.append("")
        rates = {(r["server"], r["client"], r["connections"]): r["rps"] for r in res["small"]}
        ratios = [
            f"{client} at {conns}: {rps / rates[('bare', client, conns)]:.0%}"
            for (server, client, conns), rps in rates.items()
            if server == "dmlserve" and rates.get(("bare", client, conns))
        ]
        if ratios:
            out += ["dmlserve req/s as a share of bare's: " + "; ".join(ratios) + ".", ""]
    if res.get("large"):
        out += [
            "## Large tensor, binary framing, one request at a time",
            "",
            "| server | endpoint | payload MiB | reps | p50 ms | max ms | payload MiB/s |",
            "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
        ]
        for r in res["large"]:
            out.append(
                f"| {r['server']} | `{r['path']}` | {r['payload_mib']} | {r['reps']} "
                f"| {r['p50_ms']:.1f} | {r['max_ms']:.1f} | {r['mib_per_s']:.0f} |"
            )
        out.append("")
    if res.get("rss"):
        r = res["rss"]
        out += [
            "## Server peak memory for one large request (fresh process, binary in/out)",
            "",
            "| payload MiB | RSS before MiB | peak RSS (VmHWM) MiB | peak / payload "
            "| (peak - before) / payload |",
            "| ---: | ---: | ---: | ---: | ---: |",
            f"| {r['payload_mib']} | {r['baseline_rss_mib']:.0f} | {r['peak_rss_mib']:.0f} "
            f"| {r['peak_over_payload']:.2f} | {r['increase_over_payload']:.2f} |",
            "",
        ]
    return "\n".join(out)
