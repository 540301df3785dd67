"""CONVOLUTION_INTEGER's reference (SEMANTICS.md §6): its definition term by term, UNFOLD then a
matrix product, INT32 wrap-around, zero-point padding and broadcast filters."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from dmlserve.kernels import reference
from dmlserve.kernels.geometry import Window
from tests.oracles import Array, Geometry, naive_convolution_integer, random_array, wrap

from ._support import SETTINGS, exactly, geometries, seeds


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
    exactly(result, expected)


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


def _wrap_int32(values: Array) -> Array:
    """int64 -> int32 modulo 2**32, spelled with Python integers (not NumPy's cast)."""
    return np.vectorize(lambda v: wrap(int(v), np.int32), otypes=[np.int32])(values)


def _convolution_by_unfold(
    x: Array, w: Array, x_zp: int, w_zp: Array, g: Geometry, groups: int
) -> Array:
    """Pad the raw input with its zero point, UNFOLD it, multiply per group, and remove the zero
    points afterwards: sum (x-a)(w-b) = sum xw - b*sum x - a*sum w + taps*a*b."""
    n, c = x.shape[:2]
    m = w.shape[0]
    cg, mg = c // groups, m // groups
    spatial = len(g.sizes)
    padded = reference.padding(x, (0, 0, *g.start), (0, 0, *g.end), "CONSTANT", x.dtype.type(x_zp))
    no_pad = (0,) * spatial
    cols = reference.unfold(padded, Window(g.window, g.strides, g.dilations, no_pad, no_pad))
    cols = cols.astype(np.int64)  # (N, C*taps, B), the raw stored values
    taps = cg * math.prod(g.window)
    out = np.zeros((n, m, cols.shape[2]), dtype=np.int64)
    for group in range(groups):
        xs = cols[:, group * taps : (group + 1) * taps, :]
        for j in range(group * mg, (group + 1) * mg):
            ws = w[j].reshape(-1).astype(np.int64)
            b = int(w_zp[j])
            out[:, j, :] = (
                np.einsum("k,nkb->nb", ws, xs)
                - b * xs.sum(axis=1)
                - x_zp * int(ws.sum())
                + taps * x_zp * b
            )
    return _wrap_int32(out.reshape(n, m, *g.blocks))


@SETTINGS
@given(
    g=geometries(1, 2, max_window=4, max_pad=3),
    x_type=st.sampled_from([np.int8, np.uint8]),
    w_type=st.sampled_from([np.int8, np.uint8]),
    groups=st.integers(1, 4),
    group_in=st.integers(1, 3),
    group_out=st.integers(1, 3),
    seed=seeds,
)
def test_convolution_integer_is_unfold_then_matrix_product(
    g: Geometry,
    x_type: Any,
    w_type: Any,
    groups: int,
    group_in: int,
    group_out: int,
    seed: int,
) -> None:
    rng = np.random.default_rng(seed)
    c, m = groups * group_in, groups * group_out
    x = random_array(rng, (2, c, *g.sizes), x_type)
    w = random_array(rng, (m, group_in, *g.window), w_type)
    x_zp = int(random_array(rng, (), x_type))
    w_zp = random_array(rng, (m,), w_type).astype(np.int32)
    result = reference.convolution_integer(
        x, w, x_zp, w_zp, g.strides, g.dilations, g.start, g.end, groups
    )
    assert result.dtype == np.int32 and result.flags.c_contiguous
    expected = _convolution_by_unfold(x, w, x_zp, w_zp, g, groups)
    np.testing.assert_array_equal(result, expected, strict=True)


def test_convolution_integer_wraps_on_int32_overflow() -> None:
    # 256 channels x 12x12 taps of (255 - 0) * (+-255) = +-2.4e9 per output: beyond INT32.
    x = np.full((1, 256, 13, 12), 255, dtype=np.uint8)
    w = np.zeros((3, 256, 12, 12), dtype=np.uint8)
    w[1] = 255
    w[2, :128] = 255  # channel 2 stays in range: 128*144*255*255 - 128*144*... < 2**31
    w_zp = np.array([255, 0, 128], dtype=np.int32)
    out = reference.convolution_integer(x, w, 0, w_zp, (1, 1), (1, 1), (0, 0), (0, 0), 1)
    centered_w = w.astype(np.int64) - w_zp.reshape(3, 1, 1, 1).astype(np.int64)
    exact = np.einsum("chw,mchw->m", x[0, :, :12, :].astype(np.int64), centered_w)
    assert abs(int(exact[0])) > 2**31 and abs(int(exact[1])) > 2**31  # really overflows
    assert abs(int(exact[2])) < 2**31
    expected = [(int(v) + 2**31) % 2**32 - 2**31 for v in exact]  # int64 mod 2**32, signed
    assert out.shape == (1, 3, 2, 1)
    assert out[0, :, 0, 0].tolist() == expected
    assert out[0, :, 1, 0].tolist() == expected


def test_convolution_accepts_a_broadcast_filter() -> None:
    x = random_array(np.random.default_rng(1), (1, 2, 4, 4), np.int8)
    one_filter = random_array(np.random.default_rng(2), (1, 2, 3, 3), np.int8)
    shared = np.broadcast_to(one_filter, (3, 2, 3, 3))
    w_zp = np.zeros(3, np.int32)
    args = (w_zp, (1, 1), (1, 1), (1, 1), (1, 1), 1)
    result = reference.convolution_integer(x, shared, -4, *args)
    np.testing.assert_array_equal(
        result, reference.convolution_integer(x, shared.copy(), -4, *args), strict=True
    )
    np.testing.assert_array_equal(result[:, 0], result[:, 2])
