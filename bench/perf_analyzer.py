"""Triton's perf_analyzer (2.60, unmodified) against dmlserve serving deploy/models/.

Starts `dmlserve serve` on loopback with the repository every deployment mounts, runs
`perf_analyzer -m MODEL -i http -b BATCH --concurrency-range C` for each model (through
tests/tools/perf-analyzer, which supplies a newer glibc where the system's is too old) and
writes a markdown report headed by machine, date and command: perf_analyzer's client and
server-side figures per model. This shows Triton's own tool running against the service; it
is not a comparison with a peer.

    python bench/perf_analyzer.py --backend numpy --output bench/results/perf-analyzer-cpu.md
    python bench/perf_analyzer.py --backend cupy                       # a GPU host
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import shlex
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from service_load import REPO, free_port, server
from service_report import header, machine

PERF_ANALYZER = REPO / "tests" / "tools" / "perf-analyzer"
MODELS = ("pool", "unfold", "fold", "conv")


def wheel_version() -> str:
    """The perf-analyzer wheel version the launcher installs."""
    for line in PERF_ANALYZER.read_text().splitlines():
        if line.startswith("readonly VERSION="):
            return line.partition("=")[2]
    return "?"


def dmlserve_cmd(port: int, backend: str, repository: Path) -> list[str]:
    return [
        sys.executable, "-m", "dmlserve.service.cli", "serve", "--backend", backend,
        "--host", "127.0.0.1", "--port", str(port), "--model-repository", str(repository),
        "--log-level", "warning", "--grpc-port", "0",
    ]  # fmt: skip


def run_perf_analyzer(port: int, model: str, args: argparse.Namespace) -> dict[str, Any]:
    """One perf_analyzer run: its CSV row (client and server figures) and its stdout."""
    with tempfile.TemporaryDirectory() as tmp:
        csv_path = Path(tmp) / "out.csv"
        cmd = [
            str(PERF_ANALYZER), "-m", model, "-i", "http", "-u", f"127.0.0.1:{port}",
            "-b", str(args.batch), "--concurrency-range", str(args.concurrency),
            "--measurement-interval", str(args.measurement_interval_ms),
            "--stability-percentage", str(args.stability_percentage), "-f", str(csv_path),
        ]  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
        if done.returncode != 0:
            raise SystemExit(f"perf_analyzer exited {done.returncode}:\n{done.stdout}{done.stderr}")
        rows = list(csv.DictReader(io.StringIO(csv_path.read_text())))
    return {"row": rows[0], "stdout": done.stdout}


def report(res: dict[str, Any]) -> str:
    out = [
        *header("perf_analyzer against dmlserve", res, f", perf_analyzer {res['perf_analyzer']}"),
        f"- each model: `perf_analyzer -m MODEL -i http -b {res['batch']} --concurrency-range "
        f"{res['concurrency']} --measurement-interval {res['interval']} --stability-percentage "
        f"{res['stability']}` (time windows; perf_analyzer's defaults otherwise)",
        f"- dmlserve backend `{res['backend']}`, models from deploy/models/; client and server "
        "share this machine's cores",
        f"- 1-minute load average at start / end: {res['loadavg'][0]:.1f} / "
        f"{res['loadavg'][1]:.1f}",
        "",
        "Client side (perf_analyzer) and server side (dmlserve's statistics extension, as "
        "perf_analyzer reads them), microseconds:",
        "",
        "| model | infer/s | p50 | p90 | p99 | server queue | compute input | compute infer "
        "| compute output |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for model, run in res["runs"].items():
        r = run["row"]
        out.append(
            f"| {model} | {float(r['Inferences/Second']):.0f} | {r['p50 latency']} | "
            f"{r['p90 latency']} | {r['p99 latency']} | {r['Server Queue']} | "
            f"{r['Server Compute Input']} | {r['Server Compute Infer']} | "
            f"{r['Server Compute Output']} |"
        )
    out += ["", "perf_analyzer's own output, per model:", ""]
    for model, run in res["runs"].items():
        text = run["stdout"]
        start = text.find("Request concurrency")
        out += [f"`{model}`:", "", "```", text[start:].strip(), "```", ""]
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", default="numpy", choices=["numpy", "cupy"])
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--measurement-interval-ms", type=int, default=5000)
    # perf_analyzer's default; a busy shared machine may need more to call a result stable.
    parser.add_argument("--stability-percentage", type=int, default=10)
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--output", type=Path)
    parser.add_argument("--start-timeout", type=float, default=300)
    args = parser.parse_args()
    version = subprocess.run(
        [str(PERF_ANALYZER), "--version"], capture_output=True, text=True, check=False
    )
    port = free_port()
    load_start = os.getloadavg()[0]
    cmd = dmlserve_cmd(port, args.backend, REPO / "deploy" / "models")
    with server(cmd, port, "/v2/health/ready", args.start_timeout):
        runs = {model: run_perf_analyzer(port, model, args) for model in args.models}
    res = {
        "machine": machine(),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": shlex.join(["python", *sys.argv]),
        "perf_analyzer": f"{wheel_version()} wheel (reports: "
        + " ".join(version.stderr.split("Version", 1)[-1].split())
        + ")",
        "backend": args.backend,
        "batch": args.batch,
        "concurrency": args.concurrency,
        "interval": args.measurement_interval_ms,
        "stability": args.stability_percentage,
        "loadavg": (load_start, os.getloadavg()[0]),
        "runs": runs,
    }
    text = report(res)
    if args.output:
        args.output.write_text(text + "\n")
    sys.stdout.write(text + "\n")


if __name__ == "__main__":
    main()
