"""AVERAGE_POOLING's reference (SEMANTICS.md §5): its definition, divisors and accumulation."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dmlserve.kernels import reference
from dmlserve.kernels.geometry import Window
from tests.oracles import Geometry, naive_average_pooling

from ._support import SETTINGS, few_axes, seeds


@SETTINGS
@given(
    g=few_axes,
    dtype=st.sampled_from([np.dtype(np.float16), np.dtype(np.float32)]),
    include_padding=st.booleans(),
    seed=seeds,
)
def test_average_pooling_matches_definition(
    g: Geometry, dtype: Any, include_padding: bool, seed: int
) -> None:
    x = np.random.default_rng(seed).standard_normal((2, 2, *g.sizes)).astype(dtype)
    expected = naive_average_pooling(x, g, include_padding)
    result = reference.average_pooling(x, *g.args, include_padding)
    assert result.dtype == dtype and result.flags.c_contiguous
    # Both round the (nearly) exact mean once; only the last bit may differ.
    rtol = 1e-3 if dtype == np.float16 else 1e-6
    np.testing.assert_allclose(result.astype(np.float64), expected, rtol=rtol, atol=rtol)


def test_average_pooling_divisor_counts_taps_not_the_dilated_extent() -> None:
    x = np.arange(1, 6, dtype=np.float32).reshape(1, 1, 5)
    out = reference.average_pooling(x, Window((2,), (1,), (3,), (0,), (0,)), True)
    # Window {x[o], x[o+3]}: 2 taps, divisor 2 (not the extent 4).
    assert out.tolist() == [[[2.5, 3.5]]]


def test_average_pooling_padding_divisors() -> None:
    x = np.full((1, 1, 3, 3), 6, dtype=np.float16)
    window = Window((2, 2), (2, 2), (1, 1), (1, 1), (1, 1))
    counted = reference.average_pooling(x, window, True)
    uncounted = reference.average_pooling(x, window, False)
    # Corner windows hold 1 real tap of 4, edges 2, the middle 4.
    assert counted.tolist() == [[[[1.5, 3.0], [3.0, 6.0]]]]
    assert uncounted.tolist() == [[[[6.0, 6.0], [6.0, 6.0]]]]


def test_average_pooling_window_wholly_in_padding() -> None:
    x = np.ones((1, 1, 2), dtype=np.float32)
    window = Window((2,), (1,), (1,), (3,), (0,))
    counted = reference.average_pooling(x, window, True)
    uncounted = reference.average_pooling(x, window, False)
    assert counted.tolist() == [[[0.0, 0.0, 0.5, 1.0]]]
    # Validation rejects this configuration; the reference documents it as 0/0 = NaN.
    assert np.isnan(uncounted[0, 0, :2]).all() and uncounted[0, 0, 2:].tolist() == [1.0, 1.0]


@pytest.mark.parametrize("dtype", [np.dtype(np.float16), np.dtype(np.float32)], ids=str)
def test_average_pooling_keeps_the_input_type(dtype: Any) -> None:
    x = np.ones((1, 1, 2, 2, 2), dtype=dtype)
    window = Window((2, 2, 2), (1, 1, 1), (1, 1, 1), (0,) * 3, (0,) * 3)
    out = reference.average_pooling(x, window, True)
    assert out.dtype == dtype and out.shape == (1, 1, 1, 1, 1) and out.item() == 1.0


@pytest.mark.parametrize(
    ("dtype", "big"),
    [(np.float32, 2.0**25), (np.float16, 2048.0)],
    ids=["float32-in-float64", "float16-in-float32"],
)
def test_average_pooling_accumulates_wider_than_its_type(dtype: Any, big: float) -> None:
    # [big, 1, -big, 1]: the exact mean is 0.5. Summed in the tensor's own type, `big + 1`
    # rounds back to `big`, so sequential order gives 0.25 and pairwise order gives 0.
    x = np.array([[[big, 1.0, -big, 1.0]]], dtype=dtype)
    out = reference.average_pooling(x, Window((4,), (1,), (1,), (0,), (0,)), True)
    assert out.dtype == dtype
    assert out.tolist() == [[[0.5]]]


@SETTINGS
@given(
    dims=st.integers(1, 3),
    dilation=st.integers(1, 3),
    include_padding=st.booleans(),
    dtype=st.sampled_from([np.float16, np.float32]),
    seed=seeds,
)
def test_pooling_with_a_window_of_one_is_the_identity(
    dims: int, dilation: int, include_padding: bool, dtype: Any, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, 3, *rng.integers(1, 5, size=dims))).astype(dtype)
    ones, zeros = (1,) * dims, (0,) * dims
    window = Window(ones, ones, (dilation,) * dims, zeros, zeros)
    out = reference.average_pooling(x, window, include_padding)
    np.testing.assert_array_equal(out, x, strict=True)
