"""CuPy FOLD against the NumPy reference: integers bit-exact (wrapping in their type), float
sums within rounding; every kernel path (a path that does not apply falls back)."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest

from dmlserve.kernels import reference

from ._support import (
    ALL_DTYPES,
    LAYOUTS,
    SQUARE_CASES,
    WINDOW_CASES,
    assert_matches,
    check,
    cols_shape,
    device_view,
    float_rtol,
    launcher,
    misaligned_copy,
    random_array,
    square_window,
    window_of,
)

pytestmark = pytest.mark.gpu


PATHS = [None, "squares", "slabs", "patches", "window2d", "window2d_chunks", "chunks"]


def _fold(path: Any) -> Any:
    return functools.partial(launcher("fold").fold_on, path)


def cupy_array(host: np.ndarray) -> Any:
    import cupy

    return cupy.asarray(host)


def _args(case: tuple[Any, ...]) -> tuple[Any, ...]:
    """FOLD's arguments after the columns: the image's sizes, the window."""
    return case[0], window_of(case)


@pytest.mark.parametrize("path", PATHS, ids=str)
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_dtypes(path: Any, dtype: Any) -> None:
    rng = np.random.default_rng(21)
    for case in WINDOW_CASES:
        host = random_array(cols_shape(2, 3, case), dtype, rng)
        check(_fold(path), reference.fold, host, "contiguous", _args(case), float_rtol(dtype))


@pytest.mark.parametrize("path", PATHS, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS[1:])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int8, np.uint64], ids=str)
def test_strided_inputs(path: Any, layout: str, dtype: Any) -> None:
    rng = np.random.default_rng(22)
    for case in WINDOW_CASES:
        host = random_array(cols_shape(2, 3, case), dtype, rng)
        check(_fold(path), reference.fold, host, layout, _args(case), float_rtol(dtype))


@pytest.mark.parametrize("path", PATHS, ids=str)
def test_integer_sums_wrap_in_their_type(path: Any) -> None:
    # 3x3 stride 1: interior positions sum 9 taps of values near the type's maximum.
    case = ((6, 6), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1))
    for dtype in (np.int8, np.uint8, np.int16, np.int32, np.uint32, np.int64):
        host = np.full(cols_shape(1, 2, case), np.iinfo(dtype).max - 3, dtype=dtype)
        check(_fold(path), reference.fold, host, "contiguous", _args(case))


@pytest.mark.parametrize("path", PATHS, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64], ids=str)
def test_single_taps_are_sums_from_zero(path: Any, dtype: Any) -> None:
    # Non-overlapping windows put one tap on each element; as a sum from 0 a -0.0 tap is +0.0.
    case = ((8, 12), (2, 4), (2, 4), (1, 1), (0, 0), (0, 0))
    host = np.full(cols_shape(1, 2, case), -0.0, dtype=dtype)
    got = launcher("fold").fold_on(path, cupy_array(host), *_args(case))
    expected = reference.fold(host, *_args(case))
    assert not np.signbit(expected).any()
    assert_matches(got, expected)


# 2-D windows the unrolled kernel takes (fold_window2d): the benchmark's geometries, taps whose
# first window offset needs the modular inverse (stride 3, dilation 2: inverse 2 mod 3), a
# stride beyond the window, gcd(stride, dilation) > 1, rows that start mid-chunk.
WINDOW2D_CASES = [
    ((12, 16), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1)),
    ((14, 18), (4, 4), (2, 2), (1, 1), (1, 1), (1, 1)),
    ((15, 17), (5, 3), (3, 3), (2, 2), (2, 1), (1, 2)),
    ((11, 13), (2, 3), (4, 5), (1, 1), (1, 0), (0, 2)),
    ((13, 10), (3, 4), (2, 2), (2, 4), (0, 3), (2, 1)),
    ((7, 9), (1, 3), (1, 2), (1, 1), (0, 1), (0, 1)),
]


@pytest.mark.parametrize("path", ["window2d", "window2d_chunks", "chunks"], ids=str)
@pytest.mark.parametrize(
    "dtype", [np.float32, np.float16, np.float64, np.int8, np.int32, np.uint64], ids=str
)
def test_unrolled_2d_windows(path: str, dtype: Any) -> None:
    rng = np.random.default_rng(23)
    for case in WINDOW2D_CASES:
        host = random_array(cols_shape(2, 3, case), dtype, rng)
        check(_fold(path), reference.fold, host, "contiguous", _args(case), float_rtol(dtype))


@pytest.mark.parametrize("over", [False, True], ids=["fits", "over"])
def test_slab_at_its_shared_memory_budget(over: bool) -> None:
    """A slab that just fits its shared-memory budget takes fold_slabs, one window column
    more falls back; both exact through the "slabs" path."""
    from dmlserve.kernels.cupy_backend._patches import TILE_BYTES, slab_plan

    kh, kw, dtype = 2, 4, np.dtype(np.float64)
    # One block row: a slab is W + BW = BW * (KW + 1) elements.
    blocks_w = TILE_BYTES // ((kw + 1) * dtype.itemsize) + int(over)
    case = ((kh, blocks_w * kw), (kh, kw), (kh, kw), (1, 1), (0, 0), (0, 0))
    host = random_array(cols_shape(1, 2, case), dtype, np.random.default_rng(17))
    image_strides = (2 * kh * blocks_w * kw, kh * blocks_w * kw, blocks_w * kw, 1)
    col_strides = [s // dtype.itemsize for s in host.strides]
    plan = slab_plan(
        (1, 2, *case[0]), image_strides, col_strides, window_of(case), dtype.itemsize, False,
        "fold.cu", "fold_slabs", dtype,
    )  # fmt: skip
    assert (plan is None) == over
    check(_fold("slabs"), reference.fold, host, "contiguous", _args(case), float_rtol(dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64, np.int16], ids=str)
@pytest.mark.parametrize("layout", ["contiguous", "misaligned", "broadcast"])
def test_squares(dtype: Any, layout: str) -> None:
    """fold_squares takes every case whose rows are whole chunks (its plan exists) and is
    exact: squares across block rows, columns that start mid-chunk (elements moved one by
    one), a broadcast batch (stride 0)."""
    from dmlserve.kernels.cupy_backend._patches import squares_plan

    rng = np.random.default_rng(18)
    v = 16 // np.dtype(dtype).itemsize
    taken = 0
    for case in SQUARE_CASES:
        full = square_window(case)
        host = random_array(cols_shape(2, 3, full), dtype, rng)
        if layout == "misaligned":
            dev, values = misaligned_copy(host), host
        else:
            dev, values = device_view(host, layout)
        window = window_of(full)
        (h, w), length = case[0], host.shape[2]
        plan = squares_plan(
            (2, 3, h, w), (3 * h * w, h * w, w, 1), [s // host.itemsize for s in dev.strides],
            window, host.itemsize, False, "fold.cu", "fold_squares", host.dtype,
        )  # fmt: skip
        whole = case[1][1] % v == 0 and length % v == 0
        assert (plan is not None) == whole
        taken += whole
        got = _fold("squares")(dev, *_args(full))
        assert_matches(got, reference.fold(values, *_args(full)), float_rtol(dtype))
    assert taken >= 1
