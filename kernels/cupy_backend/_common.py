"""Host-side helpers shared by the CuPy launchers: parameter structs, fast divisors, sizes.

Kernel parameters travel by value as one C struct per launch. Each launcher describes its
struct as a NumPy structured dtype with C alignment (``align=True``), in the same field order
as the struct in the `.cu` file, and passes a NumPy structured scalar; CuPy hands its bytes
to the kernel unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..wire import buffer_extent

__all__ = [
    "BLOCK",
    "FAST_DIVMOD",
    "INT32_LIMIT",
    "fast_divmod",
    "index_type",
    "make_struct",
    "fill_divisors",
    "grid_for",
]

BLOCK = 256
INT32_LIMIT = 2**31 - 1

# struct FastDivmod { unsigned d, mul, shift; } (common.cuh)
FAST_DIVMOD = np.dtype([("d", "<u4"), ("mul", "<u4"), ("shift", "<u4")], align=True)


def fast_divmod(d: int) -> tuple[int, int, int]:
    """``(d, mul, shift)`` with ``n // d == (umulhi(n, mul) + n) >> shift`` for ``n < 2**31``."""
    if not 1 <= d <= INT32_LIMIT:
        raise ValueError(f"divisor {d} outside [1, 2**31)")
    shift = (d - 1).bit_length()
    mul = ((1 << 32) * ((1 << shift) - d)) // d + 1
    return d, mul & 0xFFFFFFFF, shift


def make_struct(fields: Sequence[tuple[str, str | np.dtype, int]]) -> np.dtype:
    """A C-aligned structured dtype from ``(name, dtype, count)``; count 0 means a scalar."""
    spec: list[Any] = []
    for name, dtype, count in fields:
        spec.append((name, dtype, (count,)) if count else (name, dtype))
    return np.dtype(spec, align=True)


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


def fill_divisors(field: np.ndarray, divisors: Sequence[int]) -> None:
    """Write FastDivmod entries for ``divisors`` into a FastDivmod array field."""
    for i, d in enumerate(divisors):
        field[i] = fast_divmod(d)
