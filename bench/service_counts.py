"""Instructions and cache misses per request, simulated: each server under valgrind's cachegrind.

On a small shared machine req/s moves by 20-30% from one run to the next; these counts move by
1-2%. Each server (dmlserve, and the bare app with the same NumPy work) runs twice under
`valgrind --tool=cachegrind`, serving `--requests` and then `--requests` + `--extra` requests
over `--connections` keep-alive connections (the lean client of `service_http.py`, outside
valgrind); the difference of the two runs' totals over `--extra` is one request's cost, start-up
and shut-down left out. The last-level cache is simulated as one core's L2 (`--ll`, default
512 KiB, 8-way, 64-byte lines): an L2 miss costs tens of cycles, so on two servers of equal
instruction counts the one with more misses is the slower. Needs valgrind (`apt-get install
valgrind`); a run takes minutes (the servers run some 50 times slower under it).

    python bench/service_counts.py --case inline --connections 16
    python bench/service_counts.py --case batched --connections 64 --servers dmlserve
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

from service_http import build_request, check_loopback, closed_loop
from service_load import (
    BATCHED_MODEL,
    HOST,
    bare_cmd,
    dmlserve_cmd,
    free_port,
    register_batched,
    registered_body,
    server,
    small_body,
)

#: What the report gives per request, as cachegrind's summary names it.
COUNTS = {
    "I refs": "instructions",
    "I1 misses": "L1i misses",
    "D1 misses": "L1d misses",
    "LLi misses": "L2 misses (code)",
    "LLd misses": "L2 misses (data)",
}
PATHS = {
    "inline": {"dmlserve": "/v1/execute", "bare": "/pad"},
    "batched": {
        "dmlserve": f"/v1/operators/{BATCHED_MODEL}/execute",
        "bare": "/models/pad/execute",
    },
}


def run_once(args: argparse.Namespace, name: str, requests: int, log: Path) -> dict[str, int]:
    """Totals of one server process that served `requests` requests."""
    port = free_port()
    valgrind = ["valgrind", "--tool=cachegrind", "--cache-sim=yes", f"--LL={args.ll}",
                "--cachegrind-out-file=/dev/null", f"--log-file={log}"]  # fmt: skip
    if name == "dmlserve":
        cmd, ready = dmlserve_cmd(port, "numpy", "--no-warmup"), "/v2/health/ready"
    else:
        cmd, ready = bare_cmd(port), "/health"
    body = small_body() if args.case == "inline" else registered_body()
    path = PATHS[args.case][name]
    with server(valgrind + cmd, port, ready, args.start_timeout):
        if args.case == "batched" and name == "dmlserve":
            register_batched(port, args.batching)
        head = build_request(HOST, port, path, body, {"Content-Type": "application/json"})
        result = asyncio.run(
            closed_loop(
                HOST, port, head, body, connections=args.connections, max_requests=requests,
                duration_s=1e9, warmup_s=0.0, timeout_s=600.0,
            )
        )  # fmt: skip
    if result.errors or result.requests != requests:
        raise SystemExit(
            f"{name}: {result.requests} of {requests} answered, {result.errors} errors"
        )
    text = log.read_text(errors="replace")
    counts = {}
    for key in COUNTS:
        pattern = r"\s+".join(key.split())
        found = re.search(rf"==\d+== {pattern}:\s+([\d,]+)", text)
        if found is None:
            raise SystemExit(f"{name}: no '{key}' in cachegrind's summary ({log})")
        counts[key] = int(found.group(1).replace(",", ""))
    return counts


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--case", choices=list(PATHS), default="inline")
    p.add_argument(
        "--servers", nargs="+", choices=["dmlserve", "bare"], default=["dmlserve", "bare"]
    )
    p.add_argument("--connections", type=int, default=16)
    p.add_argument("--requests", type=int, default=200, help="the first run's requests")
    p.add_argument("--extra", type=int, default=2000, help="the second run's, beyond those")
    p.add_argument("--ll", default="524288,8,64", help="simulated L2: bytes,ways,line")
    p.add_argument("--batching", default={"max_batch_size": 64, "max_queue_delay_us": 0})
    p.add_argument("--start-timeout", type=float, default=600.0)
    args = p.parse_args()
    check_loopback(HOST)
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed")
    os.environ["PYTHONHASHSEED"] = "0"  # the same dict layouts in every run
    print(f"{args.case}, {args.connections} connections, {args.extra} requests counted; "
          f"command: {' '.join(['python', *sys.argv])}")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.servers:
            low = run_once(args, name, args.requests, Path(tmp, f"{name}-low.log"))
            high = run_once(args, name, args.requests + args.extra, Path(tmp, f"{name}-high.log"))
            per = {label: (high[k] - low[k]) / args.extra for k, label in COUNTS.items()}
            print(f"{name}: " + ", ".join(f"{label} {value:,.0f}" for label, value in per.items()))


if __name__ == "__main__":
    main()
