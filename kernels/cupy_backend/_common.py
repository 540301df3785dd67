"""The launch path shared by the CuPy launchers: plans, parameter structs, fast divisors, sizes.

A launcher turns a call's geometry (shapes, strides, dtype, operator fields) into a `Plan`
once (memoized), so a call is one allocation and one launch. Kernel parameters travel by
value as one C struct per launch. The struct is written once, in its `.cu` file:
`param_struct` reads it from there into a NumPy structured dtype with C alignment (a test
compiles the `.cu` files and checks every size and offset against it), and the launcher
passes a structured scalar of that dtype, whose bytes CuPy hands to the kernel unchanged.
"""

from __future__ import annotations

import ctypes
import functools
import math
import re
import struct
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple, TypeVar

import numpy as np

from ..wire import buffer_extent
from ._loader import CUDA_DIR, kernel

__all__ = [
    "BLOCK",
    "DirectLaunch",
    "FAST_DIVMOD",
    "GRID_YZ_LIMIT",
    "INT32_LIMIT",
    "STRUCTS",
    "Launch",
    "ParamStruct",
    "Plan",
    "chunk_plan",
    "chunks_per_row",
    "fast_divmod",
    "fastest",
    "fill_divisors",
    "gpu_ms",
    "grid_for",
    "index_type",
    "launch",
    "launch_dependent",
    "launch_packed",
    "TensorMap",
    "tensor_map",
    "opaque",
    "param_struct",
    "plan_cache",
    "sm_count",
    "compute_capability",
    "max_shared_memory",
    "wrap32",
    "contiguous_planes",
    "plane_alignment",
    "zero_point_argument",
    "byte_value",
    "device_zero_points",
    "PER_CHANNEL",
]

BLOCK = 256
INT32_LIMIT = 2**31 - 1
GRID_YZ_LIMIT = 65535  # blocks along a grid's y or z


class ParamStruct(NamedTuple):
    """A C parameter struct and the NumPy dtype that mirrors it."""

    source: str  # the `.cu` file under kernels/cuda/ that defines the struct
    name: str  # its C++ name, e.g. dml::PadParams
    dtype: np.dtype


STRUCTS: list[ParamStruct] = []


# The C field types the parameter structs use; any other type names a struct of the same
# sources (FastDivmod), read the same way.
_SCALARS = {
    "int": "<i4",
    "unsigned": "<u4",
    "long long": "<i8",
    "unsigned long long": "<u8",
    "float": "<f4",
}
# One field per declaration: `type name;` or `type name[count];`, a comment after it.
_FIELD = re.compile(r"\s*(?P<type>\w+(?: \w+)*) (?P<name>\w+)(?:\[(?P<count>\d+)\])?;\s*(?://.*)?")


@functools.cache
def _struct_body(source: str, name: str) -> str:
    """The declarations of ``struct name { ... };`` in `source` or a header it includes."""
    text = (CUDA_DIR / source).read_text()
    found = re.search(rf"^struct {name} \{{\n(.*?)^\}};", text, re.M | re.S)
    if found:
        return found.group(1)
    for header in re.findall(r'^#include "([^"]+)"', text, re.M):
        try:
            return _struct_body(header, name)
        except LookupError:
            pass
    raise LookupError(f"no struct {name} in {source} or the headers it includes")


def _struct_dtype(source: str, name: str) -> np.dtype:
    spec: list[Any] = []
    for line in _struct_body(source, name).splitlines():
        field = _FIELD.fullmatch(line)
        if field is None:
            raise ValueError(f"struct {name} ({source}): cannot read the declaration {line!r}")
        ctype, count = field["type"], field["count"]
        dtype = np.dtype(_SCALARS[ctype]) if ctype in _SCALARS else _struct_dtype(source, ctype)
        spec.append((field["name"], dtype, (int(count),)) if count else (field["name"], dtype))
    return np.dtype(spec, align=True)


def param_struct(source: str, name: str) -> np.dtype:
    """The C-aligned structured dtype of the struct `name` (``dml::PadParams``) declared in
    `kernels/cuda/<source>` or a header it includes; recorded in `STRUCTS` for the layout
    test."""
    dtype = _struct_dtype(source, name.rpartition("::")[2])
    STRUCTS.append(ParamStruct(source, name, dtype))
    return dtype


#: struct FastDivmod (common.cuh), nested in the other structs.
FAST_DIVMOD = param_struct("common.cuh", "dml::FastDivmod")


def fast_divmod(d: int) -> tuple[int, int, int]:
    """``(d, mul, shift)`` with ``n // d == (umulhi(n, mul) + n) >> shift`` for ``n < 2**31``."""
    if not 1 <= d <= INT32_LIMIT:
        raise ValueError(f"divisor {d} outside [1, 2**31)")
    shift = (d - 1).bit_length()
    mul = ((1 << 32) * ((1 << shift) - d)) // d + 1
    return d, mul & 0xFFFFFFFF, shift


def fill_divisors(field: np.ndarray, divisors: Sequence[int]) -> None:
    """Write FastDivmod entries for ``divisors`` into a FastDivmod array field."""
    for i, d in enumerate(divisors):
        field[i] = fast_divmod(d)


def index_type(shape: Sequence[int], strides: Sequence[int], *counts: int) -> str:
    """``"int"`` when every offset a kernel forms fits in 32 bits, else ``"long long"``.

    ``strides`` are the input's element strides; ``counts`` the other element counts the
    kernel indexes (outputs, threads).
    """
    extent = buffer_extent(shape, strides)
    return "int" if max(extent, *counts) <= INT32_LIMIT else "long long"


#: zw_all of the CONVOLUTION_INTEGER kernels that take one filter zero point as an argument:
#: read them per channel (their conv::PER_CHANNEL).
PER_CHANNEL = -(2**31)


def zero_point_argument(zero_points: np.ndarray) -> tuple[bool, int]:
    """Whether filter zero points differ by channel (or are the per-channel mark itself), and
    the kernels' zw_all argument for them: their one value, else PER_CHANNEL."""
    per_channel = bool((zero_points != zero_points[0]).any()) or int(zero_points[0]) == PER_CHANNEL
    return per_channel, PER_CHANNEL if per_channel else int(zero_points[0])


def device_zero_points(zero_points: np.ndarray) -> Any:
    """The filter zero points as an int32 array on the current device, uploaded once per
    distinct vector and device and then reused: an upload per call would put a host-to-device
    copy between the call's kernels (the GPU switches to a copy engine and back, several
    microseconds). A kept array is never dropped (a kernel on another stream may still be
    reading it, and freed memory goes back to the pool for reuse); past `_ZERO_POINT_ARRAYS`
    vectors, a call uploads its own on its stream, as it does its other temporaries."""
    import cupy

    raw = np.ascontiguousarray(zero_points, np.int32).tobytes()
    key = (cupy.cuda.Device().id, raw)
    kept = _zero_point_arrays.get(key)
    if kept is not None:
        return kept
    array = cupy.asarray(np.frombuffer(raw, np.int32))  # on this call's stream
    with _zero_point_lock:
        kept = _zero_point_arrays.get(key)
        if kept is not None:
            return kept
        if len(_zero_point_arrays) < _ZERO_POINT_ARRAYS:
            # Other streams will read it: the upload completes before it is shared.
            cupy.cuda.get_current_stream().synchronize()
            _zero_point_arrays[key] = array
    return array


_ZERO_POINT_ARRAYS = 64
_zero_point_arrays: dict[tuple[int, bytes], Any] = {}
_zero_point_lock = threading.Lock()


def byte_value(value: int, signed: bool) -> bool:
    """Whether `value` is a value of int8 (`signed`) or of uint8."""
    return -128 <= value <= 127 if signed else 0 <= value <= 255


def contiguous_planes(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """Each (n, c) plane of an (N, C, H, W) view lies as H * W consecutive elements (pixel p
    at offset p)."""
    _, _, h, wd = shape
    _, _, sh, sw = strides
    return (wd == 1 or sw == 1) and (h == 1 or sh == wd)


def plane_alignment(shape: Sequence[int], strides: Sequence[int], address: int) -> int:
    """The largest of 16, 4 and 1 (bytes) to which the start of every (n, c) plane of an
    (N, C, H, W) byte view at `address` is aligned."""
    n = shape[0]
    sn, sc = strides[0], strides[1]
    return next(
        a for a in (16, 4, 1) if sc % a == 0 and (n == 1 or sn % a == 0) and address % a == 0
    )


_Wrapped = TypeVar("_Wrapped", int, "np.ndarray[Any, Any]")


def wrap32(v: _Wrapped) -> _Wrapped:
    """v (an int, or an integer array wide enough for v + 2^31) as the int32 with the same
    bits modulo 2^32 (what a kernel's wrapping int32 sums see)."""
    return ((v + (1 << 31)) % (1 << 32)) - (1 << 31)


def grid_for(threads: int, block: int = BLOCK) -> tuple[int, int, int]:
    """A 1-D grid covering ``threads`` threads."""
    return (max(1, math.ceil(threads / block)), 1, 1)


@functools.cache
def _attribute(device_id: int, name: str) -> int:
    import cupy

    return int(cupy.cuda.Device(device_id).attributes[name])


def sm_count() -> int:
    """Multiprocessors of the current CUDA device."""
    import cupy

    return _attribute(cupy.cuda.Device().id, "MultiProcessorCount")


def max_shared_memory() -> int:
    """The most shared memory (static and dynamic) one CTA may take on the current device
    (227 KB on sm_90, 99 KB on sm_86/89/120)."""
    import cupy

    return _attribute(cupy.cuda.Device().id, "MaxSharedMemoryPerBlockOptin")


@functools.cache
def _compute_capability(device_id: int) -> int:
    import cupy

    return int(cupy.cuda.Device(device_id).compute_capability)


def compute_capability(device_id: int | None = None) -> int:
    """A CUDA device's compute capability as major * 10 + minor (90: sm_90); the current
    device's where none is given."""
    import cupy

    return _compute_capability(cupy.cuda.Device().id if device_id is None else device_id)


def chunks_per_row(width: int, itemsize: int) -> int:
    """16-byte chunks a row of ``width`` elements spans when chunks are aligned to the buffer
    (common.cuh, chunk_span): one more than the row needs when it starts mid-chunk."""
    per_chunk = 16 // itemsize
    return -(-(width + per_chunk - 1) // per_chunk)


class Launch(NamedTuple):
    """One kernel launch, everything but the data."""

    kernel: Any
    grid: tuple[int, int, int]
    block: tuple[int, int, int] = (BLOCK, 1, 1)
    shared_mem: int = 0

    def __call__(self, *args: Any) -> None:
        self.kernel(self.grid, self.block, args, shared_mem=self.shared_mem)


# cuLaunchKernelEx's launch configuration (cuda.h: CUlaunchConfig, CUlaunchAttribute, whose
# value is a 64-byte union) and the attribute that lets a grid start before the one ahead of
# it in the stream completes.
_PROGRAMMATIC_STREAM_SERIALIZATION = 6


class _LaunchAttribute(ctypes.Structure):
    _fields_ = (("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", ctypes.c_int),
                ("rest", ctypes.c_char * 60))  # fmt: skip


# (read only: the driver copies the launch's configuration)
_DEPENDENT = _LaunchAttribute(id=_PROGRAMMATIC_STREAM_SERIALIZATION, value=1)


class _LaunchConfig(ctypes.Structure):
    _fields_ = (
        ("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3), ("shared_mem", ctypes.c_uint),
        ("stream", ctypes.c_void_p), ("attrs", ctypes.POINTER(_LaunchAttribute)),
        ("num_attrs", ctypes.c_uint),
    )  # fmt: skip


def _driver_function(name: str, *argtypes: Any) -> Any:
    """The driver API's function `name` (returning a CUresult) with its argument types, or None
    where the driver has none."""
    try:
        function = getattr(ctypes.CDLL("libcuda.so.1"), name)
    except (OSError, AttributeError):
        return None
    function.argtypes = argtypes
    function.restype = ctypes.c_int
    return function


@functools.cache
def _launch_kernel_ex() -> Any:
    """The driver's ``cuLaunchKernelEx``, or None."""
    return _driver_function("cuLaunchKernelEx", ctypes.POINTER(_LaunchConfig), ctypes.c_void_p,
                            ctypes.c_void_p, ctypes.c_void_p)  # fmt: skip


@functools.cache
def _max_active_clusters_fn() -> Any:
    """The driver's ``cuOccupancyMaxActiveClusters``, or None."""
    return _driver_function("cuOccupancyMaxActiveClusters", ctypes.POINTER(ctypes.c_int),
                            ctypes.c_void_p, ctypes.POINTER(_LaunchConfig))  # fmt: skip


def max_active_clusters(launch: Launch) -> int:
    """How many thread-block clusters of `launch` (its kernel's cluster size compiled in, its
    block and shared memory) the device runs at once: clusters take SMs of one GPC, so fewer
    may fit than the SMs' count suggests. 0 where the driver cannot tell."""
    query = _max_active_clusters_fn()
    function = getattr(launch.kernel, "kernel", None)  # cupy.RawKernel's Function
    if query is None or function is None:
        return 0
    config = _LaunchConfig(
        (ctypes.c_uint * 3)(*launch.grid), (ctypes.c_uint * 3)(*launch.block), launch.shared_mem,
        None, None, 0,
    )  # fmt: skip
    count = ctypes.c_int(0)
    status: int = query(ctypes.byref(count), int(function.ptr), ctypes.byref(config))
    return count.value if status == 0 else 0


def _argument_bytes(arg: Any) -> bytes:
    """A kernel argument's bytes: a CuPy array (a pointer parameter) as its device address, a
    NumPy integer scalar or a `TensorMap` as itself. Anything else is refused: its size and
    alignment would be a guess."""
    if isinstance(arg, TensorMap):
        return bytes(arg)
    if isinstance(arg, np.integer):
        return arg.tobytes()
    if isinstance(getattr(getattr(arg, "data", None), "ptr", None), int):  # a CuPy array
        return struct.pack("<Q", arg.data.ptr)
    raise TypeError(f"not a kernel argument this packing knows: {type(arg).__name__}")


def packed_arguments(args: Sequence[Any], start: int = 0) -> bytes:
    """Kernel arguments (see `_argument_bytes`; no `TensorMap`) as the driver lays out a
    kernel's parameters, each at its natural alignment; `start`: the offset of the first among
    the parameters."""
    packed = bytearray()
    for arg in args:
        if isinstance(arg, TensorMap):  # (aligned on 64, not its size: see `launch_packed`)
            raise TypeError("a TensorMap is passed by `launch_packed`, not in a packed buffer")
        value = _argument_bytes(arg)
        packed += bytes(-(start + len(packed)) % len(value)) + value
    return bytes(packed)


class DependentLaunch:
    """A launch with programmatic dependent launch allowed (``cuLaunchKernelEx``): the grid may
    start while the grid ahead of it in the stream finishes, so before its
    ``griddepcontrol.wait`` the kernel must read nothing that grid may write and write nothing
    that grid may read or write.

    The kernel takes `arrays` device arrays first, then the plan's `scalars`, packed here once
    (packing them a call would cost more host time than the launch); a call packs the arrays'
    addresses before them. Nothing is shared between calls but read-only state, so threads may
    call at once.
    """

    def __init__(self, launch: Launch, scalars: Sequence[Any], arrays: int) -> None:
        self._function = getattr(launch.kernel, "kernel", None)  # cupy.RawKernel's Function
        self._arrays = arrays
        self._scalars = packed_arguments(scalars, start=8 * arrays)
        self._grid = (ctypes.c_uint * 3)(*launch.grid)
        self._block = (ctypes.c_uint * 3)(*launch.block)
        self._shared_mem = launch.shared_mem

    def arguments(self, *arrays: Any) -> bytes:
        """The parameter buffer of a call on `arrays`."""
        if len(arrays) != self._arrays:
            raise TypeError(f"{self._arrays} device arrays expected, got {len(arrays)}")
        return packed_arguments(arrays) + self._scalars

    def __call__(self, *arrays: Any) -> bool:
        """Launch on `arrays` on the current stream; False (nothing launched) where the driver,
        the kernel object or the launch does not allow it: the caller launches as usual."""
        import cupy

        if _launch_kernel_ex() is None or self._function is None:
            return False
        # A launch the driver refuses queued nothing: the caller's own launch then runs it (and
        # reports any error that is not about the attribute).
        status = _launch_buffer(
            self._function, self._grid, self._block, self._shared_mem,
            self.arguments(*arrays), cupy.cuda.get_current_stream().ptr, _DEPENDENT,
        )  # fmt: skip
        return status == 0


def _launch_buffer(
    function: Any,
    grid: Any,
    block: Any,
    shared_mem: int,
    packed: bytes,
    stream: int,
    attribute: _LaunchAttribute | None,
) -> int:
    """``cuLaunchKernelEx`` of `function` on the parameter buffer `packed` with at most one
    launch attribute; the driver's status."""
    buffer = ctypes.create_string_buffer(packed, len(packed))
    size = ctypes.c_size_t(len(packed))
    # CU_LAUNCH_PARAM_BUFFER_POINTER, the buffer, CU_LAUNCH_PARAM_BUFFER_SIZE, its size, END
    extra = (ctypes.c_void_p * 5)(1, ctypes.addressof(buffer), 2, ctypes.addressof(size), 0)
    return _launch_ex(function, grid, block, shared_mem, stream, attribute, None, extra)


def _launch_ex(
    function: Any,
    grid: Any,
    block: Any,
    shared_mem: int,
    stream: int,
    attribute: _LaunchAttribute | None,
    params: Any,
    extra: Any,
) -> int:
    attrs = ctypes.pointer(attribute) if attribute is not None else None
    config = _LaunchConfig(grid, block, shared_mem, stream, attrs, int(attribute is not None))
    status: int = _launch_kernel_ex()(ctypes.byref(config), int(function.ptr), params, extra)
    return status


def launch_packed(launch: Launch, args: Sequence[Any], dependent: bool) -> None:
    """Launch `launch`'s kernel on `args` (see `_argument_bytes`; `TensorMap`s among them, which
    CuPy's kernel call cannot pass) on the current stream through ``cuLaunchKernelEx``, each
    argument handed to the driver by its address (it lays them out: a parameter aligned on 64
    bytes may move the others), as a programmatic dependent of the grid ahead of it where
    `dependent` (see `DependentLaunch`) and the driver allows it. Raises where the driver has
    no ``cuLaunchKernelEx`` (before CUDA 12) or refuses the launch."""
    import cupy

    function = getattr(launch.kernel, "kernel", None)  # cupy.RawKernel's Function
    if _launch_kernel_ex() is None or function is None:
        raise RuntimeError("this launch needs the driver's cuLaunchKernelEx (CUDA 12 or later)")
    grid = (ctypes.c_uint * 3)(*launch.grid)
    block = (ctypes.c_uint * 3)(*launch.block)
    values = [ctypes.create_string_buffer(_argument_bytes(arg)) for arg in args]
    params = (ctypes.c_void_p * len(values))(*map(ctypes.addressof, values))
    stream = cupy.cuda.get_current_stream().ptr
    status = _launch_ex(function, grid, block, launch.shared_mem, stream,
                        _DEPENDENT if dependent else None, params, None)  # fmt: skip
    if status and dependent:  # the attribute refused: as usual
        status = _launch_ex(function, grid, block, launch.shared_mem, stream, None, params, None)
    if status:
        raise RuntimeError(f"cuLaunchKernelEx returned {status}")


class TensorMap(bytes):
    """cuda.h's ``CUtensorMap``: a tiled copy's 128 opaque bytes (a kernel's
    ``__grid_constant__`` parameter, 64-byte aligned), made by `tensor_map`."""

    ALIGNMENT = 64


# cuda.h: CU_TENSOR_MAP_DATA_TYPE_UINT8, CU_TENSOR_MAP_INTERLEAVE_NONE, the swizzle modes by
# their span in bytes (0: none), CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
# CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE (elements outside the tensor read as 0).
_MAP_UINT8, _MAP_NO_INTERLEAVE, _MAP_L2_128B, _MAP_ZERO_FILL = 0, 0, 2, 0
_MAP_SWIZZLE = {0: 0, 32: 1, 64: 2, 128: 3}


@functools.cache
def _encode_tiled() -> Any:
    """The driver's ``cuTensorMapEncodeTiled``, or None."""
    u32, u64 = ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_uint64)
    return _driver_function("cuTensorMapEncodeTiled", ctypes.c_void_p, ctypes.c_int,
                            ctypes.c_uint32, ctypes.c_void_p, u64, u64, u32, u32, ctypes.c_int,
                            ctypes.c_int, ctypes.c_int, ctypes.c_int)  # fmt: skip


def tensor_map(
    address: int,
    dims: Sequence[int],
    strides: Sequence[int],
    box: Sequence[int],
    element_strides: Sequence[int],
    swizzle: int,
) -> TensorMap:
    """The tiled copy descriptor of a byte tensor at `address`: `dims` innermost first, the
    outer dimensions' `strides` in bytes (multiples of 16), the copied `box` and its
    `element_strides`, rows of the box swizzled over `swizzle` bytes (its innermost extent; 0:
    not swizzled);
    elements outside the tensor are copied as 0. Raises where the driver refuses it."""
    encode = _encode_tiled()
    if encode is None:
        raise RuntimeError("this copy needs the driver's cuTensorMapEncodeTiled (CUDA 12)")
    out = (ctypes.c_uint64 * 16)()
    rank = len(dims)
    status = encode(
        ctypes.byref(out), _MAP_UINT8, rank, ctypes.c_void_p(address),
        (ctypes.c_uint64 * rank)(*dims), (ctypes.c_uint64 * (rank - 1))(*strides),
        (ctypes.c_uint32 * rank)(*box), (ctypes.c_uint32 * rank)(*element_strides),
        _MAP_NO_INTERLEAVE, _MAP_SWIZZLE[swizzle], _MAP_L2_128B, _MAP_ZERO_FILL,
    )  # fmt: skip
    if status:
        raise RuntimeError(
            f"cuTensorMapEncodeTiled returned {status} (dims {list(dims)}, strides "
            f"{list(strides)}, box {list(box)}, element strides {list(element_strides)})"
        )
    return TensorMap(bytes(out))


# Dependent launches kept for recent kernels, arguments and devices (packing the arguments
# costs more host time than the launch; an entry is a few hundred bytes).
_DEPENDENT_LAUNCHES = 512


@functools.lru_cache(maxsize=_DEPENDENT_LAUNCHES)
def _dependent(
    kernel: Launch, scalars: tuple[Any, ...], arrays: int, device: int
) -> DependentLaunch:
    return DependentLaunch(kernel, scalars, arrays)


def launch_dependent(kernel: Launch, arrays: tuple[Any, ...], scalars: tuple[Any, ...]) -> None:
    """Launch `kernel` on `arrays` (device arrays, its first parameters) and `scalars` as a
    programmatic dependent of the grid ahead of it in the stream where the device has them
    (compute capability 9.0 and later) and the driver allows it, else as usual. The kernel must
    read and write nothing before its ``griddepcontrol.wait`` (``conv::dependent_start`` first
    thing). The kept launches are found by the scalars' values: a kernel's launcher must give
    it the same NumPy types at each place, as its parameters are."""
    import cupy

    device = cupy.cuda.Device().id
    allowed = _compute_capability(device) >= 90
    if not (allowed and _dependent(kernel, scalars, len(arrays), device)(*arrays)):
        kernel(*arrays, *scalars)


def launch(
    source: str,
    name: str,
    *template_args: object,
    grid: tuple[int, int, int],
    block: tuple[int, int, int] = (BLOCK, 1, 1),
    shared_mem: int = 0,
    options: tuple[str, ...] = (),
) -> Launch:
    """The `Launch` of ``dml::name<template_args...>`` from `kernels/cuda/<source>`, compiled
    with the extra NVRTC ``options`` (a target architecture, say)."""
    import cupy

    device = cupy.cuda.Device().id
    compiled = _compiled(device, source, name, template_args, shared_mem, options)
    return Launch(compiled, grid, block, shared_mem)


# The GPU-side wait queued ahead of a timed group of calls: long enough for the host to queue
# the group behind it (SM clocks: a fixed part, then a part per call).
_TIMING_LEAD_CLOCKS = 1_000_000
_TIMING_LEAD_CLOCKS_PER_CALL = 200_000


def gpu_ms(
    run: Callable[[], None], calls: int, groups: int = 2, lead_clocks: int | None = None
) -> float:
    """GPU milliseconds per call of `run` on the current stream: the fastest of `groups`
    groups of `calls` calls, each queued behind a GPU-side wait (``timing.cu``; `lead_clocks`
    SM clocks where a caller's calls take the host longer to queue than the default allows),
    so that the events around it time the GPU's work, not the host's launches."""
    import cupy

    spin = launch("timing.cu", "spin", grid=(1, 1, 1), block=(1, 1, 1))
    stream = cupy.cuda.get_current_stream()
    best = math.inf
    for _ in range(groups):
        lead = _TIMING_LEAD_CLOCKS + calls * _TIMING_LEAD_CLOCKS_PER_CALL
        spin(np.int64(lead if lead_clocks is None else lead_clocks))
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record(stream)
        for _ in range(calls):
            run()
        end.record(stream)
        end.synchronize()
        best = min(best, cupy.cuda.get_elapsed_time(start, end) / calls)
    return best


_Choice = TypeVar("_Choice")
_Candidate = TypeVar("_Candidate")


def fastest(
    candidates: Iterable[tuple[_Choice, _Candidate]],
    time_ms: Callable[[_Candidate], float],
    seconds: float,
    *,
    finalists: int = 4,
    rounds: int = 2,
    passed_over: tuple[type[BaseException], ...] = (),
    clock: Callable[[], float] = time.monotonic,
) -> _Choice | None:
    """The choice of the fastest of `candidates` ((choice, candidate) pairs, the default first)
    by `time_ms`, or None where none could be timed. Each is timed in turn until `seconds` of
    timing have passed (the first always is); then the `finalists` fastest are timed again,
    `rounds` times each in turn, and each keeps its least time: a moment that slowed one
    candidate's single timing (the clock still rising after an idle spell, another process's
    work) does not decide the choice. Ties go to the earlier candidate. A candidate whose
    timing raises one of `passed_over` (say, memory it cannot get) is passed over; where every
    finalist does so when timed again, the fastest of the others is chosen."""
    timed: list[tuple[float, int, _Choice, _Candidate]] = []
    spent = 0.0
    for order, (choice, candidate) in enumerate(candidates):
        if order and spent > seconds:
            break
        start = clock()
        try:
            timed.append((time_ms(candidate), order, choice, candidate))
        except passed_over:
            continue
        finally:
            spent += clock() - start
    ranked = sorted(timed, key=lambda t: t[:2])
    best = ranked[:finalists]
    for _ in range(rounds if len(best) > 1 else 0):
        again = []
        for ms, order, choice, candidate in best:
            try:
                again.append((min(ms, time_ms(candidate)), order, choice, candidate))
            except passed_over:
                continue
        best = again
    best = best or ranked[finalists:]
    return min(best, key=lambda t: t[:2])[2] if best else None


@functools.lru_cache(maxsize=4096)
def _compiled(
    device: int,
    source: str,
    name: str,
    template_args: tuple[object, ...],
    shared_mem: int,
    options: tuple[str, ...],
) -> Any:
    """`kernel`, memoized on its arguments as given (spelling the C++ name and taking the
    loader's lock cost more host time per call than a launch itself); per device, because a
    raised shared-memory limit is a per-device attribute."""
    return kernel(source, name, *template_args, shared_mem=shared_mem, options=options)


class DirectLaunch:
    """A plan's launch straight through ``cuLaunchKernel``, its arguments in one buffer.

    The plan kernels all take ``(const T* x, T* y, const Params p)``: two 8-byte addresses,
    then the struct at offset 16 (its alignment is at most 8). The buffer holds the struct
    once; a call writes the two addresses and launches on the current stream, where CuPy's
    kernel call packs every argument anew (about 5 us of host time a launch). The driver
    checks the buffer's size against the kernel's parameters. Calls from several threads take
    turns on the buffer (the driver copies it during the launch).
    """

    def __init__(self, launch: Launch, params: np.ndarray, function: Any, device: int) -> None:
        import cupy

        struct = np.frombuffer(params.tobytes(), np.uint8)
        self._buffer = np.zeros(16 + struct.size, np.uint8)
        self._buffer[16:] = struct
        self._addresses = self._buffer[:16].view(np.uint64)
        self._size = np.array([self._buffer.size], np.uint64)
        # CU_LAUNCH_PARAM_BUFFER_POINTER, the buffer, CU_LAUNCH_PARAM_BUFFER_SIZE, its size,
        # CU_LAUNCH_PARAM_END.
        self._extra = np.array(
            [1, self._buffer.ctypes.data, 2, self._size.ctypes.data, 0], np.uint64
        )
        self._extra_address = int(self._extra.ctypes.data)
        self._shape = (*launch.grid, *launch.block, launch.shared_mem)
        self._function = function
        self._pointer = int(function.ptr)
        self._device = device
        self._lock = threading.Lock()
        self._launch_kernel = cupy.cuda.driver.launchKernel
        self._stream = cupy.cuda.get_current_stream
        self._current_device = cupy.cuda.runtime.getDevice

    def __call__(self, x: Any, y: Any) -> bool:
        """Launch on ``x`` and ``y``; False (nothing launched) on another device than the
        kernel's."""
        if self._current_device() != self._device:
            return False
        stream = self._stream().ptr
        with self._lock:
            self._addresses[0] = x.data.ptr
            self._addresses[1] = y.data.ptr
            self._launch_kernel(self._pointer, *self._shape, stream, 0, self._extra_address)
        return True


class Plan(NamedTuple):
    """A one-kernel operator call: ``launch(x, y, params)`` fills a new ``out_shape`` array
    (no launch: nothing to compute); `direct`, where the plan has one, is the same launch
    with less host time."""

    out_shape: tuple[int, ...]
    launch: Launch | None
    params: np.ndarray
    direct: DirectLaunch | None = None

    def run(self, x: Any) -> Any:
        """Allocate the output (C-contiguous, ``x``'s dtype) and launch."""
        import cupy

        y = cupy.empty(self.out_shape, dtype=x.dtype)
        if self.launch is not None and not (self.direct is not None and self.direct(x, y)):
            self.launch(x, y, self.params[()])
        return y


def _direct(plan: Plan) -> DirectLaunch | None:
    """The plan's `DirectLaunch`, where its kernel is a CuPy kernel with a driver function."""
    import cupy

    if plan.launch is None:
        return None
    function = getattr(plan.launch.kernel, "kernel", None)  # cupy.RawKernel's Function
    if function is None or not hasattr(cupy.cuda.driver, "launchKernel"):
        return None
    return DirectLaunch(plan.launch, plan.params, function, cupy.cuda.runtime.getDevice())


def opaque(plan: Plan) -> Plan:
    """`plan` with its parameter struct as one opaque field of the same bytes: CuPy packs a
    structured kernel argument field by field (CuPy 14.2: 6.9 us a launch for a 26-field
    struct, 1.2 us as one field); and with its `DirectLaunch`."""
    p = plan.params
    plan = plan._replace(params=p.view(np.dtype([("bytes", np.dtype((np.void, p.itemsize)))])))
    return plan._replace(direct=_direct(plan))


def plan_cache(fn: Callable[..., Plan]) -> Callable[..., Plan]:
    """A launcher's plan function memoized per geometry (its positional arguments; 512 kept),
    each plan's struct made `opaque` once."""

    @functools.lru_cache(maxsize=512)
    def cached(*args: Any) -> Plan:
        return opaque(fn(*args))

    return functools.update_wrapper(cached, fn)


def chunk_plan(
    params: np.ndarray,
    x_shape: Sequence[int],
    x_strides: Sequence[int],
    out_shape: tuple[int, ...],
    width: int,
    itemsize: int,
    source: str,
    name: str,
    *template_args: object,
    per_thread: int = 1,
) -> Plan:
    """The `Plan` of a row-chunk kernel (common.cuh, row_chunk): one thread per 16-byte chunk
    of each output row of ``width`` elements (``per_thread`` chunks where the kernel takes
    several). Fills the struct's ``chunk_div`` and ``total_chunks``; the index type (from the
    input's element strides and the counts) is the last template argument."""
    chunks = chunks_per_row(width, itemsize)
    total = math.prod(out_shape) // width * chunks
    params["chunk_div"] = fast_divmod(chunks)
    params["total_chunks"] = total
    idx = index_type(x_shape, x_strides, math.prod(out_shape), total)
    grid = grid_for(-(-total // per_thread))
    return Plan(out_shape, launch(source, name, *template_args, idx, grid=grid), params)
