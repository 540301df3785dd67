"""The compute limiter: bounded queue, time limits, and no slot leaked whatever happens.

Jobs wait on events the test sets; a wait for the limiter's state polls it, with a generous
bound, and no test measures how long anything took.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import anyio
import pytest

from dmlserve.service.concurrency import INLINE_BYTES, ComputeLimiter, offload
from dmlserve.service.errors import GatewayTimeoutError, QueueFullError
from dmlserve.service.work import Timings


async def _until(condition: Callable[[], bool], seconds: float = 60.0) -> None:
    with anyio.fail_after(seconds):
        while not condition():
            await anyio.sleep(0.001)


async def _wait_idle(limiter: ComputeLimiter) -> None:
    await _until(lambda: not (limiter.running or limiter.waiting))


async def test_queue_bound_and_order_of_refusal() -> None:
    limiter = ComputeLimiter(max_concurrency=1, max_queue=1, retry_after_s=3)
    release = threading.Event()
    results: list[object] = []

    async def job(tag: str) -> None:
        try:
            results.append(await limiter.run(lambda: release.wait(60) and tag, 60, Timings()))
        except QueueFullError as exc:
            results.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(job, "first")
        await _until(lambda: limiter.running == 1)
        tg.start_soon(job, "second")  # waits in the queue
        await _until(lambda: limiter.waiting == 1)
        await job("third")  # queue full
        release.set()
    refused = [r for r in results if isinstance(r, QueueFullError)]
    assert len(refused) == 1 and refused[0].headers["Retry-After"] == "3"
    assert sorted(r for r in results if isinstance(r, str)) == ["first", "second"]
    await _wait_idle(limiter)


async def test_timeouts_and_cancellations_leak_no_slot() -> None:
    limiter = ComputeLimiter(max_concurrency=2, max_queue=100, retry_after_s=1)
    never = threading.Event()  # what the jobs that must time out wait for
    release = threading.Event()
    outcomes: list[str] = []

    async def job(timeout: float, gate: threading.Event) -> None:
        try:
            await limiter.run(lambda: gate.wait(60), timeout, Timings())
            outcomes.append("ok")
        except GatewayTimeoutError:
            outcomes.append("timeout")

    async with anyio.create_task_group() as tg:
        # Jobs that overrun their limit while running, and jobs queued behind them.
        for i in range(12):
            tg.start_soon(job, 0.05 if i % 2 else 60.0, never if i % 2 else release)
        await _until(lambda: "timeout" in outcomes)
        with anyio.CancelScope() as scope:  # and some callers simply go away
            scope.cancel()
            await job(60.0, release)
        never.set()  # the overrunning jobs end (as a computation stops at its deadline)
        release.set()
    assert outcomes.count("timeout") >= 1 and outcomes.count("ok") >= 1
    await _wait_idle(limiter)
    assert limiter.running == 0 and limiter.waiting == 0 and limiter.overrunning == 0
    # Every slot is free again: two jobs run side by side (each waits for the other).
    both = threading.Barrier(2, timeout=60)
    async with anyio.create_task_group() as tg:
        for _ in range(2):
            tg.start_soon(lambda: limiter.run(both.wait, 60, Timings()))


async def test_a_slot_held_past_its_time_limit_counts_as_overrunning() -> None:
    limiter = ComputeLimiter(max_concurrency=1, max_queue=0, retry_after_s=1)
    release = threading.Event()
    with pytest.raises(GatewayTimeoutError, match="time limit of 0.05 s"):
        await limiter.run(lambda: release.wait(60), 0.05, Timings())
    assert limiter.running == 1 and limiter.overrunning == 1
    release.set()
    await _until(lambda: limiter.running == 0)
    assert limiter.overrunning == 0


async def test_refuse_if_full_only_when_the_queue_is_full() -> None:
    limiter = ComputeLimiter(max_concurrency=1, max_queue=1, retry_after_s=1)
    release = threading.Event()
    limiter.refuse_if_full()  # a free slot
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: limiter.run(lambda: release.wait(60), 60, Timings()))
        await _until(lambda: limiter.running == 1)
        limiter.refuse_if_full()  # the slot is busy, the queue has room
        tg.start_soon(lambda: limiter.run(lambda: None, 60, Timings()))
        await _until(lambda: limiter.waiting == 1)
        with pytest.raises(QueueFullError, match="1 requests are already waiting"):
            limiter.refuse_if_full()
        release.set()
    limiter.refuse_if_full()


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

    class Pending:
        """Counts the waiting request; `dequeued` once it leaves the queue."""

        changes: list[int] = []

        def inc(self) -> None:
            self.changes.append(1)

        def dec(self) -> None:
            self.changes.append(-1)
            dequeued.set()

    pending = Pending()

    async def blocker() -> None:
        await limiter.run(lambda: release.wait(5) and order.append("thread"), 10, Timings())

    async with anyio.create_task_group() as tg:
        tg.start_soon(blocker)
        while not limiter.running:
            await anyio.sleep(0)
        timings = Timings()
        tg.start_soon(
            lambda: limiter.run(
                lambda: order.append("inline"), 10, timings, inline=True, pending=pending
            )
        )
        while not pending.changes:
            await anyio.sleep(0)
        assert limiter.waiting == 1 and pending.changes == [1]
        with pytest.raises(QueueFullError):  # one waiting is the whole queue, inline or not
            await limiter.run(lambda: None, 10, Timings(), inline=True)
        release.set()
        await dequeued.wait()
    assert order == ["thread", "inline"] and limiter.running == 0 and pending.changes == [1, -1]
    # With a free slot, inline work never waits: it is never counted as pending.
    await limiter.run(lambda: order.append("free"), 10, Timings(), inline=True, pending=pending)
    assert order[-1] == "free" and pending.changes == [1, -1]
