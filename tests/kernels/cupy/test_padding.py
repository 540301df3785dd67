"""CuPy PADDING against the NumPy reference: bit-exact, every kernel path."""

from __future__ import annotations

import functools
import zlib
from typing import Any

import numpy as np
import pytest

from dmlserve.kernels import reference

from ._support import ALL_DTYPES, LAYOUTS, check, launcher, random_array

pytestmark = pytest.mark.gpu

MODES = ["CONSTANT", "EDGE", "REFLECTION", "SYMMETRIC", "WRAP"]

# shape, start, end
CASES = [
    ((2, 3, 5, 7), (0, 1, 2, 3), (1, 0, 3, 2)),
    ((37,), (5,), (11,)),  # rank 1, pads beyond one fold
    ((3, 1, 4), (1, 2, 0), (0, 3, 1)),  # size-1 axis padded
    ((2, 3, 4, 5, 6, 7, 8, 9), (1, 0, 1, 0, 1, 0, 1, 2), (0, 1, 0, 1, 0, 1, 2, 1)),  # rank 8
    ((4, 33), (0, 70), (0, 41)),  # pads of several periods
    ((5, 6, 3), (0, 0, 1), (0, 0, 0)),  # odd widths defeat 16-byte alignment
    ((2, 2, 64, 64), (0, 0, 3, 1), (0, 0, 4, 2)),  # the benchmark's pads, small
    ((6, 130), (2, 0), (3, 0)),  # only an outer dim padded: rows copied whole
    ((3, 5, 16, 16), (0, 0, 20, 20), (0, 0, 21, 19)),  # pads >= size on both axes
    ((9, 61), (1, 17), (2, 40)),  # rows of several chunks per lane
    ((3, 2000), (1, 5), (2, 9)),  # long rows: a tile touches two or three of them
]


def _padding(path: Any) -> Any:
    return functools.partial(launcher("padding").padding_on, path)


def _paths() -> list[Any]:
    return [None, "tiles", "chunks", "chunks1"]


def _run(path: Any, dtype: Any, mode: str, layout: str, cases: list[Any]) -> None:
    rng = np.random.default_rng(zlib.crc32(f"{dtype}-{mode}-{layout}-{path}".encode()))
    for shape, start, end in cases:
        host = random_array(shape, dtype, rng)
        value = random_array((), dtype, rng)[()]
        check(_padding(path), reference.padding, host, layout, (start, end, mode, value))


@pytest.mark.parametrize("path", _paths(), ids=str)
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("mode", MODES)
def test_dtypes_and_modes(path: Any, dtype: Any, mode: str) -> None:
    _run(path, dtype, mode, "contiguous", CASES)


@pytest.mark.parametrize("path", _paths(), ids=str)
@pytest.mark.parametrize("layout", LAYOUTS[1:])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int8, np.int64], ids=str)
@pytest.mark.parametrize("mode", MODES)
def test_strided_inputs(path: Any, layout: str, dtype: Any, mode: str) -> None:
    _run(path, dtype, mode, layout, CASES[:6] + CASES[8:])


@pytest.mark.parametrize("path", _paths(), ids=str)
def test_extreme_integer_values_round_trip(path: Any) -> None:
    for dtype in (np.int64, np.uint64):
        info = np.iinfo(dtype)
        host = np.array([[info.min, info.max, 1], [info.max, info.min, 2]], dtype=dtype)
        for mode in MODES:
            args = ((1, 2), (2, 1), mode, dtype(info.max))
            check(_padding(path), reference.padding, host, "contiguous", args)


def test_needs_64_bit_indexing() -> None:
    import cupy

    padding = launcher("padding")
    try:
        x = cupy.arange(2 * (2**30 + 3), dtype=cupy.uint8).reshape(2, -1)
        y = padding.padding(x, (0, 1), (0, 2), "EDGE", np.uint8(0))
    except cupy.cuda.memory.OutOfMemoryError:
        pytest.skip("not enough device memory for a > 2**31-element tensor")
    assert y.shape == (2, 2**30 + 6)
    assert bool((y[:, 1:-2] == x).all())
    assert bool((y[:, 0] == x[:, 0]).all()) and bool((y[:, -1] == x[:, -1]).all())
    assert bool((y[:, -2] == x[:, -1]).all())
