"""The reference backend against SEMANTICS.md, element by element, and the project's decisions.

Hypothesis draws tiny tensors; `_reference_support` evaluates the formulas one element at a time.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dmlserve.kernels import reference

from ._reference_support import (
    ALL_TYPES,
    Geometry,
    geometries,
    naive_average_pooling,
    naive_convolution_integer,
    naive_fold,
    naive_padding,
    naive_unfold,
    random_array,
)

SETTINGS = settings(max_examples=40, deadline=None)
MODES = ["CONSTANT", "EDGE", "REFLECTION", "SYMMETRIC", "WRAP"]
seeds = st.integers(0, 2**32 - 1)
dtypes = st.sampled_from(ALL_TYPES)

# 1-3 spatial axes with room to move, and 4-6 axes kept tiny.
few_axes = geometries(1, 3)
many_axes = geometries(4, 6, max_window=2, max_stride=2, max_dilation=2, max_pad=1, max_extra=1)
any_axes = st.one_of(few_axes, many_axes)


def _exactly(result: Any, expected: Any) -> None:
    assert result.flags.c_contiguous
    np.testing.assert_array_equal(result, expected, strict=True)


@SETTINGS
@given(g=any_axes, dtype=dtypes, n=st.integers(1, 2), c=st.integers(1, 2), seed=seeds)
def test_unfold_matches_definition(g: Geometry, dtype: Any, n: int, c: int, seed: int) -> None:
    x = random_array(np.random.default_rng(seed), (n, c, *g.sizes), dtype)
    _exactly(reference.unfold(x, *g.args), naive_unfold(x, g))


@SETTINGS
@given(g=any_axes, dtype=dtypes, n=st.integers(1, 2), c=st.integers(1, 2), seed=seeds)
def test_fold_matches_definition(g: Geometry, dtype: Any, n: int, c: int, seed: int) -> None:
    # Integer data spans the full range, so overlapping sums wrap in the tensor's own type.
    shape = (n, c * math.prod(g.window), math.prod(g.blocks))
    x = random_array(np.random.default_rng(seed), shape, dtype)
    _exactly(reference.fold(x, g.sizes, *g.args), naive_fold(x, g))


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


@SETTINGS
@given(
    g=geometries(1, 2, max_window=3, max_pad=2, max_extra=2),
    x_type=st.sampled_from([np.int8, np.uint8]),
    w_type=st.sampled_from([np.int8, np.uint8]),
    groups=st.integers(1, 3),
    group_in=st.integers(1, 2),
    group_out=st.integers(1, 2),
    per_channel=st.booleans(),
    seed=seeds,
)
def test_convolution_integer_matches_definition(
    g: Geometry,
    x_type: Any,
    w_type: Any,
    groups: int,
    group_in: int,
    group_out: int,
    per_channel: bool,
    seed: int,
) -> None:
    rng = np.random.default_rng(seed)
    c, m = groups * group_in, groups * group_out
    x = random_array(rng, (2, c, *g.sizes), x_type)
    w = random_array(rng, (m, group_in, *g.window), w_type)
    x_zp = int(random_array(rng, (), x_type))
    w_zp = random_array(rng, (m,) if per_channel else (1,), w_type).astype(np.int32)
    w_zp = np.broadcast_to(w_zp, (m,)).copy()
    expected = naive_convolution_integer(x, w, x_zp, w_zp, g, groups)
    result = reference.convolution_integer(
        x, w, x_zp, w_zp, g.strides, g.dilations, g.start, g.end, groups
    )
    _exactly(result, expected)


@st.composite
def padded_shapes(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """Rank 1-8; pads up to 2.5 times the axis (several periods), small total size."""
    rank = draw(st.integers(1, 8))
    small = rank > 3
    shape = tuple(draw(st.integers(1, 2 if small else 4)) for _ in range(rank))
    start = tuple(draw(st.integers(0, 1 if small else 2 * n + 1)) for n in shape)
    end = tuple(draw(st.integers(0, 1 if small else 2 * n + 1)) for n in shape)
    return shape, start, end


@SETTINGS
@given(shapes=padded_shapes(), mode=st.sampled_from(MODES), dtype=dtypes, seed=seeds)
def test_padding_matches_repeated_folding(
    shapes: tuple[tuple[int, ...], ...], mode: str, dtype: Any, seed: int
) -> None:
    shape, start, end = shapes
    rng = np.random.default_rng(seed)
    x = random_array(rng, shape, dtype)
    value = random_array(rng, (), dtype)[()]
    _exactly(
        reference.padding(x, start, end, mode, value), naive_padding(x, start, end, mode, value)
    )


# ---- the project's decisions (SEMANTICS.md, "Decisions where DirectML is undetermined") ----


def test_reflection_of_a_size_one_axis_repeats_the_element() -> None:
    x = np.array([[7], [8]], dtype=np.int16)
    out = reference.padding(x, (0, 3), (0, 5), "REFLECTION", np.int16(0))
    _exactly(out, np.repeat(x, 9, axis=1))


@pytest.mark.parametrize("mode", MODES)
def test_padding_copies_integer_extremes_bit_exactly(mode: str) -> None:
    for dtype in (np.int64, np.uint64):
        info = np.iinfo(dtype)
        x = np.array([info.min, info.max, info.max - 1, info.min + 1], dtype=dtype)
        out = reference.padding(x, (5,), (6,), mode, dtype(info.max))
        expected = naive_padding(x, (5,), (6,), mode, dtype(info.max))
        assert out.dtype == dtype
        assert out.tobytes() == expected.tobytes()
        assert out[5:9].tobytes() == x.tobytes()


@pytest.mark.parametrize("mode", MODES)
def test_padding_copies_float_bit_patterns(mode: str) -> None:
    # -0.0, a signalling-style NaN payload and a subnormal must survive the copy unchanged.
    bits = np.array([0x8000, 0x7D01, 0x0001, 0x3C00], dtype=np.uint16)
    x = bits.view(np.float16)
    out = reference.padding(x, (4,), (4,), mode, np.float16(-0.0))
    expected = naive_padding(x, (4,), (4,), mode, np.float16(-0.0))
    assert out.view(np.uint16).tolist() == expected.view(np.uint16).tolist()
    assert out[4:8].view(np.uint16).tolist() == bits.tolist()


def test_padding_value_is_used_exactly() -> None:
    x = np.zeros((2,), dtype=np.float64)
    out = reference.padding(x, (1,), (1,), "CONSTANT", np.float64(0.1))
    assert out.tolist() == [0.1, 0.0, 0.0, 0.1]


def test_integer_fold_wraps_in_its_own_type() -> None:
    # Window 3 over one pixel with padding 2 each side: three taps land on the pixel.
    x = np.full((1, 3, 3), 100, dtype=np.int8)
    out = reference.fold(x, (1,), (3,), (1,), (1,), (2,), (2,))
    assert out.dtype == np.int8
    assert out.tolist() == [[[np.int8(300 - 256)]]]


def test_float16_fold_accumulates_in_float32() -> None:
    # 60000 + 60000 overflows FLOAT16 (max 65504) but not the FLOAT32 accumulator.
    x = np.zeros((1, 3, 3), dtype=np.float16)
    x[0, 0, 2], x[0, 1, 1], x[0, 2, 0] = 60000, 60000, -60000  # all on the one pixel
    out = reference.fold(x, (1,), (3,), (1,), (1,), (2,), (2,))
    assert out.dtype == np.float16
    assert out.tolist() == [[[60000.0]]]


def test_average_pooling_divisor_counts_taps_not_the_dilated_extent() -> None:
    x = np.arange(1, 6, dtype=np.float32).reshape(1, 1, 5)
    out = reference.average_pooling(x, (2,), (1,), (3,), (0,), (0,), True)
    # Window {x[o], x[o+3]}: 2 taps, divisor 2 (not the extent 4).
    assert out.tolist() == [[[2.5, 3.5]]]


def test_average_pooling_padding_divisors() -> None:
    x = np.full((1, 1, 3, 3), 6, dtype=np.float16)
    counted = reference.average_pooling(x, (2, 2), (2, 2), (1, 1), (1, 1), (1, 1), True)
    uncounted = reference.average_pooling(x, (2, 2), (2, 2), (1, 1), (1, 1), (1, 1), False)
    # Corner windows hold 1 real tap of 4, edges 2, the middle 4.
    assert counted.tolist() == [[[[1.5, 3.0], [3.0, 6.0]]]]
    assert uncounted.tolist() == [[[[6.0, 6.0], [6.0, 6.0]]]]


def test_average_pooling_window_wholly_in_padding() -> None:
    x = np.ones((1, 1, 2), dtype=np.float32)
    counted = reference.average_pooling(x, (2,), (1,), (1,), (3,), (0,), True)
    uncounted = reference.average_pooling(x, (2,), (1,), (1,), (3,), (0,), False)
    assert counted.tolist() == [[[0.0, 0.0, 0.5, 1.0]]]
    # Validation rejects this configuration; the reference documents it as 0/0 = NaN.
    assert np.isnan(uncounted[0, 0, :2]).all() and uncounted[0, 0, 2:].tolist() == [1.0, 1.0]


@pytest.mark.parametrize("dtype", [np.dtype(np.float16), np.dtype(np.float32)], ids=str)
def test_average_pooling_keeps_the_input_type(dtype: Any) -> None:
    x = np.ones((1, 1, 2, 2, 2), dtype=dtype)
    out = reference.average_pooling(x, (2, 2, 2), (1, 1, 1), (1, 1, 1), (0,) * 3, (0,) * 3, True)
    assert out.dtype == dtype and out.shape == (1, 1, 1, 1, 1) and out.item() == 1.0


def test_convolution_padding_reads_the_input_zero_point() -> None:
    # An input equal to its zero point everywhere gives 0 everywhere, padded taps included.
    x = np.full((1, 2, 3, 3), 200, dtype=np.uint8)
    w = np.arange(2 * 2 * 3 * 3, dtype=np.int8).reshape(2, 2, 3, 3)
    out = reference.convolution_integer(
        x, w, 200, np.array([5, -3], np.int32), (1, 1), (1, 1), (2, 1), (1, 2), 1
    )
    assert out.dtype == np.int32 and out.shape == (1, 2, 4, 4)
    assert not out.any()


def test_convolution_is_a_cross_correlation() -> None:
    # The filter is not flipped: a filter [1, 0] picks the left element of each pair.
    x = np.array([[[1, 2, 3]]], dtype=np.uint8)
    w = np.array([[[1, 0]]], dtype=np.int8)
    out = reference.convolution_integer(x, w, 0, np.zeros(1, np.int32), (1,), (1,), (0,), (0,), 1)
    assert out.tolist() == [[[1, 2]]]


@pytest.mark.parametrize(
    ("dtype", "big"),
    [(np.float32, 2.0**25), (np.float16, 2048.0)],
    ids=["float32-in-float64", "float16-in-float32"],
)
def test_average_pooling_accumulates_wider_than_its_type(dtype: Any, big: float) -> None:
    # [big, 1, -big, 1]: the exact mean is 0.5. Summed in the tensor's own type, `big + 1`
    # rounds back to `big`, so sequential order gives 0.25 and pairwise order gives 0.
    x = np.array([[[big, 1.0, -big, 1.0]]], dtype=dtype)
    out = reference.average_pooling(x, (4,), (1,), (1,), (0,), (0,), True)
    assert out.dtype == dtype
    assert out.tolist() == [[[0.5]]]
