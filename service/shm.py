"""Triton's shared-memory extensions: registered regions, and tensors read from or written to them.

A client registers a region by name (POSIX shared memory by key, or CUDA IPC memory by handle);
an inference request then names a region, a byte size and an offset in an input's or output's
`parameters` instead of sending the bytes. Regions of both kinds share one namespace, as in
Triton, and one budget: at most `max_shm_regions` regions and `max_shm_bytes` bytes registered.

A request leases the regions it names (`Leases`) until its response is sent, and the device
holds them again while it computes (`Leases` is also the `Work.pin`): a leased region cannot be
unregistered (409), so a CUDA mapping is never closed under a running kernel.

POSIX regions are the client's files: it may shrink or delete one at any time. A memory map of a
shrunk file raises SIGBUS on access, which no Python code can catch, so regions are never mapped:
tensors are read with `os.preadv` and written with `os.pwritev` on the region's descriptor, after
`fstat` says the file still holds the range. A file shrunk after that check gives a short read (a
400), and a write past its end only grows the client's own file back, within the registered size.
The price is one copy each way at memory speed; the NumPy backend needs a host array anyway.
"""

from __future__ import annotations

import os
import re
import stat
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np

from dmlserve.kernels import DescriptorError
from dmlserve.kernels.wire import HostTensor, Layout, packed_bytes
from dmlserve.service.errors import (
    BadRequestError,
    ConflictError,
    InsufficientStorageError,
    NotFoundError,
    ServiceError,
)

Kind = Literal["system", "cuda"]
Loc = tuple[str | int, ...]

_SHM_DIR = "/dev/shm"  # where Linux keeps POSIX shared memory objects (shm_open's namespace)
_KEY = re.compile(r"^/?[^/\x00]{1,255}$")
_IO_CHUNK = 1 << 30  # Linux moves at most ~2 GiB per read or write call


class Region:
    """A registered region: its name, the bytes a request may address, and its users."""

    kind: ClassVar[Kind]

    def __init__(self, name: str, byte_size: int) -> None:
        self.name = name
        self.byte_size = byte_size
        self.users = 0  # requests (and device runs) using it now; changed under the table lock
        self.registered = True  # False once unregistered (under the table lock)

    def status(self) -> dict[str, Any]:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def read(self, ref: ShmRef, layout: Layout) -> HostTensor:
        """The tensor stored at `ref` (range and size already checked)."""
        raise NotImplementedError

    def write(self, ref: ShmRef, array: np.ndarray) -> None:
        """Store a host output at `ref` (CUDA regions get theirs from the device instead)."""

    def check_range(self, ref: ShmRef, loc: Loc) -> None:
        """400 unless `ref`'s offset and byte size lie inside the registered region."""
        if ref.offset + ref.byte_size > self.byte_size:
            raise BadRequestError(
                f"{_dotted(loc)}: shared_memory_offset {ref.offset} + shared_memory_byte_size "
                f"{ref.byte_size} is past the end of region {self.name!r} "
                f"({self.byte_size} bytes registered)"
            )


class SystemRegion(Region):
    """A POSIX shared-memory object, read and written through its descriptor (never mapped)."""

    kind = "system"

    def __init__(self, name: str, key: str, offset: int, byte_size: int, fd: int) -> None:
        super().__init__(name, byte_size)
        self.key, self.offset, self.fd = key, offset, fd

    @classmethod
    def open(cls, name: str, key: str, offset: int, byte_size: int) -> SystemRegion:
        """Open the client's object `key` (as shm_open names it); 400 unless it holds the range."""
        if not _KEY.match(key) or key.lstrip("/") in (".", ".."):
            raise BadRequestError(
                f"key {key!r} is not a POSIX shared-memory name ('/name', no other '/')"
            )
        path = os.path.join(_SHM_DIR, key.lstrip("/"))
        try:
            fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError as exc:
            raise BadRequestError(
                f"unable to open shared-memory key {key!r}: {exc.strerror}"
            ) from None
        try:
            size = os.fstat(fd)
            if not stat.S_ISREG(size.st_mode):
                raise BadRequestError(f"shared-memory key {key!r} is not a shared-memory object")
            if offset + byte_size > size.st_size:
                raise BadRequestError(
                    f"region {name!r}: offset {offset} + byte_size {byte_size} is past the end "
                    f"of shared-memory key {key!r} ({size.st_size} bytes)"
                )
        except BaseException:
            os.close(fd)
            raise
        return cls(name, key, offset, byte_size, fd)

    def status(self) -> dict[str, Any]:
        return {"name": self.name, "key": self.key, "offset": self.offset,
                "byte_size": self.byte_size}  # fmt: skip

    def close(self) -> None:
        os.close(self.fd)

    def _still_holds(self, start: int, nbytes: int) -> None:
        if os.fstat(self.fd).st_size < start + nbytes:
            raise BadRequestError(
                f"shared-memory region {self.name!r} was truncated by its owner: it no longer "
                f"holds {nbytes} bytes at offset {start - self.offset}"
            )

    def read(self, ref: ShmRef, layout: Layout) -> HostTensor:
        """The tensor stored at `ref` (a copy into server memory)."""
        buffer = np.empty(layout.extent, layout.data_type.numpy)
        view = buffer.data.cast("B")
        start = self.offset + ref.offset
        self._still_holds(start, len(view))
        done = 0
        while done < len(view):
            n = os.preadv(self.fd, [view[done : done + _IO_CHUNK]], start + done)
            if n == 0:  # the file shrank since the check
                self._still_holds(start, len(view))
            done += n
        return HostTensor(layout.data_type, layout.sizes, None, buffer)

    def write(self, ref: ShmRef, array: np.ndarray) -> None:
        """Store `array`'s bytes at `ref` (its size already checked against `ref.byte_size`)."""
        data = packed_bytes(array)
        start = self.offset + ref.offset
        self._still_holds(start, len(data))
        done = 0
        while done < len(data):
            done += os.pwritev(self.fd, [data[done : done + _IO_CHUNK]], start + done)


@dataclass(frozen=True)
class ShmRef:
    """Where one tensor lives: `byte_size` bytes at `offset` in region `region`."""

    region: str
    byte_size: int
    offset: int = 0


def shm_ref(parameters: Mapping[str, Any] | None, loc: Loc) -> ShmRef | None:
    """The shared-memory location named by a tensor's `parameters`, if any (422 when malformed)."""
    if not parameters or "shared_memory_region" not in parameters:
        for name in ("shared_memory_byte_size", "shared_memory_offset"):
            if parameters and name in parameters:
                _bad(loc, name, "is given without shared_memory_region")
        return None
    region = parameters["shared_memory_region"]
    if not isinstance(region, str) or not region:
        _bad(loc, "shared_memory_region", "must be the name of a registered region")
    if "shared_memory_byte_size" not in parameters:
        _bad(loc, "shared_memory_byte_size", "is required with shared_memory_region")
    size = _count(parameters["shared_memory_byte_size"], loc, "shared_memory_byte_size")
    offset = _count(parameters.get("shared_memory_offset", 0), loc, "shared_memory_offset")
    return ShmRef(region, size, offset)


def _count(value: Any, loc: Loc, name: str) -> int:
    if type(value) is not int or value < 0:
        _bad(loc, name, "must be a non-negative integer")
    return int(value)


def _bad(loc: Loc, name: str, msg: str) -> None:
    raise DescriptorError.at((*loc, "parameters", name), f"{name} {msg}")


def _dotted(loc: Loc) -> str:
    return ".".join(str(p) for p in loc)


class SharedMemory:
    """The registered regions of both kinds, bounded in number and total size; thread-safe."""

    def __init__(self, max_regions: int, max_bytes: int, cuda: bool = False) -> None:
        self.max_regions, self.max_bytes = max_regions, max_bytes
        self.cuda = cuda  # CUDA regions are served (a CUDA device computes)
        self._regions: dict[str, Region] = {}
        self._lock = threading.Lock()

    @property
    def extensions(self) -> list[str]:
        """The KServe extensions served: system shared memory, and CUDA's where a GPU computes."""
        return ["system_shared_memory", *(["cuda_shared_memory"] if self.cuda else [])]

    def require_cuda(self) -> None:
        """400 where CUDA regions are not served (no CUDA device computes).

        Only registering asks: status and unregister-all answer (with no regions), as clients
        such as perf_analyzer clean up both kinds whatever they used.
        """
        if not self.cuda:
            raise BadRequestError(
                "CUDA shared memory is not served here: this server computes on the CPU "
                "(no CUDA device); use system shared memory"
            )

    def register(self, region: Region) -> None:
        """Add an opened region (closed again if refused): 409 for a taken name, 507 over limits."""
        try:
            with self._lock:
                if region.name in self._regions:
                    raise ConflictError(
                        f"a shared-memory region named {region.name!r} is already registered; "
                        "unregister it first"
                    )
                if len(self._regions) >= self.max_regions:
                    raise InsufficientStorageError(
                        f"{len(self._regions)} shared-memory regions are registered "
                        f"(max_shm_regions = {self.max_regions}); unregister one first"
                    )
                total = sum(r.byte_size for r in self._regions.values()) + region.byte_size
                if total > self.max_bytes:
                    raise InsufficientStorageError(
                        f"registering {region.byte_size} more bytes would make {total} bytes of "
                        f"shared-memory regions (max_shm_bytes = {self.max_bytes})"
                    )
                self._regions[region.name] = region
        except ServiceError:
            region.close()
            raise

    def unregister(self, kind: Kind, name: str = "") -> None:
        """Remove region `name` of `kind`, or every region of `kind` when `name` is empty.

        409 while a request uses one (nothing is removed then); 404 for an unknown name.
        """
        with self._lock:
            if name:
                chosen = [self._get(kind, name)]
            else:
                chosen = [r for r in self._regions.values() if r.kind == kind]
            busy = [r.name for r in chosen if r.users]
            if busy:
                raise ConflictError(
                    "shared-memory region(s) in use by a request: "
                    + ", ".join(busy)
                    + "; unregister when the request has finished"
                )
            for region in chosen:
                del self._regions[region.name]
                region.registered = False
        for region in chosen:
            region.close()

    def status(self, kind: Kind, name: str = "") -> list[dict[str, Any]]:
        """The status of region `name`, or of every region of `kind` (404 for an unknown name)."""
        with self._lock:
            if name:
                return [self._get(kind, name).status()]
            return [r.status() for r in self._regions.values() if r.kind == kind]

    def _get(self, kind: Kind, name: str) -> Region:
        region = self._regions.get(name)
        if region is None or region.kind != kind:
            what = "system" if kind == "system" else "CUDA"
            raise NotFoundError(f"no {what} shared-memory region is registered as {name!r}")
        return region

    def lease(self, name: str, loc: Loc) -> Region:
        """Region `name`, counted as used until `release` (400 when unknown, as Triton)."""
        with self._lock:
            region = self._regions.get(name)
            if region is None:
                raise BadRequestError(
                    f"{_dotted(loc)}: no shared-memory region is registered as {name!r}"
                )
            region.users += 1
            return region

    def retain(self, regions: list[Region]) -> None:
        """Count `regions` as used once more; 400 if one was unregistered meanwhile."""
        with self._lock:
            gone = [r.name for r in regions if not r.registered]
            if gone:
                raise BadRequestError("shared-memory region(s) unregistered: " + ", ".join(gone))
            for region in regions:
                region.users += 1

    def release(self, regions: list[Region]) -> None:
        with self._lock:
            for region in regions:
                region.users -= 1

    def close(self) -> None:
        """Close every region (shutdown)."""
        with self._lock:
            regions, self._regions = list(self._regions.values()), {}
            for region in regions:
                region.registered = False
        for region in regions:
            region.close()


@dataclass
class Leases:
    """The regions one request uses, from decoding until its response is built."""

    table: SharedMemory
    regions: list[Region] = field(default_factory=list)

    def take(self, ref: ShmRef, loc: Loc) -> Region:
        region = self.table.lease(ref.region, loc)
        self.regions.append(region)
        region.check_range(ref, loc)
        return region

    def read(self, ref: ShmRef, layout: Layout, loc: Loc) -> HostTensor:
        """An input tensor from shared memory: its byte size must be the tensor's exactly."""
        region = self.take(ref, loc)
        if ref.byte_size != layout.nbytes:
            raise BadRequestError(
                f"{_dotted(loc)}: shared_memory_byte_size is {ref.byte_size}, but the shape and "
                f"datatype need {layout.nbytes} bytes"
            )
        return region.read(ref, layout)

    def write(self, region: Region, ref: ShmRef, array: np.ndarray, name: str) -> None:
        """An output into its region, if it fits (400 otherwise)."""
        if array.nbytes > ref.byte_size:
            raise BadRequestError(
                f"{name} needs {array.nbytes} bytes, but shared_memory_byte_size for region "
                f"{region.name!r} is {ref.byte_size}"
            )
        region.write(ref, array)

    def release(self) -> None:
        """End the request's use of its regions (once, when its response is built or failed)."""
        regions, self.regions = self.regions, []
        self.table.release(regions)

    @contextmanager
    def held(self) -> Iterator[None]:
        """The regions held once more while the device computes: a request that gives up at its
        time limit releases its lease, but memory a running kernel reads stays registered."""
        regions = list(self.regions)
        self.table.retain(regions)
        try:
            yield
        finally:
            self.table.release(regions)
