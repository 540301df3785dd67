"""Where work runs: compute slots with a bounded queue, and the event loop or a worker thread.

A request waits for one of `max_concurrency` compute slots; when `max_queue` requests are
already waiting it is refused (429). An HTTP request is checked (`refuse_if_full`) before its
body is read: when the queue is full then, it is refused at once, without its body being read or
decoded, so that a refusal costs next to nothing. (Requests still reading or decoding their
body are not counted as waiting: counting them would leave the slots idle while the next
request decodes, and the queue is checked again when they reach it.) The whole wait plus
compute is bounded by the request time limit (504): the computation is told the same deadline
and stops at its next check (`device`), its thread then frees the slot; until it has, the slot
counts as held past its time limit (`overrunning`, which turns readiness off).

Tiny work and the queue: work estimated as tiny (`cost.is_tiny`) takes a free slot and runs on
the event loop in one step, without yielding, so it never waits in the queue while a slot is
free, and is refused only when every slot is busy with thread work and the queue is full,
like any other request. An overload of tiny requests therefore shows as latency rather than
429s: refusing one would cost about what serving it does, and the latency stays bounded
because each connection has one request in flight and the connections are capped
(`max_connections`).

One threshold decides what runs on the event loop: `INLINE_BYTES` of parsing, decoding or
encoding (`offload`), and compute estimated as tiny (`cost.is_tiny`), cost less than the thread
hand-offs around them; anything larger goes to a worker thread so the loop never stalls.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import anyio
import anyio.from_thread
import anyio.to_thread

from dmlserve.service.errors import GatewayTimeoutError, QueueFullError
from dmlserve.service.work import Timings

T = TypeVar("T")

#: Bytes of work done on the event loop (well under a millisecond); more goes to a thread.
INLINE_BYTES = 64 << 10


async def offload(size: int, fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)` inline when `size` bytes of work is small, else in a worker thread.

    Decoding JSON numbers or base64 and encoding large outputs would otherwise block the
    event loop (and every other request) for as long as they take.
    """
    if size <= INLINE_BYTES:
        return fn(*args)
    return await anyio.to_thread.run_sync(fn, *args)


class Pending(Protocol):
    """A count of the requests waiting for a slot (the metrics' pending-request gauge)."""

    def inc(self) -> None: ...

    def dec(self) -> None: ...


class _NoCount:
    def inc(self) -> None:
        pass

    def dec(self) -> None:
        pass


NO_COUNT: Pending = _NoCount()


class ComputeLimiter:
    """`max_concurrency` compute slots, at most `max_queue` requests waiting for one."""

    def __init__(self, max_concurrency: int, max_queue: int, retry_after_s: int) -> None:
        self.max_concurrency = max_concurrency
        self.max_queue = max_queue
        self.retry_after_s = retry_after_s
        self._slots = anyio.CapacityLimiter(max_concurrency)
        # Worker threads may outlive an abandoned request; give them their own pool.
        self._threads = anyio.CapacityLimiter(max_concurrency * 4 + 4)
        self.waiting = 0
        #: Slots held by computations whose request gave up (past its time limit).
        self.overrunning = 0

    @property
    def running(self) -> int:
        return self._slots.borrowed_tokens

    async def run(
        self,
        fn: Callable[[], T],
        timeout_s: float,
        timings: Timings,
        *,
        inline: bool = False,
        pending: Pending = NO_COUNT,
    ) -> T:
        """Run `fn` under a slot within `timeout_s` of queueing: in a worker thread, or with
        `inline` on the event loop (only for work bounded as tiny).

        `pending` counts the request while it waits in the queue (a request that finds a free
        slot for inline work never waits).
        """
        if inline and self._slots.available_tokens > 0:
            # A free slot (so nobody waits: a slot given back goes to the first waiter at once):
            # the work runs now, in this step, without yielding to the event loop (or setting up
            # a time limit). No other computation can start before it ends, so taking the slot
            # and giving it back around it would change nothing anyone can see.
            return fn()
        token = object()
        try:
            with anyio.fail_after(timeout_s):
                await self._queue(token, timings, pending)
                if not inline:
                    return await self._in_thread(fn, token)
        except TimeoutError:
            raise GatewayTimeoutError.after(timeout_s) from None
        try:
            return fn()
        finally:
            self._slots.release_on_behalf_of(token)

    def refuse_if_full(self) -> None:
        """429 when no slot is free and `max_queue` requests already wait (batchers' included)."""
        if self._slots.available_tokens == 0 and self.waiting >= self.max_queue:
            raise QueueFullError(
                f"{self.waiting} requests are already waiting for a compute slot "
                f"(max_queue = {self.max_queue})",
                self.retry_after_s,
            )

    async def _queue(self, token: object, timings: Timings, pending: Pending) -> None:
        """Wait for a slot, or 429 at once when the queue is full."""
        self.refuse_if_full()
        start = time.perf_counter()
        self.waiting += 1
        pending.inc()
        try:
            await self._slots.acquire_on_behalf_of(token)
        finally:
            self.waiting -= 1
            pending.dec()
        timings.queue = time.perf_counter() - start

    # --- for a batcher: it queues its requests itself, then runs each batch under one slot ---

    async def acquire(self, token: object) -> None:
        """Wait for a slot without a place in the queue (a batch, whose requests are counted in
        `waiting` by their batcher)."""
        await self._slots.acquire_on_behalf_of(token)

    def release(self, token: object) -> None:
        self._slots.release_on_behalf_of(token)

    async def run_acquired(self, fn: Callable[[], T], token: object, *, inline: bool) -> T:
        """Run `fn` under the slot `token` holds, on the event loop or in a worker thread; the
        slot is freed when `fn` ends (by the worker if this call is cancelled meanwhile)."""
        if not inline:
            return await self._in_thread(fn, token)
        try:
            return fn()
        finally:
            self._slots.release_on_behalf_of(token)

    async def _in_thread(self, fn: Callable[[], T], token: object) -> T:
        claim = _Claim()
        try:
            result = await anyio.to_thread.run_sync(
                self._in_slot, fn, token, claim, abandon_on_cancel=True, limiter=self._threads
            )
        except BaseException:
            # Given up (time limit, cancellation) or failed. A job no worker started never
            # will; a finished one is done: either way the slot is freed here. A job still
            # running frees it itself when it ends (at its next deadline check).
            if claim.leave():
                self._slots.release_on_behalf_of(token)
            else:
                self.overrunning += 1
            raise
        # Released here on the event loop, not from the worker: a blocking call back into a
        # busy loop would hold the worker (and the slot) for a loop turn.
        self._slots.release_on_behalf_of(token)
        return result

    def _in_slot(self, fn: Callable[[], T], token: object, claim: _Claim) -> T:
        if not claim.start():
            raise _AbandonedError  # nobody awaits this job any more
        try:
            return fn()
        finally:
            if claim.finish():
                # The request gave up while this ran: nobody else will free the slot.
                try:
                    anyio.from_thread.run_sync(self._release_overrun, token)
                except RuntimeError:
                    pass  # the event loop is gone (shutdown): nothing is left to release

    def _release_overrun(self, token: object) -> None:
        self.overrunning -= 1
        self._slots.release_on_behalf_of(token)


class _AbandonedError(Exception):
    """A queued job whose request gave up before a worker started it."""


class _Claim:
    """Decides, once, which side frees a job's slot: the awaiting request or the worker.

    States: queued -> started -> finished, or queued/started -> left (the request stopped
    waiting). The request frees the slot unless it left while the job was running; then the
    worker frees it when the job ends.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state = "queued"

    def start(self) -> bool:
        """In the worker: False when the request left before the job started."""
        with self._lock:
            if self._state == "left":
                return False
            self._state = "started"
            return True

    def finish(self) -> bool:
        """In the worker, once the job ends: True when the worker must free the slot."""
        with self._lock:
            orphaned = self._state == "left"
            self._state = "finished"
            return orphaned

    def leave(self) -> bool:
        """In the request, when it stops waiting: True when the request must free the slot."""
        with self._lock:
            if self._state == "started":
                self._state = "left"
                return False
            self._state = "left" if self._state == "queued" else self._state
            return True
