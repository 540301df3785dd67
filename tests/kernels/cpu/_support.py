"""Shared pieces of the CPU-backend tests: input layouts, comparisons, a counting stop check,
and a measure of the temporaries a call holds.

The oracle is always the reference backend (`dmlserve.kernels.reference`), run on the same
values; the code under test shares no slicing or summation strategy with it.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
from hypothesis import settings
from hypothesis import strategies as st

from dmlserve.kernels.cpu import Cancelled

Array = npt.NDArray[Any]

SETTINGS = settings(max_examples=40, deadline=None)
# NumPy's own casting buffers (8192 elements per operand) and small index arrays: a constant
# whatever the input size, allowed on top of a budget.
FIXED_OVERHEAD = 256 << 10
LAYOUTS = ["contiguous", "sliced", "permuted", "broadcast"]
layouts = st.sampled_from(LAYOUTS)
seeds = st.integers(0, 2**32 - 1)


def laid_out(x: Array, layout: str) -> tuple[Array, Array]:
    """A view of ``layout`` and a contiguous array holding the same values."""
    if layout == "contiguous":
        return x, x
    if layout == "sliced":
        # Every other element of a wider buffer along the last axis, offset by one.
        return np.repeat(x, 2, axis=-1)[..., 1::2], x
    if layout == "permuted":
        perm = list(range(x.ndim))[::-1]
        return np.ascontiguousarray(x.transpose(perm)).transpose(np.argsort(perm)), x
    # broadcast: the first axis longer than 1 repeats one slice (stride 0)
    axis = next((d for d, n in enumerate(x.shape) if n > 1), 0)
    view = np.broadcast_to(np.take(x, [0], axis=axis), x.shape)
    return view, view.copy()


def assert_same(got: Array, expected: Array) -> None:
    """Same type, shape and bits, C-contiguous."""
    assert got.flags.c_contiguous
    assert got.dtype == expected.dtype
    assert got.shape == expected.shape
    np.testing.assert_array_equal(got.view(np.uint8), expected.view(np.uint8))


def assert_close(got: Array, expected: Array) -> None:
    """Same type and shape; values within the rounding of the accumulation type."""
    assert got.flags.c_contiguous
    assert got.dtype == expected.dtype
    assert got.shape == expected.shape
    rtol = 2e-3 if got.dtype == np.float16 else 1e-6
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=1e-12)


class StopAfter:
    """A stop check that raises `Cancelled` on its ``limit``-th call, and counts calls."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = limit
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1
        if self.limit is not None and self.calls >= self.limit:
            raise Cancelled(f"stopped at check {self.calls}")


def temporary_bytes(fn: Callable[[], Array]) -> int:
    """Peak bytes allocated during ``fn()`` beyond the array it returns."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        out = fn()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return peak - before - out.nbytes
