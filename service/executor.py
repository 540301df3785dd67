"""Running operators: a bounded compute queue, worker threads, and the NumPy/CuPy paths.

A request waits for one of `max_concurrency` compute slots; when `max_queue` requests are
already waiting it is refused (429). The whole wait plus compute is bounded by the request time
limit (504): a computation that overruns is abandoned (its thread finishes in the background and
only then frees its slot, so the device is never oversubscribed). Array work runs in a worker
thread, except work the caller has bounded as tiny (`run_inline`), which would cost more in
thread hand-offs than it takes to compute.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
import anyio.from_thread
import anyio.to_thread
import numpy as np

from dmlserve import kernels
from dmlserve.kernels import OperatorBase
from dmlserve.kernels.execute import backend_module
from dmlserve.kernels.execute import run as run_resolved
from dmlserve.service.encoding import HostTensor, as_tensor_view
from dmlserve.service.errors import GatewayTimeoutError, QueueFullError, UnavailableError

T = TypeVar("T")
_CUDA_ERROR_MEMORY_ALLOCATION = 2  # cudaErrorMemoryAllocation (e.g. pinned host memory)


@dataclass
class Timings:
    """Seconds spent in each stage of one request."""

    queue: float = 0.0
    transfer: float = 0.0
    compute: float = 0.0


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

    @property
    def running(self) -> int:
        return self._slots.borrowed_tokens

    async def run(
        self,
        fn: Callable[[], T],
        timeout_s: float,
        timings: Timings,
        on_dequeue: Callable[[], None] = lambda: None,
    ) -> T:
        """Run `fn` in a worker thread under a slot, within `timeout_s` of queueing.

        `on_dequeue` runs once the request leaves the queue (slot acquired, or given up).
        """
        self._refuse_if_full()
        token = object()
        start = time.perf_counter()
        try:
            with anyio.fail_after(timeout_s):
                await self._acquire(token, on_dequeue)
                timings.queue = time.perf_counter() - start
                claim = _Claim()
                try:
                    result = await anyio.to_thread.run_sync(
                        self._in_slot, fn, token, claim, abandon_on_cancel=True,
                        limiter=self._threads,
                    )  # fmt: skip
                except BaseException:
                    # Given up (time limit, cancellation) or failed. A job no worker started
                    # never will; a finished one is done: either way the slot is freed here.
                    # A job still running frees it itself when it ends.
                    if claim.leave():
                        self._slots.release_on_behalf_of(token)
                    raise
                # Released here on the event loop, not from the worker: a blocking call back
                # into a busy loop would hold the worker (and the slot) for a loop turn.
                self._slots.release_on_behalf_of(token)
                return result
        except TimeoutError:
            raise GatewayTimeoutError(
                f"the request exceeded its time limit of {timeout_s:g} s"
            ) from None

    async def run_inline(
        self,
        fn: Callable[[], T],
        timeout_s: float,
        timings: Timings,
        on_dequeue: Callable[[], None] = lambda: None,
    ) -> T:
        """Like `run`, but `fn` runs on the event loop: only for work bounded as tiny.

        The queue bound (429), the time limit on the wait (504) and the slot count are the
        same as `run`'s.
        """
        token = object()
        try:
            # A free slot and nobody waiting: take it without yielding to the event loop, so
            # acquire, work and release are one uninterrupted step (no slot held across a loop
            # turn, where other requests would queue behind it).
            self._slots.acquire_on_behalf_of_nowait(token)
            on_dequeue()
        except anyio.WouldBlock:
            self._refuse_if_full()
            start = time.perf_counter()
            try:
                with anyio.fail_after(timeout_s):
                    await self._acquire(token, on_dequeue)
            except TimeoutError:
                raise GatewayTimeoutError(
                    f"the request exceeded its time limit of {timeout_s:g} s"
                ) from None
            timings.queue = time.perf_counter() - start
        try:
            return fn()
        finally:
            self._slots.release_on_behalf_of(token)

    def _refuse_if_full(self) -> None:
        if self._slots.available_tokens == 0 and self.waiting >= self.max_queue:
            raise QueueFullError(
                f"{self.waiting} requests are already waiting for a compute slot "
                f"(max_queue = {self.max_queue})",
                self.retry_after_s,
            )

    async def _acquire(self, token: object, on_dequeue: Callable[[], None]) -> None:
        self.waiting += 1
        try:
            await self._slots.acquire_on_behalf_of(token)
        finally:
            self.waiting -= 1
            on_dequeue()

    def _in_slot(self, fn: Callable[[], T], token: object, claim: _Claim) -> T:
        if not claim.start():
            raise _AbandonedError  # nobody awaits this job any more
        try:
            return fn()
        finally:
            if claim.finish():
                # The request gave up while this ran: nobody else will free the slot.
                try:
                    anyio.from_thread.run_sync(self._slots.release_on_behalf_of, token)
                except RuntimeError:
                    pass  # the event loop is gone (shutdown): nothing is left to release


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


@dataclass
class Backend:
    """The compute backend chosen at start-up, and how to move tensors to and from it."""

    name: str  # "numpy" | "cupy"
    device: int = 0
    retry_after_s: int = 1
    _local: threading.local = field(default_factory=threading.local, repr=False)

    def run(
        self, op: OperatorBase, inputs: Mapping[str, HostTensor], timings: Timings
    ) -> np.ndarray:
        """Execute a resolved operator on host tensors; the output comes back on the host."""
        if self.name == "cupy":
            return self._run_cupy(op, inputs, timings)
        t0 = time.perf_counter()
        views = {name: t.view() for name, t in inputs.items()}
        # `op` was resolved against exactly these tensors: run it without resolving again.
        out = run_resolved(op, views, backend_module("numpy"))
        timings.compute = time.perf_counter() - t0
        return np.asarray(out)

    # --- CuPy -----------------------------------------------------------------------------

    def _stream(self) -> Any:
        import cupy

        stream = getattr(self._local, "stream", None)
        if stream is None:
            # One non-blocking stream per worker thread: requests overlap on the device.
            with cupy.cuda.Device(self.device):
                stream = cupy.cuda.Stream(non_blocking=True)
            self._local.stream = stream
        return stream

    def _run_cupy(
        self, op: OperatorBase, inputs: Mapping[str, HostTensor], timings: Timings
    ) -> np.ndarray:
        import cupy

        try:
            return self._cupy_pipeline(op, inputs, timings)
        except cupy.cuda.memory.OutOfMemoryError:
            pass
        except cupy.cuda.runtime.CUDARuntimeError as exc:
            if exc.status != _CUDA_ERROR_MEMORY_ALLOCATION:
                raise
        # Out of memory. Past the except block the exception and its traceback are gone, and
        # with them the last references to this request's device arrays: the pool can free them.
        release_device_memory()
        raise UnavailableError(
            "the GPU is out of memory for this request; retry later or send less",
            self.retry_after_s,
        )

    def _cupy_pipeline(
        self, op: OperatorBase, inputs: Mapping[str, HostTensor], timings: Timings
    ) -> np.ndarray:
        import cupy

        with cupy.cuda.Device(self.device):
            stream = self._stream()
            with stream:
                t0 = time.perf_counter()
                staged = {n: _to_device(t, stream) for n, t in inputs.items()}
                # The pinned staging buffers must outlive the async copies.
                stream.synchronize()
                device_inputs = {n: view for n, (view, _) in staged.items()}
                del staged
                t1 = time.perf_counter()
                out = run_resolved(op, device_inputs, backend_module("cupy"))
                stream.synchronize()
                t2 = time.perf_counter()
                host = _to_host(out, stream)
                t3 = time.perf_counter()
        timings.transfer = (t1 - t0) + (t3 - t2)
        timings.compute = t2 - t1
        return host

    def memory_in_use(self) -> int | None:
        """Bytes held by CuPy's device memory pool (None on NumPy)."""
        if self.name != "cupy":
            return None
        import cupy

        return int(cupy.get_default_memory_pool().used_bytes())

    def warm_up(self) -> None:
        """Run every operator once on a tiny input, so the first request pays no compile."""
        for op, inputs in _warmup_cases():
            self.run(op, inputs, Timings())


def release_device_memory() -> None:
    """Give cached device and pinned blocks back after an out-of-memory error."""
    import cupy

    cupy.get_default_memory_pool().free_all_blocks()
    cupy.get_default_pinned_memory_pool().free_all_blocks()


def _to_device(t: HostTensor, stream: Any) -> tuple[Any, np.ndarray]:
    """Host buffer -> pinned staging -> device buffer (async on `stream`): (view, staging)."""
    import cupy

    flat = t.buffer
    pinned_mem = cupy.cuda.alloc_pinned_memory(max(flat.nbytes, 1))
    staging = np.frombuffer(pinned_mem, flat.dtype, flat.size)
    staging[...] = flat
    device = cupy.empty(flat.size, flat.dtype)
    device.set(staging, stream=stream)
    return as_tensor_view(device, t.sizes, t.strides), staging


def _to_host(out: Any, stream: Any) -> np.ndarray:
    import cupy

    out = cupy.ascontiguousarray(out)
    pinned_mem = cupy.cuda.alloc_pinned_memory(max(out.nbytes, 1))
    host = np.frombuffer(pinned_mem, out.dtype, out.size).reshape(out.shape)
    out.get(out=host, stream=stream)
    stream.synchronize()
    return host


def _warmup_cases() -> list[tuple[OperatorBase, dict[str, HostTensor]]]:
    cases = []
    for spec in kernels.OPERATORS.values():
        example = spec.warmup
        inputs = {
            name: HostTensor(d.data_type, d.sizes, None, np.zeros(d.element_count, d.numpy_dtype))
            for name, d in example.inputs.items()
        }
        descs = {n: t_desc(t) for n, t in inputs.items()}
        cases.append((kernels.resolve(example.descriptor, descs), inputs))
    return cases


def t_desc(t: HostTensor) -> kernels.TensorDesc:
    """The descriptor of a decoded tensor (its wire strides are the array's, not the op's)."""
    return kernels.TensorDesc(data_type=t.data_type, sizes=t.sizes)
