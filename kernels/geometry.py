"""Sliding-window geometry shared by every layer: the one output-size formula.

UNFOLD/FOLD (SEMANTICS.md §3), AVERAGE_POOLING (§5.1) and CONVOLUTION_INTEGER (§6) count the
windows along a spatial axis the same way:
``(Size + StartPadding + EndPadding - Dilations*(Window-1) - 1) // Strides + 1``.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["blocks_per_dimension", "sliding_count"]


def sliding_count(
    size: int, window: int, stride: int, dilation: int, start: int, end: int
) -> int | None:
    """Windows along one axis; None when the dilated window does not fit the padded size."""
    padded = size + start + end
    extent = dilation * (window - 1) + 1
    if padded < extent:
        return None
    return (padded - extent) // stride + 1


def blocks_per_dimension(
    sizes: Sequence[int],
    window_sizes: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    start_padding: Sequence[int],
    end_padding: Sequence[int],
) -> tuple[int, ...]:
    """Windows per spatial axis (BlocksPerDimension); the geometry must be valid."""
    counts = []
    axes = zip(sizes, window_sizes, strides, dilations, start_padding, end_padding, strict=True)
    for axis in axes:
        n = sliding_count(*axis)
        if n is None:
            raise ValueError(f"the dilated window does not fit the padded size on axis {axis}")
        counts.append(n)
    return tuple(counts)
