"""CuPy CONVOLUTION_INTEGER grouped kernel (3x3, groups of 8/16/32 input channels and at most
16 output channels, whole images in shared memory) against the NumPy reference, bit-exact;
every test checks which kernel ran."""

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

_PAD1 = ((1, 1), (1, 1), (1, 1), (1, 1))  # strides, dilations, start and end padding


def _check(
    x: np.ndarray,
    w: np.ndarray,
    zx: int,
    zw: np.ndarray,
    geometry: Any = _PAD1,
    groups: int = 1,
    view: Callable[[Any], Any] | None = None,
    w_view: Callable[[Any], Any] | None = None,
    options: Any = None,
) -> Any:
    """Ours against the reference (`check`), padding 1 and one group unless given; returns
    what ran."""
    return check(x, w, zx, zw, *geometry, groups, view, w_view, options)


def _grouped(what: Any) -> Any:
    assert isinstance(what, launcher("convolution_integer").GroupedPlan), what
    return what


@pytest.mark.parametrize(("xt", "wt"), PAIRS)
@pytest.mark.parametrize("zp_mode", ["none", "tensor", "channel"])
def test_signedness_and_zero_points(xt: Any, wt: Any, zp_mode: str) -> None:
    rng = np.random.default_rng([PAIRS.index((xt, wt)), len(zp_mode), 5])
    x = _rand(rng, (2, 64, 9, 10), xt)
    w = _rand(rng, (64, 16, 3, 3), wt)
    zx = 0 if zp_mode == "none" else _zp(rng, xt)
    zw = zero_points(rng, zp_mode, wt, 64)
    plan = _grouped(_check(x, w, zx, zw, groups=4))
    assert plan.ctas_per_image == 1 and plan.zw_any == (zp_mode != "none") and not plan.words
    x = _rand(rng, (2, 64, 9, 12), xt)  # planes of 108 bytes: word loads
    assert _grouped(_check(x, w, zx, zw, groups=4)).words


@pytest.mark.parametrize(("xt", "wt"), PAIRS)
def test_extreme_zero_points(xt: Any, wt: Any) -> None:
    rng = np.random.default_rng(PAIRS.index((xt, wt)) + 50)
    x = _rand(rng, (1, 32, 6, 7), xt)
    w = _rand(rng, (6, 16, 3, 3), wt)
    wi = np.iinfo(wt)
    zw = np.resize(np.array([wi.min, wi.max, 0], np.int32), 6)
    for zx in (int(np.iinfo(xt).min), int(np.iinfo(xt).max)):
        _grouped(_check(x, w, zx, zw, groups=2))


@pytest.mark.parametrize("cg", [8, 16, 32])
@pytest.mark.parametrize(("mg", "groups"), [(1, 3), (5, 5), (8, 4), (16, 6)])
def test_group_shapes(cg: int, mg: int, groups: int) -> None:
    """Every compiled group width with 1-16 outputs per group, and group counts that leave
    the last CTA's 4 groups partly empty."""
    rng = np.random.default_rng(cg * 100 + mg * 10 + groups)
    x = _rand(rng, (2, cg * groups, 7, 9), np.uint8)
    w = _rand(rng, (mg * groups, cg, 3, 3), np.int8)
    zw = rng.integers(-128, 128, mg * groups).astype(np.int32)
    plan = _grouped(_check(x, w, 128, zw, groups=groups))
    assert plan.ctas_per_image == -(-groups // 4)


@pytest.mark.parametrize(
    "geometry",
    [
        ((1, 1), (1, 1), (0, 0), (0, 0)),  # no padding
        ((2, 2), (1, 1), (1, 1), (1, 1)),  # stride 2
        ((1, 2), (2, 1), (2, 0), (1, 3)),  # dilation, asymmetric padding
        ((2, 1), (1, 3), (4, 3), (0, 2)),  # padding wider than the window reaches
        ((3, 3), (2, 2), (0, 1), (2, 0)),
    ],
)
def test_geometry(geometry: Any) -> None:
    rng = np.random.default_rng(sum(sum(v) for v in geometry))
    x = _rand(rng, (3, 32, 11, 13), np.int8)
    w = _rand(rng, (24, 16, 3, 3), np.int8)
    zw = rng.integers(-128, 128, 24).astype(np.int32)
    _grouped(_check(x, w, -9, zw, geometry, groups=2))


def test_odd_output_planes() -> None:
    """Output planes of an odd pixel count: the kernel stores pixels one by one."""
    rng = np.random.default_rng(3)
    x = _rand(rng, (3, 64, 7, 7), np.uint8)
    w = _rand(rng, (64, 16, 3, 3), np.uint8)
    zw = rng.integers(0, 256, 64).astype(np.int32)
    _grouped(_check(x, w, 200, zw, groups=4))


@pytest.mark.parametrize(
    ("view", "w_view", "words"),
    [
        (lambda a: a[:, ::-1], None, True),  # reversed channels
        (lambda a: a[:, 5:], None, True),  # planes from the sixth on
        (lambda a: a.transpose(0, 2, 3, 1).copy().transpose(0, 3, 1, 2), None, False),  # NHWC
        (lambda a: a[:, :, :, ::2], lambda a: a[:, ::-1], False),  # strided rows
        (lambda a: a[::2], lambda a: a.transpose(0, 2, 3, 1).copy().transpose(0, 3, 1, 2), True),
        (lambda a: a[:, :, :, 1:9], None, False),  # rows inside wider rows
    ],
)
def test_views(
    view: Callable[[Any], Any], w_view: Callable[[Any], Any] | None, words: bool
) -> None:
    rng = np.random.default_rng(9)
    x = _rand(rng, (4, 53, 8, 12), np.uint8)
    channels = view(np.zeros((1, 53, 1, 12))).shape[1]
    w = _rand(rng, (48, 16, 3, 3), np.int8)
    zw = rng.integers(-128, 128, 48).astype(np.int32)
    if channels != 48:  # the view keeps 53 channels: use the first 48
        inner = view
        view = lambda a: inner(a)[:, :48]  # noqa: E731
    assert _grouped(_check(x, w, 77, zw, groups=3, view=view, w_view=w_view)).words == words


@pytest.mark.parametrize("wd", [4, 5, 8])
def test_word_rows_wrap(wd: int) -> None:
    """Word loads whose 4 pixels run into the next row (W not a multiple of 4), and the
    narrowest rows they take; W = 5 with 4 rows is 20 bytes a plane."""
    rng = np.random.default_rng(wd)
    x = _rand(rng, (2, 32, 4, wd), np.int8)
    w = _rand(rng, (32, 16, 3, 3), np.int8)
    zw = rng.integers(-128, 128, 32).astype(np.int32)
    assert _grouped(_check(x, w, -1, zw, groups=2)).words


@pytest.mark.parametrize(
    ("hw", "geometry", "words"),
    [
        ((12, 12), ((2, 2), (1, 1), (0, 0), (0, 0)), False),  # the last row and column unread
        ((12, 12), ((2, 2), (1, 1), (1, 1), (1, 1)), True),  # every pixel in the frame
        ((64, 4), ((64, 1), (1, 1), (0, 0), (0, 0)), False),  # one output row of 64 input rows
    ],
)
def test_word_loads_need_the_whole_image_in_the_frame(
    hw: tuple[int, int], geometry: Any, words: bool
) -> None:
    """Word loads place every pixel of the image in the frame; where the strides leave input
    rows or columns that no tap reads, the frame is smaller than the image and the bytes are
    gathered instead."""
    rng = np.random.default_rng(hw[0] + hw[1])
    x = _rand(rng, (2, 32, *hw), np.int8)
    w = _rand(rng, (32, 16, 3, 3), np.int8)
    zw = rng.integers(-128, 128, 32).astype(np.int32)
    assert _grouped(_check(x, w, 5, zw, geometry, groups=2)).words == words


def test_int32_wraps() -> None:
    rng = np.random.default_rng(6)
    x = rng.integers(200, 256, (1, 64, 4, 4)).astype(np.uint8)
    w = rng.integers(-128, -100, (32, 32, 3, 3)).astype(np.int8)
    zw = np.full(32, 2**24 + 3, np.int32)  # sums far past 32 bits
    _grouped(_check(x, w, 0, zw, groups=2))


@pytest.mark.parametrize(
    ("shape", "w_shape", "groups", "zx"),
    [
        ((1, 64, 8, 8), (64, 16, 3, 3), 4, 300),  # z_x no uint8 holds: no z_x padding
        ((1, 64, 70, 70), (64, 32, 3, 3), 2, 0),  # a frame beyond shared memory
        ((1, 64, 8, 8), (64, 4, 3, 3), 16, 0),  # 4 channels a group: the band kernel
        ((1, 64, 8, 8), (68, 16, 3, 3), 4, 0),  # 17 outputs a group
        ((1, 64, 8, 8), (64, 16, 5, 5), 4, 0),  # 5x5
    ],
)
def test_outside_shapes_take_other_kernels(
    shape: tuple[int, ...], w_shape: tuple[int, ...], groups: int, zx: int
) -> None:
    rng = np.random.default_rng(groups)
    x = _rand(rng, shape, np.uint8)
    w = _rand(rng, w_shape, np.int8)
    zw = np.zeros(w_shape[0], np.int32)
    what = _check(x, w, zx, zw, groups=groups)
    assert not isinstance(what, launcher("convolution_integer").GroupedPlan)


def test_option_keeps_the_previous_path() -> None:
    conv = launcher("convolution_integer")
    rng = np.random.default_rng(2)
    x = _rand(rng, (2, 64, 6, 6), np.uint8)
    w = _rand(rng, (64, 16, 3, 3), np.int8)
    zw = np.zeros(64, np.int32)
    assert _check(x, w, 128, zw, groups=4, options=conv.Options(grouped=False)) in (
        "wgmma",
        "mma_sync",
    )
