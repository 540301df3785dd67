"""The CPU PADDING against the reference: bit-exact for every mode, type, rank and layout,
pads beyond the input size included; bounded temporaries; stops between slices."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dmlserve.kernels import cpu, reference
from dmlserve.kernels.cpu import Cancelled, ExecutionBudget, HostMemoryError
from tests.oracles import ALL_TYPES, random_array

from ._support import (
    FIXED_OVERHEAD,
    SETTINGS,
    StopAfter,
    assert_same,
    laid_out,
    layouts,
    seeds,
    temporary_bytes,
)

MODES = ["CONSTANT", "EDGE", "REFLECTION", "SYMMETRIC", "WRAP"]


@st.composite
def padded_shapes(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    rank = draw(st.integers(1, 8))
    largest = 5 if rank <= 3 else 2
    shape = tuple(draw(st.integers(1, largest)) for _ in range(rank))
    # Up to three periods of the input on either side: periodic folding is exercised.
    start = tuple(draw(st.integers(0, 3 * n + 1)) for n in shape)
    end = tuple(draw(st.integers(0, 3 * n + 1)) for n in shape)
    return shape, start, end


@SETTINGS
@given(
    geometry=padded_shapes(),
    mode=st.sampled_from(MODES),
    dtype=st.sampled_from(ALL_TYPES),
    layout=layouts,
    seed=seeds,
)
def test_matches_reference(
    geometry: tuple[Any, Any, Any], mode: str, dtype: Any, layout: str, seed: int
) -> None:
    shape, start, end = geometry
    rng = np.random.default_rng(seed)
    x, values = laid_out(random_array(rng, shape, dtype), layout)
    value = random_array(rng, (), dtype)[()]
    got = cpu.padding(x, start, end, mode, value)
    assert_same(got, reference.padding(values, start, end, mode, value))


@pytest.mark.parametrize("mode", MODES)
def test_long_borders_of_short_axes_match_reference(mode: str) -> None:
    # Many periods per border: the gather path instead of slice copies.
    x = np.arange(6, dtype=np.int64).reshape(2, 3) * 7 - 20
    start, end = (40, 1), (3, 50)
    got = cpu.padding(x, start, end, mode, np.int64(-5))
    assert_same(got, reference.padding(x, start, end, mode, np.int64(-5)))


@pytest.mark.parametrize("budget", [ExecutionBudget(), ExecutionBudget(memory_bytes=256)])
def test_constant_within_one_slice_and_across_slices_match_reference(
    budget: ExecutionBudget,
) -> None:
    # An output within one slice is filled whole, then the input copied in; a larger one is
    # padded border by border. Both give the reference's bytes.
    x = random_array(np.random.default_rng(5), (2, 3, 5, 7), np.float16)
    start, end = (0, 1, 2, 0), (1, 0, 3, 4)
    got = cpu.padding(x, start, end, "CONSTANT", np.float16(-0.0), budget=budget)
    assert_same(got, reference.padding(x, start, end, "CONSTANT", np.float16(-0.0)))


@pytest.mark.parametrize("dtype", [np.int64, np.uint64])
def test_integer_extremes_round_trip(dtype: Any) -> None:
    info = np.iinfo(dtype)
    x = np.array([[info.min, info.max], [info.max, info.min]], dtype=dtype)
    for mode in MODES:
        got = cpu.padding(x, (3, 2), (1, 4), mode, dtype(info.max))
        assert_same(got, reference.padding(x, (3, 2), (1, 4), mode, dtype(info.max)))


@pytest.mark.parametrize("mode", MODES)
def test_borders_wider_than_a_slice_match_reference(mode: str) -> None:
    # A 64-byte budget: every border copy and every CONSTANT fill runs slice by slice.
    x = np.arange(5 * 7 * 9, dtype=np.int32).reshape(5, 7, 9) - 100
    start, end = (4, 6, 2), (3, 5, 8)
    budget = ExecutionBudget(memory_bytes=64)
    got = cpu.padding(x, start, end, mode, np.int32(-3), budget=budget)
    assert_same(got, reference.padding(x, start, end, mode, np.int32(-3)))


def test_temporaries_stay_within_the_budget() -> None:
    # A short axis padded far beyond its size takes the gather path, which copies in slices.
    x = np.arange(3 * 64, dtype=np.float32).reshape(3, 64)
    budget = ExecutionBudget(memory_bytes=64 << 10)
    used = temporary_bytes(
        lambda: cpu.padding(x, (4000, 0), (4000, 0), "WRAP", np.float32(0), budget=budget)
    )
    assert used <= budget.memory_bytes + FIXED_OVERHEAD


def test_stops_between_slices() -> None:
    x = np.zeros((64, 256, 256), dtype=np.float32)  # a 16 MiB copy: several slices
    counter = StopAfter()
    cpu.padding(
        x, (1, 1, 1), (1, 1, 1), "REFLECTION", np.float32(0), budget=ExecutionBudget(check=counter)
    )
    assert counter.calls > 4
    stop = StopAfter(limit=3)
    with pytest.raises(Cancelled):
        cpu.padding(
            x, (1, 1, 1), (1, 1, 1), "REFLECTION", np.float32(0), budget=ExecutionBudget(check=stop)
        )
    assert stop.calls == 3  # nothing ran past the check that raised


def test_host_allocation_failure_is_a_host_memory_error() -> None:
    x = np.zeros((1, 1), dtype=np.int8)
    with pytest.raises(HostMemoryError):
        cpu.padding(x, (1 << 31, 1 << 31), (0, 0), "CONSTANT", np.int8(0))
