"""The compute device: NumPy on the host, or a CUDA GPU through CuPy (streams, copies, OOM).

`Device.run` takes a bound `Work` whose tensors are on the host and returns the output on the
host; on the GPU each worker thread stages the inputs through its own pinned buffers and stream,
runs the kernels and copies the output back with one synchronisation (`staging`). A
registration's constant inputs stay on the device (`resident`) and are read where they are. Out
of device (or pinned) memory is a 503 after the request's device memory is handed back to the
pool; the server keeps serving.

A computation stops at the request's deadline, so that a request past its time limit frees its
compute slot: on NumPy the CPU path checks the deadline between bounded slices of work (within
a working-memory budget per computation); on CuPy the wait for the kernels gives up at the
deadline (`staging`: each launch is bounded by the output limit, and the buffers still in use
are set aside until the queued work is done).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Literal, TypeVar

import numpy as np

from dmlserve.kernels import cpu
from dmlserve.kernels.execute import run as run_resolved
from dmlserve.kernels.wire import HostTensor
from dmlserve.service.errors import GatewayTimeoutError, UnavailableError, host_out_of_memory
from dmlserve.service.staging import Staging
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
        """NumPy work may run on the event loop; CuPy work runs in a worker thread, where each
        worker owns a CUDA stream (tiny work the host computes exactly may stay on the loop:
        `cost.host_exact`)."""
        return self.name == "numpy"

    def run(self, work: Work, *, on_host: bool = False) -> np.ndarray:
        """Execute a bound operator on its host tensors; the output comes back on the host
        (with a `work.sink`, it goes there and a zero-stride placeholder comes back).

        `on_host` computes on the host whatever the backend (`cost.host_exact` says where that
        gives the device's answer).
        """
        with work.pin:
            if self.name == "cupy" and not on_host:
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

    def _staging(self) -> Staging:
        staging: Staging | None = getattr(self._local, "staging", None)
        if staging is None:
            # One per worker thread: its own non-blocking stream (requests overlap on the
            # device) and buffers no other thread touches.
            staging = self._local.staging = Staging(self.ordinal)
        return staging

    def _run_cupy(self, work: Work) -> np.ndarray:
        return self._guarded(self._staged, work)

    def _staged(self, work: Work) -> np.ndarray:
        import cupy

        with cupy.cuda.Device(self.ordinal):
            return self._staging().run(work, self.clock)

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
            stream = self._staging().stream
            with stream:
                buffer = cupy.asarray(tensor.buffer)
            # The copy is asynchronous: done before any other stream reads the buffer.
            stream.synchronize()
        return replace(tensor, buffer=buffer)


def release_device_memory() -> None:
    """Give cached device and pinned blocks back after an out-of-memory error."""
    import cupy

    cupy.get_default_memory_pool().free_all_blocks()
    cupy.get_default_pinned_memory_pool().free_all_blocks()
