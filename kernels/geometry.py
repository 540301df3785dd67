"""Sliding-window geometry shared by every layer: the one output-size formula.

UNFOLD/FOLD (SEMANTICS.md §3), AVERAGE_POOLING (§5.1) and CONVOLUTION_INTEGER (§6) count the
windows along a spatial axis the same way:
``(Size + StartPadding + EndPadding - Dilations*(Window-1) - 1) // Strides + 1``.
A `Window` holds the five per-axis arrays that travel together through every backend.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields

__all__ = ["Window", "sliding_count"]


def sliding_count(
    size: int, window: int, stride: int, dilation: int, start: int, end: int
) -> int | None:
    """Windows along one axis; None when the dilated window does not fit the padded size."""
    padded = size + start + end
    extent = dilation * (window - 1) + 1
    if padded < extent:
        return None
    return (padded - extent) // stride + 1


@dataclass(frozen=True)
class Window:
    """A sliding window over the spatial axes, one entry per axis in each array.

    Block ``b`` reads, at window offset ``k``, position ``b*strides + k*dilations -
    start_padding`` of each axis (SEMANTICS.md §3). Any integer sequences are accepted and
    kept as tuples of int, so a window is hashable (launch plans are cached by it).
    """

    sizes: Sequence[int]
    strides: Sequence[int]
    dilations: Sequence[int]
    start_padding: Sequence[int]
    end_padding: Sequence[int]

    def __post_init__(self) -> None:
        for field in fields(self):
            object.__setattr__(self, field.name, tuple(int(v) for v in getattr(self, field.name)))

    @property
    def taps(self) -> int:
        """Window offsets per block: ``prod(sizes)``."""
        return math.prod(self.sizes)

    def blocks(self, sizes: Sequence[int]) -> tuple[int, ...]:
        """Windows per spatial axis of an image of ``sizes`` (BlocksPerDimension); the geometry
        must be valid."""
        counts = []
        axes = zip(
            sizes, self.sizes, self.strides, self.dilations, self.start_padding,
            self.end_padding, strict=True,
        )  # fmt: skip
        for axis in axes:
            n = sliding_count(*axis)
            if n is None:
                raise ValueError(f"the dilated window does not fit the padded size on axis {axis}")
            counts.append(n)
        return tuple(counts)

    def with_unit_axes(self, count: int) -> Window:
        """The same window behind ``count`` leading axes that it leaves alone (size, stride and
        dilation 1, no padding): a kernel of fixed rank runs lower ranks through it."""
        one, zero = (1,) * count, (0,) * count
        return Window(
            (*one, *self.sizes),
            (*one, *self.strides),
            (*one, *self.dilations),
            (*zero, *self.start_padding),
            (*zero, *self.end_padding),
        )
