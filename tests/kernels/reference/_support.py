"""Shared by the reference tests: hypothesis strategies (geometries, data types, seeds) and
the exact-match assertion."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import settings
from hypothesis import strategies as st

from tests.oracles import ALL_TYPES, Geometry

SETTINGS = settings(max_examples=40, deadline=None)
seeds = st.integers(0, 2**32 - 1)
dtypes = st.sampled_from(ALL_TYPES)


@st.composite
def geometries(
    draw: st.DrawFn,
    min_dims: int = 1,
    max_dims: int = 3,
    max_window: int = 3,
    max_stride: int = 3,
    max_dilation: int = 2,
    max_pad: int = 3,
    max_extra: int = 3,
) -> Geometry:
    """A valid geometry: every axis fits at least one dilated window in its padded size."""
    dims = draw(st.integers(min_dims, max_dims))
    axes = []
    for _ in range(dims):
        k = draw(st.integers(1, max_window))
        stride = draw(st.integers(1, max_stride))
        dilation = draw(st.integers(1, max_dilation))
        start = draw(st.integers(0, max_pad))
        end = draw(st.integers(0, max_pad))
        smallest = max(1, dilation * (k - 1) + 1 - start - end)
        size = draw(st.integers(smallest, smallest + max_extra))
        axes.append((size, k, stride, dilation, start, end))
    sizes, window, strides, dilations, start, end = (tuple(v) for v in zip(*axes, strict=True))
    return Geometry(sizes, window, strides, dilations, start, end)


# 1-3 spatial axes with room to move, and 4-6 axes kept tiny.
few_axes = geometries(1, 3)
many_axes = geometries(4, 6, max_window=2, max_stride=2, max_dilation=2, max_pad=1, max_extra=1)
any_axes = st.one_of(few_axes, many_axes)


def exactly(result: Any, expected: Any) -> None:
    assert result.flags.c_contiguous
    np.testing.assert_array_equal(result, expected, strict=True)
