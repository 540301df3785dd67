"""Per-axis window arithmetic of the CPU path (SEMANTICS.md §3 positions, solved for ranges).

Window offset ``k`` of block ``b`` reads ``pos = b*Strides + k*Dilations - StartPadding``. For
a fixed ``k`` the blocks whose position lands inside ``[0, Size)`` form one contiguous range,
so every operator moves one strided slice per tap and fills (or skips) the rest, without ever
building a zero-padded copy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ..geometry import Window

__all__ = ["Axis", "Rows", "axes_of", "inside_counts", "row_spans"]


@dataclass(frozen=True)
class Axis:
    """One spatial axis: input size, window, stride, dilation, start padding, block count."""

    size: int
    window: int
    stride: int
    dilation: int
    start: int
    blocks: int

    def valid(self, k: int) -> tuple[int, int]:
        """Blocks ``[lo, hi)`` whose tap ``k`` lands inside the input (``lo == hi``: none)."""
        shift = k * self.dilation - self.start
        lo = (-shift + self.stride - 1) // self.stride if shift < 0 else 0
        hi = min(self.blocks, (self.size - 1 - shift) // self.stride + 1)
        return lo, max(lo, hi)

    def source(self, k: int, lo: int, hi: int) -> slice:
        """Input positions read by tap ``k`` for blocks ``[lo, hi)`` (all inside)."""
        first = lo * self.stride + k * self.dilation - self.start
        return slice(first, first + (hi - lo - 1) * self.stride + 1, self.stride)


def axes_of(sizes: Sequence[int], window: Window) -> tuple[Axis, ...]:
    """The Axis of every spatial dimension of an image of ``sizes``."""
    axes = zip(
        sizes, window.sizes, window.strides, window.dilations, window.start_padding,
        window.blocks(sizes), strict=True,
    )  # fmt: skip
    return tuple(Axis(*a) for a in axes)


def inside_counts(axis: Axis) -> npt.NDArray[np.int64]:
    """How many taps of each block land inside the input (the divisor when padding is excluded)."""
    counts = np.zeros(axis.blocks, dtype=np.int64)
    for k in range(axis.window):
        lo, hi = axis.valid(k)
        counts[lo:hi] += 1
    return counts


@dataclass(frozen=True)
class Rows:
    """Output rows ``[out_lo, out_hi)`` of one axis as a problem of its own.

    They read input rows ``[in_lo, in_hi)`` with ``start``/``end`` padding rows around them;
    the same window, stride and dilation give exactly ``out_hi - out_lo`` blocks.
    """

    out_lo: int
    out_hi: int
    in_lo: int
    in_hi: int
    start: int
    end: int


def row_spans(axis: Axis, rows_per_span: int) -> list[Rows]:
    """Split the blocks of ``axis`` into spans of at most ``rows_per_span`` output rows."""
    extent = (axis.window - 1) * axis.dilation + 1
    spans = []
    step = max(1, rows_per_span)
    for out_lo in range(0, axis.blocks, step):
        out_hi = min(axis.blocks, out_lo + step)
        first = out_lo * axis.stride  # padded coordinates
        stop = (out_hi - 1) * axis.stride + extent
        in_lo = min(max(0, first - axis.start), axis.size)
        in_hi = max(in_lo, min(axis.size, stop - axis.start))
        if in_hi == in_lo:  # every row of the span lies in the padding
            start, end = stop - first, 0
        else:
            start = in_lo + axis.start - first
            end = (stop - first) - start - (in_hi - in_lo)
        spans.append(Rows(out_lo, out_hi, in_lo, in_hi, start, end))
    return spans
