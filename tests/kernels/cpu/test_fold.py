"""The CPU FOLD against the reference: bit-exact for every type (float sums in the reference's
order), 1..6 spatial dims and input layout; bounded temporaries; stops between slices."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dmlserve.kernels import cpu, reference
from dmlserve.kernels.cpu import Cancelled, ExecutionBudget
from tests.oracles import ALL_TYPES, Geometry, random_array

from ..reference._support import geometries
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

any_axes = st.one_of(
    geometries(1, 3, max_pad=4),
    geometries(4, 6, max_window=2, max_stride=2, max_dilation=2, max_pad=1, max_extra=1),
)


def columns(rng: np.random.Generator, g: Geometry, dtype: Any, n: int = 2, c: int = 3) -> Any:
    shape = (n, c * math.prod(g.window), math.prod(g.blocks))
    x = random_array(rng, shape, dtype)
    if x.dtype.kind == "f":  # values that round differently in another summation order
        x = (rng.standard_normal(shape) * 1000).astype(dtype)
    return x


@SETTINGS
@given(g=any_axes, dtype=st.sampled_from(ALL_TYPES), layout=layouts, seed=seeds)
def test_matches_reference(g: Geometry, dtype: Any, layout: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x, values = laid_out(columns(rng, g, dtype), layout)
    got = cpu.fold(x, g.sizes, *g.args)
    assert_same(got, reference.fold(values, g.sizes, *g.args))


@st.composite
def row_geometries(draw: st.DrawFn) -> Geometry:
    """Geometries whose last two axes step by 1 and keep the row length (the rows path)."""
    g = draw(geometries(2, 4, max_window=4, max_pad=2))
    window, dilations, start, end, strides = (
        list(g.window),
        list(g.dilations),
        list(g.start),
        list(g.end),
        list(g.strides),
    )
    for d in (-2, -1):
        strides[d] = 1
        extent = dilations[d] * (window[d] - 1)
        start[d] = draw(st.integers(0, extent))
        end[d] = extent - start[d]
    sizes = list(g.sizes)
    sizes[-1] = max(sizes[-1], 1)
    return Geometry(tuple(sizes), tuple(window), tuple(strides), tuple(dilations),
                    tuple(start), tuple(end))  # fmt: skip


@SETTINGS
@given(g=row_geometries(), dtype=st.sampled_from(ALL_TYPES), layout=layouts, seed=seeds)
def test_rows_path_matches_reference(g: Geometry, dtype: Any, layout: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x, values = laid_out(columns(rng, g, dtype), layout)
    assert_same(cpu.fold(x, g.sizes, *g.args), reference.fold(values, g.sizes, *g.args))


@pytest.mark.parametrize("size", [5, 56])
@pytest.mark.parametrize("pad", [0, 1, 2])
def test_same_padding_images_match_reference(size: int, pad: int) -> None:
    # Windows that keep the image width (the common case) on a rows-of-planes fast path.
    g = Geometry((size, size), (2 * pad + 1, 3), (1, 1), (1, 1), (pad, 1), (pad, 1))
    for dtype in (np.float32, np.float16, np.int8, np.uint64):
        x = columns(np.random.default_rng(size + pad), g, dtype)
        assert_same(cpu.fold(x, g.sizes, *g.args), reference.fold(x, g.sizes, *g.args))


def test_float16_sums_stay_within_the_budget() -> None:
    g = Geometry((64, 64), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1))
    x = columns(np.random.default_rng(0), g, np.float16, n=1, c=64)  # 1 MiB of sums
    budget = ExecutionBudget(memory_bytes=64 << 10)
    used = temporary_bytes(lambda: cpu.fold(x, g.sizes, *g.args, budget=budget))
    assert used <= budget.memory_bytes + FIXED_OVERHEAD


def test_stops_between_slices() -> None:
    g = Geometry((32, 32), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1))
    x = np.zeros((4, 64 * 9, 32 * 32), dtype=np.float32)
    counter = StopAfter()
    cpu.fold(x, g.sizes, *g.args, budget=ExecutionBudget(memory_bytes=64 << 10, check=counter))
    assert counter.calls > 4
    stop = StopAfter(limit=2)
    with pytest.raises(Cancelled):
        cpu.fold(x, g.sizes, *g.args, budget=ExecutionBudget(memory_bytes=64 << 10, check=stop))
    assert stop.calls == 2
