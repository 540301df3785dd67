"""CuPy CONVOLUTION_INTEGER: the shifted-window wgmma GEMM (nine taps, channels per group a
multiple of 32), on a transformed input (stride 1) and reading the input where it lies
("gather": NCHW planes of H * W consecutive bytes, at any alignment, or (N, H, W, C) pixels
whose channel blocks lie on 16 bytes; strides of 1 or 2), against the NumPy reference,
bit-exact, each call asserting which of them ran. It runs on compute
capability 9.0 only; elsewhere these shapes take the mma.sync GEMM and the tests say so."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from ._conv_support import (
    PAIRS,
    chained_calls,
    channels_last,
    check,
    dependent_launches,
    random_int8,
    random_zero_point,
    zero_points,
)
from ._support import launcher

pytestmark = pytest.mark.gpu


def _expected(gathered: bool = False) -> str:
    """What runs: the GEMM reading the input where it lies (`gathered`) or transformed."""
    import cupy

    if str(cupy.cuda.Device().compute_capability) != "90":
        return "mma_sync"
    return "wgmma_shift_gather" if gathered else "wgmma_shift"


def _tiles() -> list[tuple[int, int, int]]:
    gemm = launcher("_convolution_integer_gemm")
    return [(wm, wn, bn) for wm, wn, bn, *_ in gemm.SHIFT_TILES]


def _options(
    tile: tuple[int, int, int] | None = None,
    gather: bool | None = True,
    shared: bool | None = None,
) -> Any:
    """A forced tile runs unsplit (the plain stores); the planner may split K otherwise.
    `shared`: the virtual pixels' pads shared (None: as the planner chooses)."""
    options = launcher("convolution_integer").Options
    if tile is None:
        return options(gather=gather, shared_pads=shared)
    return options(shifted=tile, gather=gather, split_k=1, shared_pads=shared)


def _gemm_plans(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """A list that gets each GEMM plan run from now on (each still runs)."""
    gemm = launcher("_convolution_integer_gemm")
    plans: list[Any] = []
    run = gemm._run

    def recorded(plan: Any, *args: Any) -> None:
        plans.append(plan)
        run(plan, *args)

    monkeypatch.setattr(gemm, "_run", recorded)
    return plans


# (input read in place, pads shared): the transformed input never shares them
GRIDS = [(True, False), (True, True), (False, None)]


@pytest.mark.parametrize("gather", [True, False])
@pytest.mark.parametrize(("xt", "wt"), PAIRS)
@pytest.mark.parametrize("zp_mode", ["none", "tensor", "channel"])
def test_signedness_and_zero_points(xt: Any, wt: Any, zp_mode: str, gather: bool) -> None:
    rng = np.random.default_rng([PAIRS.index((xt, wt)), len(zp_mode), 13])
    x = random_int8(rng, (2, 64, 12, 11), xt)
    w = random_int8(rng, (72, 64, 3, 3), wt)
    zx = 0 if zp_mode == "none" else random_zero_point(rng, xt)
    zw = zero_points(rng, zp_mode, wt, 72)
    options = _options(gather=gather)
    what = check(x, w, zx, zw, (1, 1), (1, 1), (1, 1), (1, 1), 1, options=options)
    assert what == _expected(gather)


@pytest.mark.parametrize(("gather", "shared"), GRIDS)
@pytest.mark.parametrize("tile", _tiles())
@pytest.mark.parametrize(
    ("shape", "k", "dilations", "start", "end", "groups"),
    [
        ((2, 64, 28, 28, 128), (3, 3), (1, 1), (1, 1), (1, 1), 1),  # ResNet-like
        ((1, 96, 13, 9, 40), (3, 3), (2, 1), (2, 0), (1, 3), 1),  # odd sizes, 40 outputs
        ((3, 64, 7, 7, 200), (3, 3), (1, 1), (1, 1), (1, 1), 2),  # groups of 32, 100 outputs each
        ((2, 32, 30, 17, 64), (3, 3), (1, 2), (0, 0), (0, 0), 1),  # no padding
        ((2, 32, 5, 40, 24), (1, 9), (1, 1), (0, 4), (0, 4), 1),  # a 1 x 9 window
        ((1, 64, 21, 3, 16), (9, 1), (2, 1), (9, 0), (7, 0), 1),  # 9 x 1, padding past it
        ((1, 96, 12, 9, 40), (3, 3), (2, 1), (2, 0), (1, 3), 1),  # odd sizes, 108 pixels a plane
        ((3, 64, 6, 6, 200), (3, 3), (1, 1), (1, 1), (1, 1), 2),  # groups, 36 pixels a plane
    ],
)
def test_tiles_and_geometry(
    tile: tuple[int, int, int],
    shape: tuple[int, ...],
    k: tuple[int, int],
    dilations: tuple[int, int],
    start: tuple[int, int],
    end: tuple[int, int],
    groups: int,
    gather: bool,
    shared: bool | None,
) -> None:
    n, c, h, wd, m = shape
    rng = np.random.default_rng([*shape, *tile])
    x = random_int8(rng, (n, c, h, wd), np.uint8)
    w = random_int8(rng, (m, c // groups, *k), np.int8)
    options = _options(tile, gather, shared)
    for zw in (np.zeros(m, np.int32), rng.integers(-128, 128, m).astype(np.int32)):
        what = check(x, w, 128, zw, (1, 1), dilations, start, end, groups, options=options)
        assert what == _expected(gather)


@pytest.mark.parametrize(
    ("view", "gathered"),
    [
        (lambda a: a[:, 32:96], True),  # a channel slice: its planes stay whole and aligned
        (lambda a: a.transpose(0, 2, 3, 1).copy().transpose(0, 3, 1, 2), True),  # NHWC storage
        (lambda a: a[:, :, 1:, ::2], False),  # strided rows and columns
        (lambda a: a[:, :, 1:], True),  # planes of 14 whole rows, still 16-byte aligned
        (lambda a: a.reshape(-1)[2 : 2 + 2 * 128 * 224].reshape(2, 128, 14, 16), True),  # 2-byte
        (lambda a: a[::-1, ::-1], True),  # images and channels backwards: negative strides
    ],
    ids=["channels", "nhwc", "strided", "rows", "unaligned", "backwards"],
)
def test_views(view: Callable[[Any], Any], gathered: bool) -> None:
    rng = np.random.default_rng(4)
    x = random_int8(rng, (2, 128, 15, 16), np.int8)
    c = view(np.zeros((2, 128, 15, 16), np.int8)).shape[1]
    w = random_int8(rng, (64, c, 3, 3), np.uint8)
    zw = rng.integers(0, 256, 64).astype(np.int32)
    what = check(x, w, -5, zw, (1, 1), (1, 1), (1, 1), (1, 1), 1, view=view, options=_options())
    assert what == _expected(gathered)


@pytest.mark.parametrize("tile", _tiles())
@pytest.mark.parametrize(
    ("shape", "take", "split"),
    [
        ((2, 96, 7, 7), "last", 1),  # 49-byte planes, the last one ending the allocation
        ((2, 96, 7, 7), "last", 2),  # splits of two chunks and of one
        ((1, 64, 5, 9), 1, 1),  # 45-byte planes from an odd address
        ((3, 64, 6, 6), 3, 1),  # 36-byte planes, each 3 bytes into a word
        ((2, 128, 3, 5), 2, 1),  # 15-byte planes, 4 chunks
        ((2, 64, 5, 7), "padded", 1),  # 35-byte planes 36 bytes apart: words, the last partial
        ((2, 64, 5, 7), "backwards", 1),  # 35-byte planes, images and channels backwards
    ],
)
def test_unaligned_planes(
    tile: tuple[int, int, int], shape: tuple[int, int, int, int], take: int | str, split: int
) -> None:
    """Planes that start anywhere in a word and hold any number of pixels are read where they
    lie (each word of 4 pixels from the two aligned words around it, a plane's first and last
    words byte by byte), no load leaving the planes: under memcheck, a last plane that ends the
    allocation shows any read past it."""
    n, c, h, wd = shape
    rng = np.random.default_rng([*shape, split, *tile])
    if take == "padded":  # the last plane's last word ends the allocation, mid-word
        x = random_int8(rng, (n * c * (h * wd + 1) - 1,), np.uint8)

        def view(a: Any) -> Any:
            import cupy

            pitch = h * wd + 1
            strides = (c * pitch, pitch, wd, 1)
            return cupy.lib.stride_tricks.as_strided(a, shape=shape, strides=strides)

    elif take == "backwards":
        x = random_int8(rng, shape, np.uint8)

        def view(a: Any) -> Any:
            return a[::-1, ::-1]

    else:
        size = n * c * h * wd
        x = random_int8(rng, (size + 5,), np.uint8)
        start = 5 if take == "last" else int(take)

        def view(a: Any) -> Any:
            return a[start : start + size].reshape(shape)

    w = random_int8(rng, (40, c, 3, 3), np.int8)
    zw = zero_points(rng, "channel", np.int8, 40)
    options = launcher("convolution_integer").Options(
        shifted=tile, gather=True, split_k=split, shared_pads=True
    )
    geometry = ((1, 1), (1, 1), (1, 1), (1, 1), 1)
    what = check(x, w, random_zero_point(rng, np.uint8), zw, *geometry, view=view, options=options)
    assert what == _expected(gathered=True)


@pytest.mark.parametrize(
    ("tile", "split"), [((2, 1, 128), 1), ((2, 1, 128), 2), ((1, 1, 64), 1), ((2, 1, 224), 2)]
)
@pytest.mark.parametrize(("shape", "m"), [((5, 96, 7, 7), 72), ((3, 64, 5, 5), 40)])
def test_planes_off_words_copied_in_whole(
    tile: tuple[int, int, int],
    split: int,
    shape: tuple[int, int, int, int],
    m: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Planes not on words that lie back to back from a 16-byte boundary: each image's
    channels of a split come into shared memory as one block, where the planner leaves room
    for it past the rest (an image's split of channels, 32 bytes more), and its run's items
    are read from there, over several images a run; the same planes a byte apart are read
    word by word from the input and get no such room. Both exact, in a cluster (128-pixel
    tiles) and by atomic adds (224)."""
    import cupy

    plans = _gemm_plans(monkeypatch)
    n, c, h, wd = shape
    rng = np.random.default_rng([*shape, m, split, *tile])
    pitch = h * wd + 1
    x = random_int8(rng, (n * c * pitch,), np.uint8)
    dense = x[: n * c * h * wd].reshape(shape)

    def apart(a: Any) -> Any:
        return cupy.lib.stride_tricks.as_strided(a, shape=shape, strides=(c * pitch, pitch, wd, 1))

    w = random_int8(rng, (m, c, 3, 3), np.int8)
    zw = zero_points(rng, "channel", np.int8, m)
    options = launcher("convolution_integer").Options(
        shifted=tile, gather=True, split_k=split, shared_pads=True
    )
    geometry = ((1, 1), (1, 1), (1, 1), (1, 1), 1)
    for x_in, view in ((dense, None), (x, apart)):
        what = check(x_in, w, 77, zw, *geometry, view=view, options=options)
        assert what == _expected(gathered=True)
    if _expected() == "wgmma_shift":
        room = 32 * -(-(c // 32) // split) * h * wd + 32
        assert [p.gemm.shared_mem for p in plans] == [
            plans[1].gemm.shared_mem + room,
            plans[1].gemm.shared_mem,
        ]
        # the room costs no cluster here: the splits of 128-pixel tiles meet in shared memory
        assert [p.zero_out for p in plans] == [split > 1 and tile[2] > 128] * 2


def test_room_before_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the whole-block room and a K split's cluster do not both fit (two 128-pixel CTAs
    an SM, 512 channels split in four), the room is kept and the splits meet by atomic adds;
    the same planes a byte apart (no room) keep the cluster. Both exact."""
    import cupy

    plans = _gemm_plans(monkeypatch)
    shape = (2, 512, 7, 7)
    n, c, h, wd = shape
    rng = np.random.default_rng(47)
    pitch = h * wd + 1
    x = random_int8(rng, (n * c * pitch,), np.uint8)
    dense = x[: n * c * h * wd].reshape(shape)

    def apart(a: Any) -> Any:
        return cupy.lib.stride_tricks.as_strided(a, shape=shape, strides=(c * pitch, pitch, wd, 1))

    w = random_int8(rng, (40, c, 3, 3), np.int8)
    zw = zero_points(rng, "tensor", np.int8, 40)
    options = launcher("convolution_integer").Options(
        shifted=(1, 1, 128), gather=True, split_k=4, shared_pads=True
    )
    geometry = ((1, 1), (1, 1), (1, 1), (1, 1), 1)
    for x_in, view in ((dense, None), (x, apart)):
        what = check(x_in, w, 77, zw, *geometry, view=view, options=options)
        assert what == _expected(gathered=True)
    if _expected() == "wgmma_shift":
        # the room (6304 bytes) outweighs what the cluster's received sums add over the run
        # (5888): the dense plan's memory is the larger, where the cluster would have made
        # the two equal
        assert plans[0].gemm.shared_mem > plans[1].gemm.shared_mem
        assert [p.zero_out for p in plans] == [True, False]


@pytest.mark.parametrize(
    ("shape", "m", "tile", "zp_mode", "items"),
    [
        ((2, 64, 56, 56), 64, (1, 1, 224), "tensor", 3),  # ~2.5 items a thread, two images
        ((2, 96, 24, 24), 40, (1, 1, 224), "channel", 3),  # three chunks, rows past the block
        ((2, 64, 12, 12), 64, (1, 1, 224), "tensor", 2),  # under 2 a thread
        ((3, 128, 20, 60), 72, (2, 1, 224), "channel", 2),  # ~2.4 a thread, two warpgroups
    ],
)
@pytest.mark.parametrize(("xt", "wt"), [PAIRS[0], PAIRS[3]])
def test_gather_items_a_thread_at_a_time(
    shape: tuple[int, int, int, int],
    m: int,
    tile: tuple[int, int, int],
    zp_mode: str,
    items: int,
    xt: Any,
    wt: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On one warpgroup's 224-pixel tile, where 3 items a gather thread at a time take a round
    of loads fewer than 2, the launch asks for 3; exact either way (images met mid-run, the
    last round's items partly past the image, per-channel zero points)."""
    modes = _gather_modes(monkeypatch)
    rng = np.random.default_rng([shape[1], m, 48])
    x = random_int8(rng, shape, xt)
    w = random_int8(rng, (m, shape[1], 3, 3), wt)
    zw = zero_points(rng, zp_mode, wt, m)
    geometry = ((1, 1), (1, 1), (1, 1), (1, 1), 1)
    options = _options(tile, shared=False)
    what = check(x, w, random_zero_point(rng, xt), zw, *geometry, options=options)
    assert what == _expected(gathered=True)
    if _expected() == "wgmma_shift":
        # the planner also plans the transformed input (0)
        assert set(modes) - {0} == {items}


@pytest.mark.parametrize(("gather", "shared"), GRIDS)
@pytest.mark.parametrize(
    ("shape", "m", "dilations", "start", "end", "groups"),
    [
        ((12, 64, 4, 4), 40, (1, 1), (1, 1), (1, 1), 1),  # each run spans many images
        ((40, 32, 3, 3), 32, (1, 1), (1, 1), (1, 1), 1),  # more images a run than a pass takes
        ((2, 20, 8, 8), 24, (1, 1), (1, 1), (1, 1), 1),  # 20 channels: 12 padded ones are z_x
        ((2, 48, 8, 10), 40, (1, 1), (1, 1), (1, 1), 2),  # groups of 24 channels
        ((2, 32, 12, 10), 36, (2, 1), (2, 0), (1, 3), 1),  # dilation, uneven padding
        ((2, 32, 8, 12), 32, (1, 1), (0, 0), (0, 0), 1),  # no padding: no frame at all
        ((1, 32, 8, 8), 32, (1, 2), (4, 3), (3, 5), 1),  # padding wider than the window
        ((1, 32, 4, 4), 32, (1, 1), (5, 5), (5, 5), 1),  # padding wider than the image
        ((2, 64, 8, 8), 40, (1, 1), (1, 1), (1, 1), 1),  # two chunks: CTAs start at either
        ((1, 64, 1, 36), 48, (1, 1), (1, 1), (1, 1), 1),  # one-row planes
        ((2, 32, 9, 7), 32, (1, 1), (0, 2), (2, 0), 1),  # end pads on rows, start on columns
    ],
)
def test_gathered_inputs(
    shape: tuple[int, int, int, int],
    m: int,
    dilations: tuple[int, int],
    start: tuple[int, int],
    end: tuple[int, int],
    groups: int,
    gather: bool,
    shared: bool | None,
) -> None:
    """The GEMM reading an NCHW input where it lies: the z_x frame, padded channels and runs
    across images come out as from the transformed input, for every zero-point mode, with the
    virtual pixels' pads shared by neighbouring rows and images or not."""
    rng = np.random.default_rng([*shape, m, groups])
    x = random_int8(rng, shape, np.uint8)
    w = random_int8(rng, (m, shape[1] // groups, 3, 3), np.int8)
    for zp_mode in ("none", "tensor", "channel"):
        zx = 0 if zp_mode == "none" else random_zero_point(rng, np.uint8)
        zw = zero_points(rng, zp_mode, np.int8, m)
        geometry = ((1, 1), dilations, start, end, groups)
        what = check(x, w, zx, zw, *geometry, options=_options(gather=gather, shared=shared))
        assert what == _expected(gather)


@pytest.mark.parametrize("shared", [False, True])
@pytest.mark.parametrize("width", [600, 601])
@pytest.mark.parametrize(("channels", "strides"), [(32, (1, 1)), (20, (1, 1)), (20, (2, 2))])
def test_gathered_rows_wider_than_the_threads(
    width: int, shared: bool, channels: int, strides: tuple[int, int]
) -> None:
    """Rows so wide that an image's words in a run outnumber the CTA's threads: each thread
    walks several words of a block, and of the next blocks, read in place from planes on words
    (600) and not (601); with every channel of a 16-channel block there (32) or the last block
    partly padding (20), at unit strides or through phase planes. The input transformed would
    not fit shared memory."""
    rng = np.random.default_rng([width, channels, *strides])
    x = random_int8(rng, (1, channels, 3, width), np.uint8)
    w = random_int8(rng, (32, channels, 3, 3), np.int8)
    zx = random_zero_point(rng, np.uint8)
    zw = zero_points(rng, "channel", np.int8, 32)
    geometry = (strides, (1, 1), (1, 1), (1, 1), 1)
    what = check(x, w, zx, zw, *geometry, options=_options(gather=True, shared=shared))
    assert what == _expected(gathered=True)


def _gather_modes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A list that gets, for each shifted-window GEMM planned from now on, its gather mode (the
    kernel's GI, its template argument after WT, XT, WM, WN, BN, stages, ZW and taps: 0 a
    transformed input, 1 (N, H, W, C) pixels, 2 or 3 NCHW items a gather thread at a time)."""
    gemm = launcher("_convolution_integer_gemm")
    modes: list[int] = []
    real = gemm.launch

    def recorded(source: str, name: str, *template: Any, **kwargs: Any) -> Any:
        if name == "conv_int_wgmma_shift":
            modes.append(int(template[8]))
        return real(source, name, *template, **kwargs)

    monkeypatch.setattr(gemm, "launch", recorded)
    gemm._plan.cache_clear()  # planned again, through the recorded launch
    return modes


@pytest.mark.parametrize("pad", [0, 1])
@pytest.mark.parametrize("zp_mode", ["none", "channel"])
@pytest.mark.parametrize("gather", [None, True, False])
def test_channels_last_input(
    pad: int, zp_mode: str, gather: bool | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An input stored (N, H, W, C) is read where it lies, padded or not: gathered, each
    pixel's 16-byte channel blocks copied as they are (the planner's choice with padding, where
    the other form would transform the input first); without the gather, only an input that
    needs no frame is read in place, any other through the transform."""
    plans = _gemm_plans(monkeypatch)
    modes = _gather_modes(monkeypatch)
    rng = np.random.default_rng([pad, len(zp_mode)])
    x = random_int8(rng, (2, 64, 9, 10), np.uint8)
    w = random_int8(rng, (48, 64, 3, 3), np.int8)
    zw = zero_points(rng, zp_mode, np.int8, 48)
    geometry = ((1, 1), (1, 1), (pad, pad), (pad, pad), 1)
    options = _options(gather=gather)
    what = check(x, w, 3, zw, *geometry, view=channels_last(), options=options)
    if gather is None:
        assert what in (_expected(gathered=True), _expected())
        if pad == 1:
            assert what == _expected(gathered=True)
    else:
        assert what == _expected(gather)
    if _expected() == "wgmma_shift":
        (plan,) = plans
        assert plan.xn_shape is None or (pad == 1 and not gather)  # no pass but for the frame
        if what == "wgmma_shift_gather":
            assert modes[-1] == 1


@pytest.mark.parametrize("shared", [True, False])
@pytest.mark.parametrize(
    ("shape", "m", "strides", "dilations", "start", "end", "groups", "spare"),
    [
        ((2, 64, 28, 28), 128, (1, 1), (1, 1), (1, 1), (1, 1), 1, 0),  # ResNet-like
        ((12, 64, 4, 4), 40, (1, 1), (1, 1), (1, 1), (1, 1), 1, 16),  # runs over many images
        ((2, 64, 12, 10), 40, (1, 1), (1, 1), (1, 1), (1, 1), 2, 16),  # groups of 32 channels
        ((2, 96, 12, 10), 36, (1, 1), (2, 1), (2, 0), (1, 3), 1, 0),  # dilation, uneven pads
        ((2, 32, 8, 12), 32, (1, 1), (1, 1), (0, 0), (0, 0), 1, 32),  # no padding: no frame
        ((1, 32, 8, 8), 32, (1, 1), (1, 2), (4, 3), (3, 5), 1, 0),  # pads wider than the window
        ((1, 64, 1, 36), 48, (1, 1), (1, 1), (1, 1), (1, 1), 1, 0),  # one-row images
        ((2, 128, 15, 16), 64, (2, 2), (1, 1), (1, 1), (1, 1), 1, 0),  # strides of 2
        ((3, 64, 13, 11), 40, (2, 1), (1, 1), (1, 1), (1, 1), 2, 16),  # one stride of 2, groups
        ((1, 64, 9, 14), 72, (1, 2), (2, 2), (2, 2), (2, 1), 1, 0),  # the other, dilated
        ((2, 160, 11, 12), 40, (2, 2), (1, 1), (1, 1), (1, 1), 1, 16),  # 5 chunks in sets of
        # 3 and 2: 6 blocks, not a divisor of the threads (each slot's pixel found by divisions)
    ],
)
def test_channels_last_read_where_it_lies(
    shape: tuple[int, int, int, int],
    m: int,
    strides: tuple[int, int],
    dilations: tuple[int, int],
    start: tuple[int, int],
    end: tuple[int, int],
    groups: int,
    spare: int,
    shared: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """(N, H, W, C) pixels read where they lie over every geometry the gather takes: the frame
    and pixels past the input z_x, groups' channel blocks at their offsets, pixels 16 channels
    or more apart beyond C (junk there), strides of 2 through phase planes; both zero-point
    forms of the filter, exact, the launch asking for the pixel copies."""
    modes = _gather_modes(monkeypatch)
    n, c, h, wd = shape
    rng = np.random.default_rng([*shape, m, *strides, spare])
    x = random_int8(rng, shape, np.uint8)
    w = random_int8(rng, (m, c // groups, 3, 3), np.int8)
    geometry = (strides, dilations, start, end, groups)
    options = _options(gather=True, shared=shared if strides == (1, 1) else None)
    for zw in (np.zeros(m, np.int32), rng.integers(-128, 128, m).astype(np.int32)):
        zx = random_zero_point(rng, np.uint8)
        what = check(x, w, zx, zw, *geometry, view=channels_last(spare), options=options)
        assert what == _expected(gathered=True)
    if _expected() == "wgmma_shift":
        assert set(modes) - {0} == {1}  # (the planner also plans the transformed input)


@pytest.mark.parametrize("tile", _tiles())
@pytest.mark.parametrize(("xt", "wt"), PAIRS)
def test_channels_last_every_tile(
    tile: tuple[int, int, int], xt: Any, wt: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every tile and signedness pair on (N, H, W, C) pixels, per-channel zero points: images
    met mid-run, a partial block of output channels."""
    modes = _gather_modes(monkeypatch)
    rng = np.random.default_rng([*tile, PAIRS.index((xt, wt)), 61])
    x = random_int8(rng, (3, 64, 11, 13), xt)
    w = random_int8(rng, (72, 64, 3, 3), wt)
    zw = zero_points(rng, "channel", wt, 72)
    geometry = ((1, 1), (1, 1), (1, 1), (1, 1), 1)
    zx = random_zero_point(rng, xt)
    what = check(x, w, zx, zw, *geometry, view=channels_last(16), options=_options(tile))
    assert what == _expected(gathered=True)
    if _expected() == "wgmma_shift":
        assert set(modes) - {0} == {1}  # (the planner also plans the transformed input)


@pytest.mark.parametrize(("tile", "split"), [((2, 1, 128), 2), ((2, 1, 224), 2), ((1, 1, 64), 3)])
def test_channels_last_split_k(
    tile: tuple[int, int, int], split: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """K split over CTAs on (N, H, W, C) pixels (in a cluster on 128-pixel tiles, by atomic
    adds on 224-pixel ones): each split copies its own channel blocks of each pixel."""
    plans = _gemm_plans(monkeypatch)
    rng = np.random.default_rng([*tile, split, 62])
    x = random_int8(rng, (2, 192, 14, 14), np.int8)
    w = random_int8(rng, (64, 192, 3, 3), np.uint8)
    zw = zero_points(rng, "tensor", np.uint8, 64)
    options = launcher("convolution_integer").Options(
        shifted=tile, gather=True, split_k=split, shared_pads=True
    )
    geometry = ((1, 1), (1, 1), (1, 1), (1, 1), 1)
    what = check(x, w, -9, zw, *geometry, view=channels_last(32), options=options)
    assert what == _expected(gathered=True)
    if _expected() == "wgmma_shift":
        assert [p.zero_out for p in plans] == [tile[2] > 128]


@pytest.mark.parametrize("call", ["inline", "registered", "one SM"])
@pytest.mark.parametrize("sets", [2, 3, 16])
@pytest.mark.parametrize(
    ("shape", "strides"),
    [((2, 96, 12, 11), (1, 1)), ((2, 128, 13, 12), (2, 2)), ((1, 512, 7, 7), (1, 1))],
)
def test_channels_last_gathered_in_sets(
    sets: int,
    shape: tuple[int, int, int, int],
    strides: tuple[int, int],
    call: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A tile's (N, H, W, C) run copied in sets of channel chunks, the MMAs on each set's
    chunks waiting for that set's copies alone: uneven sets (three chunks in two), a set a
    chunk, more sets than a wait can leave pending (16 chunks: it waits for all), on unit
    strides and on phase planes; exact in an unregistered call (its GEMM gathering its first
    tile before its filter's stages), in a registered operator's two calls (the filter kept:
    its stages first) and on one SM (each CTA gathering tile after tile)."""
    import cupy

    from dmlserve.kernels import reference

    conv, gemm = launcher("convolution_integer"), launcher("_convolution_integer_gemm")
    plans = _gemm_plans(monkeypatch)
    monkeypatch.setattr(gemm, "_nhwc_gather_sets", lambda planes: sets)
    if call == "one SM":
        monkeypatch.setattr(gemm, "sm_count", lambda: 1)
    gemm._plan.cache_clear()
    rng = np.random.default_rng([*shape, sets, len(call), 64])
    x = random_int8(rng, shape, np.uint8)
    w = random_int8(rng, (40, shape[1], 3, 3), np.int8)
    zw = zero_points(rng, "channel", np.int8, 40)
    options = conv.Options(gather=True, split_k=1, tune=False)
    geometry = (strides, (1, 1), (1, 1), (1, 1), 1)
    try:
        if call == "registered":
            want = reference.convolution_integer(x, w, 77, zw, *geometry)
            xd = channels_last(16)(cupy.asarray(x))
            cache: dict[Any, Any] = {}
            for _ in range(2):
                ran: list[Any] = []
                got = conv.convolution_integer(
                    xd, cupy.asarray(w), 77, zw, *geometry, options, ran, filter_cache=cache
                )
                np.testing.assert_array_equal(cupy.asnumpy(got), want)
                assert ran == [_expected(gathered=True)]
        else:
            what = check(x, w, 77, zw, *geometry, view=channels_last(16), options=options)
            assert what == _expected(gathered=True)
    finally:
        gemm._plan.cache_clear()
    if _expected() == "wgmma_shift":
        # (gather_sets, input_first): the kernel takes at most that many sets
        assert {int(plan.gemm_args[-2]) for plan in plans} == {sets}


@pytest.mark.parametrize(
    ("spare", "offset"),
    [(8, 0), (0, 8), (0, 4)],
    ids=["pixels-8-bytes-apart", "8-bytes-in", "4-bytes-in"],
)
def test_channels_last_off_16_bytes_is_transformed(
    spare: int, offset: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(N, H, W, C) pixels whose channel blocks do not all lie on 16 bytes take the transform
    (exact), asked to gather or not."""
    plans = _gemm_plans(monkeypatch)
    rng = np.random.default_rng([spare, offset, 63])
    x = random_int8(rng, (2, 64, 10, 9), np.uint8)
    w = random_int8(rng, (40, 64, 3, 3), np.int8)
    zw = zero_points(rng, "channel", np.int8, 40)
    geometry = ((1, 1), (1, 1), (1, 1), (1, 1), 1)
    view = channels_last(spare, offset)
    what = check(x, w, 77, zw, *geometry, view=view, options=_options(gather=True))
    assert what == _expected()
    if _expected() == "wgmma_shift":
        (plan,) = plans
        assert plan.xn_shape is not None


def test_sums_past_32_bits() -> None:
    """K = 9 x 4096 with sums past 2^31 (checked in int64): they wrap modulo 2^32 exactly as
    the reference's."""
    rng = np.random.default_rng(9)
    x = rng.integers(250, 256, (1, 4096, 4, 4)).astype(np.uint8)
    w = rng.integers(-128, -124, (64, 4096, 3, 3)).astype(np.int8)
    zw = np.full(64, 127, np.int32)
    geometry = ((1, 1), (1, 1), (1, 1), (1, 1), 1)
    xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (1, 1), (1, 1)))  # z_x = 0
    center = xp[0, :, 1:4, 1:4].reshape(-1) @ (w.astype(np.int64) - 127).reshape(64, -1).T
    assert np.abs(center).max() > 2**31  # an interior pixel's sum really wraps
    assert check(x, w, 0, zw, *geometry, options=_options()) == _expected()


@pytest.mark.parametrize("width", [23, 24])
@pytest.mark.parametrize("tile", _tiles())
def test_persistent_ctas(
    tile: tuple[int, int, int], width: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With one SM, every CTA runs many tiles in turn: the next tile's loads overlap this one's
    epilogue, its first MMA discards the last tile's sums, and the column offsets and sums in
    shared memory are rewritten tile after tile, and so is the run the CTA gathers from the
    NCHW input (17 x 24 planes word by word, 17 x 23 ones from the aligned words around each)."""
    gemm = launcher("_convolution_integer_gemm")
    rng = np.random.default_rng([*tile, width])
    x = random_int8(rng, (3, 64, 17, width), np.int8)
    w = random_int8(rng, (136, 64, 3, 3), np.uint8)
    zw = zero_points(rng, "channel", np.uint8, 136)
    gemm._plan.cache_clear()  # plans made with the real SM count would be reused
    monkeypatch.setattr(gemm, "sm_count", lambda: 1)
    try:
        what = check(x, w, -9, zw, (1, 1), (1, 1), (1, 1), (1, 1), 1, options=_options(tile))
    finally:
        gemm._plan.cache_clear()
    assert what == _expected(gathered=True)


@pytest.mark.parametrize("gather", [True, False])
@pytest.mark.parametrize(
    ("shape", "m", "groups", "splits"),
    [
        ((2, 128, 10, 12), 64, 1, 2),  # four chunks, two a split
        ((2, 128, 10, 12), 136, 1, 3),  # splits of 1, 1 and 2 chunks; a partial 64-row block
        ((3, 96, 8, 8), 40, 1, 2),  # three chunks: 1 and 2
        ((1, 256, 7, 8), 72, 1, 4),  # eight chunks, tiles far fewer than SMs
        ((2, 256, 10, 12), 64, 2, 2),  # two groups of 128 channels, four chunks each
        ((2, 84, 8, 8), 40, 1, 3),  # 84 channels: the last split's chunk half padding
        ((2, 168, 8, 8), 40, 2, 3),  # the same in each of two groups
    ],
)
def test_split_k(
    shape: tuple[int, int, int, int], m: int, groups: int, splits: int, gather: bool
) -> None:
    """The channel chunks split over CTAs whose partial sums (with the bias once, the z_w term
    per split) add up: in shared memory where the splits run as a cluster (tiles of up to 128
    pixels), else in the zeroed output."""
    rng = np.random.default_rng([*shape, m, splits])
    x = random_int8(rng, shape, np.uint8)
    w = random_int8(rng, (m, shape[1] // groups, 3, 3), np.int8)
    conv = launcher("convolution_integer")
    options = conv.Options(gather=gather, split_k=splits)
    for zp_mode in ("none", "channel"):
        zx = random_zero_point(rng, np.uint8)
        zw = zero_points(rng, zp_mode, np.int8, m)
        what = check(x, w, zx, zw, (1, 1), (1, 1), (1, 1), (1, 1), groups, options=options)
        assert what == _expected(gather)


@pytest.mark.parametrize(("tile", "in_cluster"), [((2, 1, 128), True), ((2, 1, 224), False)])
def test_split_k_in_a_cluster_or_by_atomic_adds(
    tile: tuple[int, int, int], in_cluster: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A K split on tiles of up to 128 pixels runs a tile's splits as a cluster, their sums
    added in shared memory (no zeroed output); on wider tiles the sums meet in the zeroed output
    by atomic adds. Both exact, with and without per-channel filter zero points."""
    plans = _gemm_plans(monkeypatch)
    rng = np.random.default_rng([*tile, 17])
    x = random_int8(rng, (2, 128, 12, 14), np.uint8)
    w = random_int8(rng, (128, 128, 3, 3), np.int8)
    options = launcher("convolution_integer").Options(shifted=tile, gather=True, split_k=2)
    for zp_mode in ("none", "channel"):
        zw = zero_points(rng, zp_mode, np.int8, 128)
        what = check(x, w, 131, zw, (1, 1), (1, 1), (1, 1), (1, 1), 1, options=options)
        assert what == _expected(gathered=True)
    if _expected() == "wgmma_shift":
        assert {p.zero_out for p in plans} == {not in_cluster}


@pytest.mark.parametrize("splits", [2, 3])
def test_split_k_persistent(splits: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """With one SM counted (two CTAs of the 64 x 128 tile; a grid of one cluster, of two or
    three CTAs), a CTA runs many (tile, split) pairs in turn, each split's chunk count its own,
    the other CTAs' chunk orders rotated."""
    gemm = launcher("_convolution_integer_gemm")
    rng = np.random.default_rng([splits, 11])
    x = random_int8(rng, (2, 160, 9, 12), np.int8)  # five chunks
    w = random_int8(rng, (100, 160, 3, 3), np.uint8)
    zw = zero_points(rng, "channel", np.uint8, 100)
    options = launcher("convolution_integer").Options(shifted=(1, 1, 128), split_k=splits)
    gemm._plan.cache_clear()  # plans made with the real SM count would be reused
    monkeypatch.setattr(gemm, "sm_count", lambda: 1)
    try:
        what = check(x, w, -9, zw, (1, 1), (1, 1), (1, 1), (1, 1), 1, options=options)
    finally:
        gemm._plan.cache_clear()
    assert what == _expected(gathered=True)


def test_split_k_sums_past_32_bits() -> None:
    """Sums past 2^31 (K = 9 x 4096), split in four: the partial sums add up modulo 2^32 as
    the reference's do."""
    rng = np.random.default_rng(10)
    x = rng.integers(250, 256, (1, 4096, 4, 4)).astype(np.uint8)
    w = rng.integers(-128, -124, (64, 4096, 3, 3)).astype(np.int8)
    zw = np.full(64, 127, np.int32)
    xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (1, 1), (1, 1)))  # z_x = 0
    center = xp[0, :, 1:4, 1:4].reshape(-1) @ (w.astype(np.int64) - 127).reshape(64, -1).T
    assert np.abs(center).max() > 2**31  # an interior pixel's sum really wraps
    options = launcher("convolution_integer").Options(split_k=4)
    what = check(x, w, 0, zw, (1, 1), (1, 1), (1, 1), (1, 1), 1, options=options)
    assert what == _expected()  # the run of 4096 channels does not fit shared memory


def test_split_k_beyond_the_chunks_takes_the_other_gemm() -> None:
    rng = np.random.default_rng(12)
    x = random_int8(rng, (1, 64, 6, 6), np.uint8)  # two chunks
    w = random_int8(rng, (32, 64, 3, 3), np.int8)
    options = launcher("convolution_integer").Options(split_k=3)
    what = check(x, w, 128, np.zeros(32, np.int32), (1, 1), (1, 1), (1, 1), (1, 1), 1,
                 options=options)  # fmt: skip
    assert what in ("wgmma", "mma_sync")


@pytest.mark.parametrize(
    ("c", "strides", "k", "gather"),
    [
        (48, (1, 1), (3, 3), True),
        (64, (2, 2), (3, 3), False),  # strides of 2 on a transformed input
        (64, (3, 3), (3, 3), True),
        (64, (1, 1), (2, 2), True),
        (64, (1, 1), (5, 5), True),
    ],
)
def test_shapes_that_take_the_other_gemm(
    c: int, strides: tuple[int, int], k: Any, gather: bool
) -> None:
    """Channels per group not a multiple of 32, strides of 2 on the transformed input or past
    2, other tap counts: the tap-by-tap GEMM."""
    rng = np.random.default_rng(c + strides[0] + k[0])
    x = random_int8(rng, (2, c, 10, 10), np.uint8)
    w = random_int8(rng, (32, c, *k), np.int8)
    zw = np.zeros(32, np.int32)
    what = check(x, w, 128, zw, strides, (1, 1), (1, 1), (1, 1), 1, options=_options(gather=gather))
    assert what in ("wgmma", "mma_sync")


@pytest.mark.parametrize("tile", _tiles())
@pytest.mark.parametrize(
    ("shape", "m", "strides", "dilations", "start", "end", "groups"),
    [
        ((2, 32, 28, 28), 128, (2, 2), (1, 1), (1, 1), (1, 1), 1),  # ResNet-like
        ((3, 32, 11, 9), 40, (2, 2), (1, 1), (1, 0), (0, 2), 1),  # odd sizes, uneven pads
        ((2, 96, 13, 10), 72, (2, 1), (1, 2), (2, 1), (1, 3), 1),  # rows strided, a dilation
        ((2, 64, 9, 14), 48, (1, 2), (2, 1), (0, 1), (3, 1), 1),  # columns strided
        ((2, 64, 12, 12), 200, (2, 2), (2, 2), (2, 2), (2, 2), 2),  # even dilations, groups
        ((12, 32, 5, 5), 32, (2, 2), (1, 1), (1, 1), (1, 1), 1),  # runs across many images
        ((1, 32, 5, 6), 32, (2, 2), (1, 1), (4, 4), (4, 4), 1),  # pads wider than the image
    ],
)
def test_strides_of_two(
    tile: tuple[int, int, int],
    shape: tuple[int, int, int, int],
    m: int,
    strides: tuple[int, int],
    dilations: tuple[int, int],
    start: tuple[int, int],
    end: tuple[int, int],
    groups: int,
) -> None:
    """Strides of 2, the input read where it lies: each tap a shift within one of the padded
    input's phase planes, every tile (the first two shapes' runs fit each tile's shared memory
    with one channel chunk), both zero-point forms of the filter."""
    rng = np.random.default_rng([*shape, m, *strides, *tile])
    x = random_int8(rng, shape, np.uint8)
    w = random_int8(rng, (m, shape[1] // groups, 3, 3), np.int8)
    geometry = (strides, dilations, start, end, groups)
    for zw in (np.zeros(m, np.int32), rng.integers(-128, 128, m).astype(np.int32)):
        what = check(x, w, 131, zw, *geometry, options=_options(tile))
        assert what == _expected(gathered=True)


@pytest.mark.parametrize(("xt", "wt"), PAIRS)
@pytest.mark.parametrize("split", [1, 2, 3])
def test_strides_of_two_split_and_persistent(
    xt: Any, wt: Any, split: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Strides of 2 with K split (three chunks: splits of one and two), every signedness pair,
    on one SM: each CTA gathers run after run of phase planes."""
    gemm = launcher("_convolution_integer_gemm")
    rng = np.random.default_rng([PAIRS.index((xt, wt)), split, 14])
    x = random_int8(rng, (3, 96, 15, 13), xt)
    w = random_int8(rng, (72, 96, 3, 3), wt)
    zw = zero_points(rng, "channel", wt, 72)
    options = launcher("convolution_integer").Options(gather=True, split_k=split)
    gemm._plan.cache_clear()  # plans made with the real SM count would be reused
    monkeypatch.setattr(gemm, "sm_count", lambda: 1)
    try:
        geometry = ((2, 2), (1, 1), (1, 1), (1, 1), 1)
        what = check(x, w, random_zero_point(rng, xt), zw, *geometry, options=options)
    finally:
        gemm._plan.cache_clear()
    assert what == _expected(gathered=True)


def test_strided_registration_may_keep_the_tap_by_tap_gemm(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With strides of 2 the plans timed include the tap-by-tap GEMM on the transformed input,
    and a registration keeps it where it is the fastest (a made-up clock); its second call
    times nothing."""
    import cupy

    from dmlserve.kernels import reference

    if _expected() != "wgmma_shift":
        pytest.skip("the shifted-window GEMM runs on compute capability 9.0 only")
    gemm, conv = launcher("_convolution_integer_gemm"), launcher("convolution_integer")
    timed: list[str] = []

    def clock(plan: Any, *args: Any) -> float:
        timed.append(plan.kernel)
        return 1.0 if plan.kernel == "wgmma" else 2.0

    monkeypatch.setattr(gemm, "_plan_ms", clock)
    rng = np.random.default_rng(25)
    w = cupy.asarray(random_int8(rng, (64, 64, 3, 3), np.int8))
    x = random_int8(rng, (2, 64, 12, 12), np.uint8)
    cache: dict[Any, Any] = {}
    geometry = ((2, 2), (1, 1), (1, 1), (1, 1), 1)
    zw = np.zeros(64, np.int32)
    want = reference.convolution_integer(x, cupy.asnumpy(w), 9, zw, *geometry)
    counts = []
    for _ in range(2):
        ran: list[Any] = []
        got = conv.convolution_integer(
            cupy.asarray(x), w, 9, zw, *geometry, conv.Options(), ran, filter_cache=cache
        )
        np.testing.assert_array_equal(cupy.asnumpy(got), want)
        assert ran == ["wgmma"]
        counts.append(len(timed))
    assert "wgmma" in timed and "wgmma_shift_gather" in timed
    assert counts[0] == counts[1]


def test_option_keeps_the_tap_by_tap_gemm() -> None:
    rng = np.random.default_rng(6)
    x = random_int8(rng, (2, 64, 9, 9), np.uint8)
    w = random_int8(rng, (32, 64, 3, 3), np.int8)
    options = launcher("convolution_integer").Options(shifted=False)
    what = check(x, w, 128, np.zeros(32, np.int32), (1, 1), (1, 1), (1, 1), (1, 1), 1,
                 options=options)  # fmt: skip
    assert what in ("wgmma", "mma_sync")


def test_unknown_forced_tile_is_refused() -> None:
    rng = np.random.default_rng(8)
    x = random_int8(rng, (1, 64, 6, 6), np.uint8)
    w = random_int8(rng, (32, 64, 3, 3), np.int8)
    if _expected() != "wgmma_shift":
        pytest.skip("the shifted-window GEMM runs on compute capability 9.0 only")
    with pytest.raises(ValueError, match="shifted tile"):
        check(x, w, 128, np.zeros(32, np.int32), (1, 1), (1, 1), (1, 1), (1, 1), 1,
              options=_options((3, 1, 64)))  # fmt: skip


def test_constant_filter_kept_per_layout() -> None:
    """A registered filter keeps one prepared form per GEMM layout: calls whose batch picks a
    64-row tile (1 image) and calls that pick a 128-row tile (8 images of 28 x 28) each
    prepare theirs once and reuse it (the model's plans, untimed)."""
    import cupy

    from dmlserve.kernels import reference

    conv = launcher("convolution_integer")
    rng = np.random.default_rng(12)
    w = random_int8(rng, (128, 64, 3, 3), np.int8)
    zw = rng.integers(-128, 128, 128).astype(np.int32)
    w_dev = cupy.asarray(w)
    cache: dict[Any, Any] = {}
    geometry = ((1, 1), (1, 1), (1, 1), (1, 1), 1)
    kept: dict[Any, Any] = {}
    for n in (1, 8, 1, 8):
        x = random_int8(rng, (n, 64, 28, 28), np.uint8)
        ran: list[Any] = []
        got = conv.convolution_integer(
            cupy.asarray(x), w_dev, 5, zw, *geometry, conv.Options(tune=False), ran,
            filter_cache=cache,
        )  # fmt: skip
        want = reference.convolution_integer(x, w, 5, zw, *geometry)
        np.testing.assert_array_equal(cupy.asnumpy(got), want)
        assert ran == [_expected(gathered=True)]
        for slot, entry in cache.items():
            assert kept.setdefault(slot, entry[1][0]) is entry[1][0]  # made once, then reused
    if _expected() == "wgmma_shift":
        assert len(cache) == 2  # the two layouts


def _registered(
    conv: Any, x: np.ndarray, w: Any, zx: int, zw: np.ndarray, cache: dict[Any, Any]
) -> str:
    """One call of a registered operator (its filter `w` on the device, kept in `cache`),
    checked against the reference; returns what ran."""
    import cupy

    from dmlserve.kernels import reference

    geometry = ((1, 1), (1, 1), (1, 1), (1, 1), 1)
    ran: list[Any] = []
    got = conv.convolution_integer(
        cupy.asarray(x), w, zx, zw, *geometry, conv.Options(), ran, filter_cache=cache
    )
    want = reference.convolution_integer(x, cupy.asnumpy(w), zx, zw, *geometry)
    np.testing.assert_array_equal(cupy.asnumpy(got), want)
    assert isinstance(ran[0], str)
    return ran[0]


def test_registered_calls_keep_the_fastest_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    """A constant filter's first call of a shape times the shifted-window GEMM's plans and keeps
    the fastest; later calls of the shape, whatever their input's zero point, time nothing;
    past `_TUNED_SHAPES` shapes the model's plan runs untimed. The clock is made up: the
    transformed input with K split is the fastest."""
    import cupy

    if _expected() != "wgmma_shift":
        pytest.skip("the shifted-window GEMM runs on compute capability 9.0 only")
    gemm, conv = launcher("_convolution_integer_gemm"), launcher("convolution_integer")
    timed: list[Any] = []

    def clock(plan: Any, *args: Any) -> float:
        timed.append(plan)
        return 1.0 if plan.kernel == "wgmma_shift" and plan.zero_out else 2.0

    monkeypatch.setattr(gemm, "_plan_ms", clock)
    monkeypatch.setattr(gemm, "_TUNED_SHAPES", 2)
    rng = np.random.default_rng(21)
    w = cupy.asarray(random_int8(rng, (72, 128, 3, 3), np.int8))  # four channel chunks
    zw = zero_points(rng, "channel", np.int8, 72)
    cache: dict[Any, Any] = {}
    calls = ((2, 7, True), (2, 7, False), (2, 200, False), (1, 7, True), (1, 9, False))
    for n, zx, timing in (*calls, (3, 7, False)):
        x = random_int8(rng, (n, 128, 10, 12), np.uint8)
        del timed[:]
        what = _registered(conv, x, w, zx, zw, cache)
        assert bool(timed) == timing
        if timing:  # every tile, input read in place or transformed, unsplit and split
            assert {p.kernel for p in timed} == {"wgmma_shift", "wgmma_shift_gather"}
            assert {p.zero_out for p in timed} == {True, False}
        if n < 3:  # the made-up fastest kept
            assert what == "wgmma_shift"
        else:  # past the limit: the model's plan
            model: list[Any] = []
            geometry = ((1, 1), (1, 1), (1, 1), (1, 1), 1)
            options = conv.Options(tune=False)
            conv.convolution_integer(cupy.asarray(x), w, zx, zw, *geometry, options, model)
            assert [what] == model
    assert len(cache["tuned"]) == 2


@pytest.mark.parametrize(("xt", "wt"), [PAIRS[0], PAIRS[1]])
def test_every_plan_a_registration_may_keep(
    xt: Any, wt: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each plan the timing may keep is exact: a made-up clock makes each the fastest in turn
    (a fresh registration each), over a shape with a partial 64-row block and three chunks."""
    import cupy

    if _expected() != "wgmma_shift":
        pytest.skip("the shifted-window GEMM runs on compute capability 9.0 only")
    gemm, conv = launcher("_convolution_integer_gemm"), launcher("convolution_integer")
    rng = np.random.default_rng([PAIRS.index((xt, wt)), 22])
    x = random_int8(rng, (2, 96, 9, 12), xt)
    w = cupy.asarray(random_int8(rng, (136, 96, 3, 3), wt))
    zw = zero_points(rng, "channel", wt, 136)
    zx = random_zero_point(rng, xt)
    first: dict[Any, Any] = {}
    keys: list[Any] = []
    timing = gemm._tuned

    def tuned(key: Any, *args: Any) -> Any:
        keys.append(key)
        return timing(key, *args)

    monkeypatch.setattr(gemm, "_tuned", tuned)
    monkeypatch.setattr(gemm, "_plan_ms", lambda plan, *args: 1.0)  # the model's plan kept
    _registered(conv, x, w, zx, zw, first)
    (key,) = keys
    plans = list(gemm._shift_candidates(key, gemm._plan(*key, None, True, None, None, None)))
    assert len(plans) > 10
    (shape,) = first["tuned"]
    for choice, target in plans:
        # only the kept plan runs, after the timing: the call's result is its
        def clock(plan: Any, *args: Any, target: Any = target) -> float:
            return 0.0 if plan == target else 1.0

        monkeypatch.setattr(gemm, "_plan_ms", clock)
        cache: dict[Any, Any] = {}
        assert _registered(conv, x, w, zx, zw, cache) == target.kernel
        assert cache["tuned"] == {shape: choice}


def test_registered_call_timed_on_the_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real clock: the first call times its plans on the GPU, keeps one and returns its
    exact result; the second call times nothing and runs the kept plan."""
    import cupy

    gemm, conv = launcher("_convolution_integer_gemm"), launcher("convolution_integer")
    timed: list[Any] = []
    real = gemm._plan_ms

    def counted(plan: Any, *args: Any) -> float:
        timed.append(plan)
        ms: float = real(plan, *args)
        return ms

    monkeypatch.setattr(gemm, "_plan_ms", counted)
    monkeypatch.setattr(gemm, "_TUNE_SECONDS", math.inf)  # every plan, however slow the GPU
    rng = np.random.default_rng(23)
    w = cupy.asarray(random_int8(rng, (64, 96, 3, 3), np.uint8))
    zw = zero_points(rng, "tensor", np.uint8, 64)
    cache: dict[Any, Any] = {}
    x = random_int8(rng, (2, 96, 8, 10), np.int8)
    what = [_registered(conv, x, w, -3, zw, cache)]
    first = len(timed)
    what.append(_registered(conv, x, w, -3, zw, cache))
    assert what[0] == what[1] in (_expected(True), _expected(False))
    if _expected() != "mma_sync":
        assert first > 10 and len(timed) == first


def test_plan_timing_stops_at_its_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past `_TUNE_SECONDS` of timing no further plan is timed: with no time at all, the model's
    plan alone is, and kept."""
    import cupy

    gemm, conv = launcher("_convolution_integer_gemm"), launcher("convolution_integer")
    timed: list[Any] = []

    def clock(plan: Any, *args: Any) -> float:
        timed.append(plan)
        return 1.0

    monkeypatch.setattr(gemm, "_plan_ms", clock)
    monkeypatch.setattr(gemm, "_TUNE_SECONDS", -1.0)
    rng = np.random.default_rng(24)
    w = cupy.asarray(random_int8(rng, (64, 64, 3, 3), np.int8))
    cache: dict[Any, Any] = {}
    x = random_int8(rng, (2, 64, 8, 8), np.uint8)
    what = _registered(conv, x, w, 128, np.zeros(64, np.int32), cache)
    if _expected() != "mma_sync":
        assert [p.kernel for p in timed] == [what] and list(cache["tuned"].values()) == [None]


@pytest.mark.parametrize(
    ("layout", "c"),
    [("aligned", 32), ("aligned", 512), ("misaligned", 32), ("backwards", 32), ("unstaged", 32)],
)
def test_unregistered_filter_prep_beside_the_gemm(
    layout: str, c: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unregistered call's GEMM starts under its filter prep, whose small blocks then share
    the SMs with it: more output channels (blocks) than SMs, the filter's rows packed and
    16-byte aligned (copied in together; 32 channels: fewer copies and channel words than a
    block's threads, 512: more), packed from an odd address, not packed (channels backwards),
    or not staged in shared memory."""
    from dmlserve.kernels.cupy_backend._common import sm_count

    if _expected() == "mma_sync":
        pytest.skip("the shifted-window GEMM runs on compute capability 9.0 only")
    gemm = launcher("_convolution_integer_gemm")
    if layout == "unstaged":
        monkeypatch.setattr(gemm, "_PREP_W_STAGED", 0)
    preps: list[Any] = []  # the filter preps the plans made beside their GEMMs
    made = gemm._preps

    def record(*args: Any) -> Any:
        launches = made(*args)
        if len(args) > 7 and args[7] is not None:
            preps.append(launches[0])
        return launches

    monkeypatch.setattr(gemm, "_preps", record)
    gemm._plan.cache_clear()  # plans made with the real constant would be reused
    rng = np.random.default_rng([len(layout), c])
    m = 4 * sm_count() + 5
    shape = (m, c, 3, 3)
    x = random_int8(rng, (2, c, 8, 8), np.uint8)
    if layout == "misaligned":  # the filter one byte into its buffer
        w = random_int8(rng, (math.prod(shape) + 1,), np.int8)

        def w_view(a: Any) -> Any:
            return a[1:].reshape(shape)

    else:
        w = random_int8(rng, shape, np.int8)

        def w_view(a: Any) -> Any:
            return a[:, ::-1] if layout == "backwards" else a

    zw = rng.integers(-128, 128, m).astype(np.int32)
    geometry = ((1, 1), (1, 1), (1, 1), (1, 1), 1)
    try:
        what = check(x, w, 3, zw, *geometry, w_view=w_view, options=_options())
    finally:
        gemm._plan.cache_clear()
    assert what == _expected(True)
    (prep,) = preps
    assert prep.grid == (m, 1, 1) and prep.block == (gemm._PREP_W_THREADS_BESIDE, 1, 1)
    assert prep.shared_mem == (0 if layout == "unstaged" else c * 9)


@pytest.mark.parametrize(
    ("gather", "registered", "channels_last"),
    [(True, True, False), (False, True, False), (True, False, False), (True, True, True),
     (True, False, True)],
)  # fmt: skip
def test_calls_chained_through_memory(
    gather: bool, registered: bool, channels_last: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Calls queued back to back, each reading the bytes the call before it wrote (its int32
    output seen as the next call's uint8 input), checked once the whole chain has run. With its
    filter kept, the GEMM is launched to start while the grid ahead of it finishes, and must
    read no input before that grid is done; with the filter prepared by each call (input read
    where it lies), the GEMM starts under its own filter prep, gathers its input, and must read
    the prepared filter only once the prep is done (each such call has a filter of its own, so
    that an early read would see the call before's). K unsplit, so that no memset stands between
    the launches, and the chain queued behind a GPU-side wait, so that the calls meet on the GPU
    back to back however slowly the host issues them; the small images leave most SMs free, so
    a GEMM that read early would see its input or filter before it was written. Where the input
    is transformed, the transform runs between the GEMMs and the chain checks the results
    only. `channels_last`: each call reads the bytes as (N, H, W, C) pixels."""
    import cupy

    from dmlserve.kernels import reference

    if _expected() != "wgmma_shift":
        pytest.skip("the shifted-window GEMM runs on compute capability 9.0 only")
    conv = launcher("convolution_integer")
    dependent = dependent_launches(monkeypatch)
    rng = np.random.default_rng(31)
    n, c, hw, m = 4, 64, 14, 64
    calls = 8
    filters = [
        cupy.asarray(random_int8(rng, (m, c, 3, 3), np.int8))
        for _ in range(1 if registered else calls)
    ]
    zw = rng.integers(-128, 128, m).astype(np.int32)
    geometry = ((1, 1), (1, 1), (1, 1), (1, 1), 1)
    options = conv.Options(gather=gather, tune=False, split_k=1)
    cache: dict[Any, Any] | None = {} if registered else None
    used: list[Any] = []  # each call's filter
    inputs: list[Any] = []  # and the view of its input it read

    def call(x: Any) -> Any:
        ran: list[Any] = []
        w = filters[len(used) % len(filters)]
        used.append(w)
        if channels_last:
            x = x.reshape(n, hw, hw, c).transpose(0, 3, 1, 2)
        inputs.append(x)
        out = conv.convolution_integer(x, w, 7, zw, *geometry, options, ran, filter_cache=cache)
        assert ran == [_expected(gather)]
        return out

    first = cupy.asarray(random_int8(rng, (n, c, hw, hw), np.uint8))
    chain = chained_calls(call, first, calls)
    for x, (_, out), w in zip(inputs, chain, used, strict=True):
        want = reference.convolution_integer(cupy.asnumpy(x), cupy.asnumpy(w), 7, zw, *geometry)
        np.testing.assert_array_equal(cupy.asnumpy(out), want)
    # every call where the input is read in place (after its own filter prep, or with the
    # filter kept); else every call but the first (which prepared the filter)
    assert dependent == [True] * (8 if gather else 7)
