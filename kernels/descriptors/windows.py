"""The sliding-window rule of UNFOLD, FOLD, AVERAGE_POOLING and CONVOLUTION_INTEGER.

Every axis must fit the dilated window in its padded size; the window count per axis is
`geometry.sliding_count`. One function states the rule and its error message for all four.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from ..errors import Loc
from ..geometry import sliding_count
from ._base import Errors
from .operator import PerAxis

__all__ = ["Windowed", "window_counts"]


class Windowed(Protocol):
    """A descriptor with sliding-window arrays (filled with their defaults by `resolve`)."""

    @property
    def strides(self) -> PerAxis | None: ...
    @property
    def dilations(self) -> PerAxis | None: ...
    @property
    def start_padding(self) -> PerAxis | None: ...
    @property
    def end_padding(self) -> PerAxis | None: ...


def window_counts(
    op: Windowed,
    spatial: Sequence[int],
    window: Sequence[int],
    errors: Errors,
    *,
    window_field: str,
    source: str,
    window_loc: Callable[[int], Loc] | None = None,
) -> tuple[int, ...] | None:
    """Windows per spatial axis, or None after naming each axis the window does not fit.

    An error on axis `d` is at `window_loc(d)`, by default `(window_field, d)`.
    """
    counts = []
    axes = zip(
        spatial, window, op.strides or (), op.dilations or (), op.start_padding or (),
        op.end_padding or (), strict=True,
    )  # fmt: skip
    for d, (s, k, st, dl, a, b) in enumerate(axes):
        n = sliding_count(s, k, st, dl, a, b)
        if n is None:
            errors.add(
                window_loc(d) if window_loc else (window_field, d),
                f"the dilated window, Dilations[{d}] * ({window_field}[{d}] - 1) + 1 = "
                f"{dl * (k - 1) + 1}, must fit in the padded size {source}.Sizes[{d + 2}] + "
                f"StartPadding[{d}] + EndPadding[{d}] = {s + a + b}",
            )
        counts.append(n or 0)
    return None if errors else tuple(counts)
