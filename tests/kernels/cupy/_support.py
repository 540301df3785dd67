"""Shared pieces of the CuPy kernel tests: random inputs, device views, the comparison.

The oracle is the NumPy reference (`dmlserve.kernels.reference`). Data movement and integer
sums must match bit for bit; float sums within `float_rtol`: FLOAT32 1e-5 (float32 sums in
another order than the float64 oracle), FLOAT16 2e-3 (float32 sums, one rounding to half,
which may land one half-ulp, about 1e-3, away). Inputs are random, non-zero and NaN-free,
drawn fresh per case, so an unwritten output element (CuPy hands out recycled memory) or a
wrong index shows as a mismatch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from dmlserve.kernels.dtypes import DataType
from dmlserve.kernels.geometry import Window

ALL_DTYPES = [dt.numpy for dt in DataType]
# contiguous; unit inner stride but rows starting one element into a wider buffer (unaligned
# rows); every other element of a wider buffer; reversed axis order in memory; a 0-stride
# (broadcast) axis
LAYOUTS = ["contiguous", "offset", "sliced", "permuted", "broadcast"]


def random_array(shape: tuple[int, ...], dtype: Any, rng: np.random.Generator) -> np.ndarray:
    """Non-zero, NaN-free values: floats in [0.5, 2), integers over the whole type range."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return rng.uniform(0.5, 2.0, size=shape).astype(dtype)
    info = np.iinfo(dtype)
    values = rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
    values[values == 0] = 1
    return values


def device_view(host: np.ndarray, layout: str) -> tuple[Any, np.ndarray]:
    """A CuPy view of `layout` holding the values of the returned NumPy array."""
    import cupy

    if layout == "contiguous":
        return cupy.asarray(host), host
    if layout == "offset":
        wide = np.pad(host, [(0, 0)] * (host.ndim - 1) + [(1, 2)])
        return cupy.asarray(wide)[..., 1:-2], host
    if layout == "sliced":
        # Every other element of a wider buffer along the last axis, offset by one.
        wide = np.repeat(host, 2, axis=-1)
        dev = cupy.asarray(wide)[..., 1::2]
        return dev, host
    if layout == "permuted":
        perm = list(range(host.ndim))[::-1]
        inverse = list(np.argsort(perm))
        dev = cupy.ascontiguousarray(cupy.asarray(host).transpose(perm)).transpose(inverse)
        return dev, host
    # broadcast: the first axis of length > 1 repeats one slice (stride 0)
    axis = next((d for d, n in enumerate(host.shape) if n > 1), 0)
    one = np.take(host, [0], axis=axis)
    dev = cupy.broadcast_to(cupy.asarray(one), host.shape)
    return dev, np.broadcast_to(one, host.shape).copy()


def float_rtol(dtype: Any) -> float:
    """The tolerance of a float sum in `dtype` (0: bit-exact, for integers)."""
    dtype = np.dtype(dtype)
    if dtype.kind != "f":
        return 0.0
    return {np.dtype(np.float16): 2e-3, np.dtype(np.float32): 1e-5}.get(dtype, 1e-12)


def assert_matches(got: Any, expected: np.ndarray, rtol: float = 0.0) -> None:
    import cupy

    assert isinstance(got, cupy.ndarray)
    assert got.flags.c_contiguous
    assert got.dtype == expected.dtype
    assert got.shape == expected.shape
    host = cupy.asnumpy(got)
    if rtol == 0.0:
        np.testing.assert_array_equal(host.view(np.uint8), expected.view(np.uint8))
    else:
        np.testing.assert_allclose(host, expected, rtol=rtol, atol=rtol)


def check(
    op: Callable[..., Any],
    ref: Callable[..., Any],
    host: np.ndarray,
    layout: str,
    args: tuple[Any, ...],
    rtol: float = 0.0,
) -> None:
    """``op`` on a `layout` view of ``host`` equals the reference on the same values."""
    dev, values = device_view(host, layout)
    assert_matches(op(dev, *args), ref(values, *args), rtol)


def launcher(name: str) -> Any:
    """The launcher module `dmlserve.kernels.cupy_backend.<name>` (the package attribute of that
    name is the operator function)."""
    import importlib

    return importlib.import_module(f"dmlserve.kernels.cupy_backend.{name}")


# UNFOLD / FOLD geometries: (spatial sizes, window, strides, dilations, start, end)
WINDOW_CASES = [
    ((5, 5), (3, 3), (1, 1), (1, 1), (0, 0), (0, 0)),
    ((9, 11), (3, 2), (2, 3), (1, 1), (1, 0), (2, 1)),  # asymmetric padding
    ((10, 7), (2, 2), (4, 3), (1, 1), (0, 0), (0, 0)),  # strides larger than the window
    ((12, 13), (3, 3), (2, 1), (2, 3), (1, 2), (0, 3)),  # dilations with strides
    ((6, 6), (2, 2), (1, 1), (1, 1), (4, 3), (3, 4)),  # padding larger than the window
    ((32, 32), (16, 16), (16, 16), (1, 1), (0, 0), (0, 0)),  # ViT patches
    ((17,), (4,), (3,), (2,), (2,), (1,)),  # 1 spatial dim
    ((5, 6, 7), (2, 3, 2), (1, 2, 3), (2, 1, 1), (1, 0, 1), (0, 2, 1)),  # 3-D
    (
        (3, 4, 3, 4, 3, 4),
        (2, 1, 2, 1, 2, 1),
        (1, 2, 1, 1, 2, 1),
        (1, 1, 1, 2, 1, 1),
        (0, 1, 0, 0, 1, 0),
        (1, 0, 0, 1, 0, 0),
    ),  # 6-D
    ((8, 9), (4, 6), (6, 4), (3, 2), (2, 5), (1, 4)),  # gcd(stride, dilation) > 1
    ((70, 3), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1)),  # tall and narrow
    ((9, 150), (3, 3), (2, 1), (1, 1), (1, 1), (1, 1)),  # rows longer than a warp's chunks
    # Non-overlapping windows that tile the image (the shared-memory transpose kernels):
    ((27, 14), (3, 2), (3, 2), (1, 1), (0, 0), (0, 0)),  # a partial last tile, odd segments
    ((4, 12), (1, 4), (1, 4), (1, 1), (0, 0), (0, 0)),  # one window row
    ((10, 5), (2, 1), (2, 1), (1, 1), (0, 0), (0, 0)),  # one window column
    ((48, 40), (8, 5), (8, 5), (1, 1), (0, 0), (0, 0)),  # several tiles, wide windows
]


# Non-overlapping windows whose rows are whole 16-byte chunks for FLOAT32, FLOAT64 and (the
# second) FLOAT16 (the register transpose): blocks of a square that span block rows (6 blocks
# a row), ViT patches. (spatial sizes, window); strides = window, no padding or dilation.
SQUARE_CASES = [
    ((12, 24), (2, 4)),
    ((8, 48), (2, 8)),
    ((32, 32), (16, 16)),
]


def square_window(case: tuple[Any, ...]) -> tuple[Any, ...]:
    """A `WINDOW_CASES` entry for a `SQUARE_CASES` entry."""
    sizes, window = case
    return (sizes, window, window, (1, 1), (0, 0), (0, 0))


def misaligned_copy(host: np.ndarray) -> Any:
    """A C-contiguous CuPy view of ``host``'s values that starts one element past a 16-byte
    boundary."""
    import cupy

    flat = cupy.asarray(np.concatenate([host.ravel()[:1], host.ravel()]))
    return flat[1:].reshape(host.shape)


def window_of(case: tuple[Any, ...]) -> Window:
    """The window of a `WINDOW_CASES` entry."""
    return Window(*case[1:])


def cols_shape(n: int, c: int, case: tuple[Any, ...]) -> tuple[int, int, int]:
    """The column tensor of UNFOLD for an (n, c) image of `case`."""
    blocks = window_of(case).blocks(case[0])
    return (n, c * int(np.prod(case[1])), int(np.prod(blocks)))
