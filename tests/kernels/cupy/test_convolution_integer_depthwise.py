"""CuPy CONVOLUTION_INTEGER depthwise band kernel against the NumPy reference, bit-exact; every
test checks that the band kernel ran (or, for shapes outside it, that it did not)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from ._conv_support import PAIRS, check, zero_points
from ._conv_support import random_int8 as _rand
from ._conv_support import random_zero_point as _zp
from ._support import launcher

pytestmark = pytest.mark.gpu


def _check(
    x: np.ndarray,
    w: np.ndarray,
    zx: int,
    zw: np.ndarray,
    strides: tuple[int, ...],
    start: tuple[int, ...],
    end: tuple[int, ...],
    view: Callable[[Any], Any] | None = None,
    options: Any = None,
    dilations: tuple[int, ...] | None = None,
    groups: int | None = None,
) -> Any:
    """Ours against the reference (`check`) with unit dilations and depthwise groups unless
    given; returns what ran."""
    dilations = dilations or (1,) * len(strides)
    groups = groups or x.shape[1]
    return check(x, w, zx, zw, strides, dilations, start, end, groups, view, options=options)


def _band(what: Any) -> Any:
    assert isinstance(what, launcher("convolution_integer").DepthwisePlan), what
    return what


@pytest.mark.parametrize(("xt", "wt"), PAIRS)
@pytest.mark.parametrize("zp_mode", ["none", "tensor", "channel"])
def test_signedness_and_zero_points(xt: Any, wt: Any, zp_mode: str) -> None:
    rng = np.random.default_rng([PAIRS.index((xt, wt)), len(zp_mode), 11])
    x = _rand(rng, (2, 5, 13, 20), xt)
    w = _rand(rng, (5, 1, 3, 3), wt)
    zx = 0 if zp_mode == "none" else _zp(rng, xt)
    zw = zero_points(rng, zp_mode, wt, 5)
    plan = _band(_check(x, w, zx, zw, (1, 1), (1, 1), (1, 1)))
    assert plan.words and plan.tt == 4


@pytest.mark.parametrize(("xt", "wt"), PAIRS)
def test_extreme_zero_points(xt: Any, wt: Any) -> None:
    rng = np.random.default_rng(PAIRS.index((xt, wt)) + 40)
    x = _rand(rng, (1, 6, 9, 11), xt)
    w = _rand(rng, (6, 1, 3, 3), wt)
    xi, wi = np.iinfo(xt), np.iinfo(wt)
    zw = np.resize(np.array([wi.min, wi.max, 0], np.int32), 6)
    for zx in (int(xi.min), int(xi.max)):
        _band(_check(x, w, zx, zw, (1, 1), (2, 1), (1, 2)))


@pytest.mark.parametrize(
    ("k", "strides", "start", "end"),
    [
        ((3, 3), (1, 1), (0, 0), (0, 0)),  # no padding
        ((3, 3), (1, 1), (2, 5), (4, 1)),  # padding on every side, wider than the window
        ((3, 3), (2, 2), (1, 1), (1, 1)),
        ((3, 3), (2, 1), (0, 2), (1, 0)),
        ((3, 3), (1, 2), (1, 3), (0, 2)),
        ((5, 5), (1, 1), (2, 2), (2, 2)),
        ((5, 5), (2, 2), (1, 4), (3, 0)),
        ((7, 7), (1, 1), (3, 3), (3, 3)),
        ((7, 7), (2, 2), (6, 1), (0, 6)),
        ((3, 5), (1, 2), (1, 2), (1, 2)),
        ((1, 3), (2, 1), (0, 1), (0, 1)),
    ],
)
@pytest.mark.parametrize("width", [8, 7, 61])  # odd widths gather bytes
def test_geometry(k: tuple[int, int], strides: Any, start: Any, end: Any, width: int) -> None:
    rng = np.random.default_rng(width * 100 + sum(k) * 10 + sum(strides) + sum(start))
    x = _rand(rng, (2, 3, 17, width), np.uint8)
    w = _rand(rng, (3, 1, *k), np.int8)
    zw = rng.integers(-128, 128, 3).astype(np.int32)
    plan = _band(_check(x, w, 131, zw, strides, start, end))
    assert plan.words == (width % 4 == 0)
    if k == (7, 7):
        assert plan.tt == 2  # two rows per thread (the 3x3 cases take four)


def test_width_one() -> None:
    rng = np.random.default_rng(4)
    x = _rand(rng, (3, 2, 9, 1), np.int8)
    w = _rand(rng, (2, 1, 3, 3), np.uint8)
    zw = np.array([0, 255], np.int32)
    _band(_check(x, w, -128, zw, (1, 1), (1, 1), (1, 1)))


def test_wide_rows_split_across_ctas() -> None:
    """Rows of more than 256 outputs take several tiles along W (and a ragged last one)."""
    rng = np.random.default_rng(5)
    x = _rand(rng, (1, 2, 6, 300), np.int8)
    w = _rand(rng, (2, 1, 3, 3), np.int8)
    zw = np.array([-7, 100], np.int32)
    plan = _band(_check(x, w, -9, zw, (1, 1), (1, 1), (1, 1)))
    assert plan.tiles_w == 2


def test_channel_multiplier_two_and_batch_one() -> None:
    rng = np.random.default_rng(21)
    x = _rand(rng, (1, 4, 15, 16), np.uint8)
    w = _rand(rng, (8, 1, 3, 3), np.int8)  # output m reads input channel m // 2
    zw = rng.integers(-128, 128, 8).astype(np.int32)
    _band(_check(x, w, 128, zw, (2, 2), (1, 1), (1, 1)))


@pytest.mark.parametrize(
    "view",
    [
        lambda a: a[:, :, 1:, 3:],  # rows start 3 bytes into a word: the per-CTA check gathers
        lambda a: a[:, :, 1:, 4:],  # rows not 4-byte aligned (odd pitch) for some planes
        lambda a: a[:, :, :, ::2],  # strided W
        lambda a: a[:, :, :, ::-1],  # reversed W (negative stride)
        lambda a: __import__("cupy").broadcast_to(a[:1], a.shape),  # 0 stride on N
        lambda a: a.transpose(0, 2, 3, 1).copy().transpose(0, 3, 1, 2),  # NHWC storage
    ],
    ids=["offset3", "offset4", "sliced", "reversed", "bcast_n", "nhwc"],
)
def test_views(view: Callable[[Any], Any]) -> None:
    rng = np.random.default_rng(13)
    x = _rand(rng, (2, 3, 11, 29), np.uint8)
    w = _rand(rng, (3, 1, 3, 3), np.int8)
    zw = rng.integers(-128, 128, 3).astype(np.int32)
    _band(_check(x, w, 140, zw, (1, 1), (1, 1), (1, 1), view))


def test_one_dimensional() -> None:
    rng = np.random.default_rng(17)
    x = _rand(rng, (2, 4, 301), np.int8)
    w = _rand(rng, (4, 1, 5), np.int8)
    zw = rng.integers(-128, 128, 4).astype(np.int32)
    plan = _band(_check(x, w, 3, zw, (2,), (3,), (0,)))
    assert plan.tt == 1


def test_tiled_kernel_still_forceable() -> None:
    rng = np.random.default_rng(3)
    x = _rand(rng, (2, 4, 9, 12), np.uint8)
    w = _rand(rng, (4, 1, 3, 3), np.int8)
    conv = launcher("convolution_integer")
    zw = np.zeros(4, np.int32)
    what = _check(x, w, 128, zw, (1, 1), (1, 1), (1, 1), options=conv.Options(depthwise=False))
    assert isinstance(what, conv.TiledPlan)


@pytest.mark.parametrize(
    ("k", "dilations", "zx"),
    [((3, 3), (2, 1), 5), ((3, 3), (1, 2), 5), ((2, 2), (1, 1), 5), ((3, 3), (1, 1), 300)],
    ids=["dilation_h", "dilation_w", "even_window", "zx_outside_uint8"],
)
def test_outside_shapes_keep_the_tiled_kernel(k: Any, dilations: Any, zx: int) -> None:
    rng = np.random.default_rng(9)
    x = _rand(rng, (1, 3, 10, 12), np.uint8)
    w = _rand(rng, (3, 1, *k), np.int8)
    zw = np.zeros(3, np.int32)
    what = _check(x, w, zx, zw, (1, 1), (1, 1), (1, 1), dilations=dilations)
    assert isinstance(what, launcher("convolution_integer").TiledPlan)


# (filter type, its zero point): every w - z_w a signed byte, so tap rows take dp4a
DP4A_FILTERS = [(np.int8, 0), (np.uint8, 128)]


@pytest.mark.parametrize("xt", [np.uint8, np.int8])
@pytest.mark.parametrize(("wt", "zw0"), DP4A_FILTERS)
@pytest.mark.parametrize("pad_w", [0, 1, 2, 3, 5])  # every byte offset of a window in its word
@pytest.mark.parametrize("width", [12, 13])  # words and the byte gather
def test_dp4a_windows(xt: Any, wt: Any, zw0: int, pad_w: int, width: int) -> None:
    rng = np.random.default_rng([pad_w, width, int(zw0), np.dtype(xt).num])
    x = _rand(rng, (2, 3, 10, width), xt)
    w = _rand(rng, (3, 1, 3, 3), wt)
    w.flat[:2] = [np.iinfo(wt).min, np.iinfo(wt).max]  # the ends of the signed-byte range
    zw = np.full(3, zw0, np.int32)
    zx = int(np.iinfo(xt).min) + 3
    plan = _band(_check(x, w, zx, zw, (1, 1), (1, pad_w), (1, 3 - pad_w % 4)))
    assert plan.dp4a and plan.words == (width % 4 == 0)


def test_dp4a_rows_per_thread_and_wide_rows() -> None:
    """Two rows per thread (short planes) and two tiles along W, ragged."""
    rng = np.random.default_rng(8)
    for shape, tt in (((1, 2, 5, 300), 2), ((2, 2, 33, 64), 4)):
        x = _rand(rng, shape, np.uint8)
        w = _rand(rng, (2, 1, 3, 3), np.int8)
        plan = _band(_check(x, w, 77, np.zeros(2, np.int32), (1, 1), (1, 1), (1, 1)))
        assert plan.dp4a and plan.tt == tt


@pytest.mark.parametrize(
    ("wt", "zw0", "k", "strides"),
    [
        (np.int8, 1, (3, 3), (1, 1)),  # w - z_w may leave the signed-byte range
        (np.uint8, 0, (3, 3), (1, 1)),
        (np.int8, 0, (5, 5), (1, 1)),  # windows wider than 3 columns
        (np.int8, 0, (3, 3), (1, 2)),  # column stride 2
    ],
)
def test_multiply_adds_where_dp4a_does_not_apply(wt: Any, zw0: int, k: Any, strides: Any) -> None:
    rng = np.random.default_rng(zw0 + sum(k) + sum(strides))
    x = _rand(rng, (1, 3, 12, 16), np.uint8)
    w = _rand(rng, (3, 1, *k), wt)
    pads = (k[0] // 2, k[1] // 2)
    plan = _band(_check(x, w, 5, np.full(3, zw0, np.int32), strides, pads, pads))
    assert not plan.dp4a


def test_multiply_add_form_still_forceable() -> None:
    rng = np.random.default_rng(12)
    conv = launcher("convolution_integer")
    x = _rand(rng, (2, 3, 14, 20), np.int8)
    w = _rand(rng, (3, 1, 3, 3), np.int8)
    options = conv.Options(depthwise_dp4a=False)
    plan = _band(_check(x, w, -3, np.zeros(3, np.int32), (1, 1), (1, 1), (1, 1), options=options))
    assert not plan.dp4a and plan.tt == 4


# Narrow groups: C/G input channels a group (2 or 4) on the band kernel, a CTA forming every
# output channel of its group.


def _grouped(
    rng: np.random.Generator,
    shape: tuple[int, ...],
    m: int,
    g: int,
    k: tuple[int, ...],
    xt: Any,
    wt: Any,
) -> tuple[np.ndarray, np.ndarray]:
    return _rand(rng, shape, xt), _rand(rng, (m, shape[1] // g, *k), wt)


@pytest.mark.parametrize(("xt", "wt"), PAIRS)
@pytest.mark.parametrize("zp_mode", ["none", "tensor", "channel"])
def test_groups_signedness_and_zero_points(xt: Any, wt: Any, zp_mode: str) -> None:
    rng = np.random.default_rng([PAIRS.index((xt, wt)), len(zp_mode), 23])
    x, w = _grouped(rng, (2, 8, 13, 20), 8, 2, (3, 3), xt, wt)  # C/G 4, M/G 4
    zx = 0 if zp_mode == "none" else _zp(rng, xt)
    zw = zero_points(rng, zp_mode, wt, 8)
    plan = _band(_check(x, w, zx, zw, (1, 1), (1, 1), (1, 1), groups=2))
    assert plan.words and plan.tt == 4


@pytest.mark.parametrize(
    ("k", "strides", "start", "end"),
    [
        ((3, 3), (1, 1), (0, 0), (0, 0)),
        ((3, 3), (1, 1), (2, 5), (4, 1)),
        ((3, 3), (2, 2), (1, 1), (1, 1)),
        ((5, 5), (2, 1), (1, 4), (3, 0)),
    ],
)
@pytest.mark.parametrize("width", [8, 7, 61])
@pytest.mark.parametrize(("cg", "mg"), [(2, 3), (4, 1), (4, 2)])
def test_groups_geometry(
    k: Any, strides: Any, start: Any, end: Any, width: int, cg: int, mg: int
) -> None:
    rng = np.random.default_rng([width, cg, mg, *k, *strides, *start])
    g = 2
    x, w = _grouped(rng, (2, cg * g, 11, width), mg * g, g, k, np.uint8, np.int8)
    zw = rng.integers(-128, 128, mg * g).astype(np.int32)
    plan = _band(_check(x, w, 131, zw, strides, start, end, groups=g))
    assert plan.words == (width % 4 == 0)


@pytest.mark.parametrize(("wt", "zw0"), DP4A_FILTERS)
@pytest.mark.parametrize("cg", [2, 4])
def test_groups_dp4a_batch_one(wt: Any, zw0: int, cg: int) -> None:
    rng = np.random.default_rng([cg, int(zw0)])
    x, w = _grouped(rng, (1, 3 * cg, 10, 16), 6, 3, (3, 3), np.int8, wt)
    zx = -5
    plan = _band(_check(x, w, zx, np.full(6, zw0, np.int32), (1, 1), (1, 2), (1, 1), groups=3))
    assert plan.dp4a


@pytest.mark.parametrize(
    "view",
    [
        lambda a: a[:, :, 1:, 3:],
        lambda a: a[:, :, 1:, 4:],
        lambda a: a[:, :, :, ::-1],
        lambda a: a[:, ::-1],  # channels reversed (negative channel stride)
        lambda a: a.transpose(0, 2, 3, 1).copy().transpose(0, 3, 1, 2),
    ],
    ids=["offset3", "offset4", "reversed", "channels_reversed", "nhwc"],
)
def test_groups_views(view: Callable[[Any], Any]) -> None:
    rng = np.random.default_rng(29)
    x, w = _grouped(rng, (2, 8, 9, 29), 4, 4, (3, 3), np.uint8, np.int8)  # C/G 2, M/G 1
    zw = rng.integers(-128, 128, 4).astype(np.int32)
    _band(_check(x, w, 140, zw, (1, 1), (1, 1), (1, 1), view, groups=4))


@pytest.mark.parametrize("cg", [3, 12])  # (8, 16 and 32 take the grouped kernel)
def test_other_group_widths_keep_the_tiled_kernel(cg: int) -> None:
    rng = np.random.default_rng(cg)
    x, w = _grouped(rng, (1, 2 * cg, 9, 12), 4, 2, (3, 3), np.uint8, np.int8)
    what = _check(x, w, 128, np.zeros(4, np.int32), (1, 1), (1, 1), (1, 1), groups=2)
    assert isinstance(what, launcher("convolution_integer").TiledPlan)


def test_groups_tiled_kernel_still_forceable() -> None:
    rng = np.random.default_rng(31)
    conv = launcher("convolution_integer")
    x, w = _grouped(rng, (2, 8, 9, 12), 8, 2, (3, 3), np.uint8, np.int8)
    options = conv.Options(depthwise=False)
    what = _check(
        x, w, 128, np.zeros(8, np.int32), (1, 1), (1, 1), (1, 1), options=options, groups=2
    )
    assert isinstance(what, conv.TiledPlan)
