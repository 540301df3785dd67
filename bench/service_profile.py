"""Where a request's CPU time goes: dmlserve's ASGI app driven in process, no sockets.

`concurrency` tasks call the app directly, each sending its next request when the previous one
has answered; the CPU time of the process (`time.process_time`) divided by the requests is the
service's own cost per request, without the HTTP server, the kernel's network stack or a load
generator sharing the cores. `--profile` runs the same under cProfile and prints the functions
with the most time per request (own and cumulative, in microseconds).

    python bench/service_profile.py --case small
    python bench/service_profile.py --case small --app bare      # the baseline, same driver
    python bench/service_profile.py --case conv-gzip --profile 25
    python bench/service_profile.py --stages --rounds 5               # microseconds by stage

Cases: `small` (a 1x1x4x4 FLOAT32 PADDING as JSON, `/v1/execute`), `conv-gzip` (a
CONVOLUTION_INTEGER whose 800 KB INT32 output goes back in the binary framing to a client
that accepts gzip, as httpx does by default), `batched` (a 1x1x4x4 PADDING registered with
dynamic batching, executed by name). `--app bare` drives `bench/bare_app.py` instead (`small`
and `batched` only: its `/pad` and `/models/pad/execute`), the same work without the service.
`--stages` times each stage of the request path (`service_stages.py`; `small` only) and prints
the microseconds of each per request, the least of the rounds. The driver runs on uvloop, as
uvicorn does where it is installed (`--loop asyncio` for the standard loop).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import pstats
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from service_stages import StageTimers

from dmlserve.service import Settings, create_app

#: The bare app's endpoint for each case it serves.
BARE_PATHS = {"small": "/pad", "batched": "/models/pad/execute"}

PAD = {
    "type": "PADDING",
    "PaddingMode": "CONSTANT",
    "PaddingValue": 0.5,
    "StartPadding": [0, 0, 1, 1],
    "EndPadding": [0, 0, 1, 1],
}


def _json_tensor(x: np.ndarray, dtype: str) -> dict[str, Any]:
    return {"DataType": dtype, "Sizes": list(x.shape), "data": x.ravel().tolist()}


def small_case() -> tuple[str, bytes, list[tuple[bytes, bytes]], dict[str, Any] | None]:
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4) / 8
    body = {"operator": PAD, "inputs": {"InputTensor": _json_tensor(x, "FLOAT32")}}
    return "/v1/execute", json.dumps(body).encode(), [(b"content-type", b"application/json")], None


def conv_gzip_case() -> tuple[str, bytes, list[tuple[bytes, bytes]], dict[str, Any] | None]:
    rng = np.random.default_rng(0)
    x = rng.integers(-128, 128, (1, 8, 52, 52), dtype=np.int8)
    w = rng.integers(-128, 128, (8, 8, 3, 3), dtype=np.int8)  # -> 1x8x50x50 INT32: 80 KB
    x = np.tile(x, (10, 1, 1, 1))  # batch 10: 800 KB out
    header = {
        "operator": {"type": "CONVOLUTION_INTEGER"},
        "inputs": {
            "InputTensor": {"DataType": "INT8", "Sizes": list(x.shape),
                            "parameters": {"binary_data_size": x.nbytes}},
            "FilterTensor": {"DataType": "INT8", "Sizes": list(w.shape),
                             "parameters": {"binary_data_size": w.nbytes}},
        },
        "output_encoding": "binary",
    }  # fmt: skip
    head = json.dumps(header).encode()
    headers = [
        (b"content-type", b"application/octet-stream"),
        (b"inference-header-content-length", str(len(head)).encode()),
        (b"accept-encoding", b"gzip, deflate"),
    ]
    return "/v1/execute", head + x.tobytes() + w.tobytes(), headers, None


def batched_case() -> tuple[str, bytes, list[tuple[bytes, bytes]], dict[str, Any] | None]:
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4) / 8
    op = {**PAD, "InputTensor": {"DataType": "FLOAT32", "Sizes": [-1, 1, 4, 4]}}
    registration = {
        "name": "pad-batched",
        "operator": op,
        "batching": {"max_batch_size": 64, "max_queue_delay_us": 500},
    }
    body = {"inputs": {"InputTensor": _json_tensor(x, "FLOAT32")}}
    return (
        "/v1/operators/pad-batched/execute",
        json.dumps(body).encode(),
        [(b"content-type", b"application/json")],
        registration,
    )


CASES: dict[str, Callable[[], tuple[str, bytes, list[tuple[bytes, bytes]], Any]]] = {
    "small": small_case,
    "conv-gzip": conv_gzip_case,
    "batched": batched_case,
}


async def _call(app: Any, method: str, path: str, body: bytes, headers: list[Any]) -> int:
    """One request through the ASGI app; returns the status."""
    sent = False
    status = 0

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # no disconnect while the app answers
        raise AssertionError

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]

    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
        "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
        "root_path": "", "headers": [(b"host", b"bench"), (b"content-length",
        str(len(body)).encode()), *headers], "client": ("127.0.0.1", 1), "server": ("bench", 80),
    }  # fmt: skip
    await app(scope, receive, send)
    return status


async def drive(args: argparse.Namespace) -> None:
    path, body, headers, registration = CASES[args.case]()
    stages = StageTimers() if args.stages else None
    if args.app == "bare":
        from bare_app import app

        path, registration = BARE_PATHS[args.case], None
    else:
        app = create_app(Settings(backend="numpy", log_level="warning", max_queue=4096))
    async with app.router.lifespan_context(app):
        if registration is not None:
            reg = json.dumps(registration).encode()
            status = await _call(app, "POST", "/v1/operators", reg, [(b"content-type",
                                 b"application/json")])  # fmt: skip
            assert status in (200, 201), status
        assert await _call(app, "POST", path, body, headers) == 200

        async def worker(n: int) -> None:
            for _ in range(n):
                status = await _call(app, "POST", path, body, headers)
                assert status == 200, status

        per_task = max(1, args.requests // args.concurrency)
        await asyncio.gather(*(worker(per_task // 10) for _ in range(args.concurrency)))  # warm
        profile = cProfile.Profile() if args.profile else None
        rounds = []
        by_stage: list[list[tuple[str, float]]] = []
        for _ in range(args.rounds):
            if stages:
                stages.reset()
            cpu0, wall0 = time.process_time(), time.perf_counter()
            if profile:
                profile.enable()
            await asyncio.gather(*(worker(per_task) for _ in range(args.concurrency)))
            if profile:
                profile.disable()
            rounds.append((time.process_time() - cpu0, time.perf_counter() - wall0))
            if stages:
                by_stage.append(stages.report(per_task * args.concurrency))
        executions = requests = None
        if args.app == "dmlserve":
            registry = app.state.dmlserve.metrics.registry
            model = {"model": registration["name"] if registration else "PADDING", "version": "1"}
            executions = registry.get_sample_value("nv_inference_exec_count", model)
            requests = registry.get_sample_value("nv_inference_request_success", model)
    n = per_task * args.concurrency
    print(f"{args.app} {args.case}: {n} requests a round, {args.concurrency} concurrent")
    for cpu, wall in rounds:
        print(f"CPU per request: {cpu / n * 1e6:.0f} us; wall per request: {wall / n * 1e6:.0f} us")
    if len(rounds) > 1:
        # The least disturbed round: other work on the machine only ever adds time.
        print(f"least CPU per request over {len(rounds)} rounds: {min(rounds)[0] / n * 1e6:.0f} us")
    if executions and requests:
        print(f"requests per execution (all, warm-up included): {requests / executions:.1f}")
    if profile:
        _print_profile(profile, n * len(rounds), args.profile)
    if by_stage:
        best = min(range(len(rounds)), key=lambda i: rounds[i][0])
        print(f"\nby stage, us per request (round {best}, the least CPU):")
        for label, us in by_stage[best]:
            print(f"{us:8.1f}  {label}")
        print(f"{rounds[best][0] / n * 1e6:8.1f}  CPU per request in all (the driver included)")


def _print_profile(profile: cProfile.Profile, n: int, top: int) -> None:
    stats = pstats.Stats(profile, stream=io.StringIO())
    rows = []
    for (file, line, name), (_, calls, own, cum, _) in stats.stats.items():  # type: ignore[attr-defined]
        where = file.split("site-packages/")[-1].split("/batching/")[-1]
        rows.append((own / n * 1e6, cum / n * 1e6, calls / n, f"{name} ({where}:{line})"))
    print("\nown us/req  cum us/req  calls/req  function")
    for own, cum, calls, name in sorted(rows, reverse=True)[:top]:
        print(f"{own:10.1f}  {cum:10.1f}  {calls:9.2f}  {name}")
    print("\nby cumulative time:")
    for own, cum, calls, name in sorted(rows, key=lambda r: -r[1])[:top]:
        print(f"{own:10.1f}  {cum:10.1f}  {calls:9.2f}  {name}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--case", choices=list(CASES), default="small")
    p.add_argument("--app", choices=["dmlserve", "bare"], default="dmlserve")
    p.add_argument("--requests", type=int, default=4000)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--rounds", type=int, default=1, help="measured rounds (the least is shown)")
    p.add_argument("--stages", action="store_true", help="microseconds per stage (small only)")
    p.add_argument("--loop", choices=["uvloop", "asyncio"], default="uvloop")
    p.add_argument("--profile", type=int, default=0, metavar="TOP", help="cProfile, TOP rows")
    args = p.parse_args()
    if args.app == "bare" and args.case not in BARE_PATHS:
        p.error(f"the bare app serves only {', '.join(BARE_PATHS)}")
    if args.stages and (args.app != "dmlserve" or args.case != "small"):
        p.error("--stages times dmlserve's small case")
    try:
        import uvloop
    except ImportError:  # uvicorn runs the standard loop then too
        uvloop = None
    if args.loop == "uvloop" and uvloop is not None:
        uvloop.run(drive(args))
    else:
        asyncio.run(drive(args))


if __name__ == "__main__":
    main()
