"""The CuPy request path of one worker thread: its stream, reusable pinned and device buffers,
one synchronisation per request.

A request's inputs are packed into one pinned host buffer (each at an aligned offset), copied
to the device in one asynchronous copy, the kernels launched on the thread's stream (their
launch plans are memoized per geometry by the launchers), the output copied back
asynchronously into a pinned buffer, and the stream synchronised once. CUDA events recorded
between the steps time the copies and the kernels without further synchronisation.

The buffers are allocated once per thread and grow to the largest request seen, up to
`STAGING_BYTES`; they are plain CUDA allocations beside CuPy's pools, so the pools (and the
memory metric) only ever hold request data. A larger request gets its own blocks from CuPy's
pools, handed back when it ends. A small output is copied out of the reused pinned buffer
into an ordinary array (the next request overwrites the buffer); a large one keeps its own
pinned block.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from dmlserve.kernels._array import is_cupy_array
from dmlserve.kernels.execute import run as run_resolved
from dmlserve.kernels.wire import HostTensor, as_tensor_view
from dmlserve.service.errors import GatewayTimeoutError
from dmlserve.service.work import Work

#: Largest request (inputs, or output) staged through the reused buffers.
STAGING_BYTES = 16 << 20
#: Offsets of the packed inputs: the alignment of a CUDA allocation, which kernels may assume.
ALIGN = 256
_MIN_BYTES = 64 << 10


def packed_offsets(inputs: Mapping[str, HostTensor]) -> tuple[dict[str, int], int]:
    """Each host input's byte offset in one packed buffer (aligned to `ALIGN`), and its length.

    Inputs already in device memory (CUDA shared memory) are used where they are.
    """
    offsets: dict[str, int] = {}
    total = 0
    for name, t in inputs.items():
        if not is_cupy_array(t.buffer):
            offsets[name] = total
            total += -(-t.buffer.nbytes // ALIGN) * ALIGN
    return offsets, total


def _grown(size: int) -> int:
    """The capacity a buffer grows to for `size` bytes: a power of two, at least 64 KiB."""
    return max(_MIN_BYTES, 1 << max(0, size - 1).bit_length())


class Staging:
    """One worker thread's stream, events and staging buffers (never shared across threads)."""

    def __init__(self, ordinal: int) -> None:
        import cupy

        with cupy.cuda.Device(ordinal):
            self.stream = cupy.cuda.Stream(non_blocking=True)
            self.events = tuple(cupy.cuda.Event() for _ in range(4))
        self._host_in: np.ndarray | None = None
        self._host_out: np.ndarray | None = None
        self._device_in: Any = None  # cupy.cuda.Memory
        # Buffers and events of requests given up while their copies were queued, each kept
        # until its last event is done.
        self._retired: list[tuple[Any, ...]] = []

    def run(self, work: Work, clock: Callable[[], float] = time.monotonic) -> np.ndarray:
        """Inputs to the device, the kernels, the output back: one synchronisation.

        With a `work.sink` (CUDA shared memory) the output goes there, device to device, and
        a zero-stride placeholder of its type and shape comes back. Past `work.deadline` (on
        `clock`) the wait gives up: 504, the buffers the queued work still uses set aside
        until it is done (with a client's shared memory in use, the wait goes on: that memory
        is let go only once the kernels are done).
        """
        import cupy

        runtime = cupy.cuda.runtime
        stream = self.stream
        self._retired = [r for r in self._retired if not r[0].done]
        start, staged, computed, returned = self.events
        offsets, total = packed_offsets(work.inputs)
        host_in: np.ndarray | None = None
        host_out: np.ndarray | None = None
        device_in: Any = None
        late = False
        try:
            with stream:
                start.record(stream)
                if total:
                    host_in = self._host_buffer("_host_in", total)
                    for name, at in offsets.items():
                        b = work.inputs[name].buffer
                        np.copyto(host_in[at : at + b.nbytes].view(b.dtype), b)
                    device_in = self._device_buffer(total)
                    runtime.memcpyAsync(
                        device_in.ptr, host_in.ctypes.data, total, runtime.memcpyHostToDevice,
                        stream.ptr,
                    )  # fmt: skip
                arrays = {
                    name: as_tensor_view(
                        t.buffer if name not in offsets else
                        cupy.ndarray((t.extent,), t.buffer.dtype, device_in + offsets[name]),
                        t.sizes, t.strides,
                    )
                    for name, t in work.inputs.items()
                }  # fmt: skip
                staged.record(stream)
                out = run_resolved(work.operator, arrays, "cupy", work.constants)
                if work.sink is not None:
                    work.sink.write(out)  # the launchers allocate their output: copy it over
                else:
                    out = cupy.ascontiguousarray(out)
                computed.record(stream)
                if work.sink is None:
                    host_out = self._host_buffer("_host_out", out.nbytes)
                    runtime.memcpyAsync(
                        host_out.ctypes.data, out.data.ptr, out.nbytes,
                        runtime.memcpyDeviceToHost, stream.ptr,
                    )  # fmt: skip
                returned.record(stream)
                if work.deadline is None:
                    stream.synchronize()  # the request's one synchronisation
                elif wait_for_event(returned, work.deadline, clock):
                    pass  # the same, given up at the deadline
                elif work.sink is not None or work.in_device_memory:
                    stream.synchronize()  # a client's memory: let go only once it is unused
                    late = True
                else:
                    # The queued copies still use this request's buffers: keep them (and the
                    # events) until they are done; the next request takes new ones.
                    self._retired.append((returned, self.events, host_in, host_out, device_in))
                    self.events = tuple(cupy.cuda.Event() for _ in range(4))
                    self._host_in = self._host_out = self._device_in = None
                    late = True
                if late:
                    raise _Late
        except _Late:
            raise GatewayTimeoutError.after(work.time_limit_s) from None
        except BaseException:
            # Copies from or into the reused buffers may still be queued: let them finish
            # before the next request on this thread writes over the buffers.
            _quietly_synchronize(stream)
            raise
        timings = work.timings
        elapsed = cupy.cuda.get_elapsed_time
        timings.transfer_out = elapsed(computed, returned) / 1e3
        timings.transfer = elapsed(start, staged) / 1e3 + timings.transfer_out
        timings.compute = elapsed(staged, computed) / 1e3
        if work.sink is not None:
            return np.broadcast_to(np.zeros((), out.dtype), out.shape)
        assert host_out is not None
        result: np.ndarray = host_out[: out.nbytes].view(out.dtype).reshape(out.shape)
        if host_out is self._host_out:
            result = result.copy()  # the buffer is the next request's
        return result

    def _host_buffer(self, attr: str, size: int) -> np.ndarray:
        """The reused pinned buffer `attr` (grown to hold `size` bytes), or for more than
        `STAGING_BYTES` a pinned block of the request's own."""
        import cupy

        if size > STAGING_BYTES:
            return np.frombuffer(cupy.cuda.alloc_pinned_memory(size), np.uint8, size)
        buffer: np.ndarray | None = getattr(self, attr)
        if buffer is None or buffer.nbytes < size:
            capacity = _grown(size)
            memory = cupy.cuda.PinnedMemoryPointer(cupy.cuda.PinnedMemory(capacity), 0)
            buffer = np.frombuffer(memory, np.uint8, capacity)
            setattr(self, attr, buffer)
        return buffer

    def _device_buffer(self, size: int) -> Any:
        """A device pointer to `size` bytes: the reused buffer, or a pool block of its own."""
        import cupy

        if size > STAGING_BYTES:
            return cupy.cuda.alloc(size)
        if self._device_in is None or self._device_in.mem.size < size:
            self._device_in = None  # the old buffer goes before the new one is allocated
            self._device_in = cupy.cuda.MemoryPointer(cupy.cuda.Memory(_grown(size)), 0)
        return self._device_in


class _Late(Exception):
    """The wait for a request's work passed its deadline."""


#: How long `wait_for_event` sleeps between two looks, at most: the latency it adds to a
#: long computation, and its cost (one cudaEventQuery per look).
_POLL_S = 0.001


def wait_for_event(
    event: Any, deadline: float, clock: Callable[[], float] = time.monotonic
) -> bool:
    """Wait until `event` (recorded on a stream) is done, or `deadline` passes (False).

    A blocking synchronize cannot be abandoned; this polls the event, starting with short
    sleeps (a short kernel costs little latency) that double up to `_POLL_S`.
    """
    pause = 10e-6
    while not event.done:
        now = clock()
        if now >= deadline:
            return False
        time.sleep(min(pause, deadline - now))
        pause = min(pause * 2, _POLL_S)
    return True


def _quietly_synchronize(stream: Any) -> None:
    with contextlib.suppress(Exception):  # the original error is the one to report
        stream.synchronize()
