"""CUDA shared memory: a client's device buffer, opened from its `cudaIpcMemHandle`.

The kernels read their input straight from the client's buffer (a CuPy array over the IPC
mapping, no copy) and the output is copied device to device into the client's output region:
the launchers allocate their own output, so it is computed into a temporary first. Regions
live on the device the server computes on (`DMLSERVE_DEVICE`). The client's declared size is
checked against the allocation the handle maps (`cuMemGetAddressRange`), so a client that
overstates it gets a 400, not a kernel reading past its allocation.
"""

from __future__ import annotations

import ctypes
import functools
from typing import TYPE_CHECKING, Any

import anyio.to_thread

from dmlserve.kernels.wire import HostTensor, Layout
from dmlserve.service.errors import BadRequestError
from dmlserve.service.shm import Region, ShmRef

if TYPE_CHECKING:
    from dmlserve.service.state import ServiceState

IPC_HANDLE_BYTES = 64  # CUDA_IPC_HANDLE_SIZE


@functools.cache
def _libcuda() -> Any:
    return ctypes.CDLL("libcuda.so.1")


def allocation_size(ptr: int) -> int:
    """Bytes from `ptr` to the end of the device allocation that holds it."""
    base, size = ctypes.c_uint64(), ctypes.c_size_t()
    rc = _libcuda().cuMemGetAddressRange_v2(
        ctypes.byref(base), ctypes.byref(size), ctypes.c_uint64(ptr)
    )
    if rc != 0:
        raise BadRequestError(f"the CUDA IPC handle maps no device allocation (CUresult {rc})")
    return int(base.value + size.value - ptr)


class CudaRegion(Region):
    """A client's device buffer mapped into this process through CUDA IPC."""

    kind = "cuda"

    def __init__(self, name: str, device_id: int, byte_size: int, ptr: int) -> None:
        super().__init__(name, byte_size)
        self.device_id, self.ptr = device_id, ptr

    @classmethod
    def open(
        cls, name: str, raw_handle: bytes, device_id: int, byte_size: int, server_device: int
    ) -> CudaRegion:
        """Open the client's IPC handle on the server's device (blocking: call off the loop)."""
        import cupy

        if device_id != server_device:
            raise BadRequestError(
                f"region {name!r} is on CUDA device {device_id}; this server computes on device "
                f"{server_device}: register a buffer of that device"
            )
        if len(raw_handle) != IPC_HANDLE_BYTES:
            raise BadRequestError(
                f"raw_handle is {len(raw_handle)} bytes; a cudaIpcMemHandle_t is {IPC_HANDLE_BYTES}"
            )
        runtime = cupy.cuda.runtime
        with cupy.cuda.Device(device_id):
            try:
                flags = runtime.cudaIpcMemLazyEnablePeerAccess
                ptr = int(runtime.ipcOpenMemHandle(raw_handle, flags))
            except runtime.CUDARuntimeError as exc:
                raise BadRequestError(f"unable to open the CUDA IPC handle: {exc}") from None
            region = cls(name, device_id, byte_size, ptr)
            try:
                available = allocation_size(ptr)
                if byte_size > available:
                    raise BadRequestError(
                        f"region {name!r}: byte_size {byte_size} is larger than the device "
                        f"allocation the handle maps ({available} bytes)"
                    )
            except BaseException:
                region.close()
                raise
        return region

    def status(self) -> dict[str, Any]:
        return {"name": self.name, "device_id": self.device_id, "byte_size": self.byte_size}

    def close(self) -> None:
        import cupy

        with cupy.cuda.Device(self.device_id):
            cupy.cuda.runtime.ipcCloseMemHandle(self.ptr)

    def array(self, ref: ShmRef, dtype: Any, count: int) -> Any:
        """A 1-D CuPy array of `count` elements at `ref`, over the client's memory (no copy)."""
        import cupy

        memory = cupy.cuda.UnownedMemory(self.ptr, self.byte_size, self, self.device_id)
        pointer = cupy.cuda.MemoryPointer(memory, ref.offset)
        return cupy.ndarray((count,), dtype, pointer)

    def read(self, ref: ShmRef, layout: Layout) -> HostTensor:
        """The tensor at `ref`; its buffer is the client's device memory (a CuPy array)."""
        buffer = self.array(ref, layout.data_type.numpy, layout.extent)
        return HostTensor(layout.data_type, layout.sizes, None, buffer)


class CudaSink:
    """Where a CUDA shared-memory output goes: the device copies the kernel's output here."""

    def __init__(self, region: CudaRegion, ref: ShmRef) -> None:
        self.region, self.ref = region, ref

    def write(self, output: Any) -> None:
        """Copy a device array into the region on the current stream (the caller syncs)."""
        if output.nbytes > self.ref.byte_size:
            raise BadRequestError(
                f"OutputTensor needs {output.nbytes} bytes, but shared_memory_byte_size for "
                f"region {self.region.name!r} is {self.ref.byte_size}"
            )
        target = self.region.array(self.ref, output.dtype, output.size)
        target.reshape(output.shape)[...] = output


async def register(
    state: ServiceState, name: str, raw_handle: bytes, device_id: int, byte_size: int
) -> None:
    """Open a client's CUDA IPC handle (off the event loop) and register it."""
    region = await anyio.to_thread.run_sync(
        CudaRegion.open, name, raw_handle, device_id, byte_size, state.settings.device
    )
    state.shared_memory.register(region)
