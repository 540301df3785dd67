"""UNFOLD's reference (SEMANTICS.md §3) against its element-by-element definition."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from dmlserve.kernels import reference
from tests.oracles import Geometry, naive_unfold, random_array

from ._support import SETTINGS, any_axes, dtypes, exactly, seeds


@SETTINGS
@given(g=any_axes, dtype=dtypes, n=st.integers(1, 2), c=st.integers(1, 2), seed=seeds)
def test_unfold_matches_definition(g: Geometry, dtype: Any, n: int, c: int, seed: int) -> None:
    x = random_array(np.random.default_rng(seed), (n, c, *g.sizes), dtype)
    exactly(reference.unfold(x, *g.args), naive_unfold(x, g))
