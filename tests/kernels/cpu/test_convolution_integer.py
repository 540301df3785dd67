"""The CPU CONVOLUTION_INTEGER against the reference: bit-exact for u8/s8 in every pairing,
1..2 spatial dims, zero points per tensor and per channel, groups, every input layout; the
float32 products stay exact at the extremes (and INT32 wraps as the reference does); bounded
temporaries; stops between slices."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dmlserve.kernels import cpu, reference
from dmlserve.kernels.cpu import Cancelled, ExecutionBudget
from dmlserve.kernels.cpu.convolution_integer import EXACT_FLOAT32, exact_chunks
from tests.oracles import Geometry

from ..reference._support import geometries
from ._support import (
    FIXED_OVERHEAD,
    SETTINGS,
    StopAfter,
    assert_same,
    laid_out,
    layouts,
    seeds,
)

EIGHT_BIT = [np.dtype(np.uint8), np.dtype(np.int8)]


def full_range(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any) -> Any:
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)


@SETTINGS
@given(
    g=geometries(1, 2, max_window=3, max_pad=3),
    x_type=st.sampled_from(EIGHT_BIT),
    w_type=st.sampled_from(EIGHT_BIT),
    groups=st.integers(1, 3),
    per_channel=st.booleans(),
    layout=layouts,
    seed=seeds,
)
def test_matches_reference(
    g: Geometry, x_type: Any, w_type: Any, groups: int, per_channel: bool, layout: str, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    c, m = 2 * groups, 2 * groups
    x, x_values = laid_out(full_range(rng, (2, c, *g.sizes), x_type), layout)
    w = full_range(rng, (m, c // groups, *g.window), w_type)
    x_zp = int(full_range(rng, (), x_type))
    w_zp = full_range(rng, (m if per_channel else 1,), w_type).astype(np.int32)
    args = (g.strides, g.dilations, g.start, g.end, groups)
    got = cpu.convolution_integer(x, w, x_zp, w_zp, *args)
    assert_same(got, reference.convolution_integer(x_values, w, x_zp, w_zp, *args))


@pytest.mark.parametrize(("x_zp", "w_zp"), [(0, 127), (255, -128), (128, 0)])
def test_extreme_products_are_exact(x_zp: int, w_zp: int) -> None:
    # Every centred product is +-255*255 (or close): a float32 sum over the 4608 taps of this
    # layer would leave 2**24 far behind without the chunking.
    rng = np.random.default_rng(x_zp)
    x = np.where(rng.random((1, 512, 5, 5)) < 0.5, 0, 255).astype(np.uint8)
    w = np.where(rng.random((8, 512, 3, 3)) < 0.5, -128, 127).astype(np.int8)
    w_zp_all = np.full(8, w_zp, dtype=np.int32)
    args = ((1, 1), (1, 1), (1, 1), (1, 1), 1)
    got = cpu.convolution_integer(x, w, x_zp, w_zp_all, *args)
    assert_same(got, reference.convolution_integer(x, w, x_zp, w_zp_all, *args))


def test_int32_overflow_wraps_like_the_reference() -> None:
    # 36,864 taps of (255 - 0) * (-128 - 127): -2.4e9, past INT32's range.
    x = np.full((1, 4096, 3, 3), 255, dtype=np.uint8)
    w = np.full((2, 4096, 3, 3), -128, dtype=np.int8)
    w_zp = np.array([127, 0], dtype=np.int32)
    args = ((1, 1), (1, 1), (0, 0), (0, 0), 1)
    got = cpu.convolution_integer(x, w, 0, w_zp, *args)
    expected = reference.convolution_integer(x, w, 0, w_zp, *args)
    assert_same(got, expected)
    assert got[0, 0, 0, 0] == -36864 * 255 * 255 + 2**32


@SETTINGS
@given(
    m=st.integers(1, 6),
    k=st.integers(1, 3000),
    x_bound=st.integers(1, 255),
    seed=seeds,
)
def test_chunks_bound_every_partial_sum(m: int, k: int, x_bound: int, seed: int) -> None:
    magnitudes = np.random.default_rng(seed).integers(0, 256, size=(m, k)).astype(np.float32)
    chunks = exact_chunks(magnitudes, x_bound)
    assert chunks[0][0] == 0 and chunks[-1][1] == k
    assert all(a[1] == b[0] for a, b in zip(chunks, chunks[1:], strict=False))
    for lo, hi in chunks:
        assert hi > lo
        worst = x_bound * magnitudes[:, lo:hi].astype(np.int64).sum(axis=1).max()
        assert worst <= EXACT_FLOAT32 or hi - lo == 1


def test_temporaries_stay_within_the_budget() -> None:
    import tracemalloc

    rng = np.random.default_rng(1)
    x = full_range(rng, (1, 64, 96, 96), np.uint8)
    w = full_range(rng, (64, 64, 3, 3), np.int8)
    args = ((1, 1), (1, 1), (1, 1), (1, 1), 1)
    budget = ExecutionBudget(memory_bytes=1 << 20)  # the columns alone would be 21 MiB
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        out = cpu.convolution_integer(x, w, 128, np.zeros(64, np.int32), *args, budget=budget)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # The prepared filters (float32, and their magnitudes) are part of every call.
    filters = 2 * w.size * 4
    assert peak - before - out.nbytes <= budget.memory_bytes + filters + FIXED_OVERHEAD
    expected = reference.convolution_integer(x, w, 128, np.zeros(64, np.int32), *args)
    assert_same(out, expected)


def test_stops_between_slices() -> None:
    x = np.zeros((2, 8, 64, 64), dtype=np.uint8)
    w = np.ones((8, 8, 3, 3), dtype=np.int8)
    args = ((1, 1), (1, 1), (1, 1), (1, 1), 1)
    budget_bytes = 64 << 10
    counter = StopAfter()
    run_budget = ExecutionBudget(memory_bytes=budget_bytes, check=counter)
    cpu.convolution_integer(x, w, 0, np.zeros(8, np.int32), *args, budget=run_budget)
    columns = 2 * 8 * 9 * 64 * 64 * 4
    assert counter.calls >= math.ceil(columns / budget_bytes)
    stop = StopAfter(limit=2)
    with pytest.raises(Cancelled):
        cpu.convolution_integer(
            x,
            w,
            0,
            np.zeros(8, np.int32),
            *args,
            budget=ExecutionBudget(memory_bytes=budget_bytes, check=stop),
        )
    assert stop.calls == 2
