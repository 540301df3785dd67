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
    SQUARE_CASES,
    WINDOW_CASES,
    assert_matches,
    check,
    device_view,
    launcher,
    misaligned_copy,
    random_array,
    square_window,
    window_of,
)

pytestmark = pytest.mark.gpu


PATHS = [None, "squares", "slabs", "patches", "window2d", "window2d_elements", "chunks"]


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


@pytest.mark.parametrize("over", [False, True], ids=["fits", "over"])
def test_slab_at_its_shared_memory_budget(over: bool) -> None:
    """A slab that just fits its shared-memory budget takes the slab kernel, one window
    column more falls back; both bit-exact through the "slabs" path."""
    from dmlserve.kernels.cupy_backend._patches import TILE_BYTES, slab_plan

    kh, kw, dtype = 2, 4, np.dtype(np.float64)
    # One block row: a slab is W + BW = BW * (KW + 1) elements.
    blocks_w = TILE_BYTES // ((kw + 1) * dtype.itemsize) + int(over)
    host = random_array((1, 2, kh, blocks_w * kw), dtype, np.random.default_rng(13))
    window = Window((kh, kw), (kh, kw), (1, 1), (0, 0), (0, 0))
    strides = [s // dtype.itemsize for s in host.strides]
    length = blocks_w
    col_strides = (2 * kh * kw * length, length, 1)
    plan = slab_plan(
        host.shape,
        strides,
        col_strides,
        window,
        dtype.itemsize,
        True,
        "unfold.cu",
        "unfold_slabs",
        8,
    )
    assert (plan is None) == over
    check(_unfold("slabs"), reference.unfold, host, "contiguous", (window,))


@pytest.mark.parametrize("band_rows", [1, 2, 3, 5])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.uint8, np.float64], ids=str)
def test_window2d_bands(band_rows: int, dtype: Any) -> None:
    """unfold_window2d with bands of a given height (the launcher picks one output row per
    band for images this small): bands that end inside the image, a partial last band, column
    rows that are and are not whole 16-byte chunks, input rows staged by chunks (contiguous)
    and element by element (strided, or a buffer that starts mid-chunk)."""
    from dmlserve.kernels.cupy_backend._common import opaque
    from dmlserve.kernels.cupy_backend.unfold import window2d_plan

    rng = np.random.default_rng(14)
    cases = [case for case in WINDOW_CASES if len(case[0]) == 2 and max(case[1]) <= 8]
    cases.append(((16, 16), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1)))  # rows of 16 blocks
    cases.append(((16, 16), (4, 4), (2, 2), (1, 1), (1, 1), (1, 1)))  # stride 2, rows of 8
    cases.append(((12, 16), (3, 3), (2, 2), (2, 2), (1, 2), (2, 1)))  # dilated, stride 2
    for case in cases:
        for layout in ("contiguous", "offset", "sliced", "misaligned"):
            host = random_array((2, 3, *case[0]), dtype, rng)
            window = window_of(case)

            def run(x: Any, window: Window) -> Any:
                strides = [s // x.dtype.itemsize for s in x.strides]
                plan = window2d_plan(x.shape, strides, x.dtype.itemsize, window, band_rows)
                assert plan is not None
                return opaque(plan).run(x)

            if layout == "misaligned":
                assert_matches(run(misaligned_copy(host), window), reference.unfold(host, window))
            else:
                check(run, reference.unfold, host, layout, (window,))


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64, np.int16], ids=str)
@pytest.mark.parametrize("layout", ["contiguous", "misaligned", "broadcast"])
def test_squares(dtype: Any, layout: str) -> None:
    """unfold_squares takes every case whose rows are whole chunks (its plan exists) and is
    bit-exact: squares across block rows, a buffer that starts mid-chunk (elements moved
    one by one), a broadcast batch (stride 0)."""
    from dmlserve.kernels.cupy_backend._patches import squares_plan

    rng = np.random.default_rng(15)
    v = 16 // np.dtype(dtype).itemsize
    taken = 0
    for case in SQUARE_CASES:
        host = random_array((2, 3, *case[0]), dtype, rng)
        window = window_of(square_window(case))
        if layout == "misaligned":
            dev, values = misaligned_copy(host), host
        else:
            dev, values = device_view(host, layout)
        strides = [s // host.itemsize for s in dev.strides]
        length = int(np.prod(window.blocks(case[0])))
        plan = squares_plan(
            host.shape, strides, (3 * window.taps * length, length, 1), window, host.itemsize,
            True, "unfold.cu", "unfold_squares", host.itemsize,
        )  # fmt: skip
        whole = case[1][1] % v == 0 and length % v == 0
        assert (plan is not None) == whole
        taken += whole
        assert_matches(_unfold("squares")(dev, window), reference.unfold(values, window))
    assert taken >= 1
