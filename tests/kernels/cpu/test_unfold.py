"""The CPU UNFOLD against the reference: bit-exact for every type, 1..6 spatial dims and input
layout; no temporaries; stops between slices."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dmlserve.kernels import cpu, reference
from dmlserve.kernels.cpu import Cancelled, ExecutionBudget
from dmlserve.kernels.geometry import Window
from tests.oracles import ALL_TYPES, Geometry, random_array

from ..reference._support import geometries
from ._support import SETTINGS, StopAfter, assert_same, laid_out, layouts, seeds, temporary_bytes

any_axes = st.one_of(
    geometries(1, 3, max_pad=4),
    geometries(4, 6, max_window=2, max_stride=2, max_dilation=2, max_pad=1, max_extra=1),
)


@SETTINGS
@given(g=any_axes, dtype=st.sampled_from(ALL_TYPES), layout=layouts, seed=seeds)
def test_matches_reference(g: Geometry, dtype: Any, layout: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x, values = laid_out(random_array(rng, (2, 3, *g.sizes), dtype), layout)
    assert_same(cpu.unfold(x, *g.args), reference.unfold(values, *g.args))


def test_padding_wider_than_the_window_gives_zero_columns() -> None:
    x = np.arange(1, 10, dtype=np.int16).reshape(1, 1, 3, 3)
    args = (Window((2, 2), (1, 1), (1, 1), (4, 0), (0, 5)),)
    assert_same(cpu.unfold(x, *args), reference.unfold(x, *args))


def test_needs_no_temporaries() -> None:
    x = np.ones((2, 16, 64, 64), dtype=np.float32)
    args = (Window((3, 3), (1, 1), (1, 1), (1, 1), (1, 1)),)
    assert temporary_bytes(lambda: cpu.unfold(x, *args)) <= 64 << 10


def test_stops_between_slices() -> None:
    x = np.zeros((4, 64, 32, 32), dtype=np.float32)  # 9 MiB of columns, 36 KiB a plane
    args = (Window((3, 3), (1, 1), (1, 1), (1, 1), (1, 1)),)
    counter = StopAfter()
    cpu.unfold(x, *args, budget=ExecutionBudget(memory_bytes=1 << 20, check=counter))
    assert counter.calls >= 9
    stop = StopAfter(limit=2)
    with pytest.raises(Cancelled):
        cpu.unfold(x, *args, budget=ExecutionBudget(memory_bytes=1 << 20, check=stop))
    assert stop.calls == 2
