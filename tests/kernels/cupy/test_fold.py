"""CuPy FOLD against the NumPy reference: integers bit-exact (wrapping in their type), float
sums within rounding."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from dmlserve.kernels import reference

from ._support import (
    ALL_DTYPES,
    LAYOUTS,
    WINDOW_CASES,
    check,
    cols_shape,
    float_rtol,
    launcher,
    random_array,
    window_of,
)

pytestmark = pytest.mark.gpu


def _fold(x: Any, *args: Any) -> Any:
    return launcher("fold").fold(x, *args)


def _args(case: tuple[Any, ...]) -> tuple[Any, ...]:
    """FOLD's arguments after the columns: the image's sizes, the window."""
    return case[0], window_of(case)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_dtypes(dtype: Any) -> None:
    rng = np.random.default_rng(21)
    for case in WINDOW_CASES:
        host = random_array(cols_shape(2, 3, case), dtype, rng)
        check(_fold, reference.fold, host, "contiguous", _args(case), float_rtol(dtype))


@pytest.mark.parametrize("layout", LAYOUTS[1:])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int8, np.uint64], ids=str)
def test_strided_inputs(layout: str, dtype: Any) -> None:
    rng = np.random.default_rng(22)
    for case in WINDOW_CASES:
        host = random_array(cols_shape(2, 3, case), dtype, rng)
        check(_fold, reference.fold, host, layout, _args(case), float_rtol(dtype))


def test_integer_sums_wrap_in_their_type() -> None:
    # 3x3 stride 1: interior positions sum 9 taps of values near the type's maximum.
    case = ((6, 6), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1))
    for dtype in (np.int8, np.uint8, np.int16, np.int32, np.uint32, np.int64):
        host = np.full(cols_shape(1, 2, case), np.iinfo(dtype).max - 3, dtype=dtype)
        check(_fold, reference.fold, host, "contiguous", _args(case))
