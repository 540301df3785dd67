"""Transports compared in one run: a 64 MiB PADDING round trip through binary HTTP, system
shared memory and (where the server computes on a GPU) CUDA shared memory; tiny-request
throughput over HTTP and gRPC at 16 and 64 connections.

    python bench/transport.py [--backend numpy|cupy] [--reps 5] [--output PATH]

One dmlserve server (a subprocess on loopback, gRPC on) serves every stage; the stages of a
comparison are interleaved round by round, so a busy machine slows each alike. Round trips are
client wall times with the unmodified tritonclient (input from a NumPy array, output as one);
"server" is the service's own request duration (nv_inference_request_duration_us) over the
same requests, and "compute" its compute time. Tiny requests: a closed loop per connection,
the lean HTTP/1.1 client of service_http.py against grpc.aio channels (one connection each),
both sending pre-built request bytes, so client overhead stays small and alike.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shlex
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import grpc
import grpc.aio
import httpx
import numpy as np
import orjson
import tritonclient.http as triton_http
import tritonclient.utils.shared_memory as shm
from service_http import build_request, check_loopback, closed_loop, percentile, post_blocking
from service_load import free_port, server
from service_report import machine

HOST = "127.0.0.1"
MIB = 1 << 20
SIDE = 4096  # FLOAT32 4096 x 4096 = 64 MiB
BIG = {
    "name": "big-pad",
    "operator": {
        "type": "PADDING", "PaddingMode": "CONSTANT", "PaddingValue": 1.0,
        "StartPadding": [0, 0, 1, 1], "EndPadding": [0, 0, 1, 1],
        "InputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, SIDE, SIDE]},
    },
}  # fmt: skip
TINY = {
    "name": "tiny-pad",
    "operator": {
        "type": "PADDING", "StartPadding": [0, 0, 1, 1], "EndPadding": [0, 0, 1, 1],
        "InputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 4, 4]},
    },
}  # fmt: skip
BIG_OUT = (1, 1, SIDE + 2, SIDE + 2)
MODEL_INFER = "/inference.GRPCInferenceService/ModelInfer"


def metric(url: str, name: str, model: str) -> float:
    text = httpx.get(url + "/metrics", timeout=30).text
    found = re.search(rf'^{name}{{model="{model}",version="1"}} (\S+)$', text, re.M)
    return float(found.group(1)) if found else 0.0


class ServerTimes:
    """The service's own durations over a span of requests (from its Triton metrics)."""

    def __init__(self, url: str, model: str) -> None:
        self.url, self.model = url, model
        self.start = self._read()

    def _read(self) -> tuple[float, float, float]:
        names = ("nv_inference_request_success", "nv_inference_request_duration_us",
                 "nv_inference_compute_infer_duration_us")  # fmt: skip
        return tuple(metric(self.url, n, self.model) for n in names)  # type: ignore[return-value]

    def per_request_ms(self) -> tuple[float, float]:
        end = self._read()
        count = max(end[0] - self.start[0], 1)
        return (end[1] - self.start[1]) / count / 1e3, (end[2] - self.start[2]) / count / 1e3


# --- 64 MiB round trips ----------------------------------------------------------------------


def http_round_trip(client: Any, x: np.ndarray) -> Callable[[], np.ndarray]:
    def run() -> np.ndarray:
        tensor = triton_http.InferInput("InputTensor", list(x.shape), "FP32")
        tensor.set_data_from_numpy(x, binary_data=True)
        out = triton_http.InferRequestedOutput("OutputTensor", binary_data=True)
        result: np.ndarray = client.infer("big-pad", [tensor], outputs=[out]).as_numpy(
            "OutputTensor"
        )
        return result

    return run


def lean_http_round_trip(port: int, x: np.ndarray) -> Callable[[], np.ndarray]:
    """The same request through a bare socket client (service_http.post_blocking): HTTP with
    as little client work as Python allows."""

    def run() -> np.ndarray:
        tensor = {"name": "InputTensor", "shape": list(x.shape), "datatype": "FP32",
                  "parameters": {"binary_data_size": x.nbytes}}  # fmt: skip
        doc = {"inputs": [tensor], "parameters": {"binary_data_output": True}}
        header = orjson.dumps(doc)
        body = header + x.tobytes()
        head = build_request(HOST, port, "/v2/models/big-pad/infer", body, {
            "Content-Type": "application/octet-stream",
            "Inference-Header-Content-Length": str(len(header)),
        })  # fmt: skip
        status, data = post_blocking(HOST, port, head, body)
        assert status == 200, data[:200]
        size = int(np.prod(BIG_OUT)) * 4
        return np.frombuffer(data, np.float32, offset=len(data) - size).reshape(BIG_OUT)

    return run


def system_round_trip(client: Any, x: np.ndarray, copy_in: bool) -> tuple[Callable[[], Any], Any]:
    """The round trip through POSIX regions; with `copy_in`, the client's copy into shared
    memory is part of it (a client that builds its input in place skips that copy)."""
    tag = f"{os.getpid()}-{int(copy_in)}"
    h_in = shm.create_shared_memory_region(f"in-{tag}", f"/bench-in-{tag}", x.nbytes)
    out_bytes = int(np.prod(BIG_OUT)) * 4
    h_out = shm.create_shared_memory_region(f"out-{tag}", f"/bench-out-{tag}", out_bytes)
    shm.set_shared_memory_region(h_in, [x])
    client.register_system_shared_memory(f"in-{tag}", f"/bench-in-{tag}", x.nbytes)
    client.register_system_shared_memory(f"out-{tag}", f"/bench-out-{tag}", out_bytes)

    def run() -> np.ndarray:
        if copy_in:
            shm.set_shared_memory_region(h_in, [x])
        tensor = triton_http.InferInput("InputTensor", list(x.shape), "FP32")
        tensor.set_shared_memory(f"in-{tag}", x.nbytes)
        out = triton_http.InferRequestedOutput("OutputTensor")
        out.set_shared_memory(f"out-{tag}", out_bytes)
        client.infer("big-pad", [tensor], outputs=[out])
        result: np.ndarray = shm.get_contents_as_numpy(h_out, np.float32, BIG_OUT)
        return result

    def close() -> None:
        client.unregister_system_shared_memory(f"in-{tag}")
        client.unregister_system_shared_memory(f"out-{tag}")
        shm.destroy_shared_memory_region(h_in)
        shm.destroy_shared_memory_region(h_out)

    return run, close


def cuda_round_trip(client: Any, x: np.ndarray, device: int) -> tuple[Callable[[], Any], Any]:
    """Through CUDA IPC regions: the input is already on the device, the output stays there."""
    import tritonclient.utils.cuda_shared_memory as cudashm

    out_bytes = int(np.prod(BIG_OUT)) * 4
    h_in = cudashm.create_shared_memory_region("cin", x.nbytes, device)
    h_out = cudashm.create_shared_memory_region("cout", out_bytes, device)
    cudashm.set_shared_memory_region(h_in, [x])
    client.register_cuda_shared_memory("cin", cudashm.get_raw_handle(h_in), device, x.nbytes)
    client.register_cuda_shared_memory("cout", cudashm.get_raw_handle(h_out), device, out_bytes)

    def run() -> None:
        tensor = triton_http.InferInput("InputTensor", list(x.shape), "FP32")
        tensor.set_shared_memory("cin", x.nbytes)
        out = triton_http.InferRequestedOutput("OutputTensor")
        out.set_shared_memory("cout", out_bytes)
        client.infer("big-pad", [tensor], outputs=[out])

    def check() -> np.ndarray:
        result: np.ndarray = cudashm.get_contents_as_numpy(h_out, np.float32, BIG_OUT)
        return result

    def close() -> None:
        client.unregister_cuda_shared_memory("cin")
        client.unregister_cuda_shared_memory("cout")
        cudashm.destroy_shared_memory_region(h_in)
        cudashm.destroy_shared_memory_region(h_out)

    run.check = check  # type: ignore[attr-defined]
    return run, close


def big_stage(url: str, address: str, reps: int, cuda: bool, device: int) -> list[dict[str, Any]]:
    x = np.random.default_rng(0).standard_normal((1, 1, SIDE, SIDE)).astype(np.float32)
    expected = np.pad(x, [(0, 0), (0, 0), (1, 1), (1, 1)], constant_values=1.0)
    client = triton_http.InferenceServerClient(address, network_timeout=600, connection_timeout=60)
    client.unregister_system_shared_memory()
    port = int(address.rsplit(":", 1)[1])
    stages: dict[str, Callable[[], Any]] = {
        "binary HTTP (tritonclient)": http_round_trip(client, x),
        "binary HTTP (bare socket client)": lean_http_round_trip(port, x),
    }
    closers = []
    for copy_in, label in ((False, "system shm"), (True, "system shm + client copy-in")):
        run, close = system_round_trip(client, x, copy_in)
        stages[label] = run
        closers.append(close)
    if cuda:
        run, close = cuda_round_trip(client, x, device)
        stages["CUDA shm"] = run
        closers.append(close)
    times: dict[str, list[float]] = {k: [] for k in stages}
    server: dict[str, list[tuple[float, float]]] = {k: [] for k in stages}
    try:
        for name, run in stages.items():  # warm-up, and every path checked once
            out = run()
            if name == "CUDA shm":
                out = run.check()  # type: ignore[attr-defined]
            np.testing.assert_array_equal(out, expected)
        for _ in range(reps):
            for name, run in stages.items():
                span = ServerTimes(url, "big-pad")
                t0 = time.perf_counter()
                run()
                times[name].append(time.perf_counter() - t0)
                server[name].append(span.per_request_ms())
    finally:
        for close in closers:
            close()
        client.close()
    base = statistics.median(times["binary HTTP (tritonclient)"])
    lean = statistics.median(times["binary HTTP (bare socket client)"])
    rows = []
    for name in stages:
        med = statistics.median(times[name])
        rows.append({
            "path": name, "reps": reps, "p50_ms": med * 1e3, "min_ms": min(times[name]) * 1e3,
            "server_ms": statistics.median(s[0] for s in server[name]),
            "compute_ms": statistics.median(s[1] for s in server[name]),
            "of_http": med / base, "of_lean": med / lean,
        })  # fmt: skip
    return rows


# --- tiny requests ---------------------------------------------------------------------------


def tiny_http_request(port: int) -> tuple[bytes, bytes]:
    doc = {"inputs": [{"name": "InputTensor", "shape": [1, 1, 4, 4], "datatype": "FP32",
                       "data": list(range(16))}]}  # fmt: skip
    body = orjson.dumps(doc)
    head = build_request(HOST, port, "/v2/models/tiny-pad/infer", body,
                         {"Content-Type": "application/json"})  # fmt: skip
    return head, body


def tiny_grpc_request() -> bytes:
    from tritonclient.grpc import service_pb2

    request = service_pb2.ModelInferRequest(model_name="tiny-pad")
    request.inputs.add(name="InputTensor", datatype="FP32", shape=[1, 1, 4, 4])
    request.raw_input_contents.append(np.arange(16, dtype=np.float32).tobytes())
    return request.SerializeToString()


async def grpc_closed_loop(
    address: str, body: bytes, connections: int, max_requests: int, duration_s: float,
    warmup_s: float,
) -> dict[str, Any]:  # fmt: skip
    """As service_http.closed_loop, over one gRPC channel (one connection) per client."""
    latencies: list[float] = []
    errors = issued = 0
    start = time.perf_counter()
    measure_from = start + warmup_s
    deadline = measure_from + duration_s
    last_done = measure_from

    async def worker() -> None:
        nonlocal errors, issued, last_done
        options = [("grpc.use_local_subchannel_pool", 1)]  # a connection of its own
        async with grpc.aio.insecure_channel(address, options=options) as channel:
            call = channel.unary_unary(MODEL_INFER)  # bytes in, bytes out
            while issued < max_requests and time.perf_counter() < deadline:
                t0 = time.perf_counter()
                measured = t0 >= measure_from
                issued += measured
                try:
                    await call(body, timeout=30)
                except grpc.aio.AioRpcError:
                    errors += measured
                    continue
                t1 = time.perf_counter()
                if measured:
                    latencies.append(t1 - t0)
                    last_done = max(last_done, t1)

    await asyncio.gather(*(worker() for _ in range(connections)))
    seconds = max(last_done - measure_from, 1e-9)
    ms = [x * 1e3 for x in latencies]
    return {"requests": len(latencies), "errors": errors, "rps": len(latencies) / seconds,
            "p50_ms": percentile(ms, 50), "p99_ms": percentile(ms, 99)}  # fmt: skip


def tiny_stage(port: int, grpc_address: str, rounds: int, requests: int) -> list[dict[str, Any]]:
    head, body = tiny_http_request(port)
    grpc_body = tiny_grpc_request()
    rows: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for _ in range(rounds):
        for conns in (16, 64):
            http = asyncio.run(closed_loop(HOST, port, head, body, connections=conns,
                               max_requests=requests, duration_s=20, warmup_s=1))  # fmt: skip
            rows.setdefault(("HTTP/1.1 JSON", conns), []).append(
                {
                    "requests": http.requests,
                    "errors": http.errors,
                    "rps": http.rps,
                    "p50_ms": http.p50_ms,
                    "p99_ms": http.p99_ms,
                }  # fmt: skip
            )
            g = asyncio.run(grpc_closed_loop(grpc_address, grpc_body, conns, requests, 20, 1))
            rows.setdefault(("gRPC raw", conns), []).append(g)
    out = []
    for (proto, conns), runs in rows.items():
        best = max(runs, key=lambda r: r["rps"])  # each side's best round: noise only lowers
        out.append({"protocol": proto, "connections": conns, **best,
                    "rounds": [round(r["rps"]) for r in runs]})  # fmt: skip
    return out


# --- report ----------------------------------------------------------------------------------


def report(args: argparse.Namespace, big: list[dict[str, Any]], tiny: list[dict[str, Any]],
           load: tuple[float, float]) -> str:  # fmt: skip
    m = machine()
    lines = [
        "# dmlserve transports: binary HTTP, shared memory, gRPC", "",
        f"- machine: {m['cpu']}" + (f"; GPU: {m['gpu']}" if "gpu" in m else ""),
        f"- software: {m['os']}, Python {m['python']}, NumPy {m['numpy']}, "
        f"grpcio {grpc.__version__}",
        f"- date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
        f"- command: `{shlex.join(['python', *sys.argv])}`",
        f"- dmlserve backend: `{args.backend}`; client and server share this machine's cores",
        f"- 1-minute load average at start / end: {load[0]:.1f} / {load[1]:.1f}", "",
        "## 64 MiB PADDING round trip (FLOAT32 1x1x4096x4096 -> 1x1x4098x4098), one at a time",
        "",
        "| path | reps | p50 ms | min ms | server ms | compute ms | / tritonclient HTTP "
        "| / bare-client HTTP |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]  # fmt: skip
    for r in big:
        times = [f"{r[k]:.1f}" for k in ("p50_ms", "min_ms", "server_ms", "compute_ms")]
        cells = [r["path"], str(r["reps"]), *times, f"{r['of_http']:.0%}", f"{r['of_lean']:.0%}"]
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "", "p50 of client round trips, input from a NumPy array to the output as one; the "
        "last two columns: that p50 over the binary HTTP p50 of each client. server ms: the "
        "service's request duration (after the body is read, to the response built), per its "
        "metrics; compute ms: the operator alone. System shm rows: the input already in the "
        "region, or copied in by the client each time.", "",
        "## Tiny PADDING (1x1x4x4 -> 1x1x6x6), closed loop per connection", "",
        "| protocol | conns | requests | errors | req/s | p50 ms | p99 ms | req/s per round |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]  # fmt: skip
    for r in tiny:
        lines.append(f"| {r['protocol']} | {r['connections']} | {r['requests']} | {r['errors']} "
                     f"| {r['rps']:.0f} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} | "
                     f"{', '.join(map(str, r['rounds']))} |")  # fmt: skip
    by = {(r["protocol"], r["connections"]): r["rps"] for r in tiny}
    shares = [f"{c} connections: {by[('gRPC raw', c)] / by[('HTTP/1.1 JSON', c)]:.0%}"
              for c in (16, 64)]  # fmt: skip
    lines += ["", "gRPC req/s as a share of HTTP's: " + "; ".join(shares) + "."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", default="numpy", choices=["numpy", "cupy"])
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--reps", type=int, default=9)
    parser.add_argument("--rounds", type=int, default=2, help="tiny-request rounds")
    parser.add_argument("--requests", type=int, default=6000, help="per tiny-request run")
    parser.add_argument("--output", help="also write the markdown report here")
    args = parser.parse_args()
    check_loopback(HOST)
    port, grpc_port = free_port(), free_port()
    cmd = [sys.executable, "-m", "dmlserve.service.cli", "serve", "--host", HOST,
           "--port", str(port), "--grpc-port", str(grpc_port), "--backend", args.backend,
           "--device", str(args.device), "--max-request-bytes", str(80 * MIB),
           "--log-level", "warning"]  # fmt: skip
    load_start = os.getloadavg()[0]
    with server(cmd, port, "/v2/health/ready", 300):
        url = f"http://{HOST}:{port}"
        for model in (BIG, TINY):
            r = httpx.post(url + "/v1/operators", json=model, timeout=300)
            r.raise_for_status()
        address = f"{HOST}:{port}"
        big = big_stage(url, address, args.reps, args.backend == "cupy", args.device)
        tiny = tiny_stage(port, f"{HOST}:{grpc_port}", args.rounds, args.requests)
    text = report(args, big, tiny, (load_start, os.getloadavg()[0]))
    print(text)
    if args.output:
        with open(args.output, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
