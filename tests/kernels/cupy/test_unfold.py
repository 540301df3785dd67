"""CuPy UNFOLD against the NumPy reference: bit-exact, every kernel path (a path that does not
apply falls back)."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest

from dmlserve.kernels import reference
from dmlserve.kernels.geometry import Window

from ._support import (
    ALL_DTYPES,
    LAYOUTS,
    WINDOW_CASES,
    check,
    launcher,
    random_array,
    window_of,
)

pytestmark = pytest.mark.gpu


PATHS = [None, "slabs", "patches", "chunks"]


def _unfold(path: Any) -> Any:
    return functools.partial(launcher("unfold").unfold_on, path)


@pytest.mark.parametrize("path", PATHS, ids=str)
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_dtypes(path: Any, dtype: Any) -> None:
    rng = np.random.default_rng(11)
    for case in WINDOW_CASES:
        host = random_array((2, 3, *case[0]), dtype, rng)
        check(_unfold(path), reference.unfold, host, "contiguous", (window_of(case),))


@pytest.mark.parametrize("path", PATHS, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS[1:])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.uint8, np.float64], ids=str)
def test_strided_inputs(path: Any, layout: str, dtype: Any) -> None:
    rng = np.random.default_rng(12)
    for case in WINDOW_CASES:
        host = random_array((2, 3, *case[0]), dtype, rng)
        check(_unfold(path), reference.unfold, host, layout, (window_of(case),))


def test_unfold_then_fold_counts_overlaps() -> None:
    import cupy

    window = Window((3, 3), (1, 2), (1, 1), (1, 1), (1, 0))
    ones = cupy.ones((2, 4, 7, 9), dtype=cupy.int32)
    cols = launcher("unfold").unfold(ones, window)
    counts = launcher("fold").fold(cols, (7, 9), window)
    host = np.ones((2, 4, 7, 9), np.int32)
    expected = reference.fold(reference.unfold(host, window), (7, 9), window)
    np.testing.assert_array_equal(cupy.asnumpy(counts), expected)
