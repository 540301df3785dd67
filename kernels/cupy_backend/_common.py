"""The launch path shared by the CuPy launchers: plans, parameter structs, fast divisors, sizes.

A launcher turns a call's geometry (shapes, strides, dtype, operator fields) into a `Plan`
once (memoized), so a call is one allocation and one launch. Kernel parameters travel by
value as one C struct per launch; each struct is declared here through `param_struct` as a
NumPy structured dtype with C alignment, in the field order of the struct in its `.cu` file
(a test compiles the `.cu` files and checks every size and offset), and passed as a NumPy
structured scalar whose bytes CuPy hands to the kernel unchanged.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from ..wire import buffer_extent
from ._loader import kernel

__all__ = [
    "BLOCK",
    "FAST_DIVMOD",
    "INT32_LIMIT",
    "STRUCTS",
    "Launch",
    "ParamStruct",
    "Plan",
    "chunks_per_row",
    "fast_divmod",
    "fill_divisors",
    "grid_for",
    "index_type",
    "launch",
    "param_struct",
    "run",
    "sm_count",
]

BLOCK = 256
INT32_LIMIT = 2**31 - 1


class ParamStruct(NamedTuple):
    """A C parameter struct and the NumPy dtype that mirrors it."""

    source: str  # the `.cu` file under kernels/cuda/ that defines the struct
    name: str  # its C++ name, e.g. dml::PadParams
    dtype: np.dtype


STRUCTS: list[ParamStruct] = []


def param_struct(
    source: str, name: str, fields: Sequence[tuple[str, str | np.dtype, int]]
) -> np.dtype:
    """A C-aligned structured dtype from ``(field, dtype, count)`` (count 0: a scalar) that
    mirrors the struct `name` of `source`; recorded in `STRUCTS` for the layout test."""
    spec: list[Any] = []
    for field, dtype, count in fields:
        spec.append((field, dtype, (count,)) if count else (field, dtype))
    dtype = np.dtype(spec, align=True)
    STRUCTS.append(ParamStruct(source, name, dtype))
    return dtype


# struct FastDivmod { unsigned d, mul, shift; } (common.cuh); nested in other structs.
FAST_DIVMOD = np.dtype([("d", "<u4"), ("mul", "<u4"), ("shift", "<u4")], align=True)
STRUCTS.append(ParamStruct("common.cuh", "dml::FastDivmod", FAST_DIVMOD))


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


def grid_for(threads: int, block: int = BLOCK) -> tuple[int, int, int]:
    """A 1-D grid covering ``threads`` threads."""
    return (max(1, math.ceil(threads / block)), 1, 1)


@functools.cache
def _sm_count(device_id: int) -> int:
    import cupy

    return int(cupy.cuda.Device(device_id).attributes["MultiProcessorCount"])


def sm_count() -> int:
    """Multiprocessors of the current CUDA device."""
    import cupy

    return _sm_count(cupy.cuda.Device().id)


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


def launch(
    source: str,
    name: str,
    *template_args: object,
    grid: tuple[int, int, int],
    block: tuple[int, int, int] = (BLOCK, 1, 1),
    shared_mem: int = 0,
) -> Launch:
    """The `Launch` of ``dml::name<template_args...>`` from `kernels/cuda/<source>`."""
    return Launch(
        kernel(source, name, *template_args, shared_mem=shared_mem), grid, block, shared_mem
    )


class Plan(NamedTuple):
    """A one-kernel operator call: ``launch(x, y, params)`` fills a new ``out_shape`` array
    (no launch: nothing to compute)."""

    out_shape: tuple[int, ...]
    launch: Launch | None
    params: np.ndarray


def run(plan: Plan, x: Any, params: np.ndarray | None = None) -> Any:
    """Allocate the output of `plan` (C-contiguous, ``x``'s dtype) and launch it."""
    import cupy

    y = cupy.empty(plan.out_shape, dtype=x.dtype)
    if plan.launch is not None:
        plan.launch(x, y, (plan.params if params is None else params)[()])
    return y
