"""PADDING / PADDING1, SEMANTICS.md §4.

Output element ``o`` reads input coordinate ``src(o[i] - StartPadding[i])`` on every axis ``i``;
the axes are independent, so each axis gets its own source-index map and the output is one
gather through their outer product (``numpy.ix_``). Data is copied, never converted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ..directml import PaddingMode
from ._windows import Array

__all__ = ["padding", "source_index"]

IndexArray = npt.NDArray[np.int64]


def source_index(j: IndexArray, n: int, mode: str) -> IndexArray:
    """The input index read at offset ``j = o - StartPadding`` of an axis of size ``n``.

    Inside ``[0, n)`` every mode returns ``j``. Outside (periodic, so any pad size works):
    EDGE ``clamp(j, 0, n-1)``; REFLECTION period ``p = 2(n-1)``, ``r = j mod p``,
    ``r < n ? r : p - r`` (edge not repeated; ``n == 1`` repeats the element);
    SYMMETRIC period ``2n``, ``r < n ? r : 2n - 1 - r`` (edge repeated); WRAP ``j mod n``.
    CONSTANT has no source outside the input and is handled by :func:`padding`.
    """
    if mode == PaddingMode.EDGE:
        return np.clip(j, 0, n - 1)
    if mode == PaddingMode.REFLECTION:
        if n == 1:  # period 0; the project's rule (NumPy/ONNX behaviour) repeats the element
            return np.zeros_like(j)
        period = 2 * (n - 1)
        r = np.mod(j, period)
        return np.where(r < n, r, period - r)
    if mode == PaddingMode.SYMMETRIC:
        period = 2 * n
        r = np.mod(j, period)
        return np.where(r < n, r, period - 1 - r)
    if mode == PaddingMode.WRAP:
        return np.mod(j, n)
    raise ValueError(f"no source-index map for PaddingMode {mode!r}")


def padding(
    x: Array,
    start_padding: Sequence[int],
    end_padding: Sequence[int],
    mode: str,
    value: Any,
) -> Array:
    """``Out.Sizes[i] = In.Sizes[i] + StartPadding[i] + EndPadding[i]``, rank 1..8, any dtype.

    ``mode`` is a ``PaddingMode`` name; ``value`` (a NumPy scalar of ``x.dtype``) fills the
    padding in CONSTANT mode and is ignored otherwise.
    """
    if mode == PaddingMode.CONSTANT:
        out_shape = tuple(
            a + n + e for n, a, e in zip(x.shape, start_padding, end_padding, strict=True)
        )
        out = np.full(out_shape, value, dtype=x.dtype)
        out[tuple(slice(a, a + n) for n, a in zip(x.shape, start_padding, strict=True))] = x
        return out
    maps = [
        source_index(np.arange(-a, n + e, dtype=np.int64), n, mode)
        for n, a, e in zip(x.shape, start_padding, end_padding, strict=True)
    ]
    return np.ascontiguousarray(x[np.ix_(*maps)])
