"""PADDING on the GPU: launcher of `kernels/cuda/padding.cu`."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from ..directml import MAX_TENSOR_RANK as MAX_RANK
from ..directml import PaddingMode
from ._common import (
    BLOCK,
    FAST_DIVMOD,
    fast_divmod,
    fill_divisors,
    grid_for,
    index_type,
    make_struct,
)
from ._loader import get_kernel

__all__ = ["padding"]


PARAMS = make_struct(
    [
        ("in_stride", "<i8", MAX_RANK),
        ("total_chunks", "<i8", 0),
        ("value", "<u8", 0),
        ("in_size", "<i4", MAX_RANK),
        ("out_size", "<i4", MAX_RANK),
        ("pad_lo", "<i4", MAX_RANK),
        ("out_div", FAST_DIVMOD, MAX_RANK),
        ("chunk_div", FAST_DIVMOD, 0),
        ("mode", "<i4", 0),
        ("periodic", "<i4", 0),
        ("inner_contiguous", "<i4", 0),
        ("unused", "<i4", 0),
    ]
)


def collapse(
    shape: Sequence[int], strides: Sequence[int], lo: Sequence[int], hi: Sequence[int]
) -> tuple[list[int], list[int], list[int], list[int]]:
    """Merge neighbouring unpadded dims that are contiguous in the input; drop unpadded 1s.

    Fewer dims mean longer output rows and less index decoding; the result describes the
    same element mapping.
    """
    dims = [
        [n, s, a, b]
        for n, s, a, b in zip(shape, strides, lo, hi, strict=True)
        if not (n == 1 and a == 0 and b == 0)
    ]
    if not dims:
        dims = [[1, 1, 0, 0]]
    merged = [dims[-1]]
    for n, s, a, b in reversed(dims[:-1]):
        inner = merged[0]
        if a == b == 0 and inner[2] == inner[3] == 0 and s == inner[1] * inner[0]:
            inner[0] *= n
        else:
            merged.insert(0, [n, s, a, b])
    return (
        [d[0] for d in merged],
        [d[1] for d in merged],
        [d[2] for d in merged],
        [d[3] for d in merged],
    )


def _needs_period(n: int, lo: int, hi: int, mode: str) -> bool:
    """True when a pad reaches beyond one fold, where the closed-form mirror stops holding."""
    if mode == "REFLECTION":
        return max(lo, hi) > n - 1
    if mode in ("SYMMETRIC", "WRAP"):
        return max(lo, hi) > n
    return False


class _Plan(NamedTuple):
    out_shape: tuple[int, ...]
    kernel: Any  # None: nothing to pad, a plain copy
    grid: tuple[int, int, int]
    params: np.ndarray


@functools.lru_cache(maxsize=512)
def _plan(
    shape: tuple[int, ...],
    byte_strides: tuple[int, ...],
    itemsize: int,
    start_padding: tuple[int, ...],
    end_padding: tuple[int, ...],
    mode: str,
) -> _Plan:
    """Everything but the data, once per geometry: a call then only allocates and launches."""
    out_shape = tuple(n + a + b for n, a, b in zip(shape, start_padding, end_padding, strict=True))
    p = np.zeros((), dtype=PARAMS)
    strides = [s // itemsize for s in byte_strides]
    sizes, in_strides, lo, hi = collapse(shape, strides, start_padding, end_padding)
    if math.prod(out_shape) == 0 or all(a == 0 and b == 0 for a, b in zip(lo, hi, strict=True)):
        return _Plan(out_shape, None, (1, 1, 1), p)

    rank = len(sizes)
    sizes_out = [n + a + b for n, a, b in zip(sizes, lo, hi, strict=True)]
    per_chunk = 16 // itemsize
    # Chunks are aligned to the buffer (chunk_span), so a row may need one more.
    chunks_per_row = -(-(sizes_out[-1] + per_chunk - 1) // per_chunk)
    total = math.prod(out_shape) // sizes_out[-1] * chunks_per_row

    p["in_stride"][:rank] = in_strides
    p["total_chunks"] = total
    p["in_size"][:rank] = sizes
    p["out_size"][:rank] = sizes_out
    p["pad_lo"][:rank] = lo
    fill_divisors(p["out_div"], sizes_out)
    p["chunk_div"] = fast_divmod(chunks_per_row)
    p["mode"] = PaddingMode(mode).dml_value
    p["periodic"] = int(
        any(_needs_period(n, a, b, mode) for n, a, b in zip(sizes, lo, hi, strict=True))
    )
    p["inner_contiguous"] = int(in_strides[-1] == 1)

    idx = index_type(shape, strides, math.prod(out_shape), total)
    kernel = get_kernel("padding.cu", f"dml::pad_chunks<{itemsize},{rank},{idx}>")
    return _Plan(out_shape, kernel, grid_for(total), p)


def padding(
    x: Any, start_padding: Sequence[int], end_padding: Sequence[int], mode: str, value: Any
) -> Any:
    """``Out.Sizes[i] = In.Sizes[i] + Start[i] + End[i]`` (rank 1..8, any dtype), on the GPU."""
    import cupy

    plan = _plan(
        x.shape, x.strides, x.dtype.itemsize, tuple(start_padding), tuple(end_padding), mode
    )
    y = cupy.empty(plan.out_shape, dtype=x.dtype)
    if plan.kernel is None:
        if y.size:
            y[...] = x  # nothing to pad: a plain copy
        return y
    params = plan.params
    if mode == "CONSTANT":
        params = params.copy()
        raw = np.asarray(value, dtype=x.dtype).tobytes().ljust(8, b"\0")
        params["value"] = int.from_bytes(raw, "little")
    plan.kernel(plan.grid, (BLOCK, 1, 1), (x, y, params[()]))
    return y
