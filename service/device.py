"""The compute device: NumPy on the host, or a CUDA GPU through CuPy (streams, copies, OOM).

`Device.run` takes a bound `Work` whose tensors are on the host and returns the output on the
host; on the GPU it stages the inputs through pinned memory on the worker thread's own stream,
runs the kernels and copies the output back. A registration's constant inputs stay on the device
(`resident`) and are read where they are. Out of device, pinned or host memory is a 503 (after
the request's device memory is handed back to the pool); the server keeps serving.

A computation stops at the request's deadline, so that a request past its time limit frees its
compute slot: on NumPy the CPU path checks the deadline between bounded slices of work (within
a working-memory budget per computation); on CuPy the wait for the kernels gives up at the
deadline (each launch is bounded by the output limit, and what is queued on the worker's own
stream still finishes there, ahead of that worker's next request).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypeVar

import numpy as np

from dmlserve.kernels import cpu
from dmlserve.kernels._array import is_cupy_array
from dmlserve.kernels.execute import backend_module
from dmlserve.kernels.execute import run as run_resolved
from dmlserve.kernels.wire import HostTensor, as_tensor_view
from dmlserve.service.errors import GatewayTimeoutError, UnavailableError, host_out_of_memory
from dmlserve.service.work import Work

T = TypeVar("T")
R = TypeVar("R")

_CUDA_ERROR_MEMORY_ALLOCATION = 2  # cudaErrorMemoryAllocation (e.g. pinned host memory)


@dataclass
class Device:
    """The compute backend chosen at start-up, and how tensors move to and from it."""

    name: Literal["numpy", "cupy"]
    ordinal: int = 0  # the CUDA device (cupy)
    retry_after_s: int = 1
    #: What a computation reads the time from to stop at its deadline (`time.monotonic`, the
    #: clock deadlines are set on; tests put a clock they drive here).
    clock: Callable[[], float] = time.monotonic
    _local: threading.local = field(default_factory=threading.local, repr=False)

    @property
    def runs_on_host(self) -> bool:
        """NumPy work may run on the event loop; CuPy work always runs in a worker thread,
        where each worker owns a CUDA stream."""
        return self.name == "numpy"

    def run(self, work: Work) -> np.ndarray:
        """Execute a bound operator on its host tensors; the output comes back on the host
        (with a `work.sink`, it goes there and a zero-stride placeholder comes back)."""
        with work.pin:
            if self.name == "cupy":
                return self._run_cupy(work)
            return self._run_numpy(work)

    def _run_numpy(self, work: Work) -> np.ndarray:
        t0 = time.perf_counter()
        views = {name: t.view() for name, t in work.inputs.items()}
        stop = cpu.cancel_after(work.deadline, self.clock) if work.deadline is not None else None
        budget = cpu.ExecutionBudget(check=stop)
        try:
            # Resolved against exactly these tensors: run it without resolving again.
            out = run_resolved(work.operator, views, cpu.Backend(budget))
        except cpu.Cancelled:
            raise GatewayTimeoutError.after(work.time_limit_s) from None
        except MemoryError:  # HostMemoryError, or any allocation around the operator
            raise host_out_of_memory(self.retry_after_s) from None
        work.timings.compute = time.perf_counter() - t0
        return np.asarray(out)

    def resident(self, tensor: HostTensor) -> HostTensor:
        """A tensor kept for as long as a registration lives (a constant input): on the GPU a
        device copy the kernels read where it is, on the host a copy of its own (the request
        body it came in is not held)."""
        if self.name == "cupy":
            return self._guarded(self._to_resident, tensor)
        buffer = np.array(tensor.buffer)
        buffer.setflags(write=False)
        return replace(tensor, buffer=buffer)

    def pci_bus_id(self) -> str | None:
        """The GPU's PCI bus id (how NVML finds it whatever CUDA_VISIBLE_DEVICES says)."""
        if self.name != "cupy":
            return None
        import cupy

        return str(cupy.cuda.Device(self.ordinal).pci_bus_id)

    def memory_in_use(self) -> int | None:
        """Bytes held by CuPy's device memory pool (None on NumPy)."""
        if self.name != "cupy":
            return None
        import cupy

        return int(cupy.get_default_memory_pool().used_bytes())

    # --- CuPy -----------------------------------------------------------------------------

    def _stream(self) -> Any:
        import cupy

        stream = getattr(self._local, "stream", None)
        if stream is None:
            # One non-blocking stream per worker thread: requests overlap on the device.
            with cupy.cuda.Device(self.ordinal):
                stream = cupy.cuda.Stream(non_blocking=True)
            self._local.stream = stream
        return stream

    def _run_cupy(self, work: Work) -> np.ndarray:
        return self._guarded(self._cupy_pipeline, work)

    def _guarded(self, fn: Callable[[T], R], arg: T) -> R:
        """`fn(arg)` on the GPU, out of memory turned into a 503 once the memory is back."""
        import cupy

        try:
            return fn(arg)
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

    def _to_resident(self, tensor: HostTensor) -> HostTensor:
        import cupy

        with cupy.cuda.Device(self.ordinal):
            stream = self._stream()
            with stream:
                buffer = cupy.asarray(tensor.buffer)
            # The copy is asynchronous: done before any other stream reads the buffer.
            stream.synchronize()
        return replace(tensor, buffer=buffer)

    def _cupy_pipeline(self, work: Work) -> np.ndarray:
        import cupy

        with cupy.cuda.Device(self.ordinal):
            stream = self._stream()
            with stream:
                t0 = time.perf_counter()
                staged = {n: _to_device(t, stream) for n, t in work.inputs.items()}
                # The pinned staging buffers must outlive the async copies.
                stream.synchronize()
                device_inputs = {n: view for n, (view, _) in staged.items()}
                del staged
                t1 = time.perf_counter()
                out = run_resolved(work.operator, device_inputs, backend_module("cupy"))
                if work.sink is not None:
                    # The launchers allocate their output: copy it device to device.
                    work.sink.write(out)
                if work.deadline is None:
                    stream.synchronize()
                elif not wait_for_stream(stream, work.deadline, self.clock):
                    if work.sink is not None or any(
                        is_cupy_array(t.buffer) for t in work.inputs.values()
                    ):
                        # The kernels use a client's shared memory, kept registered until they
                        # are done: wait for them (each is bounded) before letting it go.
                        stream.synchronize()
                    raise GatewayTimeoutError.after(work.time_limit_s)
                t2 = time.perf_counter()
                if work.sink is not None:
                    work.timings.compute = t2 - t1
                    work.timings.transfer = t1 - t0
                    return np.broadcast_to(np.zeros((), out.dtype), out.shape)
                host = _to_host(out, stream)
                t3 = time.perf_counter()
        work.timings.transfer = (t1 - t0) + (t3 - t2)
        work.timings.transfer_out = t3 - t2
        work.timings.compute = t2 - t1
        return host


#: How long `wait_for_stream` sleeps between two looks, at most: the latency it adds to a
#: long computation, and its cost (one cudaEventQuery per look).
_POLL_S = 0.001


def wait_for_stream(
    stream: Any, deadline: float, clock: Callable[[], float] = time.monotonic
) -> bool:
    """Wait until the work queued on `stream` so far is done, or `deadline` passes (False).

    A blocking synchronize cannot be abandoned; this polls an event recorded on the stream,
    starting with short sleeps (a short kernel costs little latency) that double up to
    `_POLL_S`.
    """
    event = stream.record()
    pause = 10e-6
    while not event.done:
        now = clock()
        if now >= deadline:
            return False
        time.sleep(min(pause, deadline - now))
        pause = min(pause * 2, _POLL_S)
    return True


def release_device_memory() -> None:
    """Give cached device and pinned blocks back after an out-of-memory error."""
    import cupy

    cupy.get_default_memory_pool().free_all_blocks()
    cupy.get_default_pinned_memory_pool().free_all_blocks()


def _to_device(t: HostTensor, stream: Any) -> tuple[Any, np.ndarray | None]:
    """Host buffer -> pinned staging -> device buffer (async on `stream`): (view, staging).

    A buffer already on the device (CUDA shared memory, a constant input) is used where it is.
    """
    import cupy

    flat = t.buffer
    if is_cupy_array(flat):
        return as_tensor_view(flat, t.sizes, t.strides), None
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
