"""CuPy CONVOLUTION_INTEGER against the NumPy reference: bit-exact, both kernel paths."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from dmlserve.kernels import reference

pytestmark = pytest.mark.gpu

PAIRS = [(np.uint8, np.int8), (np.int8, np.uint8), (np.int8, np.int8), (np.uint8, np.uint8)]


def _rand(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, size=shape, dtype=np.int64).astype(dtype)


def _zp(rng: np.random.Generator, dtype: Any) -> int:
    info = np.iinfo(dtype)
    return int(rng.integers(info.min, info.max + 1))


def _run(
    x: np.ndarray,
    w: np.ndarray,
    zx: int,
    zw: np.ndarray,
    strides: tuple[int, ...],
    dilations: tuple[int, ...],
    start: tuple[int, ...],
    end: tuple[int, ...],
    groups: int,
    view: Callable[[Any], Any] | None = None,
    w_view: Callable[[Any], Any] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    import cupy

    from dmlserve.kernels.cupy_backend.convolution_integer import convolution_integer

    x_dev, w_dev = cupy.asarray(x), cupy.asarray(w)
    if view is not None:
        x_dev = view(x_dev)
        x = cupy.asnumpy(x_dev)
    if w_view is not None:
        w_dev = w_view(w_dev)
        w = cupy.asnumpy(w_dev)
    args = (zx, zw, strides, dilations, start, end, groups)
    # Poison the pool: the output block was full of garbage, so unwritten elements show.
    junk = cupy.full(4 << 20, 0x5A5A5A5A, dtype=cupy.int32)
    del junk
    got = convolution_integer(x_dev, w_dev, *args)
    assert got.dtype == cupy.int32 and got.flags.c_contiguous
    return cupy.asnumpy(got), reference.convolution_integer(x, w, *args)


@pytest.fixture(params=["auto", "direct", "naive"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """'direct' sends every shape down the shared-memory CUDA-core kernel (where its tile fits),
    'naive' down the one-thread-per-output kernel; 'auto' lets the tensor cores in."""
    mod = importlib.import_module("dmlserve.kernels.cupy_backend.convolution_integer")

    if request.param in ("direct", "naive"):
        monkeypatch.setattr(mod, "_MIN_TC_CHANNELS", 1 << 30)
    if request.param == "naive":
        monkeypatch.setattr(mod, "_TILED_SMEM_BUDGET", 0)
    return str(request.param)


def _tiled_kernel_used(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, ...]]:
    """Records the plans the shared-memory CUDA-core kernel ran with (proves the path ran)."""
    mod = importlib.import_module("dmlserve.kernels.cupy_backend.convolution_integer")

    plans: list[tuple[int, ...]] = []
    real = mod._tiled

    def spy(*args: Any) -> None:
        plans.append(args[-1])
        real(*args)

    monkeypatch.setattr(mod, "_tiled", spy)
    return plans


@pytest.mark.parametrize(("xt", "wt"), PAIRS)
@pytest.mark.parametrize("zp_mode", ["none", "tensor", "channel"])
def test_signedness_and_zero_points(xt: Any, wt: Any, zp_mode: str, path: str) -> None:
    rng = np.random.default_rng([PAIRS.index((xt, wt)), len(zp_mode)])
    x = _rand(rng, (2, 24, 9, 11), xt)
    w = _rand(rng, (40, 24, 3, 3), wt)
    zx = 0 if zp_mode == "none" else _zp(rng, xt)
    if zp_mode == "channel":
        zw = rng.integers(np.iinfo(wt).min, np.iinfo(wt).max + 1, 40).astype(np.int32)
    else:
        zw = np.full(40, 0 if zp_mode == "none" else _zp(rng, wt), np.int32)
    got, want = _run(x, w, zx, zw, (1, 2), (2, 1), (1, 0), (2, 1), 1)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(("xt", "wt"), PAIRS)
def test_extreme_zero_points(xt: Any, wt: Any, path: str) -> None:
    rng = np.random.default_rng(7)
    x = _rand(rng, (1, 32, 7, 6), xt)
    w = _rand(rng, (16, 32, 3, 2), wt)
    xi, wi = np.iinfo(xt), np.iinfo(wt)
    zw = np.resize(np.array([wi.min, wi.max, 0], np.int32), 16)
    for zx in (int(xi.min), int(xi.max)):
        got, want = _run(x, w, zx, zw, (1, 1), (1, 1), (2, 1), (1, 2), 1)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    ("c", "m", "groups"),
    [
        (16, 48, 2),  # two tensor-core groups
        (128, 128, 32),  # ResNeXt-like: 4 channels per group
        (512, 512, 32),  # ResNeXt-like: 16 channels per group
        (24, 24, 24),  # depthwise
        (12, 24, 12),  # depthwise with channel multiplier 2
        (40, 30, 5),  # 8 in / 6 out per group
    ],
)
def test_groups(c: int, m: int, groups: int, path: str) -> None:
    rng = np.random.default_rng(c * 1000 + m + groups)
    x = _rand(rng, (2, c, 8, 7), np.uint8)
    w = _rand(rng, (m, c // groups, 3, 3), np.int8)
    zw = rng.integers(-128, 128, m).astype(np.int32)
    got, want = _run(x, w, 131, zw, (1, 1), (1, 1), (1, 1), (1, 1), groups)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("c", [1, 3, 5, 8, 13, 33, 100])
def test_channel_counts(c: int, path: str) -> None:
    rng = np.random.default_rng(c)
    x = _rand(rng, (3, c, 10, 9), np.int8)
    w = _rand(rng, (19, c, 2, 3), np.int8)
    got, want = _run(x, w, -3, np.full(19, 5, np.int32), (2, 1), (1, 2), (0, 2), (1, 0), 1)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    ("strides", "dilations", "start", "end"),
    [
        ((1, 1), (1, 1), (0, 0), (0, 0)),
        ((2, 2), (1, 1), (1, 1), (0, 0)),
        ((3, 2), (2, 3), (0, 4), (3, 1)),
        ((1, 4), (3, 1), (5, 0), (0, 5)),  # padding wider than the dilated window
    ],
)
def test_geometry(strides: Any, dilations: Any, start: Any, end: Any, path: str) -> None:
    rng = np.random.default_rng(sum(strides) * 31 + sum(start))
    x = _rand(rng, (2, 20, 13, 12), np.uint8)
    w = _rand(rng, (24, 20, 3, 2), np.uint8)
    zw = rng.integers(0, 256, 24).astype(np.int32)
    got, want = _run(x, w, 17, zw, strides, dilations, start, end, 1)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("groups", [1, 4])
def test_one_dimensional(groups: int, path: str) -> None:
    rng = np.random.default_rng(groups)
    x = _rand(rng, (3, 32, 50), np.uint8)
    w = _rand(rng, (16, 32 // groups, 5), np.int8)
    zw = rng.integers(-128, 128, 16).astype(np.int32)
    got, want = _run(x, w, 200, zw, (2,), (3,), (4,), (1,), groups)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    "view",
    [
        lambda a: a[:, ::2, 1::2, ::3],  # strided slices
        lambda a: a.transpose(0, 2, 3, 1).copy().transpose(0, 3, 1, 2),  # NHWC storage
        lambda a: __import__("cupy").broadcast_to(a[:1], a.shape),  # 0 stride on N
        lambda a: __import__("cupy").broadcast_to(a[:, :, :, :1], a.shape),  # 0 stride on W
    ],
    ids=["sliced", "nhwc", "bcast_n", "bcast_w"],
)
def test_strided_inputs(view: Callable[[Any], Any], path: str) -> None:
    rng = np.random.default_rng(11)
    x = _rand(rng, (3, 64, 14, 15), np.uint8)
    c = view(__import__("cupy").asarray(x)).shape[1]
    w_full = _rand(rng, (16, 3, 3, c * 2), np.int8)

    def w_view(a: Any) -> Any:
        return a.transpose(0, 3, 1, 2)[:, ::2]  # non-contiguous filter too

    zw = np.arange(16, dtype=np.int32)
    got, want = _run(x, w_full, 9, zw, (1, 1), (1, 1), (1, 1), (1, 1), 1, view, w_view)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(("n", "c", "hw", "m"), [(2, 64, 28, 256), (4, 160, 15, 96)])
@pytest.mark.parametrize("tile", [(128, 128), (128, 64), (64, 128), (64, 64), (32, 128)])
def test_every_tile(
    n: int, c: int, hw: int, m: int, tile: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    mod = importlib.import_module("dmlserve.kernels.cupy_backend.convolution_integer")

    monkeypatch.setattr(mod, "_pick_tile", lambda *_: tile)
    rng = np.random.default_rng(n + c + tile[0])
    x = _rand(rng, (n, c, hw, hw), np.uint8)
    w = _rand(rng, (m, c, 3, 3), np.int8)
    for zw in (np.zeros(m, np.int32), rng.integers(-128, 128, m).astype(np.int32)):
        got, want = _run(x, w, 128, zw, (1, 1), (1, 1), (1, 1), (1, 1), 1)
        np.testing.assert_array_equal(got, want)


def _int64_wrapped(x: np.ndarray, w: np.ndarray, zx: int, zw: int) -> np.ndarray:
    """One output pixel per channel (window = whole input): exact int64, then mod 2^32."""
    return _int64_exact(x, w, zx, zw).astype(np.int32)


def _int64_exact(x: np.ndarray, w: np.ndarray, zx: int, zw: int) -> np.ndarray:
    xs = x.reshape(x.shape[0], -1).astype(np.int64) - zx
    ws = w.reshape(w.shape[0], -1).astype(np.int64) - zw
    return xs @ ws.T


@pytest.mark.parametrize(("c", "k"), [(8192, (3, 3)), (4, (1, 20000))])
def test_int32_wraps(c: int, k: tuple[int, int], path: str) -> None:
    rng = np.random.default_rng(5)
    x = rng.integers(200, 256, (2, c, *k)).astype(np.uint8)
    w = rng.integers(-128, -100, (8, c, *k)).astype(np.int8)
    zw = np.full(8, 127, np.int32)
    got, want = _run(x, w, 0, zw, (1, 1), (1, 1), (0, 0), (0, 0), 1)
    exact = _int64_wrapped(x, w, 0, 127)
    assert np.abs(_int64_exact(x, w, 0, 127)).min() > 2**31  # the case really wraps
    np.testing.assert_array_equal(got.reshape(2, 8), exact)
    np.testing.assert_array_equal(got, want)


def test_empty_batch() -> None:
    import cupy

    from dmlserve.kernels.cupy_backend.convolution_integer import convolution_integer

    x = cupy.zeros((0, 16, 5, 5), cupy.uint8)
    w = cupy.ones((8, 16, 3, 3), cupy.int8)
    got = convolution_integer(x, w, 0, np.zeros(8, np.int32), (1, 1), (1, 1), (0, 0), (0, 0), 1)
    assert got.shape == (0, 8, 3, 3) and got.dtype == cupy.int32


# ---- shared-memory CUDA-core kernel: depthwise and narrow groups --------------------------


@pytest.fixture(params=["auto", "images2", "no_prefetch", "v8"])
def tiled_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """'images2': two images per CTA (a ragged last CTA with odd batches); 'no_prefetch': the
    chunked loop instead of the one-chunk prefetching one; 'v8': 8 outputs per thread."""
    mod = importlib.import_module("dmlserve.kernels.cupy_backend.convolution_integer")

    if request.param == "v8":
        monkeypatch.setattr(mod, "_TILED_V", 8)

    if request.param == "images2":
        monkeypatch.setattr(mod, "_TILED_IMAGES_PER_CTA", 2)
    if request.param == "no_prefetch":
        monkeypatch.setattr(mod, "_TILED_PIPELINE", False)
    return str(request.param)


@pytest.mark.parametrize(("xt", "wt"), PAIRS)
@pytest.mark.parametrize("zp_mode", ["none", "tensor", "channel"])
def test_depthwise_zero_points(
    xt: Any, wt: Any, zp_mode: str, tiled_mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    plans = _tiled_kernel_used(monkeypatch)
    rng = np.random.default_rng([PAIRS.index((xt, wt)), len(zp_mode), 3])
    x = _rand(rng, (3, 20, 23, 37), xt)
    w = _rand(rng, (20, 1, 3, 3), wt)
    zx = 0 if zp_mode == "none" else _zp(rng, xt)
    if zp_mode == "channel":
        zw = rng.integers(np.iinfo(wt).min, np.iinfo(wt).max + 1, 20).astype(np.int32)
    else:
        zw = np.full(20, 0 if zp_mode == "none" else _zp(rng, wt), np.int32)
    got, want = _run(x, w, zx, zw, (1, 1), (1, 1), (1, 1), (1, 1), 20)
    np.testing.assert_array_equal(got, want)
    assert plans and plans[0][0] == 1  # one output channel per CTA
    assert plans[0][-1] == (tiled_mode != "no_prefetch")
    if tiled_mode == "images2":
        assert plans[0][-2] == 2


@pytest.mark.parametrize(
    ("strides", "dilations", "start", "end"),
    [
        ((2, 2), (1, 1), (1, 1), (1, 1)),
        ((1, 2), (2, 1), (0, 3), (2, 0)),  # asymmetric padding
        ((3, 1), (1, 3), (4, 1), (0, 5)),
        ((2, 3), (2, 2), (0, 0), (0, 0)),
    ],
)
@pytest.mark.parametrize("width", [1, 7, 61, 150, 263])  # odd widths; > 128 splits the row
def test_depthwise_geometry(
    strides: Any,
    dilations: Any,
    start: Any,
    end: Any,
    width: int,
    tiled_mode: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plans = _tiled_kernel_used(monkeypatch)
    rng = np.random.default_rng(width + sum(strides) * 7 + sum(start))
    x = _rand(rng, (2, 6, 19, width), np.uint8)
    w = _rand(rng, (12, 1, 3, 5 if width > 8 else 1), np.int8)  # channel multiplier 2
    zw = rng.integers(-128, 128, 12).astype(np.int32)
    if width + start[1] + end[1] < dilations[1] * (w.shape[3] - 1) + 1:
        pytest.fail("test geometry leaves no output column")
    got, want = _run(x, w, 77, zw, strides, dilations, start, end, 6)
    np.testing.assert_array_equal(got, want)
    assert plans


@pytest.mark.parametrize(
    ("c", "m", "groups", "k"),
    [
        (128, 128, 32, 3),  # 4 in / 4 out per group
        (64, 4, 1, 3),  # 4 outputs, 64 channels: several channel chunks with a ragged end
        (3, 19, 1, 7),  # stem-like: 3 channels, 19 outputs (5 output chunks, last partial)
        (10, 15, 5, 3),  # 2 in / 3 out per group
        (6, 12, 3, 1),  # 1x1
    ],
)
def test_narrow_groups(
    c: int, m: int, groups: int, k: int, tiled_mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    plans = _tiled_kernel_used(monkeypatch)
    rng = np.random.default_rng(c + m + groups + k)
    x = _rand(rng, (2, c, 30, 29), np.int8)
    w = _rand(rng, (m, c // groups, k, k), np.uint8)
    zw = rng.integers(0, 256, m).astype(np.int32)
    got, want = _run(x, w, -5, zw, (1, 1), (1, 1), (k // 2, 1), (k // 2, 0), groups)
    np.testing.assert_array_equal(got, want)
    assert plans
    if c == 64:
        assert plans[0][6] < 64  # the channel loop really ran in chunks


@pytest.mark.parametrize(
    "view",
    [
        lambda a: __import__("cupy").broadcast_to(a[:1], a.shape),  # 0 stride on N
        lambda a: __import__("cupy").broadcast_to(a[:, :, :, :1], a.shape),  # 0 stride on W
        lambda a: __import__("cupy").broadcast_to(a[:, :1], a.shape),  # 0 stride on C
        lambda a: a[:, :, 1:, 3:],  # unaligned rows: byte head and tail around 4-byte words
        lambda a: a[:, ::2, ::2, ::2],  # strided W: byte gathers
    ],
    ids=["bcast_n", "bcast_w", "bcast_c", "offset", "sliced"],
)
def test_depthwise_views(
    view: Callable[[Any], Any], tiled_mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    plans = _tiled_kernel_used(monkeypatch)
    rng = np.random.default_rng(13)
    x = _rand(rng, (3, 16, 21, 45), np.uint8)
    c = view(__import__("cupy").asarray(x)).shape[1]
    w = _rand(rng, (c, 1, 3, 3), np.int8)
    zw = rng.integers(-128, 128, c).astype(np.int32)
    got, want = _run(x, w, 140, zw, (1, 1), (1, 1), (1, 1), (1, 1), c, view)
    np.testing.assert_array_equal(got, want)
    assert plans


def test_depthwise_one_dimensional(monkeypatch: pytest.MonkeyPatch) -> None:
    plans = _tiled_kernel_used(monkeypatch)
    rng = np.random.default_rng(17)
    x = _rand(rng, (2, 8, 301), np.int8)
    w = _rand(rng, (8, 1, 5), np.int8)
    zw = rng.integers(-128, 128, 8).astype(np.int32)
    got, want = _run(x, w, 3, zw, (2,), (2,), (3,), (0,), 8)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    assert plans


def test_prep_x_vectorized_ragged_plane() -> None:
    """Tensor-core input transform, 16-byte reads: aligned planes whose size is not a multiple
    of 16 (the last read of each plane is byte by byte)."""
    rng = np.random.default_rng(19)
    x = _rand(rng, (2, 64, 8, 9), np.uint8)  # 72-byte planes; every other one 16-byte aligned
    w = _rand(rng, (16, 32, 3, 3), np.int8)
    zw = rng.integers(-128, 128, 16).astype(np.int32)
    got, want = _run(x, w, 128, zw, (1, 1), (1, 1), (1, 1), (1, 1), 1, lambda a: a[:, ::2])
    np.testing.assert_array_equal(got, want)
