"""Plans launch through `DirectLaunch` (one argument buffer, straight to the driver): the same
outputs as CuPy's kernel call, also with many threads sharing one plan."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

from dmlserve.kernels import reference
from dmlserve.kernels.geometry import Window

from ._support import launcher, random_array

pytestmark = pytest.mark.gpu

WINDOW = Window((3, 3), (1, 1), (1, 1), (1, 1), (1, 1))


def _plans(cupy: Any, x: Any) -> dict[str, Any]:
    padding = launcher("padding")
    pooling = launcher("average_pooling")
    unfold = launcher("unfold")
    pad_args = ((0, 0, 1, 3), (0, 0, 2, 1), "REFLECTION", None, b"")
    return {
        "padding": padding._call_plan(x.shape, x.strides, x.dtype.itemsize, *pad_args),
        "average_pooling": pooling._plan(x.shape, x.strides, x.dtype, WINDOW, True, None),
        "unfold": unfold._plan(x.shape, x.strides, x.dtype.itemsize, WINDOW, None),
    }


@pytest.mark.parametrize("operator", ["padding", "average_pooling", "unfold"])
def test_direct_launch_matches_cupy_launch(operator: str) -> None:
    cupy = pytest.importorskip("cupy")
    host = random_array((2, 3, 17, 29), np.float32, np.random.default_rng(7))
    x = cupy.asarray(host)
    plan = _plans(cupy, x)[operator]
    assert plan.direct is not None
    direct = plan.run(x)
    through_cupy = plan._replace(direct=None).run(x)
    np.testing.assert_array_equal(cupy.asnumpy(direct), cupy.asnumpy(through_cupy))


def test_threads_sharing_a_plan_get_their_own_outputs() -> None:
    cupy = pytest.importorskip("cupy")
    threads, calls = 8, 40
    rng = np.random.default_rng(11)
    hosts = [random_array((2, 3, 17, 29), np.float32, rng) for _ in range(threads)]
    start, end = (0, 0, 1, 3), (0, 0, 2, 1)
    wanted = [reference.padding(h, start, end, "REFLECTION", 0) for h in hosts]
    padding = launcher("padding")
    failures: list[str] = []
    barrier = threading.Barrier(threads)

    def worker(i: int) -> None:
        stream = cupy.cuda.Stream(non_blocking=True)
        with stream:
            x = cupy.asarray(hosts[i])
            barrier.wait()
            outputs = [padding.padding(x, start, end, "REFLECTION", 0) for _ in range(calls)]
            stream.synchronize()
        for y in outputs:
            if not np.array_equal(cupy.asnumpy(y), wanted[i]):
                failures.append(f"thread {i}")

    pool = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    assert not failures
