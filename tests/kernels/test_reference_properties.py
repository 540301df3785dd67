"""Algebraic properties of the reference backend (hypothesis), cross-checks against numpy.pad,
INT32 wrap-around of CONVOLUTION_INTEGER, and strided / broadcast inputs."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dmlserve.kernels import reference

from ._reference_support import ALL_TYPES, Array, Geometry, geometries, random_array, wrap

SETTINGS = settings(max_examples=40, deadline=None)
MODES = ["CONSTANT", "EDGE", "REFLECTION", "SYMMETRIC", "WRAP"]
NUMPY_MODE = {
    "CONSTANT": "constant",
    "EDGE": "edge",
    "REFLECTION": "reflect",
    "SYMMETRIC": "symmetric",
    "WRAP": "wrap",
}
seeds = st.integers(0, 2**32 - 1)
dtypes = st.sampled_from(ALL_TYPES)
any_axes = st.one_of(
    geometries(1, 3),
    geometries(4, 6, max_window=2, max_stride=2, max_dilation=2, max_pad=1, max_extra=1),
)


# ---- FOLD and UNFOLD ----


@SETTINGS
@given(g=any_axes, dtype=dtypes, seed=seeds)
def test_fold_of_unfold_scales_by_the_overlap_count(g: Geometry, dtype: Any, seed: int) -> None:
    # Each pixel comes back once per window tap that covers it (integers: modulo 2**bits).
    x = random_array(np.random.default_rng(seed), (2, 3, *g.sizes), dtype)
    overlap = reference.fold(reference.unfold(np.ones_like(x), *g.args), g.sizes, *g.args)
    roundtrip = reference.fold(reference.unfold(x, *g.args), g.sizes, *g.args)
    np.testing.assert_array_equal(roundtrip, x * overlap, strict=True)


@SETTINGS
@given(g=any_axes, seed=seeds)
def test_fold_is_the_adjoint_of_unfold(g: Geometry, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.integers(-1000, 1000, size=(2, 2, *g.sizes), dtype=np.int64)
    y = rng.integers(-1000, 1000, size=(2, 2 * math.prod(g.window), math.prod(g.blocks)))
    lhs = int(np.sum(reference.unfold(x, *g.args) * y))
    rhs = int(np.sum(x * reference.fold(y, g.sizes, *g.args)))
    assert lhs == rhs


@SETTINGS
@given(g=any_axes, dtype=dtypes, seed=seeds)
def test_integer_fold_equals_wide_fold_wrapped(g: Geometry, dtype: Any, seed: int) -> None:
    if np.dtype(dtype).kind not in "iu":
        dtype = np.int16
    shape = (1, 2 * math.prod(g.window), math.prod(g.blocks))
    x = random_array(np.random.default_rng(seed), shape, dtype)
    wide = reference.fold(x.astype(np.int64), g.sizes, *g.args)
    np.testing.assert_array_equal(
        reference.fold(x, g.sizes, *g.args), wide.astype(dtype), strict=True
    )


# ---- CONVOLUTION_INTEGER ----


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
    cols = reference.unfold(padded, g.window, g.strides, g.dilations, no_pad, no_pad)
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


# ---- PADDING ----


@st.composite
def padded_tensors(draw: st.DrawFn, max_rank: int = 4) -> tuple[Array, tuple[int, ...], ...]:
    """A tensor of rank 1..max_rank and pads from 0 up to three periods of each axis."""
    rank = draw(st.integers(1, max_rank))
    shape = tuple(draw(st.integers(1, 4 if rank <= 3 else 2)) for _ in range(rank))
    start = tuple(draw(st.integers(0, 3 * n + 1)) for n in shape)
    end = tuple(draw(st.integers(0, 3 * n + 1)) for n in shape)
    dtype = draw(dtypes)
    x = random_array(np.random.default_rng(draw(seeds)), shape, dtype)
    return x, start, end


@SETTINGS
@given(case=padded_tensors(), mode=st.sampled_from(MODES))
def test_padding_equals_numpy_pad(case: tuple[Any, ...], mode: str) -> None:
    x, start, end = case
    value = x.reshape(-1)[0]
    expected = np.pad(
        x,
        list(zip(start, end, strict=True)),
        mode=NUMPY_MODE[mode],
        **({"constant_values": value} if mode == "CONSTANT" else {}),
    )
    result = reference.padding(x, start, end, mode, value)
    assert result.flags.c_contiguous
    np.testing.assert_array_equal(result, expected, strict=True)


@SETTINGS
@given(case=padded_tensors(max_rank=8), mode=st.sampled_from(MODES))
def test_cropping_the_padded_tensor_returns_the_input(case: tuple[Any, ...], mode: str) -> None:
    x, start, end = case
    out = reference.padding(x, start, end, mode, x.dtype.type(0))
    assert out.shape == tuple(a + n + e for n, a, e in zip(x.shape, start, end, strict=True))
    crop = tuple(slice(a, a + n) for n, a in zip(x.shape, start, strict=True))
    np.testing.assert_array_equal(out[crop], x, strict=True)


@SETTINGS
@given(
    n=st.integers(1, 6),
    start=st.integers(0, 20),
    end=st.integers(0, 20),
    mode=st.sampled_from(["REFLECTION", "SYMMETRIC", "WRAP"]),
    seed=seeds,
)
def test_periodic_modes_repeat_with_their_period(
    n: int, start: int, end: int, mode: str, seed: int
) -> None:
    x = random_array(np.random.default_rng(seed), (n,), np.int32)
    out = reference.padding(x, (start,), (end,), mode, np.int32(0))
    period = {"REFLECTION": max(2 * (n - 1), 1), "SYMMETRIC": 2 * n, "WRAP": n}[mode]
    np.testing.assert_array_equal(out[period:], out[:-period])
    # Within one period the output is the input (and, except for WRAP, its mirror image).
    assert sorted(set(out.tolist())) == sorted(set(x.tolist()))
    if mode != "WRAP":
        mirrored = out[::-1]
        shifted = reference.padding(x[::-1].copy(), (end,), (start,), mode, np.int32(0))
        np.testing.assert_array_equal(mirrored, shifted)


# ---- AVERAGE_POOLING ----


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
    out = reference.average_pooling(
        x, ones, ones, (dilation,) * dims, zeros, zeros, include_padding
    )
    np.testing.assert_array_equal(out, x, strict=True)


# ---- strided and broadcast inputs ----


def _views(base: Array) -> list[Array]:
    """Non-contiguous views holding the same logical shape as ``base``."""
    shape = base.shape
    doubled = np.repeat(np.repeat(base, 2, axis=0), 2, axis=-1)
    return [
        np.broadcast_to(base[:1, :1], shape),  # 0 strides on N and C
        np.broadcast_to(base[..., :1], shape),  # 0 stride on the last axis
        doubled[::2, ..., 1::2],  # every other row/column of a bigger buffer
        np.moveaxis(np.ascontiguousarray(np.moveaxis(base, 1, -1)), -1, 1),  # channels-last
    ]


OPERATORS: dict[str, tuple[Callable[[Array], Array], Any, tuple[int, ...]]] = {
    "padding": (
        lambda x: reference.padding(x, (1, 0, 2, 5), (0, 2, 6, 1), "SYMMETRIC", x.dtype.type(0)),
        np.int64,
        (2, 3, 4, 3),
    ),
    "padding_constant": (
        lambda x: reference.padding(x, (1, 0, 2), (0, 2, 1), "CONSTANT", x.dtype.type(7)),
        np.uint8,
        (2, 3, 4),
    ),
    "unfold": (
        lambda x: reference.unfold(x, (2, 3), (1, 2), (2, 1), (1, 0), (0, 2)),
        np.float16,
        (2, 3, 5, 4),
    ),
    "fold": (
        # (N, C*prod(K), BlockCount) with K = (2, 2) over a 4x3 image: blocks 3x2.
        lambda x: reference.fold(x, (4, 3), (2, 2), (1, 1), (1, 1), (0, 0), (0, 0)),
        np.int32,
        (2, 8, 6),
    ),
    "average_pooling": (
        lambda x: reference.average_pooling(x, (2, 2), (1, 2), (1, 1), (1, 0), (0, 1), False),
        np.float32,
        (2, 3, 5, 4),
    ),
    "convolution_integer": (
        lambda x: reference.convolution_integer(
            x,
            np.arange(-12, 12, dtype=np.int8).reshape(4, 1, 2, 3),
            3,
            np.array([1, -2, 0, 5], dtype=np.int32),
            (1, 1),
            (1, 2),
            (1, 1),
            (0, 2),
            2,
        ),
        np.uint8,
        (2, 2, 5, 4),
    ),
}


@pytest.mark.parametrize("name", list(OPERATORS))
def test_strided_and_broadcast_inputs_match_contiguous_copies(name: str) -> None:
    op, dtype, shape = OPERATORS[name]
    base = random_array(np.random.default_rng(7), shape, dtype)
    reference_result = op(np.ascontiguousarray(base))
    for view in _views(base):
        assert not view.flags.c_contiguous
        before = view.copy()
        result = op(view)
        assert result.flags.c_contiguous and result.dtype == reference_result.dtype
        np.testing.assert_array_equal(result, op(view.copy()), strict=True)
        np.testing.assert_array_equal(view, before)  # inputs are never written
    np.testing.assert_array_equal(op(base), reference_result, strict=True)


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
