"""CuPy AVERAGE_POOLING against the NumPy reference, within float rounding, every kernel path.

Every kernel computes every geometry correctly; a path that does not take a geometry (the
strip kernel's small unit-dilation windows) falls back to the launcher's other choices, so
forcing each path on every case covers each kernel on all the cases it takes.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest

from dmlserve.kernels import reference
from dmlserve.kernels.geometry import Window

from ._support import LAYOUTS, check, float_rtol, launcher, random_array

pytestmark = pytest.mark.gpu

PATHS = [None, "eager", "packed", "bands", "strip", "ring", "rows", "rows16", "tiled", "direct"]

# (spatial sizes, window, strides, dilations, start, end)
CASES = [
    ((9, 11), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1)),
    ((10, 13), (3, 3), (2, 2), (1, 1), (1, 1), (1, 1)),
    ((8, 8), (2, 2), (2, 2), (1, 1), (0, 0), (0, 0)),
    ((12, 15), (3, 2), (2, 3), (2, 3), (2, 0), (1, 3)),  # dilations, asymmetric pads
    ((7, 70), (2, 5), (3, 1), (1, 2), (0, 4), (1, 4)),  # long rows: several W tiles
    ((40, 40), (40, 40), (1, 1), (1, 1), (0, 0), (0, 0)),  # global pooling
    ((33,), (4,), (2,), (3,), (2,), (3,)),  # 1 spatial dim
    ((6, 7, 9), (3, 3, 3), (1, 1, 1), (1, 1, 1), (1, 1, 1), (1, 1, 1)),
    ((9, 8, 10), (2, 3, 2), (2, 1, 3), (2, 1, 2), (1, 0, 2), (0, 2, 1)),
    ((5, 20, 130), (1, 3, 3), (1, 2, 2), (1, 1, 1), (0, 1, 1), (0, 1, 1)),
    ((12, 19), (2, 2), (1, 1), (1, 1), (0, 1), (1, 0)),  # window 2, one-sided pads
    ((10, 21), (1, 3), (1, 1), (1, 1), (0, 1), (0, 1)),  # window 1 on an axis
    ((50,), (3,), (1,), (1,), (1,), (1,)),  # 1-D, window 3
    ((9, 13), (1, 1), (1, 1), (1, 1), (0, 0), (0, 0)),  # window 1, odd width
    ((11, 17), (3, 3), (3, 3), (1, 1), (1, 1), (1, 2)),  # stride == window 3, padded
    ((10, 15), (2, 2), (3, 2), (2, 1), (1, 1), (0, 1)),  # dilated H, odd width
    ((37,), (2,), (2,), (1,), (1,), (0,)),  # 1-D, padded, odd width
    ((6, 7, 9), (2, 2, 2), (2, 2, 2), (1, 1, 1), (0, 0, 0), (1, 1, 1)),  # 3-D non-overlapping
    ((8, 9, 12), (4, 1, 5), (4, 2, 5), (1, 1, 1), (0, 0, 1), (0, 1, 2)),  # windows above 3
    ((20, 23), (2, 3), (5, 4), (3, 1), (2, 0), (1, 2)),  # stride > window, dilated H
    ((7, 64), (2, 2), (2, 2), (1, 1), (0, 0), (1, 0)),  # 16-byte spans on aligned rows
    ((6, 88), (2, 2), (2, 2), (1, 1), (0, 0), (0, 0)),  # 32-byte spans, a short last group
    ((9, 70), (3, 2), (3, 1), (1, 1), (2, 1), (0, 0)),  # stride 3 down the walk, W 2 lanes
    ((7, 9, 300), (3, 3, 3), (2, 1, 2), (1, 1, 1), (2, 0, 1), (1, 2, 1)),  # W of several spans
    ((5, 6, 200), (2, 3, 3), (1, 2, 1), (1, 1, 1), (1, 1, 0), (0, 1, 2)),  # 3-D, H stride 2
]


def _pool(path: Any) -> Any:
    return functools.partial(launcher("average_pooling").average_pooling_on, path)


@pytest.mark.parametrize("path", PATHS, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=str)
@pytest.mark.parametrize("include_padding", [True, False])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_average_pooling(dtype: Any, include_padding: bool, layout: str, path: Any) -> None:
    rng = np.random.default_rng(31)
    for sizes, *geometry in CASES:
        host = random_array((2, 3, *sizes), dtype, rng)
        args = (Window(*geometry), include_padding)
        check(_pool(path), reference.average_pooling, host, layout, args, float_rtol(dtype))


@pytest.mark.parametrize("path", ["strip", "ring", "bands", "packed", "eager"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=str)
@pytest.mark.parametrize("include_padding", [True, False])
def test_strip_runs_down_long_planes(include_padding: bool, dtype: Any, path: str) -> None:
    """Enough planes that the strip kernel splits the walk into runs of several planes (and
    the band kernels have many bands per plane, rows of whole 16-byte vectors)."""
    rng = np.random.default_rng(32)
    for sizes, window, strides, pads in [
        ((64, 64), (3, 3), (1, 1), (1, 1)),
        ((61, 56), (3, 3), (2, 2), (1, 1)),
        ((24, 16, 32), (3, 3, 3), (1, 1, 1), (1, 1, 1)),
    ]:
        host = random_array((8, 64, *sizes), dtype, rng)
        dims = len(sizes)
        args = (Window(window, strides, (1,) * dims, pads, pads), include_padding)
        check(_pool(path), reference.average_pooling, host, "contiguous", args, float_rtol(dtype))


def test_needs_64_bit_indexing() -> None:
    import cupy

    pooling = launcher("average_pooling")
    width = 2**30 + 6  # two planes of it: more than 2**31 elements
    try:
        x = (cupy.arange(2 * width, dtype=cupy.int32) % 7).astype(cupy.float16).reshape(1, 2, -1)
        y = pooling.average_pooling(x, Window((2,), (2,), (1,), (0,), (1,)), False)
    except cupy.cuda.memory.OutOfMemoryError:
        pytest.skip("not enough device memory for a > 2**31-element tensor")
    pairs = x[..., : width - width % 2].astype(cupy.float32).reshape(1, 2, -1, 2).mean(axis=-1)
    assert y.shape == (1, 2, width // 2 + width % 2)
    assert bool((y[..., : pairs.shape[-1]].astype(cupy.float32) == pairs).all())
