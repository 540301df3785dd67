"""FOLD's reference (SEMANTICS.md §3): its definition, the project's overflow and accumulation
rules, and its identities with UNFOLD (adjoint; UNFOLD-then-FOLD scales by the overlap count)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from dmlserve.kernels import reference
from dmlserve.kernels.geometry import Window
from tests.oracles import Geometry, naive_fold, random_array

from ._support import SETTINGS, any_axes, dtypes, exactly, seeds


@SETTINGS
@given(g=any_axes, dtype=dtypes, n=st.integers(1, 2), c=st.integers(1, 2), seed=seeds)
def test_fold_matches_definition(g: Geometry, dtype: Any, n: int, c: int, seed: int) -> None:
    # Integer data spans the full range, so overlapping sums wrap in the tensor's own type.
    shape = (n, c * math.prod(g.window), math.prod(g.blocks))
    x = random_array(np.random.default_rng(seed), shape, dtype)
    exactly(reference.fold(x, g.sizes, *g.args), naive_fold(x, g))


def test_integer_fold_wraps_in_its_own_type() -> None:
    # Window 3 over one pixel with padding 2 each side: three taps land on the pixel.
    x = np.full((1, 3, 3), 100, dtype=np.int8)
    out = reference.fold(x, (1,), Window((3,), (1,), (1,), (2,), (2,)))
    assert out.dtype == np.int8
    assert out.tolist() == [[[np.int8(300 - 256)]]]


def test_float16_fold_accumulates_in_float32() -> None:
    # 60000 + 60000 overflows FLOAT16 (max 65504) but not the FLOAT32 accumulator.
    x = np.zeros((1, 3, 3), dtype=np.float16)
    x[0, 0, 2], x[0, 1, 1], x[0, 2, 0] = 60000, 60000, -60000  # all on the one pixel
    out = reference.fold(x, (1,), Window((3,), (1,), (1,), (2,), (2,)))
    assert out.dtype == np.float16
    assert out.tolist() == [[[60000.0]]]


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


@SETTINGS
@given(g=any_axes)
def test_unfold_then_fold_of_ones_counts_the_windows_covering_each_pixel(g: Geometry) -> None:
    # Brute force: every (block, window offset) pair that lands on a pixel counts once.
    counts = np.zeros(g.sizes, dtype=np.int64)
    for block in np.ndindex(*g.blocks):
        for offset in np.ndindex(*g.window):
            pos = tuple(
                b * s + k * d - a
                for b, k, s, d, a in zip(
                    block, offset, g.strides, g.dilations, g.start, strict=True
                )
            )
            if all(0 <= p < n for p, n in zip(pos, g.sizes, strict=True)):
                counts[pos] += 1
    ones = np.ones((1, 1, *g.sizes), dtype=np.int64)
    folded = reference.fold(reference.unfold(ones, *g.args), g.sizes, *g.args)
    exactly(folded, counts.reshape(1, 1, *g.sizes))
