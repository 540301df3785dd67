"""Element-by-element definitions written straight from SEMANTICS.md: the tests' oracles.

They loop over single elements on purpose (slow, tiny tensors only): they share no code or
strategy with the vectorized reference (which moves strided slices) or the CUDA kernels, so
agreement between them means something. Also window geometries and random test data.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from dmlserve.kernels.dtypes import DataType
from dmlserve.kernels.geometry import Window

Array = npt.NDArray[Any]

ALL_TYPES: list[np.dtype[Any]] = [dt.numpy for dt in DataType]
INTEGER_TYPES = [dt for dt in ALL_TYPES if dt.kind in "iu"]
FLOAT_TYPES = [dt for dt in ALL_TYPES if dt.kind == "f"]


@dataclass(frozen=True)
class Geometry:
    """Spatial sizes and sliding-window parameters, one entry per spatial axis."""

    sizes: tuple[int, ...]
    window: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    start: tuple[int, ...]
    end: tuple[int, ...]

    @property
    def args(self) -> tuple[Window]:
        """The backends' arguments after the tensor (and FOLD's output sizes): the window."""
        return (Window(self.window, self.strides, self.dilations, self.start, self.end),)

    @property
    def blocks(self) -> tuple[int, ...]:
        return tuple(
            (s + a + e - d * (k - 1) - 1) // t + 1
            for s, k, t, d, a, e in zip(
                self.sizes,
                self.window,
                self.strides,
                self.dilations,
                self.start,
                self.end,
                strict=True,
            )
        )


def random_array(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any) -> Array:
    """Integers over the type's full range; floats as small integers (sums stay exact)."""
    dt = np.dtype(dtype)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, size=shape, dtype=dt, endpoint=True)
    return rng.integers(-8, 9, size=shape).astype(dt)


def wrap(value: int, dtype: Any) -> int:
    """``value`` modulo 2**bits, read back in the signedness of ``dtype``."""
    dt = np.dtype(dtype)
    bits = 8 * dt.itemsize
    value %= 1 << bits
    if dt.kind == "i" and value >= 1 << (bits - 1):
        value -= 1 << bits
    return value


def _positions(
    g: Geometry, block: tuple[int, ...], offset: tuple[int, ...]
) -> tuple[int, ...] | None:
    """``pos[d] = b[d]*Strides[d] + k[d]*Dilations[d] - StartPadding[d]``, None in padding."""
    pos = tuple(
        b * s + k * d - a
        for b, k, s, d, a in zip(block, offset, g.strides, g.dilations, g.start, strict=True)
    )
    return pos if all(0 <= p < n for p, n in zip(pos, g.sizes, strict=True)) else None


def naive_unfold(x: Array, g: Geometry) -> Array:
    n, c = x.shape[:2]
    offsets = list(np.ndindex(*g.window))
    blocks = list(np.ndindex(*g.blocks))
    out = np.zeros((n, c * len(offsets), len(blocks)), dtype=x.dtype)
    for ni, ci, (ki, k), (bi, b) in itertools.product(
        range(n), range(c), enumerate(offsets), enumerate(blocks)
    ):
        pos = _positions(g, b, k)
        if pos is not None:
            out[ni, ci * len(offsets) + ki, bi] = x[(ni, ci, *pos)]
    return out


def naive_fold(x: Array, g: Geometry) -> Array:
    """Exact sums in Python numbers, then wrapped (integers) or rounded once (floats)."""
    n, rows, _ = x.shape
    offsets = list(np.ndindex(*g.window))
    c = rows // len(offsets)
    sums = np.zeros((n, c, *g.sizes), dtype=object)
    for ni, ci, (ki, k), (bi, b) in itertools.product(
        range(n), range(c), enumerate(offsets), enumerate(np.ndindex(*g.blocks))
    ):
        pos = _positions(g, b, k)
        if pos is not None:
            sums[(ni, ci, *pos)] += x[ni, ci * len(offsets) + ki, bi].item()
    if x.dtype.kind in "iu":
        return np.vectorize(lambda v: wrap(int(v), x.dtype), otypes=[x.dtype])(sums)
    return sums.astype(np.float64).astype(x.dtype)


def naive_average_pooling(x: Array, g: Geometry, include_padding: bool) -> Array:
    """Float64 means, one output element at a time (NaN where no tap is counted)."""
    n, c = x.shape[:2]
    out = np.zeros((n, c, *g.blocks), dtype=np.float64)
    for ni, ci, o in itertools.product(range(n), range(c), np.ndindex(*g.blocks)):
        total, inside = 0.0, 0
        for k in np.ndindex(*g.window):
            pos = _positions(g, o, k)
            if pos is not None:
                total += float(x[(ni, ci, *pos)])
                inside += 1
        divisor = math.prod(g.window) if include_padding else inside
        out[(ni, ci, *o)] = total / divisor if divisor else math.nan
    return out


def naive_convolution_integer(
    x: Array, w: Array, x_zp: int, w_zp: Array, g: Geometry, groups: int
) -> Array:
    """SEMANTICS.md §6 term by term, in Python integers; padded taps read x_zp."""
    n, c = x.shape[:2]
    m = w.shape[0]
    cg, mg = c // groups, m // groups
    out = np.zeros((n, m, *g.blocks), dtype=np.int32)
    for ni, mi, o in itertools.product(range(n), range(m), np.ndindex(*g.blocks)):
        group = mi // mg
        total = 0
        for cj, k in itertools.product(range(cg), np.ndindex(*g.window)):
            pos = _positions(g, o, k)
            xv = x_zp if pos is None else int(x[(ni, group * cg + cj, *pos)])
            total += (xv - x_zp) * (int(w[(mi, cj, *k)]) - int(w_zp[mi]))
        out[(ni, mi, *o)] = wrap(total, np.int32)
    return out


def fold_into_range(j: int, n: int, mode: str) -> int:
    """The input index read at offset ``j`` of an axis of size ``n``, by folding the padding
    over the edges again and again until it lands inside (the seed page's wording)."""
    if mode == "EDGE":
        return min(max(j, 0), n - 1)
    if mode == "WRAP":
        return j % n
    if mode == "REFLECTION" and n == 1:
        return 0
    while not 0 <= j < n:
        if mode == "REFLECTION":  # mirror about the edge element itself
            j = -j if j < 0 else 2 * (n - 1) - j
        else:  # SYMMETRIC: mirror about the edge, which is repeated
            j = -j - 1 if j < 0 else 2 * n - 1 - j
    return j


def naive_padding(
    x: Array, start: tuple[int, ...], end: tuple[int, ...], mode: str, value: Any
) -> Array:
    shape = tuple(a + n + e for n, a, e in zip(x.shape, start, end, strict=True))
    out = np.empty(shape, dtype=x.dtype)
    for o in np.ndindex(*shape):
        j = [oi - a for oi, a in zip(o, start, strict=True)]
        if mode == "CONSTANT":
            inside = all(0 <= ji < n for ji, n in zip(j, x.shape, strict=True))
            out[o] = x[tuple(j)] if inside else value
        else:
            out[o] = x[
                tuple(fold_into_range(ji, n, mode) for ji, n in zip(j, x.shape, strict=True))
            ]
    return out
