"""Dynamic batching: concurrent requests for one registered operator run as one execution.

A model registered with `batching` (every input a request sends, and the output, have a -1
batch; constants are bound at registration) gets a `Batcher`. Its requests queue in arrival
order. A batch is due when the queued items reach `max_batch_size` or a preferred batch size,
or when the oldest request has waited `max_queue_delay_us`; it then waits for a compute slot,
and takes whoever has arrived by then: under load, batches grow while the slots are busy. The
requests' inputs are concatenated along the batch axis (the constants are the same for all),
run as one `Work` under one slot, and the output is split back: each request gets the rows of
its own inputs. Every operator computes each batch item on its own, so those bytes are an
unbatched run's.

Limits keep their meanings. Each queued request counts against `max_queue` (429 when full). Each
has its own time limit, from queueing on (504): past it, the request leaves the queue, or the
result of a batch already running, which goes on for the others and frees its slot when done;
a cancelled request (its client gone) is dropped the same way. A batch never holds more than
`max_batch_size` items nor more than `max_output_bytes` of output; a request larger than
`max_batch_size`, or one whose tensors are in device memory (CUDA shared memory), runs on its
own, unbatched. Metrics: each request is observed as any other (its items counted); one of a
batch's requests carries the execution (`Work.executions`, with the batch's size).

Time comes from a `Clock` (`deadlines`): the event loop's, or in tests one they advance by hand;
the requests' time limits are kept by one timer (`Deadlines`).
"""

from __future__ import annotations

import asyncio
import collections
import functools
import weakref
from collections.abc import Collection, Coroutine
from typing import TYPE_CHECKING, Any

import numpy as np

from dmlserve.kernels._array import is_cupy_array
from dmlserve.kernels.wire import HostTensor, Layout
from dmlserve.service.concurrency import NO_COUNT, Pending
from dmlserve.service.cost import placement
from dmlserve.service.deadlines import Clock, Deadlines, LoopClock
from dmlserve.service.errors import GatewayTimeoutError
from dmlserve.service.schemas import Batching
from dmlserve.service.work import Outcome, Timings, Work

if TYPE_CHECKING:
    from dmlserve.service.registry import RegisteredOperator
    from dmlserve.service.state import ServiceState


def batch_size(work: Work) -> int:
    """The items a request brings: its output's batch."""
    out = work.operator.output_tensor
    assert out is not None
    return out.sizes[0]


def concatenated(members: list[Work], batched: Collection[str]) -> dict[str, HostTensor]:
    """The members' inputs: those in `batched` joined along the batch axis (packed, row-major),
    the others (constants, the same in every member) as the first member has them."""
    joined = dict(members[0].inputs)
    for name in batched:
        first = joined[name]
        array = np.concatenate([w.inputs[name].view() for w in members], axis=0)
        joined[name] = HostTensor(first.data_type, array.shape, None, array.reshape(-1))
    return joined


def split(output: np.ndarray, members: list[Work]) -> list[np.ndarray]:
    """A batch's output cut back into each member's rows, in order (views, no copies)."""
    parts, start = [], 0
    for work in members:
        n = batch_size(work)
        parts.append(output[start : start + n])
        start += n
    return parts


class _Entry:
    """One queued request."""

    __slots__ = ("work", "items", "out_bytes", "future", "enqueued", "pending", "queued")

    def __init__(
        self, work: Work, future: asyncio.Future[np.ndarray], now: float, pending: Pending
    ) -> None:
        out = work.operator.output_tensor
        assert out is not None
        self.work = work
        self.items = out.sizes[0]
        self.out_bytes = out.nbytes
        self.future = future
        self.enqueued = now
        self.queued = True
        self.pending = pending


class Batcher:
    """The queue and the batches of one registered operator."""

    def __init__(
        self, state: ServiceState, reg: RegisteredOperator, clock: Clock, deadlines: Deadlines
    ) -> None:
        assert reg.batching is not None
        self.state = state
        self.name = reg.name
        self.operator = reg.operator  # as registered: the batch sizes are -1
        self.policy: Batching = reg.batching
        self.preferred = frozenset(reg.batching.preferred_batch_sizes or ())
        self.batched = tuple(reg.inputs)  # the inputs a request sends (the rest: constants)
        self.clock = clock
        self.deadlines = deadlines  # the requests' time limits
        self._queue: collections.deque[_Entry] = collections.deque()
        self._items = 0
        self._wake: asyncio.Future[None] | None = None
        self._dispatcher: asyncio.Task[None] | None = None
        self._running: set[asyncio.Task[None]] = set()

    @property
    def queued(self) -> int:
        """Requests waiting for a batch."""
        return len(self._queue)

    def accepts(self, work: Work) -> bool:
        """Whether `work` fits in a batch (work in device memory runs alone)."""
        return (
            batch_size(work) <= self.policy.max_batch_size
            and work.sink is None
            and not any(is_cupy_array(work.inputs[n].buffer) for n in self.batched)
        )

    async def submit(self, work: Work, pending: Pending = NO_COUNT) -> Outcome:
        """Queue `work`; its share of the batch it ran in. `pending` counts it while it waits
        for its batch to start."""
        limiter = self.state.limiter
        limiter.refuse_if_full()
        now = self.clock.now()
        entry = _Entry(work, asyncio.get_running_loop().create_future(), now, pending)
        pending.inc()
        deadline = self.deadlines.add(
            self.state.settings.request_timeout_s, functools.partial(self._expire, entry)
        )
        self._queue.append(entry)
        self._items += entry.items
        limiter.waiting += 1
        self._poke()
        try:
            output = await entry.future
        finally:
            self.deadlines.finish(deadline)
            if entry.queued:  # cancelled before a batch took it
                self._drop(entry)
            entry.future.cancel()  # a batch running it skips it
        device = self.state.require_ready()
        return Outcome(work, output, device.name)

    def _expire(self, entry: _Entry) -> None:
        """The request's time limit: it leaves the queue, or its batch's result."""
        if entry.future.done():
            return
        timeout_s = self.state.settings.request_timeout_s
        entry.future.set_exception(
            GatewayTimeoutError(f"the request exceeded its time limit of {timeout_s:g} s")
        )
        if entry.queued:
            self._drop(entry)

    def _drop(self, entry: _Entry) -> None:
        self._queue.remove(entry)
        self._dequeued(entry)
        self._poke()  # the oldest request may have changed

    def _dequeued(self, entry: _Entry) -> None:
        entry.queued = False
        self._items -= entry.items
        self.state.limiter.waiting -= 1
        entry.pending.dec()

    # --- the dispatcher: one task while requests wait ------------------------------------

    def _poke(self) -> None:
        """The queue changed: start the dispatcher, or wake it if a batch is due now (else
        the timer of the oldest request's delay wakes it)."""
        if self._dispatcher is None:
            if self._queue:
                self._dispatcher = asyncio.get_running_loop().create_task(self._dispatch())
        elif self._wake is not None and not self._wake.done() and self._due():
            self._wake.set_result(None)

    async def _dispatch(self) -> None:
        limiter = self.state.limiter
        try:
            while self._queue:
                await self._until_due()
                if not self._queue:
                    break
                token = object()
                await limiter.acquire(token)  # requests arriving meanwhile join this batch
                entries = self._take()
                if not entries:
                    limiter.release(token)
                    continue
                self._spawn(self._execute(entries, token))
        finally:
            self._dispatcher = None
        self._poke()  # anything queued as it stopped starts a new one

    async def _until_due(self) -> None:
        """Return once the queue holds a batch worth running now, or is empty."""
        while not self._due():
            wake = self._wake = asyncio.get_running_loop().create_future()
            deadline = self._queue[0].enqueued + self.policy.max_queue_delay_us / 1e6
            timer = self.clock.call_at(deadline, functools.partial(_set, wake))
            try:
                await wake
            finally:
                timer.cancel()
                self._wake = None

    def _due(self) -> bool:
        """A batch should start now (an empty queue too: the dispatcher then stops)."""
        p = self.policy
        if not self._queue or self._items >= p.max_batch_size or self._preferred_prefix() > 0:
            return True
        return self.clock.now() >= self._queue[0].enqueued + p.max_queue_delay_us / 1e6

    def _preferred_prefix(self) -> int:
        """The most queued requests, oldest first, whose items make a preferred batch size."""
        preferred, best, items = self.preferred, 0, 0
        if not preferred:
            return 0
        for i, entry in enumerate(self._queue):
            items += entry.items
            if items > self.policy.max_batch_size:
                break
            if items in preferred:
                best = i + 1
        return best

    def _take(self) -> list[_Entry]:
        """The next batch, oldest request first: whole requests, up to max_batch_size items
        and max_output_bytes, cut at a preferred batch size where one is reachable."""
        limit, budget = self.policy.max_batch_size, self.state.settings.max_output_bytes
        count, items, out_bytes = 0, 0, 0
        for entry in self._queue:
            if items + entry.items > limit or (count and out_bytes + entry.out_bytes > budget):
                break
            count, items, out_bytes = count + 1, items + entry.items, out_bytes + entry.out_bytes
        count = min(count, self._preferred_prefix() or count)
        entries = []
        started = self.clock.now()
        for _ in range(count):
            entry = self._queue.popleft()
            self._dequeued(entry)
            entry.work.timings.queue = started - entry.enqueued
            entries.append(entry)
        return entries

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._running.add(task)  # held until done: the loop keeps only weak references
        task.add_done_callback(self._running.discard)

    # --- one batch -----------------------------------------------------------------------

    async def _execute(self, entries: list[_Entry], token: object) -> None:
        """Run one batch under the slot `token` holds, and hand each request its rows."""
        members = [e.work for e in entries]
        try:
            output, timings = await self._run(members, token)
        except Exception as exc:
            for entry in entries:
                if not entry.future.done():
                    entry.future.set_exception(exc)
            return
        except BaseException:
            for entry in entries:
                entry.future.cancel()
            raise
        # The execution counts once, with the batch's size: on the first request still waiting.
        carrier = next((e for e in entries if not e.future.done()), None)
        items = sum(e.items for e in entries)
        for entry, part in zip(entries, split(output, members), strict=True):
            work = entry.work
            work.timings.transfer = timings.transfer
            work.timings.transfer_out = timings.transfer_out
            work.timings.compute = timings.compute
            work.executions, work.execution_batch = (1, items) if entry is carrier else (0, 0)
            if not entry.future.done():
                entry.future.set_result(part)

    async def _run(self, members: list[Work], token: object) -> tuple[np.ndarray, Timings]:
        state = self.state
        device = state.require_ready()
        limiter = state.limiter
        if len(members) == 1:
            work = members[0]  # a batch of one runs as it was bound
            input_bytes = sum(t.buffer.nbytes for t in work.inputs.values())
            host_data = not work.in_device_memory
            on_host, inline = placement(
                device, state.settings, work.operator, input_bytes, host_data=host_data
            )
            run_one = functools.partial(device.run, work, on_host=on_host)
            return await limiter.run_acquired(run_one, token, inline=inline), work.timings
        first = members[0]
        items = sum(batch_size(w) for w in members)
        layouts: dict[str, Layout] = dict(first.inputs)
        for name in self.batched:
            t = first.inputs[name]
            layouts[name] = Layout(t.data_type, (items, *t.sizes[1:]), None)
        op = state.resolved.bind(self.operator, layouts)
        input_bytes = sum(layout.nbytes for layout in layouts.values())
        host_data = not first.in_device_memory  # a constant kept on the GPU
        on_host, inline = placement(device, state.settings, op, input_bytes, host_data=host_data)
        batch = Work(op, {}, self.name, constants=first.constants)

        def run() -> np.ndarray:
            batch.inputs = concatenated(members, self.batched)  # in the worker thread, unless tiny
            return device.run(batch, on_host=on_host)

        return await limiter.run_acquired(run, token, inline=inline), batch.timings


class Batchers:
    """The batcher of each registered operator that batches, made on its first request and
    gone with its registration."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock: Clock = clock or LoopClock()
        self.deadlines = Deadlines(self.clock)
        self._by_registration: dict[int, Batcher] = {}

    def get(self, state: ServiceState, work: Work) -> Batcher | None:
        """The batcher that takes `work`, if any: its registration batches and is the one
        `work` was bound from (not one registered under its name since)."""
        if work.registered is None:
            return None
        reg = state.registry.peek(work.model)
        if reg is None or reg.batching is None or reg.operator is not work.registered:
            return None
        batcher = self._by_registration.get(id(reg))
        if batcher is None:
            batcher = Batcher(state, reg, self.clock, self.deadlines)
            self._by_registration[id(reg)] = batcher
            # Requests already queued keep their batcher; the table forgets it with `reg`.
            weakref.finalize(reg, self._by_registration.pop, id(reg), None)
        return batcher if batcher.accepts(work) else None


def _set(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
