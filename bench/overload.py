"""dmlserve under overload: goodput (200s per second) at 64 connections against capacity.

One `dmlserve serve --max-concurrency 1 --max-queue 1` (NumPy backend unless told) on a free
loopback port. The request is a ~50 KB JSON body whose work runs in a worker thread (an
AVERAGE_POOLING with a 9x9 window over a 1x1x96x96 image). Capacity is what one connection gets
in a closed loop; overload is 64 connections in a closed loop, each resending at once after a
429. With the queue full, a request is refused before its body is read, so the 429s cost
little and goodput stays near capacity. Bounded by seconds per point; loopback only.

    python bench/overload.py --output bench/results/overload-cpu-2vcpu.md
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from service_http import build_request, check_loopback, closed_loop
from service_report import machine

REPO = Path(__file__).resolve().parents[1]
HOST = "127.0.0.1"


def body() -> bytes:
    x = np.random.default_rng(0).random((1, 1, 96, 96)).astype(np.float32)
    op = {"type": "AVERAGE_POOLING", "WindowSize": [9, 9]}
    tensor = {"DataType": "FLOAT32", "Sizes": list(x.shape), "data": x.ravel().tolist()}
    doc = {"operator": op, "inputs": {"InputTensor": tensor}, "output_encoding": "binary"}
    return json.dumps(doc).encode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--backend", default="numpy", choices=["numpy", "cupy"])
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    check_loopback(HOST)
    with socket.socket() as s:
        s.bind((HOST, 0))
        port = int(s.getsockname()[1])
    src = str(REPO / "src")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [src, os.environ.get("PYTHONPATH")])),
    }
    cmd = [sys.executable, "-m", "dmlserve.service.cli", "serve", "--backend", args.backend,
           "--host", HOST, "--port", str(port), "--max-concurrency", "1", "--max-queue", "1",
           "--log-level", "warning"]  # fmt: skip
    server = subprocess.Popen(cmd, cwd=REPO, env=env, stderr=subprocess.DEVNULL)
    payload = body()
    head = build_request(HOST, port, "/v1/execute", payload, {"Content-Type": "application/json"})
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with socket.create_connection((HOST, port), timeout=1) as s:
                    s.sendall(b"GET /v2/health/ready HTTP/1.1\r\nHost: x\r\n\r\n")
                    if s.recv(64).startswith(b"HTTP/1.1 200"):
                        break
            except OSError:
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                raise SystemExit("the server did not become ready")
            time.sleep(0.2)
        load_start = os.getloadavg()[0]
        points = {}
        for conns in (1, args.connections):
            points[conns] = asyncio.run(
                closed_loop(
                    HOST,
                    port,
                    head,
                    payload,
                    connections=conns,
                    max_requests=10**7,
                    duration_s=args.seconds,
                    warmup_s=1.0,
                )  # fmt: skip
            )
        load_end = os.getloadavg()[0]
    finally:
        server.terminate()
        server.wait(60)
    m = machine()
    capacity = points[1].rps
    lines = [
        "# dmlserve under overload",
        "",
        f"- machine: {m['cpu']}" + (f"; GPU {m['gpu']}" if "gpu" in m else ""),
        f"- software: {m['os']}, Python {m['python']}, NumPy {m['numpy']}",
        f"- date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
        f"- command: `python {shlex.join(['bench/overload.py', *sys.argv[1:]])}`",
        f"- server: `dmlserve serve --backend {args.backend} --max-concurrency 1 --max-queue 1`; "
        f"request: {len(payload)} bytes of JSON, AVERAGE_POOLING 9x9 over 1x1x96x96 FLOAT32",
        f"- 1-minute load average at start / end: {load_start:.1f} / {load_end:.1f}",
        "",
        "| connections | seconds | 200/s (goodput) | of capacity | statuses | p50 ms (200s) "
        "| p99 ms (200s) |",
        "| ---: | ---: | ---: | ---: | --- | ---: | ---: |",
    ]
    for conns, r in points.items():
        statuses = ", ".join(f"{k}: {v}" for k, v in sorted(r.statuses.items()))
        lines.append(
            f"| {conns} | {r.seconds:.1f} | {r.rps:.1f} | {100 * r.rps / capacity:.0f}% "
            f"| {statuses} | {r.p50_ms:.1f} | {r.p99_ms:.1f} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    if args.output:
        args.output.write_text(text)


if __name__ == "__main__":
    main()
