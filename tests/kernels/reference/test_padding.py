"""PADDING's reference (SEMANTICS.md §4): the seed page's repeated folding, numpy.pad, periods
and crops, and bit-exact copies."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dmlserve.kernels import PaddingMode, reference
from tests.oracles import Array, naive_padding, random_array

from ._support import SETTINGS, dtypes, exactly, seeds

MODES = [m.value for m in PaddingMode]
NUMPY_MODE = {
    "CONSTANT": "constant",
    "EDGE": "edge",
    "REFLECTION": "reflect",
    "SYMMETRIC": "symmetric",
    "WRAP": "wrap",
}


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
    exactly(
        reference.padding(x, start, end, mode, value), naive_padding(x, start, end, mode, value)
    )


def test_reflection_of_a_size_one_axis_repeats_the_element() -> None:
    x = np.array([[7], [8]], dtype=np.int16)
    out = reference.padding(x, (0, 3), (0, 5), "REFLECTION", np.int16(0))
    exactly(out, np.repeat(x, 9, axis=1))


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


def test_padding_value_is_used_only_in_constant_mode() -> None:
    x = np.arange(4, dtype=np.int16)
    for mode in ("EDGE", "REFLECTION", "SYMMETRIC", "WRAP"):
        out = reference.padding(x, (2,), (2,), mode, np.int16(9))
        assert 9 not in out


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
