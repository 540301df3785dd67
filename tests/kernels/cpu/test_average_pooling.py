"""The CPU AVERAGE_POOLING against the reference: FLOAT16/FLOAT32, 1..3 spatial dims, both
IncludePadding rules, every input layout; within rounding, and the same bits every run.
Large windows keep their temporaries within the budget; the work stops between slices."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dmlserve.kernels import cpu, reference
from dmlserve.kernels.cpu import Cancelled, ExecutionBudget
from dmlserve.kernels.geometry import Window
from tests.oracles import Geometry

from ..reference._support import geometries
from ._support import (
    FIXED_OVERHEAD,
    SETTINGS,
    StopAfter,
    assert_close,
    laid_out,
    layouts,
    seeds,
    temporary_bytes,
)

FLOATS = [np.dtype(np.float16), np.dtype(np.float32)]


def counted_everywhere(g: Geometry) -> bool:
    """Every window has a tap inside the input (validation rejects the other case)."""
    return all(
        any(0 <= b * s + k * d - a < n for k in range(w))
        for n, w, s, d, a, blocks in zip(
            g.sizes, g.window, g.strides, g.dilations, g.start, g.blocks, strict=True
        )
        for b in range(blocks)
    )


@SETTINGS
@given(
    g=geometries(1, 3, max_window=4, max_pad=3),
    dtype=st.sampled_from(FLOATS),
    include_padding=st.booleans(),
    layout=layouts,
    seed=seeds,
)
def test_matches_reference(
    g: Geometry, dtype: Any, include_padding: bool, layout: str, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    x, values = laid_out(rng.standard_normal((2, 3, *g.sizes)).astype(dtype), layout)
    got = cpu.average_pooling(x, *g.args, include_padding)
    expected = reference.average_pooling(values, *g.args, include_padding)
    if include_padding or counted_everywhere(g):
        assert_close(got, expected)
    # Run after run, the same bits, whatever the slicing.
    small = cpu.average_pooling(x, *g.args, include_padding, budget=ExecutionBudget(memory_bytes=1))
    np.testing.assert_array_equal(small.view(np.uint8), got.view(np.uint8))


@pytest.mark.parametrize("include_padding", [True, False])
def test_large_window_stays_within_the_budget(include_padding: bool) -> None:
    # Unfolding this window would take 16384 taps x 148,225 outputs x 8 bytes = 18 GiB.
    rng = np.random.default_rng(7)
    x = rng.standard_normal((1, 1, 512, 512)).astype(np.float32)
    args = (Window((128, 128), (1, 1), (1, 1), (0, 0), (0, 0)),)
    budget = ExecutionBudget(memory_bytes=1 << 20)
    used = temporary_bytes(lambda: cpu.average_pooling(x, *args, include_padding, budget=budget))
    assert used <= budget.memory_bytes + FIXED_OVERHEAD
    out = cpu.average_pooling(x, *args, include_padding, budget=budget)
    # Spot checks against the plain mean of the window.
    for i, j in [(0, 0), (100, 384), (384, 7), (384, 384)]:
        window = x[0, 0, i : i + 128, j : j + 128].astype(np.float64)
        assert out[0, 0, i, j] == pytest.approx(window.mean(), rel=1e-6, abs=1e-9)


def test_matches_reference_on_a_window_as_large_as_the_image() -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 4, 24, 20)).astype(np.float32)
    args = (Window((24, 20), (1, 1), (1, 1), (3, 2), (0, 1)),)
    for include_padding in (True, False):
        got = cpu.average_pooling(
            x, *args, include_padding, budget=ExecutionBudget(memory_bytes=512)
        )
        assert_close(got, reference.average_pooling(x, *args, include_padding))


def test_stops_between_slices() -> None:
    x = np.ones((2, 16, 64, 64), dtype=np.float32)
    args = (Window((3, 3), (1, 1), (1, 1), (1, 1), (1, 1)),)
    budget_bytes = 64 << 10
    counter = StopAfter()
    cpu.average_pooling(
        x, *args, True, budget=ExecutionBudget(memory_bytes=budget_bytes, check=counter)
    )
    assert counter.calls >= math.ceil(2 * 16 * 64 * 64 * 8 / budget_bytes)
    stop = StopAfter(limit=3)
    with pytest.raises(Cancelled):
        cpu.average_pooling(
            x, *args, True, budget=ExecutionBudget(memory_bytes=budget_bytes, check=stop)
        )
    assert stop.calls == 3
