"""dmlserve soak: many requests at many connections, valid, invalid and oversized mixed, with the
server's memory read at the start, the middle and the end.

One `dmlserve serve` (NumPy backend unless told) on a free loopback port, with a 16 KiB request
limit so that oversized bodies are cheap to send. `--connections` closed-loop clients share
`--requests` requests, each taking the next kind of a fixed cycle:

  valid      a tiny PADDING as JSON data (200)
  b64        a 1x1x32x32 AVERAGE_POOLING in b64, answered in binary (200)
  registry   register an operator under a new name, execute it, delete it (201, 200, 200)
  bad-json   a body that is not JSON (400)
  rule       a descriptor breaking a DirectML rule (422)
  value      a boolean among the data (422)
  oversized  a 20 KiB body, over the limit (413)

Reported: the count of each status, p50/p99 latency of all requests and of the 200s, and the
server's RSS after a warm-up (start), at half the requests and at the end; drift is
(end - middle) / middle. Loopback only, bounded by the request count.

    python bench/soak.py --output bench/results/soak-cpu-2vcpu.md
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import itertools
import json
import os
import shlex
import socket
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from service_http import Connection, build_request, check_loopback, percentile
from service_report import header, machine

REPO = Path(__file__).resolve().parents[1]
HOST = "127.0.0.1"
LIMIT = 16 << 10
JSON = {"Content-Type": "application/json"}


def _body(doc: object) -> bytes:
    return json.dumps(doc).encode()


def kinds() -> dict[str, list[tuple[str, str, bytes]]]:
    """Each kind's requests: (method, path, body); `{n}` in a path or body is a fresh number."""
    pad = {"type": "PADDING", "StartPadding": [0, 0, 1, 1], "EndPadding": [0, 0, 1, 1]}
    tiny = {"DataType": "FLOAT32", "Sizes": [1, 1, 4, 4], "data": list(range(16))}
    image = np.arange(1024, dtype=np.float32)
    pool = {"type": "AVERAGE_POOLING", "WindowSize": [3, 3], "Strides": [2, 2]}
    b64 = {"DataType": "FLOAT32", "Sizes": [1, 1, 32, 32],
           "b64": base64.b64encode(image.tobytes()).decode()}  # fmt: skip
    registered = {**pad, "InputTensor": {"DataType": "FLOAT32", "Sizes": [-1, 1, 4, 4]}}
    return {
        "valid": [
            ("POST", "/v1/execute", _body({"operator": pad, "inputs": {"InputTensor": tiny}}))
        ],
        "b64": [
            (
                "POST",
                "/v1/execute",
                _body(
                    {"operator": pool, "inputs": {"InputTensor": b64}, "output_encoding": "binary"}
                ),
            )
        ],  # fmt: skip
        "registry": [
            ("POST", "/v1/operators", _body({"name": "soak-{n}", "operator": registered})),
            ("POST", "/v1/operators/soak-{n}/execute", _body({"inputs": {"InputTensor": tiny}})),
            ("DELETE", "/v1/operators/soak-{n}", b""),
        ],
        "bad-json": [("POST", "/v1/execute", b'{"operator": {"type": "PADDING"')],
        "rule": [
            (
                "POST",
                "/v1/execute",
                _body({"operator": {**pad, "EndPadding": [0, 1]}, "inputs": {"InputTensor": tiny}}),
            )
        ],  # fmt: skip
        "value": [
            (
                "POST",
                "/v1/execute",
                _body({"operator": pad, "inputs": {"InputTensor": {**tiny, "data": [True] * 16}}}),
            )
        ],  # fmt: skip
        "oversized": [("POST", "/v1/execute", b" " * (LIMIT + 4096))],
    }


#: The cycle of kinds the clients walk through (valid traffic most of the time).
CYCLE = ["valid", "b64", "valid", "bad-json", "valid", "rule", "valid", "value", "valid",
         "oversized", "valid", "b64", "valid", "registry"]  # fmt: skip


def start_dmlserve(
    backend: str, flags: list[str], src: Path = REPO / "src"
) -> tuple[subprocess.Popen[bytes], int]:
    """`dmlserve serve` (from the sources under `src`) on a free loopback port, once ready."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        port = int(s.getsockname()[1])
    env = {**os.environ, "PYTHONPATH": str(src)}
    cmd = [sys.executable, "-m", "dmlserve.service.cli", "serve", "--backend", backend,
           "--host", HOST, "--port", str(port), "--log-level", "warning", *flags]  # fmt: skip
    server = subprocess.Popen(cmd, cwd=src.parent, env=env, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while True:
        try:
            with socket.create_connection((HOST, port), timeout=1) as conn:
                conn.sendall(b"GET /v2/health/ready HTTP/1.1\r\nHost: x\r\n\r\n")
                if conn.recv(64).startswith(b"HTTP/1.1 200"):
                    return server, port
        except OSError:
            pass
        if time.monotonic() > deadline or server.poll() is not None:
            server.kill()
            raise SystemExit("the server did not become ready")
        time.sleep(0.2)


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


async def soak(port: int, pid: int, requests: int, connections: int) -> dict[str, object]:
    table = kinds()
    statuses: Counter[int] = Counter()
    by_kind: dict[str, Counter[int]] = {k: Counter() for k in table}
    latencies: list[float] = []
    ok_latencies: list[float] = []
    rss: dict[str, float] = {}
    sent = 0
    names = itertools.count()
    turn = itertools.cycle(CYCLE)
    warmup = min(2000, requests // 10)

    async def worker() -> None:
        nonlocal sent
        conn = await Connection.open(HOST, port)
        try:
            while sent < requests:
                kind = next(turn)
                n = next(names)
                for method, path, template in table[kind]:
                    body = template.replace(b"{n}", str(n).encode())
                    head = build_request(HOST, port, path.format(n=n), body, JSON)
                    head = head.replace(b"POST", method.encode(), 1)
                    t0 = time.perf_counter()
                    status, _, _ = await asyncio.wait_for(conn.post(head, body), 60)
                    elapsed = time.perf_counter() - t0
                    sent += 1
                    statuses[status] += 1
                    by_kind[kind][status] += 1
                    latencies.append(elapsed)
                    if status == 200:
                        ok_latencies.append(elapsed)
                    if sent == warmup and "start" not in rss:
                        rss["start"] = rss_mib(pid)
                    if sent >= requests // 2 and "middle" not in rss:
                        rss["middle"] = rss_mib(pid)
        finally:
            await conn.close()

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(connections)))
    seconds = time.perf_counter() - t0
    rss["end"] = rss_mib(pid)
    return {
        "requests": sent,
        "seconds": seconds,
        "statuses": dict(sorted(statuses.items())),
        "by_kind": {k: dict(sorted(v.items())) for k, v in by_kind.items()},
        "p50_ms": percentile([x * 1e3 for x in latencies], 50),
        "p99_ms": percentile([x * 1e3 for x in latencies], 99),
        "ok_p50_ms": percentile([x * 1e3 for x in ok_latencies], 50),
        "ok_p99_ms": percentile([x * 1e3 for x in ok_latencies], 99),
        "rss_mib": rss,
        "drift": (rss["end"] - rss["middle"]) / rss["middle"],
    }


def report(res: dict[str, object], command: str, backend: str, load: tuple[float, float]) -> str:
    rss = res["rss_mib"]
    assert isinstance(rss, dict)
    statuses = res["statuses"]
    assert isinstance(statuses, dict)
    by_kind = res["by_kind"]
    assert isinstance(by_kind, dict)
    stamp = {"machine": machine(), "date": f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC"}
    lines = [
        *header("dmlserve soak", {**stamp, "command": command}),
        f"- server: `dmlserve serve --backend {backend} --max-request-bytes {LIMIT}`, client "
        "and server on the same cores (the client is lean asyncio streams, bench/service_http.py)",
        f"- 1-minute load average at start / end: {load[0]:.1f} / {load[1]:.1f}",
        f"- {res['requests']} requests in {res['seconds']:.1f} s "
        f"({float(res['requests']) / float(res['seconds']):.0f} req/s)",  # type: ignore[arg-type]
        "",
        "## Statuses",
        "",
        "| kind | " + " | ".join(str(s) for s in statuses) + " |",
        "| --- | " + " | ".join("---:" for _ in statuses) + " |",
    ]
    for kind, counts in by_kind.items():
        lines.append(f"| {kind} | " + " | ".join(str(counts.get(s, 0)) for s in statuses) + " |")
    lines.append("| **all** | " + " | ".join(f"**{n}**" for n in statuses.values()) + " |")
    lines += [
        "",
        "## Latency and memory",
        "",
        "| p50 ms (all) | p99 ms (all) | p50 ms (200s) | p99 ms (200s) | RSS start MiB "
        "| RSS middle MiB | RSS end MiB | drift middle -> end |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        f"| {res['p50_ms']:.2f} | {res['p99_ms']:.2f} | {res['ok_p50_ms']:.2f} "
        f"| {res['ok_p99_ms']:.2f} | {rss['start']:.1f} | {rss['middle']:.1f} | {rss['end']:.1f} "
        f"| {100 * float(res['drift']):+.2f}% |",  # type: ignore[arg-type]
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--backend", default="numpy", choices=["numpy", "cupy"])
    parser.add_argument("--output", type=Path, help="write the markdown report here too")
    args = parser.parse_args()
    check_loopback(HOST)
    flags = ["--max-request-bytes", str(LIMIT), "--max-connections", str(args.connections + 16)]
    server, port = start_dmlserve(args.backend, flags)
    try:
        load_start = os.getloadavg()[0]
        res = asyncio.run(soak(port, server.pid, args.requests, args.connections))
        load_end = os.getloadavg()[0]
    finally:
        server.terminate()
        server.wait(60)
    command = "python " + shlex.join(["bench/soak.py", *sys.argv[1:]])
    text = report(res, command, args.backend, (load_start, load_end))
    print(text)
    if args.output:
        args.output.write_text(text)


if __name__ == "__main__":
    main()
