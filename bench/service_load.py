"""dmlserve service benchmark: dmlserve beside a bare FastAPI app, in one run, on loopback.

Cases
  inline   a tiny FLOAT32 CONSTANT PADDING (1x1x4x4 -> 1x1x6x6) as JSON, closed loop at 16 and
           64 connections: req/s, p50, p99; dmlserve `/v1/execute` against the bare app's
           `/pad` (same body, same NumPy work); by the Python client and by wrk if installed.
  batched  the same padding registered with dynamic batching (`--batching`), executed by name
           at 64 connections; against the bare app's `/models/pad/execute` (same body, the
           operator fixed in the app, the same NumPy work per request).
  large    a 64 MiB FLOAT32 tensor in the KServe binary framing: dmlserve PADDING with zero
           pads (binary out) vs the bare app's `/echo` of the same body; sequential.
  rss      peak RSS (VmHWM) of a fresh dmlserve process serving one 256 MiB request.

The two servers are measured in turns (`--rounds`, the order alternating), each point
bounded (request count and seconds); shares are of the medians over the rounds. Loopback
only. Prints a markdown report headed by machine, date, command and load average; `--json`
prints the results as JSON.

    python bench/service_load.py --backend numpy --clients wrk --output bench/results/service-cpu.md
    python bench/service_load.py --backend cupy --wrk never     # GPU host (no wrk there)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from service_http import build_request, check_loopback, closed_loop, post_blocking, run_wrk
from service_report import machine, report

REPO = Path(__file__).resolve().parents[1]
HOST = "127.0.0.1"
MIB = 1 << 20

SMALL_OP = {
    "type": "PADDING",
    "PaddingMode": "CONSTANT",
    "PaddingValue": 0.5,
    "StartPadding": [0, 0, 1, 1],
    "EndPadding": [0, 0, 1, 1],
}


def small_tensor() -> dict[str, Any]:
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4) / 8
    return {"DataType": "FLOAT32", "Sizes": list(x.shape), "data": x.ravel().tolist()}


def small_body() -> bytes:
    return json.dumps({"operator": SMALL_OP, "inputs": {"InputTensor": small_tensor()}}).encode()


def registered_body() -> bytes:
    return json.dumps({"inputs": {"InputTensor": small_tensor()}}).encode()


BATCHED_MODEL = "pad-batched"


def registration(batching: dict[str, int]) -> bytes:
    """The batched case's model: SMALL_OP on any batch of 1x4x4 FLOAT32 images."""
    op = {**SMALL_OP, "InputTensor": {"DataType": "FLOAT32", "Sizes": [-1, 1, 4, 4]}}
    return json.dumps({"name": BATCHED_MODEL, "operator": op, "batching": batching}).encode()


@dataclass(frozen=True)
class LoadCase:
    """One closed-loop case: the same body to each server's path."""

    name: str
    body: bytes
    paths: dict[str, str]
    connections: list[int]


def load_cases(args: argparse.Namespace) -> list[LoadCase]:
    cases = []
    if "inline" in args.cases:
        paths = {"dmlserve": "/v1/execute", "bare": "/pad"}
        cases.append(LoadCase("inline", small_body(), paths, args.connections))
    if "batched" in args.cases:
        paths = {
            "dmlserve": f"/v1/operators/{BATCHED_MODEL}/execute",
            "bare": "/models/pad/execute",
        }
        cases.append(LoadCase("batched", registered_body(), paths, args.batched_connections))
    return cases


def framed_body(x: np.ndarray) -> tuple[bytes, dict[str, str]]:
    """A PADDING with zero pads over `x`, binary in and out (KServe framing)."""
    rank = x.ndim
    op = {
        "type": "PADDING",
        "PaddingMode": "CONSTANT",
        "StartPadding": [0] * rank,
        "EndPadding": [0] * rank,
    }
    tensor = {
        "DataType": "FLOAT32",
        "Sizes": list(x.shape),
        "parameters": {"binary_data_size": x.nbytes},
    }
    header = json.dumps(
        {"operator": op, "inputs": {"InputTensor": tensor}, "output_encoding": "binary"}
    ).encode()
    headers = {
        "Content-Type": "application/octet-stream",
        "Inference-Header-Content-Length": str(len(header)),
    }
    return header + x.tobytes(), headers


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


@contextmanager
def server(cmd: list[str], port: int, ready_path: str, timeout_s: float) -> Iterator[int]:
    """Run a server subprocess until the block ends; yields its pid once it answers."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DMLSERVE_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "src"), env.get("PYTHONPATH")]))
    log = open(os.devnull, "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + timeout_s
        while not _answers(port, ready_path):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"server did not start: {shlex.join(cmd)}")
            time.sleep(0.2)
        yield proc.pid
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _answers(port: int, path: str) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=1) as s:
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n".encode())
            return s.recv(12).startswith(b"HTTP/1.1 2")
    except OSError:
        return False


def dmlserve_cmd(port: int, backend: str, extra: str = "") -> list[str]:
    """`dmlserve serve` as benchmarked, with `extra` flags (a shell-quoted string) last."""
    return [
        sys.executable,
        "-m",
        "dmlserve.service.cli",
        "serve",
        "--host",
        HOST,
        "--port",
        str(port),
        "--grpc-port",
        "0",
        "--backend",
        backend,
        "--max-request-bytes",
        str(1 << 30),
        "--log-level",
        "warning",
        "--max-queue",
        "256",
        *shlex.split(extra),
    ]


def bare_cmd(port: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "uvicorn",
        "--app-dir",
        str(REPO / "bench"),
        "bare_app:app",
        "--host",
        HOST,
        "--port",
        str(port),
        "--log-level",
        "warning",
        "--no-access-log",
    ]


def proc_status(pid: int) -> dict[str, int]:
    """VmRSS / VmHWM of a process, in bytes."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0]) * 1024
    return out


def post_once(
    port: int, path: str, body: bytes, headers: dict[str, str]
) -> tuple[int, float, bytes]:
    head = build_request(HOST, port, path, body, {**headers, "Connection": "close"})
    t0 = time.perf_counter()
    status, data = post_blocking(HOST, port, head, body)
    return status, time.perf_counter() - t0, data


def check_same(case: LoadCase, ports: dict[str, int]) -> None:
    """Both servers return the same padded tensor before either is timed."""
    h = {"Content-Type": "application/json"}
    outs = []
    for server, path in case.paths.items():
        status, _, data = post_once(ports[server], path, case.body, h)
        if status != 200:
            raise SystemExit(f"{path} answered {status}: {data[:500]!r}")
        outs.append(json.loads(data)["outputs"]["OutputTensor"])
    if outs[0]["Sizes"] != [1, 1, 6, 6] or outs[0]["data"] != outs[1]["data"]:
        raise SystemExit(f"the two servers disagree: {outs}")


def register_batched(port: int, batching: dict[str, int]) -> None:
    h = {"Content-Type": "application/json"}
    status, _, data = post_once(port, "/v1/operators", registration(batching), h)
    if status not in (200, 201):
        raise SystemExit(f"registering the batched model answered {status}: {data[:500]!r}")


def run_closed_loop(
    args: argparse.Namespace, ports: dict[str, int], case: LoadCase
) -> list[dict[str, Any]]:
    """Every point of `case`, the servers in turns: round r runs them in one order, round r+1
    in the other, so a change in the machine's load falls on both."""
    check_same(case, ports)
    clients = [c for c in args.clients if c != "wrk" or use_wrk(args)]
    rows = []
    for rnd in range(args.rounds):
        for conns in case.connections:
            order = list(case.paths) if rnd % 2 == 0 else list(case.paths)[::-1]
            for server in order:
                port, path = ports[server], case.paths[server]
                for client in clients:
                    res = load(client, args, port, path, case.body, conns)
                    rows.append({"case": case.name, "server": server, "round": rnd, **asdict(res)})
    return rows


def use_wrk(args: argparse.Namespace) -> bool:
    return args.wrk == "always" or (args.wrk == "auto" and shutil.which("wrk") is not None)


def load(
    client: str, args: argparse.Namespace, port: int, path: str, body: bytes, conns: int
) -> Any:
    if client == "wrk":
        url = f"http://{HOST}:{port}{path}"
        return run_wrk(url, body, "application/json", conns, args.duration, args.warmup)
    head = build_request(HOST, port, path, body, {"Content-Type": "application/json"})
    return asyncio.run(
        closed_loop(
            HOST, port, head, body, connections=conns, max_requests=args.requests,
            duration_s=args.duration, warmup_s=args.warmup,
        )
    )  # fmt: skip


def run_large(args: argparse.Namespace, ports: dict[str, int]) -> list[dict[str, Any]]:
    n = args.large_mib * MIB // 4
    x = np.random.default_rng(0).standard_normal(n, dtype=np.float32).reshape(1, 1, -1, 1024)
    body, headers = framed_body(x)
    payload = x.tobytes()
    rows = []
    for name, path in (("dmlserve", "/v1/execute"), ("bare", "/echo")):
        times = []
        for i in range(args.large_reps + 1):
            status, seconds, data = post_once(ports[name], path, body, headers)
            if status != 200:
                raise SystemExit(f"{name} {path} answered {status}: {data[:300]!r}")
            if i == 0 and data[-len(payload) :] != payload:
                raise SystemExit(f"{name} {path} did not return the tensor unchanged")
            if i:  # the first is a warm-up (first-touch allocations)
                times.append(seconds * 1e3)
        p50 = float(np.median(times))
        rows.append(
            {
                "server": name,
                "path": path,
                "payload_mib": args.large_mib,
                "body_bytes": len(body),
                "reps": len(times),
                "p50_ms": p50,
                "max_ms": max(times),
                "mib_per_s": args.large_mib / (p50 / 1e3),
            }
        )
    return rows


def run_rss(args: argparse.Namespace) -> dict[str, Any]:
    """Peak RSS of a fresh dmlserve serving one `rss_mib` request (binary in and out)."""
    port = free_port()
    n = args.rss_mib * MIB // 4
    x = np.ones(n, dtype=np.float32).reshape(1, 1, -1, 1024)
    body, headers = framed_body(x)
    with server(
        dmlserve_cmd(port, args.backend, args.serve_args),
        port,
        "/v2/health/ready",
        args.start_timeout,
    ) as pid:
        # One small request first, so lazily imported code is not counted against the payload.
        post_once(port, "/v1/execute", small_body(), {"Content-Type": "application/json"})
        before = proc_status(pid)
        status, seconds, data = post_once(port, "/v1/execute", body, headers)
        after = proc_status(pid)
    if status != 200:
        raise SystemExit(f"256 MiB request answered {status}: {data[:300]!r}")
    payload = x.nbytes
    return {
        "payload_mib": args.rss_mib,
        "baseline_rss_mib": before["VmRSS"] / MIB,
        "peak_rss_mib": after["VmHWM"] / MIB,
        "seconds": seconds,
        "peak_over_payload": after["VmHWM"] / payload,
        "increase_over_payload": (after["VmHWM"] - before["VmRSS"]) / payload,
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--backend", default="numpy", choices=["numpy", "cupy", "auto"])
    p.add_argument("--connections", type=int, nargs="+", default=[16, 64], help="inline case")
    p.add_argument("--batched-connections", type=int, nargs="+", default=[64])
    p.add_argument(
        "--batching",
        type=json.loads,
        default={"max_batch_size": 64, "max_queue_delay_us": 0},
        help="the batched model's policy (JSON)",
    )
    p.add_argument("--rounds", type=int, default=2, help="turns of each server per point")
    p.add_argument(
        "--serve-args", default="", help="more `dmlserve serve` flags, e.g. '--no-tiny-on-host'"
    )
    p.add_argument(
        "--clients", nargs="+", default=["python", "wrk"], choices=["python", "wrk"],
        help="load generators (wrk only where installed, see --wrk)",
    )  # fmt: skip
    p.add_argument("--requests", type=int, default=20000, help="cap per point (measured)")
    p.add_argument("--duration", type=float, default=10.0, help="seconds per point (measured)")
    p.add_argument("--warmup", type=float, default=2.0, help="unmeasured seconds per point")
    p.add_argument("--wrk", choices=["auto", "always", "never"], default="auto")
    p.add_argument("--large-mib", type=int, default=64)
    p.add_argument("--large-reps", type=int, default=8)
    p.add_argument("--rss-mib", type=int, default=256)
    p.add_argument(
        "--cases",
        nargs="+",
        default=["inline", "batched", "large", "rss"],
        choices=["inline", "batched", "large", "rss"],
    )
    p.add_argument("--start-timeout", type=float, default=300.0, help="server start (s)")
    p.add_argument("--json", action="store_true", help="print JSON instead of markdown")
    p.add_argument("--output", type=Path, help="also write the markdown report here")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    check_loopback(HOST)
    res: dict[str, Any] = {
        "machine": machine(),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": shlex.join(["python", os.path.relpath(__file__, REPO), *sys.argv[1:]]),
        "backend": args.backend,
    }
    load_start = os.getloadavg()[0]
    if {"inline", "batched", "large"} & set(args.cases):
        ports = {"dmlserve": free_port(), "bare": free_port()}
        dml = dmlserve_cmd(ports["dmlserve"], args.backend, args.serve_args)
        with (
            server(dml, ports["dmlserve"], "/v2/health/ready", args.start_timeout),
            server(bare_cmd(ports["bare"]), ports["bare"], "/health", 60),
        ):
            if "batched" in args.cases:
                register_batched(ports["dmlserve"], args.batching)
                res["batching"] = args.batching
            res["load"] = [row for c in load_cases(args) for row in run_closed_loop(args, ports, c)]
            if "large" in args.cases:
                res["large"] = run_large(args, ports)
    if "rss" in args.cases:
        res["rss"] = run_rss(args)
    res["loadavg"] = (load_start, os.getloadavg()[0])
    text = report(res)
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text + "\n")
    print(json.dumps(res, indent=2) if args.json else text)


if __name__ == "__main__":
    main()
