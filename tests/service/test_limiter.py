"""The compute limiter: bounded queue, time limits, and no slot leaked whatever happens."""

from __future__ import annotations

import threading
import time

import anyio
import pytest

from dmlserve.service.concurrency import INLINE_BYTES, ComputeLimiter, offload
from dmlserve.service.errors import GatewayTimeoutError, QueueFullError
from dmlserve.service.work import Timings


async def _wait_idle(limiter: ComputeLimiter, seconds: float = 5.0) -> None:
    with anyio.fail_after(seconds):
        while limiter.running or limiter.waiting:
            await anyio.sleep(0.01)


async def test_queue_bound_and_order_of_refusal() -> None:
    limiter = ComputeLimiter(max_concurrency=1, max_queue=1, retry_after_s=3)
    release = threading.Event()
    results: list[object] = []

    async def job(tag: str) -> None:
        try:
            results.append(await limiter.run(lambda: release.wait(5) and tag, 10, Timings()))
        except QueueFullError as exc:
            results.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(job, "first")
        await anyio.sleep(0.05)
        tg.start_soon(job, "second")  # waits in the queue
        await anyio.sleep(0.05)
        assert limiter.running == 1 and limiter.waiting == 1
        await job("third")  # queue full
        release.set()
    refused = [r for r in results if isinstance(r, QueueFullError)]
    assert len(refused) == 1 and refused[0].headers["Retry-After"] == "3"
    assert sorted(r for r in results if isinstance(r, str)) == ["first", "second"]
    await _wait_idle(limiter)


async def test_timeouts_and_cancellations_leak_no_slot() -> None:
    limiter = ComputeLimiter(max_concurrency=2, max_queue=100, retry_after_s=1)
    outcomes: list[str] = []

    async def job(timeout: float) -> None:
        try:
            await limiter.run(lambda: time.sleep(0.2), timeout, Timings())
            outcomes.append("ok")
        except GatewayTimeoutError:
            outcomes.append("timeout")

    async with anyio.create_task_group() as tg:
        for i in range(12):
            tg.start_soon(job, 0.05 if i % 2 else 5.0)
        await anyio.sleep(0.1)
        with anyio.CancelScope() as scope:  # and some callers simply go away
            scope.cancel()
            await job(5.0)
    assert "timeout" in outcomes and "ok" in outcomes
    await _wait_idle(limiter)
    assert limiter.running == 0 and limiter.waiting == 0
    # Every slot is free again: two jobs run side by side.
    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(2):
            tg.start_soon(job, 5.0)
    assert time.perf_counter() - start < 0.38


async def test_worker_errors_propagate_and_free_the_slot() -> None:
    limiter = ComputeLimiter(max_concurrency=1, max_queue=0, retry_after_s=1)

    def boom() -> None:
        raise ValueError("from the worker")

    for _ in range(3):
        with pytest.raises(ValueError, match="from the worker"):
            await limiter.run(boom, 5, Timings())
    assert limiter.running == 0


async def test_one_threshold_decides_between_the_event_loop_and_a_thread() -> None:
    loop_thread = threading.get_ident()
    assert await offload(INLINE_BYTES, threading.get_ident) == loop_thread
    assert await offload(INLINE_BYTES + 1, threading.get_ident) != loop_thread
    limiter = ComputeLimiter(max_concurrency=1, max_queue=0, retry_after_s=1)
    assert await limiter.run(threading.get_ident, 5, Timings(), inline=True) == loop_thread
    assert await limiter.run(threading.get_ident, 5, Timings()) != loop_thread
    assert limiter.running == 0


async def test_inline_work_waits_its_turn_behind_a_running_job() -> None:
    limiter = ComputeLimiter(max_concurrency=1, max_queue=1, retry_after_s=1)
    release = threading.Event()
    order: list[str] = []
    dequeued = anyio.Event()

    async def blocker() -> None:
        await limiter.run(lambda: release.wait(5) and order.append("thread"), 10, Timings())

    async with anyio.create_task_group() as tg:
        tg.start_soon(blocker)
        while not limiter.running:
            await anyio.sleep(0)
        timings = Timings()
        tg.start_soon(
            lambda: limiter.run(
                lambda: order.append("inline"), 10, timings, inline=True, on_dequeue=dequeued.set
            )
        )
        while not limiter.waiting:
            await anyio.sleep(0)
        with pytest.raises(QueueFullError):  # one waiting is the whole queue, inline or not
            await limiter.run(lambda: None, 10, Timings(), inline=True)
        release.set()
        await dequeued.wait()
    assert order == ["thread", "inline"] and limiter.running == 0
