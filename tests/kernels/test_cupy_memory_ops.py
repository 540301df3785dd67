"""The CuPy PADDING, UNFOLD, FOLD and AVERAGE_POOLING kernels against the NumPy reference.

Pure data movement (padding, unfold) and integer sums (fold) must be bit-exact. Float sums
are compared with tolerances: FOLD/AVERAGE_POOLING FLOAT32 rtol 1e-5 (float32 sums in a
different order than the float64 oracle), FLOAT16 rtol 2e-3 (float32 sums, one rounding to
half, which may land one half-ulp, about 1e-3, away). Inputs are random, non-zero and
NaN-free, drawn fresh per case, so an unwritten output element (CuPy hands out recycled
memory) or a wrong index shows as a mismatch. Every case runs on C-contiguous, strided
(sliced and permuted) and broadcast (0-stride) inputs.
"""

from __future__ import annotations

import functools
import math
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from dmlserve.kernels import reference
from dmlserve.kernels.dtypes import DataType
from tests.seed_examples import SEED_EXAMPLES

pytestmark = pytest.mark.gpu

ALL_DTYPES = [dt.numpy for dt in DataType]
LAYOUTS = ["contiguous", "sliced", "permuted", "broadcast"]
MODES = ["CONSTANT", "EDGE", "REFLECTION", "SYMMETRIC", "WRAP"]


def _backend() -> Any:
    from dmlserve.kernels import cupy_backend

    return cupy_backend


def random_array(shape: tuple[int, ...], dtype: Any, rng: np.random.Generator) -> np.ndarray:
    """Non-zero, NaN-free values: floats in [0.5, 2), integers over the whole type range."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return rng.uniform(0.5, 2.0, size=shape).astype(dtype)
    info = np.iinfo(dtype)
    values = rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
    values[values == 0] = 1
    return values


def device_view(host: np.ndarray, layout: str, rng: np.random.Generator) -> tuple[Any, np.ndarray]:
    """A CuPy view of `layout` holding the values of the returned NumPy array."""
    import cupy

    if layout == "contiguous":
        return cupy.asarray(host), host
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


def float_rtol(dtype: Any) -> float:
    return {np.dtype(np.float16): 2e-3, np.dtype(np.float32): 1e-5}.get(np.dtype(dtype), 1e-12)


def run_case(
    op: Callable[..., Any],
    ref: Callable[..., Any],
    host: np.ndarray,
    layout: str,
    args: tuple[Any, ...],
    rtol: float,
    seed: int,
) -> None:
    dev, values = device_view(host, layout, np.random.default_rng(seed))
    assert_matches(op(dev, *args), ref(values, *args), rtol)


# ----------------------------------------------------------------------------- seed pages


@pytest.mark.parametrize("example", SEED_EXAMPLES, ids=lambda e: e.name)
def test_seed_examples(example: Any) -> None:
    import cupy

    op = example.operator
    x = cupy.asarray(example.inputs["InputTensor"])
    backend = _backend()
    geometry = (
        (op["WindowSizes"], op.get("Strides"), op.get("Dilations")) if "WindowSizes" in op else ()
    )
    if op["type"] == "PADDING":
        mode = op["PaddingMode"].removeprefix("DML_PADDING_MODE_")
        got = backend.padding(
            x, op["StartPadding"], op["EndPadding"], mode, np.float32(op.get("PaddingValue", 0))
        )
    elif op["type"] == "UNFOLD":
        got = backend.unfold(x, *geometry, op["StartPadding"], op["EndPadding"])
    else:
        sizes = op["OutputTensor"]["Sizes"][2:]
        got = backend.fold(x, sizes, *geometry, op["StartPadding"], op["EndPadding"])
    assert_matches(got, example.expected)


# ----------------------------------------------------------------------------- PADDING

PAD_CASES = [
    # shape, start, end
    ((2, 3, 5, 7), (0, 1, 2, 3), (1, 0, 3, 2)),
    ((37,), (5,), (11,)),  # rank 1, pads beyond one fold
    ((3, 1, 4), (1, 2, 0), (0, 3, 1)),  # size-1 axis padded
    ((2, 3, 4, 5, 6, 7, 8, 9), (1, 0, 1, 0, 1, 0, 1, 2), (0, 1, 0, 1, 0, 1, 2, 1)),  # rank 8
    ((4, 33), (0, 70), (0, 41)),  # pads of several periods
    ((5, 6, 3), (0, 0, 1), (0, 0, 0)),  # odd widths defeat 16-byte alignment
    ((2, 2, 64, 64), (0, 0, 3, 1), (0, 0, 4, 2)),  # the benchmark's pads, small
    ((6, 130), (2, 0), (3, 0)),  # only an outer dim padded: rows copied whole
]


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("mode", MODES)
def test_padding_dtypes_modes(dtype: Any, mode: str) -> None:
    rng = np.random.default_rng(zlib.crc32(f"{dtype}-{mode}".encode()))
    for shape, start, end in PAD_CASES:
        host = random_array(shape, dtype, rng)
        value = random_array((), dtype, rng)[()]
        run_case(
            _backend().padding,
            reference.padding,
            host,
            "contiguous",
            (start, end, mode, value),
            0.0,
            0,
        )


@pytest.mark.parametrize("layout", LAYOUTS[1:])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int8, np.int64], ids=str)
@pytest.mark.parametrize("mode", MODES)
def test_padding_strided_inputs(layout: str, dtype: Any, mode: str) -> None:
    rng = np.random.default_rng(7)
    for shape, start, end in PAD_CASES[:6]:
        host = random_array(shape, dtype, rng)
        value = random_array((), dtype, rng)[()]
        run_case(
            _backend().padding, reference.padding, host, layout, (start, end, mode, value), 0.0, 1
        )


def test_padding_extreme_integer_values_round_trip() -> None:
    for dtype in (np.int64, np.uint64):
        info = np.iinfo(dtype)
        host = np.array([[info.min, info.max, 1], [info.max, info.min, 2]], dtype=dtype)
        for mode in MODES:
            value = dtype(info.max)
            run_case(
                _backend().padding,
                reference.padding,
                host,
                "contiguous",
                ((1, 2), (2, 1), mode, value),
                0.0,
                0,
            )


def test_padding_needs_64_bit_indexing() -> None:
    import cupy

    try:
        x = cupy.arange(2 * (2**30 + 3), dtype=cupy.uint8).reshape(2, -1)
        y = _backend().padding(x, (0, 1), (0, 2), "EDGE", np.uint8(0))
    except cupy.cuda.memory.OutOfMemoryError:
        pytest.skip("not enough device memory for a > 2**31-element tensor")
    assert y.shape == (2, 2**30 + 6)
    assert bool((y[:, 1:-2] == x).all())
    assert bool((y[:, 0] == x[:, 0]).all()) and bool((y[:, -1] == x[:, -1]).all())
    assert bool((y[:, -2] == x[:, -1]).all())


# ----------------------------------------------------------------------------- UNFOLD / FOLD

# (spatial sizes, window, strides, dilations, start, end)
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
]


def _unfold_args(case: tuple[Any, ...]) -> tuple[Any, ...]:
    return case[1:]


def _fold_args(case: tuple[Any, ...]) -> tuple[Any, ...]:
    return (case[0], *case[1:])


def _cols_shape(n: int, c: int, case: tuple[Any, ...]) -> tuple[int, int, int]:
    sizes, window, strides, dilations, start, end = case
    blocks = [
        (s + a + b - d * (k - 1) - 1) // st + 1
        for s, k, st, d, a, b in zip(sizes, window, strides, dilations, start, end, strict=True)
    ]
    return (n, c * math.prod(window), math.prod(blocks))


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_unfold_dtypes(dtype: Any) -> None:
    rng = np.random.default_rng(11)
    for case in WINDOW_CASES:
        host = random_array((2, 3, *case[0]), dtype, rng)
        run_case(
            _backend().unfold, reference.unfold, host, "contiguous", _unfold_args(case), 0.0, 0
        )


@pytest.mark.parametrize("layout", LAYOUTS[1:])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.uint8, np.float64], ids=str)
def test_unfold_strided_inputs(layout: str, dtype: Any) -> None:
    rng = np.random.default_rng(12)
    for case in WINDOW_CASES:
        host = random_array((2, 3, *case[0]), dtype, rng)
        run_case(_backend().unfold, reference.unfold, host, layout, _unfold_args(case), 0.0, 2)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_fold_dtypes(dtype: Any) -> None:
    rng = np.random.default_rng(21)
    for case in WINDOW_CASES:
        host = random_array(_cols_shape(2, 3, case), dtype, rng)
        run_case(
            _backend().fold,
            reference.fold,
            host,
            "contiguous",
            _fold_args(case),
            float_rtol(dtype) if np.dtype(dtype).kind == "f" else 0.0,
            0,
        )


@pytest.mark.parametrize("layout", LAYOUTS[1:])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int8, np.uint64], ids=str)
def test_fold_strided_inputs(layout: str, dtype: Any) -> None:
    rng = np.random.default_rng(22)
    for case in WINDOW_CASES:
        host = random_array(_cols_shape(2, 3, case), dtype, rng)
        rtol = float_rtol(dtype) if np.dtype(dtype).kind == "f" else 0.0
        run_case(_backend().fold, reference.fold, host, layout, _fold_args(case), rtol, 3)


def test_fold_integer_sums_wrap_in_their_type() -> None:
    # 3x3 stride 1: interior positions sum 9 taps of values near the type's maximum.
    case = ((6, 6), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1))
    for dtype in (np.int8, np.uint8, np.int16, np.int32, np.uint32, np.int64):
        info = np.iinfo(dtype)
        host = np.full(_cols_shape(1, 2, case), info.max - 3, dtype=dtype)
        run_case(_backend().fold, reference.fold, host, "contiguous", _fold_args(case), 0.0, 0)


def test_unfold_then_fold_counts_overlaps() -> None:
    import cupy

    case = ((7, 9), (3, 3), (1, 2), (1, 1), (1, 1), (1, 0))
    x = cupy.ones((2, 4, 7, 9), dtype=cupy.int32)
    counts = _backend().fold(_backend().unfold(x, *_unfold_args(case)), *_fold_args(case))
    expected = reference.fold(
        reference.unfold(np.ones((2, 4, 7, 9), np.int32), *_unfold_args(case)), *_fold_args(case)
    )
    assert_matches(counts, expected)


# ----------------------------------------------------------------------------- AVERAGE_POOLING

# (spatial sizes, window, strides, dilations, start, end). Kernel paths (average_pooling.py):
# windows that re-read little (non-overlapping, k3s2) -> pool_rows, others -> pool_tiled
# (window sizes 1..3 per axis compiled as constants), windows too large for a tile -> pool_direct.
POOL_CASES = [
    ((9, 11), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1)),
    ((10, 13), (3, 3), (2, 2), (1, 1), (1, 1), (1, 1)),
    ((8, 8), (2, 2), (2, 2), (1, 1), (0, 0), (0, 0)),
    ((12, 15), (3, 2), (2, 3), (2, 3), (2, 0), (1, 3)),  # dilations, asymmetric pads
    ((7, 70), (2, 5), (3, 1), (1, 2), (0, 4), (1, 4)),  # long rows: several W tiles
    ((40, 40), (40, 40), (1, 1), (1, 1), (0, 0), (0, 0)),  # global pooling
    ((33,), (4,), (2,), (3,), (2,), (3,)),  # 1 spatial dim
    ((6, 7, 9), (3, 3, 3), (1, 1, 1), (1, 1, 1), (1, 1, 1), (1, 1, 1)),
    ((9, 8, 10), (2, 3, 2), (2, 1, 3), (2, 1, 2), (1, 0, 2), (0, 2, 1)),
    ((5, 20, 130), (1, 3, 3), (1, 2, 2), (1, 1, 1), (0, 1, 1), (0, 1, 1)),
    ((12, 19), (2, 2), (1, 1), (1, 1), (0, 1), (1, 0)),  # tiled, window 2 constants
    ((10, 21), (1, 3), (1, 1), (1, 1), (0, 1), (0, 1)),  # tiled, window 1 on an axis
    ((50,), (3,), (1,), (1,), (1,), (1,)),  # 1-D tiled, window 3
    ((9, 13), (1, 1), (1, 1), (1, 1), (0, 0), (0, 0)),  # rows, window 1, odd width
    ((11, 17), (3, 3), (3, 3), (1, 1), (1, 1), (1, 2)),  # rows, stride == window 3, padded
    ((10, 15), (2, 2), (3, 2), (2, 1), (1, 1), (0, 1)),  # rows, dilated H, odd width
    ((37,), (2,), (2,), (1,), (1,), (0,)),  # 1-D rows, padded, odd width
    ((6, 7, 9), (2, 2, 2), (2, 2, 2), (1, 1, 1), (0, 0, 0), (1, 1, 1)),  # 3-D rows
    ((8, 9, 12), (4, 1, 5), (4, 2, 5), (1, 1, 1), (0, 0, 1), (0, 1, 2)),  # rows, run-time windows
    ((20, 23), (2, 3), (5, 4), (3, 1), (2, 0), (1, 2)),  # rows, stride > window, dilated H
    ((7, 64), (2, 2), (2, 2), (1, 1), (0, 0), (1, 0)),  # rows, 16-byte spans on aligned rows
]

# None: the launcher's choice; the others force a kernel on every case (any kernel is
# correct for any geometry; forcing covers each on the other's cases too). "tiled1": the
# tiled kernel with one / "tiled4" four W positions per work item; "direct": one thread per
# output.
POOL_PATHS = [None, "rows", "tiled1", "tiled4", "direct"]


@pytest.mark.parametrize("path", POOL_PATHS, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=str)
@pytest.mark.parametrize("include_padding", [True, False])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_average_pooling(dtype: Any, include_padding: bool, layout: str, path: str | None) -> None:
    rng = np.random.default_rng(31)
    backend_op = functools.partial(_backend().average_pooling, path=path)
    for case in POOL_CASES:
        host = random_array((2, 3, *case[0]), dtype, rng)
        run_case(
            backend_op,
            reference.average_pooling,
            host,
            layout,
            (*case[1:], include_padding),
            float_rtol(dtype),
            4,
        )


def test_average_pooling_needs_64_bit_indexing() -> None:
    import cupy

    width = 2**30 + 6  # two planes of it: more than 2**31 elements
    try:
        x = (cupy.arange(2 * width, dtype=cupy.int32) % 7).astype(cupy.float16).reshape(1, 2, -1)
        y = _backend().average_pooling(x, (2,), (2,), (1,), (0,), (1,), False)
    except cupy.cuda.memory.OutOfMemoryError:
        pytest.skip("not enough device memory for a > 2**31-element tensor")
    pairs = x[..., : width - width % 2].astype(cupy.float32).reshape(1, 2, -1, 2).mean(axis=-1)
    assert y.shape == (1, 2, width // 2 + width % 2)
    assert bool((y[..., : pairs.shape[-1]].astype(cupy.float32) == pairs).all())
