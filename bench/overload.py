"""dmlserve under overload: goodput (200s per second) at 64 connections against capacity.

One `dmlserve serve --max-concurrency 1 --max-queue 1` (NumPy backend unless told) on a free
loopback port, and in the same run the same server as it was before requests were admitted
ahead of their body (`--before REF`, a git revision: its sources are exported and served the
same way). The request is a JSON body whose work runs in a worker thread (an AVERAGE_POOLING
with a 9x9 window over a 1x1x96x96 image). Capacity is what one connection gets in a closed
loop; overload is 64 connections, either resending at once after a 429 (a client that ignores
Retry-After) or waiting the Retry-After first (as the SDK does). Bounded by seconds per point;
loopback only.

    python bench/overload.py --before 3aca838 --output bench/results/overload-cpu-2vcpu.md
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from service_http import Connection, build_request, check_loopback, closed_loop
from service_report import header, machine
from soak import HOST, REPO, start_dmlserve


def body() -> bytes:
    x = np.random.default_rng(0).random((1, 1, 96, 96)).astype(np.float32)
    op = {"type": "AVERAGE_POOLING", "WindowSize": [9, 9]}
    tensor = {"DataType": "FLOAT32", "Sizes": list(x.shape), "data": x.ravel().tolist()}
    doc = {"operator": op, "inputs": {"InputTensor": tensor}, "output_encoding": "binary"}
    return json.dumps(doc).encode()


async def polite(port: int, head: bytes, payload: bytes, connections: int, seconds: float
                 ) -> tuple[float, dict[int, int]]:  # fmt: skip
    """`connections` clients that wait the Retry-After after a 429: (200s per second, statuses)."""
    statuses: dict[int, int] = {}
    deadline = time.perf_counter() + seconds

    async def worker() -> None:
        conn = await Connection.open(HOST, port)
        try:
            while time.perf_counter() < deadline:
                status, headers, _ = await conn.post(head, payload)
                statuses[status] = statuses.get(status, 0) + 1
                if status == 429:
                    wait = float(headers.get("retry-after", "1"))
                    await asyncio.sleep(min(wait, max(0.0, deadline - time.perf_counter())))
        finally:
            await conn.close()

    await asyncio.gather(*(worker() for _ in range(connections)))
    return statuses.get(200, 0) / seconds, statuses


def measure(src: Path, backend: str, seconds: float, connections: int) -> list[list[str]]:
    server, port = start_dmlserve(backend, ["--max-concurrency", "1", "--max-queue", "1"], src)
    payload = body()
    head = build_request(HOST, port, "/v1/execute", payload, {"Content-Type": "application/json"})
    rows = []
    try:
        base = None
        for conns in (1, connections):
            r = asyncio.run(
                closed_loop(
                    HOST,
                    port,
                    head,
                    payload,
                    connections=conns,
                    max_requests=10**7,
                    duration_s=seconds,
                    warmup_s=1.0,
                )  # fmt: skip
            )
            base = base or r.rps
            who = "one client" if conns == 1 else "ignore Retry-After"
            rows.append([str(conns), who, f"{r.rps:.1f}", f"{100 * r.rps / base:.0f}%",
                         _statuses(r.statuses), f"{r.p50_ms:.1f}", f"{r.p99_ms:.1f}"])  # fmt: skip
        rps, statuses = asyncio.run(polite(port, head, payload, connections, seconds))
        rows.append([str(connections), "wait Retry-After", f"{rps:.1f}",
                     f"{100 * rps / (base or 1):.0f}%", _statuses(statuses), "", ""])  # fmt: skip
    finally:
        server.terminate()
        server.wait(60)
    return rows


def _statuses(statuses: dict[int, int]) -> str:
    return ", ".join(f"{k}: {v}" for k, v in sorted(statuses.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--backend", default="numpy", choices=["numpy", "cupy"])
    parser.add_argument("--before", help="a git revision to measure beside this checkout")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    check_loopback(HOST)
    load_start = os.getloadavg()[0]
    servers = {"this checkout": REPO / "src"}
    with tempfile.TemporaryDirectory() as tmp:
        if args.before:
            archive = subprocess.run(["git", "archive", args.before], cwd=REPO, check=True,
                                     capture_output=True).stdout  # fmt: skip
            subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
            servers[f"before ({args.before})"] = Path(tmp) / "src"
        results = {
            name: measure(src, args.backend, args.seconds, args.connections)
            for name, src in servers.items()
        }
    load_end = os.getloadavg()[0]
    stamp = {"machine": machine(), "date": f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC"}
    command = f"python {shlex.join(['bench/overload.py', *sys.argv[1:]])}"
    lines = [
        *header("dmlserve under overload", {**stamp, "command": command}),
        f"- server: `dmlserve serve --backend {args.backend} --max-concurrency 1 --max-queue 1`; "
        f"request: {len(body())} bytes of JSON, AVERAGE_POOLING 9x9 over 1x1x96x96 FLOAT32; "
        "clients (Python asyncio) and server share the cores",
        f"- 1-minute load average at start / end: {load_start:.1f} / {load_end:.1f}",
        "",
        "| server | connections | clients | 200/s (goodput) | of capacity | statuses "
        "| p50 ms (200s) | p99 ms (200s) |",
        "| --- | ---: | --- | ---: | ---: | --- | ---: | ---: |",
    ]
    for name, rows in results.items():
        lines += [f"| {name} | " + " | ".join(row) + " |" for row in rows]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.output:
        args.output.write_text(text)


if __name__ == "__main__":
    main()
