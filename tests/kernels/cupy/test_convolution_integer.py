"""CuPy CONVOLUTION_INTEGER against the NumPy reference: bit-exact, every kernel path."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from dmlserve.kernels import reference

from ._conv_support import PAIRS, zero_points
from ._conv_support import chained_calls as _chained_calls
from ._conv_support import dependent_launches as _dependent_launches
from ._conv_support import random_int8 as _rand
from ._conv_support import random_zero_point as _zp
from ._conv_support import run_both as _run
from ._support import launcher

pytestmark = pytest.mark.gpu


def _has_wgmma() -> bool:
    import cupy

    return str(cupy.cuda.Device().compute_capability) == "90"


@pytest.fixture(params=["auto", "mma_sync", "cuda_cores", "naive"])
def path(request: pytest.FixtureRequest) -> Any:
    """'cuda_cores' sends every shape down the shared-memory CUDA-core kernel (where its tile
    fits), 'naive' down the one-thread-per-output kernel; 'auto' lets the tensor cores in (the
    wgmma GEMM on compute capability 9.0), 'mma_sync' too, through the mma.sync GEMM."""
    options = launcher("convolution_integer").Options
    if request.param == "mma_sync":
        return options(tensor_cores="mma_sync")
    return options(path=request.param)


@pytest.mark.parametrize(("xt", "wt"), PAIRS)
@pytest.mark.parametrize("zp_mode", ["none", "tensor", "channel"])
def test_signedness_and_zero_points(xt: Any, wt: Any, zp_mode: str, path: Any) -> None:
    rng = np.random.default_rng([PAIRS.index((xt, wt)), len(zp_mode)])
    x = _rand(rng, (2, 24, 9, 11), xt)
    w = _rand(rng, (40, 24, 3, 3), wt)
    zx = 0 if zp_mode == "none" else _zp(rng, xt)
    zw = zero_points(rng, zp_mode, wt, 40)
    got, want = _run(x, w, zx, zw, (1, 2), (2, 1), (1, 0), (2, 1), 1, options=path)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(("xt", "wt"), PAIRS)
def test_extreme_zero_points(xt: Any, wt: Any, path: Any) -> None:
    rng = np.random.default_rng(7)
    x = _rand(rng, (1, 32, 7, 6), xt)
    w = _rand(rng, (16, 32, 3, 2), wt)
    xi, wi = np.iinfo(xt), np.iinfo(wt)
    zw = np.resize(np.array([wi.min, wi.max, 0], np.int32), 16)
    for zx in (int(xi.min), int(xi.max)):
        got, want = _run(x, w, zx, zw, (1, 1), (1, 1), (2, 1), (1, 2), 1, options=path)
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
def test_groups(c: int, m: int, groups: int, path: Any) -> None:
    rng = np.random.default_rng(c * 1000 + m + groups)
    x = _rand(rng, (2, c, 8, 7), np.uint8)
    w = _rand(rng, (m, c // groups, 3, 3), np.int8)
    zw = rng.integers(-128, 128, m).astype(np.int32)
    got, want = _run(x, w, 131, zw, (1, 1), (1, 1), (1, 1), (1, 1), groups, options=path)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("c", [1, 3, 5, 8, 13, 33, 100])
def test_channel_counts(c: int, path: Any) -> None:
    rng = np.random.default_rng(c)
    x = _rand(rng, (3, c, 10, 9), np.int8)
    w = _rand(rng, (19, c, 2, 3), np.int8)
    zw = np.full(19, 5, np.int32)
    got, want = _run(x, w, -3, zw, (2, 1), (1, 2), (0, 2), (1, 0), 1, options=path)
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
def test_geometry(strides: Any, dilations: Any, start: Any, end: Any, path: Any) -> None:
    rng = np.random.default_rng(sum(strides) * 31 + sum(start))
    x = _rand(rng, (2, 20, 13, 12), np.uint8)
    w = _rand(rng, (24, 20, 3, 2), np.uint8)
    zw = rng.integers(0, 256, 24).astype(np.int32)
    got, want = _run(x, w, 17, zw, strides, dilations, start, end, 1, options=path)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("groups", [1, 4])
def test_one_dimensional(groups: int, path: Any) -> None:
    rng = np.random.default_rng(groups)
    x = _rand(rng, (3, 32, 50), np.uint8)
    w = _rand(rng, (16, 32 // groups, 5), np.int8)
    zw = rng.integers(-128, 128, 16).astype(np.int32)
    got, want = _run(x, w, 200, zw, (2,), (3,), (4,), (1,), groups, options=path)
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
def test_strided_inputs(view: Callable[[Any], Any], path: Any) -> None:
    rng = np.random.default_rng(11)
    x = _rand(rng, (3, 64, 14, 15), np.uint8)
    c = view(__import__("cupy").asarray(x)).shape[1]
    w_full = _rand(rng, (16, 3, 3, c * 2), np.int8)

    def w_view(a: Any) -> Any:
        return a.transpose(0, 3, 1, 2)[:, ::2]  # non-contiguous filter too

    zw = np.arange(16, dtype=np.int32)
    geometry = ((1, 1), (1, 1), (1, 1), (1, 1))
    got, want = _run(x, w_full, 9, zw, *geometry, 1, view, w_view, options=path)
    np.testing.assert_array_equal(got, want)


def _gemm_tiles() -> list[tuple[str, tuple[int, int]]]:
    gemm = __import__("dmlserve.kernels.cupy_backend._convolution_integer_gemm", fromlist=["_"])
    return [("mma_sync", (t[0], t[1])) for t in gemm.MMA_SYNC_TILES] + [
        ("wgmma", (t[0], t[1])) for t in gemm.WGMMA_TILES
    ]


@pytest.mark.parametrize(("n", "c", "hw", "m"), [(2, 64, 28, 256), (4, 160, 15, 96)])
@pytest.mark.parametrize(("kernel", "tile"), _gemm_tiles())
def test_every_tile(n: int, c: int, hw: int, m: int, kernel: str, tile: tuple[int, int]) -> None:
    if kernel == "wgmma" and not _has_wgmma():
        pytest.skip("the wgmma GEMM runs on compute capability 9.0 only")
    options = launcher("convolution_integer").Options(tile=tile, tensor_cores=kernel)
    rng = np.random.default_rng(n + c + tile[0] + tile[1])
    x = _rand(rng, (n, c, hw, hw), np.uint8)
    w = _rand(rng, (m, c, 3, 3), np.int8)
    for zw in (np.zeros(m, np.int32), rng.integers(-128, 128, m).astype(np.int32)):
        ran: list[Any] = []
        got, want = _run(x, w, 128, zw, (1, 1), (1, 1), (1, 1), (1, 1), 1, options=options, ran=ran)
        np.testing.assert_array_equal(got, want)
        assert ran == [kernel]


@pytest.mark.parametrize(("kernel", "tile"), _gemm_tiles())
@pytest.mark.parametrize(("c", "groups", "k"), [(64, 1, 3), (64, 2, 1), (48, 3, 3)])
def test_channels_last_input(c: int, groups: int, k: int, kernel: str, tile: Any) -> None:
    """An input stored (N, H, W, C) with 16-multiple channels per group is read in place."""
    if kernel == "wgmma" and not _has_wgmma():
        pytest.skip("the wgmma GEMM runs on compute capability 9.0 only")
    options = launcher("convolution_integer").Options(tile=tile, tensor_cores=kernel)
    rng = np.random.default_rng(c + groups + k)
    x = _rand(rng, (3, c, 9, 10), np.int8)
    w = _rand(rng, (48, c // groups, k, k), np.uint8)
    zw = rng.integers(0, 256, 48).astype(np.int32)
    pad = (k // 2, k // 2)

    def nhwc(a: Any) -> Any:
        return a.transpose(0, 2, 3, 1).copy().transpose(0, 3, 1, 2)

    ran: list[Any] = []
    got, want = _run(x, w, -7, zw, (1, 1), (1, 1), pad, pad, groups, nhwc, None, options, ran)
    np.testing.assert_array_equal(got, want)
    assert ran == [kernel]


def _int64_wrapped(x: np.ndarray, w: np.ndarray, zx: int, zw: int) -> np.ndarray:
    """One output pixel per channel (window = whole input): exact int64, then mod 2^32."""
    return _int64_exact(x, w, zx, zw).astype(np.int32)


def _int64_exact(x: np.ndarray, w: np.ndarray, zx: int, zw: int) -> np.ndarray:
    xs = x.reshape(x.shape[0], -1).astype(np.int64) - zx
    ws = w.reshape(w.shape[0], -1).astype(np.int64) - zw
    return xs @ ws.T


@pytest.mark.parametrize(("c", "k"), [(8192, (3, 3)), (4, (1, 20000))])
def test_int32_wraps(c: int, k: tuple[int, int], path: Any) -> None:
    rng = np.random.default_rng(5)
    x = rng.integers(200, 256, (2, c, *k)).astype(np.uint8)
    w = rng.integers(-128, -100, (8, c, *k)).astype(np.int8)
    zw = np.full(8, 127, np.int32)
    got, want = _run(x, w, 0, zw, (1, 1), (1, 1), (0, 0), (0, 0), 1, options=path)
    exact = _int64_wrapped(x, w, 0, 127)
    assert np.abs(_int64_exact(x, w, 0, 127)).min() > 2**31  # the case really wraps
    np.testing.assert_array_equal(got.reshape(2, 8), exact)
    np.testing.assert_array_equal(got, want)


def test_empty_batch() -> None:
    import cupy

    x = cupy.zeros((0, 16, 5, 5), cupy.uint8)
    w = cupy.ones((8, 16, 3, 3), cupy.int8)
    conv = launcher("convolution_integer").convolution_integer
    got = conv(x, w, 0, np.zeros(8, np.int32), (1, 1), (1, 1), (0, 0), (0, 0), 1)
    assert got.shape == (0, 8, 3, 3) and got.dtype == cupy.int32


# ---- shared-memory CUDA-core kernel: depthwise and narrow groups --------------------------


def _tiled_plans() -> list[Any]:
    return []


def _tiled_plan_of(ran: list[Any]) -> Any:
    """The CUDA-core kernel's plan (proves that kernel ran)."""
    (plan,) = ran
    assert isinstance(plan, launcher("convolution_integer").TiledPlan), plan
    return plan


TILED_MODES = {
    "auto": {},
    "images2": {"images_per_cta": 2},  # a ragged last CTA with odd batches
    "no_prefetch": {"prefetch": False},  # the chunked loop instead of the prefetching one
    "v8": {"outputs_per_thread": 8},
}


@pytest.fixture(params=list(TILED_MODES))
def tiled(request: pytest.FixtureRequest) -> Any:
    """Options of the shared-memory CUDA-core kernel (these shapes take it in any mode; the
    depthwise band kernel, tested in test_convolution_integer_depthwise.py, is turned off)."""
    return launcher("convolution_integer").Options(depthwise=False, **TILED_MODES[request.param])


@pytest.mark.parametrize(("xt", "wt"), PAIRS)
@pytest.mark.parametrize("zp_mode", ["none", "tensor", "channel"])
def test_depthwise_zero_points(xt: Any, wt: Any, zp_mode: str, tiled: Any) -> None:
    plans = _tiled_plans()
    rng = np.random.default_rng([PAIRS.index((xt, wt)), len(zp_mode), 3])
    x = _rand(rng, (3, 20, 23, 37), xt)
    w = _rand(rng, (20, 1, 3, 3), wt)
    zx = 0 if zp_mode == "none" else _zp(rng, xt)
    zw = zero_points(rng, zp_mode, wt, 20)
    got, want = _run(x, w, zx, zw, (1, 1), (1, 1), (1, 1), (1, 1), 20, options=tiled, ran=plans)
    np.testing.assert_array_equal(got, want)
    plan = _tiled_plan_of(plans)
    assert plan.mb == 1  # one output channel per CTA
    assert plan.prefetch == tiled.prefetch
    if tiled.images_per_cta:
        assert plan.images == tiled.images_per_cta


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
    tiled: Any,
) -> None:
    plans = _tiled_plans()
    rng = np.random.default_rng(width + sum(strides) * 7 + sum(start))
    x = _rand(rng, (2, 6, 19, width), np.uint8)
    w = _rand(rng, (12, 1, 3, 5 if width > 8 else 1), np.int8)  # channel multiplier 2
    zw = rng.integers(-128, 128, 12).astype(np.int32)
    if width + start[1] + end[1] < dilations[1] * (w.shape[3] - 1) + 1:
        pytest.fail("test geometry leaves no output column")
    got, want = _run(x, w, 77, zw, strides, dilations, start, end, 6, options=tiled, ran=plans)
    np.testing.assert_array_equal(got, want)
    _tiled_plan_of(plans)


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
def test_narrow_groups(c: int, m: int, groups: int, k: int, tiled: Any) -> None:
    plans = _tiled_plans()
    rng = np.random.default_rng(c + m + groups + k)
    x = _rand(rng, (2, c, 30, 29), np.int8)
    w = _rand(rng, (m, c // groups, k, k), np.uint8)
    zw = rng.integers(0, 256, m).astype(np.int32)
    pads = ((k // 2, 1), (k // 2, 0))
    got, want = _run(x, w, -5, zw, (1, 1), (1, 1), *pads, groups, options=tiled, ran=plans)
    np.testing.assert_array_equal(got, want)
    plan = _tiled_plan_of(plans)
    if c == 64:
        assert plan.channels < 64  # the channel loop really ran in chunks


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
def test_depthwise_views(view: Callable[[Any], Any], tiled: Any) -> None:
    plans = _tiled_plans()
    rng = np.random.default_rng(13)
    x = _rand(rng, (3, 16, 21, 45), np.uint8)
    c = view(__import__("cupy").asarray(x)).shape[1]
    w = _rand(rng, (c, 1, 3, 3), np.int8)
    zw = rng.integers(-128, 128, c).astype(np.int32)
    got, want = _run(x, w, 140, zw, (1, 1), (1, 1), (1, 1), (1, 1), c, view, None, tiled, plans)
    np.testing.assert_array_equal(got, want)
    _tiled_plan_of(plans)


def test_depthwise_one_dimensional() -> None:
    plans = _tiled_plans()
    rng = np.random.default_rng(17)
    x = _rand(rng, (2, 8, 301), np.int8)
    w = _rand(rng, (8, 1, 5), np.int8)
    zw = rng.integers(-128, 128, 8).astype(np.int32)
    got, want = _run(x, w, 3, zw, (2,), (2,), (3,), (0,), 8, ran=plans)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    _tiled_plan_of(plans)


@pytest.mark.parametrize(
    ("hw", "view"),
    [
        ((8, 9), lambda a: a[:, ::2]),  # 72-byte planes, 144 apart: 16-byte reads
        ((14, 14), None),  # 196-byte planes: 4-byte reads
        ((6, 6), lambda a: a[:, 1::2]),  # 36-byte planes from byte 36: 4-byte reads
        ((5, 7), None),  # 35-byte planes: byte gathers
        ((17, 20), None),  # 340-byte planes: 4-byte reads, several blocks of pixels a plane
        ((9, 12), lambda a: a[:, :32, :, ::2]),  # every other column: byte gathers
    ],
)
def test_prep_x_plane_reads(hw: tuple[int, int], view: Callable[[Any], Any] | None) -> None:
    """Tensor-core input transform on contiguous planes, read in 16-byte or 4-byte pieces by
    their alignment, with plane sizes that are not a multiple of 16 (the last read of each
    plane is byte by byte), and by byte gathers where no alignment holds."""
    rng = np.random.default_rng(hw[0] * hw[1])
    x = _rand(rng, (2, 64, *hw), np.uint8)
    w = _rand(rng, (32, 32, 3, 3), np.int8)  # 32 outputs: the tensor-core path
    zw = rng.integers(-128, 128, 32).astype(np.int32)
    channels = (lambda a: a[:, :32]) if view is None else view
    ran: list[Any] = []
    geometry = ((1, 1), (1, 1), (1, 1), (1, 1), 1)
    options = launcher("convolution_integer").Options(gather=False)  # the transform, always
    got, want = _run(x, w, 128, zw, *geometry, channels, None, options, ran)
    np.testing.assert_array_equal(got, want)
    assert ran[0] in ("wgmma", "wgmma_shift", "mma_sync")


@pytest.mark.parametrize("kernel", ["wgmma", "mma_sync"])
def test_constant_filter_prepared_once(kernel: str) -> None:
    """A filter cache (a registration's constant filter) keeps the first call's prepared
    filter: reused while the zero points stay; a call with other zero points prepares its own
    (exact) and leaves the kept one alone (other streams may be reading it)."""
    import cupy

    if kernel == "wgmma" and not _has_wgmma():
        pytest.skip("the wgmma GEMM runs on compute capability 9.0 only")
    conv = launcher("convolution_integer")
    rng = np.random.default_rng(21)
    w = _rand(rng, (32, 48, 3, 3), np.int8)
    zw = rng.integers(-128, 128, 32).astype(np.int32)
    w_dev = cupy.asarray(w)
    cache: dict[Any, Any] = {}
    options = conv.Options(tensor_cores=kernel)
    geometry = ((1, 1), (1, 1), (1, 1), (1, 1), 1)
    prepared = []
    for zx in (128, 128, 7):
        x = _rand(rng, (2, 48, 9, 8), np.uint8)
        got = conv.convolution_integer(
            cupy.asarray(x), w_dev, zx, zw, *geometry, options, filter_cache=cache
        )
        want = reference.convolution_integer(x, w, zx, zw, *geometry)
        np.testing.assert_array_equal(cupy.asnumpy(got), want)
        prepared.append(cache["filter"][1][0])  # the prepared filter array
    assert prepared[1] is prepared[0]  # same zero points: reused
    assert prepared[2] is prepared[0]  # not replaced; the call with z_x = 7 made its own
    assert list(cache) == ["filter"] and cache["filter"][0][5] == 128


@pytest.mark.parametrize(
    ("start", "stride"),
    [((60000, 2), (60000, 1)), ((1, 50000), (2, 50000)), ((70000, 0), (70000, 1))],
)
def test_padding_far_beyond_the_image(start: tuple[int, int], stride: tuple[int, int]) -> None:
    """Pads and strides that would make the padded input copy far larger than the image run
    on the GEMM that checks each tap instead."""
    rng = np.random.default_rng(sum(start))
    x = _rand(rng, (2, 16, 5, 6), np.uint8)
    w = _rand(rng, (16, 16, 1, 1), np.int8)
    zw = rng.integers(-128, 128, 16).astype(np.int32)
    ran: list[Any] = []
    got, want = _run(x, w, 3, zw, stride, (1, 1), start, (0, 0), 1, ran=ran)
    np.testing.assert_array_equal(got, want)
    assert ran == ["mma_sync"]


def test_geometry_beyond_32_bits_is_refused() -> None:
    from dmlserve.kernels.errors import DescriptorError

    conv = launcher("convolution_integer")
    x = __import__("cupy").zeros((1, 16, 2, 2), np.uint8)
    w = __import__("cupy").zeros((16, 16, 1, 1), np.int8)
    with pytest.raises(DescriptorError, match="StartPadding"):
        conv.convolution_integer(x, w, 0, np.zeros(16, np.int32), (1, 1), (1, 1),
                                 (2**31, 0), (0, 0), 1)  # fmt: skip


def test_gemm_plan_kept_per_geometry() -> None:
    """The tensor-core path works its layouts and launches out once per geometry: a call with
    other data and other nonzero filter zero points reuses the plan and is still exact; all-zero
    filter zero points, another input zero point and a sliced input each get a plan of their
    own, and are exact too."""
    plans = launcher("_convolution_integer_gemm")._plan
    plans.cache_clear()
    rng = np.random.default_rng(5)
    x = _rand(rng, (2, 32, 11, 12), np.uint8)
    w = _rand(rng, (48, 32, 3, 3), np.int8)
    geometry = ((1, 1), (1, 1), (1, 1), (1, 1), 1)

    def exact(x: np.ndarray, w: np.ndarray, zx: int, zw: np.ndarray, **kw: Any) -> int:
        got, want = _run(x, w, zx, zw, *geometry, **kw)
        np.testing.assert_array_equal(got, want)
        return int(plans.cache_info().currsize)

    def zw() -> np.ndarray:
        return rng.integers(1, 9, 48).astype(np.int32)

    assert exact(x, w, 128, zw()) == 1
    assert exact(_rand(rng, x.shape, np.uint8), w ^ 3, 128, zw()) == 1
    assert exact(x, w, 128, np.zeros(48, np.int32)) == 2
    assert exact(x, w, 7, zw()) == 3
    assert exact(x, w, 128, zw(), view=lambda a: a[:, :, :, 1:]) == 4


def test_zero_points_uploaded_once_per_vector(monkeypatch: pytest.MonkeyPatch) -> None:
    """Filter zero points go to the device once per distinct vector, so a call puts no
    host-to-device copy between its kernels; equal vectors share one array. Kept arrays are
    never dropped: once `_ZERO_POINT_ARRAYS` are kept, a new vector is uploaded per call."""
    import cupy

    common = launcher("_common")
    # Its own empty set of kept arrays: tests run before it in this process may have filled
    # the shared one.
    monkeypatch.setattr(common, "_zero_point_arrays", {})
    a = common.device_zero_points(np.arange(8, dtype=np.int32))
    b = common.device_zero_points(np.arange(8, dtype=np.int64))  # same values, other dtype
    c = common.device_zero_points(np.arange(1, 9, dtype=np.int32))
    assert a is b and a is not c
    np.testing.assert_array_equal(cupy.asnumpy(c), np.arange(1, 9))
    assert len(common._zero_point_arrays) <= common._ZERO_POINT_ARRAYS
    monkeypatch.setattr(common, "_ZERO_POINT_ARRAYS", len(common._zero_point_arrays))  # full
    new = np.arange(100, 108, dtype=np.int32)
    d, e = common.device_zero_points(new), common.device_zero_points(new)
    assert d is not e and common.device_zero_points(np.arange(8)) is a
    np.testing.assert_array_equal(cupy.asnumpy(e), new)


@pytest.mark.parametrize(
    ("c", "in_place"), [(5440, True), (5456, True), (2272, False), (2288, False)]
)
def test_filter_rows_at_the_staging_limit(c: int, in_place: bool) -> None:
    """The filter prep stages a row in shared memory up to the default limit less its static
    part: alone (an input read in place, stored (N, H, W, C) and not padded), 48 KB - 128 B,
    so 5440 x 9 bytes are staged and 5456 x 9 read where they lie; in one launch with the
    input prep (whose blocks would each hold the row too), up to 20 KB: 2272 x 9 bytes are
    staged, 2288 x 9 are not."""
    rng = np.random.default_rng(c)
    x = _rand(rng, (1, c, 6, 6), np.uint8)
    w = _rand(rng, (16, c, 3, 3), np.int8)
    zw = rng.integers(-128, 128, 16).astype(np.int32)
    pad = (0, 0) if in_place else (1, 1)

    def nhwc(a: Any) -> Any:
        return a.transpose(0, 2, 3, 1).copy().transpose(0, 3, 1, 2)

    ran: list[Any] = []
    view = nhwc if in_place else None
    got, want = _run(x, w, 7, zw, (1, 1), (1, 1), pad, pad, 1, view, ran=ran)
    np.testing.assert_array_equal(got, want)
    assert ran[0] in ("wgmma", "wgmma_shift", "mma_sync")  # each prepares its filter


@pytest.mark.parametrize("kernel", ["auto", "mma_sync"])
@pytest.mark.parametrize(("shape", "m", "strides"), [
    ((2, 32, 3, 3), 200, (1, 1)),  # 2 input-prep blocks a slice: 100 slices of filter rows
    ((3, 48, 5, 4), 77, (2, 1)),  # the tap-by-tap GEMM, a ragged last slice
    ((1, 64, 20, 20), 24, (1, 1)),  # one slice of filter rows, most of its blocks idle
])  # fmt: skip
def test_both_preps_in_one_launch(
    shape: tuple[int, int, int, int], m: int, strides: tuple[int, int], kernel: str
) -> None:
    """A call that prepares its filter and transforms its input does both in one launch: the
    filter rows take the z-slices of the grid after the images' (a row left out would keep the
    pool's garbage); a second call with the filter kept prepared transforms the input alone."""
    import cupy

    conv = launcher("convolution_integer")
    options = conv.Options(tensor_cores=kernel, gather=False)  # the input transformed
    rng = np.random.default_rng([*shape, m, len(kernel)])
    w = _rand(rng, (m, shape[1], 3, 3), np.int8)
    zw = rng.integers(-128, 128, m).astype(np.int32)
    w_dev = cupy.asarray(w)
    geometry = (strides, (1, 1), (1, 1), (1, 1), 1)
    cache: dict[Any, Any] = {}
    for _ in range(2):
        x = _rand(rng, shape, np.uint8)
        x_dev = cupy.asarray(x)
        junk = cupy.full(4 << 20, 0x5A5A5A5A, dtype=cupy.int32)  # what unwritten memory shows
        del junk
        ran: list[Any] = []
        got = conv.convolution_integer(
            x_dev, w_dev, 3, zw, *geometry, options, ran, filter_cache=cache
        )
        want = reference.convolution_integer(x, w, 3, zw, *geometry)
        np.testing.assert_array_equal(cupy.asnumpy(got), want)
        assert ran[0] in ("wgmma", "wgmma_shift", "mma_sync")


@pytest.mark.parametrize(("kind", "shape", "m", "k", "groups", "form"), [
    ("depthwise", (4, 8, 12, 16), 8, 3, 8, None),  # the band kernel, a channel a CTA
    ("depthwise", (4, 8, 12, 16), 8, 3, 4, None),  # the band kernel, groups of 2 channels
    ("grouped", (3, 64, 10, 10), 64, 3, 4, None),  # groups of 16 channels
    ("pointwise", (4, 64, 8, 8), 128, 1, 1, "ring"),
    ("pointwise", (4, 64, 8, 8), 192, 1, 1, "resident"),
])  # fmt: skip
def test_calls_chained_through_memory(
    monkeypatch: pytest.MonkeyPatch,
    kind: str,
    shape: tuple[int, int, int, int],
    m: int,
    k: int,
    groups: int,
    form: str | None,
) -> None:
    """Calls of the band, grouped and pointwise kernels queued back to back, each reading the
    bytes the call before it wrote (its int32 output seen as the next call's input), checked
    once the whole chain has run. Each is launched to start while the grid ahead of it
    finishes, and must read and write nothing before that grid is done; the chain is queued
    behind a GPU-side wait, so that the calls meet on the GPU back to back however slowly the
    host issues them, and the small grids leave most SMs free, so a call that read early would
    see its input before it was written."""
    import cupy

    conv = launcher("convolution_integer")
    capability = int(cupy.cuda.Device().compute_capability)
    if form == "resident" and capability < 90:
        pytest.skip("the resident pointwise form runs on compute capability 9.0 and later")
    plans = {
        "depthwise": conv.DepthwisePlan,
        "grouped": conv.GroupedPlan,
        "pointwise": conv.PointwisePlan,
    }
    dependent = _dependent_launches(monkeypatch)
    rng = np.random.default_rng([*shape, m, groups, len(kind)])
    c = shape[1]
    w = cupy.asarray(_rand(rng, (m, c // groups, k, k), np.int8))
    zw = rng.integers(-128, 128, m).astype(np.int32)
    pad = (k // 2, k // 2)
    geometry = ((1, 1), (1, 1), pad, pad, groups)
    options = conv.Options(pointwise_form=form)  # type: ignore[arg-type]

    def call(x: Any) -> Any:
        ran: list[Any] = []
        out = conv.convolution_integer(x, w, 9, zw, *geometry, options, ran)
        assert isinstance(ran[0], plans[kind]), ran[0]
        assert kind != "pointwise" or ran[0].form == form, ran[0]
        return out

    first = cupy.asarray(_rand(rng, shape, np.uint8))
    w_host = cupy.asnumpy(w)
    for x, out in _chained_calls(call, first):
        want = reference.convolution_integer(cupy.asnumpy(x), w_host, 9, zw, *geometry)
        np.testing.assert_array_equal(cupy.asnumpy(out), want)
    # every call a dependent where the device has them (compute capability 9.0 and later)
    assert dependent == ([True] * 8 if capability >= 90 else [])
