"""Host memory: a computation's working set stays bounded, and running out of memory is a 503
after which the server keeps serving."""

from __future__ import annotations

import resource
import tracemalloc
from pathlib import Path

import httpx
import numpy as np

from tests.servers import ServerProcess
from tests.service.conftest import app_client
from tests.service.helpers import PADDING_OP, execute_request, read_outputs

MIB = 1 << 20


async def test_a_wide_pooling_window_stays_within_a_bounded_working_set() -> None:
    # 128x128 windows over a 512x512 image: taken as windows at once, 18 GiB of intermediates.
    x = np.random.default_rng(0).random((1, 1, 512, 512), dtype=np.float32)
    op = {"type": "AVERAGE_POOLING", "WindowSize": [128, 128]}
    body, headers = execute_request(op, {"InputTensor": x}, "binary")
    async with app_client(backend="numpy") as c:
        tracemalloc.start()
        try:
            r = await c.post("/v1/execute", content=body, headers=headers)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert r.status_code == 200, r.text
    y = read_outputs(r.content, r.headers)[1]["OutputTensor"]
    assert y.shape == (1, 1, 385, 385)
    np.testing.assert_allclose(y[0, 0, 0, 0], x[0, 0, :128, :128].mean(), rtol=1e-5)
    # Input 1 MiB, output 0.6 MiB, the request and response bodies, the CPU path's slices
    # (each within its working-memory budget): tens of MiB at most, never gigabytes.
    assert peak < 32 * MIB, f"peak {peak / MIB:.1f} MiB"


def _virtual_size(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmSize")


def test_host_out_of_memory_is_503_and_the_server_keeps_serving() -> None:
    # NumPy: host memory is what is capped (a CUDA context reserves address space of its own).
    srv = ServerProcess("--max-concurrency", "1", "--backend", "numpy")
    try:
        small, h = execute_request(PADDING_OP, {"InputTensor": np.ones((1, 1, 64, 64), np.int8)})
        # Worker threads started before the cap (a thread's stack is address space too).
        for _ in range(3):
            assert httpx.post(srv.url + "/v1/execute", content=small, headers=h).is_success
        # 512 MiB of address space to spare: a 1 GiB output cannot be allocated.
        cap = _virtual_size(srv.proc.pid) + 512 * MIB
        resource.prlimit(srv.proc.pid, resource.RLIMIT_AS, (cap, cap))
        big = {"type": "PADDING", "StartPadding": [0, 0], "EndPadding": [0, 0]}
        doc = {
            "operator": big,
            "output_encoding": "binary",
            "inputs": {
                "InputTensor": {
                    "DataType": "INT8",
                    "Sizes": [32768, 32768],
                    "Strides": [0, 0],
                    "b64": "AQ==",
                }  # fmt: skip
            },
        }
        r = httpx.post(srv.url + "/v1/execute", json=doc, timeout=120)
        assert r.status_code == 503, r.text[:300]
        assert "out of memory" in r.json()["detail"] and r.headers["retry-after"] == "1"
        r = httpx.post(srv.url + "/v1/execute", content=small, headers=h)
        assert r.status_code == 200
        np.testing.assert_array_equal(read_outputs(r.content, r.headers)[1]["OutputTensor"], 1)
    finally:
        srv.stop()
