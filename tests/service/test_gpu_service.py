"""The service on the CuPy backend: same answers as NumPy, strided inputs, out-of-memory -> 503.

Skipped where no CUDA device answers (see tests/conftest.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.seed_examples import SEED_EXAMPLES
from tests.service.conftest import app_client
from tests.service.helpers import execute_request, read_outputs

pytestmark = pytest.mark.gpu

RNG = np.random.default_rng(1234)

CASES: list[tuple[str, dict[str, Any], dict[str, np.ndarray]]] = [
    ("padding-wrap-int64", {"type": "PADDING", "PaddingMode": "WRAP",
     "StartPadding": [0, 1, 2, 3], "EndPadding": [1, 0, 3, 2]},
     {"InputTensor": RNG.integers(-(2**62), 2**62, (2, 3, 4, 5))}),
    ("unfold-3d-uint8", {"type": "UNFOLD", "WindowSizes": [2, 3, 2], "Strides": [1, 2, 1],
     "Dilations": [2, 1, 1], "StartPadding": [1, 0, 1], "EndPadding": [0, 1, 1]},
     {"InputTensor": RNG.integers(0, 256, (2, 2, 5, 6, 4), dtype=np.uint8)}),
    ("fold-int32", {"type": "FOLD", "WindowSizes": [3, 2], "Strides": [2, 1],
     "OutputTensor": {"DataType": "INT32", "Sizes": [1, 2, 7, 5]}},
     {"InputTensor": RNG.integers(-1000, 1000, (1, 12, 12), dtype=np.int32)}),
    ("pool-float16", {"type": "AVERAGE_POOLING", "WindowSize": [3, 3], "Strides": [2, 2],
     "StartPadding": [1, 1], "EndPadding": [1, 1], "IncludePadding": False},
     {"InputTensor": RNG.standard_normal((2, 3, 9, 9)).astype(np.float16)}),
    ("conv-u8-s8-groups", {"type": "CONVOLUTION_INTEGER", "GroupCount": 2,
     "StartPadding": [1, 0], "EndPadding": [0, 1], "Dilations": [2, 1]},
     {"InputTensor": RNG.integers(0, 256, (2, 4, 7, 6), dtype=np.uint8),
      "FilterTensor": RNG.integers(-128, 128, (4, 2, 2, 3), dtype=np.int8),
      "InputZeroPointTensor": np.array([[[[3]]]], np.uint8)}),
]  # fmt: skip


async def _run(
    backend: str, op: dict[str, Any], inputs: dict[str, np.ndarray], **settings: Any
) -> np.ndarray:
    async with app_client(backend=backend, **settings) as c:
        body, headers = execute_request(op, inputs, "binary")
        r = await c.post("/v1/execute", content=body, headers=headers)
        assert r.status_code == 200, r.text
        doc, out = read_outputs(r.content, r.headers)
        assert doc["backend"] == backend
        return out["OutputTensor"]


@pytest.mark.parametrize("tiny_on_host", [False, True], ids=["device", "tiny-on-host"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
async def test_cupy_matches_numpy(
    case: tuple[str, dict[str, Any], dict[str, np.ndarray]], tiny_on_host: bool
) -> None:
    _, op, inputs = case
    on_gpu = await _run("cupy", op, inputs, tiny_on_host=tiny_on_host)
    on_cpu = await _run("numpy", op, inputs)
    if on_cpu.dtype.kind == "f":
        np.testing.assert_allclose(
            on_gpu, on_cpu, rtol=1e-3 if on_cpu.dtype == np.float16 else 1e-6
        )
    else:
        np.testing.assert_array_equal(on_gpu, on_cpu, strict=True)


async def test_cupy_seed_examples_and_strided_inputs() -> None:
    async with app_client(backend="cupy", tiny_on_host=False) as c:
        for ex in SEED_EXAMPLES:
            body, headers = execute_request(ex.operator, ex.inputs, "b64")
            r = await c.post("/v1/execute", content=body, headers=headers)
            assert r.status_code == 200, r.text
            _, out = read_outputs(r.content, r.headers)
            np.testing.assert_array_equal(out["OutputTensor"], ex.expected, strict=True)
        # A 0-stride broadcast input crosses to the device as its small buffer.
        row = np.arange(5, dtype=np.float32)
        tensor = {"DataType": "FLOAT32", "Sizes": [2, 3, 4, 5], "Strides": [0, 0, 0, 1],
                  "data": row.tolist()}  # fmt: skip
        op = {"type": "PADDING", "PaddingMode": "EDGE", "StartPadding": [0, 0, 1, 1],
              "EndPadding": [0, 0, 1, 1]}  # fmt: skip
        r = await c.post("/v1/execute", json={"operator": op, "inputs": {"InputTensor": tensor}})
        assert r.status_code == 200, r.text
        _, out = read_outputs(r.content, r.headers)
        expected = np.pad(
            np.broadcast_to(row, (2, 3, 4, 5)), [(0, 0), (0, 0), (1, 1), (1, 1)], "edge"
        )
        np.testing.assert_array_equal(out["OutputTensor"], expected)


async def test_out_of_memory_is_503_then_the_next_request_is_served() -> None:
    import cupy

    pool = cupy.get_default_memory_pool()
    op = {"type": "UNFOLD", "WindowSizes": [12, 12]}  # ~590 MB of output
    x = np.ones((1, 1, 1024, 1024), np.float32)
    body, headers = execute_request(op, {"InputTensor": x}, "binary")
    async with app_client(backend="cupy") as c:
        pool.free_all_blocks()
        free, _ = cupy.cuda.Device().mem_info
        blocker = cupy.empty(max(free - (300 << 20), 1), dtype=np.uint8)  # leave ~300 MB
        try:
            before = pool.used_bytes()
            r = await c.post("/v1/execute", content=body, headers=headers)
            assert r.status_code == 503, r.text
            assert r.headers["retry-after"] == "1"
            assert "out of memory" in r.json()["detail"]
            assert pool.used_bytes() == before  # nothing of the failed request is held
        finally:
            del blocker
            pool.free_all_blocks()
        r = await c.post("/v1/execute", content=body, headers=headers)
        assert r.status_code == 200, r.text
        _, out = read_outputs(r.content, r.headers)
        assert out["OutputTensor"].shape == (1, 144, 1013 * 1013)
        assert float(out["OutputTensor"][0, 0, 0]) == 1.0
        metrics = (await c.get("/metrics")).text
        assert "dmlserve_gpu_memory_used_bytes" in metrics
