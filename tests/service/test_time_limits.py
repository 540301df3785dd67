"""A request past its time limit stops computing and frees its slot; readiness says so meanwhile.

Time is driven, not waited for: the device reads a clock the test holds, which stops the
computation between two of its slices until the test lets the deadline pass.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from dataclasses import dataclass

import numpy as np
import pytest

from dmlserve.service.staging import wait_for_event
from tests.service.conftest import app_client
from tests.service.helpers import PADDING_OP, execute_request


class GatedClock:
    """Time as it is at the computation's first check; at the second the computation waits
    for the test, and then (with `expire`) time has run past every deadline."""

    def __init__(self, expire: bool = True) -> None:
        self.expire = expire
        self.calls = 0
        self.reached = threading.Event()  # the computation is past its first slice
        self.release = threading.Event()

    def __call__(self) -> float:
        self.calls += 1
        if self.calls == 2:
            self.reached.set()
            self.release.wait(60)
            if self.expire:
                return math.inf
        return time.monotonic()


def _convolution() -> tuple[bytes, dict[str, str]]:
    # Two images: at least two checks between slices; large enough to run in a worker thread.
    rng = np.random.default_rng(0)
    x = rng.integers(0, 255, size=(2, 8, 32, 32), dtype=np.uint8)
    w = rng.integers(-128, 127, size=(8, 8, 3, 3), dtype=np.int8)
    op = {"type": "CONVOLUTION_INTEGER"}
    return execute_request(op, {"InputTensor": x, "FilterTensor": w}, "binary")


async def test_a_computation_past_its_limit_stops_and_frees_its_slot() -> None:
    async with app_client(backend="numpy", max_concurrency=1, request_timeout_s=0.2) as c:
        state = c.app.state.dmlserve  # type: ignore[attr-defined]
        clock = GatedClock()
        state.device.clock = clock
        body, headers = _convolution()
        slow = asyncio.create_task(c.post("/v1/execute", content=body, headers=headers))
        assert await asyncio.to_thread(clock.reached.wait, 60)
        # The request gives up at its limit while the computation is held mid-way.
        r = await slow
        assert r.status_code == 504 and "time limit of 0.2 s" in r.json()["detail"]
        assert state.limiter.running == 1 and state.limiter.overrunning == 1
        ready = await c.get("/v2/health/ready")
        assert ready.status_code == 503 and "past their time limit" in ready.json()["error"]
        # Time passes the deadline: the computation stops at its check and frees the slot.
        clock.release.set()
        for _ in range(6000):
            if state.limiter.running == 0:
                break
            await asyncio.sleep(0.01)
        assert state.limiter.running == 0 and state.limiter.overrunning == 0
        assert clock.calls == 2  # stopped at the check that saw the deadline
        assert (await c.get("/v2/health/ready")).status_code == 200
        tiny, h = execute_request(PADDING_OP, {"InputTensor": np.ones((1, 1, 2, 2), np.int8)})
        assert (await c.post("/v1/execute", content=tiny, headers=h)).status_code == 200


async def test_a_busy_server_stays_ready() -> None:
    async with app_client(backend="numpy", max_concurrency=1) as c:
        state = c.app.state.dmlserve  # type: ignore[attr-defined]
        clock = GatedClock(expire=False)
        state.device.clock = clock
        body, headers = _convolution()
        busy = asyncio.create_task(c.post("/v1/execute", content=body, headers=headers))
        assert await asyncio.to_thread(clock.reached.wait, 60)
        assert state.limiter.running == 1  # computing, within its limit
        assert (await c.get("/v2/health/ready")).status_code == 200
        clock.release.set()
        assert (await busy).status_code == 200


@dataclass
class _Event:
    """A CUDA event's `done`, flipping after a number of looks."""

    looks_left: int

    @property
    def done(self) -> bool:
        self.looks_left -= 1
        return self.looks_left < 0


def test_the_wait_for_the_kernels_gives_up_at_the_deadline() -> None:
    ticks = iter(range(1000))
    clock = lambda: float(next(ticks))  # noqa: E731 - one second per look
    assert wait_for_event(_Event(3), deadline=100.0, clock=clock)
    assert not wait_for_event(_Event(10**6), deadline=float(next(ticks) + 5), clock=clock)


SPIN = r"""
extern "C" __global__ void spin(volatile const int* flag, unsigned long long limit) {
    for (unsigned long long i = 0; i < limit && *flag == 0; ++i) {}
}
"""


@pytest.mark.gpu
def test_the_wait_abandons_a_kernel_that_is_still_running() -> None:
    import cupy

    spin = cupy.RawKernel(SPIN, "spin")
    flag = cupy.zeros(1, dtype=np.int32)
    busy = cupy.cuda.Stream(non_blocking=True)
    other = cupy.cuda.Stream(non_blocking=True)
    with busy:
        # Runs until the flag is set (bounded, should the flag never come).
        spin((1,), (1,), (flag, np.uint64(1 << 40)))
    assert not wait_for_event(busy.record(), time.monotonic() + 0.05)
    flag.set(np.ones(1, np.int32), stream=other)  # from another stream: not queued behind spin
    assert wait_for_event(busy.record(), time.monotonic() + 600)


@pytest.mark.gpu
def test_a_request_given_up_on_the_gpu_leaves_the_next_one_correct() -> None:
    from dmlserve.kernels.dtypes import DataType
    from dmlserve.kernels.wire import HostTensor
    from dmlserve.service.binding import bind
    from dmlserve.service.device import Device
    from dmlserve.service.errors import GatewayTimeoutError
    from dmlserve.service.work import Work

    x = np.arange(1 << 20, dtype=np.float32)
    t = HostTensor(DataType.FLOAT32, (1, 1, 1024, 1024), None, x)
    op = bind({"type": "PADDING", "StartPadding": [0, 0, 1, 1], "EndPadding": [0, 0, 1, 1]},
              {"InputTensor": t})  # fmt: skip
    device = Device("cupy")
    expected = np.pad(x.reshape(1, 1, 1024, 1024), ((0, 0), (0, 0), (1, 1), (1, 1)))
    for _ in range(3):
        # Its deadline has passed: given up (unless already done at the first look), its
        # buffers set aside; the next request on the same thread takes others.
        late = Work(op, {"InputTensor": t}, deadline=time.monotonic() - 1, time_limit_s=1.0)
        try:
            np.testing.assert_array_equal(device.run(late), expected)
        except GatewayTimeoutError:
            pass
        np.testing.assert_array_equal(device.run(Work(op, {"InputTensor": t})), expected)
